"""The GRPO algorithm as pure tensor functions: no I/O, no model loading, no global state.

Read it to learn the method, fork it to try a new one: each function states its equation, source and shapes.

    B  number of sequences (responses) in a batch,  G  group size (responses per prompt),
    T  response length in tokens (padded),           V  vocabulary size,
    logp[b, t]      log pi_theta(y_t | x, y_<t)      under the policy being trained,
    old_logp[b, t]  the same under the policy that sampled the batch (pi_old),
    ref_logp[b, t]  the same under the frozen reference model (for the KL penalty),
    mask[b, t]      1 for real response tokens, 0 for padding (and for prompt tokens).

Loss normalisation is the part most RL trainers get subtly wrong. Every aggregation here takes its normaliser
as an argument (`num_tokens`, `num_seqs`, `max_len`); pass the values of the WHOLE batch when you split it
into micro-batches and simply sum the micro-batch losses: the gradient then equals the full-batch gradient
exactly (tests/test_grpo.py proves it for every mode).
"""
import torch

LOSS_AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")
KL_ESTIMATORS = ("k1", "k2", "k3")
LOG_RATIO_CLAMP = 20.0  # exp(20) ~ 5e8: big enough to never bind in a healthy run, small enough to never overflow
GSPO_LOG_RATIO_MAX = 10.0  # verl's clamp of GSPO's log sequence ratio (compute_policy_loss_gspo)
LOSS_TYPES = ("ppo", "gspo", "cispo")
ROLLOUT_CORRECTION_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


# ----------------------------------------------------------------------------------------------------------
# Advantages
# ----------------------------------------------------------------------------------------------------------
def informative_groups(rewards, group_size):
    """The equal-group rule, written once: a group whose rewards are all equal (std 0) carries no learning signal
    (its advantages are 0). DAPO's dynamic sampling keeps the others (Yu et al. 2025: 0 < |{o_i correct}| < G); the
    trainer skips their forward/backward (train.select_samples). Tested as max > min: exact, where a float std of
    seven 0.1s is 8e-9, not 0; for rewards other than 0/1 "all equal" is not a mean of 0 or 1.

    rewards: [B] float, B // group_size consecutive groups. Returns bool [B // group_size]. NaN counts as equal.
    """
    if rewards.dim() != 1 or rewards.numel() % group_size != 0:
        raise ValueError(f"rewards must be 1-D with a length divisible by group_size={group_size}, "
                         f"got shape {tuple(rewards.shape)}")
    grouped = rewards.float().view(-1, group_size)
    return grouped.max(dim=1).values > grouped.min(dim=1).values


def group_advantages(rewards, group_size, norm_std=True, eps=1e-6):
    """Group-relative advantages (DeepSeekMath, Shao et al. 2024, eq. for outcome supervision):

        A_i = (r_i - mean(r_group)) / (std(r_group) + eps)      norm_std=True  (GRPO; std unbiased, as verl/TRL)
        A_i =  r_i - mean(r_group)                              norm_std=False (Dr. GRPO, Liu et al. 2025)

    rewards: [B] float, laid out as B // group_size consecutive groups of samples of the same prompt.
    Returns [B] float. A group whose rewards are all equal gets exactly 0 (it carries no learning signal).
    The same advantage is then broadcast to every token of the response (outcome reward).
    """
    informative = informative_groups(rewards, group_size).unsqueeze(-1)
    grouped = rewards.float().view(-1, group_size)
    centered = grouped - grouped.mean(dim=1, keepdim=True)
    if norm_std and group_size > 1:
        centered = centered / (grouped.std(dim=1, keepdim=True, unbiased=True) + eps)
    return torch.where(informative, centered, torch.zeros_like(centered)).view(-1)


def overlong_penalty(response_lengths, max_response_len, buffer_len, penalty_factor=1.0):
    """DAPO's soft overlong punishment (Yu et al. 2025, eq. 13), added to the correctness reward. With
    L = |y|, L_max = max_response_len, L_cache = buffer_len:

        R_length(y) = 0                                   L <= L_max - L_cache
                    = ((L_max - L_cache) - L) / L_cache    L_max - L_cache < L <= L_max    (linear: 0 -> -1)
                    = -1                                  L > L_max
        times penalty_factor.

    0 at exactly L_max - L_cache, -1 at exactly L_max (as the paper and TRL); clamped at -factor beyond L_max.
    buffer_len = 0 is a step. L counts generated tokens, EOS included (docs/training-loop.md compares peers).

    response_lengths: [B] int or float. Returns [B] float32, in [-penalty_factor, 0].
    """
    if not 0 <= buffer_len <= max_response_len:
        raise ValueError(f"overlong buffer_len={buffer_len} must be in [0, max_response_len={max_response_len}]")
    excess = response_lengths.float() - (max_response_len - buffer_len)        # > 0 inside the buffer
    if buffer_len == 0:
        return torch.where(excess > 0, -penalty_factor, 0.0).float()
    return (-excess / buffer_len).clamp(-1.0, 0.0) * penalty_factor


# ----------------------------------------------------------------------------------------------------------
# Aggregation: per-token values -> one scalar
# ----------------------------------------------------------------------------------------------------------
def aggregate(values, mask, mode="token-mean", *, num_tokens=None, num_seqs=None, max_len=None):
    """Reduce per-token values [B, T] to a scalar, counting only tokens where mask is 1.

    token-mean               sum_{b,t} m*v / N_tokens                  (DAPO, Yu et al. 2025; verl default)
                             every token weighs the same, so long responses are not under-weighted.
    seq-mean-token-mean      (1/N_seqs) sum_b [ sum_t m*v / sum_t m ]  (original GRPO, Shao et al. 2024)
                             every sequence weighs the same; has a length bias (Dr. GRPO, sec. 3.1).
    seq-mean-token-sum-norm  sum_{b,t} m*v / (N_seqs * L_max)          (Dr. GRPO, Liu et al. 2025)
                             a constant normaliser: no length bias. L_max should be the generation limit.

    Normalisers default to this batch's own (num_tokens = mask.sum(), num_seqs = B, max_len = T); pass the full
    batch's (and a fixed max_len) and micro-batch losses SUM to the full-batch loss. Masked positions are zeroed
    with `where`, so NaN/inf there never reaches the result or its gradient. Returns a 0-d tensor.
    """
    mask = mask.bool()
    values = torch.where(mask, values, torch.zeros_like(values))
    if mode == "token-mean":
        denom = mask.sum() if num_tokens is None else num_tokens
        return values.sum() / max(float(denom), 1.0)
    if mode == "seq-mean-token-mean":
        per_seq = values.sum(dim=-1) / mask.sum(dim=-1).clamp(min=1)
        denom = values.shape[0] if num_seqs is None else num_seqs
        return per_seq.sum() / max(float(denom), 1.0)
    if mode == "seq-mean-token-sum-norm":
        n_seqs = values.shape[0] if num_seqs is None else num_seqs
        length = values.shape[-1] if max_len is None else max_len
        return values.sum() / max(float(n_seqs * length), 1.0)
    raise ValueError(f"unknown loss_agg mode {mode!r}; choose one of {LOSS_AGG_MODES}")


# ----------------------------------------------------------------------------------------------------------
# KL penalty to the reference model
# ----------------------------------------------------------------------------------------------------------
def kl_penalty(logp, ref_logp, estimator="k3"):
    """Per-token estimators of KL(pi_theta || pi_ref) from samples of pi_theta (Schulman 2020,
    "Approximating KL Divergence", http://joschu.net/blog/kl-approx.html). With log r = ref_logp - logp:

        k1 = -log r = logp - ref_logp            value: unbiased for KL(pi || ref), high variance, can be < 0
        k2 = (log r)^2 / 2                       value: biased, low variance
        k3 = (r - 1) - log r                     value: unbiased for KL(pi || ref), low variance, >= 0
                                                 (GRPO's choice, DeepSeekMath eq. 4; verl "low_var_kl")

    "Unbiased" describes the VALUE (a metric). Used as a LOSS, what matters is the expected gradient, taken as
    here through logp only, on samples y ~ pi_theta (on-policy):
        grad k1:  E[grad log pi(y)] = 0                          no regularisation at all, only noise
        grad k2:  E[log(pi/ref)(y) grad log pi(y)] = grad KL(pi || ref)      the reverse KL's true gradient
        grad k3:  E[(1 - ref/pi)(y) grad log pi(y)] = grad KL(ref || pi)     the FORWARD KL's gradient
    (Tang & Munos 2025; tests/test_grpo.py checks all three by exact expectation.) So k3 as a loss pulls toward
    the reference like forward KL does (mass-covering); k2's gradient is that of the KL it names.

    Inputs [B, T] float; returns [B, T]. As in verl, log r is clamped to [-20, 20] before exp and k3 to
    [-10, 10], so one token with a huge disagreement cannot turn the loss into inf/NaN.
    """
    log_ratio = ref_logp - logp
    if estimator == "k1":
        return -log_ratio
    if estimator == "k2":
        return 0.5 * log_ratio.square()
    if estimator == "k3":
        log_ratio = log_ratio.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
        return (torch.exp(log_ratio) - log_ratio - 1.0).clamp(-10.0, 10.0)
    raise ValueError(f"unknown KL estimator {estimator!r}; choose one of {KL_ESTIMATORS}")


# ----------------------------------------------------------------------------------------------------------
# The clipped policy-gradient loss
# ----------------------------------------------------------------------------------------------------------
def policy_loss(logp, old_logp, advantages, mask, *, clip_low=0.2, clip_high=0.2, loss_agg="token-mean",
                num_tokens=None, num_seqs=None, max_len=None, is_weights=None, loss_type="ppo", clip_ratio_c=0.0):
    """The policy-gradient loss, per token, then aggregate(L, mask, loss_agg). With r_t = exp(logp_t - old_logp_t):

    ppo    PPO's clipped surrogate (Schulman et al. 2017, eq. 7) as used by GRPO, with DAPO's decoupled clip range
           ("clip-higher", Yu et al. 2025, eq. 10):
               L_t = -min( r_t * A,  clip(r_t, 1 - clip_low, 1 + clip_high) * A )
           clip_ratio_c > 1 adds dual clipping (Ye et al. 2020, sec. 4.2; verl's clip_ratio_c=3): for A < 0 the
           loss is also bounded, so a token whose ratio grew far above 1 off-policy cannot push its loss without
           bound:  L_t = min( L_t, -clip_ratio_c * A )  where A < 0.  0: off.
    gspo   GSPO and its GSPO-token form (Zheng et al. 2025, arXiv 2507.18071; verl compute_policy_loss_gspo): the
           same clipped surrogate on the sequence ratio s_b = exp( mean_t log r_t ) (geometric mean of the token
           ratios), made per token with a stop-gradient so its gradient is the sequence's:
               s_bt = sg[s_b] * pi_theta(y_t) / sg[pi_theta(y_t)]       value s_b,  grad s_b * grad log pi_theta(y_t)
           log s_bt is clamped at 10 as verl does. All tokens of a sequence carry the same value, and the
           gradient equals that of s_b itself under every aggregation (tests/test_grpo.py): the mode only sets
           how sequences weigh (seq-mean-token-mean: the paper's (1/G) sum_b). The paper clips at 3e-4 / 4e-4.
    cispo  CISPO (MiniMax-M1 report 2025, arXiv 2506.13585; verl compute_policy_loss_cispo): the clipped IS weight,
           detached, times the log-probability, so no token loses its gradient:
               L_t = -sg[ clip(r_t, 1 - clip_low, 1 + clip_high) ] * A * logp_t
           (the paper bounds only from above: clip_low >= 1.)
    [* w_t]: is_weights, optional [B, T] detached weights: the sampler/trainer mismatch (rollout_correction),
           times the high-entropy token selection when it is on (high_entropy_mask).

    logp [B, T] (requires grad), old_logp [B, T], advantages [B] or [B, T], mask [B, T]. Strictly on-policy
    (old_logp = logp.detach()) r_t = s_b = 1 and all three give the plain policy gradient -A * grad(logp): the
    loss type, the clip range and dual clipping act only off-policy (several optimizer steps per batch).

    Returns (loss 0-d tensor, stats dict of floats): clip_frac (ppo/gspo: tokens whose gradient the clip removed;
    cispo: tokens whose weight was clipped), approx_kl_old (k3 estimate of KL(pi_old || pi_theta) on the tokens
    sampled from pi_old, as cleanrl / TRL log it), ratio_min, ratio_max (of r_t; gspo: of s_b)."""
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"unknown loss_type {loss_type!r}; choose one of {LOSS_TYPES}")
    if clip_ratio_c and (loss_type != "ppo" or clip_ratio_c <= 1.0):
        raise ValueError(f"clip_ratio_c={clip_ratio_c}: dual clipping is PPO's (loss_type 'ppo') and needs a value > 1")
    mask = mask.bool()
    zero = torch.zeros_like(logp)
    # Sanitise masked positions first: `where` routes no gradient there, so a NaN in padding cannot leak.
    logp = torch.where(mask, logp, zero)
    old_logp = torch.where(mask, old_logp.to(logp.dtype), zero)
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1).expand_as(logp)
    advantages = torch.where(mask, advantages.to(logp.dtype), zero)

    log_ratio = (logp - old_logp).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = torch.exp(log_ratio)
    if loss_type == "gspo":
        seq_log_ratio = (logp - old_logp).sum(dim=-1, keepdim=True) / mask.sum(dim=-1, keepdim=True).clamp(min=1)
        ratio = torch.exp((logp - logp.detach() + seq_log_ratio.detach()).clamp(max=GSPO_LOG_RATIO_MAX))
    if loss_type == "cispo":
        weight = ratio.clamp(1.0 - clip_low, 1.0 + clip_high).detach()
        per_token = -advantages * weight * logp
        clipped_tokens = weight != ratio
    else:
        unclipped = -advantages * ratio
        clipped = -advantages * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
        per_token = torch.maximum(unclipped, clipped)
        clipped_tokens = clipped > unclipped
        if clip_ratio_c:  # dual clip: negative advantages only (verl: torch.where(advantages < 0, min(...), ...))
            bound = -advantages * clip_ratio_c
            dual = (advantages < 0) & (bound < per_token)
            per_token = torch.where(dual, bound, per_token)
            clipped_tokens = clipped_tokens | dual
    if is_weights is not None:
        per_token = per_token * torch.where(mask, is_weights.detach().to(logp.dtype), zero)
    loss = aggregate(per_token, mask, loss_agg, num_tokens=num_tokens, num_seqs=num_seqs, max_len=max_len)

    with torch.no_grad():
        n = mask.sum().clamp(min=1)
        masked_ratio = ratio[mask]
        stats = {
            "clip_frac": (clipped_tokens & mask).sum().item() / n.item(),
            # k3 of KL(pi_old || pi_theta) from samples of pi_old: r = pi_theta / pi_old = exp(log_ratio)
            "approx_kl_old": (((torch.exp(log_ratio) - 1.0 - log_ratio) * mask).sum() / n).item(),
            "ratio_min": masked_ratio.min().item() if masked_ratio.numel() else 1.0,
            "ratio_max": masked_ratio.max().item() if masked_ratio.numel() else 1.0,
        }
    return loss, stats


# ----------------------------------------------------------------------------------------------------------
# Sampler / trainer mismatch
# ----------------------------------------------------------------------------------------------------------
def rollout_correction(old_logp, rollout_logp, mask, *, cap=2.0, mode="token_truncate", low=0.0):
    """Importance weights for the difference between the sampler (vLLM) and the trainer, detached, with
    r_t = pi_old(y_t) / pi_vllm(y_t) = exp(old_logp_t - rollout_logp_t) and rho_b = exp( mean_t log r_t ), the
    sequence's geometric-mean ratio (length-independent, as GSPO's):

        token_truncate      w_t = clip(r_t, low, cap)            TIS (Yao et al. 2025, "Your efficient RL framework
                                                                 secretly brings you off-policy RL training")
        token_mask          w_t = r_t * 1[low <= r_t <= cap]     IcePop (Ling team 2025, Ring-1T; M(k) = k inside
                                                                 [alpha, beta], else 0; they use [0.5, 5])
        sequence_truncate   w_t = clip(rho_b, low, cap)
        sequence_mask       w_t = rho_b * 1[low <= rho_b <= cap]

    The sequence ratio is the geometric mean, not TRL's product of token ratios, which for long responses leaves
    any fixed band almost surely (docs/training-loop.md compares peers). Masked tokens keep their place in the loss
    normalisers (weight 0), so the weight of the others does not depend on how many were masked. Token modes clamp
    each log r_t at 20 before exp; sequence modes clamp the MEAN log-ratio at +-20, so rho_b is exactly
    exp(mean_t log r_t) whenever that mean is in range (old [0, 0], rollout [-24, 23]: rho = e^0.5, not e^-2).

    old_logp is the TRAINER's log-prob under the weights that sampled the batch (pi_old), computed once before any
    update, so w corrects only for the sampler/trainer mismatch; off-policy the change pi_theta / pi_old is the
    PPO ratio's job (policy_loss: "decoupled PPO"). Strictly on-policy logp.detach() is pi_old.

    old_logp, rollout_logp, mask: [B, T]. Returns (weights [B, T] detached, 0 where mask is 0; stats dict of
    floats) with the mismatch diagnostics, over valid tokens / sequences with a token:
      kl_k1, kl_k3        k1 and k3 estimates of KL(pi_vllm || pi_old) (the tokens were sampled by vLLM)
      ratio_min/max/mean  of r_t;  seq_ratio_min/max  of rho_b
      out_token_frac, out_seq_frac   tokens / sequences with a token whose ratio (rho_b for sequence modes)
                          left [low, cap]: masked by the *_mask modes, truncated by the *_truncate ones
      align_mean/max      exp( mean_t |log r_t| ) per sequence: 1 when identical, healthy within [1, 1.05]
                          (the Perplexity study's alignment metric);  max_abs_diff  max_t |log r_t|
    """
    if mode not in ROLLOUT_CORRECTION_MODES:
        raise ValueError(f"unknown rollout correction mode {mode!r}; choose one of {ROLLOUT_CORRECTION_MODES}")
    mask = mask.bool()
    with torch.no_grad():
        zero = torch.zeros_like(mask, dtype=torch.float32)
        diff = torch.where(mask, old_logp.detach().float() - rollout_logp.float(), zero)
        n_tok = mask.sum(dim=-1)
        log_ratio = diff.clamp(max=LOG_RATIO_CLAMP)
        # the sequence's mean of the UNCLAMPED token log-ratios, clamped itself (verl rollout_corr_helper,
        # "geometric": clamp(masked_mean(log r), +-20)): one extreme token must not change rho_b's value
        seq_log_ratio = (diff.sum(dim=-1, keepdim=True) / n_tok.unsqueeze(-1).clamp(min=1)).clamp(
            -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
        ratio = torch.exp(log_ratio)
        banded = torch.exp(seq_log_ratio).expand_as(ratio) if mode.startswith("sequence") else ratio
        outside = ((banded < low) | (banded > cap)) & mask
        if mode.endswith("truncate"):
            weights = banded.clamp(min=low or None, max=cap) * mask
        else:
            weights = torch.where(outside, torch.zeros_like(banded), banded) * mask

        has_tokens = n_tok > 0
        n = max(int(n_tok.sum()), 1)
        align = torch.exp(diff.abs().sum(dim=-1) / n_tok.clamp(min=1))[has_tokens]
        seq_ratio = torch.exp(seq_log_ratio.squeeze(-1))[has_tokens]
        token_ratio = ratio[mask]
        k3 = kl_penalty(-diff, torch.zeros_like(diff), "k3")  # log r = -diff: the k3 of KL(sampler || trainer)
        stats = {
            "align_mean": align.mean().item() if align.numel() else 1.0,
            "align_max": align.max().item() if align.numel() else 1.0,
            "max_abs_diff": diff.abs().max().item() if diff.numel() else 0.0,
            "kl_k3": ((k3 * mask).sum() / mask.sum().clamp(min=1)).item(),
            "kl_k1": (-diff.sum() / n).item(),
            "ratio_min": token_ratio.min().item() if token_ratio.numel() else 1.0,
            "ratio_max": token_ratio.max().item() if token_ratio.numel() else 1.0,
            "ratio_mean": (token_ratio.sum() / n).item(),
            "seq_ratio_min": seq_ratio.min().item() if seq_ratio.numel() else 1.0,
            "seq_ratio_max": seq_ratio.max().item() if seq_ratio.numel() else 1.0,
            "out_token_frac": outside.sum().item() / n,
            "out_seq_frac": outside.any(dim=-1).sum().item() / max(int(has_tokens.sum()), 1),
        }
    return weights, stats


def high_entropy_mask(entropy, mask, top_fraction, pool=None):
    """The "80/20" token selection (Wang et al. 2025, "Beyond the 80/20 rule", arXiv 2506.01939; TRL's
    top_entropy_quantile, GRPOTrainer.get_high_entropy_mask): keep the valid tokens whose entropy is at least
    tau = the (1 - top_fraction) quantile of the valid tokens' entropies (linear interpolation, as
    torch.quantile; ties at tau are kept). top_fraction 1 keeps every valid token, 0 only the highest.
    The quantile is taken over `pool` when given (1-D), else over entropy[mask]: pass the whole batch's valid
    entropies (all ranks) as pool, as the paper's tau is the batch's, and the mask does not depend on how the batch
    is split. Padding is never kept (NaN there is ignored). The loop multiplies policy_loss's is_weights by this
    mask: dropped tokens stay in the normalisers (loss 0), as in the paper's objective and TRL.

    entropy, mask: [B, T]. Returns bool [B, T].
    """
    if not 0.0 <= top_fraction <= 1.0:
        raise ValueError(f"top_fraction={top_fraction} must be in [0, 1]")
    mask = mask.bool()
    values = (entropy[mask] if pool is None else pool.reshape(-1)).detach().float().sort().values
    if values.numel() == 0:
        return torch.zeros_like(mask)
    # torch.quantile(values, q) step by step (same float32 arithmetic), without its 16M-element input limit
    rank = torch.tensor(1.0 - top_fraction, device=values.device) * (values.numel() - 1)
    threshold = torch.lerp(values[rank.long()], values[rank.ceil().long()], rank - rank.long())
    return mask & (torch.where(mask, entropy.detach().float(), threshold) >= threshold)
