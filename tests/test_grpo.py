"""grpo.py against plain loop references, plus the properties that make a trainer correct."""
import math

import pytest
import torch

import grpo

torch.manual_seed(0)


# ---------------------------------------------------------------------------------------------- references
def ref_advantages(rewards, group_size, norm_std, eps=1e-6):
    out = []
    for g in range(0, len(rewards), group_size):
        group = [float(r) for r in rewards[g:g + group_size]]
        mean = sum(group) / len(group)
        std = math.sqrt(sum((r - mean) ** 2 for r in group) / (len(group) - 1)) if len(group) > 1 else 0.0
        for r in group:
            if max(group) == min(group):
                out.append(0.0)
            else:
                out.append((r - mean) / (std + eps) if norm_std else r - mean)
    return torch.tensor(out)


def ref_aggregate(values, mask, mode, max_len=None):
    B, T = values.shape
    if mode == "token-mean":
        total, count = 0.0, 0
        for b in range(B):
            for t in range(T):
                if mask[b, t]:
                    total = total + values[b, t]
                    count += 1
        return total / count
    if mode == "seq-mean-token-mean":
        total = 0.0
        for b in range(B):
            n = int(mask[b].sum())
            seq = sum(values[b, t] for t in range(T) if mask[b, t])
            total = total + (seq / n if n else 0.0)
        return total / B
    total = sum(values[b, t] for b in range(B) for t in range(T) if mask[b, t])
    return total / (B * (max_len or T))


def random_batch(B=6, T=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(B, T, generator=g) * 3
    old = logp + 0.3 * torch.randn(B, T, generator=g)
    adv = torch.randn(B, generator=g)
    mask = torch.rand(B, T, generator=g) > 0.3
    mask[:, 0] = True
    return logp, old, adv, mask


# ---------------------------------------------------------------------------------------------- advantages
@pytest.mark.parametrize("norm_std", [True, False])
def test_group_advantages_match_reference(norm_std):
    rewards = torch.tensor([1, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 1, 0.5, 0.2, 0.9, 0.0], dtype=torch.float32)
    got = grpo.group_advantages(rewards, 4, norm_std=norm_std)
    torch.testing.assert_close(got, ref_advantages(rewards.tolist(), 4, norm_std), rtol=1e-5, atol=1e-6)
    assert torch.all(got[4:8] == 0), "a group with equal rewards must get exactly 0"


def test_group_advantages_equal_fractional_rewards_are_exactly_zero():
    got = grpo.group_advantages(torch.full((6,), 0.1), 3)
    assert torch.all(got == 0)


def test_group_advantages_rejects_bad_layout():
    with pytest.raises(ValueError):
        grpo.group_advantages(torch.zeros(7), 4)


# ---------------------------------------------------------------------------------------------- aggregation
@pytest.mark.parametrize("mode", grpo.LOSS_AGG_MODES)
def test_aggregate_matches_reference(mode):
    values = torch.randn(5, 7)
    mask = torch.rand(5, 7) > 0.4
    mask[:, 0] = True
    torch.testing.assert_close(grpo.aggregate(values, mask, mode), torch.as_tensor(ref_aggregate(values, mask, mode)),
                               rtol=1e-5, atol=1e-6)


def test_aggregate_unknown_mode():
    with pytest.raises(ValueError):
        grpo.aggregate(torch.zeros(2, 2), torch.ones(2, 2), "mean")


# ---------------------------------------------------------------------------------------------- KL
def test_kl_estimators_match_formulas_and_stay_finite():
    g = torch.Generator().manual_seed(0)
    logp, ref = torch.randn(4, 5, generator=g), torch.randn(4, 5, generator=g)  # |log r| < 2.3: below the clamp
    lr = ref - logp
    torch.testing.assert_close(grpo.kl_penalty(logp, ref, "k1"), logp - ref)
    torch.testing.assert_close(grpo.kl_penalty(logp, ref, "k2"), 0.5 * lr ** 2)
    torch.testing.assert_close(grpo.kl_penalty(logp, ref, "k3"), torch.exp(lr) - lr - 1)
    assert torch.all(grpo.kl_penalty(logp, ref, "k3") >= 0)
    huge = grpo.kl_penalty(torch.tensor([-1000.0, 0.0]), torch.tensor([0.0, -1000.0]), "k3")
    assert torch.isfinite(huge).all() and huge.max() == 10.0 and huge.min() >= 0, "k3 is clamped to [-10, 10]"
    with pytest.raises(ValueError):
        grpo.kl_penalty(logp, ref, "k4")


def test_k3_is_unbiased_estimate_of_kl():
    # KL(p||q) for two categoricals vs the Monte-Carlo mean of k3 over samples from p
    p = torch.tensor([0.5, 0.3, 0.2])
    q = torch.tensor([0.2, 0.5, 0.3])
    exact = (p * (p / q).log()).sum()
    samples = torch.multinomial(p, 200_000, replacement=True, generator=torch.Generator().manual_seed(0))
    k3 = grpo.kl_penalty(p.log()[samples], q.log()[samples], "k3").mean()
    assert abs(k3 - exact) < 0.01


# ---------------------------------------------------------------------------------------------- policy loss
def ref_policy_loss(logp, old, adv, mask, cl, ch, mode):
    B, T = logp.shape
    per_token = torch.zeros(B, T)
    for b in range(B):
        for t in range(T):
            ratio = torch.exp(logp[b, t] - old[b, t])
            per_token[b, t] = max(-adv[b] * ratio, -adv[b] * torch.clamp(ratio, 1 - cl, 1 + ch))
    return ref_aggregate(per_token, mask, mode)


@pytest.mark.parametrize("mode", grpo.LOSS_AGG_MODES)
def test_policy_loss_values_and_gradients_match_reference(mode):
    logp, old, adv, mask = random_batch()
    a = logp.clone().requires_grad_(True)
    b = logp.clone().requires_grad_(True)
    loss, stats = grpo.policy_loss(a, old, adv, mask, clip_low=0.2, clip_high=0.28, loss_agg=mode)
    ref = ref_policy_loss(b, old, adv, mask, 0.2, 0.28, mode)
    torch.testing.assert_close(loss, ref, rtol=1e-5, atol=1e-6)
    loss.backward()
    ref.backward()
    torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-6)
    assert 0 < stats["clip_frac"] < 1 and stats["ratio_min"] < 1 < stats["ratio_max"]


def test_on_policy_ratio_is_one_and_gradient_is_plain_policy_gradient():
    logp, _, adv, mask = random_batch(seed=3)
    for mode in grpo.LOSS_AGG_MODES:
        x = logp.clone().requires_grad_(True)
        loss, stats = grpo.policy_loss(x, x.detach(), adv, mask, loss_agg=mode)
        loss.backward()
        y = logp.clone().requires_grad_(True)
        grpo.aggregate(-adv[:, None] * y, mask, mode).backward()     # -A * grad(logp), aggregated
        torch.testing.assert_close(x.grad, y.grad)
        assert stats["ratio_min"] == stats["ratio_max"] == 1.0 and stats["clip_frac"] == 0.0


def test_nan_in_masked_positions_never_leaks():
    logp, old, adv, mask = random_batch(seed=4)
    poisoned = logp.clone()
    poisoned[~mask] = float("nan")
    old_poisoned = old.clone()
    old_poisoned[~mask] = float("inf")
    x = poisoned.clone().requires_grad_(True)
    loss, _ = grpo.policy_loss(x, old_poisoned, adv, mask)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(x.grad).all()
    assert torch.all(x.grad[~mask] == 0)
    clean = logp.clone().requires_grad_(True)
    clean_loss, _ = grpo.policy_loss(clean, old, adv, mask)
    torch.testing.assert_close(loss, clean_loss)


@pytest.mark.parametrize("mode", grpo.LOSS_AGG_MODES)
@pytest.mark.parametrize("splits", [[6], [1, 5], [2, 2, 2], [3, 1, 1, 1]])
def test_micro_batching_gives_the_full_batch_gradient(mode, splits):
    logp, old, adv, mask = random_batch(B=6, T=9, seed=5)
    full = logp.clone().requires_grad_(True)
    loss, _ = grpo.policy_loss(full, old, adv, mask, loss_agg=mode, max_len=12)
    loss.backward()

    acc = logp.clone().requires_grad_(True)
    n_tokens, n_seqs, start = mask.sum(), mask.shape[0], 0
    total = 0.0
    for size in splits:
        sl = slice(start, start + size)
        # micro-batches may be padded to their own width: cut trailing padding to prove width does not matter
        width = int(mask[sl].nonzero()[:, 1].max()) + 1
        part, _ = grpo.policy_loss(acc[sl, :width], old[sl, :width], adv[sl], mask[sl, :width], loss_agg=mode,
                                   num_tokens=n_tokens, num_seqs=n_seqs, max_len=12)
        part.backward()
        total = total + part.detach()
        start += size
    torch.testing.assert_close(total, loss.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(acc.grad, full.grad, rtol=1e-5, atol=1e-7)


def test_is_weights_scale_per_token_loss():
    logp, old, adv, mask = random_batch(seed=6)
    w = torch.rand_like(logp) * 2
    x = logp.clone().requires_grad_(True)
    loss, _ = grpo.policy_loss(x, x.detach(), adv, mask, is_weights=w)
    expected = grpo.aggregate(-adv[:, None] * w * 1.0, mask, "token-mean")
    torch.testing.assert_close(loss, expected)


# ---------------------------------------------------------------------------------------------- rollout correction
def test_rollout_correction_weights_and_alignment():
    logp, _, _, mask = random_batch(seed=7)
    rollout = logp + 0.05 * torch.randn_like(logp)
    w, stats = grpo.rollout_correction(logp, rollout, mask, cap=1.02)
    assert w.max() <= 1.02 + 1e-6 and torch.all(w[~mask] == 0) and not w.requires_grad
    per_seq = []
    for b in range(mask.shape[0]):
        d = [abs(float(logp[b, t] - rollout[b, t])) for t in range(mask.shape[1]) if mask[b, t]]
        per_seq.append(math.exp(sum(d) / len(d)))
    assert abs(stats["align_mean"] - sum(per_seq) / len(per_seq)) < 1e-5
    assert abs(stats["align_max"] - max(per_seq)) < 1e-5
    same_w, same = grpo.rollout_correction(logp, logp, mask)
    assert same["align_mean"] == 1.0 and same["max_abs_diff"] == 0.0 and abs(same["kl_k3"]) < 1e-7
    assert torch.all(same_w[mask] == 1)


# ---------------------------------------------------------------------------------------------- token_logprobs
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
    logp, ent = grpo.token_logprobs(small_lm, ids, attention, temperature=0.7, chunk_size=chunk_size,
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
    logp, ent = grpo.token_logprobs(small_lm, ids, attention, 0.7, chunk_size=4, with_entropy=True)
    assert logp.requires_grad and not ent.requires_grad and ent.grad_fn is None
    _, ent_grad = grpo.token_logprobs(small_lm, ids, attention, 0.7, chunk_size=4, with_entropy=True, entropy_grad=True)
    assert ent_grad.grad_fn is not None
    torch.testing.assert_close(ent, ent_grad.detach(), rtol=0, atol=1e-6)


def test_left_padding_gives_same_logprobs_as_unpadded(small_lm):
    tokens = torch.randint(1, 300, (1, 8), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        alone = grpo.token_logprobs(small_lm, tokens, torch.ones_like(tokens))
        padded_ids = torch.cat([torch.zeros(1, 4, dtype=torch.long), tokens], 1)
        padded_mask = torch.cat([torch.zeros(1, 4, dtype=torch.long), torch.ones_like(tokens)], 1)
        padded = grpo.token_logprobs(small_lm, padded_ids, padded_mask, chunk_size=3)
    torch.testing.assert_close(padded[:, 4:], alone, rtol=0, atol=1e-5)


# ---------------------------------------------------------------------------------------------- issue 15
def test_approx_kl_old_is_k3_of_kl_old_to_theta_on_samples_of_pi_old():
    """The tokens were sampled from pi_old, so KL(pi_old || pi_theta) is estimated with r = pi_theta / pi_old:
    k3 = (r - 1) - log r (cleanrl's / TRL's approx_kl). The reverse-direction formula differs at second order."""
    logp, old, adv, mask = random_batch(seed=11)
    _, stats = grpo.policy_loss(logp, old, adv, mask)
    log_r = (logp - old)[mask]
    assert stats["approx_kl_old"] == pytest.approx(((log_r.exp() - 1) - log_r).mean().item(), rel=1e-5)
    wrong = ((-log_r).exp() - 1 + log_r).mean().item()
    assert abs(stats["approx_kl_old"] - wrong) > 1e-3
    # and it estimates the KL it names: exact KL(p || q) vs the mean over samples from p
    p, q = torch.tensor([0.5, 0.3, 0.2]), torch.tensor([0.3, 0.3, 0.4])
    y = torch.multinomial(p, 200_000, replacement=True, generator=torch.Generator().manual_seed(1))
    ones = torch.ones(1, y.numel(), dtype=torch.bool)
    _, stats = grpo.policy_loss(q.log()[y][None], p.log()[y][None], torch.zeros(1), ones)
    assert stats["approx_kl_old"] == pytest.approx((p * (p / q).log()).sum().item(), abs=0.005)


@pytest.mark.parametrize("estimator,divergence", [("k1", None), ("k2", "reverse"), ("k3", "forward")])
def test_kl_estimator_gradients_are_what_the_docstring_says(estimator, divergence):
    """Used as a loss on samples of pi (gradient through logp only), the expected gradient of k1 is 0, of k2 the
    gradient of KL(pi || ref), of k3 the gradient of KL(ref || pi). Exact expectations over a 5-token vocabulary."""
    g = torch.Generator().manual_seed(3)
    theta = torch.randn(5, generator=g, dtype=torch.float64, requires_grad=True)
    ref = torch.randn(5, generator=g, dtype=torch.float64).log_softmax(0)
    logp = theta.log_softmax(0)
    probs = logp.exp().detach()
    per_token = grpo.kl_penalty(logp, ref, estimator)                 # [V]: the estimator at each possible token
    (expected_grad,) = torch.autograd.grad((probs * per_token).sum(), theta)   # E_{y ~ pi}[grad k(y)]
    if divergence is None:
        target = torch.zeros_like(theta)
    else:
        p = theta.log_softmax(0)
        kl = (p.exp() * (p - ref)).sum() if divergence == "reverse" else (ref.exp() * (ref - p)).sum()
        (target,) = torch.autograd.grad(kl, theta)
    torch.testing.assert_close(expected_grad, target, rtol=1e-9, atol=1e-12)


def test_token_logprobs_projects_only_the_scored_positions(small_lm, monkeypatch):
    g = torch.Generator().manual_seed(8)
    ids = torch.randint(1, 300, (3, 12), generator=g)
    attention = torch.ones_like(ids)
    score = torch.zeros(3, 11)
    score[0, 5:9], score[1, 2:11], score[2, 10] = 1, 1, 1
    rows = []
    real = grpo._chunk_logprobs
    monkeypatch.setattr(grpo, "_chunk_logprobs", lambda hidden, *a: rows.append(hidden.shape[0]) or real(hidden, *a))
    small_lm.zero_grad()
    logp, ent = grpo.token_logprobs(small_lm, ids, attention, 0.7, chunk_size=4, with_entropy=True, score_mask=score)
    assert sum(rows) == int(score.sum()) == 14, "prompt and padding positions must not reach the output head"
    ((logp * score).sum() + (ent * score).sum()).backward()  # (checkpointing recomputes the same 14 rows)
    grads = {n: p.grad.clone() for n, p in small_lm.named_parameters()}
    assert torch.all(logp[score == 0] == 0) and torch.all(ent[score == 0] == 0)
    monkeypatch.undo()
    small_lm.zero_grad()
    full, full_ent = grpo.token_logprobs(small_lm, ids, attention, 0.7, with_entropy=True)
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
        logp = grpo.token_logprobs(small_lm, ids, torch.ones_like(ids))
    monkeypatch.undo()
    assert seen and not any(seen)
    with torch.no_grad():
        naive, _ = naive_logprobs(small_lm, ids, torch.ones_like(ids), 1.0)
    torch.testing.assert_close(logp, naive, rtol=0, atol=1e-5)
