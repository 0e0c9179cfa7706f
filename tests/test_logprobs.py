"""logprobs.token_logprobs against a naive full-logits forward: values, entropies and gradients, chunking, padding,
and what it keeps in memory."""
import pytest
import torch

import logprobs


@pytest.fixture(scope="module")
def small_lm():
    from transformers import Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=32, tie_word_embeddings=False)
    model = Qwen2ForCausalLM(config)
    model.lm_head.weight.data.normal_(0, 0.5)  # peakier distributions: differences show
    return model


def naive_logprobs(model, ids, attention, temperature):
    position_ids = (attention.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=attention, position_ids=position_ids).logits.float() / temperature
    logp = logits.log_softmax(-1)[:, :-1].gather(-1, ids[:, 1:, None]).squeeze(-1)
    p = logits.softmax(-1)[:, :-1]
    entropy = -(p * logits.log_softmax(-1)[:, :-1]).sum(-1)
    return logp, entropy


@pytest.mark.parametrize("padding", ["left", "right"])
@pytest.mark.parametrize("chunk_size", [1, 7, 16, 1000])
def test_token_logprobs_chunked_equals_naive(small_lm, padding, chunk_size):
    g = torch.Generator().manual_seed(1)
    lengths = [13, 9, 5]
    width = max(lengths)
    ids = torch.zeros(3, width, dtype=torch.long)
    attention = torch.zeros(3, width, dtype=torch.long)
    for b, n in enumerate(lengths):
        tokens = torch.randint(1, 300, (n,), generator=g)
        if padding == "left":
            ids[b, width - n:], attention[b, width - n:] = tokens, 1
        else:
            ids[b, :n], attention[b, :n] = tokens, 1
    valid = (attention[:, 1:] * attention[:, :-1]).bool()

    small_lm.zero_grad()
    logp, ent = logprobs.token_logprobs(small_lm, ids, attention, temperature=0.7, chunk_size=chunk_size,
                                    with_entropy=True, entropy_grad=True)
    ((logp * valid).sum() + 0.1 * (ent * valid).sum()).backward()
    grads = {n: p.grad.clone() for n, p in small_lm.named_parameters()}

    small_lm.zero_grad()
    ref_logp, ref_ent = naive_logprobs(small_lm, ids, attention, 0.7)
    ((ref_logp * valid).sum() + 0.1 * (ref_ent * valid).sum()).backward()

    torch.testing.assert_close(logp[valid], ref_logp[valid], rtol=0, atol=1e-5)
    torch.testing.assert_close(ent[valid], ref_ent[valid], rtol=0, atol=1e-5)
    for n, p in small_lm.named_parameters():
        # fp32 sums in a different order: compare within 1e-5 of the gradient tensor's own scale
        scale = p.grad.abs().max().item()
        assert (grads[n] - p.grad).abs().max().item() <= 1e-5 * max(scale, 1.0), n


def test_entropy_as_a_metric_has_no_graph(small_lm):
    """Without entropy_grad the entropy is a metric: same values, no graph. A graph would be a branch that the
    backward of the loss never walks, and the chunk checkpoint's recomputation would keep its [N, V] softmax alive
    for it (measured on an H100: +37 GB at 32K tokens until the entropy tensor is freed)."""
    ids = torch.randint(1, 300, (2, 12), generator=torch.Generator().manual_seed(3))
    attention = torch.ones_like(ids)
    logp, ent = logprobs.token_logprobs(small_lm, ids, attention, 0.7, chunk_size=4, with_entropy=True)
    assert logp.requires_grad and not ent.requires_grad and ent.grad_fn is None
    _, ent_grad = logprobs.token_logprobs(small_lm, ids, attention, 0.7, chunk_size=4, with_entropy=True, entropy_grad=True)
    assert ent_grad.grad_fn is not None
    torch.testing.assert_close(ent, ent_grad.detach(), rtol=0, atol=1e-6)


def test_left_padding_gives_same_logprobs_as_unpadded(small_lm):
    tokens = torch.randint(1, 300, (1, 8), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        alone = logprobs.token_logprobs(small_lm, tokens, torch.ones_like(tokens))
        padded_ids = torch.cat([torch.zeros(1, 4, dtype=torch.long), tokens], 1)
        padded_mask = torch.cat([torch.zeros(1, 4, dtype=torch.long), torch.ones_like(tokens)], 1)
        padded = logprobs.token_logprobs(small_lm, padded_ids, padded_mask, chunk_size=3)
    torch.testing.assert_close(padded[:, 4:], alone, rtol=0, atol=1e-5)


def test_token_logprobs_projects_only_the_scored_positions(small_lm, monkeypatch):
    g = torch.Generator().manual_seed(8)
    ids = torch.randint(1, 300, (3, 12), generator=g)
    attention = torch.ones_like(ids)
    score = torch.zeros(3, 11)
    score[0, 5:9], score[1, 2:11], score[2, 10] = 1, 1, 1
    rows = []
    real = logprobs._chunk_logprobs
    monkeypatch.setattr(logprobs, "_chunk_logprobs",
                        lambda hidden, *a, **k: rows.append(hidden.shape[0]) or real(hidden, *a, **k))
    small_lm.zero_grad()
    logp, ent = logprobs.token_logprobs(small_lm, ids, attention, 0.7, chunk_size=4, with_entropy=True, score_mask=score)
    assert sum(rows) == int(score.sum()) == 14, "prompt and padding positions must not reach the output head"
    ((logp * score).sum() + (ent * score).sum()).backward()  # (checkpointing recomputes the same 14 rows)
    grads = {n: p.grad.clone() for n, p in small_lm.named_parameters()}
    assert torch.all(logp[score == 0] == 0) and torch.all(ent[score == 0] == 0)
    monkeypatch.undo()
    small_lm.zero_grad()
    full, full_ent = logprobs.token_logprobs(small_lm, ids, attention, 0.7, with_entropy=True)
    ((full * score).sum() + (full_ent * score).sum()).backward()
    torch.testing.assert_close(logp[score == 1], full[score == 1], rtol=0, atol=1e-5)
    for n, p in small_lm.named_parameters():  # fp32 sums in another order: within 1e-5 of the tensor's scale
        assert (grads[n] - p.grad).abs().max().item() <= 1e-5 * max(p.grad.abs().max().item(), 1.0), n


def test_token_logprobs_keeps_only_the_final_hidden_state(small_lm, monkeypatch):
    """output_hidden_states=True would keep every layer's output alive through a no-grad pass."""
    seen = []
    real_forward = small_lm.forward

    def spy(*args, **kwargs):
        seen.append(kwargs.get("output_hidden_states"))
        out = real_forward(*args, **kwargs)
        assert out.hidden_states is None
        return out

    monkeypatch.setattr(small_lm, "forward", spy)
    ids = torch.randint(1, 300, (2, 9), generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        logp = logprobs.token_logprobs(small_lm, ids, torch.ones_like(ids))
    monkeypatch.undo()
    assert seen and not any(seen)
    with torch.no_grad():
        naive, _ = naive_logprobs(small_lm, ids, torch.ones_like(ids), 1.0)
    torch.testing.assert_close(logp, naive, rtol=0, atol=1e-5)


# ====================================================================================================== issue 22
# The 2026 toolbox. Three kinds of reference, each independent of logprobs.py:
#   frozen_*    today's functions (commit f9b5297), copied verbatim: with every new option at its default the new
#               code must give BIT-identical values, gradients and stats (torch.equal, ==)
#   paper_*     plain loops written from the papers' equations (python floats where nothing needs a gradient)
#   verl_*, trl_*, openrlhf_*   the peers' formulas transcribed (file and function named in each), no imports
