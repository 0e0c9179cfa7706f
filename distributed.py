"""Ranks and models across them: torchrun's process group, the few collectives the loops need, and models with
fp32 master weights sharded by FSDP2 (loaded without a full copy per GPU, gathered one tensor at a time for vLLM).

Shared by train.py and sft.py. On one process every collective is the identity, so the same code runs on a laptop
and under torchrun, one process per GPU, each with its own colocated vLLM engine
(distributed_executor_backend="external_launcher") and FSDP2 (`fully_shard` per transformer block):

    python train.py ...                                                  # one GPU
    torchrun --nproc_per_node 8 train.py ...                             # one node, 8 GPUs
    torchrun --nnodes 4 --nproc_per_node 8 --rdzv_backend c10d --rdzv_endpoint HOST:29500 train.py ...   # 4 nodes

- Data: each rank takes its slice of every global batch of --batch_size prompts and generates all --group_size
  samples of its prompts, so group statistics never cross ranks. Loss normalisers (tokens, sequences) are summed
  over ranks, so the gradient equals the single-process one.
- Loading (load_model): every rank builds the model on the meta device and shards it; rank 0 alone reads the
  checkpoint (into host memory) and broadcasts it, so no GPU holds a full copy of the fp32 policy or the
  reference (the verl / TRL pattern). On resume, rank 0 alone reads trainer_state.pt and the optimizer state
  reaches the other ranks by broadcast. The reference model reshards its root (embeddings, head) after each
  forward, and gradients are freed after each optimizer step, so neither sits in memory through generation.
- Sync (full_weights): after each step every tensor is gathered (`full_tensor()`, one at a time, cast to the
  engine's dtype first; with --fsdp_cpu_offload 1 each shard is moved to the GPU before the gather, which NCCL
  requires) and pushed into each rank's engine. --tensor_parallel_size N shards vLLM itself: groups of N ranks
  generate together (same prompts, same seeds), and each rank of a group trains on its share of the group's samples.
- Periodic evaluation runs on every rank: the problems are split over the data-parallel ranks (a TP group samples
  its share together), the records are gathered, and rank 0 writes them. The result equals a one-rank evaluation
  (seeds follow the problem index).
- Only rank 0 logs and writes. Checkpoints hold the model in Hugging Face format and the full optimizer state keyed
  by parameter name, gathered on rank 0's CPU, so a run is meant to resume with any number of ranks; gathering
  costs rank 0 host memory of 12 bytes per parameter (84 GB for 7B).
- --fsdp_cpu_offload 1 keeps parameters, gradients and optimizer state in host memory (needs a GPU: FSDP2's CPU
  offload cannot run on a CPU-only machine).

Memory per GPU for full fine-tuning with AdamW (fp32 master weights + gradients + 2 moments = 16 bytes per
parameter, sharded over N GPUs), before activations and vLLM:

    model   1 GPU    8 GPUs (one node)   32 GPUs (4 nodes)   fits
    1.5B    24 GB    3 GB                0.8 GB              one 80 GB GPU, vLLM at ~0.35
    7B      112 GB   14 GB               3.5 GB              8 x 80 GB (vLLM at ~0.5; 16K-32K responses need
                                                             micro-batch tuning)
    14B     224 GB   28 GB               7 GB                8 x 80 GB tight (CPU offload helps); 16+ GPUs comfortable

Bytes per parameter of each mode (`python bench.py memory`: real module sizes of Qwen2.5 shapes built on the meta
device, wrapped as train.py wraps them; trained state only, before activations and vLLM):

    mode                                   bytes/param    1.5B, 1 GPU   7B, 1 GPU   7B, 8 GPUs
                                           (1.5B / 7B)
    full fine-tuning + bf16 KL reference   18 / 18       27.8 GB       137.1 GB    17.1 GB
    LoRA rank 1, all linear layers         2.01 / 2.01    3.1 GB        15.3 GB     1.9 GB
    LoRA rank 32                           2.38 / 2.17    3.7 GB        16.5 GB     2.1 GB
    LoRA rank 128                          3.53 / 2.68    5.5 GB        20.4 GB     2.5 GB

LoRA (--lora_rank, lora.py): the base is frozen in the compute dtype (2 bytes in bf16: no fp32 master, no gradient,
no Adam), the adapters are fp32 with their gradients and two moments (16 bytes per adapter parameter), and the KL
reference is the base itself with adapters off (0 bytes). So a 7B policy fits one 80 GB GPU beside vLLM
(recipes/single_gpu_7b_lora.sh). Under FSDP2 each block holds bf16 base and fp32 adapter tensors together; only
the adapters have gradients to reduce-scatter.

Verified on CPU (gloo, torchrun --nproc_per_node 2, tests/test_distributed.py): 2 ranks and 1 on the same rollouts
agree to 1e-4 in loss, grad norm and weights; 2 ranks -> resume on 2 ranks is exact; rank 1 reads no weights and
no optimizer state from disk; both ranks end with gradients freed and the reference's root sharded; each rank's
vLLM engine receives the pushed weights; TP 2 on 2 ranks; periodic eval with TP 1 and with TP 2. NOT verified:
several GPUs or nodes, NCCL with several ranks, the memory figures in practice, TP on GPUs, --fsdp_cpu_offload 1,
resuming on another number of ranks.
"""
import math
import os

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard
from transformers import AutoConfig, AutoModelForCausalLM

import lora
from packing import use_varlen_attention


def init_distributed(device_type):
    """(rank, world_size). Under torchrun: a process group (nccl on GPU, gloo on CPU); else (0, 1)."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return 0, 1
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device_type == "cuda" else "gloo")
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
    t = torch.tensor(values, dtype=torch.float64)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t, op={"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}[op])
    return t.cpu().tolist()


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


def shard_model(model, cpu_offload=False):
    """FSDP2: fully_shard every transformer block, then the root (embeddings, final norm, head). The root stays
    gathered from its forward until backward: logprobs.token_logprobs projects hidden states through the head
    weight itself, after the model's forward has returned (a no-grad model calls .reshard() after use)."""
    kwargs = {"offload_policy": CPUOffloadPolicy()} if cpu_offload else {}
    for block in model.get_decoder().layers:
        fully_shard(block, **kwargs)
    fully_shard(model, reshard_after_forward=False, **kwargs)
    return model


def load_model(path, device, dtype, world=1, cpu_offload=False, gradient_checkpointing=False, packed=False,
               wrap=None):
    """A Hugging Face causal LM from `path` in `dtype` (fp32 for trained weights: at lr 3e-7 an update is ~1e-5 of
    a weight, below bf16's resolution), on `device`; with world > 1, FSDP2-sharded over the ranks.

    Several ranks: every rank builds the model on the meta device (no memory), shards it, and allocates only its
    shard on `device`; rank 0 alone reads the checkpoint (into host memory) and broadcasts it tensor by tensor
    (set_model_state_dict with broadcast_from_rank0), then the buffers that are not in the state dict (rotary
    inv_freq). So no GPU ever holds the full model (a 14B fp32 policy + bf16 reference would need 88 GB on each
    GPU otherwise); rank 0's host holds one full copy while loading. The same pattern as verl / TRL / accelerate.
    packed: attention that can run packed rows without crossing sequences (packing.use_varlen_attention).
    wrap: model -> model applied before sharding, to the meta model and to rank 0's loaded one alike (LoRA:
    lora.wrapper adds the adapters, so they are sharded with their blocks and broadcast from rank 0's init).
    """
    if world == 1:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    else:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path), dtype=dtype)
    if gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    if packed:
        use_varlen_attention(model)
    if wrap is not None:
        model = wrap(model)
    if world == 1:
        return model.to(device)
    shard_model(model, cpu_offload)
    model.to_empty(device=device)  # every rank allocates its shard only (on the GPU: NCCL broadcasts need it there)
    full_state, buffers = {}, {}
    if dist.get_rank() == 0:
        loaded = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)      # host memory
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


def optimizer_step(policy, optimizer, loss, grad_clip, step):
    """Clip and apply the accumulated gradient, unless the loss or the gradient is not finite (then nothing reaches
    the weights, or through the push, vLLM). Returns (grad norm before clipping, skipped)."""
    trained = [p for p in policy.parameters() if p.requires_grad]   # LoRA: the adapters only
    for p in trained:  # nothing trained anywhere: the gradient is 0, as with the flag off
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    grad_norm = torch.nn.utils.clip_grad_norm_(trained, grad_clip)
    grad_norm = (grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm).item()
    finite = all_reduce([float(math.isfinite(grad_norm) and math.isfinite(loss))], "min")[0] == 1.0
    if finite:  # every rank decides the same
        optimizer.step()
    else:
        print(f"WARNING: step {step}: non-finite loss {loss} or grad norm {grad_norm}; update skipped")
    optimizer.zero_grad(set_to_none=True)  # free the gradients: they must not sit in memory through generation
    return grad_norm, not finite
