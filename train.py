"""Strictly on-policy GRPO for math reasoning, with vLLM colocated on the trainer's GPU.

Read top to bottom, this file is the algorithm (defaults: AceMath-RL stage 1). The loop in main() is:

    for step in range(max_steps):
        problems   = next(batcher)                                     # batch_size prompts      (data.py)
        samples    = engine.generate(prompts, n=group_size)            # vLLM, current weights   (rollout.py)
        rewards    = score_problems(responses, problems)               # 0/1: math or code tests (reward.py),
                                                                       # or --reward's weighted functions
        advantages = group_advantages(rewards, group_size)             # (r - mean) / std        (grpo.py)
        update_policy(...)   # loss = policy_loss(...) + kl_coef * KL(pi || pi_ref): one optimizer step over the
                             # whole batch (micro-batched, normalised over every response token of the batch)
        engine.update_weights(full_weights(policy))                    # the next rollout is on-policy
        log(step_metrics(...))

    python train.py                                   # GPU, the defaults below
    python train.py --resume out/run                  # continue a run exactly (its flags come from the checkpoint)
    python train.py --init_from out/run/ckpt-000500 --out_dir out/run2 --max_response_len 16384   # next stage
    torchrun --nproc_per_node 8 train.py ...          # FSDP2; one colocated vLLM engine per rank
    python train.py --lora_rank 32 --lr 3e-6 ...      # LoRA adapters on a frozen base (lora.py)

Ranks, FSDP2 and model loading live in distributed.py; checkpoints, resume and the metrics log in runs.py;
micro-batches in batching.py; what a step logs in metrics.py; periodic evaluation in eval.py.
"""
import argparse
import contextlib
import json
import math
import os
import random
import sys
import time
from pathlib import Path

import torch
from transformers import AutoTokenizer

import data
import eval as evaluation
import grpo
import logprobs
import lora
import preflight
from batching import collate, pad_rows, same_count_micro_batches
from code_reward import UNSAFE_FLAG, require_sandbox
from distributed import DIST_TIMEOUT_MIN, FSDP_PARAM_DTYPE, all_gather_objects, all_reduce, full_weights, \
    init_distributed, load_model, optimizer_step, shutdown_distributed
from metrics import MISMATCH_MEANS, progress_line, record_mismatch, step_metrics
from reward import RewardFunctionError, all_failed, check_reward_functions, check_rows, combine, component_metrics, \
    format_reward, needs_gold, parse_reward_spec, score_components, score_problems
from rollout import VLLM_RUNNER, make_engine
from runs import Logger, checkpoint_note, inherit_template, latest_checkpoint, load_checkpoint, refuse_used_out_dir, \
    resume_flags, save_checkpoint, start_stage

# ---- defaults (AceMath-RL stage 1; DeepSeek-R1-Distill-Qwen-1.5B) -------------------------------------------
MODEL = "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"
TRAIN_DATA = "math_train12k,aime_1983_2023"
TEMPLATE = "chat"
BATCH_SIZE = 128            # prompts per step (train_batch_size == ppo_mini_batch_size: one update per batch)
GROUP_SIZE = 8              # responses per prompt
MAX_RESPONSE_LEN = 8192     # tokens
TEMPERATURE = 0.6
LR = 3e-7                   # AdamW, constant
KL_COEF = 0.001             # k3 estimator; the reference model is loaded only when > 0
CLIP_LOW, CLIP_HIGH = 0.2, 0.2
LOSS_AGG = "token-mean"
GRAD_CLIP = 1.0
MICRO_BATCH_TOKENS = 32768  # tokens per forward/backward
EVAL_TEMPERATURE, EVAL_TOP_P = 0.6, 0.95   # periodic eval (AceMath-RL: 0.6 / 0.95; the Perplexity study: 0.7 / 0.95)

# Flags a resumed run may change: when to stop, save, evaluate and log, and memory knobs that leave the maths alone.
# Every other flag changes what is learned: on --resume it comes from the checkpoint, and giving it with another
# value is refused.
RUN_CONTROL_FLAGS = {"max_steps", "save_every", "keep_last", "eval_every", "eval_data", "eval_k", "eval_limit",
                     "eval_temperature", "eval_top_p", "eval_before_train", "wandb", "tensorboard",
                     "contamination_check", "micro_batch_tokens", "logprob_chunk", "gradient_checkpointing",
                     "vllm_gpu_memory_utilization", "enforce_eager", "fsdp_cpu_offload", "reward_workers",
                     "dist_timeout_min", "vllm_runner", "vllm_sleep_level"}


def build_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("model and data")
    g.add_argument("--model", default=MODEL, help="hub id or local HF directory of the starting policy")
    g.add_argument("--init_from", default=None, help="start a new stage from a checkpoint's weights (fresh "
                   "optimizer, these weights as KL reference, a new data order)")
    g.add_argument("--resume", default=None, help="continue the run in this out_dir exactly (its flags, data order "
                   "and KL reference come from its latest checkpoint; only run-control flags may change)")
    g.add_argument("--train_data", default=TRAIN_DATA, help="shipped name(s), hub set(s) (deepcoder[:config], "
                   "livecodebench[:window]: hub_sets.py), file(s) or hub:org/name[:config][:split] (data.parse_hub_spec), "
                   "comma-separated")
    g.add_argument("--problem_field", default="problem", help="column holding the problem (files / hub sets)")
    g.add_argument("--answer_field", default="answer", help="column holding the gold answer")
    g.add_argument("--template", default=TEMPLATE, help="prompt template: " + data.TEMPLATE_HELP)
    g.add_argument("--max_prompt_len", type=int, default=1024,
                   help="prompts longer than this (tokens), or than the engine's context, are skipped with a warning; "
                   "--max_prompt_len + --max_response_len must fit the model's context (checked before loading)")
    g.add_argument("--config_overrides", default="", help="JSON object of model config fields, applied to the "
                   "trainer's model and to vLLM alike, e.g. '{\"max_position_embeddings\": 32768}' (DAPO's context "
                   "extension for Qwen2.5-Math-7B; preflight.py); saved with the checkpoints")
    g.add_argument("--contamination_check", type=int, default=1, help="1: warn about training problems found in eval sets "
                   "(the shipped ones, and the hub sets of --eval_data)")
    g.add_argument("--data_seed", type=int, default=None, help="seed of this stage's data order and sampling "
                   "(default --seed + stage - 1: a new stage does not replay the last one's order)")
    g = p.add_argument_group("GRPO")
    g.add_argument("--batch_size", type=int, default=BATCH_SIZE, help="prompts per step")
    g.add_argument("--group_size", type=int, default=GROUP_SIZE, help="responses per prompt")
    g.add_argument("--max_response_len", type=int, default=MAX_RESPONSE_LEN,
                   help="max generated tokens per response; a response cut off here (truncated) gets reward 0")
    g.add_argument("--temperature", type=float, default=TEMPERATURE, help="sampling temperature (the trainer uses the same)")
    g.add_argument("--top_p", type=float, default=1.0, help="must be 1 in training (the trainer's log-probs are "
                   "those of the full distribution); --eval_top_p is free")
    g.add_argument("--lr", type=float, default=LR, help="AdamW learning rate (constant)")
    g.add_argument("--weight_decay", type=float, default=0.0, help="AdamW weight decay")
    g.add_argument("--kl_coef", type=float, default=KL_COEF, help="weight of KL(pi || pi_ref); 0 loads no reference model")
    g.add_argument("--kl_estimator", default="k3", choices=grpo.KL_ESTIMATORS,
                   help="per-token KL estimator (grpo.kl_penalty says what each one's gradient is)")
    g.add_argument("--clip_low", type=float, default=CLIP_LOW, help="lower clip range: ratio >= 1 - clip_low")
    g.add_argument("--clip_high", type=float, default=CLIP_HIGH, help="upper clip range (DAPO clip-higher: e.g. 0.28)")
    g.add_argument("--loss_agg", default=LOSS_AGG, choices=grpo.LOSS_AGG_MODES,
                   help="loss aggregation (grpo.aggregate); normalisers count every scored response of the batch")
    g.add_argument("--norm_std", type=int, default=1, help="1: divide advantages by the group std (GRPO); 0: Dr. GRPO")
    g.add_argument("--grad_clip", type=float, default=GRAD_CLIP, help="max gradient norm")
    g.add_argument("--entropy_coef", type=float, default=0.0, help="entropy bonus weight")
    g.add_argument("--mask_truncated", type=int, default=0, help="1: truncated responses leave the loss and its "
                   "normalisers (TRL's mask_truncated_completions); they still count (reward 0) in advantages")
    g.add_argument("--skip_equal_groups", type=int, default=1, help="1: do not forward groups whose rewards are "
                   "all equal (advantage 0): same policy gradient, less compute (no KL/entropy term from them)")
    g.add_argument("--tis_cap", type=float, default=0.0, help=">0: correct the sampler/trainer mismatch with "
                   "weights from r = pi_old / pi_vllm, bounded above by this (grpo.rollout_correction)")
    g.add_argument("--tis_mode", default="token_truncate", choices=grpo.ROLLOUT_CORRECTION_MODES, help="truncate or "
                   "mask r to [--tis_low, --tis_cap] per token (TIS, IcePop) or per sequence (geometric mean)")
    g.add_argument("--tis_low", type=float, default=0.0, help="lower bound of the ratio band (IcePop: 0.5)")
    g.add_argument("--loss_type", default="ppo", choices=grpo.LOSS_TYPES, help="ppo: token ratio, clipped; gspo: "
                   "sequence ratio (GSPO); cispo: clipped IS weight x log-prob (CISPO) (grpo.policy_loss). Strictly "
                   "on-policy (--ppo_epochs 1, --mini_batches 1) every ratio is 1 and all three, like the clip "
                   "range, give the same gradient: they differ only off-policy")
    g.add_argument("--clip_ratio_c", type=float, default=0.0, help=">1: PPO dual clipping (Ye et al. 2020; verl's "
                   "clip_ratio_c, 3.0 there): the loss of a negative-advantage token is at most -c * A. 0: off (TRL)")
    g.add_argument("--top_entropy_quantile", type=float, default=1.0, help="<1: train only on this top fraction of "
                   "the batch's tokens by entropy (80/20; grpo.high_entropy_mask; one extra no-grad pass)")
    g.add_argument("--dynamic_sampling", type=int, default=0, help="1: DAPO: drop groups whose correctness is all "
                   "equal, sample more until --batch_size groups (at most --max_sampling_rounds rounds)")
    g.add_argument("--max_sampling_rounds", type=int, default=3, help="cap on generation rounds per step")
    g.add_argument("--overlong_buffer_len", type=int, default=0, help=">0: DAPO's soft overlong punishment, "
                   "growing to --overlong_penalty over the last N tokens before --max_response_len")
    g.add_argument("--overlong_penalty", type=float, default=1.0, help="the largest overlong penalty")
    g.add_argument("--ppo_epochs", type=int, default=1, help="passes over each batch (>1 is off-policy)")
    g.add_argument("--mini_batches", type=int, default=1, help="optimizer steps per pass (>1 is off-policy)")
    g.add_argument("--format_reward", default="", choices=["", "strict", "loose"], help="add the <think>/<answer> format reward")
    g.add_argument("--reward", default="", help="the reward, when not the default (1 for a correct answer, math or "
                   "code by the row): comma-separated components, each NAME, FILE.py:FUNCTION or module:FUNCTION, "
                   "optionally :WEIGHT, e.g. 'math:1.0,my_rewards.py:brevity:0.1'. Built-ins: math, code, format, "
                   "format_loose; FUNCTION(response: str, row: dict) -> float runs in the grading workers "
                   "(--reward_timeout_s per call); the first component's score >= 1 counts as correct (README: "
                   "\"Your own task\"; reward.parse_reward_spec)")
    lora.add_flags(p.add_argument_group("LoRA (lora.py; a new stage may switch it on or off, a resume may not)"))
    g = p.add_argument_group("systems")
    g.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="training device")
    g.add_argument("--dtype", default=None, choices=["bfloat16", "float32"], help="default: bfloat16 on GPU, float32 on CPU")
    g.add_argument("--engine", default="vllm", choices=["vllm", "hf"], help="generation engine")
    g.add_argument("--micro_batch_tokens", type=int, default=MICRO_BATCH_TOKENS,
                   help="tokens per micro-batch (packed: real tokens; padded: count x longest)")
    g.add_argument("--packing", type=int, default=1, help="1: the trainer's passes run on real tokens only, sequences "
                   "packed into one row (batching.py, packing.py); 0: padded micro-batches")
    g.add_argument("--logprob_chunk", type=int, default=256, help="positions per chunk in logprobs.token_logprobs (memory ~ chunk x vocab)")
    g.add_argument("--gradient_checkpointing", type=int, default=1, help="1: recompute activations in backward")
    g.add_argument("--vllm_gpu_memory_utilization", type=float, default=0.5, help="vLLM's share of the GPU while awake")
    g.add_argument("--max_model_len", type=int, default=None, help="vLLM context (default max_prompt_len + max_response_len)")
    g.add_argument("--enforce_eager", type=int, default=0, help="1: no CUDA graphs in vLLM (less memory, slower)")
    g.add_argument("--fsdp_cpu_offload", type=int, default=0, help="1: keep FSDP2 parameters/grads/optimizer state in "
                   "host memory (also on one GPU: a one-rank FSDP2 group; distributed.py)")
    g.add_argument("--fsdp_param_dtype", default=FSDP_PARAM_DTYPE, choices=["auto", "float32", "bfloat16"],
                   help="FSDP2 mixed precision (several ranks or offload): bfloat16 gathers and computes with bf16 "
                   "copies of the fp32 master weights and reduces gradients in fp32 (verl); auto: --dtype's "
                   "(distributed.FSDP_PARAM_DTYPE says why, with the measurement)")
    g.add_argument("--dist_timeout_min", type=float, default=DIST_TIMEOUT_MIN,
                   help="collective timeout under torchrun (NCCL's default is 10: rank 0 alone reads a checkpoint, "
                   "long generations and eval shards finish unevenly)")
    g.add_argument("--vllm_runner", default=VLLM_RUNNER, choices=["v1", "v2", "auto"],
                   help="vLLM's model runner on GPU (rollout.py: the V2 runner keeps state in the memory a level-2 "
                   "sleep discards; `python bench.py gpu` checks which combination samples correctly)")
    g.add_argument("--vllm_sleep_level", type=int, default=2, choices=[1, 2], help="2: vLLM discards its weights "
                   "while the trainer runs (they are pushed anew every step); 1: keeps a host copy (needs host RAM "
                   "of the model's size, slower; the fallback when level 2 fails bench.py gpu's check)")
    g.add_argument("--tensor_parallel_size", type=int, default=1, help="vLLM tensor parallelism: groups of this many ranks generate together (multi-GPU)")
    g.add_argument("--reward_workers", type=int, default=2, help="grading processes")
    g.add_argument("--reward_timeout_s", type=float, default=5.0, help="hard limit per graded response")
    g.add_argument("--strict_answers", type=int, default=1, help="1: reward only explicit answers (box, answer phrase, "
                   "JSON field, ####); 0: also reward.py's free-text fallback (what eval.py uses)")
    g.add_argument("--code_timeout_s", type=float, default=None, help="hard limit per code response, all its tests "
                   "(default code_reward.DEFAULT_TIMEOUT_S)")
    g.add_argument(UNSAFE_FLAG, type=int, default=0, help="1: grade code with the rlimits fallback when the full sandbox "
                   "cannot run: programs can then read the datasets' tests and solutions (reward hacking), the network")
    g = p.add_argument_group("run control (may change on --resume)")
    g.add_argument("--out_dir", default="out/run", help="checkpoints, metrics.jsonl, samples.jsonl")
    g.add_argument("--max_steps", type=int, default=500, help="optimizer steps")
    g.add_argument("--save_every", type=int, default=50, help="checkpoint every N steps (0: only at the end)")
    g.add_argument("--keep_last", type=int, default=3, help="checkpoints to keep (0: all); each holds the fp32 "
                   "weights (4 bytes/parameter: 30 GB at 7B), the newest also AdamW's state (8 bytes/parameter); "
                   "the run prints the sizes at start (runs.py)")
    g.add_argument("--eval_every", type=int, default=50, help="evaluate every N steps (0: never)")
    g.add_argument("--eval_data", default="aime2024", help="eval benchmark(s) for periodic evaluation ('' for none)")
    g.add_argument("--eval_k", type=int, default=1, help="samples per eval problem")
    g.add_argument("--eval_limit", type=int, default=None, help="only the first N eval problems")
    g.add_argument("--eval_temperature", type=float, default=EVAL_TEMPERATURE,
                   help="sampling temperature of periodic eval (0: greedy)")
    g.add_argument("--eval_before_train", type=int, default=0,
                   help="1: also evaluate the starting weights, logged as step 0 (the baseline of the eval curve)")
    g.add_argument("--eval_top_p", type=float, default=EVAL_TOP_P, help="nucleus sampling of periodic eval")
    g.add_argument("--seed", type=int, default=0, help="seed for data order, sampling and init")
    g.add_argument("--wandb", default="", help="wandb project name (logs there too when set and installed)")
    g.add_argument("--tensorboard", type=int, default=0, help="1: also write TensorBoard logs to out_dir/tb")
    g.add_argument("--dry_run", action="store_true", help="check flags and paths, load nothing, exit")
    return p


def parse_args(argv=None):
    """Flags -> namespace, with the run's own flags on --resume and the stage's start and seed; validated before
    anything heavy is loaded."""
    parser = build_parser()
    args = parser.parse_args(argv)
    errors, later = [], []  # later: in a dry run, paths an earlier recipe stage will create are noted, not errors
    ckpt = latest_checkpoint(args.resume) if args.resume else None
    if args.resume and ckpt is None:
        (later if args.dry_run else errors).append(f"--resume {args.resume}: no checkpoint found there")
    if ckpt:
        resume_flags(args, build_parser, argv, ckpt, RUN_CONTROL_FLAGS, "train.py")
    errors += [message for bad, message in [
        (args.batch_size < 1 or args.group_size < 2, f"--batch_size {args.batch_size} must be >= 1 and --group_size "
         f"{args.group_size} >= 2 (a group of one response has advantage 0)"),
        (args.max_response_len < 1 or args.max_steps < 0 or args.micro_batch_tokens < 1,
         "--max_response_len, --micro_batch_tokens must be >= 1 and --max_steps >= 0"),
        (args.clip_low < 0 or (args.clip_low >= 1 and args.loss_type != "cispo") or args.clip_high < 0,
         "--clip_low must be in [0, 1) (CISPO: >= 1 removes the lower bound) and --clip_high >= 0"),
        (not 0 < args.top_entropy_quantile <= 1 or args.max_sampling_rounds < 1 or args.tis_low < 0,
         "--top_entropy_quantile must be in (0, 1], --max_sampling_rounds >= 1, --tis_low >= 0"),
        (not 0 <= args.overlong_buffer_len <= args.max_response_len, "--overlong_buffer_len must be in [0, --max_response_len]"),
        (args.kl_coef < 0 or args.entropy_coef < 0 or args.lr <= 0, "--kl_coef and --entropy_coef must be >= 0, --lr > 0"),
        (args.temperature <= 0 or args.eval_temperature < 0 or not 0 < args.eval_top_p <= 1,
         "--temperature must be > 0, --eval_temperature >= 0 (0: greedy), --eval_top_p in (0, 1]"),
        (args.top_p != 1.0, f"--top_p {args.top_p}: training rollouts must sample the full distribution (--top_p 1): "
         f"with a nucleus, vLLM's log-probs are those of the renormalised top-p set, which the trainer does not "
         f"compute, so the PPO ratio, the IS weights and the alignment check would be wrong. Use --eval_top_p"),
        (args.ppo_epochs < 1 or args.mini_batches < 1 or args.batch_size % args.mini_batches,
         "--ppo_epochs and --mini_batches must be >= 1 and divide the batch")] if bad] + lora.check_flags(args)
    errors += ignored_flags(args, build_parser())
    errors += list(filter(None, [data.template_error(args.template)]))
    args.reward_components = None   # --reward parsed, each user's function imported where it will run (reward.py)
    if args.reward:
        try:
            args.reward_components = parse_reward_spec(args.reward)
        except ValueError as exc:
            errors.append(str(exc))
        errors += list(filter(None, [args.reward_components and check_reward_functions(args.reward_components)]))
        if args.format_reward:
            errors.append("--format_reward with --reward: name format or format_loose in --reward instead")
    if args.lora_rank > 0 and args.lora_targets and not ckpt and not errors:
        errors += lora.check_targets(args.init_from or args.model, args.lora_targets)
    if args.init_from and not ckpt and not Path(args.init_from, "model").is_dir() and not Path(args.init_from, "config.json").exists():
        (later if args.dry_run else errors).append(f"--init_from {args.init_from}: not a checkpoint (no model/ or config.json)")
    for problem, looks_like_path in data.unknown_specs(args.train_data.split(",") + args.eval_data.split(","),
                                                       probe_hub=args.dry_run):
        (later if args.dry_run and looks_like_path else errors).append(problem)
    if args.dry_run:  # a run that grades code needs the sandbox (a real run checks it in main, after its data)
        errors += list(filter(None, [preflight.check_code_sandbox(
            "train.py", args.train_data.split(",") + args.eval_data.split(","), args.template,
            bool(args.allow_unsafe_code_sandbox))]))
    for note in later:
        print(f"train.py: dry run: {note} (yet)")
    if errors:
        parser.error("\n  ".join(errors))
    if args.dtype is None:
        args.dtype = "bfloat16" if args.device == "cuda" else "float32"
    if args.fsdp_param_dtype == "auto":  # distributed.FSDP_PARAM_DTYPE: bf16 weights under bf16 compute; LoRA keeps
        args.fsdp_param_dtype = "float32" if args.lora_rank else args.dtype   # each parameter's own dtype
    if ckpt is None:  # a fresh run or stage: where this stage starts (its KL reference) and its data seed
        start_stage(args, args.init_from)
        inherit_template(args, build_parser, argv, args.init_from, "train.py")   # an SFT stage's template
    check_model_config(args, parser, ckpt)
    return args


def check_model_config(args, parser, ckpt):
    """Before anything loads (preflight.py): prompt + response must fit the model's context, read from its config
    (offline in a dry run: a local directory or the Hugging Face cache; a dry run says when it cannot)."""
    try:
        args.overrides = preflight.parse_overrides(args.config_overrides)
        source, note = str(ckpt / "model") if ckpt else args.stage_start, ""
        if args.dry_run and not Path(source).exists() and source != args.model:  # an earlier stage will make it
            if args.model == MODEL:  # no --model given: nothing says which model the checkpoint will hold
                source = args.init_from  # reported as not readable (yet)
            else:
                source, note = args.model, f" (--init_from {args.init_from} does not exist yet: checked against --model)"
        # what vLLM is asked for: --max_model_len, or room for the longest prompt and response
        wanted = None if args.max_model_len else (args.max_prompt_len + args.max_response_len,
                                                  f"--max_prompt_len {args.max_prompt_len} + --max_response_len "
                                                  f"{args.max_response_len}")
        error, checked = preflight.check_context("train.py", source, wanted, args.overrides, offline=args.dry_run,
                                                 max_model_len=args.max_model_len)
    except ValueError as exc:
        error = str(exc)
    if error:
        parser.error(error)
    if int(os.environ.get("RANK", "0")) == 0:
        print(checked + note)


# ---- the steps of the algorithm, in the order main() calls them ---------------------------------------------
def next_prompts(batcher, tokenizer, template, max_prompt_tokens):
    """This rank's problems of the next global batch and their prompt token ids. A prompt longer than
    max_prompt_tokens (--max_prompt_len, or the engine's context) is skipped: (problems, prompts, skipped ids)."""
    batch = next(batcher)
    prompts = [data.render_prompt(p["problem"], tokenizer, template) for p in batch]
    skipped = [p["id"] for p, ids in zip(batch, prompts) if len(ids) > max_prompt_tokens]
    keep = [i for i, ids in enumerate(prompts) if len(ids) <= max_prompt_tokens]
    return [batch[i] for i in keep], [prompts[i] for i in keep], skipped


def generate(engine, prompts, args, step, dp_rank, dp_world, round=0):
    """Step 1: group_size responses per prompt (n consecutive Samples each) from the engine's current weights.
    Sampling seeds: a disjoint range per (stage, step, sampling round, data-parallel rank); vLLM seeds sample j of
    prompt i with base + i * n + j."""
    if not prompts:
        return []
    span = args.batch_size * args.group_size
    draw = step * args.max_sampling_rounds + round if args.dynamic_sampling else step
    return engine.generate(prompts, n=args.group_size, temperature=args.temperature, top_p=args.top_p,
                           max_tokens=args.max_response_len,
                           seed=args.data_seed * 1_000_000_007 + (draw * dp_world + dp_rank) * span)


def score(samples, problems, args, think_prefilled=False):
    """Step 2: rewards [N] float32: 1 for a correct final answer (reward.py; code: every test passes in the
    sandbox), plus the optional format and overlong terms. Answers must be explicit (--strict_answers 1). A
    truncated response gets 0 even with an early \\boxed{} (DeepScaleR, DAPO), and so does one that never closes a
    <think> its prompt opened (think_prefilled). Returns (rewards, correct: list of 0/1 per sample, stats).
    With --reward: the weighted sum of its components (reward.score_components: each one's score of every response
    against its dataset row; a truncated response gets 0 from each, uncalled), correct = the first one's score >= 1."""
    stats = {}
    truncated = [s.finish_reason == "length" for s in samples]
    rows = [p for p in problems for _ in range(args.group_size)]
    if args.reward_components:
        scores = score_components([s.text for s in samples], rows, args.reward_components,
                                  workers=args.reward_workers, timeout_s=args.reward_timeout_s,
                                  code_timeout_s=args.code_timeout_s, stats=stats, strict=bool(args.strict_answers),
                                  think_prefilled=think_prefilled, skip=truncated)
        correct = [float(value >= 1.0) for value in scores[args.reward_components[0]["name"]]]
        rewards = torch.tensor(combine(scores, args.reward_components), dtype=torch.float32)
        rewards += overlong_term(samples, args)
        return rewards, correct, stats
    correct = score_problems([s.text for s in samples], rows,
                             workers=args.reward_workers, timeout_s=args.reward_timeout_s,
                             code_timeout_s=args.code_timeout_s, stats=stats, strict=bool(args.strict_answers),
                             think_prefilled=think_prefilled) if samples else []
    correct = [0.0 if cut else float(c) for c, cut in zip(correct, truncated)]
    rewards = torch.tensor(correct, dtype=torch.float32)
    if args.format_reward:
        rewards += torch.tensor([0.0 if cut else format_reward(s.text, args.format_reward)
                                 for s, cut in zip(samples, truncated)], dtype=torch.float32)
    rewards += overlong_term(samples, args)
    return rewards, correct, stats


def overlong_term(samples, args):
    """DAPO eq. 13 (--overlong_buffer_len): added to the reward, -penalty at the length cap; [N] zeros when off."""
    if not args.overlong_buffer_len:
        return torch.zeros(len(samples))
    lengths = torch.tensor([len(s.response_ids) for s in samples])
    return grpo.overlong_penalty(lengths, args.max_response_len, args.overlong_buffer_len, args.overlong_penalty)


def sample_batch(engine, batcher, tokenizer, args, step, rank, tp, dp_world, max_prompt_tokens, think_prefilled,
                 times):
    """Steps 1-2 for the next global batch: generate, then score. With --dynamic_sampling (DAPO sec. 3.2) groups
    whose correctness is all equal (std 0: no signal) are dropped and more batches drawn until batch_size groups
    are kept over all ranks, or --max_sampling_rounds (then it trains on what there is, and says so). Groups are
    kept in global batch order, so any number of ranks keeps the same groups as one and all draw the same rounds
    (none waits); a round consumes a whole batch of the data order, so the checkpointed cursor stays exact.
    Returns (problems, samples, rewards [N], correct, grading stats, skipped prompt ids, sampling counts)."""
    G, dp_rank = args.group_size, rank // tp
    problems, samples, rewards, correct, grading, skipped = [], [], [], [], {}, []
    counts = {"rounds": 0, "groups_generated": 0, "groups_kept": 0}
    for round in range(args.max_sampling_rounds if args.dynamic_sampling else 1):
        t0 = time.perf_counter()
        batch, prompts, skip = next_prompts(batcher, tokenizer, args.template, max_prompt_tokens)
        new = generate(engine, prompts, args, step, dp_rank, dp_world, round)
        t1 = time.perf_counter()
        new_rewards, new_correct, stats = score(new, batch, args, think_prefilled)
        times["generate"] += t1 - t0
        times["score"] += time.perf_counter() - t1
        keep = range(len(batch))
        if args.dynamic_sampling:
            # on correctness, as DAPO's recipe filters on accuracy: a group all right (or all wrong) whose lengths
            # differ only by the overlong penalty carries no signal about correctness
            informative = grpo.informative_groups(torch.tensor(new_correct), G).tolist()
            # every data-parallel rank's flags (the ranks of a TP group hold the same ones); global position p of
            # the round is group p // dp_world of rank p % dp_world (the batcher deals rank::dp_world)
            flags = [f for r, f in enumerate(all_gather_objects(informative)) if r % tp == 0]
            order = [(g, r) for g in range(max(map(len, flags))) for r in range(dp_world)
                     if g < len(flags[r]) and flags[r][g]]
            chosen = order[:args.batch_size - counts["groups_kept"]]
            keep = [g for g, r in chosen if r == dp_rank]
            counts["groups_generated"] += sum(map(len, flags))
            counts["groups_kept"] += len(chosen)
        counts["rounds"] += 1
        rows = [g * G + j for g in keep for j in range(G)]
        problems += [batch[g] for g in keep]
        samples += [new[i] for i in rows]
        rewards.append(new_rewards[rows])
        correct += [new_correct[i] for i in rows]
        skipped += skip
        for key, value in stats.items():   # counts add up; a text (a reward function's first error) stays
            grading[key] = grading.setdefault(key, value) if isinstance(value, str) else grading.get(key, 0) + value
        if not args.dynamic_sampling or counts["groups_kept"] >= args.batch_size:
            break
    if args.dynamic_sampling and counts["groups_kept"] < args.batch_size and rank == 0:
        print(f"train.py: WARNING: step {step + 1}: dynamic sampling found {counts['groups_kept']} informative "
              f"groups of {args.batch_size} in {counts['rounds']} rounds (--max_sampling_rounds): training on those")
    return problems, samples, torch.cat(rewards), correct, grading, skipped, counts


def reward_totals(grading, args, tp, step):
    """--reward's per-component counts of the step (reward.score_components' stats), summed over ranks (the ranks
    of a vLLM TP group grade the same samples: counted once); None without --reward. Warns about failed calls."""
    if not args.reward_components:
        return None
    keys = [f"reward/{c['name']}/{key}" for c in args.reward_components
            for key in ("sum", "responses", "calls", "errors")]
    totals = all_reduce({key: grading.get(key, 0) / tp for key in keys})
    for c in args.reward_components:
        errors, calls = totals[f"reward/{c['name']}/errors"], totals[f"reward/{c['name']}/calls"]
        error = grading.get(f"reward/{c['name']}/error")
        if 0 < errors < calls and error and int(os.environ.get("RANK", "0")) == 0:
            print(f"train.py: WARNING: step {step + 1}: {c['function']} failed on {errors:.0f} of {calls:.0f} "
                  f"responses, scored 0 (reward/{c['name']}/errors), e.g. {error.strip().splitlines()[-1]}")
    return totals


def ignored_flags(args, parser):
    """A flag set away from its default in a combination where nothing reads it is refused (a message each), so
    that no run silently differs from what its command line says. Flags that are read but change nothing strictly
    on-policy (the ratio pi / pi_old is 1) get a printed note instead: they are right for an off-policy run."""
    changed = {name for name in vars(args) if getattr(args, name) != parser.get_default(name)}
    needs = [("tis_cap", args.tis_cap > 0, {"tis_mode", "tis_low"}),
             ("overlong_buffer_len", args.overlong_buffer_len > 0, {"overlong_penalty"}),
             ("dynamic_sampling", args.dynamic_sampling, {"max_sampling_rounds"}),
             ("kl_coef", args.kl_coef > 0, {"kl_estimator"}),
             ("engine vllm", args.engine == "vllm", {"vllm_gpu_memory_utilization", "vllm_runner", "vllm_sleep_level",
                                                     "enforce_eager", "tensor_parallel_size"})]
    errors = [f"--{', --'.join(sorted(changed & flags))}: nothing reads {'it' if len(changed & flags) == 1 else 'them'} "
              f"without --{needed}{'' if ' ' in needed else ' > 0'}" for needed, on, flags in needs
              if not on and changed & flags]
    if args.clip_ratio_c and (args.loss_type != "ppo" or args.clip_ratio_c <= 1):
        errors.append(f"--clip_ratio_c {args.clip_ratio_c}: dual clipping is PPO's (--loss_type ppo) and needs c > 1")
    on_policy_only = sorted(changed & {"clip_low", "clip_high", "loss_type", "clip_ratio_c"})
    if on_policy_only and args.ppo_epochs == 1 and args.mini_batches == 1 and int(os.environ.get("RANK", "0")) == 0:
        print(f"train.py: note: --{', --'.join(on_policy_only)} change nothing strictly on-policy (--ppo_epochs 1, "
              f"--mini_batches 1: the ratio pi / pi_old is 1); they act with --mini_batches or --ppo_epochs > 1")
    return errors


def select_samples(samples, rewards, args, rank, tp):
    """Which samples this rank counts and trains on (lists of indices into samples):
        own      this rank's share (the ranks of a vLLM TP group hold identical samples: nothing counts twice)
        scored   own, minus truncated ones under --mask_truncated: the samples the loss is normalised over
        trained  scored, minus all-equal groups under --skip_equal_groups: advantage 0, so skipping their
                 forward/backward changes only compute (still in the normalisers). With --kl_coef or
                 --entropy_coef > 0 their KL / entropy terms are left out too: a deliberate difference from
                 verl and TRL, whose KL covers every sample (--skip_equal_groups 0 gives theirs)"""
    G = args.group_size
    grouped = rewards.view(-1, G)
    equal = (grouped.max(1).values == grouped.min(1).values).tolist()
    own = [i for i in range(len(samples)) if (i // G) % tp == rank % tp]
    scored = [i for i in own if not (args.mask_truncated and samples[i].finish_reason == "length")]
    trained = [i for i in scored if not (args.skip_equal_groups and equal[i // G])]
    return own, scored, trained


def batch_prepass(policy, samples, scored, trained, args, device, autocast, pad_id, totals, old_policy):
    """One no-grad pass before any update, when something needs the whole batch first: off-policy (--ppo_epochs
    or --mini_batches > 1), pi_old -- the trainer's log-probs under the weights that sampled the batch -- and the
    sampler-correction weights from pi_old / pi_vllm, for the trained samples; with --top_entropy_quantile < 1,
    the entropies of every SCORED token on every rank, all-equal groups included: the quantile is the whole
    batch's (the 80/20 paper; TRL's mask sees every completion), so --skip_equal_groups still changes compute only.
    Returns ({sample: logp [T]}, {sample: weights [T]}, pool of entropies [n] or None)."""
    old_logp, is_weights, entropies, select = {}, {}, [], args.top_entropy_quantile < 1
    lengths = [len(s.prompt_ids) + len(s.response_ids) for s in samples]
    dummy = data.Sample([pad_id, pad_id], [pad_id], [0.0], "stop", "")  # zero-weight pass when a rank ran out (FSDP)
    trained_set = set(trained)
    with torch.no_grad():
        for mb in same_count_micro_batches(scored if select else trained, lengths, args.micro_batch_tokens,
                                           args.packing):
            ids, attention, mask, rollout_logp = collate([dummy] if mb is None else [samples[i] for i in mb],
                                                         pad_id, device)
            with autocast:
                out = logprobs.token_logprobs(policy, ids, attention, args.temperature, args.logprob_chunk,
                                          with_entropy=select, score_mask=mask, packed=args.packing)
            logp, entropy = out if select else (out, None)   # entropy only when the 80/20 selection needs it
            if mb and select:
                entropies.append(entropy[mask.bool()].float().cpu())
            if not old_policy:
                continue
            rows = [row for row, i in enumerate(mb or []) if i in trained_set]  # an all-equal group: entropy only
            if mb and len(rows) < len(mb):
                mb, logp, rollout_logp, mask = [mb[r] for r in rows], logp[rows], rollout_logp[rows], mask[rows]
            weights, mismatch = grpo.rollout_correction(logp, rollout_logp, mask, cap=args.tis_cap or math.inf,
                                                        mode=args.tis_mode, low=args.tis_low)
            for row, i in enumerate(mb or []):
                old_logp[i], is_weights[i] = logp[row, :lengths[i] - 1], weights[row, :lengths[i] - 1]
            if mb:
                record_mismatch(totals, mismatch, mask)
    if not select:
        return old_logp, is_weights, None
    return old_logp, is_weights, torch.cat([part for parts in all_gather_objects(entropies) for part in parts] or
                                           [torch.zeros(0)]).to(device)


def update_policy(policy, reference, optimizer, samples, advantages, scored, trained, args, step, device, autocast,
                  pad_id):
    """Step 4: one optimizer step on the batch (or ppo_epochs x mini_batches steps: off-policy experiments).

    The loss of a mini-batch (grpo.py) is  policy_loss + kl_coef * KL(pi || pi_ref) - entropy_coef * H,  each
    term aggregated with --loss_agg and NORMALISED OVER EVERY SCORED RESPONSE of the mini-batch on all ranks
    (as verl and TRL): micro-batch losses sum to the mini-batch loss, and --skip_equal_groups saves compute only.
    Per-token weights multiply the policy loss: the sampler correction (--tis_cap) and the high-entropy selection
    (--top_entropy_quantile; unselected tokens weigh 0 but stay in the normalisers, as in TRL). On-policy
    pi_old = pi_theta.detach() (ratio 1: the plain policy gradient); off-policy it comes from batch_prepass.
    Returns sums for step_metrics (metrics.py): losses over updates, kl / entropy / clip / kl_old over trained
    tokens, the mismatch once per batch, the last grad_norm (before clipping), skipped (a non-finite update)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    lengths = [len(s.prompt_ids) + len(s.response_ids) for s in samples]
    on_policy = args.ppo_epochs == 1 and args.mini_batches == 1
    correct_sampler, select_tokens = args.tis_cap > 0, args.top_entropy_quantile < 1
    trained_set = set(trained)
    dummy = data.Sample([pad_id, pad_id], [pad_id], [0.0], "stop", "")  # zero-weight pass when a rank ran out (FSDP)
    totals = dict(loss=0.0, pg_loss=0.0, updates=0, kl=0.0, entropy=0.0, clip=0.0, kl_old=0.0, tokens=0, aligned=0,
                  mismatch_tokens=0, align_max=1.0, max_abs_diff=0.0, ratio_max=1.0, ratio_min=1.0,
                  grad_norm=0.0, skipped=False, **{f"sum_{key}": 0.0 for key in MISMATCH_MEANS})
    pool = None
    if not on_policy or select_tokens:
        old_logp, is_weights, pool = batch_prepass(policy, samples, scored, trained, args, device, autocast, pad_id,
                                                   totals, old_policy=not on_policy)

    shuffler = random.Random(args.data_seed + step)
    for _ in range(args.ppo_epochs):
        order = list(scored)
        if not on_policy:
            shuffler.shuffle(order)
        size = max(1, math.ceil(len(order) / args.mini_batches))
        for mini in [order[k * size:(k + 1) * size] for k in range(args.mini_batches)]:
            # normalisers: every scored response of this mini-batch, on every rank, trained or not
            num_tokens, num_seqs = all_reduce([sum(len(samples[i].response_ids) for i in mini), len(mini)])
            norm = dict(num_tokens=num_tokens, num_seqs=num_seqs, max_len=args.max_response_len)
            update_loss = 0.0
            for mb in same_count_micro_batches([i for i in mini if i in trained_set], lengths, args.micro_batch_tokens,
                                                 args.packing):
                ids, attention, mask, rollout_logp = collate([dummy] if mb is None else [samples[i] for i in mb],
                                                             pad_id, device)
                if mb is None:
                    mask.zero_()  # all positions still go through the head: every parameter gets its (zero) gradient
                with autocast:
                    logp, entropy = logprobs.token_logprobs(policy, ids, attention, args.temperature, args.logprob_chunk,
                                                        with_entropy=True, score_mask=mask if mb else None,
                                                        entropy_grad=args.entropy_coef > 0, packed=args.packing)
                if on_policy:
                    old = logp.detach()
                    weights, mismatch = grpo.rollout_correction(old, rollout_logp, mask, cap=args.tis_cap or math.inf,
                                                                mode=args.tis_mode, low=args.tis_low)
                    if mb:
                        record_mismatch(totals, mismatch, mask)
                else:
                    old = pad_rows([old_logp[i] for i in mb], logp.shape[1]) if mb else logp.detach()
                    weights = pad_rows([is_weights[i] for i in mb], logp.shape[1]) if mb else torch.ones_like(logp)
                if select_tokens:  # 80/20: only the batch's top fraction of tokens by entropy carries a gradient
                    keep = grpo.high_entropy_mask(entropy, mask, args.top_entropy_quantile, pool).float()
                    weights = weights * keep if correct_sampler else keep
                adv = advantages[mb].to(device) if mb else torch.zeros(1, device=device)
                loss, stats = grpo.policy_loss(logp, old, adv, mask, args.clip_low, args.clip_high, args.loss_agg,
                                               is_weights=weights if correct_sampler or select_tokens else None,
                                               loss_type=args.loss_type, clip_ratio_c=args.clip_ratio_c, **norm)
                pg_loss = loss.detach()
                kl_tok = torch.zeros_like(logp)
                if reference is not None:
                    with torch.no_grad(), autocast:
                        ref_logp = logprobs.token_logprobs(reference, ids, attention, args.temperature,
                                                       args.logprob_chunk, score_mask=mask if mb else None,
                                                       packed=args.packing)
                    if hasattr(reference, "reshard"):  # FSDP2: do not keep its gathered embeddings/head around
                        reference.reshard()
                    kl_tok = grpo.kl_penalty(logp, ref_logp, args.kl_estimator)
                    loss = loss + args.kl_coef * grpo.aggregate(kl_tok, mask, args.loss_agg, **norm)
                if args.entropy_coef:
                    loss = loss - args.entropy_coef * grpo.aggregate(entropy, mask, args.loss_agg, **norm)
                # FSDP averages gradients over ranks; the loss is already normalised globally, so undo the mean
                (loss * world if world > 1 else loss).backward()
                if mb is None:
                    continue
                m, n_tok = mask.bool(), int(mask.sum())
                update_loss += loss.item()
                totals["pg_loss"] += pg_loss.item()
                totals["kl"] += kl_tok.detach()[m].sum().item()
                totals["entropy"] += entropy.detach()[m].sum().item()
                totals["clip"] += stats["clip_frac"] * n_tok
                totals["kl_old"] += stats["approx_kl_old"] * n_tok
                totals["tokens"] += n_tok
            totals["grad_norm"], skipped = optimizer_step(policy, optimizer, update_loss, args.grad_clip, step)
            totals["skipped"] = totals["skipped"] or skipped
            totals["loss"] += update_loss
            totals["updates"] += 1
    return totals


# ---- the run -----------------------------------------------------------------------------------------------
def main(argv=None, engine=None):
    args = parse_args(argv)
    if args.dry_run:
        print(f"train.py: dry run ok: {json.dumps(vars(args))}")
        return None
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit(preflight.no_gpu_message("train.py"))
    rank, world = init_distributed(args.device, args.dist_timeout_min, one_rank_group=bool(args.fsdp_cpu_offload))
    is_main = rank == 0
    # vLLM tensor parallelism: the tp ranks of a group generate TOGETHER, so they must receive the same prompts and
    # seed. Prompts are sharded over data-parallel ranks (rank // tp); afterwards each rank of the group trains on
    # (and counts) only its share of the group's identical samples.
    tp = args.tensor_parallel_size if args.engine == "vllm" else 1
    if world % tp or args.batch_size % (world // tp) or (tp > 1 and args.batch_size // (world // tp) % tp):
        sys.exit(f"train.py: need {world} ranks divisible by --tensor_parallel_size {tp}, and --batch_size "
                 f"{args.batch_size} divisible by the {world // tp} data-parallel groups (and their share by {tp})")
    dp_rank, dp_world = rank // tp, world // tp
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device(args.device, int(os.environ.get("LOCAL_RANK", "0"))) if args.device == "cuda" \
        else torch.device("cpu")
    dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32}[args.dtype]
    autocast = torch.autocast(device.type, dtype=dtype) if dtype != torch.float32 else contextlib.nullcontext()
    resume_ckpt = latest_checkpoint(args.resume) if args.resume else None
    source = str(resume_ckpt / "model") if resume_ckpt else args.stage_start
    if device.type == "cuda":  # refuse now, not after minutes of loading, when the state cannot fit (preflight.py)
        problem = preflight.check_memory(
            "train.py", preflight.count_parameters(preflight.read_config(source, args.overrides, offline=False)[0]),
            torch.cuda.get_device_properties(device).total_memory, world, bool(args.fsdp_cpu_offload),
            args.vllm_gpu_memory_utilization if args.engine == "vllm" else None, 2 if args.kl_coef > 0 else 0,
            lora=args.lora_rank > 0)
        if problem:
            sys.exit(problem)

    # ---- data --------------------------------------------------------------------------------------------
    problems = data.load_dataset(args.train_data, problem_field=args.problem_field, answer_field=args.answer_field,
                                 require_answer=needs_gold(args.reward_components))
    eval_problems = evaluation.load_benchmarks(args.eval_data, args.reward_components)
    unfit = args.reward_components and (
        check_rows(args.reward_components, problems, f"--train_data {args.train_data}") or
        (eval_problems and check_rows(args.reward_components, eval_problems, f"--eval_data {args.eval_data}")))
    if unfit:   # --reward math on code rows, or code on math rows: refused now, not at the first evaluation
        sys.exit(f"train.py: {unfit}")
    if args.contamination_check and is_main:
        hits = data.find_contamination(problems, data.SHIPPED_EVAL + tuple(   # and the hub eval sets it evaluates on
            spec for spec in args.eval_data.split(",") if data.is_hub_set(spec)))
        if hits:
            print(f"train.py: WARNING: {len(hits)} training problems also appear in eval sets, e.g. {hits[:3]}")
    batcher = data.PromptBatcher(problems, args.batch_size, seed=args.data_seed, rank=dp_rank, world_size=dp_world)
    if any("tests" in p for p in problems + eval_problems):  # code runs: the full sandbox, or refuse to start
        args.code_sandbox = require_sandbox(bool(args.allow_unsafe_code_sandbox))

    # ---- models, optimizer, checkpoint -------------------------------------------------------------------
    if args.resume:
        args.out_dir = args.resume
    else:
        refuse_used_out_dir(args.out_dir, "train.py")
    os.makedirs(args.out_dir, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(source)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    think_prefilled = data.prompt_opens_think(tokenizer, args.template)  # R1-distill chat templates end in <think>
    # fp32 master weights; compute runs in --dtype under autocast. LoRA: the stage's base frozen in --dtype, fp32
    # adapters (on resume, the checkpoint's)
    policy = load_model(args.stage_start if args.lora_rank else source, device, dtype if args.lora_rank else
                        torch.float32, world, bool(args.fsdp_cpu_offload), bool(args.gradient_checkpointing),
                        bool(args.packing), args.overrides, args.fsdp_param_dtype,
                        wrap=lora.wrapper(args, resume_ckpt and resume_ckpt / "adapter") if args.lora_rank
                        else None).train()
    reference = None
    if args.kl_coef > 0 and args.lora_rank:  # the stage's starting policy = the base: the policy, adapters off
        reference = lora.adapters_disabled(policy)
    elif args.kl_coef > 0:  # frozen copy of the stage's starting policy (also when resuming)
        reference = load_model(args.stage_start, device, dtype, world, bool(args.fsdp_cpu_offload),
                               packed=bool(args.packing), overrides=args.overrides)
        reference.eval().requires_grad_(False)
    optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=args.lr,
                                  weight_decay=args.weight_decay, betas=(0.9, 0.999))
    if is_main:
        print(checkpoint_note(policy, args.keep_last, args.save_every, "train.py"))
    start_step = 0
    if resume_ckpt:
        state = load_checkpoint(resume_ckpt, policy, optimizer)
        batcher.load_state_dict(state["batcher"])
        start_step = state["step"]
        if is_main:
            print(f"train.py: resumed {resume_ckpt} at step {start_step} (stage {args.stage}, KL reference "
                  f"{args.stage_start})")
    logger = Logger(args.out_dir, start_step if resume_ckpt else None, args.wandb, bool(args.tensorboard),
                    config=vars(args)) if is_main else None

    # ---- the engine: its first weights come from the trainer (no second read of the checkpoint) -------------
    engine = engine or make_engine(
        args.engine, source, tokenizer, args.dtype, args.seed, world, load_format="dummy",
        max_model_len=args.max_model_len or args.max_prompt_len + args.max_response_len,
        gpu_memory_utilization=args.vllm_gpu_memory_utilization, enforce_eager=bool(args.enforce_eager),
        tensor_parallel_size=args.tensor_parallel_size, hf_overrides=args.overrides, runner=args.vllm_runner,
        sleep_level=args.vllm_sleep_level)
    engine_dtype = getattr(engine, "dtype", None)   # push in the engine's dtype (bf16 on GPU)
    engine.update_weights(full_weights(policy, engine_dtype, device))
    max_prompt_tokens = min(args.max_prompt_len, getattr(engine, "max_model_len", 1 << 62) - 1)

    def periodic_eval(done):  # every rank takes part (the problems are sharded over data-parallel ranks)
        return evaluation.evaluate_during_training(engine, tokenizer, args, done, dp_rank, dp_world, tp)

    if args.eval_before_train and args.eval_data and start_step == 0:  # the starting point of the eval curve
        baseline = {"step": 0, **periodic_eval(0)}
        if is_main:
            logger.log(baseline)

    # ---- the loop ----------------------------------------------------------------------------------------
    for step in range(start_step, args.max_steps):
        times = {"start": time.perf_counter(), "generate": 0.0, "score": 0.0}
        # 1-2. generate group_size responses per prompt from the current policy, and score them: 0/1 correctness
        # (plus the optional format / overlong terms); truncated responses get 0. Then vLLM sleeps (level 2 on GPU)
        # and gives its memory to the trainer.
        batch, samples, rewards, correct, grading, skipped, sampling = sample_batch(
            engine, batcher, tokenizer, args, step, rank, tp, dp_world, max_prompt_tokens, think_prefilled, times)
        engine.sleep()
        totals = reward_totals(grading, args, tp, step)
        failure = totals and all_failed(totals, grading, args.reward_components, f"train.py: step {step + 1}")
        if failure:   # a user's function failed on every response: stop with its own error, never train on zeros
            raise RewardFunctionError(failure)
        if skipped and rank % tp == 0:
            print(f"train.py: WARNING: step {step + 1}: skipped {len(skipped)} problem(s) whose prompt is longer than "
                  f"{max_prompt_tokens} tokens (--max_prompt_len / the engine's context): {', '.join(skipped)}")

        # 3. advantages: group-relative, one value per response; which samples count and which are trained
        advantages = grpo.group_advantages(rewards, args.group_size, norm_std=bool(args.norm_std))
        own, scored, trained = select_samples(samples, rewards, args, rank, tp)

        # 4. update: one optimizer step on the whole batch
        t0 = time.perf_counter()
        update = update_policy(policy, reference, optimizer, samples, advantages, scored, trained, args, step,
                               device, autocast, pad_id)
        times["update"] = time.perf_counter() - t0

        # 5. sync: the next rollout must come from the weights we just made. Always push, even after a skipped
        # update: the level-2 sleep discarded vLLM's copy. vLLM stays awake until the next generate.
        times["sync"] = engine.update_weights(full_weights(policy, engine_dtype, device))

        # 6. log: the whole global batch's numbers, one console line
        metrics = step_metrics(step, samples, rewards, correct, grading, own, scored, trained, update, skipped,
                               sampling, times, args, tp)
        if totals:   # --reward: each component's mean, each user's function's failed calls
            metrics.update(component_metrics(totals, args.reward_components))

        # 7. periodic evaluation and checkpoints
        done = step + 1
        if args.eval_every and args.eval_data and (done % args.eval_every == 0 or done == args.max_steps):
            metrics.update(periodic_eval(done))
            if is_main:
                logger.log_samples(done, samples, correct)
        if is_main:
            logger.log(metrics)
            print(progress_line(metrics, args.max_steps), flush=True)
        if (args.save_every and done % args.save_every == 0) or done == args.max_steps:
            save_checkpoint(args.out_dir, done, policy, tokenizer, optimizer, args.keep_last,
                            {"batcher": batcher.state_dict()}, {"flags": vars(args)})
    return policy


if __name__ == "__main__":
    try:
        main()
        shutdown_distributed()   # every rank done, then the process groups go (distributed.py)
    except KeyboardInterrupt:
        sys.exit(130)
    except RewardFunctionError as exc:   # the message holds the function's own error and traceback
        sys.exit(str(exc))
    except torch.OutOfMemoryError as exc:  # say which knobs to turn
        sys.exit(f"train.py: out of GPU memory ({exc}).\nTurn down --micro_batch_tokens (activations), "
                 "--vllm_gpu_memory_utilization (vLLM's share), --max_response_len or --batch_size * --group_size "
                 "(rollout size); keep --gradient_checkpointing 1; --enforce_eager 1 saves vLLM's CUDA graphs.")
