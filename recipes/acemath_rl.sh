#!/usr/bin/env bash
# AceMath-RL (NVIDIA, 2025): GRPO from DeepSeek-R1-Distill-Qwen-7B in four length stages.
# Targets (avg@64): AIME24 55.5 -> 69.0, AIME25 39.2 -> 53.6.
#   stage 1:  8K tokens,  8 rollouts, temperature 0.6, batch 128, KL 0.001, lr 3e-7
#   stage 2: 16K tokens, 16 rollouts, from stage 1
#   then:    measure pass rates (16 samples) and keep the hard problems (pass rate <= 6/16)
#   stage 3: 24K tokens on the hard problems
#   stage 4: 32K tokens, KL 0, temperature raised to 0.8 (1.0 in the paper's last phase)
# A 7B model needs several GPUs for full fine-tuning (distributed.py's docstring): run it as
#   LAUNCHER="torchrun --nproc_per_node 8" bash recipes/acemath_rl.sh
# Usage: bash recipes/acemath_rl.sh [--dry_run]      (PYTHON=... selects the interpreter)
source "$(dirname "$0")/_common.sh"
MODEL=deepseek-ai/DeepSeek-R1-Distill-Qwen-7B
OUT=out/acemath_rl
COMMON="--model $MODEL --template chat --batch_size 128 --lr 3e-7 --clip_low 0.2 --clip_high 0.2 --loss_agg token-mean --eval_data aime2024 --eval_every 50 --eval_k 4 --save_every 50"
stages() {
  run train.py $COMMON --out_dir $OUT/stage1 --max_response_len 8192 --group_size 8 --temperature 0.6 --kl_coef 0.001 --max_steps 400
  run train.py $COMMON --out_dir $OUT/stage2 --init_from $OUT/stage1/ckpt-000400 --max_response_len 16384 --group_size 16 --temperature 0.6 --kl_coef 0.001 --max_steps 300
  run eval.py --model $OUT/stage2/ckpt-000300/model --benchmarks math_train12k,aime_1983_2023 --k 16 --temperature 0.6 --top_p 1.0 --max_tokens 16384 --out $OUT/pass_rates --pass_rates $OUT/pass_rates.jsonl
  run data.py math_train12k,aime_1983_2023 --pass_rates $OUT/pass_rates.jsonl --low 0.0625 --high 0.375 --out $OUT/hard.jsonl
  run train.py $COMMON --out_dir $OUT/stage3 --init_from $OUT/stage2/ckpt-000300 --train_data $OUT/hard.jsonl --max_response_len 24576 --group_size 16 --temperature 0.6 --kl_coef 0.001 --max_steps 200
  run train.py $COMMON --out_dir $OUT/stage4 --init_from $OUT/stage3/ckpt-000200 --train_data $OUT/hard.jsonl --max_response_len 32768 --group_size 16 --temperature 0.8 --kl_coef 0 --max_steps 150
  run eval.py --model $OUT/stage4/ckpt-000150/model --preset seed --max_tokens 32768 --out $OUT/eval
}
validate_then_run stages "$@"
