"""Micro-batches: which samples go through the model together, and the tensors they become.

Padded today: a micro-batch is a [B, S] block right-padded to its longest sequence.
"""
import torch

from distributed import all_reduce


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


