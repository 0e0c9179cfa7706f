"""Padding-free micro-batches ("sequence packing", issue 23): the trainer's forward never runs on padding.

Micro-batches padded to their longest sequence spend part of every forward, backward and log-prob pass on pad
tokens; with GRPO's length spread (a few hundred tokens to the cap) that part is large. Every peer but TRL removes
it: verl `use_remove_padding` (unpad to one row [1, total_tokens] with restarting position ids, flash-attention
varlen with cu_seqlens), OpenRLHF `packing_samples`, prime-rl, slime. The same here, in three parts:

1. Layout.  pack(attention_mask) lays the real tokens of a padded [B, S] batch (left or right padding) end to end
   in ONE row [1, N], N = number of real tokens: their flat index, position ids restarting at 0 for each
   sequence, the boundaries cu_seqlens [B'+1] (int32, flash-attention's convention) and the inverse map [B, S]
   from padded positions to packed ones (-1 on padding). logprobs.token_logprobs(..., packed=True) uses it and
   returns the same [B, S-1] log-probs as the padded path, so every loss function works unchanged.

2. Attention that never crosses a sequence boundary. The model is called with attention_mask=None, the restarting
   position_ids, flash-attention's varlen kwargs (cu_seq_lens_q/k, max_length_q/k) and the lengths on the host
   (seq_lengths, read from the GPU once per micro-batch by pack()), which transformers passes down to the attention
   function. What runs, on CPU and on GPU alike, unless GPU_VARLEN_KERNEL says otherwise:
     "sdpa_varlen" (this file)  torch SDPA with is_causal once per sequence: exact, no wasted FLOPs, one kernel
                                launch per sequence and layer (use_varlen_attention(model) switches a model to it).
   Varlen kernels, one launch per layer for the whole row, used only where installed and only once a GPU
   measurement says they pay (`python bench.py gpu` times each against sdpa_varlen, fwd + bwd):
     "torch_varlen" (this file) torch.nn.attention.varlen.varlen_attn (FlashAttention inside torch >= 2.10, CUDA)
     "flash_attention_2"        transformers' integration of the flash-attn package (not in our requirements)
   Stock "sdpa" / "eager" are still correct: transformers sees position ids restart (masking_utils.
   find_packed_sequence_indices) and builds a block-diagonal causal [1, 1, N, N] mask, but then computes all N^2
   scores (a quadratic waste that grows with the row).

3. Micro-batches by a token budget: balanced_micro_batches(lengths, token_budget, world_size) puts whole sequences
   into micro-batches of at most token_budget real tokens (a longer sequence goes alone), the SAME number on every
   rank (FSDP: every forward/backward is a collective), loads spread so that ranks finish together.

How a trainer pass uses it (the micro-batch loop keeps its padded [B, S] collate; only the backbone unpads):
    model = packing.use_varlen_attention(model)          # once after loading, before FSDP (GPU: flash_attention_2)
    count = all_reduce_max(len(packing.balanced_micro_batches(my_lengths, budget)[0]))
    for mb in packing.balanced_micro_batches(my_lengths, budget, min_count=count)[0]:   # [] = zero-weight pass
        ids, attention, mask, _ = collate(mb's samples)
        logp = logprobs.token_logprobs(model, ids, attention, ..., score_mask=mask, packed=True)   # [B, S-1] as before
"""
import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

VARLEN_ATTENTION = "sdpa_varlen"
GPU_VARLEN_KERNEL = None   # None: sdpa_varlen on GPU too; "torch_varlen" / "flash_attention_2" after bench.py gpu


# ----------------------------------------------------------------------------------------------------------
# 1. Layout: padded [B, S] -> one packed row [1, N]
# ----------------------------------------------------------------------------------------------------------
class Packed(NamedTuple):
    """Where the real tokens of a padded [B, S] batch go in one packed row of N tokens."""
    flat_index: torch.Tensor    # [N] long: position of each packed token in the flattened [B*S] batch
    position_ids: torch.Tensor  # [1, N] long: 0, 1, ..., len_b - 1 for each sequence in turn
    cu_seqlens: torch.Tensor    # [B'+1] int32: 0, len_0, len_0 + len_1, ... over the B' non-empty sequences
    max_len: int                # longest sequence
    inverse: torch.Tensor       # [B, S] long: packed position of each padded position, -1 on padding
    seq_lengths: tuple          # (len_0, len_1, ...) on the host: read once per micro-batch, never per layer


def pack(attention_mask):
    """attention_mask [B, S] (1 = real token; left or right padding: each row's real tokens contiguous) ->
    Packed. Sequences keep their batch order; empty rows take no space."""
    real = attention_mask.bool()
    lengths = real.sum(-1)                                                    # [B]
    starts = real.long().argmax(-1)                                           # first real position per row
    span = torch.arange(real.shape[1], device=real.device)
    contiguous = (span >= starts[:, None]) & (span < (starts + lengths)[:, None])
    if not torch.equal(contiguous, real):
        bad = (contiguous != real).any(-1).nonzero()[0].item()
        raise ValueError(f"packing.pack: attention_mask row {bad} has a hole (padding between real tokens); "
                         f"only left or right padding can be packed")
    if not real.any():
        raise ValueError("packing.pack: attention_mask has no real token")
    flat_index = real.reshape(-1).nonzero().squeeze(-1)                       # row-major: sequence by sequence
    n = flat_index.numel()
    kept = lengths[lengths > 0]
    host = tuple(kept.tolist())   # the one device-to-host copy of the lengths for this micro-batch
    cu_seqlens = F.pad(kept.cumsum(0), (1, 0)).to(torch.int32)
    position_ids = torch.arange(n, device=real.device) - torch.repeat_interleave(cu_seqlens[:-1].long(), kept,
                                                                                 output_size=n)
    inverse = torch.full(real.shape, -1, dtype=torch.long, device=real.device)
    inverse.view(-1)[flat_index] = torch.arange(n, device=real.device)
    return Packed(flat_index, position_ids[None], cu_seqlens, max(host), inverse, host)


def packed_rows(packed, score_mask=None):
    """The packed positions to score and where their values go in the padded [B, S-1] output.

    logp[b, t] scores token t+1 from position t (token_logprobs' convention), so (b, t) can be scored only where
    tokens t and t+1 are both real. score_mask: optional [B, S-1], 1 = score; None = every such position.
    Returns (source [M] packed positions, rows [M] indices into the flattened [B*(S-1)] output)."""
    here, after = packed.inverse[:, :-1], packed.inverse[:, 1:]
    scorable = (here >= 0) & (after >= 0)
    if score_mask is None:
        wanted = scorable
    else:
        wanted = score_mask.bool()
        if (wanted & ~scorable).any():
            b, t = (wanted & ~scorable).nonzero()[0].tolist()
            raise ValueError(f"packing.packed_rows: score_mask[{b}, {t}] is set but token {t} or {t + 1} of row {b} "
                             f"is padding")
    rows = wanted.reshape(-1).nonzero().squeeze(-1)
    return here.reshape(-1).index_select(0, rows), rows


# ----------------------------------------------------------------------------------------------------------
# 2. Attention within sequences only
# ----------------------------------------------------------------------------------------------------------
def varlen_sdpa_attention(module, query, key, value, attention_mask, *, dropout=0.0, scaling=None,
                          cu_seq_lens_q=None, cu_seq_lens_k=None, seq_lengths=None, **kwargs):
    """transformers attention function: query [1, heads, N, D], key/value [1, kv_heads, N, D] of a packed row
    -> ([1, N, heads, D], None). With cu_seq_lens_q (given by a packed call) each sequence attends causally to
    itself only: one torch SDPA call with is_causal per sequence, so no score is computed across a boundary
    (sum_b len_b^2 / 2 scores, against N^2 for a block-diagonal mask). Without it (an ordinary padded call) this
    is transformers' own sdpa. seq_lengths: the same boundaries on the host (Packed.seq_lengths), so that no layer
    copies them from the GPU (a device sync per layer and pass); without it they are read from cu_seq_lens_q."""
    if cu_seq_lens_q is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    if query.shape[0] != 1 or cu_seq_lens_k is not cu_seq_lens_q:
        raise ValueError("varlen_sdpa_attention: expects one packed row with the same query/key boundaries")
    if kwargs.get("sliding_window") is not None:
        raise ValueError("varlen_sdpa_attention: sliding-window attention is not supported")
    gqa = query.shape[1] != key.shape[1]
    lengths = list(seq_lengths) if seq_lengths is not None else cu_seq_lens_q.diff().tolist()
    # split, not slices: split's backward concatenates the gradients; each slice's would write a full-size zero
    # tensor (num_seqs x N x D of memory traffic per layer)
    out = [F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout, scale=scaling, enable_gqa=gqa)
           for q, k, v in zip(query.split(lengths, 2), key.split(lengths, 2), value.split(lengths, 2))]
    return torch.cat(out, dim=2).transpose(1, 2).contiguous(), None


def _varlen_mask(*args, attention_mask=None, **kwargs):
    """Mask builder for "sdpa_varlen": a packed call (attention_mask None) needs none -- the boundaries come as
    cu_seqlens -- and an unpadded call is plain causal; a padded call gets sdpa's mask."""
    return None if attention_mask is None else sdpa_mask(*args, attention_mask=attention_mask, **kwargs)


def torch_varlen_attention(module, query, key, value, attention_mask, *, dropout=0.0, scaling=None,
                           cu_seq_lens_q=None, cu_seq_lens_k=None, max_length_q=None, max_length_k=None, **kwargs):
    """The same contract as varlen_sdpa_attention, on torch's own varlen kernel (one launch for the whole row;
    CUDA only). Not used unless GPU_VARLEN_KERNEL = "torch_varlen"."""
    if cu_seq_lens_q is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    import inspect

    from torch.nn.attention.varlen import varlen_attn
    q, k, v = (t[0].transpose(0, 1) for t in (query, key, value))          # [N, heads, D]
    params = inspect.signature(varlen_attn).parameters
    if q.shape[1] != k.shape[1] and "enable_gqa" not in params:             # torch < 2.13: no GQA in the kernel
        k, v = (t.repeat_interleave(q.shape[1] // t.shape[1], dim=1) for t in (k, v))
    causal = {"is_causal": True} if "is_causal" in params else {"window_size": (-1, 0)}
    gqa = {"enable_gqa": True} if q.shape[1] != k.shape[1] else {}
    out = varlen_attn(q, k, v, cu_seq_lens_q, cu_seq_lens_k, max_length_q, max_length_k, scale=scaling,
                      **causal, **gqa)
    return out[None], None                                                  # [1, N, heads, D]


AttentionInterface.register(VARLEN_ATTENTION, varlen_sdpa_attention)
AttentionMaskInterface.register(VARLEN_ATTENTION, _varlen_mask)
AttentionInterface.register("torch_varlen", torch_varlen_attention)
AttentionMaskInterface.register("torch_varlen", _varlen_mask)


def use_varlen_attention(model, kernel=None):
    """Switch a model on stock sdpa/eager attention to "sdpa_varlen" (same results on padded calls; packed calls
    skip the cross-sequence scores), or on a CUDA machine to `kernel` (default GPU_VARLEN_KERNEL) when it is set
    and importable. Flash-attention models already take cu_seqlens and are left alone. Call it before FSDP wraps
    the model. Returns the model."""
    kernel = kernel or GPU_VARLEN_KERNEL
    if model.config._attn_implementation not in ("sdpa", "eager"):
        return model
    if kernel and torch.cuda.is_available() and varlen_kernel_available(kernel):
        model.set_attn_implementation(kernel)
    else:
        model.set_attn_implementation(VARLEN_ATTENTION)
    return model


def varlen_kernel_available(kernel):
    """Whether a varlen kernel can run here: torch's needs torch.nn.attention.varlen, flash_attention_2 the
    flash_attn package."""
    import importlib.util
    if kernel == "torch_varlen":
        return importlib.util.find_spec("torch.nn.attention.varlen") is not None
    return kernel == "flash_attention_2" and importlib.util.find_spec("flash_attn") is not None


# ----------------------------------------------------------------------------------------------------------
# 3. Balanced micro-batches
# ----------------------------------------------------------------------------------------------------------
def _spread(lengths, order, bins, token_budget):
    """Longest-first, each sequence into the least-loaded bin it fits (a sequence over the budget only fits an
    empty bin). Returns (members, loads), or None when some sequence fits nowhere."""
    members, loads = [[] for _ in range(bins)], [0] * bins
    for i in order:
        fits = [k for k in range(bins) if loads[k] == 0 or loads[k] + lengths[i] <= token_budget]
        if not fits:
            return None
        k = min(fits, key=loads.__getitem__)
        members[k].append(i)
        loads[k] += lengths[i]
    return members, loads


def balanced_micro_batches(lengths, token_budget, world_size=1, min_count=1):
    """Split sequences into micro-batches of at most token_budget tokens (a longer sequence goes alone), the same
    number on every rank, work spread so that ranks finish together.

    lengths: tokens per sequence (prompt + response) of the WHOLE batch, the same list on every rank.
    Returns [world_size][count] lists of sequence indices: rank r runs result[r], micro-batch by micro-batch. count
    is the smallest number >= min_count that fits (pass the all-reduced max of each rank's own count as min_count
    when ranks pack their own samples: world_size=1 per rank, same count everywhere). A micro-batch can be empty
    when there are fewer sequences than micro-batches: run it as a zero-weight pass (FSDP still needs the
    collective). Cost model: tokens (the linear layers; attention adds sum len^2, small below a few K tokens).
    """
    if token_budget < 1:
        raise ValueError(f"balanced_micro_batches: token_budget must be >= 1, got {token_budget}")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    count = max(min_count, math.ceil(sum(lengths) / (token_budget * world_size)), 1)
    while (spread := _spread(lengths, order, count * world_size, token_budget)) is None:
        count += 1
    members, loads = spread
    # heaviest micro-batch first, to the least-loaded rank that still has room: rank totals end up close, and each
    # rank's list runs heaviest first, so the k-th micro-batches of the ranks (in lockstep under FSDP) are alike
    ranks, totals = [[] for _ in range(world_size)], [0] * world_size
    for k in sorted(range(len(members)), key=lambda k: -loads[k]):
        r = min((r for r in range(world_size) if len(ranks[r]) < count), key=totals.__getitem__)
        ranks[r].append(sorted(members[k]))
        totals[r] += loads[k]
    return ranks
