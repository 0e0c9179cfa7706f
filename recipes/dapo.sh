#!/usr/bin/env bash
# DAPO (Yu et al. 2025, arXiv 2503.14476) on Qwen2.5-Math-7B, as its published configuration
# (verl-recipe dapo/run_dapo_qwen2.5_32b.sh and the paper's sec. 4.1, scaled to one node):
#   clip-higher 0.2 / 0.28, dynamic sampling (groups with all-equal accuracy dropped, up to 10 generation rounds),
#   soft overlong punishment over the last 4,096 of 20,480 tokens (factor 1), token-mean loss, no KL,
#   512 prompts x 16 responses per step in 16 optimizer steps of 32 prompts (train_prompt_mini_bsz=32: off-policy
#   after the first, which is where clip-higher and the dual clip c = 10 act), lr 1e-6, weight decay 0.1,
#   temperature 1.0.
# Qwen2.5-Math-7B's own context is 4,096 tokens, and 2,048 + 20,480 are asked for: like the DAPO authors (verl
# recipe/dapo/test_dapo_7b_math.sh: override_config.max_position_embeddings=32768, rope_theta unchanged) we raise
# max_position_embeddings to 32,768 with --config_overrides, in the trainer's model and in vLLM alike (saved with
# the checkpoints). The prompt template is DAPO's "Answer:" format, here the boxed instruction.
# A 7B model needs several GPUs: LAUNCHER="torchrun --nproc_per_node 8" bash recipes/dapo.sh
# Usage: bash recipes/dapo.sh [--dry_run]      (PYTHON=... selects the interpreter)
source "$(dirname "$0")/_common.sh"
MODEL=Qwen/Qwen2.5-Math-7B
OUT=out/dapo
stages() {
  run train.py --model $MODEL --config_overrides '{"max_position_embeddings":32768}' --template boxed --train_data math_train12k,aime_1983_2023 \
    --batch_size 512 --group_size 16 --max_response_len 20480 --max_prompt_len 2048 --temperature 1.0 \
    --lr 1e-6 --weight_decay 0.1 --grad_clip 1.0 --kl_coef 0 --clip_low 0.2 --clip_high 0.28 --clip_ratio_c 10 --mini_batches 16 --loss_agg token-mean \
    --dynamic_sampling 1 --max_sampling_rounds 10 --overlong_buffer_len 4096 --overlong_penalty 1.0 \
    --eval_data aime2024 --eval_k 32 --eval_temperature 1.0 --eval_top_p 0.7 --eval_every 20 --save_every 20 \
    --max_steps 400 --out_dir $OUT
}
validate_then_run stages "$@"
