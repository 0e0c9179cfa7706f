"""Micro-batches: which samples go through the model together, and the tensors they become.

A micro-batch is collated as a [B, S] block right-padded to its longest sequence. Packed (the trainers' default,
--packing 1), the model then runs on the real tokens only (logprobs.token_logprobs(packed=True), packing.py), so the
token budget counts real tokens and micro-batches are filled by packing.balanced_micro_batches; padded, the budget
counts count x longest and similar lengths are grouped to waste little.
"""
import torch

from distributed import all_reduce
from packing import balanced_micro_batches


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


def same_count_micro_batches(indices, lengths, token_budget, packed=False):
    """This rank's micro-batches (lists of sample indices), as many on every rank as on the busiest one: under FSDP
    every forward/backward is a collective. None = a zero-weight micro-batch. packed: at most token_budget real
    tokens each, work spread evenly over them (packing.balanced_micro_batches); else micro_batches()."""
    if not packed:
        batches = micro_batches(indices, lengths, token_budget)
        most = int(all_reduce([len(batches)], "max")[0])
        return batches + [None] * (most - len(batches))
    mine = [lengths[i] for i in indices]
    most = int(all_reduce([len(balanced_micro_batches(mine, token_budget)[0]) if mine else 0], "max")[0])
    if not mine:
        return [None] * most
    return [[indices[k] for k in mb] or None for mb in balanced_micro_batches(mine, token_budget, min_count=most)[0]]


def collate(samples, pad_id, device):
    """Right-padded [B, S] ids / attention, and [B, S-1] response mask + rollout log-probs aligned with logp."""
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
    out = torch.zeros(len(rows), width, dtype=rows[0].dtype, device=rows[0].device)
    for b, row in enumerate(rows):
        out[b, :row.numel()] = row
    return out


