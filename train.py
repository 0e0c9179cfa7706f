"""Strictly on-policy GRPO for math reasoning, with vLLM colocated on the trainer's GPU.

Read top to bottom, this file is the algorithm (defaults: AceMath-RL stage 1):

    for step in range(max_steps):
        problems   = next(batcher)                                     # batch_size prompts      (data.py)
        samples    = engine.generate(prompts, n=group_size)            # vLLM, current weights   (rollout.py)
        rewards    = score_problems(responses, problems)               # 0/1: math or code tests (reward.py)
        advantages = group_advantages(rewards, group_size)             # (r - mean) / std        (grpo.py)
        loss       = policy_loss(...) + kl_coef * KL(pi || pi_ref)     # clipped surrogate       (grpo.py)
        one optimizer step over the whole batch (micro-batched, global normalisation)
        engine.update_weights(policy.state_dict())                    # the next rollout is on-policy

    python train.py                                   # GPU, the defaults below
    python train.py --preset cpu_demo                 # CPU: tiny model learns a toy task (README quickstart)
    python train.py --resume out/run                  # continue a run exactly
    python train.py --init_from out/run/ckpt-000500 --max_response_len 16384 --group_size 16   # next stage
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
TOP_P = 1.0
LR = 3e-7                   # AdamW, constant
KL_COEF = 0.001             # k3 estimator; the reference model is loaded only when > 0
CLIP_LOW, CLIP_HIGH = 0.2, 0.2
LOSS_AGG = "token-mean"
GRAD_CLIP = 1.0
MICRO_BATCH_TOKENS = 32768  # padded tokens per forward/backward

PRESETS = {  # named bundles of flags; explicit flags on the command line win
    "cpu_demo": dict(model="out/tiny/model", train_data="out/tiny/task.jsonl", device="cpu", batch_size=16,
                     group_size=8, max_response_len=12, temperature=1.0, lr=2e-3, kl_coef=0.0, max_steps=30,
                     eval_data="", save_every=0, out_dir="out/cpu_demo", contamination_check=False,
                     max_model_len=256, micro_batch_tokens=8192, gradient_checkpointing=False,
                     vllm_gpu_memory_utilization=0.3),
}


def build_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    a = p.add_argument
    a("--preset", choices=sorted(PRESETS), help="a named bundle of flags (cpu_demo: the README's CPU quickstart)")
    g = p.add_argument_group("model and data")
    g.add_argument("--model", default=MODEL, help="hub id or local HF directory of the starting policy")
    g.add_argument("--init_from", default=None, help="start a new stage from a checkpoint dir's weights (fresh optimizer)")
    g.add_argument("--resume", default=None, help="continue the run in this out_dir from its latest checkpoint, exactly")
    g.add_argument("--train_data", default=TRAIN_DATA, help="shipped name(s), file(s) or hub:org/name[:split], comma-separated")
    g.add_argument("--problem_field", default="problem", help="column holding the problem (files / hub sets)")
    g.add_argument("--answer_field", default="answer", help="column holding the gold answer")
    g.add_argument("--template", default=TEMPLATE, choices=sorted(data.TEMPLATES),
                   help="prompt template: " + "; ".join(f"{k}: {v}" for k, v in data.TEMPLATES.items()))
    g.add_argument("--max_prompt_len", type=int, default=1024, help="prompts longer than this (tokens) are skipped")
    g.add_argument("--contamination_check", type=int, default=1, help="1: warn about training problems found in eval sets")
    g = p.add_argument_group("GRPO")
    g.add_argument("--batch_size", type=int, default=BATCH_SIZE, help="prompts per step")
    g.add_argument("--group_size", type=int, default=GROUP_SIZE, help="responses per prompt")
    g.add_argument("--max_response_len", type=int, default=MAX_RESPONSE_LEN, help="max generated tokens per response")
    g.add_argument("--temperature", type=float, default=TEMPERATURE, help="sampling temperature (the trainer uses the same)")
    g.add_argument("--top_p", type=float, default=TOP_P, help="nucleus sampling")
    g.add_argument("--lr", type=float, default=LR, help="AdamW learning rate (constant)")
    g.add_argument("--weight_decay", type=float, default=0.0, help="AdamW weight decay")
    g.add_argument("--kl_coef", type=float, default=KL_COEF, help="weight of KL(pi || pi_ref); 0 loads no reference model")
    g.add_argument("--kl_estimator", default="k3", choices=["k1", "k2", "k3"], help="per-token KL estimator (grpo.kl_penalty)")
    g.add_argument("--clip_low", type=float, default=CLIP_LOW, help="lower clip range: ratio >= 1 - clip_low")
    g.add_argument("--clip_high", type=float, default=CLIP_HIGH, help="upper clip range (DAPO clip-higher: e.g. 0.28)")
    g.add_argument("--loss_agg", default=LOSS_AGG, choices=["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"],
                   help="loss aggregation (grpo.aggregate)")
    g.add_argument("--norm_std", type=int, default=1, help="1: divide advantages by the group std (GRPO); 0: Dr. GRPO")
    g.add_argument("--grad_clip", type=float, default=GRAD_CLIP, help="max gradient norm")
    g.add_argument("--entropy_coef", type=float, default=0.0, help="entropy bonus weight")
    g.add_argument("--zero_truncated", type=int, default=0, help="1: truncated responses get advantage 0")
    g.add_argument("--skip_equal_groups", type=int, default=1, help="1: do not train on groups whose rewards are all equal (their advantage is 0)")
    g.add_argument("--tis_cap", type=float, default=0.0, help=">0: truncated importance weights min(pi/pi_vllm, cap) for the sampler mismatch")
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
    g.add_argument("--code_timeout_s", type=float, default=None, help="hard limit per code response, all its tests "
                   "(default code_reward.DEFAULT_TIMEOUT_S)")
    g = p.add_argument_group("run control")
    g.add_argument("--out_dir", default="out/run", help="checkpoints, metrics.jsonl, samples.jsonl")
    g.add_argument("--max_steps", type=int, default=500, help="optimizer steps")
    g.add_argument("--save_every", type=int, default=50, help="checkpoint every N steps (0: only at the end)")
    g.add_argument("--keep_last", type=int, default=3, help="checkpoints to keep")
    g.add_argument("--eval_every", type=int, default=50, help="evaluate every N steps (0: never)")
    g.add_argument("--eval_data", default="aime2024", help="eval benchmark(s) for periodic evaluation ('' for none)")
    g.add_argument("--eval_k", type=int, default=1, help="samples per eval problem")
    g.add_argument("--eval_limit", type=int, default=None, help="only the first N eval problems")
    g.add_argument("--seed", type=int, default=0, help="seed for data order, sampling and init")
    g.add_argument("--wandb", default="", help="wandb project name (logs there too when set and installed)")
    g.add_argument("--tensorboard", type=int, default=0, help="1: also write TensorBoard logs to out_dir/tb")
    g.add_argument("--dry_run", action="store_true", help="check flags and paths, load nothing, exit")
    return p


def parse_args(argv=None):
    """Flags -> namespace, with preset defaults, validated before anything heavy is loaded."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.preset:
        parser.set_defaults(**PRESETS[args.preset])
        args = parser.parse_args(argv)
    errors = []
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
    if args.temperature <= 0 or not 0 < args.top_p <= 1:
        errors.append("--temperature must be > 0 and --top_p in (0, 1]")
    if args.ppo_epochs < 1 or args.mini_batches < 1 or args.batch_size % args.mini_batches:
        errors.append("--ppo_epochs and --mini_batches must be >= 1 and divide the batch")
    if args.resume and args.init_from:
        errors.append("--resume continues a run; --init_from starts a new one: pick one")
    later = []  # in a dry run, paths an earlier recipe stage will create are noted, not errors
    if args.resume and not latest_checkpoint(args.resume):
        (later if args.dry_run else errors).append(f"--resume {args.resume}: no checkpoint found there")
    if args.init_from and not Path(args.init_from, "model").is_dir() and not Path(args.init_from, "config.json").exists():
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
    return args


# ------------------------------------------------------------------------------------------------------------
# Checkpoints: <out_dir>/ckpt-000100/{model/, trainer_state.pt}; written to a temp dir, then renamed (atomic)
# ------------------------------------------------------------------------------------------------------------
def latest_checkpoint(out_dir):
    ckpts = sorted(Path(out_dir).glob("ckpt-[0-9]*[0-9]"))
    return ckpts[-1] if ckpts else None


def save_checkpoint(out_dir, step, policy, tokenizer, optimizer, batcher, keep_last, world_size=1):
    """Model (HF format) + trainer state. With several ranks, model and optimizer state are gathered in full onto
    rank 0 (CPU) and only rank 0 writes: a checkpoint resumes with any number of ranks."""
    import torch
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                         get_optimizer_state_dict)
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    # optimizer state keyed by parameter name, in full: the same format for 1 or N ranks (a collective when N > 1)
    optim_state = get_optimizer_state_dict(policy, optimizer, options=options)
    model_state = None
    if world_size > 1:
        import torch.distributed as dist
        model_state = get_model_state_dict(policy, options=options)
        if dist.get_rank() != 0:
            return None
    final = Path(out_dir) / f"ckpt-{step:06d}"
    tmp = Path(out_dir) / f".tmp-ckpt-{step:06d}"
    shutil.rmtree(tmp, ignore_errors=True)
    policy.save_pretrained(tmp / "model", state_dict=model_state)  # HF format: loadable by transformers and vLLM
    tokenizer.save_pretrained(tmp / "model")
    torch.save({"step": step, "optimizer": optim_state, "batcher": batcher.state_dict(), "world_size": world_size,
                "rng": {"python": random.getstate(), "torch": torch.get_rng_state(),
                        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}},
               tmp / "trainer_state.pt")
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)                          # a crash before this line leaves the previous checkpoint intact
    for old in sorted(Path(out_dir).glob("ckpt-[0-9]*[0-9]"))[:-keep_last] if keep_last > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


# ------------------------------------------------------------------------------------------------------------
# Small helpers the loop uses
# ------------------------------------------------------------------------------------------------------------
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


# ------------------------------------------------------------------------------------------------------------
# Multi-GPU: torchrun sets RANK/WORLD_SIZE; one process per GPU, each with its own colocated vLLM engine
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


def shard_model(model, cpu_offload=False):
    """FSDP2: fully_shard every transformer block, then the root (embeddings, final norm, head). The root stays
    gathered from its forward until backward: grpo.token_logprobs projects hidden states through the head
    weight itself, after the model's forward has returned."""
    from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard
    kwargs = {"offload_policy": CPUOffloadPolicy()} if cpu_offload else {}
    for block in model.get_decoder().layers:
        fully_shard(block, **kwargs)
    fully_shard(model, reshard_after_forward=False, **kwargs)
    return model


def full_weights(model, dtype=None):
    """(name, full tensor) for every entry of the state dict, gathered one at a time from FSDP2 shards (a
    collective: every rank iterates in the same order), so peak extra memory is one tensor, not the model."""
    for name, tensor in model.state_dict().items():
        if hasattr(tensor, "full_tensor"):
            tensor = tensor.full_tensor()
        yield name, tensor.detach() if dtype is None else tensor.detach().to(dtype)


def all_reduce(values, op="sum"):
    """Sum (or max / min) a list of floats over ranks; identity when not distributed."""
    import torch
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t, op={"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}[op])
    return t.cpu().tolist()


class Logger:
    """metrics.jsonl (one JSON object per step), plus wandb / TensorBoard when asked and installed."""

    def __init__(self, args, resumed_step):
        self.path = Path(args.out_dir) / "metrics.jsonl"
        if resumed_step is not None and self.path.exists():  # drop lines from after the checkpoint we resume
            keep = [line for line in self.path.read_text().splitlines() if json.loads(line).get("step", 0) <= resumed_step]
            self.path.write_text("".join(line + "\n" for line in keep))
        self.wandb = self.tb = None
        if args.wandb:
            try:
                import wandb
                self.wandb = wandb.init(project=args.wandb, config=vars(args), dir=args.out_dir, resume="allow")
            except ImportError:
                print("train.py: --wandb given but wandb is not installed; logging to metrics.jsonl only")
        if args.tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
                self.tb = SummaryWriter(str(Path(args.out_dir) / "tb"))
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
                     "  python tests/tiny_model.py out/tiny --warmup && python train.py --preset cpu_demo")

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import eval as evaluation
    import grpo
    from reward import CODE_STAT_KEYS, format_reward, score_problems
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
    on_policy = args.ppo_epochs == 1 and args.mini_batches == 1

    # ---- data --------------------------------------------------------------------------------------------
    problems = data.load_dataset(args.train_data, problem_field=args.problem_field, answer_field=args.answer_field)
    if args.contamination_check and is_main:
        hits = data.find_contamination(problems)
        if hits:
            print(f"train.py: WARNING: {len(hits)} training problems also appear in eval sets, e.g. {hits[:3]}")
    batcher = data.PromptBatcher(problems, args.batch_size, seed=args.seed, rank=dp_rank, world_size=dp_world)

    # ---- models ------------------------------------------------------------------------------------------
    resume_ckpt = latest_checkpoint(args.resume) if args.resume else None
    if args.resume:
        args.out_dir = args.resume
    os.makedirs(args.out_dir, exist_ok=True)
    stage_start = args.model               # the weights this stage starts from (and the KL reference)
    if args.init_from:
        stage_start = str(Path(args.init_from) / "model") if Path(args.init_from, "model").is_dir() else args.init_from
    source = str(resume_ckpt / "model") if resume_ckpt else stage_start
    tokenizer = AutoTokenizer.from_pretrained(source)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    # fp32 master weights: at lr 3e-7 an update is ~1e-5 of a weight, far below bf16's resolution (~4e-3), so
    # bf16 weights would silently drop most updates. Compute runs in `--dtype` under autocast.
    policy = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32).to(device)
    if args.gradient_checkpointing:
        policy.gradient_checkpointing_enable()
        policy.config.use_cache = False
    policy.train()
    reference = None
    if args.kl_coef > 0:  # frozen copy of the stage's starting policy (also when resuming)
        reference = AutoModelForCausalLM.from_pretrained(stage_start, dtype=dtype).to(device).eval().requires_grad_(False)
    if world > 1:  # FSDP2 across ranks (the single-process path is untouched)
        shard_model(policy, bool(args.fsdp_cpu_offload))
        if reference is not None:
            shard_model(reference, bool(args.fsdp_cpu_offload))
    autocast = (torch.autocast(device.type, dtype=dtype) if dtype != torch.float32
                else contextlib.nullcontext())
    optimizer = torch.optim.AdamW(policy.parameters(), lr=args.lr, weight_decay=args.weight_decay, betas=(0.9, 0.999))

    start_step = 0
    if resume_ckpt:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict
        state = torch.load(resume_ckpt / "trainer_state.pt", weights_only=False)
        set_optimizer_state_dict(policy, optimizer, optim_state_dict=state["optimizer"],
                                 options=StateDictOptions(full_state_dict=True))
        batcher.load_state_dict(state["batcher"])
        random.setstate(state["rng"]["python"])
        torch.set_rng_state(state["rng"]["torch"])
        if state["rng"]["cuda"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
        start_step = state["step"]
        print(f"train.py: resumed {resume_ckpt} at step {start_step}")
    logger = Logger(args, start_step if resume_ckpt else None) if is_main else None

    if engine is None:
        max_model_len = args.max_model_len or args.max_prompt_len + args.max_response_len
        kwargs = {} if args.engine == "hf" else dict(gpu_memory_utilization=args.vllm_gpu_memory_utilization,
                                                     enforce_eager=bool(args.enforce_eager))
        if world > 1 and args.engine == "vllm":  # one engine per rank, inside this process
            kwargs.update(distributed_executor_backend="external_launcher", tensor_parallel_size=args.tensor_parallel_size)
        engine = make_engine(args.engine, source, tokenizer=tokenizer, dtype=args.dtype, seed=args.seed,
                             max_model_len=max_model_len, **kwargs)
    engine.update_weights(full_weights(policy))   # the engine starts from exactly the trainer's weights

    # ---- the loop ----------------------------------------------------------------------------------------
    from tqdm import tqdm
    bar = tqdm(range(start_step, args.max_steps), initial=start_step, total=args.max_steps, dynamic_ncols=True,
               disable=not is_main)
    # sampling seeds: a disjoint range per (step, rank) -- vLLM seeds sample j of prompt i with base + i * n + j
    seed_span = args.batch_size * args.group_size
    for step in bar:
        t_step = time.perf_counter()
        batch = next(batcher)
        prompts = [data.render_prompt(p["problem"], tokenizer, args.template) for p in batch]
        keep = [i for i, ids in enumerate(prompts) if len(ids) <= args.max_prompt_len]
        batch, prompts = [batch[i] for i in keep], [prompts[i] for i in keep]

        # 1. generate: group_size responses per prompt from the current policy
        t0 = time.perf_counter()
        samples = engine.generate(prompts, n=args.group_size, temperature=args.temperature, top_p=args.top_p,
                                  max_tokens=args.max_response_len,
                                  seed=args.seed * 1_000_000_007 + (step * dp_world + dp_rank) * seed_span)
        engine.sleep()
        t_generate = time.perf_counter() - t0

        # 2. score: 0/1 correctness (plus the optional format reward)
        t0 = time.perf_counter()
        grade_stats = {}
        correct = score_problems([s.text for s in samples], [p for p in batch for _ in range(args.group_size)],
                                 workers=args.reward_workers, timeout_s=args.reward_timeout_s,
                                 code_timeout_s=args.code_timeout_s, stats=grade_stats)
        rewards = torch.tensor(correct)
        if args.format_reward:
            rewards = rewards + torch.tensor([format_reward(s.text, args.format_reward) for s in samples])
        t_score = time.perf_counter() - t0

        # 3. advantages: group-relative, one value per response
        advantages = grpo.group_advantages(rewards, args.group_size, norm_std=bool(args.norm_std))
        truncated = torch.tensor([s.finish_reason == "length" for s in samples])
        if args.zero_truncated:
            advantages = torch.where(truncated, torch.zeros_like(advantages), advantages)
        grouped = rewards.view(-1, args.group_size)
        equal_groups = (grouped.max(1).values == grouped.min(1).values)
        # this rank's samples: all of them, or with tp > 1 its share of the groups its TP group generated together
        own = [i for i in range(len(samples)) if (i // args.group_size) % tp == rank % tp]
        train_idx = [i for i in own if not (args.skip_equal_groups and equal_groups[i // args.group_size])]

        # 4. one optimizer step on the whole batch (or ppo_epochs x mini_batches for off-policy experiments)
        t0 = time.perf_counter()
        lengths = [len(s.prompt_ids) + len(s.response_ids) for s in samples]
        # normalisers of the WHOLE batch: micro-batch losses then sum to the batch loss (grpo.aggregate)
        num_tokens, num_seqs = all_reduce([sum(len(samples[i].response_ids) for i in train_idx), len(train_idx)])
        norm = dict(num_tokens=num_tokens, num_seqs=num_seqs, max_len=args.max_response_len)
        old_logp = {}
        if not on_policy and num_seqs:  # pi_old for the ratio, computed once before any update
            with torch.no_grad():
                for mb in same_count_micro_batches(train_idx, lengths, args.micro_batch_tokens):
                    rows = mb or [0]
                    ids, attention, mask, _ = collate([samples[i] for i in rows], pad_id, device)
                    with autocast:
                        logp = grpo.token_logprobs(policy, ids, attention, args.temperature, args.logprob_chunk)
                    for row, i in enumerate(mb or []):
                        old_logp[i] = logp[row, :lengths[i] - 1]   # unpadded: micro-batches differ per pass
        acc = {"loss": 0.0, "pg_loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_frac": 0.0, "align_sum": 0.0,
               "align_max": 1.0, "max_abs_diff": 0.0, "approx_kl_old": 0.0, "tokens": 0}
        grad_norm, skipped = 0.0, False
        shuffler = random.Random(args.seed + step)
        for epoch in range(args.ppo_epochs if num_seqs else 0):  # nothing to learn from anywhere: no update
            order = list(train_idx)
            if not on_policy:
                shuffler.shuffle(order)
            mini_size = max(1, math.ceil(len(order) / args.mini_batches))
            for mini in [order[k * mini_size:(k + 1) * mini_size] for k in range(args.mini_batches)]:
                optimizer.zero_grad(set_to_none=True)
                mini_tokens, mini_seqs = all_reduce([sum(len(samples[i].response_ids) for i in mini), len(mini)])
                mini_norm = dict(norm, num_tokens=mini_tokens, num_seqs=mini_seqs)
                for mb in same_count_micro_batches(mini, lengths, args.micro_batch_tokens):
                    dummy = mb is None  # this rank has run out: a zero-weight pass keeps FSDP's collectives in step
                    mb = [train_idx[0] if train_idx else 0] if dummy else mb
                    ids, attention, mask, rollout_logp = collate([samples[i] for i in mb], pad_id, device)
                    if dummy:
                        mask.zero_()
                    with autocast:
                        logp, entropy = grpo.token_logprobs(policy, ids, attention, args.temperature,
                                                            args.logprob_chunk, with_entropy=True)
                    if on_policy:
                        old = logp.detach()  # ratio exactly 1: the gradient is the plain policy gradient
                    else:
                        old = torch.zeros_like(logp)
                        for row, i in enumerate(mb):
                            old[row, :lengths[i] - 1] = old_logp[i]
                    is_w, mismatch = grpo.rollout_correction(logp, rollout_logp, mask, cap=args.tis_cap or 1.0)
                    loss, stats = grpo.policy_loss(logp, old, advantages[mb].to(device), mask, args.clip_low,
                                                   args.clip_high, args.loss_agg, is_weights=is_w if args.tis_cap else None,
                                                   **mini_norm)
                    pg_loss = loss
                    kl = torch.zeros((), device=device)
                    if reference is not None:
                        with torch.no_grad(), autocast:
                            ref_logp = grpo.token_logprobs(reference, ids, attention, args.temperature, args.logprob_chunk)
                        kl = grpo.aggregate(grpo.kl_penalty(logp, ref_logp, args.kl_estimator), mask, args.loss_agg,
                                            **mini_norm)
                        loss = loss + args.kl_coef * kl
                    ent = grpo.aggregate(entropy, mask, args.loss_agg, **mini_norm)
                    if args.entropy_coef:
                        loss = loss - args.entropy_coef * ent
                    # FSDP averages gradients over ranks; the loss is already normalised globally, so undo the mean
                    (loss * world if world > 1 else loss).backward()
                    if dummy:
                        continue
                    n_tok = int(mask.sum())
                    acc["loss"] += loss.item()
                    acc["pg_loss"] += pg_loss.item()
                    acc["kl"] += kl.item()
                    acc["entropy"] += ent.item()
                    acc["clip_frac"] += stats["clip_frac"] * n_tok
                    acc["approx_kl_old"] += stats["approx_kl_old"] * n_tok
                    acc["align_sum"] += mismatch["align_mean"] * len(mb)
                    acc["align_max"] = max(acc["align_max"], mismatch["align_max"])
                    acc["max_abs_diff"] = max(acc["max_abs_diff"], mismatch["max_abs_diff"])
                    acc["tokens"] += n_tok
                grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), args.grad_clip)
                grad_norm = (grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm).item()
                finite = all_reduce([float(math.isfinite(grad_norm) and math.isfinite(acc["loss"]))], "min")[0] == 1.0
                if not finite:  # every rank decides the same
                    # never let a NaN/inf reach the weights (or, through the sync below, vLLM)
                    print(f"train.py: WARNING: step {step}: non-finite loss {acc['loss']} or grad norm {grad_norm}; "
                          f"update skipped")
                    optimizer.zero_grad(set_to_none=True)
                    skipped = True
                    continue
                optimizer.step()
        t_update = time.perf_counter() - t0

        # 5. sync: the next rollout must come from the weights we just made. Always push, even after a skipped
        # update: the level-2 sleep above discarded vLLM's copy. vLLM stays awake until the next generate.
        t_sync = engine.update_weights(full_weights(policy))

        # 6. log: sums and maxima over ranks, so the numbers describe the whole global batch
        resp_lens = [len(samples[i].response_ids) for i in own]
        own_groups = sorted({i // args.group_size for i in own})
        passes = max(1, args.ppo_epochs)
        (n_resp, reward_sum, correct_sum, equal_sum, n_groups, timeouts, invalid, len_sum, trunc_sum, loop_sum,
         n_trained, loss, pg_loss, kl, entropy, clip_sum, kl_old_sum, align_sum, n_tok) = all_reduce([
            len(own), rewards[own].sum().item(), sum(correct[i] for i in own), equal_groups[own_groups].float().sum().item(),
            len(own_groups), grade_stats.get("timeouts", 0) / tp, grade_stats.get("invalid_gold", 0) / tp, sum(resp_lens),
            truncated[own].float().sum().item(), sum(ends_in_loop(samples[i].response_ids) for i in own), len(train_idx),
            acc["loss"], acc["pg_loss"], acc["kl"], acc["entropy"], acc["clip_frac"], acc["approx_kl_old"],
            acc["align_sum"], acc["tokens"]])
        code_counts = all_reduce([grade_stats.get(key, 0) / tp for key in CODE_STAT_KEYS])  # code reward's counts
        len_max, align_max, max_diff, t_generate, t_score, t_update, t_sync = all_reduce(
            [max(resp_lens), acc["align_max"], acc["max_abs_diff"], t_generate, t_score, t_update, t_sync], "max")
        metrics = {
            "step": step + 1,
            "reward/mean": reward_sum / n_resp,
            "reward/accuracy": correct_sum / n_resp,
            "reward/equal_group_frac": equal_sum / n_groups,
            "reward/grader_timeouts": int(timeouts),
            "reward/invalid_gold": int(invalid),
            **{f"reward/{key}": int(count) for key, count in zip(CODE_STAT_KEYS, code_counts)},
            "response/length_mean": len_sum / n_resp,
            "response/length_max": int(len_max),
            "response/truncated_frac": trunc_sum / n_resp,
            "response/repetition_frac": loop_sum / n_resp,
            "policy/loss": loss / passes,
            "policy/pg_loss": pg_loss / passes,
            "policy/kl_ref": kl / passes,
            "policy/entropy": entropy / passes,
            "policy/clip_frac": clip_sum / max(n_tok, 1),
            "policy/approx_kl_old": kl_old_sum / max(n_tok, 1),
            "policy/grad_norm": grad_norm,
            "policy/skipped": int(skipped),
            "policy/trained_frac": n_trained / n_resp,
            "rollout/align_mean": align_sum / (n_trained * passes) if n_trained else 1.0,
            "rollout/align_max": align_max,
            "rollout/max_abs_logp_diff": max_diff,
            "time/generate": t_generate, "time/score": t_score, "time/update": t_update, "time/sync": t_sync,
            "time/step": time.perf_counter() - t_step,
            "perf/tokens_per_s": len_sum / max(t_generate, 1e-9),
        }
        if torch.cuda.is_available() and device.type == "cuda":
            metrics["memory/peak_gb"] = all_reduce([torch.cuda.max_memory_allocated() / 2**30], "max")[0]
            torch.cuda.reset_peak_memory_stats()
        bar.set_postfix_str(f"reward {metrics['reward/mean']:.3f} len {metrics['response/length_mean']:.0f} "
                            f"align {metrics['rollout/align_mean']:.4f}")

        # 7. periodic evaluation and checkpoints
        done = step + 1
        if is_main and args.eval_every and args.eval_data and (done % args.eval_every == 0 or done == args.max_steps):
            results = evaluation.evaluate(engine, tokenizer, args.eval_data.split(","), k=args.eval_k,
                                          out_dir=Path(args.out_dir) / f"eval-{done:06d}", limit=args.eval_limit,
                                          temperature=evaluation.TEMPERATURE, top_p=evaluation.TOP_P,
                                          max_tokens=args.max_response_len, template=args.template, seed=args.seed,
                                          workers=args.reward_workers, log=lambda m: bar.write(m))
            for name, summary in results.items():
                metrics[f"eval/{name}"] = summary[f"avg@{summary['k']}"]
                metrics[f"eval/{name}_truncated"] = summary["truncated_frac"]
            with open(Path(args.out_dir) / "samples.jsonl", "a") as f:  # a few responses a person can read
                for s, r in list(zip(samples, correct))[:: max(1, len(samples) // 4)][:4]:
                    f.write(json.dumps({"step": done, "response": s.text, "reward": r,
                                        "finish_reason": s.finish_reason}) + "\n")
        if is_main:
            logger.log(metrics)
        if (args.save_every and done % args.save_every == 0) or done == args.max_steps:
            save_checkpoint(args.out_dir, done, policy, tokenizer, optimizer, batcher, args.keep_last, world)
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
