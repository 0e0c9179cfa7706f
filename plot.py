"""Plot one or more runs' metrics.jsonl against step, runs overlaid, one PNG per panel.

    python plot.py out/run_a out/run_b --out plots/
    python plot.py out/demo/grpo out/demo/sft_control --x seconds --out plots/   # against training time

Panels: reward and accuracy, response length and truncated fraction, entropy, KL to the reference, the
vLLM/trainer alignment metric, eval scores, and the SFT loss (sft.py runs). Only this file imports matplotlib.
"""
import argparse
import json
from pathlib import Path

PANELS = {  # file name -> (title, [(metric key or prefix*, label)])
    "reward.png": ("Training reward", [("reward/mean", "reward"), ("reward/accuracy", "accuracy")]),
    "length.png": ("Response length (tokens)", [("response/length_mean", "mean"), ("response/length_max", "max")]),
    "truncated.png": ("Cut off at max length / self-repeating", [("response/truncated_frac", "truncated"),
                                                                 ("response/repetition_frac", "repeating")]),
    "entropy.png": ("Policy entropy (nats/token)", [("policy/entropy", "entropy")]),
    "kl.png": ("KL to reference", [("policy/kl_ref", "KL")]),
    "alignment.png": ("vLLM / trainer alignment exp(mean|dlogp|)", [("rollout/align_mean", "mean"),
                                                                    ("rollout/align_max", "max")]),
    "eval.png": ("Eval score", [("eval/*", "")]),
    "sft_loss.png": ("SFT loss (nats per response token)", [("sft/loss", "loss")]),
}
X_AXES = {"step": "step", "seconds": "training seconds (time/step summed; evaluation excluded)"}


def read_run(path):
    path = Path(path)
    metrics_file = path if path.is_file() else path / "metrics.jsonl"
    rows = []
    with open(metrics_file, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise SystemExit(f"{metrics_file}:{line_no}: unreadable JSON ({exc.msg})")
    return (path.name if path.is_dir() else path.parent.name), rows


def series(rows, key, x="step"):
    """(xs, ys) of one metric. x="seconds": the training time up to and including that row's step, summed from
    time/step (train.py and sft.py log it), so runs of different step costs compare at equal time."""
    points, elapsed = [], 0.0
    for r in rows:
        elapsed += r.get("time/step", 0.0) if isinstance(r.get("time/step"), (int, float)) else 0.0
        if isinstance(r.get(key), (int, float)):
            points.append((r["step"] if x == "step" else elapsed, r[key]))
    return [p[0] for p in points], [p[1] for p in points]


def plot(runs, out_dir, x="step"):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, (title, keys) in PANELS.items():
        fig, ax = plt.subplots(figsize=(6, 3.6), dpi=110)
        drawn = 0
        for run_name, rows in runs:
            for key, label in keys:
                names = sorted({k for r in rows for k in r if k.startswith(key[:-1]) and not k.endswith("_truncated")}) \
                    if key.endswith("*") else [key]
                for name in names:
                    steps, values = series(rows, name, x)
                    if steps:
                        suffix = label or name.split("/", 1)[1]
                        ax.plot(steps, values, marker="." if len(steps) < 30 else None,
                                label=f"{run_name} {suffix}" if len(runs) > 1 else suffix)
                        drawn += 1
        if drawn:
            ax.set_title(title)
            ax.set_xlabel(X_AXES[x])
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
            fig.tight_layout()
            fig.savefig(out_dir / filename)
            written.append(out_dir / filename)
        plt.close(fig)
    return written


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="run directories (holding metrics.jsonl) or metrics.jsonl files")
    parser.add_argument("--out", default="plots", help="directory for the PNG files")
    parser.add_argument("--x", default="step", choices=sorted(X_AXES), help="x axis: optimizer step or training seconds")
    args = parser.parse_args()
    written = plot([read_run(r) for r in args.runs], args.out, args.x)
    print("\n".join(str(p) for p in written) or "plot.py: nothing to plot")


if __name__ == "__main__":
    main()
