#!/usr/bin/env bash
# The Perplexity study's main run ("RL Training For Math Reasoning", 2025): GRPO on Llama-3.1-8B-Instruct
# (or their SFT-warmed model via MODEL=...), lr 3e-7, no KL, temperature 1.0, accuracy reward only, training
# prompt with <think>/<answer> tags. Target: MATH-500 from ~0.38 (instruct) / ~0.60 (SFT) towards ~0.70.
# Usage: bash recipes/perplexity_llama.sh [--dry_run]
source "$(dirname "$0")/_common.sh"
MODEL=${MODEL:-meta-llama/Llama-3.1-8B-Instruct}
OUT=out/perplexity_llama
stages() {
  run eval.py --model $MODEL --benchmarks math500 --k 4 --template boxed --temperature 0.6 --top_p 0.95 --max_tokens 4096 --out $OUT/eval_before
  run train.py --model $MODEL --out_dir $OUT/run --train_data math_train12k,gsm8k_train --template think_answer --lr 3e-7 --kl_coef 0 --temperature 1.0 --top_p 1.0 --batch_size 128 --group_size 8 --max_response_len 4096 --format_reward "" --eval_data math500 --eval_every 50 --eval_limit 500 --max_steps 500
  run eval.py --model $OUT/run/ckpt-000500/model --benchmarks math500 --k 4 --template boxed --temperature 0.6 --top_p 0.95 --max_tokens 4096 --out $OUT/eval_after
}
validate_then_run stages "$@"
