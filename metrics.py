"""What a GRPO step logs: the metric definitions of train.py, one JSON object per step (runs.Logger writes it).

Namespaces: reward/, response/ (every sample of the batch); policy/ (the update: per-token means over the trained
samples); rollout/ (sampler/trainer mismatch); data/, time/, perf/, memory/. Sums and maxima are taken over ranks,
so the numbers are the global batch's whatever the number of GPUs.
"""
import os
import time

import torch

from distributed import all_reduce
from code_reward import STAT_KEYS as CODE_STAT_KEYS


def ends_in_loop(token_ids, min_repeats=4, max_period=64, min_span=32):
    """True when the response ends in a block of tokens repeated at least min_repeats times (and spanning at
    least min_span tokens): the self-repetition collapse the Perplexity study shows."""
    n = len(token_ids)
    for period in range(1, max_period + 1):
        span = period * max(min_repeats, -(-min_span // period))
        if span > n:
            break
        tail = token_ids[n - span:]
        if tail == tail[:period] * (span // period):
            return True
    return False


MISMATCH_MEANS = ("align_mean", "out_seq_frac", "kl_k1", "kl_k3", "ratio_mean", "out_token_frac")


def update_totals():
    """The sums train.update_policy accumulates for step_metrics (record_mismatch adds the mismatch ones)."""
    return dict(loss=0.0, pg_loss=0.0, updates=0, kl=0.0, entropy=0.0, clip=0.0, kl_old=0.0, tokens=0, aligned=0,
                mismatch_tokens=0, align_max=1.0, max_abs_diff=0.0, ratio_max=1.0, ratio_min=1.0,
                grad_norm=0.0, skipped=False, **{f"sum_{key}": 0.0 for key in MISMATCH_MEANS})


def record_mismatch(totals, mismatch, mask):
    """Accumulate grpo.rollout_correction's sampler/trainer diagnostics of one micro-batch (mask [B, T])."""
    seqs, tokens = int(mask.any(-1).sum()), int(mask.sum())
    for key in MISMATCH_MEANS:
        weight = seqs if key in ("align_mean", "out_seq_frac") else tokens
        totals[f"sum_{key}"] += mismatch[key] * weight
    totals["aligned"] += seqs
    totals["mismatch_tokens"] += tokens
    for key in ("align_max", "max_abs_diff", "ratio_max"):
        totals[key] = max(totals[key], mismatch[key])
    totals["ratio_min"] = min(totals["ratio_min"], mismatch["ratio_min"])


def step_metrics(step, samples, rewards, correct, grading, *, own, scored, trained, update, skipped_prompts,
                 sampling, times, args, tp):
    """Step 6: the step's numbers, over the whole global batch (sums and maxima over ranks). Namespaces:
    reward/, response/ (all samples); policy/ (kl_ref, entropy, clip_frac, approx_kl_old: per-token means over the
    TRAINED samples, the only ones forwarded; loss, pg_loss: the objective as optimised, mean over the step's
    updates); rollout/ (vLLM vs trainer mismatch of the trained samples, once per batch: alignment, k1/k3 KL,
    the ratio pi_old / pi_vllm, the fraction of tokens / sequences outside [--tis_low, --tis_cap]); data/ (with
    --dynamic_sampling: rounds drawn, groups generated and kept), time/, perf/."""
    G = args.group_size
    resp = [len(samples[i].response_ids) for i in own]
    grouped = rewards.view(-1, G)
    equal = (grouped.max(1).values == grouped.min(1).values).float()
    own_groups = sorted({i // G for i in own})
    s = all_reduce({  # sums over ranks; counts that every rank of a TP group holds are divided by tp
        "responses": len(own), "reward": sum(rewards[i].item() for i in own), "correct": sum(correct[i] for i in own),
        "equal_groups": equal[own_groups].sum().item(), "groups": len(own_groups), "length": sum(resp),
        "truncated": sum(samples[i].finish_reason == "length" for i in own),
        "loops": sum(ends_in_loop(samples[i].response_ids) for i in own), "scored": len(scored),
        "trained": len(trained), "skipped_prompts": len(skipped_prompts) / tp,
        **{key: update[key] for key in ("loss", "pg_loss", "kl", "entropy", "clip", "kl_old", "tokens", "aligned",
                                        "mismatch_tokens")},
        **{key: value for key, value in update.items() if key.startswith("sum_")},
        **{key: grading.get(key, 0) / tp for key in ("timeouts", "invalid_gold") + CODE_STAT_KEYS}})
    peak = all_reduce({"length": max(resp, default=0), "align": update["align_max"], "diff": update["max_abs_diff"],
                       "ratio_max": update["ratio_max"], "ratio_min": -update["ratio_min"],
                       **{f"time/{key}": times[key] for key in ("generate", "score", "update", "sync")}}, "max")
    n, updates, tokens = max(s["responses"], 1), max(update["updates"], 1), max(s["tokens"], 1)
    metrics = {
        "step": step + 1,
        "reward/mean": s["reward"] / n,
        "reward/accuracy": s["correct"] / n,
        "reward/equal_group_frac": s["equal_groups"] / max(s["groups"], 1),
        "reward/grader_timeouts": int(s["timeouts"]),
        "reward/invalid_gold": int(s["invalid_gold"]),
        **{f"reward/{key}": int(s[key]) for key in CODE_STAT_KEYS},
        "response/length_mean": s["length"] / n,
        "response/length_max": int(peak["length"]),
        "response/truncated_frac": s["truncated"] / n,
        "response/repetition_frac": s["loops"] / n,
        "policy/loss": s["loss"] / updates,
        "policy/pg_loss": s["pg_loss"] / updates,
        "policy/kl_ref": s["kl"] / tokens,
        "policy/entropy": s["entropy"] / tokens,
        "policy/clip_frac": s["clip"] / tokens,
        "policy/approx_kl_old": s["kl_old"] / tokens,
        "policy/grad_norm": update["grad_norm"],
        "policy/skipped": int(update["skipped"]),
        "policy/scored_frac": s["scored"] / n,
        "policy/trained_frac": s["trained"] / n,
        "rollout/align_mean": s["sum_align_mean"] / s["aligned"] if s["aligned"] else 1.0,
        "rollout/align_max": peak["align"],
        "rollout/max_abs_logp_diff": peak["diff"],
        "rollout/kl_k1": s["sum_kl_k1"] / max(s["mismatch_tokens"], 1),
        "rollout/kl_k3": s["sum_kl_k3"] / max(s["mismatch_tokens"], 1),
        "rollout/ratio_mean": s["sum_ratio_mean"] / s["mismatch_tokens"] if s["mismatch_tokens"] else 1.0,
        "rollout/ratio_min": -peak["ratio_min"],
        "rollout/ratio_max": peak["ratio_max"],
        "rollout/out_token_frac": s["sum_out_token_frac"] / max(s["mismatch_tokens"], 1),
        "rollout/out_seq_frac": s["sum_out_seq_frac"] / max(s["aligned"], 1),
        "data/skipped_prompts": int(s["skipped_prompts"]),
        **({f"data/{key}": value for key, value in sampling.items()} if args.dynamic_sampling else {}),
        **{key: value for key, value in peak.items() if key.startswith("time/")},
        "time/step": time.perf_counter() - times["start"],
        "perf/generated_tokens_per_s": s["length"] / max(peak["time/generate"], 1e-9),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        metrics["memory/peak_gb"] = all_reduce([torch.cuda.max_memory_allocated() / 2**30], "max")[0]
        torch.cuda.reset_peak_memory_stats()
    return metrics


def progress_line(m, max_steps):
    """One console line per step with the numbers to watch."""
    return (f"step {m['step']}/{max_steps} | reward {m['reward/mean']:.3f} | len {m['response/length_mean']:.0f} "
            f"trunc {m['response/truncated_frac']:.2f} | loss {m['policy/loss']:+.4f} kl {m['policy/kl_ref']:.4f} "
            f"ent {m['policy/entropy']:.3f} grad {m['policy/grad_norm']:.3f} | align {m['rollout/align_mean']:.4f} | "
            f"{m['time/step']:.1f}s (gen {m['time/generate']:.1f}s)")


def reward_totals(grading, args, tp_size, step):
    """--reward's per-component counts of the step (reward.score_components' stats), summed over ranks (the ranks
    of a replica grade the same samples: counted once); None without --reward. Warns about failed calls."""
    if not args.reward_components:
        return None
    keys = [f"reward/{c['name']}/{key}" for c in args.reward_components
            for key in ("sum", "responses", "calls", "errors")]
    totals = all_reduce({key: grading.get(key, 0) / tp_size for key in keys})
    for c in args.reward_components:
        errors, calls = totals[f"reward/{c['name']}/errors"], totals[f"reward/{c['name']}/calls"]
        error = grading.get(f"reward/{c['name']}/error")
        if 0 < errors < calls and error and int(os.environ.get("RANK", "0")) == 0:
            print(f"train.py: WARNING: step {step + 1}: {c['function']} failed on {errors:.0f} of {calls:.0f} "
                  f"responses, scored 0 (reward/{c['name']}/errors), e.g. {error.strip().splitlines()[-1]}")
    return totals
