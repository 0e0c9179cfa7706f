"""train.py's policy update as it was before issue 22 (commit f9b5297), copied verbatim but for its imports and
the frozen grpo functions it calls: with every new flag off, today's step must equal this one bit for bit
(tests/test_train.py::test_with_every_new_flag_off_the_step_is_bit_identical_to_before)."""
import math
import os
import random

import torch

import grpo
import logprobs
from batching import collate, pad_rows, same_count_micro_batches
from distributed import all_reduce
from data import Sample
from test_grpo import frozen_policy_loss, frozen_rollout_correction


def frozen_update_policy(policy, reference, optimizer, samples, advantages, scored, trained, args, step, device, autocast,
                  pad_id):
    """Step 4: one optimizer step on the batch (or ppo_epochs x mini_batches steps: off-policy experiments).

    The loss of a mini-batch (grpo.py) is  policy_loss + kl_coef * KL(pi || pi_ref) - entropy_coef * H,  each
    term aggregated with --loss_agg and NORMALISED OVER EVERY SCORED RESPONSE of the mini-batch on all ranks,
    forwarded or not (verl and TRL normalise over every response token of the batch). So micro-batch losses sum
    to the mini-batch loss, the per-token weight does not depend on how many groups were all-equal, and
    --skip_equal_groups saves compute only: its gradient equals the one with the flag off when KL and entropy
    are off (tests/test_train.py).

    Off-policy: pi_old (the trainer's log-probs under the weights that sampled the batch) and the truncated-IS
    weights min(pi_old / pi_vllm, tis_cap) come from one no-grad pass before any update; the PPO ratio
    pi_theta / pi_old then does the rest (grpo.rollout_correction). On-policy pi_old = pi_theta.detach().

    Returns sums for step_metrics: loss / pg_loss summed over updates (`updates` of them), kl / entropy /
    clip / approx_kl_old summed over trained tokens (`tokens`), alignment over trained sequences (once per
    batch), grad_norm of the last update (before clipping), skipped (a non-finite update was not applied)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    lengths = [len(s.prompt_ids) + len(s.response_ids) for s in samples]
    on_policy = args.ppo_epochs == 1 and args.mini_batches == 1
    cap = args.tis_cap if args.tis_cap > 0 else 1.0
    trained_set = set(trained)
    dummy = Sample([pad_id, pad_id], [pad_id], [0.0], "stop", "")  # zero-weight pass when a rank ran out (FSDP)
    out = dict(loss=0.0, pg_loss=0.0, updates=0, kl=0.0, entropy=0.0, clip=0.0, kl_old=0.0, tokens=0,
               align_sum=0.0, align_max=1.0, max_abs_diff=0.0, aligned=0, grad_norm=0.0, skipped=False)

    def record_alignment(mismatch, count):
        out["align_sum"] += mismatch["align_mean"] * count
        out["aligned"] += count
        out["align_max"] = max(out["align_max"], mismatch["align_max"])
        out["max_abs_diff"] = max(out["max_abs_diff"], mismatch["max_abs_diff"])

    # pi_old and the IS weights, once per batch before any update (off-policy only)
    old_logp, is_weights = {}, {}
    if not on_policy:
        with torch.no_grad():
            for mb in same_count_micro_batches(trained, lengths, args.micro_batch_tokens):
                ids, attention, mask, rollout_logp = collate([dummy] if mb is None else [samples[i] for i in mb],
                                                             pad_id, device)
                with autocast:
                    logp = logprobs.token_logprobs(policy, ids, attention, args.temperature, args.logprob_chunk,
                                               score_mask=mask)
                weights, mismatch = frozen_rollout_correction(logp, rollout_logp, mask, cap=cap)
                for row, i in enumerate(mb or []):
                    old_logp[i], is_weights[i] = logp[row, :lengths[i] - 1], weights[row, :lengths[i] - 1]
                if mb:
                    record_alignment(mismatch, len(mb))

    shuffler = random.Random(args.data_seed + step)
    for _ in range(args.ppo_epochs):
        order = list(scored)
        if not on_policy:
            shuffler.shuffle(order)
        size = max(1, math.ceil(len(order) / args.mini_batches))
        for mini in [order[k * size:(k + 1) * size] for k in range(args.mini_batches)]:
            # normalisers: every scored response of this mini-batch, on every rank, trained or not
            num_tokens, num_seqs = all_reduce([sum(len(samples[i].response_ids) for i in mini), len(mini)])
            norm = dict(num_tokens=num_tokens, num_seqs=num_seqs, max_len=args.max_response_len)
            update_loss = 0.0
            for mb in same_count_micro_batches([i for i in mini if i in trained_set], lengths, args.micro_batch_tokens):
                ids, attention, mask, rollout_logp = collate([dummy] if mb is None else [samples[i] for i in mb],
                                                             pad_id, device)
                if mb is None:
                    mask.zero_()  # all positions still go through the head: every parameter gets its (zero) gradient
                with autocast:
                    logp, entropy = logprobs.token_logprobs(policy, ids, attention, args.temperature, args.logprob_chunk,
                                                        with_entropy=True, score_mask=mask if mb else None,
                                                        entropy_grad=args.entropy_coef > 0)
                if on_policy:
                    old = logp.detach()  # ratio exactly 1: the gradient is the plain policy gradient
                    weights, mismatch = frozen_rollout_correction(old, rollout_logp, mask, cap=cap)
                    if mb:
                        record_alignment(mismatch, len(mb))
                else:
                    old = pad_rows([old_logp[i] for i in mb], logp.shape[1]) if mb else logp.detach()
                    weights = pad_rows([is_weights[i] for i in mb], logp.shape[1]) if mb else torch.ones_like(logp)
                adv = advantages[mb].to(device) if mb else torch.zeros(1, device=device)
                loss, stats = frozen_policy_loss(logp, old, adv, mask, args.clip_low, args.clip_high, args.loss_agg,
                                               is_weights=weights if args.tis_cap > 0 else None, **norm)
                pg_loss = loss.detach()
                kl_tok = torch.zeros_like(logp)
                if reference is not None:
                    with torch.no_grad(), autocast:
                        ref_logp = logprobs.token_logprobs(reference, ids, attention, args.temperature,
                                                       args.logprob_chunk, score_mask=mask if mb else None)
                    if hasattr(reference, "reshard"):  # FSDP2: do not keep its gathered embeddings/head around
                        reference.reshard()
                    kl_tok = grpo.kl_penalty(logp, ref_logp, args.kl_estimator)
                    loss = loss + args.kl_coef * grpo.aggregate(kl_tok, mask, args.loss_agg, **norm)
                if args.entropy_coef:
                    loss = loss - args.entropy_coef * grpo.aggregate(entropy, mask, args.loss_agg, **norm)
                # FSDP averages gradients over ranks; the loss is already normalised globally, so undo the mean
                (loss * world if world > 1 else loss).backward()
                if mb is None:
                    continue
                m, n_tok = mask.bool(), int(mask.sum())
                update_loss += loss.item()
                out["pg_loss"] += pg_loss.item()
                out["kl"] += kl_tok.detach()[m].sum().item()
                out["entropy"] += entropy.detach()[m].sum().item()
                out["clip"] += stats["clip_frac"] * n_tok
                out["kl_old"] += stats["approx_kl_old"] * n_tok
                out["tokens"] += n_tok
            for p in policy.parameters():  # nothing trained anywhere: the gradient is 0, as with the flag off
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
            grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), args.grad_clip)
            out["grad_norm"] = (grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm).item()
            out["loss"] += update_loss
            out["updates"] += 1
            finite = all_reduce([float(math.isfinite(out["grad_norm"]) and math.isfinite(update_loss))], "min")[0]
            if finite == 1.0:  # every rank decides the same
                optimizer.step()
            else:  # never let a NaN/inf reach the weights (or, through the sync, vLLM)
                print(f"train.py: WARNING: step {step}: non-finite loss {update_loss} or grad norm "
                      f"{out['grad_norm']}; update skipped")
                out["skipped"] = True
            optimizer.zero_grad(set_to_none=True)  # free the gradients: they must not sit in memory through generation
    return out
