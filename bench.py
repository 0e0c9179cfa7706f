"""Benchmarks that print numbers (speed and memory targets live here, not in timed tests).

    python bench.py logprobs     peak memory / time of grpo.token_logprobs fwd+bwd, 32K tokens x 152K vocab
    python bench.py reward       grader accuracy on dataset solutions, throughput (2 workers), per-item latency;
                                 the same for math-verify when it is installed (pip install math-verify)
    python bench.py rollout      tiny-model vLLM CPU generation tokens/s and seconds per update_weights
    python bench.py code         code reward: MBPP reference programs graded/s (2 workers), p50/p99 per program,
                                 sandbox start-up cost per program (bwrap vs the rlimits fallback vs bare python)
    python bench.py all
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent


# ------------------------------------------------------------------------------------------------------------
# token_logprobs memory: each configuration runs in a fresh process so that its peak RSS is its own
# ------------------------------------------------------------------------------------------------------------
_LOGPROBS_CHILD = r"""
import resource, sys, time, torch
sys.path.insert(0, {root!r})
import grpo
from transformers import Qwen2Config, Qwen2ForCausalLM
seq, vocab, hidden, chunk, device = {seq}, {vocab}, {hidden}, {chunk}, {device!r}
torch.manual_seed(0)
config = Qwen2Config(vocab_size=vocab, hidden_size=hidden, intermediate_size=hidden * {mlp_mult},
                     num_hidden_layers={layers}, num_attention_heads=max(1, hidden // 128), num_key_value_heads=max(1, hidden // 768),
                     head_dim=min(128, hidden), max_position_embeddings=seq + 1, tie_word_embeddings=False)
dtype = torch.bfloat16 if device == "cuda" else torch.float32
model = Qwen2ForCausalLM(config).to(device=device, dtype=dtype)
model.gradient_checkpointing_enable()
ids = torch.randint(0, vocab, (1, seq), device=device)
attention = torch.ones_like(ids)
def rss_gb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
if device == "cuda":
    torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats(); base = torch.cuda.memory_allocated() / 2**30
else:
    base = rss_gb()
start = time.perf_counter()
logp = grpo.token_logprobs(model, ids, attention, temperature=0.6, chunk_size=chunk)
logp.sum().backward()
if device == "cuda":
    torch.cuda.synchronize(); peak = torch.cuda.max_memory_allocated() / 2**30
else:
    peak = rss_gb()
print(f"RESULT {{peak - base:.3f}} {{time.perf_counter() - start:.2f}} {{base:.3f}}")
"""


def bench_logprobs(seq=32768, vocab=151936):
    print(f"== grpo.token_logprobs forward+backward, one sequence of {seq} tokens, vocab {vocab}")
    naive_gb = seq * vocab * 4 / 2**30
    print(f"naive: fp32 logits alone {naive_gb:.1f} GB (plus log-softmax output and its gradient: ~3x); not run")
    import torch
    configs = [("cpu", 64, 2, 4, c) for c in (256, 1024)]
    if torch.cuda.is_available():  # Qwen2.5-1.5B shape: hidden 1536, 28 layers, MLP 8960
        configs = [("cuda", 1536, 28, 8960 / 1536, 1024)]
    for device, hidden, layers, mlp_mult, chunk in configs:
        for length in ([seq] if device == "cpu" else [8192, 16384, 32768]):
            code = _LOGPROBS_CHILD.format(root=str(ROOT), seq=length, vocab=vocab, hidden=hidden, chunk=chunk,
                                          device=device, layers=layers, mlp_mult=mlp_mult)
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
            line = next((l for l in out.stdout.splitlines() if l.startswith("RESULT")), None)
            if line is None:
                print(f"{device} hidden {hidden} chunk {chunk} len {length}: failed\n{out.stderr[-2000:]}")
                continue
            extra, seconds, base = map(float, line.split()[1:])
            print(f"{device} hidden={hidden} layers={layers} chunk={chunk} tokens={length}: peak {extra:.2f} GB above "
                  f"the model ({base:.2f} GB), {seconds:.1f} s, {length / seconds:.0f} tokens/s")


# ------------------------------------------------------------------------------------------------------------
# Grader
# ------------------------------------------------------------------------------------------------------------
def _rows(name):
    import data
    rows = [p for p in data.load_dataset(name) if p.get("solution")]
    if name.startswith("gsm8k"):
        return [(p["solution"] + f"\n#### {p['answer']}", p["answer"]) for p in rows]
    return [(p["solution"], p["answer"]) for p in rows if "\\boxed" in p["solution"]]


def _math_verify(gold, response):
    from math_verify import parse, verify
    try:
        return bool(verify(parse("$" + gold + "$"), parse(response)))
    except Exception:  # noqa: BLE001 -- a crash counts as "not equal", as in a training loop
        return False


def bench_reward(sets=("math500", "minerva_math", "gsm8k_test", "aime2024")):
    from reward import is_equiv, math_reward, score_batch
    try:
        import math_verify  # noqa: F401
        have_mv = True
    except ImportError:
        have_mv = False
        print("math-verify not installed: `pip install math-verify` to compare")
    sys.path.insert(0, str(ROOT / "tests"))
    from test_reward import TABLE
    print(f"== equivalence table of tests/test_reward.py ({len(TABLE)} cases: expected verdicts)")
    ours = sum(is_equiv(p, g) == want for _, p, g, want in TABLE)
    print(f"ours        {ours}/{len(TABLE)} agree")
    if have_mv:
        wrong = [(p, g, want) for _, p, g, want in TABLE if _math_verify(g, "$" + p + "$") != want]
        false_pos = sum(1 for *_, want in wrong if not want)
        print(f"math-verify {len(TABLE) - len(wrong)}/{len(TABLE)} agree ({false_pos} false positives, "
              f"{len(wrong) - false_pos} false negatives); e.g. {wrong[:6]}")
    print("== mismatched pairs: each solution against the answer of problem i+7 (full parse path; lower is better)")
    for name in sets[:2]:
        rows = _rows(name)
        shifted = [(r, rows[(k + 7) % len(rows)][1]) for k, (r, _) in enumerate(rows)]
        shifted = [(r, g) for (r, g), (_, own) in zip(shifted, rows) if g.strip() != own.strip()]
        start = time.perf_counter()
        fp = sum(math_reward(r, g) for r, g in shifted)
        ours_s = time.perf_counter() - start
        line = f"{name}: ours {int(fp)}/{len(shifted)} rewarded, {len(shifted) / ours_s:.0f}/s in-process"
        if have_mv:
            start = time.perf_counter()
            mv = sum(_math_verify(g, r) for r, g in shifted)
            line += f"; math-verify {mv}/{len(shifted)} rewarded, {len(shifted) / (time.perf_counter() - start):.0f}/s"
        print(line)
    print("== own solution vs own answer (accuracy), throughput with 2 workers, per-item latency")
    parse = have_mv
    for name in sets:
        rows = _rows(name)
        responses, golds = [r for r, _ in rows], [g for _, g in rows]
        score_batch(responses[:4], golds[:4], workers=2)  # start the workers
        start = time.perf_counter()
        scores = score_batch(responses, golds, workers=2, timeout_s=10)
        elapsed = time.perf_counter() - start
        latencies = []
        for response, gold in rows:
            t = time.perf_counter()
            math_reward(response, gold)
            latencies.append(time.perf_counter() - t)
        q = statistics.quantiles(latencies, n=100)
        print(f"ours        {name:14s} acc {sum(scores) / len(scores):.4f} ({int(sum(scores))}/{len(scores)})  "
              f"{len(scores) / elapsed:7.0f}/s (2 workers)  p50 {1e3 * q[49]:.2f} ms  p99 {1e3 * q[98]:.2f} ms  "
              f"max {1e3 * max(latencies):.1f} ms")
        if parse:
            correct, latencies = 0, []
            for response, gold in rows:
                t = time.perf_counter()
                correct += _math_verify(gold, response)
                latencies.append(time.perf_counter() - t)
            q = statistics.quantiles(latencies, n=100)
            print(f"math-verify {name:14s} acc {correct / len(rows):.4f} ({correct}/{len(rows)})  "
                  f"{len(rows) / sum(latencies):7.0f}/s (1 process)  p50 {1e3 * q[49]:.2f} ms  "
                  f"p99 {1e3 * q[98]:.2f} ms  max {1e3 * max(latencies):.1f} ms")


# ------------------------------------------------------------------------------------------------------------
# Rollout
# ------------------------------------------------------------------------------------------------------------
def bench_rollout():
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    sys.path.insert(0, str(ROOT / "tests"))
    import tempfile
    import torch
    from transformers import AutoModelForCausalLM
    from data import render_prompt
    from rollout import HFEngine, VLLMEngine
    from tiny_model import build_tiny_model
    path = build_tiny_model(Path(tempfile.mkdtemp()) / "model")
    print("== rollout.py on the tiny model (2 layers, hidden 64)")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    for name, engine in (("vllm", VLLMEngine(path, dtype="float32", max_model_len=512)), ("hf", HFEngine(path))):
        prompts = [render_prompt(f"What is {k} + {k}?", engine.tokenizer, "chat") for k in range(32)]
        engine.generate(prompts[:2], n=2, max_tokens=8, seed=0)
        start = time.perf_counter()
        samples = engine.generate(prompts, n=8, max_tokens=128, seed=1, temperature=1.0)
        seconds = time.perf_counter() - start
        tokens = sum(len(s.response_ids) for s in samples)
        syncs = [engine.update_weights(model.state_dict().items()) for _ in range(5)]
        print(f"{name}: {tokens} tokens in {seconds:.2f} s = {tokens / seconds:.0f} tokens/s "
              f"(256 sequences); update_weights {statistics.median(syncs) * 1e3:.1f} ms (median of 5)")


# ------------------------------------------------------------------------------------------------------------
# Code reward (code_reward.py): throughput on real programs, and what the sandbox itself costs
# ------------------------------------------------------------------------------------------------------------
def bench_code(sets=("mbpp_train", "mbpp_valid", "mbpp_test"), repeats=40):
    import code_reward
    import data
    print(f"== code reward: every MBPP reference program graded through workers + sandbox (all must pass); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (other users' work slows all of this)")
    problems = [p for name in sets for p in data.load_dataset(name)]
    modes = ["bwrap", "rlimits"] if code_reward.sandbox_mode("auto") == "bwrap" else ["rlimits"]
    for mode in modes:
        responses = [f"```python\n{p['solution']}\n```" for p in problems]
        code_reward.score_code_batch(responses[:4], [p["tests"] for p in problems[:4]], workers=2, sandbox=mode)  # warm
        results, start = [], time.perf_counter()
        scores = code_reward.score_code_batch(responses, [p["tests"] for p in problems], workers=2, timeout_s=30.0,
                                              sandbox=mode, results=results)
        seconds = time.perf_counter() - start
        q = statistics.quantiles([r["seconds"] for r in results], n=100)
        print(f"{mode:8s} {len(problems)} programs in {seconds:.1f} s = {len(problems) / seconds:.1f} programs/s "
              f"(2 workers); per program p50 {1e3 * q[49]:.0f} ms, p99 {1e3 * q[98]:.0f} ms, "
              f"max {max(r['seconds'] for r in results):.2f} s; passed {int(sum(scores))}/{len(problems)}")
    print(f"== sandbox start-up per program (median and min of {repeats}, one at a time): a trivial program and one assert")
    trivial = ("def f():\n    return 1\n", {"kind": "functional", "asserts": ["assert f() == 1"]})
    for mode in modes:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            assert code_reward.run_tests(*trivial, mode=mode)["status"] == "passed"
            times.append(time.perf_counter() - start)
        print(f"{mode:8s} run_tests, whole item: {1e3 * statistics.median(times):.1f} ms (min {1e3 * min(times):.1f})")
    bare = [code_reward.sandbox_python(), "-I", "-S", "-c", "pass"]
    namespaces = code_reward._bwrap_argv([])
    namespaces = namespaces[:namespaces.index("--chdir") + 2] + ["/bin/true"]
    uid = code_reward.SANDBOX_UID_BASE + os.getpid()   # as the sandbox runs it: an unprivileged uid when root
    as_sandbox = {"user": uid, "group": uid, "extra_groups": []} if os.geteuid() == 0 else {}
    for name, argv, user in [("python -I -S -c pass (no sandbox)", bare, {}),
                             ("bwrap ... /bin/true (namespaces and mounts only)", namespaces, as_sandbox)]:
        if name.startswith("bwrap") and "bwrap" not in modes:
            continue
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            subprocess.run(argv, env={}, check=True, **user)
            times.append(time.perf_counter() - start)
        print(f"{name}: {1e3 * statistics.median(times):.1f} ms (min {1e3 * min(times):.1f})")
    print(f"load average now {os.getloadavg()[0]:.1f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["logprobs", "reward", "rollout", "code", "all"])
    args = parser.parse_args()
    if args.what in ("logprobs", "all"):
        bench_logprobs()
    if args.what in ("reward", "all"):
        bench_reward()
    if args.what in ("rollout", "all"):
        bench_rollout()
    if args.what in ("code", "all"):
        bench_code()


if __name__ == "__main__":
    main()
