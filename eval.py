"""avg@k / pass@k / maj@k on the standard math benchmarks, with the same engine, templates and grader as training.

    python eval.py --model deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B --preset seed --out out/eval
    python eval.py --model out/run/ckpt-000100/model --benchmarks math500,aime2024 --k 4 --out out/eval
    python eval.py --model M --benchmarks math_train12k --k 16 --pass_rates out/pass_rates.jsonl   (AceMath-RL filtering)

Numbers a reader can trust: every sample is written (problem id, prompt, response, extracted answer, verdict,
finish reason, token count) so any figure can be recomputed; a truncated fraction is reported beside every score;
problem i is sampled with seed (seed + i * k), so an interrupted run resumes from the samples already on disk and
gives the same summary.
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
from reward import extract_answer, is_equiv, score_problems

# The seed table: AIME 2024/2025 avg@64, MATH-500 avg@4, AMC23 avg@5, the rest avg@1 (temperature 0.6, top-p 0.95)
DEFAULT_K = {"aime2024": 64, "aime2025": 64, "math500": 4, "amc2023": 5, "gsm8k_test": 1, "minerva_math": 1,
             "gaokao2023en": 1, "olympiadbench": 1, "college_math": 1}
PRESETS = {"seed": ",".join(DEFAULT_K)}
TEMPERATURE, TOP_P, MAX_TOKENS, TEMPLATE = 0.6, 0.95, 32768, "chat"


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
    """records: graded samples of one benchmark (k per problem). Returns the benchmark's summary dict."""
    by_problem = {}
    for r in records:
        by_problem.setdefault(r["id"], []).append(r)
    per_problem = [sum(r["correct"] for r in rs) / len(rs) for rs in by_problem.values()]
    n = len(per_problem)
    mean = sum(per_problem) / n
    # standard error of avg@k over problems (the sampling noise a reader should expect between runs)
    stderr = math.sqrt(sum((p - mean) ** 2 for p in per_problem) / (n - 1) / n) if n > 1 else 0.0
    summary = {"problems": n, "k": k, f"avg@{k}": mean, "stderr": stderr,
               "truncated_frac": sum(r["finish_reason"] == "length" for r in records) / len(records),
               "mean_response_tokens": sum(r["tokens"] for r in records) / len(records)}
    kk = 1
    while kk <= k:
        summary[f"pass@{kk}"] = sum(pass_at_k(len(rs), sum(r["correct"] for r in rs), kk)
                                    for rs in by_problem.values()) / n
        kk *= 2
    if k > 1 and not all(r.get("gold", "") is None for r in records):  # code problems (no gold): no majority vote
        summary[f"maj@{k}"] = sum(majority_correct([r["extracted"] for r in rs], [r["correct"] for r in rs])
                                  for rs in by_problem.values()) / n
    return summary


# ------------------------------------------------------------------------------------------------------------
# Sampling and grading
# ------------------------------------------------------------------------------------------------------------
def sample_and_grade(engine, tokenizer, problems, k, temperature=TEMPERATURE, top_p=TOP_P, max_tokens=MAX_TOKENS,
                     template=TEMPLATE, seed=0, workers=2, timeout_s=5.0, first_index=0):
    """k graded samples for each problem. Problem i (counting from first_index) is sampled with seed + i * k
    (engine.generate seeds prompt j of a call with seed + j * k), so results do not depend on how problems are
    batched or on where an interrupted run resumed. Returns (records, grading stats)."""
    prompts = [data.render_prompt(p["problem"], tokenizer, template) for p in problems]
    samples = engine.generate(prompts, n=k, temperature=temperature, top_p=top_p, max_tokens=max_tokens,
                              seed=seed + first_index * k)
    golds = [p.get("answer") for p in problems for _ in range(k)]   # None for code problems (graded by tests)
    ids = [p["id"] for p in problems for _ in range(k)]
    stats = {}
    scores = score_problems([s.text for s in samples], [p for p in problems for _ in range(k)], workers=workers,
                            timeout_s=timeout_s, stats=stats)
    records = [{"id": pid, "gold": gold, "prompt": tokenizer.decode(s.prompt_ids), "response": s.text,
                "extracted": extract_answer(s.text) if gold is not None else None, "correct": score == 1.0,
                "finish_reason": s.finish_reason, "tokens": len(s.response_ids)}
               for s, score, pid, gold in zip(samples, scores, ids, golds)]
    return records, stats


def evaluate(engine, tokenizer, benchmarks, k=None, out_dir=None, limit=None, temperature=TEMPERATURE, top_p=TOP_P,
             max_tokens=MAX_TOKENS, template=TEMPLATE, seed=0, workers=2, timeout_s=5.0, log=print):
    """Evaluate on each benchmark (shipped name or file). k: int for all, or None for DEFAULT_K (1 if unknown).
    With out_dir, samples go to out_dir/<benchmark>/samples.jsonl and are reused on a re-run (resume), and
    summary.json + results.md are written. Returns {benchmark: summary}. train.py calls this."""
    results = {}
    for name in benchmarks:
        bench_k = k or DEFAULT_K.get(name, 1)
        problems = data.load_dataset(name)[:limit]
        done = []
        path = None
        if out_dir:
            path = Path(out_dir) / Path(name).name.split(".")[0] / "samples.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            done = _read_complete_samples(path, bench_k)
        done_ids = {r["id"] for r in done}
        if len(done_ids) > len(problems) or any(p["id"] != r for p, r in zip(problems, _ordered_ids(done))):
            raise ValueError(f"{path} holds samples of other problems (a different --limit or dataset?): "
                             f"remove it or use another --out")
        todo = problems[len(done_ids):]
        start = time.time()
        if todo:
            log(f"{name}: sampling {len(todo)} problems x {bench_k}" + (f" (resuming after {len(done_ids)})" if done_ids else ""))
        chunk = 64  # write as we go, so that an interruption loses at most one chunk
        for c in range(0, len(todo), chunk):
            part, stats = sample_and_grade(engine, tokenizer, todo[c:c + chunk], bench_k, temperature, top_p,
                                           max_tokens, template, seed, workers, timeout_s,
                                           first_index=len(done_ids) + c)
            done.extend(part)
            if path:
                with open(path, "a", encoding="utf-8") as f:
                    f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in part))
        summary = summarize(done, bench_k)
        summary["seconds"] = round(time.time() - start, 1)
        results[name] = summary
        log(f"{name}: avg@{bench_k} {summary[f'avg@{bench_k}']:.4f} ± {summary['stderr']:.4f}, "
            f"truncated {summary['truncated_frac']:.3f}")
    if out_dir:
        settings = {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens, "template": template,
                    "seed": seed}
        Path(out_dir, "summary.json").write_text(json.dumps({"settings": settings, "results": results}, indent=2))
        Path(out_dir, "results.md").write_text(markdown_table(results, settings))
    return results


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
    lines = [f"Sampling: temperature {settings['temperature']}, top-p {settings['top_p']}, "
             f"max {settings['max_tokens']} tokens, template `{settings['template']}`.", "",
             "| benchmark | metric | score | ± s.e. | pass@k | maj@k | truncated | mean tokens |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name, s in results.items():
        k = s["k"]
        top_pass = max((key for key in s if key.startswith("pass@")), key=lambda key: int(key[5:]))
        majority = f"{100 * s[f'maj@{k}']:.1f}" if f"maj@{k}" in s else "-"
        lines.append(f"| {name} | avg@{k} | {100 * s[f'avg@{k}']:.1f} | {100 * s['stderr']:.1f} | "
                     f"{100 * s[top_pass]:.1f} ({top_pass}) | {majority} | {100 * s['truncated_frac']:.1f}% | "
                     f"{s['mean_response_tokens']:.0f} |")
    return "\n".join(lines) + "\n"


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
    p.add_argument("--benchmarks", default="math500", help="comma-separated shipped names or files")
    p.add_argument("--preset", choices=sorted(PRESETS), help="'seed': the whole seed table with its k per benchmark")
    p.add_argument("--k", type=int, default=None, help="samples per problem (default: per benchmark, see DEFAULT_K)")
    p.add_argument("--temperature", type=float, default=TEMPERATURE, help="sampling temperature")
    p.add_argument("--top_p", type=float, default=TOP_P, help="nucleus sampling")
    p.add_argument("--max_tokens", type=int, default=MAX_TOKENS, help="response length limit")
    p.add_argument("--template", default=TEMPLATE, choices=sorted(data.TEMPLATES), help="prompt template")
    p.add_argument("--out", default="out/eval", help="output directory (samples, summary.json, results.md)")
    p.add_argument("--limit", type=int, default=None, help="only the first N problems of each benchmark")
    p.add_argument("--pass_rates", default=None, help="also write per-problem pass rates (JSONL) to this file")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (problem i uses seed + i * k)")
    p.add_argument("--engine", default="vllm", choices=["vllm", "hf"], help="generation engine")
    p.add_argument("--dtype", default="auto", help="model dtype for the engine (auto, bfloat16, float32)")
    p.add_argument("--gpu_memory_utilization", type=float, default=0.9, help="vLLM's share of the GPU")
    p.add_argument("--max_model_len", type=int, default=None, help="vLLM context limit (prompt + response)")
    p.add_argument("--workers", type=int, default=2, help="grading processes")
    p.add_argument("--dry_run", action="store_true", help="check flags and paths, load nothing, exit")
    return p


def main(argv=None, engine=None):
    args = build_parser().parse_args(argv)
    benchmarks = PRESETS[args.preset].split(",") if args.preset else [b for b in args.benchmarks.split(",") if b]
    for name in benchmarks:
        if name not in data.SHIPPED_EVAL + data.SHIPPED_TRAIN and not os.path.exists(name):
            sys.exit(f"eval.py: unknown benchmark {name!r} (shipped: {', '.join(data.SHIPPED_EVAL)})")
    if args.k is not None and args.k < 1:
        sys.exit("eval.py: --k must be >= 1")
    if args.dry_run:
        print(f"eval.py: dry run ok: {benchmarks}")
        return None
    if engine is None:
        from rollout import make_engine
        kwargs = {} if args.engine == "hf" else {"gpu_memory_utilization": args.gpu_memory_utilization}
        engine = make_engine(args.engine, args.model, dtype=args.dtype, seed=args.seed,
                             max_model_len=args.max_model_len, **kwargs)
    results = evaluate(engine, engine.tokenizer, benchmarks, k=args.k, out_dir=args.out, limit=args.limit,
                       temperature=args.temperature, top_p=args.top_p, max_tokens=args.max_tokens,
                       template=args.template, seed=args.seed, workers=args.workers)
    if args.pass_rates:
        write_pass_rates(args.out, benchmarks, args.pass_rates)
        print(f"pass rates -> {args.pass_rates}")
    print(Path(args.out, "results.md").read_text())
    return results


if __name__ == "__main__":
    main()
