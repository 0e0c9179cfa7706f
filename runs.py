"""A run's folder: checkpoints, the flags a resume restores, and the metrics log.

    <out_dir>/ckpt-000100/model/             the policy in Hugging Face format (transformers and vLLM load it)
    <out_dir>/ckpt-000100/optimizer/         AdamW's state, sharded (torch.distributed.checkpoint): newest only
    <out_dir>/ckpt-000100/trainer_state.pt   data cursor, RNG states, step
    <out_dir>/ckpt-000100/run.json           the run's flags: what --resume restores
    <out_dir>/ckpt-000100/adapter/           LoRA runs only: the adapters in PEFT's format (model/ is then the
                                             merged model; lora.py)
    <out_dir>/metrics.jsonl                  one JSON object per step (plot.py reads it)
    <out_dir>/samples.jsonl                  a few responses per evaluation, for a person to read
    <out_dir>/wandb_run_id                   with --wandb: the W&B run that --resume continues

A checkpoint is written to a temporary folder and renamed into place, so a crash mid-save leaves the previous one
intact. Shared by train.py and sft.py. Sizes, per parameter of the policy (printed at the start of a run,
checkpoint_note; 7.6B = Qwen2.5-7B / R1-Distill-7B):

    model/       fp32 weights, 4 bytes (LoRA: the merged model in the base's dtype + fp32 adapters)   7B: 30 GB
    optimizer/   AdamW's two fp32 moments, 8 bytes per trained parameter, in the NEWEST checkpoint    7B: 61 GB
                 only: a resume starts from the newest, and an older checkpoint serves only as weights
                 (eval.py, --init_from, which starts a fresh optimizer)
    on disk      --keep_last K: K x model/ + one optimizer/; while a checkpoint is written, one more of each
                 (7B, K = 3: 152 GB, 244 GB at a save; it was 4 x 91 = 365 GB with the state in every one)

Written by every rank at once: optimizer/ is torch.distributed.checkpoint's format, each rank writing its own
FSDP2 shard in parallel (no rank gathers the 8 bytes/parameter, none waits for one that does), and reading back
only the pieces of its current shard, so a run resumes on another number of ranks (DCP reshards at load). model/
is gathered on rank 0's CPU and written there (Hugging Face format is one set of full tensors). Several nodes need
out_dir on a filesystem they all see (each rank writes its shard there, and reads it back on resume).
"""
import argparse
import contextlib
import json
import os
import random
import shutil
import sys
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict, get_optimizer_state_dict,
                                                     set_optimizer_state_dict)

import lora
from distributed import broadcast_object, distributed, get_rank


def resume_flags(args, build_parser, argv, ckpt, run_control, *, script):
    """--resume: the run's own flags (ckpt/run.json) replace this invocation's defaults, so a run continues as it
    began. A flag that changes what is learned, given on the command line with another value than the run's, is
    refused; `run_control` names the flags a resume may change (when to stop, save, evaluate; memory knobs)."""
    run = read_run_info(ckpt)
    if run is None:
        sys.exit(f"{script}: --resume: {ckpt} has no run.json, so the run's flags are unknown. Start a new stage "
                 f"from its weights with --init_from {ckpt}")
    parser = build_parser()
    for action in parser._actions:  # what was given on the command line itself: no defaults
        action.default = argparse.SUPPRESS
    explicit = vars(parser.parse_args(argv))
    conflicts = []
    for key, value in run["flags"].items():
        if key in ("resume", "out_dir", "dry_run"):
            continue
        if key in explicit and key not in run_control and explicit[key] != value:
            conflicts.append(f"--{key} {explicit[key]} (the run has {value})")
        elif key not in explicit:
            setattr(args, key, value)
    if conflicts:
        sys.exit(f"{script}: --resume {args.resume}: these flags change what is learned and differ from the run's: "
                 f"{'; '.join(conflicts)}. Leave them out to continue the run, or start a new stage with "
                 f"--init_from {ckpt}. Flags a resume may change: {', '.join(sorted(run_control))}")


def start_stage(args, init_from):
    """A new run, or a new stage from a checkpoint (`init_from`; train.py's --init_from, sft.py's --model): sets
    args.stage (1, or the checkpoint's stage + 1), args.stage_start (the weights it starts from: its KL reference)
    and, unless given, args.data_seed = seed + stage - 1, so a new stage does not replay the last one's order."""
    args.stage, args.stage_start = 1, args.model
    if init_from:
        previous = read_run_info(init_from) if Path(init_from, "run.json").exists() else None
        args.stage = previous["flags"].get("stage", 1) + 1 if previous else 2
        args.stage_start = str(Path(init_from) / "model") if Path(init_from, "model").is_dir() else init_from
    if args.data_seed is None:
        args.data_seed = args.seed + args.stage - 1


def inherit_template(args, build_parser, argv, init_from, script, *, log=print):
    """A new stage from a checkpoint of this project (train.py --init_from, sft.py --model) asks its prompts the
    way the checkpoint was trained to read them: without --template on the command line, the checkpoint's own
    (its run.json) replaces the default, and this is said. A --template given with another value is used (a
    stage may change it on purpose: AceReason's code stages follow its math stages), with a warning."""
    previous = read_run_info(init_from) if init_from and Path(init_from, "run.json").exists() else None
    theirs = previous["flags"].get("template") if previous else None
    if theirs is None or theirs == args.template:
        return
    parser = build_parser()
    for action in parser._actions:  # what was given on the command line itself: no defaults
        action.default = argparse.SUPPRESS
    if "template" in vars(parser.parse_args(argv)):
        log(f"{script}: WARNING: --template {args.template}, but {init_from} was trained with --template {theirs}: "
            f"its prompts will look different from the ones it learned on")
    else:
        log(f"{script}: --template {theirs}, as {init_from} was trained (its run.json); give --template to change it")
        args.template = theirs


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
    """{"flags": {...}} stored with a checkpoint (run.json), or None where there is none (a plain model folder)."""
    path = Path(ckpt) / "run.json"
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        sys.exit(f"{path} is not valid JSON ({exc}): restore it from a copy")


def save_checkpoint(out_dir, step, model, tokenizer, optimizer, *, keep_last, trainer_state=None,
                    run_info=None):
    """Model (HF format) + optimizer (sharded, every rank writing its own) + `trainer_state` (small picklable dict:
    data cursor, ...) + run.json (the run's flags); then the optimizer state leaves the older checkpoints and all
    but the newest `keep_last` go (module docstring). A collective: every rank calls it. Returns the checkpoint
    dir (None off rank 0)."""
    final = Path(out_dir) / f"ckpt-{step:06d}"
    tmp = Path(out_dir) / f".tmp-ckpt-{step:06d}"
    if get_rank() == 0:
        shutil.rmtree(tmp, ignore_errors=True)
    if distributed():
        dist.barrier()   # the folder is clean before any rank writes its shard into it
    # each rank writes its own shard of the optimizer state (FSDP2 DTensors; plain tensors on one process); when
    # save returns, every rank's file and the metadata are written
    with _plain_errors():
        dcp.save({"optimizer": get_optimizer_state_dict(model, optimizer)}, checkpoint_id=tmp / "optimizer",
                 no_dist=not dist.is_initialized())
    model_state = None
    if distributed() or any(hasattr(p, "full_tensor") for p in model.parameters()):  # FSDP2 (a one-rank group too)
        model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if get_rank() != 0:
            return None
    if lora.is_lora(model):  # adapter/ (PEFT format) and the merged model/ (lora.py)
        lora.save(model, tmp, model_state)
    else:
        model.save_pretrained(tmp / "model", state_dict=model_state)  # HF format: loadable by transformers and vLLM
    tokenizer.save_pretrained(tmp / "model")
    torch.save({"step": step, **(trainer_state or {}), "world_size": int(os.environ.get("WORLD_SIZE", "1")),
                "rng": {"python": random.getstate(), "torch": torch.get_rng_state(),
                        # this device's only: a list of every visible GPU's would not load where fewer are visible
                        "cuda": torch.cuda.get_rng_state() if torch.cuda.is_available() else None}},
               tmp / "trainer_state.pt")
    if run_info is not None:
        (tmp / "run.json").write_text(json.dumps(run_info, indent=1, sort_keys=True))
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)                          # a crash before this line leaves the previous checkpoint intact
    ckpts = sorted(Path(out_dir).glob("ckpt-[0-9]*[0-9]"))
    for old in ckpts[:-keep_last] if keep_last > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    for old in ckpts[:-1]:  # a resume starts from the newest: the others keep their weights only
        shutil.rmtree(old / "optimizer", ignore_errors=True)
    return final


@contextlib.contextmanager
def _plain_errors():
    """DCP reports a rank's failure wrapped in a CheckpointException, a BaseException (no `except Exception` sees
    it): raise the first rank's own error instead (a full disk is an OSError), chained to DCP's report. And no
    warning that one process is one process (DCP gives it even when told so with no_dist)."""
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")
            yield
    except dcp.CheckpointException as exc:
        raise next(iter(exc.failures.values()))[0] from exc


def load_checkpoint(ckpt, model, optimizer):
    """Restore the optimizer state and RNGs saved by save_checkpoint into `optimizer` (built over `model`, whose
    weights load_model already read from ckpt/model). Returns the trainer state dict (step, data cursor, ...),
    the same on every rank. Each rank reads the pieces of optimizer/ its own shard needs (DCP: any number of
    ranks); only rank 0 reads trainer_state.pt."""
    state = torch.load(Path(ckpt) / "trainer_state.pt", weights_only=False) if get_rank() == 0 else {}
    optimizer.zero_grad(set_to_none=True)  # torch initializes the state to load into only where no gradient is set
    if Path(ckpt, "optimizer").is_dir():
        # a state dict of the right shapes and shards to load into (get_optimizer_state_dict initializes AdamW's
        # state with a zero-gradient step at lr 0: torch's _init_optim_state), filled from disk, then applied
        sharded = {"optimizer": get_optimizer_state_dict(model, optimizer)}
        with _plain_errors():
            dcp.load(sharded, checkpoint_id=Path(ckpt) / "optimizer", no_dist=not dist.is_initialized())
        set_optimizer_state_dict(model, optimizer, optim_state_dict=sharded["optimizer"])
    else:
        sys.exit(f"{ckpt} holds no optimizer state (only the newest checkpoint of a run keeps it): resume from the "
                 f"run's newest checkpoint, or start a new stage from these weights with --init_from {ckpt}")
    state = broadcast_object(state)
    random.setstate(state["rng"]["python"])
    torch.set_rng_state(state["rng"]["torch"])
    if state["rng"]["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["rng"]["cuda"])  # the current device (distributed.init_distributed set it)
    return state


def checkpoint_note(model, keep_last, save_every, script):
    """One line for the start of a run: what each checkpoint will weigh on disk (module docstring)."""
    params = {id(p): p for p in model.parameters()}.values()   # a tied head counts once, as it is saved
    trained = sum(p.numel() for p in params if p.requires_grad)
    weights = sum(p.numel() * p.element_size() for p in params)  # LoRA: frozen base in its dtype + fp32 adapters
    optim = 8 * trained                                          # AdamW: exp_avg + exp_avg_sq in fp32
    gb = lambda n: f"{n / 1e9:.1f} GB"  # noqa: E731
    disk = (f"with --keep_last {keep_last}: {gb(keep_last * weights + optim)} on disk, "
            f"{gb((keep_last + 1) * weights + 2 * optim)} while the next is written") if keep_last > 0 else \
        "--keep_last 0 keeps every checkpoint"
    return (f"{script}: checkpoints ({f'every {save_every} steps and ' if save_every else ''}at the end): weights "
            f"{gb(weights)} each (model/), AdamW state {gb(optim)} in the newest only (optimizer/); {disk}")


def wandb_run_id(out_dir, resumed, wandb_module):
    """The W&B run id of this run, kept in out_dir/wandb_run_id: a resumed run continues its W&B run (one curve
    per run, not one per --resume); a new run gets a new id. W&B ignores a step at or below the last one it has,
    so for the steps a resume repeats after its checkpoint (fewer than --save_every) it keeps what the interrupted
    run logged; metrics.jsonl holds the resumed run's."""
    path = Path(out_dir) / "wandb_run_id"
    if resumed and path.exists():
        return path.read_text().strip()
    run_id = wandb_module.util.generate_id()
    path.write_text(run_id + "\n")
    return run_id


class Logger:
    """metrics.jsonl (one JSON object per step) and samples.jsonl (responses to read), plus wandb / TensorBoard
    when asked and installed. resumed_step: drop the lines both files got after that step (the resumed run writes
    those steps again)."""

    def __init__(self, out_dir, resumed_step=None, wandb="", tensorboard=False, config=None):
        self.path, self.samples_path = Path(out_dir) / "metrics.jsonl", Path(out_dir) / "samples.jsonl"
        for path in (self.path, self.samples_path):
            if resumed_step is not None and path.exists():
                keep = [line for line in path.read_text().splitlines() if json.loads(line)["step"] <= resumed_step]
                path.write_text("".join(line + "\n" for line in keep))
        self.wandb = self.tb = None
        if wandb:
            try:
                import wandb as wandb_module
                self.wandb = wandb_module.init(project=wandb, config=config, dir=str(out_dir), resume="allow",
                                               id=wandb_run_id(out_dir, resumed_step is not None, wandb_module))
            except ImportError:
                print("--wandb given but wandb is not installed; logging to metrics.jsonl only")
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
                self.tb = SummaryWriter(str(Path(out_dir) / "tb"))
            except ImportError:
                print("--tensorboard given but tensorboard is not installed")

    def log(self, metrics):
        with open(self.path, "a") as f:
            f.write(json.dumps(metrics) + "\n")
        if self.wandb:
            self.wandb.log(metrics, step=metrics["step"])
        if self.tb:
            for key, value in metrics.items():
                if isinstance(value, (int, float)):
                    self.tb.add_scalar(key, value, metrics["step"])

    def log_samples(self, step, samples, rewards, count=4):
        """`count` responses spread over the batch, with their rewards, to samples.jsonl."""
        with open(self.samples_path, "a") as f:
            for s, r in list(zip(samples, rewards))[:: max(1, len(samples) // count)][:count]:
                f.write(json.dumps({"step": step, "response": s.text, "reward": r, "finish_reason": s.finish_reason}) + "\n")


