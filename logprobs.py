"""Token log-probabilities (and entropies) of a Hugging Face causal LM, the one function every trainer pass uses:
the GRPO policy forward/backward, the pi_old and reference no-grad passes, SFT's loss, and the alignment checks
against vLLM's sampling log-probs.

    logp, entropy = token_logprobs(model, ids, attention, temperature, chunk_size, with_entropy=True,
                                   score_mask=response_mask, packed=True)        # [B, S-1] each

Two things make it cheap. The output head runs `chunk_size` positions at a time, on the scored positions only,
each chunk activation-checkpointed: the [B, S, V] logits are never materialised. And packed=True runs the backbone
on the real tokens only, one row, attention within each sequence (packing.py), returning the same [B, S-1]
values as the padded path, so grpo.py's loss functions never see the difference.
"""
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

import packing


def _chunk_logprobs(hidden, targets, weight, bias, temperature, *, with_entropy, entropy_grad=False):
    """hidden [N, H], targets [N] -> logp [N] (and entropy [N]), computed in fp32 for this chunk only."""
    logits = F.linear(hidden, weight, bias).float()                        # [N, V]: the only V-sized tensors
    if temperature != 1.0:
        logits.div_(temperature)  # in place: linear's backward needs its inputs, not its output
    log_norm = torch.logsumexp(logits, dim=-1)                              # [N]
    logp = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - log_norm
    if not with_entropy:
        return logp
    # H = logZ - E_p[z]. As a metric only, without a graph: a graph here would be a branch that backward never
    # walks, so the checkpoint's recomputation in backward would store its [N, V] tensors for it and keep them
    # (measured: +37 GB at 32K tokens, vocab 152K, on top of the gradients, until the entropy is freed).
    with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
        probs = torch.softmax(logits, dim=-1)
        entropy = log_norm - (probs * logits).sum(dim=-1)
    return logp, entropy


def final_hidden_states(model, input_ids, attention_mask, layout=None):
    """The decoder's last hidden states [B, S, H] (after its final norm), through the model's own __call__ (so
    that FSDP's hooks gather the root's parameters), without the logits of any position and without
    output_hidden_states=True, which would keep every layer's output alive (a no-grad pass of a 1.5B model at
    32K tokens: ~2.8 GB). A forward hook on the decoder (model.get_decoder(), the HF convention) catches its
    output.

    layout: a packing.pack(attention_mask) layout. The real tokens then run as one row with no padding and
    position ids restarting per sequence, attention kept within each sequence by the varlen kwargs (see
    packing.py); returns [1, N, H], N = attention_mask.sum()."""
    if layout is None:
        position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)   # correct positions under left padding
        inputs = dict(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids)
    else:
        cu, longest = layout.cu_seqlens, layout.max_len
        inputs = dict(input_ids=input_ids.reshape(-1)[layout.flat_index][None], attention_mask=None,
                      position_ids=layout.position_ids, cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_length_q=longest,
                      max_length_k=longest, seq_lengths=layout.seq_lengths)
    caught = []
    hook = model.get_decoder().register_forward_hook(lambda module, args, output: caught.append(output[0]))
    try:
        model(**inputs, use_cache=False, logits_to_keep=torch.empty(0, dtype=torch.long, device=input_ids.device))
    finally:
        hook.remove()
    return caught[-1]


def token_logprobs(model, input_ids, attention_mask, temperature=1.0, chunk_size=256, *, with_entropy=False,
                   score_mask=None, entropy_grad=False, packed=False):
    """log pi(x_{t+1} | x_<=t) for every position of `input_ids` under a Hugging Face causal LM, with the
    logits divided by the sampling temperature (vLLM's processed logprobs are of the tempered distribution).

    input_ids, attention_mask: [B, S] (left or right padding). Returns logp [B, S-1] (float32) aligned with
    input_ids[:, 1:] (and entropy [B, S-1] when with_entropy).
    entropy_grad: the entropy is a term of the loss (--entropy_coef > 0) and needs a gradient; otherwise it is a
    metric, computed without a graph (one with no backward pass would hold [N, V] tensors: see _chunk_logprobs).
    score_mask: optional [B, S-1], 1 where a value is wanted (the response tokens). Only those positions go
    through the output head; the others (prompt, padding) hold 0. Without it every position is scored and
    padding positions hold meaningless values: mask them.
    packed: run the backbone on the real tokens only (packing.py: one row, no padding, attention within each
    sequence). Same values as the padded path to float rounding; positions where token t or t+1 is padding hold 0.

    Memory: the full [B, S, V] logits are never materialised. The backbone runs once; then `chunk_size`
    positions at a time go through the output head, log-softmax in fp32, and only the gathered values are
    kept. Each chunk is activation-checkpointed, so backward recomputes its logits instead of storing them:
    peak extra memory is ~ chunk_size * V * 4 bytes * a small constant (~6), whatever the sequence length
    (measured: docs/modules.md, logprobs.py).
    """
    head = model.get_output_embeddings()
    batch, seq = input_ids.shape
    targets = input_ids[:, 1:].reshape(-1)                                 # [B*(S-1)]
    rows = None
    if packed:
        layout = packing.pack(attention_mask)
        source, rows = packing.packed_rows(layout, score_mask)            # packed position -> output row
        hidden = final_hidden_states(model, input_ids, attention_mask, layout)[0]   # [N, H]
        hidden, targets = hidden.index_select(0, source), targets.index_select(0, rows)
    else:
        hidden = final_hidden_states(model, input_ids, attention_mask)  # [B, S, H]
        hidden = hidden[:, :-1].reshape(-1, hidden.shape[-1])              # [B*(S-1), H]
        if score_mask is not None:  # project only the scored positions: prompt and padding never reach the head
            rows = score_mask.reshape(-1).bool().nonzero().squeeze(-1)
            hidden, targets = hidden.index_select(0, rows), targets.index_select(0, rows)
    outputs = []
    # split, not slices: split's backward is one concatenation of the chunks' gradients, while each slice's backward
    # writes its gradient into a zero tensor of the whole [N, H] and adds it up (N / chunk_size of them: measured
    # 15% of a packed 32K-token micro-batch's CPU time, bench.py pack)
    for hidden_chunk, target_chunk in zip(hidden.split(chunk_size), targets.split(chunk_size)):
        args = (hidden_chunk, target_chunk, head.weight, head.bias, temperature)
        options = {"with_entropy": with_entropy, "entropy_grad": entropy_grad}
        if torch.is_grad_enabled() and hidden.requires_grad:
            outputs.append(checkpoint(_chunk_logprobs, *args, use_reentrant=False, **options))
        else:
            outputs.append(_chunk_logprobs(*args, **options))
    if not outputs:  # nothing scored
        outputs = [(hidden.new_zeros(0, dtype=torch.float32),) * 2 if with_entropy else hidden.new_zeros(0, dtype=torch.float32)]

    def unflatten(values):
        if rows is not None:  # back to [B, S-1], zeros where nothing was scored
            values = values.new_zeros(batch * (seq - 1)).index_copy(0, rows, values)
        return values.view(batch, seq - 1)

    if with_entropy:
        return unflatten(torch.cat([o[0] for o in outputs])), unflatten(torch.cat([o[1] for o in outputs]))
    return unflatten(torch.cat(outputs))
