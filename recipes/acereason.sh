#!/usr/bin/env bash
# AceReason-Nemotron (NVIDIA, 2025, arXiv 2505.16400): GRPO from DeepSeek-R1-Distill-Qwen-7B, math-only RL first,
# then code-only RL, on-policy (one update per batch), no KL term, response length raised stage by stage.
# Reported (abstract): math-only RL alone gives +14.6% AIME 2025 and +6.8% LiveCodeBench on the 7B model; the
# code-only stages then raise code benchmarks further with little or no loss on math.
#   math:  8K (8 rollouts) -> 16K (16 rollouts) -> 24K, on MATH 12k + AIME 1983-2023 (stand-ins for their data)
#   code:  24K -> 32K on competitive-programming problems with stdin and LeetCode-style tests, graded in the
#          sandbox as LiveCodeBench grades them (hub_sets.py): DeepCoder's training set from the hub (configs
#          lcbv5 + primeintellect + taco; its lcbv5 part is LiveCodeBench before 2024-08-01, so none of the v5
#          evaluation window), AceReason's code prompt (template chat_raw), evaluated on LiveCodeBench v5
#   eval:  the seed table (math, GPQA-Diamond, LiveCodeBench v5: eval.py --preset seed), then HumanEval + MBPP test
# Their own code data is not public; CODE_DATA=... selects another set (a local file in LiveCodeBench's or
# DeepCoder's layout, or ours with `tests`; with MBPP, use --template code). train.py warns about any training
# problem that is also in LiveCodeBench's window (--contamination_check, against --eval_data).
# Stage lengths, batch 128 and lr 1e-6 follow our reading of the paper; steps are placeholders to tune.
# A 7B model needs several GPUs: LAUNCHER="torchrun --nproc_per_node 8" bash recipes/acereason.sh
# Usage: bash recipes/acereason.sh [--dry_run]      (PYTHON=... selects the interpreter)
source "$(dirname "$0")/_common.sh"
MODEL=${MODEL:-deepseek-ai/DeepSeek-R1-Distill-Qwen-7B}
CODE_DATA=${CODE_DATA:-deepcoder}
OUT=out/acereason
COMMON="--model $MODEL --batch_size 128 --lr 1e-6 --kl_coef 0 --temperature 0.6 --clip_low 0.2 --clip_high 0.2 --loss_agg token-mean --save_every 50 --eval_every 50 --eval_k 4"
MATH="$COMMON --template chat --train_data math_train12k,aime_1983_2023 --eval_data aime2024"
CODE="$COMMON --template chat_raw --train_data $CODE_DATA --eval_data livecodebench --code_timeout_s 10"
stages() {
  run train.py $MATH --out_dir $OUT/math1 --max_response_len 8192 --group_size 8 --max_steps 400
  run train.py $MATH --init_from $OUT/math1/ckpt-000400 --out_dir $OUT/math2 --max_response_len 16384 --group_size 16 --max_steps 300
  run train.py $MATH --init_from $OUT/math2/ckpt-000300 --out_dir $OUT/math3 --max_response_len 24576 --group_size 16 --max_steps 200
  run train.py $CODE --init_from $OUT/math3/ckpt-000200 --out_dir $OUT/code1 --max_response_len 24576 --group_size 16 --max_steps 200
  run train.py $CODE --init_from $OUT/code1/ckpt-000200 --out_dir $OUT/code2 --max_response_len 32768 --group_size 16 --max_steps 100
  run eval.py --model $OUT/code2/ckpt-000100/model --preset seed --max_tokens 32768 --out $OUT/eval_seed
  run eval.py --model $OUT/code2/ckpt-000100/model --benchmarks humaneval,mbpp_test --k 4 --template code --max_tokens 32768 --out $OUT/eval_code
}
validate_then_run stages "$@"
