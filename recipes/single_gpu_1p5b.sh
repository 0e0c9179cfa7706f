#!/usr/bin/env bash
# The recipe most users will run: one 80 GB GPU, DeepSeek-R1-Distill-Qwen-1.5B, DeepScaleR-style 8K -> 16K.
# DeepScaleR-1.5B-Preview (Agentica, 2025) reached AIME24 43.1 (pass@1) from 28.8 with 8K -> 16K -> 24K stages
# on 40K problems; here the shipped MATH 12k + AIME 1983-2023 stand in for their (unshipped) 40K set:
# add --train_data hub:agentica-org/DeepScaleR-Preview-Dataset:train to use theirs.
# Two optimizer steps per batch (DeepScaleR's verl config: ppo_mini_batch_size = half the train batch), so that
# the second is off-policy and the clip range (clip-higher 0.28) acts; strictly on-policy it changes nothing.
# Memory on one GPU: fp32 master weights + grads + AdamW (1.5B x 16 B = 24 GB), vLLM at 0.35 of the GPU.
# Usage: bash recipes/single_gpu_1p5b.sh [--dry_run]
source "$(dirname "$0")/_common.sh"
MODEL=deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B
OUT=out/single_gpu_1p5b
COMMON="--model $MODEL --batch_size 64 --group_size 8 --lr 1e-6 --kl_coef 0.001 --temperature 0.6 --clip_high 0.28 --mini_batches 2 --vllm_gpu_memory_utilization 0.35 --micro_batch_tokens 16384 --eval_data aime2024 --eval_k 4 --eval_every 50 --save_every 50"
stages() {
  run train.py $COMMON --out_dir $OUT/stage1 --max_response_len 8192 --max_steps 500
  run train.py $COMMON --out_dir $OUT/stage2 --init_from $OUT/stage1/ckpt-000500 --max_response_len 16384 --group_size 16 --batch_size 32 --max_steps 300
  run eval.py --model $OUT/stage2/ckpt-000300/model --preset seed --max_tokens 16384 --out $OUT/eval
}
validate_then_run stages "$@"
