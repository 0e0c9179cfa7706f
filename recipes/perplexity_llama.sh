#!/usr/bin/env bash
# The Perplexity study's main run ("RL Training For Math Reasoning", 2025): an SFT warm-up on chain-of-thought
# solutions, then GRPO on the harder set from the SFT model, with lr 3e-7, no KL, temperature 1.0, accuracy
# reward only, and the study's <think>/<answer> training prompt (--template think_answer) for both stages.
# Targets: MATH-500 ~0.38 (Llama-3.1-8B-Instruct) -> ~0.60 after SFT -> ~0.70 after RL from the SFT model.
# Their SFT labels were QwQ-32B-preview / R1 traces on ORZ (not public as such): SFT_DATA defaults to
# OpenR1-Math-220k's worked solutions (problem/solution/answer; read with `datasets`, which setup.sh installs; the
# dry run checks it is there); a JSONL of your own traces (problem, solution, answer) or chat `messages` works the
# same. Their hard RL set was ORZ 57k; the hardest shipped sets stand in (RL_DATA=hub:... or a file to change it).
# SFT=0 skips the warm-up.
# Full SFT and RL of an 8B model need 16 B/param = 128 GB of weights, gradients and AdamW state: more than one
# 80 GB GPU (sft.py and train.py refuse at start). Run it on 8 GPUs, both stages sharded by FSDP2:
#   LAUNCHER="torchrun --nproc_per_node 8" bash recipes/perplexity_llama.sh
# (LAUNCHER applies to the sft.py, train.py and eval.py steps; on one GPU, --fsdp_cpu_offload 1 keeps the state
# in host memory, slowly, or train LoRA adapters instead.)
# Llama-3.1 is a GATED model: accept Meta's licence on https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct
# with your account, then log in on this machine (`hf auth login`, or export HF_TOKEN) before the first download;
# without both the first eval.py step fails with a 401/403 from the hub. This script notes when it finds no token.
# Usage: bash recipes/perplexity_llama.sh [--dry_run]
source "$(dirname "$0")/_common.sh"
MODEL=${MODEL:-meta-llama/Llama-3.1-8B-Instruct}
SFT_DATA=${SFT_DATA:-hub:open-r1/OpenR1-Math-220k:train}
RL_DATA=${RL_DATA:-math_train12k,aime_1983_2023}
OUT=out/perplexity_llama
if [ -z "${HF_TOKEN:-}" ] && [ ! -s "${HF_TOKEN_PATH:-${HF_HOME:-$HOME/.cache/huggingface}/token}" ]; then
  echo "recipe: note: $MODEL is gated and no Hugging Face token was found: accept its licence on its hub page," \
       "then \`hf auth login\` (or HF_TOKEN), unless the model is already in your cache" >&2
fi
stages() {
  run eval.py --model $MODEL --benchmarks math500 --k 4 --template boxed --temperature 0.6 --top_p 0.95 --max_tokens 4096 --out $OUT/eval_before
  if [ "${SFT:-1}" = 1 ]; then
    run sft.py --model $MODEL --out_dir $OUT/sft --train_data $SFT_DATA --template think_answer --messages_field "" --lr 1e-5 --warmup_steps 50 --min_lr_ratio 0.1 --batch_size 64 --max_steps 1500 --max_len 8192 --eval_data math500 --eval_every 200 --eval_temperature 0.7 --eval_top_p 0.95 --max_response_len 4096
    START="--init_from $OUT/sft/ckpt-001500 --model $MODEL"    # ~1 epoch of OpenR1-Math-220k's 94k default split (--model: what a dry run checks the context against while the checkpoint does not exist)
  else
    START="--model $MODEL"
  fi
  run train.py $START --out_dir $OUT/run --train_data $RL_DATA --template think_answer --lr 3e-7 --kl_coef 0 --temperature 1.0 --top_p 1.0 --batch_size 128 --group_size 8 --max_response_len 4096 --format_reward "" --eval_data math500 --eval_every 50 --eval_limit 500 --eval_temperature 0.7 --max_steps 500
  run eval.py --model $OUT/run/ckpt-000500/model --benchmarks math500 --k 4 --template boxed --temperature 0.6 --top_p 0.95 --max_tokens 4096 --out $OUT/eval_after
}
validate_then_run stages "$@"
