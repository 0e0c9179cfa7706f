"""Strictly on-policy GRPO for math reasoning, with vLLM colocated on the trainer's GPU.

Read top to bottom, this file is the algorithm (defaults: AceMath-RL stage 1). The loop in main() is:

    for step in range(max_steps):
        problems   = next(batcher)                                     # batch_size prompts      (data.py)
        samples    = engine.generate(prompts, n=group_size)            # vLLM, current weights   (rollout.py)
        rewards    = score_problems(responses, problems)               # 0/1: math or code tests (reward.py)
        advantages = group_advantages(rewards, group_size)             # (r - mean) / std        (grpo.py)
        update_policy(...)   # loss = policy_loss(...) + kl_coef * KL(pi || pi_ref): one optimizer step over the
                             # whole batch (micro-batched, normalised over every response token of the batch)
        engine.update_weights(full_weights(policy))                    # the next rollout is on-policy
        log(step_metrics(...))

    python train.py                                   # GPU, the defaults below
    python demo.py                                    # CPU: SFT then GRPO on a tiny model (README's main job)
    python train.py --resume out/run                  # continue a run exactly (its flags come from the checkpoint)
    python train.py --init_from out/run/ckpt-000500 --out_dir out/run2 --max_response_len 16384   # next stage

The parts another script needs (sft.py) are plain functions: init_distributed / all_reduce, load_model (fp32 master
weights, FSDP2-sharded without a full copy per GPU), save_checkpoint / load_checkpoint / latest_checkpoint,
Logger (metrics.jsonl), micro_batches / collate.
"""
import argparse
import contextlib
import json
import math
import os
import random
import shutil
import sys
import time
from pathlib import Path

import data  # light (no torch): the flags below list its templates and shipped sets

# ------------------------------------------------------------------------------------------------------------
# Defaults (AceMath-RL stage 1; DeepSeek-R1-Distill-Qwen-1.5B)
# ------------------------------------------------------------------------------------------------------------
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
MICRO_BATCH_TOKENS = 32768  # padded tokens per forward/backward
EVAL_TEMPERATURE, EVAL_TOP_P = 0.6, 0.95   # periodic eval (AceMath-RL: 0.6 / 0.95; the Perplexity study: 0.7 / 0.95)

PRESETS = {  # named bundles of flags; explicit flags on the command line win
    # the CPU demo's GRPO stage (demo.py runs it after SFT; the eval set is 500 held-out problems, greedy)
    "cpu_demo": dict(model="out/demo/sft/ckpt-000700/model", train_data="out/demo/task/rl.jsonl", template="chat",
                     device="cpu",
                     batch_size=16, group_size=8, max_response_len=48, temperature=1.0, lr=1e-4, kl_coef=0.0,
                     max_steps=50, eval_data="out/demo/task/heldout.jsonl", eval_every=25, eval_temperature=0.0,
                     eval_before_train=1, save_every=0, keep_last=1, out_dir="out/demo/grpo",
                     contamination_check=False, max_model_len=128, micro_batch_tokens=8192,
                     gradient_checkpointing=False, vllm_gpu_memory_utilization=0.3),
    # the tests' toy task (tests/tiny_model.py): every answer is 7, a 2-layer model finds it in 30 steps
    "toy": dict(model="out/tiny/model", train_data="out/tiny/task.jsonl", device="cpu", batch_size=16,
                group_size=8, max_response_len=12, temperature=1.0, lr=2e-3, kl_coef=0.0, max_steps=30,
                eval_data="", save_every=0, out_dir="out/toy", contamination_check=False,
                max_model_len=256, micro_batch_tokens=8192, gradient_checkpointing=False,
                vllm_gpu_memory_utilization=0.3),
}

# Flags a resumed run may change: when to stop, save, evaluate and log, and memory knobs that leave the maths alone.
# Every other flag changes what is learned: on --resume it comes from the checkpoint, and giving it with another
# value is refused.
RUN_CONTROL_FLAGS = {"preset", "resume", "out_dir", "dry_run", "max_steps", "save_every", "keep_last", "eval_every",
                     "eval_data", "eval_k", "eval_limit", "eval_temperature", "eval_top_p", "eval_before_train", "wandb",
                     "tensorboard",
                     "contamination_check", "micro_batch_tokens", "logprob_chunk", "gradient_checkpointing",
                     "vllm_gpu_memory_utilization", "enforce_eager", "fsdp_cpu_offload", "reward_workers"}


def build_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    a = p.add_argument
    a("--preset", choices=sorted(PRESETS), help="a named bundle of flags (cpu_demo: the GRPO stage of demo.py; toy: the tests' toy task)")
    g = p.add_argument_group("model and data")
    g.add_argument("--model", default=MODEL, help="hub id or local HF directory of the starting policy")
    g.add_argument("--init_from", default=None,
                   help="start a new stage from a checkpoint dir's weights (fresh optimizer; KL reference = these "
                        "weights; a new data order unless --data_seed says otherwise)")
    g.add_argument("--resume", default=None,
                   help="continue the run in this out_dir from its latest checkpoint, exactly: its flags, data "
                        "order and KL reference come from the checkpoint; only run-control flags may change")
    g.add_argument("--train_data", default=TRAIN_DATA, help="shipped name(s), file(s) or hub:org/name[:split], comma-separated")
    g.add_argument("--problem_field", default="problem", help="column holding the problem (files / hub sets)")
    g.add_argument("--answer_field", default="answer", help="column holding the gold answer")
    g.add_argument("--template", default=TEMPLATE, choices=sorted(data.TEMPLATES),
                   help="prompt template: " + "; ".join(f"{k}: {v}" for k, v in data.TEMPLATES.items()))
    g.add_argument("--max_prompt_len", type=int, default=1024,
                   help="prompts longer than this (tokens), or than the engine's context, are skipped with a warning")
    g.add_argument("--contamination_check", type=int, default=1, help="1: warn about training problems found in eval sets")
    g.add_argument("--data_seed", type=int, default=None,
                   help="seed of this stage's data order and sampling (default: --seed in a first stage, "
                        "--seed + stage - 1 after --init_from, so a new stage does not replay the last one's order)")
    g = p.add_argument_group("GRPO")
    g.add_argument("--batch_size", type=int, default=BATCH_SIZE, help="prompts per step")
    g.add_argument("--group_size", type=int, default=GROUP_SIZE, help="responses per prompt")
    g.add_argument("--max_response_len", type=int, default=MAX_RESPONSE_LEN,
                   help="max generated tokens per response; a response cut off here (truncated) gets reward 0")
    g.add_argument("--temperature", type=float, default=TEMPERATURE, help="sampling temperature (the trainer uses the same)")
    g.add_argument("--top_p", type=float, default=1.0,
                   help="nucleus sampling of training rollouts: must be 1 (the trainer's log-probs are those of the "
                        "full distribution); --eval_top_p is free")
    g.add_argument("--lr", type=float, default=LR, help="AdamW learning rate (constant)")
    g.add_argument("--weight_decay", type=float, default=0.0, help="AdamW weight decay")
    g.add_argument("--kl_coef", type=float, default=KL_COEF, help="weight of KL(pi || pi_ref); 0 loads no reference model")
    g.add_argument("--kl_estimator", default="k3", choices=["k1", "k2", "k3"],
                   help="per-token KL estimator (grpo.kl_penalty says what each one's gradient is)")
    g.add_argument("--clip_low", type=float, default=CLIP_LOW, help="lower clip range: ratio >= 1 - clip_low")
    g.add_argument("--clip_high", type=float, default=CLIP_HIGH, help="upper clip range (DAPO clip-higher: e.g. 0.28)")
    g.add_argument("--loss_agg", default=LOSS_AGG, choices=["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"],
                   help="loss aggregation (grpo.aggregate); normalisers count every scored response of the batch")
    g.add_argument("--norm_std", type=int, default=1, help="1: divide advantages by the group std (GRPO); 0: Dr. GRPO")
    g.add_argument("--grad_clip", type=float, default=GRAD_CLIP, help="max gradient norm")
    g.add_argument("--entropy_coef", type=float, default=0.0, help="entropy bonus weight")
    g.add_argument("--mask_truncated", type=int, default=0,
                   help="1: truncated responses leave the loss, the KL/entropy terms and the normalisers (TRL's "
                        "mask_truncated_completions); they still count (reward 0) in their group's advantages")
    g.add_argument("--zero_truncated", type=int, default=None, help=argparse.SUPPRESS)  # removed: refused with a note
    g.add_argument("--skip_equal_groups", type=int, default=1,
                   help="1: do not forward groups whose rewards are all equal (advantage 0): saves compute, same "
                        "policy gradient; their tokens still count in the normalisers, and they add no KL/entropy term")
    g.add_argument("--tis_cap", type=float, default=0.0,
                   help=">0: truncated importance weights min(pi_old / pi_vllm, cap) for the sampler mismatch, "
                        "computed once per batch")
    g.add_argument("--ppo_epochs", type=int, default=1, help="passes over each batch (>1 is off-policy)")
    g.add_argument("--mini_batches", type=int, default=1, help="optimizer steps per pass (>1 is off-policy)")
    g.add_argument("--format_reward", default="", choices=["", "strict", "loose"], help="add the <think>/<answer> format reward")
    g = p.add_argument_group("systems")
    g.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="training device")
    g.add_argument("--dtype", default=None, choices=["bfloat16", "float32"], help="default: bfloat16 on GPU, float32 on CPU")
    g.add_argument("--engine", default="vllm", choices=["vllm", "hf"], help="generation engine")
    g.add_argument("--micro_batch_tokens", type=int, default=MICRO_BATCH_TOKENS, help="padded tokens per micro-batch")
    g.add_argument("--logprob_chunk", type=int, default=256, help="positions per chunk in grpo.token_logprobs (memory ~ chunk x vocab)")
    g.add_argument("--gradient_checkpointing", type=int, default=1, help="1: recompute activations in backward")
    g.add_argument("--vllm_gpu_memory_utilization", type=float, default=0.5, help="vLLM's share of the GPU while awake")
    g.add_argument("--max_model_len", type=int, default=None, help="vLLM context (default max_prompt_len + max_response_len)")
    g.add_argument("--enforce_eager", type=int, default=0, help="1: no CUDA graphs in vLLM (less memory, slower)")
    g.add_argument("--fsdp_cpu_offload", type=int, default=0, help="1: keep FSDP2 parameters/grads/optimizer state on CPU (multi-GPU)")
    g.add_argument("--tensor_parallel_size", type=int, default=1, help="vLLM tensor parallelism: groups of this many ranks generate together (multi-GPU)")
    g.add_argument("--reward_workers", type=int, default=2, help="grading processes")
    g.add_argument("--reward_timeout_s", type=float, default=5.0, help="hard limit per graded response")
    g.add_argument("--strict_answers", type=int, default=1, help="1: reward only explicit answers (box, answer phrase, "
                   "JSON field, ####); 0: also reward.py's free-text fallback (what eval.py uses)")
    g.add_argument("--code_timeout_s", type=float, default=None, help="hard limit per code response, all its tests "
                   "(default code_reward.DEFAULT_TIMEOUT_S)")
    g = p.add_argument_group("run control (may change on --resume)")
    g.add_argument("--out_dir", default="out/run", help="checkpoints, metrics.jsonl, samples.jsonl")
    g.add_argument("--max_steps", type=int, default=500, help="optimizer steps")
    g.add_argument("--save_every", type=int, default=50, help="checkpoint every N steps (0: only at the end)")
    g.add_argument("--keep_last", type=int, default=3, help="checkpoints to keep")
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


def explicit_flags(argv, parser=None):
    """The flags given on the command line itself (not defaults, not presets): {dest: value}. parser: another
    script's (sft.py), default this one's."""
    parser = parser or build_parser()
    for action in parser._actions:
        action.default = argparse.SUPPRESS
    return vars(parser.parse_args(argv))


def restore_run_flags(args, stored, explicit, run_control=RUN_CONTROL_FLAGS):
    """--resume: the run's stored flags replace this invocation's defaults. Returns the conflicts: flags that change
    what is learned, given explicitly with another value than the run's. run_control: the flags a resume may
    change (sft.py passes its own)."""
    conflicts = []
    for key, value in stored.items():
        if key in explicit and key not in run_control and explicit[key] != value:
            conflicts.append(f"--{key} {explicit[key]} (the run has {value})")
        elif key not in explicit and key not in ("resume", "out_dir", "dry_run"):
            setattr(args, key, value)
    return conflicts


def parse_args(argv=None):
    """Flags -> namespace, with preset defaults, the run's own flags on --resume, and the stage's start and seed;
    validated before anything heavy is loaded."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.preset:
        parser.set_defaults(**PRESETS[args.preset])
        args = parser.parse_args(argv)
    if args.zero_truncated is not None:
        parser.error("--zero_truncated was removed: it gave truncated responses advantage 0 but left their tokens "
                     "in the loss normalisers and under the KL term. Truncated responses now get reward 0 always; "
                     "--mask_truncated 1 also takes them out of the loss and its normalisers (README: Truncation).")
    errors, later = [], []  # later: in a dry run, paths an earlier recipe stage will create are noted, not errors
    run = None
    if args.resume:
        ckpt = latest_checkpoint(args.resume)
        if ckpt is None:
            (later if args.dry_run else errors).append(f"--resume {args.resume}: no checkpoint found there")
        else:
            run = read_run_info(ckpt)
            if run is None:
                print(f"train.py: note: {ckpt} has no run.json (saved by an earlier version): resuming with the flags "
                      f"given now, which must be the run's own. The KL reference is --model, or --init_from if given "
                      f"(for a stage that began with --init_from, give it again beside --resume)")
            else:
                conflicts = restore_run_flags(args, run["flags"], explicit_flags(argv))
                if conflicts:
                    parser.error(f"--resume {args.resume}: these flags change what is learned and differ from the "
                                 f"run's: {'; '.join(conflicts)}. Leave them out to continue the run, or start a new "
                                 f"stage with --init_from {ckpt}. Flags a resume may change: "
                                 f"{', '.join(sorted(RUN_CONTROL_FLAGS - {'preset', 'resume', 'dry_run'}))}")
    if args.batch_size < 1 or args.group_size < 1:
        errors.append("--batch_size and --group_size must be >= 1")
    if args.group_size == 1:
        errors.append("--group_size 1 gives every response advantage 0: GRPO needs >= 2")
    if args.max_response_len < 1 or args.max_steps < 0 or args.micro_batch_tokens < 1:
        errors.append("--max_response_len, --micro_batch_tokens must be >= 1 and --max_steps >= 0")
    if not 0 <= args.clip_low < 1 or args.clip_high < 0:
        errors.append("--clip_low must be in [0, 1) and --clip_high >= 0")
    if args.kl_coef < 0 or args.entropy_coef < 0 or args.lr <= 0:
        errors.append("--kl_coef and --entropy_coef must be >= 0, --lr > 0")
    if args.temperature <= 0 or args.eval_temperature < 0 or not 0 < args.eval_top_p <= 1:
        errors.append("--temperature must be > 0, --eval_temperature >= 0 (0: greedy), --eval_top_p in (0, 1]")
    if args.top_p != 1.0:
        errors.append(f"--top_p {args.top_p}: training rollouts must sample the full distribution (--top_p 1). "
                      f"With a nucleus, vLLM's log-probs are those of the renormalised top-p set, which the trainer "
                      f"does not compute, so the PPO ratio, the IS weights and the alignment check would all be "
                      f"wrong. Use --eval_top_p for evaluation")
    if args.ppo_epochs < 1 or args.mini_batches < 1 or args.batch_size % args.mini_batches:
        errors.append("--ppo_epochs and --mini_batches must be >= 1 and divide the batch")
    if args.init_from and not run and not Path(args.init_from, "model").is_dir() and not Path(args.init_from, "config.json").exists():
        (later if args.dry_run else errors).append(f"--init_from {args.init_from}: not a checkpoint (no model/ or config.json)")
    for spec in [s for s in args.train_data.split(",") if s] + [s for s in args.eval_data.split(",") if s]:
        if spec in data.SHIPPED_EVAL + data.SHIPPED_TRAIN or spec.startswith("hub:") or os.path.exists(spec):
            continue
        looks_like_path = "/" in spec or "." in spec
        (later if args.dry_run and looks_like_path else errors).append(
            f"data {spec!r}: not a shipped set ({', '.join(data.SHIPPED_TRAIN + data.SHIPPED_EVAL)}), "
            f"an existing file, or hub:org/name")
    for note in later:
        print(f"train.py: dry run: {note} (yet)")
    if errors:
        parser.error("\n  ".join(errors))
    if args.dtype is None:
        args.dtype = "bfloat16" if args.device == "cuda" else "float32"
    if run is None:  # a fresh run or stage (or a checkpoint without run.json): where this stage starts
        args.stage, args.stage_start = 1, args.model
        if args.init_from:
            previous = read_run_info(args.init_from) if Path(args.init_from, "run.json").exists() else None
            args.stage = previous["flags"].get("stage", 1) + 1 if previous else 2
            args.stage_start = (str(Path(args.init_from) / "model") if Path(args.init_from, "model").is_dir()
                                else args.init_from)
        if args.data_seed is None:  # (a resumed checkpoint without run.json sampled with --seed, as before)
            args.data_seed = args.seed if args.resume else args.seed + args.stage - 1
    return args


# ------------------------------------------------------------------------------------------------------------
# Distributed: torchrun sets RANK/WORLD_SIZE; one process per GPU, each with its own colocated vLLM engine
# ------------------------------------------------------------------------------------------------------------
def init_distributed(device_type):
    """(rank, world_size). Under torchrun: a process group (nccl on GPU, gloo on CPU); else (0, 1)."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return 0, 1
    import torch
    import torch.distributed as dist
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device_type == "cuda" else "gloo")
    if device_type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    return dist.get_rank(), dist.get_world_size()


def distributed():
    """True under torchrun with more than one rank."""
    import torch.distributed as dist
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def get_rank():
    import torch.distributed as dist
    return dist.get_rank() if distributed() else 0


def all_reduce(values, op="sum"):
    """Sum (or max / min) a list of floats over ranks; identity when not distributed."""
    if not distributed():
        return list(values)
    import torch
    import torch.distributed as dist
    t = torch.tensor(values, dtype=torch.float64)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t, op={"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}[op])
    return t.cpu().tolist()


def broadcast_object(obj):
    """Rank 0's `obj` (any picklable) on every rank; identity when not distributed."""
    if not distributed():
        return obj
    import torch.distributed as dist
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def all_gather_objects(obj):
    """[rank 0's obj, rank 1's obj, ...] (picklable); [obj] when not distributed."""
    if not distributed():
        return [obj]
    import torch.distributed as dist
    parts = [None] * dist.get_world_size()
    dist.all_gather_object(parts, obj)
    return parts


# ------------------------------------------------------------------------------------------------------------
# Models: fp32 master weights, FSDP2 across ranks, loaded without a full copy per GPU
# ------------------------------------------------------------------------------------------------------------
def shard_model(model, cpu_offload=False):
    """FSDP2: fully_shard every transformer block, then the root (embeddings, final norm, head). The root stays
    gathered from its forward until backward: grpo.token_logprobs projects hidden states through the head
    weight itself, after the model's forward has returned (a no-grad model calls .reshard() after use)."""
    from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard
    kwargs = {"offload_policy": CPUOffloadPolicy()} if cpu_offload else {}
    for block in model.get_decoder().layers:
        fully_shard(block, **kwargs)
    fully_shard(model, reshard_after_forward=False, **kwargs)
    return model


def load_model(path, device, dtype, world=1, cpu_offload=False, gradient_checkpointing=False):
    """A Hugging Face causal LM from `path` in `dtype` (fp32 for trained weights: at lr 3e-7 an update is ~1e-5 of
    a weight, below bf16's resolution), on `device`; with world > 1, FSDP2-sharded over the ranks.

    Several ranks: every rank builds the model on the meta device (no memory), shards it, and allocates only its
    shard on `device`; rank 0 alone reads the checkpoint (into host memory) and broadcasts it tensor by tensor
    (set_model_state_dict with broadcast_from_rank0), then the buffers that are not in the state dict (rotary
    inv_freq). So no GPU ever holds the full model (a 14B fp32 policy + bf16 reference would need 88 GB on each
    GPU otherwise); rank 0's host holds one full copy while loading. The same pattern as verl / TRL / accelerate.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    if world == 1:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
        if gradient_checkpointing:
            model.gradient_checkpointing_enable()
            model.config.use_cache = False
        return model.to(device)
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path), dtype=dtype)
    if gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    shard_model(model, cpu_offload)
    model.to_empty(device=device)  # every rank allocates its shard only (on the GPU: NCCL broadcasts need it there)
    full_state, buffers = {}, {}
    if dist.get_rank() == 0:
        loaded = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)      # host memory
        full_state, buffers = loaded.state_dict(), {k: v.clone() for k, v in loaded.named_buffers()}
        del loaded
    set_model_state_dict(model, full_state, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
    del full_state
    with torch.no_grad():
        for name, buffer in model.named_buffers():  # non-persistent buffers are not in the state dict
            if dist.get_rank() == 0:
                buffer.copy_(buffers[name])
            dist.broadcast(buffer, src=0)
    if cpu_offload and device.type == "cuda":  # CPUOffloadPolicy keeps the shards in host memory (as verl does)
        model.to("cpu")
        for buffer in model.buffers():
            buffer.data = buffer.data.to(device)
    return model


def full_weights(model, dtype=None, device=None):
    """(name, full tensor) for every entry of the state dict, for engine.update_weights. A lazy generator: under
    FSDP2 each tensor is gathered (a collective: every rank iterates in the same order) only when the consumer
    asks for it, so the extra memory is one tensor, never the model (do not list() it).

    dtype: cast BEFORE gathering (the engine's bf16: half the bytes on the wire and in memory).
    device: move each shard there before gathering: with --fsdp_cpu_offload the shards live in host memory, and
    NCCL gathers only GPU tensors."""
    for name, tensor in model.state_dict().items():
        if hasattr(tensor, "full_tensor"):
            tensor = tensor.to(**{k: v for k, v in (("device", device), ("dtype", dtype)) if v is not None})
            tensor = tensor.full_tensor()
        elif dtype is not None:
            tensor = tensor.to(dtype)
        yield name, tensor.detach()


# ------------------------------------------------------------------------------------------------------------
# Checkpoints: <out_dir>/ckpt-000100/{model/, trainer_state.pt, run.json}; written to a temp dir, then renamed
# ------------------------------------------------------------------------------------------------------------
def latest_checkpoint(out_dir):
    ckpts = sorted(Path(out_dir).glob("ckpt-[0-9]*[0-9]"))
    return ckpts[-1] if ckpts else None


def refuse_used_out_dir(out_dir, script):
    """A new run must not write into another run's folder: its metrics.jsonl would be appended to the old one, and
    keep_last (which keeps the highest-numbered checkpoints) could delete the new run's checkpoints in favour of
    the old run's, so that latest_checkpoint / --init_from would pick up stale weights."""
    if latest_checkpoint(out_dir) or Path(out_dir, "metrics.jsonl").exists():
        sys.exit(f"{script}: --out_dir {out_dir} holds another run (checkpoints or metrics.jsonl): continue it "
                 f"with --resume {out_dir}, or choose another --out_dir")


def read_run_info(ckpt):
    """The run's flags and stage start stored with a checkpoint (run.json), or None for a checkpoint of the
    previous format."""
    path = Path(ckpt) / "run.json"
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        sys.exit(f"train.py: {path} is not valid JSON ({exc}): restore it, or delete it to resume with the flags "
                 f"given on the command line")


def save_checkpoint(out_dir, step, model, tokenizer, optimizer, keep_last, trainer_state=None, run_info=None):
    """Model (HF format) + optimizer + `trainer_state` (small picklable dict: data cursor, ...) + run.json (the
    run's flags). With several ranks, model and optimizer state are gathered in full onto rank 0 (CPU) and only
    rank 0 writes: a checkpoint resumes with any number of ranks. Returns the checkpoint dir (None off rank 0)."""
    import torch
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                         get_optimizer_state_dict)
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    # optimizer state keyed by parameter name, in full: the same format for 1 or N ranks (a collective when N > 1)
    optim_state = get_optimizer_state_dict(model, optimizer, options=options)
    model_state = None
    if distributed():
        import torch.distributed as dist
        model_state = get_model_state_dict(model, options=options)
        if dist.get_rank() != 0:
            return None
    final = Path(out_dir) / f"ckpt-{step:06d}"
    tmp = Path(out_dir) / f".tmp-ckpt-{step:06d}"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp / "model", state_dict=model_state)  # HF format: loadable by transformers and vLLM
    tokenizer.save_pretrained(tmp / "model")
    torch.save({"step": step, "optimizer": optim_state, **(trainer_state or {}),
                "world_size": int(os.environ.get("WORLD_SIZE", "1")),
                "rng": {"python": random.getstate(), "torch": torch.get_rng_state(),
                        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}},
               tmp / "trainer_state.pt")
    if run_info is not None:
        (tmp / "run.json").write_text(json.dumps(run_info, indent=1, sort_keys=True))
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)                          # a crash before this line leaves the previous checkpoint intact
    for old in sorted(Path(out_dir).glob("ckpt-[0-9]*[0-9]"))[:-keep_last] if keep_last > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load_checkpoint(ckpt, model, optimizer):
    """Restore the optimizer state and RNGs saved by save_checkpoint into `optimizer` (built over `model`, whose
    weights load_model already read from ckpt/model). Returns the trainer state dict (step, data cursor, ...),
    the same on every rank. Only rank 0 reads the file; the optimizer state reaches the other ranks by broadcast
    (each keeps its shard), so no rank but 0 ever holds the full state."""
    import torch
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict
    state = torch.load(Path(ckpt) / "trainer_state.pt", weights_only=False) if get_rank() == 0 else {}
    set_optimizer_state_dict(model, optimizer, optim_state_dict=state.pop("optimizer", {}),
                             options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=distributed()))
    state = broadcast_object(state)
    random.setstate(state["rng"]["python"])
    torch.set_rng_state(state["rng"]["torch"])
    if state["rng"]["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["rng"]["cuda"])
    return state


# ------------------------------------------------------------------------------------------------------------
# Micro-batches
# ------------------------------------------------------------------------------------------------------------
def micro_batches(indices, lengths, token_budget):
    """Split sequence indices into groups whose padded size (count * longest) stays within token_budget."""
    order = sorted(indices, key=lambda i: lengths[i])  # similar lengths together: less padding
    batches, current, longest = [], [], 0
    for i in order:
        new_longest = max(longest, lengths[i])
        if current and new_longest * (len(current) + 1) > token_budget:
            batches.append(current)
            current, new_longest = [], lengths[i]
        current.append(i)
        longest = new_longest
    if current:
        batches.append(current)
    return batches


def same_count_micro_batches(indices, lengths, token_budget):
    """micro_batches(), padded with None to the largest count over ranks: under FSDP every forward/backward is a
    collective, so every rank must run as many as the busiest one. None = a zero-weight micro-batch."""
    batches = micro_batches(indices, lengths, token_budget)
    most = int(all_reduce([len(batches)], "max")[0])
    return batches + [None] * (most - len(batches))


def collate(samples, pad_id, device):
    """Right-padded [B, S] ids / attention, and [B, S-1] response mask + rollout log-probs aligned with logp."""
    import torch
    width = max(len(s.prompt_ids) + len(s.response_ids) for s in samples)
    ids = torch.full((len(samples), width), pad_id, dtype=torch.long)
    attention = torch.zeros_like(ids)
    mask = torch.zeros(len(samples), width - 1)
    rollout_logp = torch.zeros(len(samples), width - 1)
    for b, s in enumerate(samples):
        p, r = len(s.prompt_ids), len(s.response_ids)
        ids[b, :p + r] = torch.tensor(s.prompt_ids + s.response_ids)
        attention[b, :p + r] = 1
        mask[b, p - 1:p - 1 + r] = 1                 # logp[:, t] scores token t+1: response tokens start at p-1
        rollout_logp[b, p - 1:p - 1 + r] = torch.tensor(s.logprobs)
    return ids.to(device), attention.to(device), mask.to(device), rollout_logp.to(device)


def pad_rows(rows, width):
    """Per-sample 1-D tensors -> [len(rows), width], zero-padded on the right."""
    import torch
    out = torch.zeros(len(rows), width, dtype=rows[0].dtype, device=rows[0].device)
    for b, row in enumerate(rows):
        out[b, :row.numel()] = row
    return out


# ------------------------------------------------------------------------------------------------------------
# Logging
# ------------------------------------------------------------------------------------------------------------
class Logger:
    """metrics.jsonl (one JSON object per step), plus wandb / TensorBoard when asked and installed.
    resumed_step: drop lines written after that step (a resumed run rewrites them)."""

    def __init__(self, out_dir, resumed_step=None, wandb="", tensorboard=False, config=None):
        self.path = Path(out_dir) / "metrics.jsonl"
        if resumed_step is not None and self.path.exists():
            keep = [line for line in self.path.read_text().splitlines() if json.loads(line).get("step", 0) <= resumed_step]
            self.path.write_text("".join(line + "\n" for line in keep))
        self.wandb = self.tb = None
        if wandb:
            try:
                import wandb as wandb_module
                self.wandb = wandb_module.init(project=wandb, config=config, dir=str(out_dir), resume="allow")
            except ImportError:
                print("train.py: --wandb given but wandb is not installed; logging to metrics.jsonl only")
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
                self.tb = SummaryWriter(str(Path(out_dir) / "tb"))
            except ImportError:
                print("train.py: --tensorboard given but tensorboard is not installed")

    def log(self, metrics):
        with open(self.path, "a") as f:
            f.write(json.dumps(metrics) + "\n")
        if self.wandb:
            self.wandb.log(metrics, step=metrics["step"])
        if self.tb:
            for key, value in metrics.items():
                if isinstance(value, (int, float)):
                    self.tb.add_scalar(key, value, metrics["step"])


def progress_line(m, max_steps):
    """One console line per step with the numbers to watch."""
    return (f"step {m['step']}/{max_steps} | reward {m['reward/mean']:.3f} | len {m['response/length_mean']:.0f} "
            f"trunc {m['response/truncated_frac']:.2f} | loss {m['policy/loss']:+.4f} kl {m['policy/kl_ref']:.4f} "
            f"ent {m['policy/entropy']:.3f} grad {m['policy/grad_norm']:.3f} | align {m['rollout/align_mean']:.4f} | "
            f"{m['time/step']:.1f}s (gen {m['time/generate']:.1f}s)")


def ends_in_loop(token_ids, min_repeats=4, max_period=64, min_span=32):
    """True when the response ends in a block of tokens repeated at least min_repeats times (and spanning at
    least min_span tokens): the self-repetition collapse the Perplexity study shows."""
    n = len(token_ids)
    for period in range(1, max_period + 1):
        span = period * max(min_repeats, -(-min_span // period))
        if span > n:
            break
        tail = token_ids[n - span:]
        if tail == tail[:period] * (span // period):
            return True
    return False


# ------------------------------------------------------------------------------------------------------------
# The steps of the algorithm, in the order main() calls them
# ------------------------------------------------------------------------------------------------------------
def next_prompts(batcher, tokenizer, template, max_prompt_tokens):
    """This rank's problems of the next global batch and their prompt token ids. A prompt longer than
    max_prompt_tokens (--max_prompt_len, or the engine's context) is skipped: (problems, prompts, skipped ids)."""
    batch = next(batcher)
    prompts = [data.render_prompt(p["problem"], tokenizer, template) for p in batch]
    skipped = [p["id"] for p, ids in zip(batch, prompts) if len(ids) > max_prompt_tokens]
    keep = [i for i, ids in enumerate(prompts) if len(ids) <= max_prompt_tokens]
    return [batch[i] for i in keep], [prompts[i] for i in keep], skipped


def generate(engine, prompts, args, step, dp_rank, dp_world):
    """Step 1: group_size responses per prompt (n consecutive Samples each) from the engine's current weights,
    then put the engine to sleep (level 2 on GPU) to give the trainer its memory. Sampling seeds: a disjoint
    range per (stage, step, data-parallel rank); vLLM seeds sample j of prompt i with base + i * n + j."""
    samples = []
    if prompts:
        span = args.batch_size * args.group_size
        samples = engine.generate(prompts, n=args.group_size, temperature=args.temperature, top_p=args.top_p,
                                  max_tokens=args.max_response_len,
                                  seed=args.data_seed * 1_000_000_007 + (step * dp_world + dp_rank) * span)
    engine.sleep()
    return samples


def score(samples, problems, args, think_prefilled=False):
    """Step 2: rewards [N] float32: 1 for a correct final answer (reward.py; a code problem: every test passes in
    the sandbox), plus the optional format reward. Answers must be explicit (--strict_answers 1: a box, an answer
    phrase, ...; reward.py's free-text fallback is for eval). A truncated response (cut off at --max_response_len)
    has no final answer and gets 0 -- also when it holds an early \\boxed{} that would grade as correct (DeepScaleR,
    DAPO; the Perplexity study's end-of-sequence collapse analysis assumes it); so does one whose prompt opened a
    <think> block it never closed (think_prefilled). Returns (rewards, correct: list of 0/1 per sample, stats)."""
    import torch
    from reward import format_reward, score_problems
    stats = {}
    correct = score_problems([s.text for s in samples], [p for p in problems for _ in range(args.group_size)],
                             workers=args.reward_workers, timeout_s=args.reward_timeout_s,
                             code_timeout_s=args.code_timeout_s, stats=stats, strict=bool(args.strict_answers),
                             think_prefilled=think_prefilled) if samples else []
    truncated = [s.finish_reason == "length" for s in samples]
    correct = [0.0 if cut else float(c) for c, cut in zip(correct, truncated)]
    rewards = torch.tensor(correct, dtype=torch.float32)
    if args.format_reward:
        rewards += torch.tensor([0.0 if cut else format_reward(s.text, args.format_reward)
                                 for s, cut in zip(samples, truncated)], dtype=torch.float32)
    return rewards, correct, stats


def select_samples(samples, rewards, args, rank, tp):
    """Which samples this rank counts and trains on (lists of indices into samples):
        own      this rank's samples (with vLLM TP > 1 the ranks of a group hold identical samples: each takes its
                 share of the groups, so nothing counts twice)
        scored   own, minus truncated ones under --mask_truncated: the samples the loss is normalised over
        trained  scored, minus groups whose rewards are all equal under --skip_equal_groups: their advantage is 0,
                 so their policy-gradient term is exactly 0 and skipping their forward/backward changes nothing
                 but compute (they add no KL/entropy term; their tokens still count in the normalisers)"""
    G = args.group_size
    grouped = rewards.view(-1, G)
    equal = (grouped.max(1).values == grouped.min(1).values).tolist()
    own = [i for i in range(len(samples)) if (i // G) % tp == rank % tp]
    scored = [i for i in own if not (args.mask_truncated and samples[i].finish_reason == "length")]
    trained = [i for i in scored if not (args.skip_equal_groups and equal[i // G])]
    return own, scored, trained


def update_policy(policy, reference, optimizer, samples, advantages, scored, trained, args, step, device, autocast,
                  pad_id):
    """Step 4: one optimizer step on the batch (or ppo_epochs x mini_batches steps: off-policy experiments).

    The loss of a mini-batch (grpo.py) is  policy_loss + kl_coef * KL(pi || pi_ref) - entropy_coef * H,  each
    term aggregated with --loss_agg and NORMALISED OVER EVERY SCORED RESPONSE of the mini-batch on all ranks,
    forwarded or not (verl and TRL normalise over every response token of the batch). So micro-batch losses sum
    to the mini-batch loss, the per-token weight does not depend on how many groups were all-equal, and
    --skip_equal_groups saves compute only: its gradient equals the one with the flag off when KL and entropy
    are off (tests/test_train.py).

    Off-policy: pi_old (the trainer's log-probs under the weights that sampled the batch) and the truncated-IS
    weights min(pi_old / pi_vllm, tis_cap) come from one no-grad pass before any update; the PPO ratio
    pi_theta / pi_old then does the rest (grpo.rollout_correction). On-policy pi_old = pi_theta.detach().

    Returns sums for step_metrics: loss / pg_loss summed over updates (`updates` of them), kl / entropy /
    clip / approx_kl_old summed over trained tokens (`tokens`), alignment over trained sequences (once per
    batch), grad_norm of the last update (before clipping), skipped (a non-finite update was not applied)."""
    import torch

    import grpo
    from rollout import Sample
    world = int(os.environ.get("WORLD_SIZE", "1"))
    lengths = [len(s.prompt_ids) + len(s.response_ids) for s in samples]
    on_policy = args.ppo_epochs == 1 and args.mini_batches == 1
    cap = args.tis_cap if args.tis_cap > 0 else 1.0
    trained_set = set(trained)
    dummy = Sample([pad_id, pad_id], [pad_id], [0.0], "stop", "")  # zero-weight pass when a rank ran out (FSDP)
    out = dict(loss=0.0, pg_loss=0.0, updates=0, kl=0.0, entropy=0.0, clip=0.0, kl_old=0.0, tokens=0,
               align_sum=0.0, align_max=1.0, max_abs_diff=0.0, aligned=0, grad_norm=0.0, skipped=False)

    def record_alignment(mismatch, count):
        out["align_sum"] += mismatch["align_mean"] * count
        out["aligned"] += count
        out["align_max"] = max(out["align_max"], mismatch["align_max"])
        out["max_abs_diff"] = max(out["max_abs_diff"], mismatch["max_abs_diff"])

    # pi_old and the IS weights, once per batch before any update (off-policy only)
    old_logp, is_weights = {}, {}
    if not on_policy:
        with torch.no_grad():
            for mb in same_count_micro_batches(trained, lengths, args.micro_batch_tokens):
                ids, attention, mask, rollout_logp = collate([dummy] if mb is None else [samples[i] for i in mb],
                                                             pad_id, device)
                with autocast:
                    logp = grpo.token_logprobs(policy, ids, attention, args.temperature, args.logprob_chunk,
                                               score_mask=mask)
                weights, mismatch = grpo.rollout_correction(logp, rollout_logp, mask, cap=cap)
                for row, i in enumerate(mb or []):
                    old_logp[i], is_weights[i] = logp[row, :lengths[i] - 1], weights[row, :lengths[i] - 1]
                if mb:
                    record_alignment(mismatch, len(mb))

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
            for mb in same_count_micro_batches([i for i in mini if i in trained_set], lengths, args.micro_batch_tokens):
                ids, attention, mask, rollout_logp = collate([dummy] if mb is None else [samples[i] for i in mb],
                                                             pad_id, device)
                if mb is None:
                    mask.zero_()  # all positions still go through the head: every parameter gets its (zero) gradient
                with autocast:
                    logp, entropy = grpo.token_logprobs(policy, ids, attention, args.temperature, args.logprob_chunk,
                                                        with_entropy=True, score_mask=mask if mb else None,
                                                        entropy_grad=args.entropy_coef > 0)
                if on_policy:
                    old = logp.detach()  # ratio exactly 1: the gradient is the plain policy gradient
                    weights, mismatch = grpo.rollout_correction(old, rollout_logp, mask, cap=cap)
                    if mb:
                        record_alignment(mismatch, len(mb))
                else:
                    old = pad_rows([old_logp[i] for i in mb], logp.shape[1]) if mb else logp.detach()
                    weights = pad_rows([is_weights[i] for i in mb], logp.shape[1]) if mb else torch.ones_like(logp)
                adv = advantages[mb].to(device) if mb else torch.zeros(1, device=device)
                loss, stats = grpo.policy_loss(logp, old, adv, mask, args.clip_low, args.clip_high, args.loss_agg,
                                               is_weights=weights if args.tis_cap > 0 else None, **norm)
                pg_loss = loss.detach()
                kl_tok = torch.zeros_like(logp)
                if reference is not None:
                    with torch.no_grad(), autocast:
                        ref_logp = grpo.token_logprobs(reference, ids, attention, args.temperature,
                                                       args.logprob_chunk, score_mask=mask if mb else None)
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
                out["pg_loss"] += pg_loss.item()
                out["kl"] += kl_tok.detach()[m].sum().item()
                out["entropy"] += entropy.detach()[m].sum().item()
                out["clip"] += stats["clip_frac"] * n_tok
                out["kl_old"] += stats["approx_kl_old"] * n_tok
                out["tokens"] += n_tok
            for p in policy.parameters():  # nothing trained anywhere: the gradient is 0, as with the flag off
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
            grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), args.grad_clip)
            out["grad_norm"] = (grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm).item()
            out["loss"] += update_loss
            out["updates"] += 1
            finite = all_reduce([float(math.isfinite(out["grad_norm"]) and math.isfinite(update_loss))], "min")[0]
            if finite == 1.0:  # every rank decides the same
                optimizer.step()
            else:  # never let a NaN/inf reach the weights (or, through the sync, vLLM)
                print(f"train.py: WARNING: step {step}: non-finite loss {update_loss} or grad norm "
                      f"{out['grad_norm']}; update skipped")
                out["skipped"] = True
            optimizer.zero_grad(set_to_none=True)  # free the gradients: they must not sit in memory through generation
    return out


def step_metrics(step, samples, rewards, correct, grading, own, scored, trained, update, skipped_prompts, times,
                 args, tp):
    """Step 6: the step's numbers, over the whole global batch (sums and maxima over ranks). Namespaces:
    reward/, response/ (all samples); policy/ (kl_ref, entropy, clip_frac, approx_kl_old: per-token means over the
    TRAINED samples, the only ones forwarded; loss, pg_loss: the objective as optimised, mean over the step's
    updates); rollout/ (vLLM vs trainer alignment of the trained samples, once per batch); data/, time/, perf/."""
    import torch
    G = args.group_size
    resp = [len(samples[i].response_ids) for i in own]
    grouped = rewards.view(-1, G)
    equal = (grouped.max(1).values == grouped.min(1).values).float()
    own_groups = sorted({i // G for i in own})
    (n_resp, reward_sum, correct_sum, equal_sum, n_groups, timeouts, invalid, len_sum, trunc_sum, loop_sum, n_scored,
     n_trained, loss, pg_loss, kl, entropy, clip, kl_old, n_tok, align_sum, aligned, n_skipped) = all_reduce([
        len(own), sum(rewards[i].item() for i in own), sum(correct[i] for i in own), equal[own_groups].sum().item(),
        len(own_groups), grading.get("timeouts", 0) / tp, grading.get("invalid_gold", 0) / tp, sum(resp),
        sum(samples[i].finish_reason == "length" for i in own), sum(ends_in_loop(samples[i].response_ids) for i in own),
        len(scored), len(trained), update["loss"], update["pg_loss"], update["kl"], update["entropy"], update["clip"],
        update["kl_old"], update["tokens"], update["align_sum"], update["aligned"], len(skipped_prompts) / tp])
    len_max, align_max, max_diff, t_generate, t_score, t_update, t_sync = all_reduce(
        [max(resp, default=0), update["align_max"], update["max_abs_diff"], times["generate"], times["score"],
         times["update"], times["sync"]], "max")
    from reward import CODE_STAT_KEYS  # the code reward's counts: timeouts, crashes, sandbox refusals, ...
    code_counts = all_reduce([grading.get(key, 0) / tp for key in CODE_STAT_KEYS])
    n, updates = max(n_resp, 1), max(update["updates"], 1)
    metrics = {
        "step": step + 1,
        "reward/mean": reward_sum / n,
        "reward/accuracy": correct_sum / n,
        "reward/equal_group_frac": equal_sum / max(n_groups, 1),
        "reward/grader_timeouts": int(timeouts),
        "reward/invalid_gold": int(invalid),
        **{f"reward/{key}": int(count) for key, count in zip(CODE_STAT_KEYS, code_counts)},
        "response/length_mean": len_sum / n,
        "response/length_max": int(len_max),
        "response/truncated_frac": trunc_sum / n,
        "response/repetition_frac": loop_sum / n,
        "policy/loss": loss / updates,
        "policy/pg_loss": pg_loss / updates,
        "policy/kl_ref": kl / max(n_tok, 1),
        "policy/entropy": entropy / max(n_tok, 1),
        "policy/clip_frac": clip / max(n_tok, 1),
        "policy/approx_kl_old": kl_old / max(n_tok, 1),
        "policy/grad_norm": update["grad_norm"],
        "policy/skipped": int(update["skipped"]),
        "policy/scored_frac": n_scored / n,
        "policy/trained_frac": n_trained / n,
        "rollout/align_mean": align_sum / aligned if aligned else 1.0,
        "rollout/align_max": align_max,
        "rollout/max_abs_logp_diff": max_diff,
        "data/skipped_prompts": int(n_skipped),
        "time/generate": t_generate, "time/score": t_score, "time/update": t_update, "time/sync": t_sync,
        "time/step": time.perf_counter() - times["start"],
        "perf/tokens_per_s": len_sum / max(t_generate, 1e-9),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        metrics["memory/peak_gb"] = all_reduce([torch.cuda.max_memory_allocated() / 2**30], "max")[0]
        torch.cuda.reset_peak_memory_stats()
    return metrics


def periodic_eval(engine, tokenizer, args, done, dp_rank, dp_world, tp):
    """Step 7: evaluate the current weights on --eval_data. Every rank takes part: the problems are sharded over
    the data-parallel ranks (a vLLM TP group samples its shard together), the records gathered, rank 0 writes
    out_dir/eval-<step>/. Returns {eval/<benchmark>: avg@k, eval/<benchmark>_truncated: fraction}."""
    import eval as evaluation
    is_main = get_rank() == 0

    def gather(records):  # one copy of each record: the first rank of each TP group speaks for the group
        return [r for rank, part in enumerate(all_gather_objects(records)) if rank % tp == 0 for r in part]

    results = evaluation.evaluate(
        engine, tokenizer, args.eval_data.split(","), k=args.eval_k,
        out_dir=Path(args.out_dir) / f"eval-{done:06d}" if is_main else None, limit=args.eval_limit,
        temperature=args.eval_temperature, top_p=args.eval_top_p, max_tokens=args.max_response_len,
        template=args.template, seed=args.seed, workers=args.reward_workers,
        log=print if is_main else (lambda message: None),
        shard=(dp_rank, dp_world), gather=gather if distributed() else None)
    metrics = {}
    for name, summary in results.items():
        name = Path(name).name.split(".")[0]  # a file's stem (as eval.py names its folder): eval/heldout
        metrics[f"eval/{name}"] = summary[f"avg@{summary['k']}"]
        metrics[f"eval/{name}_truncated"] = summary["truncated_frac"]
    return metrics


# ------------------------------------------------------------------------------------------------------------
# The run
# ------------------------------------------------------------------------------------------------------------
def main(argv=None, engine=None):
    args = parse_args(argv)
    if args.dry_run:
        print(f"train.py: dry run ok ({args.preset or 'defaults'}): {json.dumps(vars(args))}")
        return None
    if args.device == "cuda":
        import torch
        if not torch.cuda.is_available():
            sys.exit("train.py: no CUDA GPU here. The GPU defaults need one; on a CPU machine run the demo:\n"
                     "  python demo.py")

    import torch
    from transformers import AutoTokenizer

    import grpo
    from rollout import make_engine

    rank, world = init_distributed(args.device)
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

    # ---- data --------------------------------------------------------------------------------------------
    problems = data.load_dataset(args.train_data, problem_field=args.problem_field, answer_field=args.answer_field)
    if args.contamination_check and is_main:
        hits = data.find_contamination(problems)
        if hits:
            print(f"train.py: WARNING: {len(hits)} training problems also appear in eval sets, e.g. {hits[:3]}")
    batcher = data.PromptBatcher(problems, args.batch_size, seed=args.data_seed, rank=dp_rank, world_size=dp_world)

    # ---- models, optimizer, checkpoint -------------------------------------------------------------------
    resume_ckpt = latest_checkpoint(args.resume) if args.resume else None
    if args.resume:
        args.out_dir = args.resume
    else:
        refuse_used_out_dir(args.out_dir, "train.py")
    os.makedirs(args.out_dir, exist_ok=True)
    source = str(resume_ckpt / "model") if resume_ckpt else args.stage_start
    tokenizer = AutoTokenizer.from_pretrained(source)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    think_prefilled = data.prompt_opens_think(tokenizer, args.template)  # R1-distill chat templates end in <think>
    # fp32 master weights; compute runs in --dtype under autocast
    policy = load_model(source, device, torch.float32, world, bool(args.fsdp_cpu_offload),
                        bool(args.gradient_checkpointing)).train()
    reference = None
    if args.kl_coef > 0:  # frozen copy of the stage's starting policy (also when resuming)
        reference = load_model(args.stage_start, device, dtype, world, bool(args.fsdp_cpu_offload))
        reference.eval().requires_grad_(False)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=args.lr, weight_decay=args.weight_decay, betas=(0.9, 0.999))
    start_step = 0
    if resume_ckpt:
        state = load_checkpoint(resume_ckpt, policy, optimizer)
        batcher.load_state_dict(state["batcher"])
        start_step = state["step"]
        if is_main:
            print(f"train.py: resumed {resume_ckpt} at step {start_step} (stage {args.stage}, KL reference "
                  f"{args.stage_start})")
    run_info = {"flags": vars(args)}  # with the stage's start, number and data seed: what --resume restores
    logger = Logger(args.out_dir, start_step if resume_ckpt else None, args.wandb, bool(args.tensorboard),
                    config=vars(args)) if is_main else None

    # ---- the engine: its first weights come from the trainer (no second read of the checkpoint) -------------
    if engine is None:
        max_model_len = args.max_model_len or args.max_prompt_len + args.max_response_len
        kwargs = {} if args.engine == "hf" else dict(gpu_memory_utilization=args.vllm_gpu_memory_utilization,
                                                     enforce_eager=bool(args.enforce_eager), load_format="dummy")
        if world > 1 and args.engine == "vllm":  # one engine per rank, inside this process
            kwargs.update(distributed_executor_backend="external_launcher", tensor_parallel_size=args.tensor_parallel_size)
        engine = make_engine(args.engine, source, tokenizer=tokenizer, dtype=args.dtype, seed=args.seed,
                             max_model_len=max_model_len, **kwargs)
    engine_dtype = getattr(engine, "dtype", None)   # push in the engine's dtype (bf16 on GPU)
    engine.update_weights(full_weights(policy, engine_dtype, device))
    max_prompt_tokens = min(args.max_prompt_len, getattr(engine, "max_model_len", 1 << 62) - 1)
    if args.eval_before_train and args.eval_data and start_step == 0:  # the starting point of the eval curve
        baseline = {"step": 0, **periodic_eval(engine, tokenizer, args, 0, dp_rank, dp_world, tp)}
        if is_main:
            logger.log(baseline)

    # ---- the loop ----------------------------------------------------------------------------------------
    for step in range(start_step, args.max_steps):
        times = {"start": time.perf_counter()}
        batch, prompts, skipped = next_prompts(batcher, tokenizer, args.template, max_prompt_tokens)
        if skipped and rank % tp == 0:
            print(f"train.py: WARNING: step {step + 1}: skipped {len(skipped)} problem(s) whose prompt is longer than "
                  f"{max_prompt_tokens} tokens (--max_prompt_len / the engine's context): {', '.join(skipped)}")

        # 1. generate: group_size responses per prompt from the current policy
        samples = generate(engine, prompts, args, step, dp_rank, dp_world)
        times["generate"] = time.perf_counter() - times["start"]

        # 2. score: 0/1 correctness (plus the optional format reward); truncated responses get 0
        t0 = time.perf_counter()
        rewards, correct, grading = score(samples, batch, args, think_prefilled)
        times["score"] = time.perf_counter() - t0

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
                               times, args, tp)

        # 7. periodic evaluation and checkpoints
        done = step + 1
        if args.eval_every and args.eval_data and (done % args.eval_every == 0 or done == args.max_steps):
            metrics.update(periodic_eval(engine, tokenizer, args, done, dp_rank, dp_world, tp))
            if is_main:
                with open(Path(args.out_dir) / "samples.jsonl", "a") as f:  # a few responses a person can read
                    for s, r in list(zip(samples, correct))[:: max(1, len(samples) // 4)][:4]:
                        f.write(json.dumps({"step": done, "response": s.text, "reward": r,
                                            "finish_reason": s.finish_reason}) + "\n")
        if is_main:
            logger.log(metrics)
            print(progress_line(metrics, args.max_steps), flush=True)
        if (args.save_every and done % args.save_every == 0) or done == args.max_steps:
            save_checkpoint(args.out_dir, done, policy, tokenizer, optimizer, args.keep_last,
                            {"batcher": batcher.state_dict()}, run_info)
    return policy


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # out of memory: say which knobs to turn
        if type(exc).__name__ == "OutOfMemoryError":
            sys.exit(f"train.py: out of GPU memory ({exc}).\nTurn down --micro_batch_tokens (activations), "
                     "--vllm_gpu_memory_utilization (vLLM's share), --max_response_len or --batch_size * --group_size "
                     "(rollout size); keep --gradient_checkpointing 1; --enforce_eager 1 saves vLLM's CUDA graphs.")
        raise
