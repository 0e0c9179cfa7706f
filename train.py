"""Strictly on-policy GRPO for math reasoning, with vLLM colocated on the trainer's GPU.

Read top to bottom, this file is the algorithm (defaults: AceMath-RL stage 1). The loop in main() is:

    for step in range(max_steps):
        problems   = next(batcher)                                     # batch_size prompts      (data.py)
        samples    = engine.generate(prompts, n=group_size)            # vLLM, current weights   (rollout.py)
        rewards    = score_problems(responses, problems)               # 0/1: math or code tests (reward.py),
                                                                       # or --reward's weighted functions
        advantages = group_advantages(rewards, group_size)             # (r - mean) / std        (grpo.py)
        update_policy(...)   # loss = policy_loss(...) + kl_coef * KL(pi || pi_ref): one optimizer step over the
                             # whole batch (micro-batched, normalised over every response token of the batch)
        engine.update_weights(full_weights(policy))                    # the next rollout is on-policy
        log(step_metrics(...))

    python train.py                                   # GPU, the defaults below
    python train.py --resume out/run                  # continue a run exactly (its flags come from the checkpoint)
    python train.py --init_from out/run/ckpt-000500 --out_dir out/run2 --max_response_len 16384   # next stage
    torchrun --nproc_per_node 8 train.py ...          # FSDP2; one colocated vLLM engine per rank
    python train.py --lora_rank 32 --lr 3e-6 ...      # LoRA adapters on a frozen base (lora.py)

Ranks, FSDP2 and model loading live in distributed.py; checkpoints, resume and the metrics log in runs.py;
micro-batches in batching.py; what a step logs in metrics.py; periodic evaluation in eval.py.
"""
import argparse
import contextlib
import json
import math
import os
import random
import sys
import time

import torch
from transformers import AutoTokenizer

import data
import eval as evaluation
import grpo
import logprobs
import lora
import preflight
from batching import collate, pad_rows, same_count_micro_batches
from distributed import DIST_TIMEOUT_MIN, FSDP_PARAM_DTYPE, all_gather_objects, all_reduce, full_weights, \
    init_distributed, load_model, optimizer_step, shutdown_distributed
from metrics import progress_line, record_mismatch, reward_totals, step_metrics, update_totals
from reward import RewardFunctionError, all_failed, combine, component_metrics, format_reward, needs_gold, \
    score_components, score_problems, zero_truncated
from rollout import VLLM_RUNNER, make_engine
from runs import Logger, checkpoint_note, inherit_template, latest_checkpoint, load_checkpoint, refuse_used_out_dir, \
    resume_flags, save_checkpoint, start_stage

# ---- defaults (AceMath-RL stage 1; DeepSeek-R1-Distill-Qwen-1.5B) -------------------------------------------
MODEL = "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"
TRAIN_DATA = "math_train12k,aime_1983_2023"
TEMPLATE = "chat"
BATCH_SIZE = 128            # prompts per step (train_batch_size == ppo_mini_batch_size: one update per batch)
GROUP_SIZE = 8              # responses per prompt
MAX_RESPONSE_LEN = 8192     # tokens
TEMPERATURE = 0.6
LR = 3e-7                   # AdamW, constant
KL_COEF = 0.001             # k3 estimator; the reference model is loaded only when > 0
CLIP_LOW, CLIP_HIGH = 0.2, 0.2
LOSS_AGG = "token-mean"
GRAD_CLIP = 1.0
MICRO_BATCH_TOKENS = 32768  # tokens per forward/backward
EVAL_TEMPERATURE, EVAL_TOP_P = 0.6, 0.95   # periodic eval (AceMath-RL: 0.6 / 0.95; the Perplexity study: 0.7 / 0.95)


def build_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("model and data")
    g.add_argument("--model", default=MODEL, help="hub id or local HF directory of the starting policy")
    g.add_argument("--init_from", default=None, help="start a new stage from a checkpoint's weights (fresh "
                   "optimizer, these weights as KL reference, a new data order)")
    g.add_argument("--resume", default=None, help="continue the run in this out_dir exactly (its flags, data order "
                   "and KL reference come from its latest checkpoint; only run-control flags may change)")
    g.add_argument("--train_data", default=TRAIN_DATA, help="comma-separated shipped name(s), hub set(s) "
                   "(hub_sets.py), file(s) or hub:org/name[:config][:split] (data.parse_hub_spec)")
    g.add_argument("--problem_field", default="problem", help="column holding the problem (files / hub sets)")
    g.add_argument("--answer_field", default="answer", help="column holding the gold answer")
    g.add_argument("--template", default=TEMPLATE, help="prompt template: " + data.TEMPLATE_HELP)
    g.add_argument("--max_prompt_len", type=int, default=1024, help="longer prompts (tokens) are skipped with a "
                   "warning; --max_prompt_len + --max_response_len must fit the model's context (checked at start)")
    g.add_argument("--config_overrides", default="", help="JSON object of model config fields for the trainer and "
                   "vLLM alike, e.g. '{\"max_position_embeddings\": 32768}' (preflight.py); saved with checkpoints")
    g.add_argument("--contamination_check", type=int, default=1,
                   help="1: warn about training problems found in eval sets (the shipped ones, --eval_data's hub sets)")
    g.add_argument("--data_seed", type=int, default=None, help="seed of this stage's data order and sampling "
                   "(default --seed + stage - 1: a new stage does not replay the last one's order)")
    g = p.add_argument_group("GRPO")
    g.add_argument("--batch_size", type=int, default=BATCH_SIZE, help="prompts per step")
    g.add_argument("--group_size", type=int, default=GROUP_SIZE, help="responses per prompt")
    g.add_argument("--max_response_len", type=int, default=MAX_RESPONSE_LEN,
                   help="max generated tokens per response; a response cut off here (truncated) gets reward 0")
    g.add_argument("--temperature", type=float, default=TEMPERATURE,
                   help="sampling temperature (the trainer uses the same)")
    g.add_argument("--top_p", type=float, default=1.0, help="must be 1 in training (the trainer's log-probs are "
                   "those of the full distribution); --eval_top_p is free")
    g.add_argument("--lr", type=float, default=LR, help="AdamW learning rate (constant)")
    g.add_argument("--weight_decay", type=float, default=0.0, help="AdamW weight decay")
    g.add_argument("--kl_coef", type=float, default=KL_COEF, help="weight of KL(pi || pi_ref); 0: no reference model")
    g.add_argument("--kl_estimator", default="k3", choices=grpo.KL_ESTIMATORS,
                   help="per-token KL estimator (grpo.kl_penalty says what each one's gradient is)")
    g.add_argument("--clip_low", type=float, default=CLIP_LOW, help="lower clip range: ratio >= 1 - clip_low")
    g.add_argument("--clip_high", type=float, default=CLIP_HIGH, help="upper clip range (DAPO clip-higher: e.g. 0.28)")
    g.add_argument("--loss_agg", default=LOSS_AGG, choices=grpo.LOSS_AGG_MODES,
                   help="loss aggregation (grpo.aggregate); normalisers count every scored response of the batch")
    g.add_argument("--norm_std", type=int, default=1, help="1: divide advantages by the group std (GRPO); 0: Dr. GRPO")
    g.add_argument("--grad_clip", type=float, default=GRAD_CLIP, help="max gradient norm")
    g.add_argument("--entropy_coef", type=float, default=0.0, help="entropy bonus weight")
    g.add_argument("--mask_truncated", type=int, default=0, help="1: truncated responses leave the loss and its "
                   "normalisers (TRL's mask_truncated_completions); they still count (reward 0) in advantages")
    g.add_argument("--skip_equal_groups", type=int, default=1, help="1: do not forward groups whose rewards are "
                   "all equal (advantage 0): same policy gradient, less compute (no KL/entropy term from them)")
    g.add_argument("--tis_cap", type=float, default=0.0, help=">0: correct the sampler/trainer mismatch with "
                   "weights from r = pi_old / pi_vllm, bounded above by this (grpo.rollout_correction)")
    g.add_argument("--tis_mode", default="token_truncate", choices=grpo.ROLLOUT_CORRECTION_MODES, help="truncate or "
                   "mask r to [--tis_low, --tis_cap] per token (TIS, IcePop) or per sequence (geometric mean)")
    g.add_argument("--tis_low", type=float, default=0.0, help="lower bound of the ratio band (IcePop: 0.5)")
    g.add_argument("--loss_type", default="ppo", choices=grpo.LOSS_TYPES, help="ppo: token ratio, clipped; gspo: "
                   "sequence ratio; cispo: clipped IS weight x log-prob (grpo.policy_loss). Only off-policy do they "
                   "differ: strictly on-policy every ratio is 1")
    g.add_argument("--clip_ratio_c", type=float, default=0.0, help=">1: PPO dual clipping (Ye et al. 2020; verl's "
                   "clip_ratio_c, 3.0 there): the loss of a negative-advantage token is at most -c * A. 0: off (TRL)")
    g.add_argument("--top_entropy_quantile", type=float, default=1.0, help="<1: train only on this top fraction of "
                   "the batch's tokens by entropy (80/20; grpo.high_entropy_mask; one extra no-grad pass)")
    g.add_argument("--dynamic_sampling", type=int, default=0, help="1: DAPO: drop groups whose correctness is all "
                   "equal, sample more until --batch_size groups (at most --max_sampling_rounds rounds)")
    g.add_argument("--max_sampling_rounds", type=int, default=3, help="cap on generation rounds per step")
    g.add_argument("--overlong_buffer_len", type=int, default=0, help=">0: DAPO's soft overlong punishment, "
                   "growing to --overlong_penalty over the last N tokens before --max_response_len")
    g.add_argument("--overlong_penalty", type=float, default=1.0, help="the largest overlong penalty")
    g.add_argument("--ppo_epochs", type=int, default=1, help="passes over each batch (>1 is off-policy)")
    g.add_argument("--mini_batches", type=int, default=1, help="optimizer steps per pass (>1 is off-policy)")
    g.add_argument("--format_reward", default="", choices=["", "strict", "loose"],
                   help="add the <think>/<answer> format reward")
    g.add_argument("--reward", default="", help="the reward when not 1 for a correct answer: comma-separated NAME, "
                   "FILE.py:FUNCTION or module:FUNCTION, each optionally :WEIGHT, e.g. 'math:1.0,my_rewards.py:"
                   "brevity:0.1' (built-ins: math, code, format, format_loose; reward.parse_reward_spec; README)")
    lora.add_flags(p.add_argument_group("LoRA (lora.py; a new stage may switch it on or off, a resume may not)"))
    g = p.add_argument_group("systems (preflight.py: defined and checked there, before anything loads)")
    g.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="training device")
    g.add_argument("--micro_batch_tokens", type=int, default=MICRO_BATCH_TOKENS,
                   help="tokens per micro-batch (packed: real tokens; padded: count x longest)")
    preflight.add_system_flags(g, vllm_runner=VLLM_RUNNER, dist_timeout_min=DIST_TIMEOUT_MIN,  # precision, packing,
                               fsdp_param_dtype=FSDP_PARAM_DTYPE)   # memory, vLLM, FSDP2, grading processes
    preflight.add_run_control_flags(p.add_argument_group("run control (may change on --resume; preflight.py)"),
                                    eval_temperature=EVAL_TEMPERATURE, eval_top_p=EVAL_TOP_P)
    return p


def parse_args(argv=None):
    """Flags -> namespace, with the run's own flags on --resume and the stage's start and seed; validated before
    anything heavy is loaded (the checks live in preflight.py)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    errors, later = [], []  # later: in a dry run, paths an earlier recipe stage will create are noted, not errors
    ckpt = latest_checkpoint(args.resume) if args.resume else None
    if args.resume and ckpt is None:
        (later if args.dry_run else errors).append(f"--resume {args.resume}: no checkpoint found there")
    if ckpt:
        resume_flags(args, build_parser, argv, ckpt, preflight.RUN_CONTROL_FLAGS, script="train.py")
    preflight.check_train_run(args, build_parser(), ckpt, errors, later)   # sets args.reward_components (--reward)
    for note in later:
        print(f"train.py: dry run: {note} (yet)")
    if errors:
        parser.error("\n  ".join(errors))
    preflight.resolve_dtypes(args)   # --dtype and --fsdp_param_dtype left at their defaults
    if ckpt is None:  # a fresh run or stage: where this stage starts (its KL reference) and its data seed
        start_stage(args, args.init_from)
        inherit_template(args, build_parser, argv, args.init_from, "train.py")   # an SFT stage's template
    error = preflight.check_train_context(args, ckpt, default_model=MODEL)  # prompt + response fit the model
    if error:
        parser.error(error)
    return args


# ---- the steps of the algorithm, in the order main() calls them ---------------------------------------------
def next_prompts(batcher, tokenizer, template, max_prompt_tokens):
    """This rank's problems of the next global batch and their prompt token ids. A prompt longer than
    max_prompt_tokens (--max_prompt_len, or the engine's context) is skipped: (problems, prompts, skipped ids)."""
    batch = next(batcher)
    prompts = [data.render_prompt(p["problem"], tokenizer, template) for p in batch]
    skipped = [p["id"] for p, ids in zip(batch, prompts) if len(ids) > max_prompt_tokens]
    keep = [i for i, ids in enumerate(prompts) if len(ids) <= max_prompt_tokens]
    return [batch[i] for i in keep], [prompts[i] for i in keep], skipped


def generate(engine, prompts, args, step, *, replica, num_replicas, round=0):
    """Step 1: group_size responses per prompt (n consecutive Samples each) from the engine's current weights. Seeds:
    a disjoint range per (stage, step, sampling round, replica); sample j of prompt i gets base + i * n + j."""
    if not prompts:
        return []
    span = args.batch_size * args.group_size
    draw = step * args.max_sampling_rounds + round if args.dynamic_sampling else step
    return engine.generate(prompts, n=args.group_size, temperature=args.temperature, top_p=args.top_p,
                           max_tokens=args.max_response_len,
                           seed=args.data_seed * 1_000_000_007 + (draw * num_replicas + replica) * span)


def score(samples, problems, args, think_prefilled=False):
    """Step 2: rewards [N] float32: 1 for a correct final answer (reward.py; code: every test passes in the sandbox),
    plus the optional format and overlong terms. Answers must be explicit (--strict_answers 1). A truncated response
    gets 0 (reward.zero_truncated), and so does one that never closes a <think> its prompt opened (think_prefilled).
    With --reward: the weighted sum of its components (reward.score_components; truncated: 0), correct = the first
    one's score >= 1. Returns (rewards, correct: list of 0/1 per sample, stats)."""
    stats, responses = {}, [s.text for s in samples]
    truncated = [s.finish_reason == "length" for s in samples]
    rows = [p for p in problems for _ in range(args.group_size)]
    grading = dict(workers=args.reward_workers, timeout_s=args.reward_timeout_s, code_timeout_s=args.code_timeout_s,
                   stats=stats, strict=bool(args.strict_answers), think_prefilled=think_prefilled)
    if args.reward_components:
        scores = score_components(responses, rows, args.reward_components, skip=truncated, **grading)
        correct = [float(value >= 1.0) for value in scores[args.reward_components[0]["name"]]]
        rewards = torch.tensor(combine(scores, args.reward_components), dtype=torch.float32)
    else:
        correct = zero_truncated(score_problems(responses, rows, **grading) if samples else [], truncated)
        rewards = torch.tensor(correct, dtype=torch.float32)
        if args.format_reward:
            formats = [format_reward(text, args.format_reward) for text in responses]
            rewards += torch.tensor(zero_truncated(formats, truncated), dtype=torch.float32)
    if args.overlong_buffer_len:   # DAPO eq. 13: added to the reward, -penalty at the length cap
        lengths = torch.tensor([len(s.response_ids) for s in samples])
        rewards += grpo.overlong_penalty(lengths, args.max_response_len, args.overlong_buffer_len,
                                         args.overlong_penalty)
    return rewards, correct, stats


# ---- how a global batch is laid out over ranks ----------------------------------------------------------------
# A vLLM engine spans --tensor_parallel_size ranks (tp_size): its ranks generate TOGETHER, so they get the same
# prompts and seed and hold identical samples. Such a group is a replica (replica = rank // tp_size, num_replicas
# = world // tp_size); data.PromptBatcher deals the global batch over replicas. Each rank then trains on its share
# of its replica's prompt groups (group_size consecutive samples of one prompt). 4 ranks, --tensor_parallel_size 2,
# --batch_size 4 (prompts P0..P3), --group_size 2 (samples Pk.0, Pk.1):
#
#   rank                       0          1          |      2          3
#   replica                    0                     |      1                 rank // tp_size
#   its prompts                P0, P2                |      P1, P3            batch position p -> replica p % 2
#   its samples (both ranks)   P0.0 P0.1 P2.0 P2.1   |      P1.0 P1.1 P3.0 P3.1
#   prompt group               0    0    1    1      |      0    0    1    1   group = sample index // group_size
#   trained by rank            0    0    1    1      |      2    2    3    3   group % tp_size == rank % tp_size
#   micro-batches              rank 0: [P0.0 P0.1], rank 1: [P2.0 P2.1], ...  a rank's trained samples, packed to
#                              <= --micro_batch_tokens; every rank runs the same number (batching.py: a collective)
def select_samples(samples, rewards, args, rank, tp_size):
    """Which samples this rank counts and trains on (lists of indices into samples; the diagram above):
        own      this rank's prompt groups (the ranks of a replica hold identical samples: nothing counts twice)
        scored   own, minus truncated ones under --mask_truncated: the samples the loss is normalised over
        trained  scored, minus all-equal groups under --skip_equal_groups (grpo.informative_groups): advantage 0,
                 so skipping their forward/backward changes only compute (still in the normalisers). Their KL /
                 entropy terms are left out too: unlike verl and TRL, whose KL covers every sample (flag 0)"""
    group_size, skip_equal = args.group_size, bool(args.skip_equal_groups)
    informative = grpo.informative_groups(rewards, group_size).tolist()
    own = [i for i in range(len(samples)) if (i // group_size) % tp_size == rank % tp_size]
    scored = [i for i in own if not (args.mask_truncated and samples[i].finish_reason == "length")]
    trained = [i for i in scored if informative[i // group_size] or not skip_equal]
    return own, scored, trained


def sample_batch(engine, batcher, tokenizer, args, step, *, rank, tp_size, num_replicas, max_prompt_tokens,
                 think_prefilled, times):
    """Steps 1-2 for the next global batch: generate, then score. With --dynamic_sampling (DAPO sec. 3.2) groups
    whose correctness is all equal (grpo.informative_groups: no signal) are dropped and more batches drawn until
    batch_size groups are kept over all ranks, or --max_sampling_rounds (then it trains on what there is, and says
    so). All ranks draw the same rounds; a round consumes a whole batch of the data order (the cursor stays exact).
    Returns (samples, rewards [N], correct, grading stats, skipped prompt ids, sampling counts)."""
    group_size, replica = args.group_size, rank // tp_size
    samples, rewards, correct, grading, skipped = [], [], [], {}, []
    counts = {"rounds": 0, "groups_generated": 0, "groups_kept": 0}
    for round in range(args.max_sampling_rounds if args.dynamic_sampling else 1):
        t0 = time.perf_counter()
        batch, prompts, skip = next_prompts(batcher, tokenizer, args.template, max_prompt_tokens)
        new = generate(engine, prompts, args, step, replica=replica, num_replicas=num_replicas, round=round)
        t1 = time.perf_counter()
        new_rewards, new_correct, stats = score(new, batch, args, think_prefilled)
        times["generate"] += t1 - t0
        times["score"] += time.perf_counter() - t1
        keep = range(len(batch))
        if args.dynamic_sampling:
            # on correctness, as DAPO's recipe filters on accuracy: a group all right (or all wrong) whose lengths
            # differ only by the overlong penalty carries no signal about correctness
            informative = grpo.informative_groups(torch.tensor(new_correct), group_size).tolist()
            # each replica's flags once (its ranks hold the same), then the informative groups in global batch
            # order: position p of a round is group p // num_replicas of replica p % num_replicas (so any number
            # of ranks keeps the groups one rank would)
            flags = [f for r, f in enumerate(all_gather_objects(informative)) if r % tp_size == 0]
            order = [(group, owner) for group in range(max(map(len, flags))) for owner in range(num_replicas)
                     if group < len(flags[owner]) and flags[owner][group]]
            chosen = order[:args.batch_size - counts["groups_kept"]]
            keep = [group for group, owner in chosen if owner == replica]
            counts["groups_generated"] += sum(map(len, flags))
            counts["groups_kept"] += len(chosen)
        counts["rounds"] += 1
        rows = [group * group_size + j for group in keep for j in range(group_size)]
        samples += [new[i] for i in rows]
        rewards.append(new_rewards[rows])
        correct += [new_correct[i] for i in rows]
        skipped += skip
        for key, value in stats.items():   # counts add up; a text (a reward function's first error) stays
            grading[key] = grading.setdefault(key, value) if isinstance(value, str) else grading.get(key, 0) + value
        if not args.dynamic_sampling or counts["groups_kept"] >= args.batch_size:
            break
    if args.dynamic_sampling and counts["groups_kept"] < args.batch_size and rank == 0:
        print(f"train.py: WARNING: step {step + 1}: dynamic sampling found {counts['groups_kept']} informative "
              f"groups of {args.batch_size} in {counts['rounds']} rounds (--max_sampling_rounds): training on those")
    return samples, torch.cat(rewards), correct, grading, skipped, counts


def batch_prepass(policy, samples, scored, trained, args, *, device, autocast, pad_id, totals, old_policy):
    """One no-grad pass before any update, when something needs the whole batch first. Off-policy (--ppo_epochs or
    --mini_batches > 1): pi_old (the trainer's log-probs under the weights that sampled the batch) and the sampler
    correction weights from pi_old / pi_vllm, for the trained samples. --top_entropy_quantile < 1: the entropies of
    every SCORED token on every rank, all-equal groups included (the quantile is the whole batch's, as in the paper).
    Returns ({sample: logp [T]}, {sample: weights [T]}, pool of entropies [n] or None)."""
    old_logp, is_weights, entropies, select = {}, {}, [], args.top_entropy_quantile < 1
    lengths = [len(s.prompt_ids) + len(s.response_ids) for s in samples]
    dummy = data.Sample([pad_id, pad_id], [pad_id], [0.0], "stop", "")  # zero-weight pass when a rank ran out (FSDP)
    trained_set, packed = set(trained), bool(args.packing)
    with torch.no_grad():
        # micro: the sample indices of one micro-batch, or None for a zero-weight pass
        for micro in same_count_micro_batches(scored if select else trained, lengths, args.micro_batch_tokens, packed):
            ids, attention, mask, rollout_logp = collate([dummy] if micro is None else [samples[i] for i in micro],
                                                         pad_id, device)
            with autocast:
                out = logprobs.token_logprobs(policy, ids, attention, args.temperature, args.logprob_chunk,
                                              with_entropy=select, score_mask=mask, packed=packed)
            logp, entropy = out if select else (out, None)   # entropy only when the 80/20 selection needs it
            if micro and select:
                entropies.append(entropy[mask.bool()].float().cpu())
            if not old_policy:
                continue
            rows = [row for row, i in enumerate(micro or []) if i in trained_set]  # an all-equal group: entropy only
            if micro and len(rows) < len(micro):
                micro, logp, rollout_logp, mask = [micro[r] for r in rows], logp[rows], rollout_logp[rows], mask[rows]
            weights, mismatch = grpo.rollout_correction(logp, rollout_logp, mask, cap=args.tis_cap or math.inf,
                                                        mode=args.tis_mode, low=args.tis_low)
            for row, i in enumerate(micro or []):
                old_logp[i], is_weights[i] = logp[row, :lengths[i] - 1], weights[row, :lengths[i] - 1]
            if micro:
                record_mismatch(totals, mismatch, mask)
    if not select:
        return old_logp, is_weights, None
    return old_logp, is_weights, torch.cat([part for parts in all_gather_objects(entropies) for part in parts] or
                                           [torch.zeros(0)]).to(device)


def update_policy(policy, reference, optimizer, samples, advantages, *, scored, trained, args, step, device, autocast,
                  pad_id):
    """Step 4: one optimizer step on the batch (or ppo_epochs x mini_batches steps: off-policy experiments).

    The loss of a mini-batch (grpo.py) is  policy_loss + kl_coef * KL(pi || pi_ref) - entropy_coef * H,  each
    term aggregated with --loss_agg and NORMALISED OVER EVERY SCORED RESPONSE of the mini-batch on all ranks
    (as verl and TRL): micro-batch losses sum to the mini-batch loss, and --skip_equal_groups saves compute only.
    Per-token weights multiply the policy loss: the sampler correction (--tis_cap) and the high-entropy selection
    (--top_entropy_quantile; unselected tokens weigh 0 but stay in the normalisers, as in TRL). On-policy
    pi_old = pi_theta.detach() (ratio 1: the plain policy gradient); off-policy it comes from batch_prepass.
    Returns metrics.update_totals' sums for step_metrics (the last grad_norm before clipping; skipped: non-finite)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    lengths = [len(s.prompt_ids) + len(s.response_ids) for s in samples]
    on_policy = args.ppo_epochs == 1 and args.mini_batches == 1
    correct_sampler, select_tokens, packed = args.tis_cap > 0, args.top_entropy_quantile < 1, bool(args.packing)
    trained_set = set(trained)
    dummy = data.Sample([pad_id, pad_id], [pad_id], [0.0], "stop", "")  # zero-weight pass when a rank ran out (FSDP)
    totals = update_totals()   # the sums step_metrics reads (metrics.py)
    pool = None
    if not on_policy or select_tokens:
        old_logp, is_weights, pool = batch_prepass(policy, samples, scored, trained, args, device=device,
                                                   autocast=autocast, pad_id=pad_id, totals=totals,
                                                   old_policy=not on_policy)

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
            # micro: the sample indices of one micro-batch, or None for a zero-weight pass (this rank ran out)
            for micro in same_count_micro_batches([i for i in mini if i in trained_set], lengths,
                                                  args.micro_batch_tokens, packed):
                ids, attention, mask, rollout_logp = collate([dummy] if micro is None else [samples[i] for i in micro],
                                                             pad_id, device)
                if micro is None:
                    mask.zero_()  # all positions still go through the head: every parameter gets its (zero) gradient
                with autocast:
                    logp, entropy = logprobs.token_logprobs(
                        policy, ids, attention, args.temperature, args.logprob_chunk, with_entropy=True,
                        score_mask=mask if micro else None, entropy_grad=args.entropy_coef > 0, packed=packed)
                if on_policy:
                    old = logp.detach()
                    weights, mismatch = grpo.rollout_correction(old, rollout_logp, mask, cap=args.tis_cap or math.inf,
                                                                mode=args.tis_mode, low=args.tis_low)
                    if micro:
                        record_mismatch(totals, mismatch, mask)
                else:
                    width = logp.shape[1]
                    old = pad_rows([old_logp[i] for i in micro], width) if micro else logp.detach()
                    weights = pad_rows([is_weights[i] for i in micro], width) if micro else torch.ones_like(logp)
                if select_tokens:  # 80/20: only the batch's top fraction of tokens by entropy carries a gradient
                    keep = grpo.high_entropy_mask(entropy, mask, args.top_entropy_quantile, pool).float()
                    weights = weights * keep if correct_sampler else keep
                adv = advantages[micro].to(device) if micro else torch.zeros(1, device=device)
                loss, stats = grpo.policy_loss(logp, old, adv, mask, clip_low=args.clip_low, clip_high=args.clip_high,
                                               loss_agg=args.loss_agg, loss_type=args.loss_type,
                                               is_weights=weights if correct_sampler or select_tokens else None,
                                               clip_ratio_c=args.clip_ratio_c, **norm)
                pg_loss = loss.detach()
                kl_tok = torch.zeros_like(logp)
                if reference is not None:
                    with torch.no_grad(), autocast:
                        ref_logp = logprobs.token_logprobs(reference, ids, attention, args.temperature,
                                                           args.logprob_chunk, score_mask=mask if micro else None,
                                                           packed=packed)
                    if hasattr(reference, "reshard"):  # FSDP2: do not keep its gathered embeddings/head around
                        reference.reshard()
                    kl_tok = grpo.kl_penalty(logp, ref_logp, args.kl_estimator)
                    loss = loss + args.kl_coef * grpo.aggregate(kl_tok, mask, args.loss_agg, **norm)
                if args.entropy_coef:
                    loss = loss - args.entropy_coef * grpo.aggregate(entropy, mask, args.loss_agg, **norm)
                # FSDP averages gradients over ranks; the loss is already normalised globally, so undo the mean
                (loss * world if world > 1 else loss).backward()
                if micro is None:
                    continue
                counted, n_tok = mask.bool(), int(mask.sum())
                update_loss += loss.item()
                totals["pg_loss"] += pg_loss.item()
                totals["kl"] += kl_tok.detach()[counted].sum().item()
                totals["entropy"] += entropy.detach()[counted].sum().item()
                totals["clip"] += stats["clip_frac"] * n_tok
                totals["kl_old"] += stats["approx_kl_old"] * n_tok
                totals["tokens"] += n_tok
            totals["grad_norm"], skipped = optimizer_step(policy, optimizer, update_loss, args.grad_clip, step)
            totals["skipped"] = totals["skipped"] or skipped
            totals["loss"] += update_loss
            totals["updates"] += 1
    return totals


# ---- the run -----------------------------------------------------------------------------------------------
def main(argv=None, engine=None):
    args = parse_args(argv)
    if args.dry_run:
        print(f"train.py: dry run ok: {json.dumps(vars(args))}")
        return None
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit(preflight.no_gpu_message("train.py"))
    rank, world = init_distributed(args.device, args.dist_timeout_min, one_rank_group=bool(args.fsdp_cpu_offload))
    is_main = rank == 0
    tp_size = args.tensor_parallel_size if args.engine == "vllm" else 1   # the batch layout: see select_samples
    replica, num_replicas = rank // tp_size, world // tp_size
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device(args.device, int(os.environ.get("LOCAL_RANK", "0"))) if args.device == "cuda" \
        else torch.device("cpu")
    dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32}[args.dtype]
    autocast = torch.autocast(device.type, dtype=dtype) if dtype != torch.float32 else contextlib.nullcontext()
    resume_ckpt = latest_checkpoint(args.resume) if args.resume else None
    source = str(resume_ckpt / "model") if resume_ckpt else args.stage_start
    cpu_offload = bool(args.fsdp_cpu_offload)
    problem = preflight.check_layout(world, tp_size, args.batch_size) or (  # refuse now, not after minutes of
        device.type == "cuda" and preflight.check_train_memory(args, source, device, world))   # loading
    if problem:
        sys.exit(problem)

    # ---- data --------------------------------------------------------------------------------------------
    problems = data.load_dataset(args.train_data, problem_field=args.problem_field, answer_field=args.answer_field,
                                 require_answer=needs_gold(args.reward_components))
    eval_problems = evaluation.load_benchmarks(args.eval_data, args.reward_components)
    refusal = preflight.check_train_data(args, problems, eval_problems)  # rows --reward grades, sandbox, contamination
    if refusal:
        sys.exit(refusal)
    batcher = data.PromptBatcher(problems, args.batch_size, seed=args.data_seed, rank=replica, world_size=num_replicas)

    # ---- models, optimizer, checkpoint -------------------------------------------------------------------
    if args.resume:
        args.out_dir = args.resume
    else:
        refuse_used_out_dir(args.out_dir, "train.py")
    os.makedirs(args.out_dir, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(source)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    think_prefilled = data.prompt_opens_think(tokenizer, args.template)  # R1-distill chat templates end in <think>
    # fp32 master weights; compute runs in --dtype under autocast. LoRA: the stage's base frozen in --dtype, fp32
    # adapters (on resume, the checkpoint's)
    policy = load_model(args.stage_start if args.lora_rank else source, device,
                        dtype if args.lora_rank else torch.float32, world, cpu_offload,
                        gradient_checkpointing=bool(args.gradient_checkpointing), packed=bool(args.packing),
                        overrides=args.overrides, param_dtype=args.fsdp_param_dtype,
                        wrap=lora.wrapper(args, resume_ckpt and resume_ckpt / "adapter") if args.lora_rank
                        else None).train()
    reference = None
    if args.kl_coef > 0 and args.lora_rank:  # the stage's starting policy = the base: the policy, adapters off
        reference = lora.adapters_disabled(policy)
    elif args.kl_coef > 0:  # frozen copy of the stage's starting policy (also when resuming)
        reference = load_model(args.stage_start, device, dtype, world, cpu_offload, packed=bool(args.packing),
                               overrides=args.overrides)
        reference.eval().requires_grad_(False)
    optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=args.lr,
                                  weight_decay=args.weight_decay, betas=(0.9, 0.999))
    if is_main:
        print(checkpoint_note(policy, args.keep_last, args.save_every, "train.py"))
    start_step = 0
    if resume_ckpt:
        state = load_checkpoint(resume_ckpt, policy, optimizer)
        batcher.load_state_dict(state["batcher"])
        start_step = state["step"]
        if is_main:
            print(f"train.py: resumed {resume_ckpt} at step {start_step} (stage {args.stage}, KL reference "
                  f"{args.stage_start})")
    logger = Logger(args.out_dir, start_step if resume_ckpt else None, args.wandb, bool(args.tensorboard),
                    config=vars(args)) if is_main else None

    # ---- the engine: its first weights come from the trainer (no second read of the checkpoint) -------------
    engine = engine or make_engine(
        args.engine, source, tokenizer, dtype=args.dtype, seed=args.seed, world=world, load_format="dummy",
        max_model_len=args.max_model_len or args.max_prompt_len + args.max_response_len,
        gpu_memory_utilization=args.vllm_gpu_memory_utilization, enforce_eager=bool(args.enforce_eager),
        tensor_parallel_size=args.tensor_parallel_size, hf_overrides=args.overrides, runner=args.vllm_runner,
        sleep_level=args.vllm_sleep_level)
    engine_dtype = getattr(engine, "dtype", None)   # push in the engine's dtype (bf16 on GPU)
    engine.update_weights(full_weights(policy, engine_dtype, device))
    max_prompt_tokens = min(args.max_prompt_len, getattr(engine, "max_model_len", 1 << 62) - 1)

    def periodic_eval(done):  # every rank takes part (the problems are sharded over the replicas)
        return evaluation.evaluate_during_training(engine, tokenizer, args, done, replica, dp_world=num_replicas,
                                                   tp=tp_size)

    if args.eval_before_train and args.eval_data and start_step == 0:  # the starting point of the eval curve
        baseline = {"step": 0, **periodic_eval(0)}
        if is_main:
            logger.log(baseline)

    # ---- the loop ----------------------------------------------------------------------------------------
    for step in range(start_step, args.max_steps):
        times = {"start": time.perf_counter(), "generate": 0.0, "score": 0.0}
        # 1-2. generate group_size responses per prompt from the current policy, and score them: 0/1 correctness
        # (plus the optional format / overlong terms); truncated responses get 0. Then vLLM sleeps (level 2 on GPU)
        # and gives its memory to the trainer.
        samples, rewards, correct, grading, skipped, sampling = sample_batch(
            engine, batcher, tokenizer, args, step, rank=rank, tp_size=tp_size, num_replicas=num_replicas,
            max_prompt_tokens=max_prompt_tokens, think_prefilled=think_prefilled, times=times)
        engine.sleep()
        totals = reward_totals(grading, args, tp_size, step)
        failure = totals and all_failed(totals, grading, args.reward_components, f"train.py: step {step + 1}")
        if failure:   # a user's function failed on every response: stop with its own error, never train on zeros
            raise RewardFunctionError(failure)
        if skipped and rank % tp_size == 0:
            print(f"train.py: WARNING: step {step + 1}: skipped {len(skipped)} problem(s) whose prompt is longer than "
                  f"{max_prompt_tokens} tokens (--max_prompt_len / the engine's context): {', '.join(skipped)}")

        # 3. advantages: group-relative, one value per response; which samples count and which are trained
        advantages = grpo.group_advantages(rewards, args.group_size, norm_std=bool(args.norm_std))
        own, scored, trained = select_samples(samples, rewards, args, rank, tp_size)

        # 4. update: one optimizer step on the whole batch
        t0 = time.perf_counter()
        update = update_policy(policy, reference, optimizer, samples, advantages, scored=scored, trained=trained,
                               args=args, step=step, device=device, autocast=autocast, pad_id=pad_id)
        times["update"] = time.perf_counter() - t0

        # 5. sync: the next rollout must come from the weights we just made. Always push, even after a skipped
        # update: the level-2 sleep discarded vLLM's copy. vLLM stays awake until the next generate.
        times["sync"] = engine.update_weights(full_weights(policy, engine_dtype, device))

        # 6. log: the whole global batch's numbers, one console line
        metrics = step_metrics(step, samples, rewards, correct, grading, own=own, scored=scored, trained=trained,
                               update=update, skipped_prompts=skipped, sampling=sampling, times=times, args=args,
                               tp=tp_size)
        if totals:   # --reward: each component's mean, each user's function's failed calls
            metrics.update(component_metrics(totals, args.reward_components))

        # 7. periodic evaluation and checkpoints
        done = step + 1
        if args.eval_every and args.eval_data and (done % args.eval_every == 0 or done == args.max_steps):
            metrics.update(periodic_eval(done))
            if is_main:
                logger.log_samples(done, samples, correct)
        if is_main:
            logger.log(metrics)
            print(progress_line(metrics, args.max_steps), flush=True)
        if (args.save_every and done % args.save_every == 0) or done == args.max_steps:
            save_checkpoint(args.out_dir, done, policy, tokenizer, optimizer, keep_last=args.keep_last,
                            trainer_state={"batcher": batcher.state_dict()}, run_info={"flags": vars(args)})
    return policy


if __name__ == "__main__":
    try:
        main()
        shutdown_distributed()   # every rank done, then the process groups go (distributed.py)
    except KeyboardInterrupt:
        sys.exit(130)
    except RewardFunctionError as exc:   # the message holds the function's own error and traceback
        sys.exit(str(exc))
    except torch.OutOfMemoryError as exc:  # say which knobs to turn
        sys.exit(preflight.out_of_memory_message(exc))
