"""LoRA (Hu et al., 2021) through PEFT: train.py / sft.py --lora_rank R trains low-rank adapters on a frozen base.

    W x  ->  W x + (alpha / R) * B A x          W [out, in] frozen, A [R, in] (Kaiming), B [out, R] (zeros)

so the first forward equals the base model exactly. Defaults follow "LoRA Without Regret" (Schulman et al., 2025):
every linear layer of attention and MLP (PEFT's "all-linear": all nn.Linear but the output head), dropout 0,
alpha 32, and a learning rate ~10x full fine-tuning's. Our own study: `python demo.py --preset lora` (results in the
README and docs/modules.md).

Memory, the point of it (bytes per parameter of each mode: distributed.py's table, bench.py memory):
- the base weights stay in the compute dtype (--dtype: bf16 on GPU), frozen: no fp32 master copy, no gradient,
  no Adam state; the adapters and their Adam moments are fp32 (distributed.optimizer_step touches trainable
  parameters only);
- the KL reference is the same model with its adapters switched off (adapters_disabled): no second model;
- FSDP2 shards base and adapters together (each block mixes bf16 and fp32 tensors: fully_shard all-gathers
  mixed dtypes as bytes; gradients exist only for the fp32 adapters).

Sync to vLLM (merged_weights; distributed.full_weights calls it for a LoRA model): every tensor of the base
model, with W' = W + scale * B A computed out of place in fp32 and rounded to the base's dtype (merged_weight), so
vLLM generates at full speed with no LoRA kernels. rollout.py's docstring says why this and not vLLM's LoRA path.
Merging in place (PEFT's merge_adapter / unmerge_adapter, as TRL does) would round W + dW - dW in bf16 and walk the
frozen base away from itself a little at every step; out of place it never changes.
The trainer computes with the same W' (_MergedLinear replaces PEFT's forward, W x + scale * B A x): in bf16 PEFT's
forward differs from bf16(W + scale B A) by the merge's rounding (docs/modules.md has the measurement), ours not at
all (tests/test_lora.py). Its backward
uses the low-rank formulas, so LoRA's saving stands: no [out, in] weight gradient is formed.

A LoRA checkpoint (runs.save_checkpoint -> save):
    ckpt-N/adapter/   adapter_config.json + adapter_model.safetensors (fp32): PEFT's format, which PEFT,
                      transformers and vLLM (--enable-lora) load; base_model_name_or_path = the stage's base
    ckpt-N/model/     the merged model in the base's dtype, Hugging Face format: what eval.py, vLLM, transformers
                      and --init_from load, exactly like a full fine-tuning checkpoint
--resume rebuilds the base from the run's stage start (--model, or --init_from's model/) and loads the fp32
adapters from ckpt-N/adapter: exact. --init_from a LoRA checkpoint starts a new stage on its merged model/ (the
new base and KL reference) with fresh adapters, as a new stage of full fine-tuning starts from the last weights.
"""
import types
from pathlib import Path

import torch

DEFAULT_TARGETS = "all-linear"   # PEFT's shorthand: every nn.Linear except the output head
LORA_ALPHA = 32.0


def add_flags(group):
    """--lora_rank / --lora_alpha / --lora_targets on an argparse group (train.py and sft.py)."""
    group.add_argument("--lora_rank", type=int, default=0, help="0: full fine-tuning (fp32 master weights). R > 0: "
                       "train rank-R LoRA adapters (PEFT) on the frozen base held in --dtype; the KL reference is the "
                       "same model with adapters off; checkpoints hold adapter/ (PEFT format) and the merged model/ "
                       "(lora.py). Use a learning rate 3-10x full fine-tuning's (README, LoRA study)")
    group.add_argument("--lora_alpha", type=float, default=LORA_ALPHA, help="LoRA scale alpha: the update is "
                       "(alpha / rank) * B A. Changing the rank at fixed alpha changes the effective step size")
    group.add_argument("--lora_targets", default=None, help="comma-separated module names to adapt (a name matches "
                       "a module whose path ends with it, e.g. q_proj,v_proj), or all-linear (the default: every "
                       "linear layer of attention and MLP, not the output head). Needs --lora_rank > 0")


def check_flags(args):
    """Problems with the LoRA flags that need no model (list of messages for parser.error)."""
    errors = []
    if args.lora_rank < 0 or (args.lora_rank == 0 and args.lora_targets):
        errors.append(f"--lora_rank {args.lora_rank}: must be > 0 to train LoRA adapters"
                      + (f" on --lora_targets {args.lora_targets}" if args.lora_targets else "")
                      + " (0, the default, is full fine-tuning and takes no --lora_targets)")
    if args.lora_alpha <= 0:
        errors.append(f"--lora_alpha {args.lora_alpha}: must be > 0")
    if args.lora_targets is not None and not [t for t in args.lora_targets.split(",") if t.strip()]:
        errors.append("--lora_targets is empty: name modules (e.g. q_proj,v_proj) or leave it out (all-linear)")
    if args.lora_rank > 0 and getattr(args, "fsdp_param_dtype", "auto") == "bfloat16":
        errors.append("--fsdp_param_dtype bfloat16 with --lora_rank: the frozen base is already in --dtype, and the "
                      "adapters stay fp32 because the merged push uses them so (the trainer's forward is the "
                      "engine's exactly); leave --fsdp_param_dtype at auto")
    return errors


def target_modules(model, targets):
    """The names of `model`'s modules that --lora_targets selects. Raises ValueError naming the flag when a name
    matches no linear layer (a typo would otherwise train nothing, or PEFT's error would not name the flag)."""
    head = model.get_output_embeddings()
    linear = [name for name, m in model.named_modules() if isinstance(m, torch.nn.Linear) and m is not head]
    if (targets or DEFAULT_TARGETS).strip().lower() == DEFAULT_TARGETS:
        return linear
    wanted = [t.strip() for t in targets.split(",") if t.strip()]
    unmatched = [t for t in wanted if not any(n == t or n.endswith("." + t) for n in linear)]
    if unmatched:
        kinds = sorted({n.rsplit(".", 1)[-1] for n in linear})
        raise ValueError(f"--lora_targets {targets}: {', '.join(unmatched)} match(es) no linear layer of the model "
                         f"(the output head is never a target). Its linear layers: {', '.join(kinds)}")
    return [n for n in linear if any(n == t or n.endswith("." + t) for t in wanted)]


def check_targets(model, targets):
    """[] or the message of target_modules for the model at `model` (a HF directory or a checkpoint with model/),
    built on the meta device from its config: before anything loads or is written. A model whose config cannot be
    read here (a hub id offline) is checked when it loads instead."""
    from transformers import AutoConfig, AutoModelForCausalLM
    path = Path(model) / "model" if Path(model, "model", "config.json").exists() else model
    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError):
        return []
    with torch.device("meta"):
        meta = AutoModelForCausalLM.from_config(config)
    try:
        target_modules(meta, targets)
    except ValueError as exc:
        return [str(exc)]
    return []


def wrapper(args, adapter_dir=None):
    """A function model -> PeftModel for distributed.load_model(wrap=...): rank-R adapters on every targeted linear
    layer, the base frozen in its loaded dtype, the adapters fp32. adapter_dir: load the adapters saved there
    (resume) instead of initialising them (B = 0). Applied to a real model and to a meta-device one alike."""
    from peft import LoraConfig, get_peft_model, set_peft_model_state_dict
    from peft.tuners.lora import Linear as LoraLinear
    from safetensors.torch import load_file

    def wrap(model):
        names = target_modules(model, args.lora_targets)
        config = LoraConfig(r=args.lora_rank, lora_alpha=args.lora_alpha, lora_dropout=0.0, bias="none",
                            target_modules=names, task_type="CAUSAL_LM")
        with torch.random.fork_rng(devices=[]):   # A's init depends on --seed alone (1 rank = N ranks, resume)
            torch.manual_seed(args.seed)
            model = get_peft_model(model, config, autocast_adapter_dtype=True)
        for p in model.parameters():
            if p.requires_grad:
                p.data = p.data.float()           # adapters (and so their gradients and Adam state) in fp32
        for module in model.modules():            # compute with the merged weights the engine gets
            if isinstance(module, LoraLinear):
                module.forward = types.MethodType(_engine_exact_forward, module)
        if adapter_dir is not None and not any(p.is_meta for p in model.parameters()):
            result = set_peft_model_state_dict(model, load_file(str(Path(adapter_dir) / "adapter_model.safetensors")))
            if getattr(result, "unexpected_keys", None):
                raise ValueError(f"{adapter_dir}: adapter tensors the model does not have: {result.unexpected_keys[:3]}")
        return model

    return wrap


def merged_weight(weight, lora_a, lora_b, scale):
    """W + scale * B A in fp32, rounded to W's dtype: the one formula of both the trainer's forward and the push to
    vLLM (merge), so both compute with the same weights, bit for bit (autocast off: B A must not round to bf16)."""
    with torch.autocast(weight.device.type, enabled=False):
        return (weight.float() + scale * (lora_b.float() @ lora_a.float())).to(weight.dtype)


class _MergedLinear(torch.autograd.Function):
    """y = x W'^T + bias with W' = merged_weight(W, A, B, scale): the weights the engine generates with (a bf16
    base plus an unmerged fp32 B A x, PEFT's own forward, differs from bf16(W + scale B A) by the rounding of the
    merge, up to half a bf16 step per weight, which would loosen the sampler/trainer alignment). Gradients reach
    A and B by the low-rank formulas (as if W' were W + scale B A: the rounding passes straight through), so no
    [out, in] weight gradient is ever formed and W' is rebuilt in backward instead of saved:
        dx = dy W',   dB = scale dy^T (x A^T),   dA = scale (dy B)^T x        (in fp32)"""

    @staticmethod
    def forward(ctx, x, weight, bias, lora_a, lora_b, scale):   # positional: Function.apply takes no keywords
        ctx.save_for_backward(x, weight, lora_a, lora_b)
        ctx.scale = scale
        return torch.nn.functional.linear(x, merged_weight(weight, lora_a, lora_b, scale), bias)

    @staticmethod
    def backward(ctx, dy):
        x, weight, lora_a, lora_b = ctx.saved_tensors
        w = merged_weight(weight, lora_a, lora_b, ctx.scale)
        dx = (dy.to(w.dtype) @ w).to(x.dtype) if ctx.needs_input_grad[0] else None
        dy2, x2 = dy.reshape(-1, dy.shape[-1]).float(), x.reshape(-1, x.shape[-1]).float()
        d_b = ctx.scale * dy2.t() @ (x2 @ lora_a.float().t())
        d_a = ctx.scale * (dy2 @ lora_b.float()).t() @ x2
        return dx, None, None, d_a.to(lora_a.dtype), d_b.to(lora_b.dtype), None


def _engine_exact_forward(self, x, *args, **kwargs):
    """peft.tuners.lora.Linear.forward with the adapters on: _MergedLinear (what the engine computes)."""
    if self.disable_adapters or self.merged:
        return self.base_layer(x, *args, **kwargs)
    base = self.base_layer
    x = x.to(base.weight.dtype) if not torch.is_autocast_enabled(x.device.type) else x
    return _MergedLinear.apply(x, base.weight, base.bias, self.lora_A["default"].weight,
                               self.lora_B["default"].weight, self.scaling["default"])


def is_lora(model):
    return hasattr(model, "peft_config")


class adapters_disabled:
    """The KL reference of a LoRA policy: the same model with its adapters switched off (PEFT's disable_adapter),
    which computes exactly the base model. Quacks like the model for logprobs.token_logprobs."""

    def __init__(self, model):
        self.model = model

    def __call__(self, *args, **kwargs):
        with self.model.disable_adapter():
            return self.model(*args, **kwargs)

    def get_decoder(self):
        return self.model.get_decoder()

    def get_output_embeddings(self):
        return self.model.get_output_embeddings()


def _base_name(name):
    """PEFT's state-dict name -> the base model's (what vLLM, transformers and the merged export use)."""
    return name.removeprefix("base_model.model.").replace(".base_layer.", ".")


def merge(named_tensors, scalings, dtype=None):
    """(name, full tensor) of a PeftModel's state dict -> (base name, tensor) of the merged model: each adapted
    weight becomes W + scale * B A, computed in fp32 and cast to `dtype` (default: W's), every other tensor is
    passed on (cast to `dtype`). scalings: {module name: alpha / rank}. Streams: it holds one layer's W, A, B.
    A module's W comes before its A and B in the state dict (PEFT registers base_layer first)."""
    pending = {}
    for name, tensor in named_tensors:
        for part in ("base_layer.weight", "lora_A.default.weight", "lora_B.default.weight"):
            if name.endswith("." + part):
                module = name[:-len(part) - 1]
                pending.setdefault(module, {})[part.split(".")[0]] = tensor
                break
        else:
            yield _base_name(name), tensor if dtype is None else tensor.to(dtype)
            continue
        parts = pending[module]
        if len(parts) == 3:
            del pending[module]
            w, a, b = parts["base_layer"], parts["lora_A"], parts["lora_B"]
            merged = merged_weight(w, a, b, scalings[module])   # the trainer's forward computes with these
            yield _base_name(module + ".weight"), merged if dtype is None else merged.to(dtype)
    if pending:
        raise RuntimeError(f"LoRA merge: incomplete layers {sorted(pending)[:3]}")


def scalings(model):
    """{state-dict module name: alpha / rank} of every adapted layer of a PeftModel."""
    from peft.tuners.lora import LoraLayer
    return {name: module.scaling["default"] for name, module in model.named_modules() if isinstance(module, LoraLayer)}


def merged_weights(model, dtype=None, device=None):
    """The merged model's (name, full tensor), streamed for engine.update_weights (distributed.full_weights): under
    FSDP2 each tensor is gathered when asked for (a collective: every rank iterates in the same order); A and B
    are gathered in fp32 and W in its own dtype, merged, then cast to `dtype` (the engine's)."""
    def gathered():
        for name, tensor in model.state_dict().items():
            if hasattr(tensor, "full_tensor"):
                tensor = (tensor.to(device) if device is not None else tensor).full_tensor()
            yield name, tensor.detach()
    yield from merge(gathered(), scalings(model), dtype)


def save(model, out, state_dict=None, tokenizer=None):
    """Write out/adapter (PEFT format, fp32) and out/model (the merged model in the base's dtype, HF format).
    state_dict: the full PEFT state dict gathered on this rank (FSDP2; None: the model's own)."""
    state = state_dict if state_dict is not None else model.state_dict()
    model.save_pretrained(str(Path(out) / "adapter"), state_dict=state)
    base_dtype = next(p.dtype for p in model.parameters() if not p.requires_grad)
    merged = {name: t.detach().cpu().contiguous() for name, t in merge(state.items(), scalings(model), base_dtype)}
    model.get_base_model().save_pretrained(str(Path(out) / "model"), state_dict=merged)
    if tokenizer is not None:
        tokenizer.save_pretrained(str(Path(out) / "model"))
