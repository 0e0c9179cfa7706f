"""Train the Countdown example: a tiny model from scratch, an SFT warm-up on worked examples, then GRPO with the
reward of countdown_reward.py -- through the project's own train.py and sft.py, with demo.py's model, tokenizer and
engine (imported, not copied). Held-out success before and after GRPO, per seed, in OUT/summary.md.

    python examples/countdown/run.py                     # seeds 0, 1, 2 (4-6 min each on 2 shared cores)
    python examples/countdown/run.py --seeds 0 --eval_on validation --set grpo.lr=2e-4     # a tuning run
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))   # the repository root: demo.py, train.py, sft.py
import demo  # noqa: E402  (first: it sets the CPU threading environment before torch is imported)
from make_data import SIZES, write_sets  # noqa: E402

REWARD = f"{HERE / 'countdown_reward.py'}:countdown"
TEMPLATE = str(HERE / "prompt.txt")
SYSTEM_FLAGS = {**demo.SYSTEM_FLAGS, "template": TEMPLATE, "max_response_len": 32}
SFT_FLAGS = dict(batch_size=32, max_len=96, weight_decay=0.0, lr=2e-3, warmup_steps=20, min_lr_ratio=0.0,
                 max_steps=600)
GRPO_FLAGS = dict(batch_size=16, group_size=8, temperature=1.0, lr=1e-4, kl_coef=0.0, max_steps=200,
                  vllm_gpu_memory_utilization=0.3, reward=REWARD)


def run_seed(seed, out_dir, data_paths, *, eval_on="heldout", overrides=None, engine=None, log=print):
    """SFT then GRPO for one seed (model init, data order, sampling); returns (summary dict, engine)."""
    import train
    overrides = overrides or {}
    out = Path(out_dir) / f"seed{seed}"
    started = time.perf_counter()
    base = demo.build_model(out / "base", seed=seed, **demo.MODEL_SIZE)
    engine = engine or demo.start_engine(base, seed)
    log(f"countdown: seed {seed}: SFT on {data_paths['sft']}")
    t0 = time.perf_counter()
    sft_ckpt = demo.sft_stage(engine, base, data_paths["sft"], out / "sft",
                              {**SYSTEM_FLAGS, **SFT_FLAGS, **overrides.get("sft", {})}, eval_data="", seed=seed)
    sft_s = time.perf_counter() - t0
    log(f"countdown: seed {seed}: GRPO on {data_paths['rl']} with --reward {REWARD}")
    t0 = time.perf_counter()
    flags = {**SYSTEM_FLAGS, **GRPO_FLAGS, "eval_every": GRPO_FLAGS["max_steps"], **overrides.get("grpo", {})}
    flags.update(init_from=sft_ckpt, train_data=data_paths["rl"], out_dir=out / "grpo", eval_data=data_paths[eval_on],
                 eval_before_train=1, seed=seed)
    train.main(demo.argv_of(flags), engine=engine)
    rows = demo.read_metrics(out / "grpo")
    summary = {"seed": seed, "eval_on": eval_on, "after_sft": demo.start_eval(out / "grpo", eval_on),
               "after_grpo": demo.last_eval(out / "grpo", eval_on)[1], "sft_s": round(sft_s, 1),
               "grpo_s": round(time.perf_counter() - t0, 1), "total_s": round(time.perf_counter() - started, 1),
               "curve": [(m["step"], m[f"eval/{eval_on}"]) for m in rows if f"eval/{eval_on}" in m],
               "overrides": overrides}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    log(f"countdown: seed {seed}: {summary}")
    return summary, engine


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    parser.add_argument("--out_dir", default="out/countdown", help="models, runs, summary.md")
    parser.add_argument("--eval_on", default="heldout", choices=["heldout", "validation"],
                        help="validation while tuning, heldout to report")
    parser.add_argument("--set", action="append", default=[], metavar="STAGE.FLAG=VALUE",
                        help="override a stage's flag (sft or grpo), e.g. --set grpo.lr=3e-4; repeatable")
    args = parser.parse_args(argv)
    overrides = {}
    for item in args.set:
        key, _, value = item.partition("=")
        stage, _, flag = key.partition(".")
        if stage not in ("sft", "grpo") or not flag or not value:
            parser.error(f"--set {item!r}: expected STAGE.FLAG=VALUE with STAGE sft or grpo")
        overrides.setdefault(stage, {})[flag] = value
    paths = {name: str(HERE / "data" / f"{name}.jsonl") for name in SIZES}
    if not all(Path(p).exists() for p in paths.values()):
        write_sets(HERE / "data")
    engine, results = None, []
    for seed in [int(s) for s in args.seeds.split(",")]:
        summary, engine = run_seed(seed, args.out_dir, paths, eval_on=args.eval_on, overrides=overrides, engine=engine)
        results.append(summary)
    lines = [f"Countdown, {args.eval_on} success (greedy), {len(results)} seed(s)", "",
             "| seed | after SFT | after GRPO | gain | wall s (SFT, GRPO) |", "|---|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r['seed']} | {100 * r['after_sft']:.1f}% | {100 * r['after_grpo']:.1f}% | "
                     f"{100 * (r['after_grpo'] - r['after_sft']):+.1f} | {r['total_s']:.0f} ({r['sft_s']:.0f}, "
                     f"{r['grpo_s']:.0f}) |")
    if len(results) > 1:
        gains = [r["after_grpo"] - r["after_sft"] for r in results]
        lines += ["", f"gain {100 * statistics.mean(gains):+.1f} points (min {100 * min(gains):+.1f}, "
                  f"max {100 * max(gains):+.1f})"]
    text = "\n".join(lines) + "\n"
    (Path(args.out_dir) / "summary.md").write_text(text)
    print("\n" + text)
    return results


if __name__ == "__main__":
    main()
