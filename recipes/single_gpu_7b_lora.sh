#!/usr/bin/env bash
# A 7B policy on ONE 80 GB GPU with LoRA: AceMath-RL's stage 1 and 2 settings (recipes/acemath_rl.sh; from
# DeepSeek-R1-Distill-Qwen-7B: batch 128, 8 -> 16 rollouts, temperature 0.6, KL 0.001, 8K -> 16K tokens), with
# rank-32 adapters on every linear layer of attention and MLP (lora.py) instead of full fine-tuning, which needs
# 8 GPUs for a 7B model (18 bytes per parameter with its reference: 137 GB).
# Memory on the GPU (bench.py memory; checked by this recipe's dry run with bench.py memory --check):
#   trained state 16.5 GB = the frozen bf16 base 15.2 GB + fp32 adapters (81M), their gradients and AdamW moments
#   1.3 GB; the KL reference is the base with adapters off (no second model);
#   generating: + vLLM at 0.6 of the GPU (its bf16 weights 15.2 GB + KV cache) = 64.5 GB;
#   updating (vLLM asleep): + activations at 16K micro-batch tokens, checkpointed, ~7 GB = 23 GB.
# lr 3e-6: 10x AceMath-RL's full fine-tuning lr (3e-7), the rule of "LoRA Without Regret"; on our CPU task 3x was
# best and 10x within 1-3 points (README, LoRA study); not tuned at 7B. Checkpoints hold adapter/ (PEFT) and the merged model/ (eval.py loads it).
# Usage: bash recipes/single_gpu_7b_lora.sh [--dry_run]      (PYTHON=... selects the interpreter)
source "$(dirname "$0")/_common.sh"
MODEL=deepseek-ai/DeepSeek-R1-Distill-Qwen-7B
OUT=out/single_gpu_7b_lora
LORA="--lora_rank 32 --lora_alpha 32"
COMMON="--model $MODEL --template chat --batch_size 128 --lr 3e-6 $LORA --clip_low 0.2 --clip_high 0.2 --loss_agg token-mean --kl_coef 0.001 --temperature 0.6 --vllm_gpu_memory_utilization 0.6 --micro_batch_tokens 16384 --eval_data aime2024 --eval_every 50 --eval_k 4 --save_every 50"
stages() {
  run bench.py memory --check --like qwen2.5-7b --lora_rank 32 --gpu_gb 80 --vllm_share 0.6 --micro_batch_tokens 16384
  run train.py $COMMON --out_dir $OUT/stage1 --max_response_len 8192 --group_size 8 --max_steps 400
  run train.py $COMMON --out_dir $OUT/stage2 --init_from $OUT/stage1/ckpt-000400 --max_response_len 16384 --group_size 16 --max_steps 300
  run eval.py --model $OUT/stage2/ckpt-000300/model --preset seed --max_tokens 16384 --out $OUT/eval
}
validate_then_run stages "$@"
