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
        return total / max(count, 1)
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


def frozen_group_advantages(rewards, group_size, norm_std=True, eps=1e-6):
    grouped = rewards.float().view(-1, group_size)
    centered = grouped - grouped.mean(dim=1, keepdim=True)
    if norm_std and group_size > 1:
        centered = centered / (grouped.std(dim=1, keepdim=True, unbiased=True) + eps)
    all_equal = grouped.max(dim=1, keepdim=True).values == grouped.min(dim=1, keepdim=True).values
    return torch.where(all_equal, torch.zeros_like(centered), centered).view(-1)


def frozen_policy_loss(logp, old_logp, advantages, mask, clip_low=0.2, clip_high=0.2, loss_agg="token-mean",
                       num_tokens=None, num_seqs=None, max_len=None, is_weights=None):
    mask = mask.bool()
    zero = torch.zeros_like(logp)
    logp = torch.where(mask, logp, zero)
    old_logp = torch.where(mask, old_logp.to(logp.dtype), zero)
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1).expand_as(logp)
    advantages = torch.where(mask, advantages.to(logp.dtype), zero)
    log_ratio = (logp - old_logp).clamp(-grpo.LOG_RATIO_CLAMP, grpo.LOG_RATIO_CLAMP)
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    per_token = torch.maximum(unclipped, clipped)
    if is_weights is not None:
        per_token = per_token * torch.where(mask, is_weights.detach().to(logp.dtype), zero)
    loss = grpo.aggregate(per_token, mask, loss_agg, num_tokens=num_tokens, num_seqs=num_seqs, max_len=max_len)
    with torch.no_grad():
        n = mask.sum().clamp(min=1)
        masked_ratio = ratio[mask]
        stats = {
            "clip_frac": ((clipped > unclipped) & mask).sum().item() / n.item(),
            "approx_kl_old": (((ratio - 1.0 - log_ratio) * mask).sum() / n).item(),
            "ratio_min": masked_ratio.min().item() if masked_ratio.numel() else 1.0,
            "ratio_max": masked_ratio.max().item() if masked_ratio.numel() else 1.0,
        }
    return loss, stats


def frozen_rollout_correction(old_logp, rollout_logp, mask, cap=2.0):
    logp = old_logp
    mask = mask.bool()
    with torch.no_grad():
        diff = torch.where(mask, logp.detach().float() - rollout_logp.float(), torch.zeros_like(logp, dtype=torch.float32))
        weights = torch.exp(diff.clamp(max=grpo.LOG_RATIO_CLAMP)).clamp(max=cap) * mask
        n_tok = mask.sum(dim=-1)
        has_tokens = n_tok > 0
        align = torch.exp(diff.abs().sum(dim=-1) / n_tok.clamp(min=1))[has_tokens]
        k3 = grpo.kl_penalty(-diff, torch.zeros_like(diff), "k3")
        stats = {
            "align_mean": align.mean().item() if align.numel() else 1.0,
            "align_max": align.max().item() if align.numel() else 1.0,
            "max_abs_diff": diff.abs().max().item() if diff.numel() else 0.0,
            "kl_k3": ((k3 * mask).sum() / mask.sum().clamp(min=1)).item(),
        }
    return weights, stats


def edge_batch(kind, seed=0):
    """(logp, old, adv, mask) for the edge cases every loss and correction must survive."""
    logp, old, adv, mask = random_batch(B=6, T=9, seed=seed)
    if kind == "far":            # token log-ratios of +-4 and beyond: ratios e^-8 .. e^8, clipping on both sides
        old = logp + 4.0 * torch.randn(logp.shape, generator=torch.Generator().manual_seed(seed + 100))
    elif kind == "one_token":    # every response is a single token
        mask = torch.zeros_like(mask)
        mask[:, 0] = True
    elif kind == "all_masked":   # nothing to train on
        mask = torch.zeros_like(mask)
    elif kind == "row_masked":   # one response with no token (e.g. truncated and masked)
        mask[2] = False
    elif kind == "poisoned":     # NaN / inf where the mask is 0 must never reach a value or a gradient
        logp, old = logp.clone(), old.clone()
        logp[~mask], old[~mask] = float("nan"), float("-inf")
    return logp, old, adv, mask


EDGE_KINDS = ["plain", "far", "one_token", "all_masked", "row_masked", "poisoned"]


# ---------------------------------------------------------------------------------------------- bit-identity
@pytest.mark.parametrize("kind", EDGE_KINDS + ["clamped"])
@pytest.mark.parametrize("mode", grpo.LOSS_AGG_MODES)
@pytest.mark.parametrize("with_is", [False, True])
def test_policy_loss_ppo_default_is_bit_identical_to_before(kind, mode, with_is):
    logp, old, adv, mask = edge_batch("far" if kind == "clamped" else kind, seed=21)
    if kind == "clamped":        # log-ratios past +-20: the clamp binds
        old = logp + 30.0 * torch.sign(torch.randn(logp.shape, generator=torch.Generator().manual_seed(5)))
    w = torch.rand(logp.shape, generator=torch.Generator().manual_seed(22)) * 2 if with_is else None
    norm = dict(num_tokens=int(mask.sum()) + 3, num_seqs=7, max_len=12)
    a, b = logp.clone().requires_grad_(True), logp.clone().requires_grad_(True)
    new_loss, new_stats = grpo.policy_loss(a, old, adv, mask, clip_low=0.2, clip_high=0.28, loss_agg=mode, is_weights=w, **norm)
    old_loss, old_stats = frozen_policy_loss(b, old, adv, mask, 0.2, 0.28, mode, is_weights=w, **norm)
    new_loss.backward()
    old_loss.backward()
    assert torch.equal(new_loss, old_loss) and torch.equal(a.grad, b.grad)
    assert new_stats == old_stats
    explicit, _ = grpo.policy_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.28, loss_agg=mode, is_weights=w, loss_type="ppo", **norm)
    assert torch.equal(explicit, old_loss.detach())


@pytest.mark.parametrize("kind", EDGE_KINDS + ["clamped"])
@pytest.mark.parametrize("cap", [1.0, 1.02, 2.0, 1e9])
def test_rollout_correction_default_is_bit_identical_to_before(kind, cap):
    logp, old, _, mask = edge_batch(kind, seed=23)
    if kind == "clamped":
        old = logp + 30.0 * torch.sign(torch.randn(logp.shape, generator=torch.Generator().manual_seed(6)))
    new_w, new_stats = grpo.rollout_correction(old, logp, mask, cap=cap)
    old_w, old_stats = frozen_rollout_correction(old, logp, mask, cap=cap)
    assert torch.equal(new_w, old_w)
    assert {k: new_stats[k] for k in old_stats} == old_stats
    explicit, _ = grpo.rollout_correction(old, logp, mask, cap=cap, mode="token_truncate", low=0.0)
    assert torch.equal(explicit, old_w)


def test_group_advantages_is_bit_identical_to_before():
    g = torch.Generator().manual_seed(24)
    rewards = torch.cat([torch.randint(0, 2, (40,), generator=g).float(), torch.rand(40, generator=g),
                         torch.full((8,), 0.1), torch.full((8,), 1.0)])
    for norm_std in (True, False):
        assert torch.equal(grpo.group_advantages(rewards, 8, norm_std), frozen_group_advantages(rewards, 8, norm_std))


# ---------------------------------------------------------------------------------------------- informative groups
def test_informative_groups_is_std_above_zero_exactly():
    rewards = torch.tensor([1, 0, 0, 1,  1, 1, 1, 1,  0, 0, 0, 0,  0.5, 0.5, 0.5, 0.5,  0.2, 0.2, 0.2, 0.9,
                            1.0, 0.0, 1.0, 1.0], dtype=torch.float32)
    expected = []
    for g in range(0, len(rewards), 4):
        group = rewards[g:g + 4].tolist()
        expected.append(max(group) != min(group))      # all equal <=> zero spread, whatever the values
    got = grpo.informative_groups(rewards, 4)
    assert got.dtype == torch.bool and got.tolist() == expected == [True, False, False, False, True, True]
    # a float std is not exactly 0 for equal non-binary rewards: seven 0.1s give 8e-9
    sevens = torch.full((7,), 0.1)
    assert sevens.std() > 0 and grpo.informative_groups(sevens, 7).tolist() == [False]
    # and the groups it drops are exactly those group_advantages zeroes
    adv = grpo.group_advantages(rewards, 4).view(-1, 4)
    assert torch.equal(adv.abs().sum(dim=1) > 0, got)
    with pytest.raises(ValueError):
        grpo.informative_groups(torch.zeros(6), 4)


# ---------------------------------------------------------------------------------------------- overlong penalty
def trl_soft_overlong_punishment(lengths, max_completion_len, soft_punish_cache):
    """trl/rewards/other_rewards.py, _SoftOverlongPunishment.__call__ (TRL, Jul 2026)."""
    rewards = []
    for n in lengths:
        if n <= max_completion_len - soft_punish_cache:
            rewards.append(0.0)
        elif max_completion_len - soft_punish_cache < n <= max_completion_len:
            rewards.append((max_completion_len - soft_punish_cache - n) / soft_punish_cache)
        else:
            rewards.append(-1.0)
    return rewards


def verl_dapo_overlong_reward(n, max_resp_len, buffer_len, penalty_factor):
    """verl/workers/reward_manager/dapo.py, DAPORewardManager.__call__ (verl, Jan 2026)."""
    expected_len = max_resp_len - buffer_len
    exceed_len = n - expected_len
    return min(-exceed_len / buffer_len * penalty_factor, 0)


def test_overlong_penalty_matches_trl_and_verl_and_eq13_boundaries():
    lengths = list(range(0, 26))
    got = grpo.overlong_penalty(torch.tensor(lengths), max_response_len=20, buffer_len=5)
    torch.testing.assert_close(got, torch.tensor(trl_soft_overlong_punishment(lengths, 20, 5)), rtol=0, atol=1e-7)
    scaled = grpo.overlong_penalty(torch.tensor(lengths), 20, 5, penalty_factor=0.5)
    for n, value in zip(lengths, scaled.tolist()):
        if n <= 20:  # verl keeps falling past L_max; the paper and TRL stop at -1 (a capped generation never gets there)
            assert value == pytest.approx(verl_dapo_overlong_reward(n, 20, 5, 0.5), abs=1e-7)
        else:
            assert value == -0.5
    # eq. 13's boundaries: 0 at exactly L_max - L_cache, -1/L_cache one token later, -1 at exactly L_max
    assert got[15] == 0 and got[16] == pytest.approx(-0.2) and got[20] == -1 and got[25] == -1
    step = grpo.overlong_penalty(torch.tensor([19, 20, 21]), 20, 0)
    assert step.tolist() == [0.0, 0.0, -1.0] and step.dtype == torch.float32
    with pytest.raises(ValueError):
        grpo.overlong_penalty(torch.tensor([1]), 20, 21)


# ---------------------------------------------------------------------------------------------- GSPO
def paper_gspo_loss(logp, old, adv, mask, cl, ch, mode, max_len=None):
    """GSPO as the paper writes it, with the sequence ratio itself carrying the gradient (no stop-gradient
    trick): s_b = (pi_theta(y_b) / pi_old(y_b)) ^ (1 / |y_b|), L_b = -min(s_b A_b, clip(s_b, 1-cl, 1+ch) A_b),
    L_b placed on each of the sequence's tokens, then aggregated by the loop reference ref_aggregate."""
    B, T = logp.shape
    rows = []
    for b in range(B):
        idx = [t for t in range(T) if mask[b, t]]
        if not idx:
            rows.append(torch.zeros(T))
            continue
        s = torch.exp(sum(logp[b, t] - old[b, t] for t in idx) / len(idx))
        seq_loss = torch.maximum(-adv[b] * s, -adv[b] * torch.clamp(s, 1 - cl, 1 + ch))
        rows.append(torch.stack([seq_loss if mask[b, t] else torch.zeros(()) for t in range(T)]))
    return ref_aggregate(torch.stack(rows), mask, mode, max_len=max_len)


def verl_masked_sum(values, mask, axis=None):
    return (values * mask).sum() if axis is None else (values * mask).sum(dim=axis)


def verl_agg_loss(loss_mat, loss_mask, loss_agg_mode):
    """verl/trainer/ppo/core_algos.py agg_loss (dp_size 1, batch totals from this batch)."""
    if loss_agg_mode == "token-mean":
        return verl_masked_sum(loss_mat, loss_mask) / loss_mask.sum()
    if loss_agg_mode == "seq-mean-token-mean":
        seq_mask = torch.sum(loss_mask, dim=-1)
        seq_losses = torch.sum(loss_mat * loss_mask, dim=-1) / (seq_mask + 1e-8)
        seq_mask = (seq_mask > 0).float()
        return verl_masked_sum(seq_losses, seq_mask) / seq_mask.sum()
    raise NotImplementedError(loss_agg_mode)


def verl_gspo_loss(old_log_prob, log_prob, advantages, response_mask, clip_ratio_low, clip_ratio_high):
    """verl/trainer/ppo/core_algos.py compute_policy_loss_gspo (verl, Jan 2026): always seq-mean-token-mean."""
    negative_approx_kl = log_prob - old_log_prob
    seq_lengths = torch.sum(response_mask, dim=-1).clamp(min=1)
    negative_approx_kl_seq = torch.sum(negative_approx_kl * response_mask, dim=-1) / seq_lengths
    log_seq_importance_ratio = log_prob - log_prob.detach() + negative_approx_kl_seq.detach().unsqueeze(-1)
    log_seq_importance_ratio = torch.clamp(log_seq_importance_ratio, max=10.0)
    seq_importance_ratio = torch.exp(log_seq_importance_ratio)
    pg_losses1 = -advantages * seq_importance_ratio
    pg_losses2 = -advantages * torch.clamp(seq_importance_ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)
    pg_losses = torch.maximum(pg_losses1, pg_losses2)
    pg_clipfrac = verl_masked_sum(torch.gt(pg_losses2, pg_losses1).float(), response_mask) / response_mask.sum()
    return verl_agg_loss(pg_losses, response_mask, "seq-mean-token-mean"), pg_clipfrac.item()


def grads_of(fn, logp):
    x = logp.clone().requires_grad_(True)
    loss = torch.as_tensor(fn(x))
    (grad,) = torch.autograd.grad(loss, x, allow_unused=True) if loss.requires_grad else (torch.zeros_like(x),)
    return loss.detach(), torch.zeros_like(x) if grad is None else grad


@pytest.mark.parametrize("kind", EDGE_KINDS)
@pytest.mark.parametrize("mode", grpo.LOSS_AGG_MODES)
def test_gspo_matches_the_paper_sequence_ratio(kind, mode):
    logp, old, adv, mask = edge_batch(kind, seed=31)
    clean_logp, clean_old = torch.where(mask, logp, 0.0), torch.where(mask, old, 0.0)
    loss, grad = grads_of(lambda x: grpo.policy_loss(x, old, adv, mask, clip_low=0.2, clip_high=0.28, loss_agg=mode, max_len=12,
                                                     num_seqs=6, loss_type="gspo")[0], logp)
    ref, ref_grad = grads_of(lambda x: paper_gspo_loss(x, clean_old, adv, mask, 0.2, 0.28, mode, max_len=12),
                             clean_logp)
    assert torch.isfinite(loss) and torch.isfinite(grad).all() and torch.all(grad[~mask] == 0)
    torch.testing.assert_close(loss, torch.as_tensor(ref, dtype=loss.dtype), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-5, atol=1e-7)
    if kind == "all_masked":
        assert loss == 0 and torch.all(grad == 0)


@pytest.mark.parametrize("kind", ["plain", "far", "one_token", "poisoned", "huge"])
def test_gspo_matches_verl(kind):
    logp, old, adv, mask = edge_batch("plain" if kind == "huge" else kind, seed=32)
    if kind == "huge":  # mean log-ratios past 10 in some sequences: verl's clamp binds, ours must too
        sign = torch.tensor([1.0, -1.0, 1.0, 0.0, 1.0, -1.0]).view(-1, 1)
        old = logp - sign * (11.0 + torch.rand(logp.shape, generator=torch.Generator().manual_seed(7)))
    clean_logp, clean_old = torch.where(mask, logp, 0.0), torch.where(mask, old, 0.0)
    x = logp.clone().requires_grad_(True)
    loss, stats = grpo.policy_loss(x, old, adv, mask, clip_low=0.2, clip_high=0.28, loss_agg="seq-mean-token-mean", loss_type="gspo")
    loss.backward()
    y = clean_logp.clone().requires_grad_(True)
    ref, ref_clipfrac = verl_gspo_loss(clean_old, y, adv[:, None], mask.float(), 0.2, 0.28)
    ref.backward()
    torch.testing.assert_close(loss, ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(x.grad, y.grad, rtol=1e-5, atol=1e-7)
    assert stats["clip_frac"] == pytest.approx(ref_clipfrac, abs=1e-6)
    if kind == "huge":
        assert stats["ratio_max"] == pytest.approx(math.exp(10.0), rel=1e-6)


def trl_gspo_loss(per_token_logps, old_per_token_logps, advantages, mask, epsilon_low, epsilon_high, loss_type):
    """trl/trainer/grpo_trainer.py _compute_loss with importance_sampling_level="sequence" (TRL, Jul 2026): one
    ratio per sequence ([B, 1], its gradient through the mean), broadcast by the loss type's normalisation."""
    log_ratio = per_token_logps - old_per_token_logps
    log_importance_weights = ((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1)
    coef_1 = torch.exp(log_importance_weights)
    coef_2 = torch.clamp(coef_1, 1 - epsilon_low, 1 + epsilon_high)
    per_token_loss = -torch.min(coef_1 * advantages, coef_2 * advantages)
    if loss_type == "grpo":
        return ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    return (per_token_loss * mask).sum() / mask.sum().clamp(min=1.0)  # "dapo": the batch's token count


@pytest.mark.parametrize("kind", ["plain", "far", "one_token", "poisoned"])
def test_gspo_matches_trl_sequence_level_under_both_normalisations(kind):
    """TRL differentiates the sequence ratio itself; we use verl's stop-gradient token form. Same values and
    gradients, both under TRL's "grpo" (seq-mean-token-mean) and "dapo" (token-mean) normalisations."""
    logp, old, adv, mask = edge_batch(kind, seed=34)
    clean_logp, clean_old = torch.where(mask, logp, 0.0), torch.where(mask, old, 0.0)
    for mode, trl_type in (("seq-mean-token-mean", "grpo"), ("token-mean", "dapo")):
        ours = grads_of(lambda x: grpo.policy_loss(x, old, adv, mask, clip_low=0.2, clip_high=0.28, loss_agg=mode, loss_type="gspo")[0], logp)
        trl = grads_of(lambda x: trl_gspo_loss(x, clean_old, adv[:, None], mask.float(), 0.2, 0.28, trl_type),
                       clean_logp)
        torch.testing.assert_close(ours, trl, rtol=1e-5, atol=1e-7)


def test_gspo_on_one_token_responses_is_ppo():
    logp, old, adv, mask = edge_batch("one_token", seed=33)
    for mode in grpo.LOSS_AGG_MODES:
        ppo = grads_of(lambda x: grpo.policy_loss(x, old, adv, mask, clip_low=0.2, clip_high=0.28, loss_agg=mode)[0], logp)
        gspo = grads_of(lambda x: grpo.policy_loss(x, old, adv, mask, clip_low=0.2, clip_high=0.28, loss_agg=mode, loss_type="gspo")[0], logp)
        torch.testing.assert_close(gspo, ppo, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------------------------------------- CISPO
def paper_cispo_loss(logp, old, adv, mask, cl, ch, mode, max_len=None):
    """CISPO: L_t = -sg[clip(r_t, 1-cl, 1+ch)] * A * log pi_theta(y_t); the weight is a python float (no graph)."""
    B, T = logp.shape
    per_token = torch.zeros(B, T)
    for b in range(B):
        for t in range(T):
            if mask[b, t]:
                w = min(max(math.exp(float((logp[b, t] - old[b, t]).detach())), 1 - cl), 1 + ch)
                per_token[b, t] = -w * adv[b] * logp[b, t]
    return ref_aggregate(per_token, mask, mode, max_len=max_len)


def verl_cispo_loss(old_log_prob, log_prob, advantages, response_mask, clip_ratio_low, clip_ratio_high, mode):
    """verl/trainer/ppo/core_algos.py compute_policy_loss_cispo (verl, Jan 2026)."""
    negative_approx_kl = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(negative_approx_kl)
    clipped_ratio = torch.clamp(ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)
    pg_losses = -clipped_ratio.detach() * advantages * log_prob
    pg_clipfrac = verl_masked_sum((ratio != clipped_ratio).float(), response_mask) / response_mask.sum()
    return verl_agg_loss(pg_losses, response_mask, mode), pg_clipfrac.item()


def trl_cispo_loss(per_token_logps, old_per_token_logps, advantages, mask, epsilon_high):
    """trl/trainer/grpo_trainer.py _compute_loss, loss_type="cispo", token level (TRL, Jul 2026): an absolute
    upper bound epsilon_high on the weight, no lower bound, normalised by the batch's token count."""
    coef_1 = torch.exp(per_token_logps - old_per_token_logps)
    clamped_ratios = torch.clamp(coef_1, max=epsilon_high).detach()
    per_token_loss = -clamped_ratios * advantages * per_token_logps
    return (per_token_loss * mask).sum() / mask.sum().clamp(min=1.0)


@pytest.mark.parametrize("kind", EDGE_KINDS)
@pytest.mark.parametrize("mode", grpo.LOSS_AGG_MODES)
def test_cispo_matches_the_paper(kind, mode):
    logp, old, adv, mask = edge_batch(kind, seed=41)
    clean_logp, clean_old = torch.where(mask, logp, 0.0), torch.where(mask, old, 0.0)
    loss, grad = grads_of(lambda x: grpo.policy_loss(x, old, adv, mask, clip_low=0.2, clip_high=0.28, loss_agg=mode, max_len=12,
                                                     loss_type="cispo")[0], logp)
    ref, ref_grad = grads_of(lambda x: paper_cispo_loss(x, clean_old, adv, mask, 0.2, 0.28, mode, max_len=12),
                             clean_logp)
    assert torch.isfinite(loss) and torch.isfinite(grad).all() and torch.all(grad[~mask] == 0)
    torch.testing.assert_close(loss, torch.as_tensor(ref, dtype=loss.dtype), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("kind", ["plain", "far", "one_token", "poisoned"])
@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
def test_cispo_matches_verl_and_trl(kind, mode):
    logp, old, adv, mask = edge_batch(kind, seed=42)
    clean_logp, clean_old = torch.where(mask, logp, 0.0), torch.where(mask, old, 0.0)
    ours = lambda cl, ch: grads_of(lambda x: grpo.policy_loss(x, old, adv, mask, clip_low=cl, clip_high=ch, loss_agg=mode, loss_type="cispo")[0], logp)
    verl = grads_of(lambda x: verl_cispo_loss(clean_old, x, adv[:, None], mask.float(), 0.2, 0.28, mode)[0], clean_logp)
    torch.testing.assert_close(ours(0.2, 0.28), verl, rtol=1e-5, atol=1e-7)
    _, stats = grpo.policy_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.28, loss_agg=mode, loss_type="cispo")
    assert stats["clip_frac"] == pytest.approx(verl_cispo_loss(clean_old, clean_logp, adv[:, None], mask.float(),
                                                               0.2, 0.28, mode)[1], abs=1e-6)
    if mode == "token-mean":  # TRL's epsilon_high = 5 (ScaleRL's eps_max) is our clip_high = 4 with no lower bound
        trl = grads_of(lambda x: trl_cispo_loss(x, clean_old, adv[:, None], mask.float(), 5.0), clean_logp)
        torch.testing.assert_close(ours(1.0, 4.0), trl, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("loss_type", grpo.LOSS_TYPES)
def test_every_loss_type_on_policy_is_the_plain_policy_gradient(loss_type):
    logp, _, adv, mask = random_batch(seed=43)
    for mode in grpo.LOSS_AGG_MODES:
        _, grad = grads_of(lambda x: grpo.policy_loss(x, x.detach(), adv, mask, loss_agg=mode, loss_type=loss_type)[0], logp)
        _, plain = grads_of(lambda y: grpo.aggregate(-adv[:, None] * y, mask, mode), logp)
        torch.testing.assert_close(grad, plain)


@pytest.mark.parametrize("loss_type", grpo.LOSS_TYPES)
@pytest.mark.parametrize("mode", grpo.LOSS_AGG_MODES)
def test_every_loss_type_micro_batches_to_the_full_batch_gradient(loss_type, mode):
    logp, old, adv, mask = random_batch(B=6, T=9, seed=44)
    w = torch.rand(logp.shape, generator=torch.Generator().manual_seed(45)) + 0.5
    _, full = grads_of(lambda x: grpo.policy_loss(x, old, adv, mask, clip_low=0.2, clip_high=0.28, loss_agg=mode, max_len=12, is_weights=w,
                                                  loss_type=loss_type)[0], logp)
    acc = logp.clone().requires_grad_(True)
    norm = dict(num_tokens=mask.sum(), num_seqs=6, max_len=12)
    for sl in (slice(0, 1), slice(1, 4), slice(4, 6)):
        part, _ = grpo.policy_loss(acc[sl], old[sl], adv[sl], mask[sl], clip_low=0.2, clip_high=0.28, loss_agg=mode, is_weights=w[sl],
                                   loss_type=loss_type, **norm)
        part.backward()
    torch.testing.assert_close(acc.grad, full, rtol=1e-5, atol=1e-7)


def test_unknown_loss_type_is_refused():
    logp, old, adv, mask = random_batch()
    with pytest.raises(ValueError, match="loss_type"):
        grpo.policy_loss(logp, old, adv, mask, loss_type="grpo")


# ---------------------------------------------------------------------------------------------- rollout correction
def paper_rollout_weights(old, rollout, mask, mode, low, cap):
    """The four rules with python floats: r_t = exp(old - rollout), rho_b = exp(mean over valid t of log r_t)."""
    B, T = old.shape
    weights = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        idx = [t for t in range(T) if mask[b, t]]
        rho = math.exp(sum(float(old[b, t] - rollout[b, t]) for t in idx) / max(len(idx), 1))
        for t in idx:
            r = rho if mode.startswith("sequence") else math.exp(float(old[b, t] - rollout[b, t]))
            if mode.endswith("truncate"):
                weights[b, t] = min(max(r, low), cap)
            else:
                weights[b, t] = r if low <= r <= cap else 0.0
    return weights


def trl_vllm_is_ratio(old_per_token_logps, sampling_per_token_logps, mask, mode, clip_min, clip_max):
    """trl/trainer/grpo_trainer.py _generate_and_score_completions, vllm_importance_sampling_correction
    (TRL, Jul 2026). Its sequence_* modes use the PRODUCT of token ratios (returned [B, 1])."""
    per_token_logps_diff = (old_per_token_logps - sampling_per_token_logps) * mask
    if mode in ["sequence_mask", "sequence_truncate"]:
        logps_diff = per_token_logps_diff.sum(dim=-1, keepdim=True)
    else:
        logps_diff = per_token_logps_diff
    ratio = torch.exp(logps_diff)
    if mode in ["sequence_truncate", "token_truncate"]:
        return torch.clamp(ratio, min=clip_min, max=clip_max)
    invalid = (ratio < clip_min) | (ratio > clip_max)
    return ratio.masked_fill(invalid, value=0.0)


def openrlhf_is(old_log_probs, rollout_log_probs, action_mask, correction_type, low, high):
    """openrlhf/models/loss.py PolicyLoss.forward, vllm_is_correction_type (OpenRLHF, Aug 2026): icepop and
    seq-mask-tis (mask on the geometric mean, weight the token ratio)."""
    rollout_log_ratio = old_log_probs - rollout_log_probs
    vllm_is = torch.exp(rollout_log_ratio)
    if correction_type == "icepop":
        return vllm_is * ((vllm_is >= low) & (vllm_is <= high))
    seq_log_ratio = (rollout_log_ratio * action_mask).sum(-1) / action_mask.sum(-1)
    seq_is = torch.exp(seq_log_ratio)
    return ((seq_is >= low) & (seq_is <= high)).unsqueeze(-1) * vllm_is


def verl_rs_seq_mean_k1_keep(log_ratio, response_mask, lower, upper):
    """verl/trainer/ppo/rollout_corr_helper.py compute_rollout_rejection_mask, option seq_mean_k1 with threshold
    "lower_upper" (verl, Jan 2026). Note its statistic is mean(-log r) = log(1 / rho): bounds on 1 / rho."""
    token_k1 = -torch.clamp(log_ratio, min=-20.0, max=20.0)
    seq_stat = (token_k1 * response_mask).sum(-1) / response_mask.sum(-1)
    return (seq_stat >= math.log(lower)) & (seq_stat <= math.log(upper))


def mismatch_batch(kind, seed=51, scale=0.6):
    """old = trainer log-probs, rollout = vLLM's: token log-ratios of about +-scale, many outside [0.5, 2]."""
    logp, _, _, mask = edge_batch(kind, seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    rollout = logp + scale * torch.randn(logp.shape, generator=g) + 0.2 * torch.randn(logp.shape[0], 1, generator=g)
    if kind == "poisoned":
        rollout[~mask] = float("inf")
    return logp, rollout, mask


@pytest.mark.parametrize("kind", EDGE_KINDS)
@pytest.mark.parametrize("mode", grpo.ROLLOUT_CORRECTION_MODES)
@pytest.mark.parametrize("low,cap", [(0.0, 2.0), (0.5, 2.0), (0.8, 1.1)])
def test_rollout_correction_modes_match_the_rules(kind, mode, low, cap):
    old, rollout, mask = mismatch_batch(kind, scale=3.0 if kind == "far" else 0.6)
    w, stats = grpo.rollout_correction(old, rollout, mask, cap=cap, mode=mode, low=low)
    clean_old, clean_rollout = torch.where(mask, old, 0.0), torch.where(mask, rollout, 0.0)
    expected = paper_rollout_weights(clean_old, clean_rollout, mask, mode, low, cap)
    assert not w.requires_grad and torch.isfinite(w).all() and torch.all(w[~mask] == 0)
    torch.testing.assert_close(w.double(), expected, rtol=1e-5, atol=1e-7)
    if mode.endswith("mask"):  # what was masked is what left the band
        outside = (expected == 0) & mask
        assert stats["out_token_frac"] == pytest.approx(outside.sum().item() / max(mask.sum().item(), 1))
    if kind == "one_token":    # one token: the sequence's ratio is the token's
        token_mode = mode.replace("sequence", "token")
        assert torch.allclose(w, grpo.rollout_correction(old, rollout, mask, cap=cap, mode=token_mode, low=low)[0])


@pytest.mark.parametrize("kind", ["plain", "far", "one_token", "poisoned"])
def test_rollout_correction_matches_trl_and_openrlhf(kind):
    old, rollout, mask = mismatch_batch(kind, scale=3.0 if kind == "far" else 0.6)
    clean_old, clean_rollout, m = torch.where(mask, old, 0.0), torch.where(mask, rollout, 0.0), mask.float()
    for mode in ("token_truncate", "token_mask"):
        ours, _ = grpo.rollout_correction(old, rollout, mask, cap=2.0, mode=mode, low=0.5)
        trl = trl_vllm_is_ratio(clean_old, clean_rollout, m, mode, 0.5, 2.0) * m
        torch.testing.assert_close(ours, trl, rtol=1e-6, atol=1e-7)
    if kind == "one_token":  # one token: TRL's product ratio is the geometric mean, so its sequence modes agree
        for mode in ("sequence_truncate", "sequence_mask"):
            ours, _ = grpo.rollout_correction(old, rollout, mask, cap=2.0, mode=mode, low=0.5)
            trl = trl_vllm_is_ratio(clean_old, clean_rollout, m, mode, 0.5, 2.0) * m
            torch.testing.assert_close(ours, trl, rtol=1e-6, atol=1e-7)
    icepop, _ = grpo.rollout_correction(old, rollout, mask, cap=5.0, mode="token_mask", low=0.5)
    torch.testing.assert_close(icepop, openrlhf_is(clean_old, clean_rollout, m, "icepop", 0.5, 5.0) * m)
    # sequence_mask keeps exactly the sequences OpenRLHF's seq-mask-tis and verl's seq_mean_k1 keep
    ours, _ = grpo.rollout_correction(old, rollout, mask, cap=1.5, mode="sequence_mask", low=0.7)
    kept = (ours > 0).any(dim=-1)
    has = mask.any(dim=-1)
    assert torch.equal(kept[has], (openrlhf_is(clean_old, clean_rollout, m, "seq", 0.7, 1.5) > 0).any(-1)[has])
    assert torch.equal(kept[has], verl_rs_seq_mean_k1_keep(clean_old - clean_rollout, m, 1 / 1.5, 1 / 0.7)[has])
    if kind in ("plain", "poisoned"):
        assert 0 < kept[has].sum() < has.sum(), "the band must keep some sequences and drop others"


def test_rollout_correction_metrics_match_loops():
    old, rollout, mask = mismatch_batch("row_masked", scale=0.8)
    _, stats = grpo.rollout_correction(old, rollout, mask, cap=1.5, mode="sequence_mask", low=0.7)
    tokens = [(b, t) for b in range(mask.shape[0]) for t in range(mask.shape[1]) if mask[b, t]]
    log_r = [float(old[b, t] - rollout[b, t]) for b, t in tokens]
    r = [math.exp(x) for x in log_r]
    assert stats["kl_k1"] == pytest.approx(sum(-x for x in log_r) / len(log_r), rel=1e-5)           # E_vllm[log vllm/old]
    assert stats["kl_k3"] == pytest.approx(sum(math.exp(x) - 1 - x for x in log_r) / len(log_r), rel=1e-5)
    assert stats["ratio_min"] == pytest.approx(min(r), rel=1e-6) and stats["ratio_max"] == pytest.approx(max(r), rel=1e-6)
    assert stats["ratio_mean"] == pytest.approx(sum(r) / len(r), rel=1e-5)
    rows = [b for b in range(mask.shape[0]) if mask[b].any()]
    rho = {b: math.exp(sum(float(old[b, t] - rollout[b, t]) for t in range(mask.shape[1]) if mask[b, t])
                       / int(mask[b].sum())) for b in rows}
    assert stats["seq_ratio_min"] == pytest.approx(min(rho.values()), rel=1e-5)
    assert stats["seq_ratio_max"] == pytest.approx(max(rho.values()), rel=1e-5)
    out = [b for b in rows if not 0.7 <= rho[b] <= 1.5]
    assert 0 < len(out) < len(rows)
    assert stats["out_seq_frac"] == pytest.approx(len(out) / len(rows))
    assert stats["out_token_frac"] == pytest.approx(sum(int(mask[b].sum()) for b in out) / len(tokens))
    # token mode: a sequence counts as touched when any of its tokens left the band (verl's seq_masked_fraction)
    _, token_stats = grpo.rollout_correction(old, rollout, mask, cap=1.5, mode="token_mask", low=0.7)
    touched = [b for b in rows if any(not 0.7 <= math.exp(float(old[b, t] - rollout[b, t])) <= 1.5
                                      for t in range(mask.shape[1]) if mask[b, t])]
    assert token_stats["out_seq_frac"] == pytest.approx(len(touched) / len(rows))


def test_rollout_correction_all_masked_and_identical_inputs():
    old, rollout, mask = mismatch_batch("all_masked")
    for mode in grpo.ROLLOUT_CORRECTION_MODES:
        w, stats = grpo.rollout_correction(old, rollout, mask, cap=2.0, mode=mode, low=0.5)
        assert torch.all(w == 0) and all(math.isfinite(v) for v in stats.values())
        assert stats["out_token_frac"] == stats["out_seq_frac"] == 0.0 and stats["ratio_min"] == 1.0
        w, stats = grpo.rollout_correction(rollout, rollout, ~mask, cap=2.0, mode=mode, low=0.5)  # same distributions: weight 1
        assert torch.all(w == 1) and stats["kl_k1"] == 0 and stats["kl_k3"] == 0 and stats["out_seq_frac"] == 0
    with pytest.raises(ValueError, match="mode"):
        grpo.rollout_correction(old, rollout, mask, mode="geometric")


# ---------------------------------------------------------------------------------------------- high-entropy tokens
def trl_high_entropy_mask(entropies, mask, threshold):
    """trl/trainer/grpo_trainer.py GRPOTrainer.get_high_entropy_mask (TRL, Jul 2026), one process (the gather
    over ranks is the identity). threshold = 1 - top_entropy_quantile."""
    local = entropies[mask.bool()].float()
    if local.numel() == 0:
        return torch.zeros_like(entropies, dtype=torch.bool)
    entropy_threshold = torch.quantile(local, threshold)
    masked_entropies = entropies * mask.float()
    entropy_mask = masked_entropies >= entropy_threshold
    return entropy_mask & mask.bool()


@pytest.mark.parametrize("top_fraction", [0.0, 0.2, 0.5, 0.8, 1.0])
@pytest.mark.parametrize("kind", ["plain", "ties", "one_token", "all_masked", "poisoned"])
def test_high_entropy_mask_matches_trl(top_fraction, kind):
    g = torch.Generator().manual_seed(61)
    _, _, _, mask = edge_batch("plain" if kind in ("ties", "poisoned") else kind, seed=62)
    entropy = torch.rand(mask.shape, generator=g) * 5
    if kind == "ties":
        entropy = torch.randint(0, 3, mask.shape, generator=g).float()   # three values: many ties at the threshold
    clean = entropy.clone()
    if kind == "poisoned":
        entropy[~mask] = float("nan")
    got = grpo.high_entropy_mask(entropy, mask, top_fraction)
    assert got.dtype == torch.bool and not got[~mask].any()
    assert torch.equal(got, trl_high_entropy_mask(clean, mask, 1 - top_fraction))
    n = int(mask.sum())
    if top_fraction == 1.0:
        assert torch.equal(got, mask)
    elif kind == "plain" and n:  # distinct values: ceil-ish of the fraction is kept
        assert abs(int(got.sum()) - top_fraction * n) <= 1.0 + 1e-9


def test_high_entropy_mask_threshold_from_a_pool_is_micro_batch_independent():
    g = torch.Generator().manual_seed(63)
    _, _, _, mask = random_batch(B=6, T=9, seed=64)
    entropy = torch.rand(mask.shape, generator=g)
    full = grpo.high_entropy_mask(entropy, mask, 0.2)
    pool = entropy[mask]                                    # the whole batch's valid entropies (all ranks in the loop)
    parts = [grpo.high_entropy_mask(entropy[sl], mask[sl], 0.2, pool=pool) for sl in (slice(0, 2), slice(2, 6))]
    assert torch.equal(torch.cat(parts), full)
    local = grpo.high_entropy_mask(entropy[:2], mask[:2], 0.2)
    assert not torch.equal(local, full[:2]), "a micro-batch's own quantile differs: hence the pool"
    with pytest.raises(ValueError):
        grpo.high_entropy_mask(entropy, mask, 1.5)


def test_high_entropy_mask_as_is_weights_keeps_the_normalisers():
    """The loop multiplies the mask into policy_loss's is_weights: dropped tokens contribute 0 but still count in
    token-mean's denominator (TRL: per_token_loss * entropy_mask, normalised by the completion mask)."""
    logp, old, adv, mask = random_batch(seed=65)
    entropy = torch.rand(mask.shape, generator=torch.Generator().manual_seed(66))
    keep = grpo.high_entropy_mask(entropy, mask, 0.2)
    loss, _ = grpo.policy_loss(logp, old, adv, mask, is_weights=keep.float())
    ratio = torch.exp(logp - old)
    per_token = torch.maximum(-adv[:, None] * ratio, -adv[:, None] * ratio.clamp(0.8, 1.2))
    expected = (per_token * keep).sum() / mask.sum()
    torch.testing.assert_close(loss, expected)


# ---------------------------------------------------------------------------------------------- issue 35
def verl_geometric_is(log_ratio, response_mask):
    """verl/trainer/ppo/rollout_corr_helper.py compute_rollout_rejection_mask, rollout_rs="geometric" (verl,
    2026): the sequence's IS weight exp(clamp(masked_mean(log r), -20, 20)), the mean of UNCLAMPED log-ratios."""
    log_ratio_mean = (log_ratio * response_mask).sum(-1, keepdim=True) / response_mask.sum(-1, keepdim=True)
    return torch.exp(torch.clamp(log_ratio_mean, min=-20.0, max=20.0)).expand_as(log_ratio)


def test_sequence_modes_clamp_the_mean_log_ratio_as_verl():
    """The issue's example: one token past +20 must not change the sequence ratio. old [0, 0], rollout [-24, 23]:
    log r = [24, -23], mean 0.5, rho = e^0.5 = 1.65, inside [0.5, 2]: kept, weight e^0.5 (not masked, not 0.5)."""
    old, rollout, mask = torch.zeros(1, 2), torch.tensor([[-24.0, 23.0]]), torch.ones(1, 2)
    for mode in ("sequence_mask", "sequence_truncate"):
        w, stats = grpo.rollout_correction(old, rollout, mask, cap=2.0, mode=mode, low=0.5)
        torch.testing.assert_close(w, torch.full((1, 2), math.exp(0.5)))
        assert stats["out_seq_frac"] == 0 and stats["seq_ratio_max"] == pytest.approx(math.exp(0.5))
    for kind in ("plain", "far", "poisoned"):
        logp, roll, m = mismatch_batch(kind, scale=30.0 if kind == "far" else 0.6)   # far: many tokens past +-20
        clean = torch.where(m, logp - roll, 0.0)
        has = m.any(-1)
        verl = verl_geometric_is(clean, m.float())
        ours, _ = grpo.rollout_correction(logp, roll, m, cap=1e30, mode="sequence_truncate", low=0.0)
        torch.testing.assert_close(ours[has] * m[has], verl[has] * m[has], rtol=1e-5, atol=0)


def verl_vanilla_loss(old_log_prob, log_prob, advantages, response_mask, cliprange_low, cliprange_high,
                      clip_ratio_c):
    """verl/trainer/ppo/core_algos.py compute_policy_loss_vanilla (verl 0.7), dual-clip PPO, token-mean."""
    negative_approx_kl = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(negative_approx_kl)
    pg_losses1 = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, 1 - cliprange_low, 1 + cliprange_high)
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_losses3 = -advantages * clip_ratio_c
    clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
    pg_losses = torch.where(advantages < 0, clip_pg_losses2, clip_pg_losses1)
    return verl_masked_sum(pg_losses, response_mask) / response_mask.sum()


@pytest.mark.parametrize("kind", ["plain", "far", "one_token", "poisoned"])
def test_dual_clip_matches_verl(kind):
    """--clip_ratio_c: values and gradients equal verl's dual-clip PPO (c = 3, its default), off-policy ratios far
    from 1 so that the dual bound binds; c = 0 is the plain clipped loss."""
    logp, old, adv, mask = edge_batch(kind, seed=31)
    old = torch.where(mask, old - 1.5 * torch.rand(old.shape, generator=torch.Generator().manual_seed(3)), old)
    clean_old = torch.where(mask, old, 0.0)
    a = torch.where(mask, adv.unsqueeze(-1).expand_as(logp) if adv.dim() == 1 else adv, 0.0)
    ours = grads_of(lambda x: grpo.policy_loss(x, old, adv, mask, clip_low=0.2, clip_high=0.28, loss_agg="token-mean", clip_ratio_c=3.0)[0],
                    logp)
    verl = grads_of(lambda x: verl_vanilla_loss(clean_old, torch.where(mask, x, 0.0), a, mask.float(), 0.2, 0.28, 3.0),
                    logp)
    for mine, theirs in zip(ours, verl):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-7)
    if kind == "plain":
        plain = grpo.policy_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.28, loss_agg="token-mean")[0]
        assert not torch.allclose(ours[0], plain), "the dual bound must bind in this batch"
    for bad in (dict(clip_ratio_c=1.0), dict(clip_ratio_c=3.0, loss_type="gspo")):
        with pytest.raises(ValueError, match="dual clipping"):
            grpo.policy_loss(logp, old, adv, mask, **bad)
