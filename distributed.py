"""Ranks and models across them: torchrun's process group, the few collectives the loops need, and models with
fp32 master weights sharded by FSDP2 (loaded without a full copy per GPU, gathered one tensor at a time for vLLM).

Shared by train.py and sft.py. On one process every collective is the identity, so the same code runs on a laptop
and under torchrun, one process per GPU, each with its own colocated vLLM engine
(distributed_executor_backend="external_launcher") and FSDP2 (`fully_shard` per transformer block):

    python train.py ...                                                  # one GPU
    torchrun --nproc_per_node 8 train.py ...                             # one node, 8 GPUs
    torchrun --nnodes 4 --nproc_per_node 8 --rdzv_backend c10d --rdzv_endpoint HOST:29500 train.py ...   # 4 nodes

- Data: each rank takes its slice of every global batch and generates all --group_size samples of its prompts, so
  group statistics never cross ranks. Loss normalisers are summed over ranks: the gradient is the single-process one.
- Loading (load_model): every rank builds the model on the meta device and shards it; rank 0 alone reads the
  checkpoint into host memory and broadcasts it, so no GPU holds a full fp32 copy (the verl / TRL pattern). The
  reference reshards its root after each forward and gradients are freed after each step, so neither sits in
  memory through generation.
- Sync (full_weights): after each step every tensor is gathered (`full_tensor()`, one at a time, cast to the
  engine's dtype first) and pushed into each rank's engine. --tensor_parallel_size N: groups of N ranks generate
  together (same prompts, same seeds), and each rank of a group trains on its share of the group's samples.
- Periodic evaluation splits the problems over the data-parallel ranks and gathers the records on rank 0; the
  result equals a one-rank evaluation (seeds follow the problem index). Only rank 0 logs.
- Checkpoints (runs.py): the model in Hugging Face format, gathered and written by rank 0; AdamW's state written by
  every rank, each its own shard (torch.distributed.checkpoint). A run resumes with any number of ranks.
- Process group (process_group_options): "cpu:gloo,cuda:nccl" on GPU (as verl), so collectives on CPU tensors have
  a backend; timeout --dist_timeout_min. Across nodes, name the network interface with GLOO_SOCKET_IFNAME (and
  NCCL_SOCKET_IFNAME) where a host name resolves to a loopback address.
- --fsdp_cpu_offload 1 keeps parameters, gradients and optimizer state in host memory (CPUOffloadPolicy); on one
  GPU without torchrun the process makes a one-rank group of its own (init_distributed(one_rank_group=True)).
  clip_grad_norm sums each rank's local squares and all-reduces that one number (CPU tensors through gloo).
- --fsdp_param_dtype (FSDP2's MixedPrecisionPolicy): "float32" all-gathers fp32 shards and computes under bf16
  autocast; "bfloat16" all-gathers bf16 copies and computes in bf16, reduce-scattering fp32 gradients into the
  fp32 master shards (verl's default). "auto" (FSDP_PARAM_DTYPE): bf16 when --dtype is bfloat16, else fp32.
- LoRA (--lora_rank, lora.py): the base is frozen in the compute dtype, the adapters are fp32, and the KL
  reference is the base with adapters off; under FSDP2 only the adapters have gradients to reduce-scatter.

Memory per parameter (full fine-tuning with AdamW: 16 bytes, sharded over N GPUs; LoRA ~2 bytes), the measured
tables and what is verified where: docs/modules.md, `python bench.py memory`.
"""
import atexit
import gc
import math
import os
import socket
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
from transformers import AutoModelForCausalLM

import lora
from packing import use_varlen_attention
from preflight import read_config

DIST_TIMEOUT_MIN = 60          # collective timeout (NCCL's default, 10 min, is shorter than rank 0 reading a 14B model)
# FSDP2 parameter dtype, "auto": bf16 copies of the weights when the compute is bf16 (--dtype, the GPU default), fp32
# when it is fp32. Measured (`python bench.py precision`, CPU, random Qwen2 of 4 layers, 12 sequences, 2 seeds; vs
# exact fp32): gradient error |g - g_exact| / |g_exact| 0.78-0.80% for fp32 weights under bf16 autocast (today's
# path), 0.87% for bf16 weights; alignment exp(mean|dlogp|) against exact fp32 1.0011-1.0012 vs 1.0013, against the
# same model run wholly in bf16 (a bf16 sampler's arithmetic) 1.0012 vs 1.00000. bf16 autocast already rounds every
# matmul: bf16 weights add a tenth to that error and compute what a bf16 sampler computes, while halving the bytes
# of every all-gather and the memory of each unsharded block -- so bf16 under bf16 compute, as verl. The fp32
# master shards and AdamW are untouched, and gradients are reduced in fp32.
FSDP_PARAM_DTYPE = "auto"


def process_group_options(device_type, timeout_min=DIST_TIMEOUT_MIN):
    """init_process_group's backend and timeout. On GPU both backends, as verl: NCCL for CUDA tensors and gloo for
    CPU ones -- with --fsdp_cpu_offload the gradients are CPU DTensors, and a collective on them in an NCCL-only
    group fails (pytorch issue 148532)."""
    return {"backend": "cpu:gloo,cuda:nccl" if device_type == "cuda" else "gloo",
            "timeout": timedelta(minutes=timeout_min)}


def _destroy_groups():
    """Destroy the process groups while the interpreter is still whole. Left to the interpreter's teardown, gloo's
    worker threads can still hold finished work with tensors that reference Python objects, and freeing them then
    aborts the process ("terminate called without an active exception", exit -6 after a finished run: torchrun
    reports the job failed; 4 of 10 two-rank runs that end with a torch.distributed.checkpoint save, here). The
    garbage collection first frees what cycles still hold of that work."""
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()


def shutdown_distributed():
    """The normal end of a run on several ranks: wait for every rank (rank 0 may still be writing the last
    checkpoint's files), then destroy the groups (_destroy_groups). 0 of 30 such runs aborted at exit."""
    if dist.is_initialized():
        dist.barrier()
        _destroy_groups()


def init_distributed(device_type, timeout_min=DIST_TIMEOUT_MIN, one_rank_group=False):
    """(rank, world_size). Under torchrun: the process group (process_group_options); else (0, 1).
    one_rank_group: one process that still wants FSDP2 (--fsdp_cpu_offload on one GPU) gets a group of its own,
    set up as `torchrun --nproc_per_node 1` would."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 and not one_rank_group:
        return 0, 1
    if not dist.is_initialized():
        if "WORLD_SIZE" not in os.environ:  # not under torchrun: its environment, for one rank on this host
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group(**process_group_options(device_type, timeout_min))
        # A normal end calls shutdown_distributed on every rank. On any other exit, only a gloo-only group is
        # destroyed: destroying NCCL communicators can wait for the peers (ncclCommAbort was a collective in some
        # NCCL versions; torch's destroy_process_group says so), so a rank that dies alone (OOM, a full disk) would
        # hang there instead of exiting, and torchrun would not stop the job (torchtitan PR 1342 met this).
        if device_type != "cuda":
            atexit.register(_destroy_groups)
    if device_type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    return dist.get_rank(), dist.get_world_size()


def distributed():
    """True under torchrun with more than one rank."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def get_rank():
    return dist.get_rank() if distributed() else 0


def all_reduce(values, op="sum"):
    """Sum (or max / min) a list of floats over ranks, or the values of a {name: float} dict (returns a dict);
    identity when not distributed."""
    if isinstance(values, dict):
        return dict(zip(values, all_reduce(list(values.values()), op)))
    if not distributed():
        return list(values)
    t = torch.tensor(values, dtype=torch.float64)  # a CPU tensor: gloo carries it (process_group_options)
    dist.all_reduce(t, op={"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}[op])
    return t.tolist()


def broadcast_object(obj):
    """Rank 0's `obj` (any picklable) on every rank; identity when not distributed."""
    if not distributed():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def all_gather_objects(obj):
    """[rank 0's obj, rank 1's obj, ...] (picklable); [obj] when not distributed."""
    if not distributed():
        return [obj]
    parts = [None] * dist.get_world_size()
    dist.all_gather_object(parts, obj)
    return parts


def shard_model(model, cpu_offload=False, param_dtype="float32"):
    """FSDP2: fully_shard every transformer block, then the root (embeddings, final norm, head). The root stays
    gathered from its forward until backward: logprobs.token_logprobs projects hidden states through the head
    weight itself, after the model's forward has returned (a no-grad model calls .reshard() after use).
    cpu_offload: shards, gradients and optimizer state in host memory (CPUOffloadPolicy; a no-op on CPU, where
    they are already). param_dtype "bfloat16": all-gathers and computes with bf16 copies of the fp32 shards and
    reduce-scatters gradients in fp32 (MixedPrecisionPolicy, verl's default)."""
    kwargs = {}
    if cpu_offload and torch.cuda.is_available():
        kwargs["offload_policy"] = CPUOffloadPolicy()
    if param_dtype == "bfloat16":
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.get_decoder().layers:
        fully_shard(block, **kwargs)
    fully_shard(model, reshard_after_forward=False, **kwargs)
    return model


def load_model(path, device, dtype, world=1, cpu_offload=False, *, gradient_checkpointing=False, packed=False,
               overrides=None, param_dtype="float32", wrap=None):
    """A Hugging Face causal LM from `path` in `dtype` (fp32 for trained weights: at lr 3e-7 an update is ~1e-5 of
    a weight, below bf16's resolution), on `device`; with world > 1, FSDP2-sharded over the ranks.

    Several ranks: every rank builds the model on the meta device (no memory), shards it, and allocates only its
    shard on `device`; rank 0 alone reads the checkpoint (into host memory) and broadcasts it tensor by tensor
    (set_model_state_dict with broadcast_from_rank0), then the buffers that are not in the state dict (rotary
    inv_freq). So no GPU ever holds the full model (a 14B fp32 policy + bf16 reference would need 88 GB on each
    GPU otherwise); rank 0's host holds one full copy while loading. The same pattern as verl / TRL / accelerate.
    packed: attention that can run packed rows without crossing sequences (packing.use_varlen_attention).
    overrides: config fields (--config_overrides), applied as vLLM's hf_overrides are (preflight.read_config).
    cpu_offload: sharded even on one process, in the one-rank group init_distributed(one_rank_group=True) made.
    wrap: model -> model applied before sharding, to the meta model and to rank 0's loaded one alike (LoRA:
    lora.wrapper adds the adapters, so they are sharded with their blocks and broadcast from rank 0's init).
    """
    config, why = read_config(path, overrides, offline=False)
    if config is None:
        raise OSError(why)
    shard = world > 1 or cpu_offload
    if not shard:
        model = AutoModelForCausalLM.from_pretrained(path, config=config, dtype=dtype)
    else:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    if gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    if packed:
        use_varlen_attention(model)
    if wrap is not None:
        model = wrap(model)
    if not shard:
        return model.to(device)
    shard_model(model, cpu_offload, param_dtype)
    # every rank allocates its shard only, on the GPU, where NCCL broadcasts the full state into it. Under
    # --fsdp_cpu_offload, FSDP2 puts the shards back in pinned host memory here (_fsdp_param.reset_sharded_param),
    # so the broadcast goes over gloo: slower (minutes for a 7B model across nodes), not wrong.
    model.to_empty(device=device)
    full_state, buffers = {}, {}
    if dist.get_rank() == 0:
        loaded = AutoModelForCausalLM.from_pretrained(path, config=config, dtype=dtype)      # host memory
        loaded = wrap(loaded) if wrap is not None else loaded
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
    NCCL gathers only GPU tensors.
    A LoRA model yields the merged weights W + scale * B A instead (lora.merged_weights)."""
    if lora.is_lora(model):
        yield from lora.merged_weights(model, dtype, device)
        return
    for name, tensor in model.state_dict().items():
        if hasattr(tensor, "full_tensor"):
            tensor = tensor.to(**{k: v for k, v in (("device", device), ("dtype", dtype)) if v is not None})
            tensor = tensor.full_tensor()
        elif dtype is not None:
            tensor = tensor.to(dtype)
        yield name, tensor.detach()


def clip_grad_norm(parameters, max_norm):
    """torch.nn.utils.clip_grad_norm_ for gradients that are FSDP2 shards, wherever they live: returns the global
    L2 norm (a float) and scales every gradient by min(1, max_norm / norm) in place.

    Each rank sums the squares of its own shards (to_local(): FSDP2 shards every parameter over all ranks, so no
    element counts twice), the sums are all-reduced, and each shard is scaled locally. clip_grad_norm_ instead
    reduces DTensors through their mesh, whose device is the GPU's; with --fsdp_cpu_offload the gradients are
    CPU DTensors and that all-reduce fails (pytorch issue 148532; verl clips offloaded gradients itself the same
    way). Here a CPU sum goes through gloo (the "cpu:gloo,cuda:nccl" group), a GPU sum through NCCL."""
    grads = [p.grad for p in parameters if p.grad is not None]
    local = [g.to_local() if hasattr(g, "to_local") else g for g in grads]
    by_device = {}
    for g in local:
        by_device.setdefault(g.device, []).append(g)
    sums = [torch.stack(torch._foreach_norm(gs)).double().pow(2).sum() for gs in by_device.values()]
    device = next((d for d in by_device if d.type != "cpu"), torch.device("cpu"))
    total = torch.stack([s.to(device) for s in sums]).sum() if sums else torch.zeros((), dtype=torch.float64)
    if dist.is_initialized() and dist.get_world_size() > 1 and any(hasattr(g, "to_local") for g in grads):
        dist.all_reduce(total)
    norm = total.sqrt().item()
    if math.isfinite(norm) and norm > max_norm:
        for gs in by_device.values():
            torch._foreach_mul_(gs, max_norm / (norm + 1e-6))
    return norm


def optimizer_step(policy, optimizer, loss, grad_clip, step):
    """Clip and apply the accumulated gradient, unless the loss or the gradient is not finite (then nothing reaches
    the weights, or through the push, vLLM). Returns (grad norm before clipping, skipped)."""
    trained = [p for p in policy.parameters() if p.requires_grad]   # LoRA: the adapters only
    for p in trained:  # nothing trained anywhere: the gradient is 0, as with the flag off
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    grad_norm = clip_grad_norm(trained, grad_clip)
    finite = all_reduce([float(math.isfinite(grad_norm) and math.isfinite(loss))], "min")[0] == 1.0
    if finite:  # every rank decides the same
        optimizer.step()
    else:
        print(f"WARNING: step {step}: non-finite loss {loss} or grad norm {grad_norm}; update skipped")
    optimizer.zero_grad(set_to_none=True)  # free the gradients: they must not sit in memory through generation
    return grad_norm, not finite
