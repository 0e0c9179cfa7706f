"""Benchmarks that print numbers (speed and memory targets live here, not in timed tests).

    python bench.py logprobs     peak memory / time of logprobs.token_logprobs fwd+bwd, 32K tokens x 152K vocab
    python bench.py grader       agreement with careful verdicts on real model outputs (per benchmark, per answer
                                 format, false positives and negatives apart), the adversarial table, items/s with
                                 2 workers, per-item p50/p99/max; the same for math-verify when it is installed
                                 (pip install math-verify==0.9.0); --math_verify_repo DIR adds its published cases
    python bench.py step         (GPU) one training step of a 1.5B-shaped model at 4K and 8K response tokens
    python bench.py rollout      tiny-model vLLM CPU generation tokens/s and seconds per update_weights
    python bench.py pack         trainer tokens/CPU s and padding share, packed vs padded micro-batches, at GRPO's
                                 real response lengths (uniform 1-8K, long-tailed like R1-style RL at an 8K cap),
                                 a 1-layer Qwen2 with Qwen2.5-1.5B's FLOP mix, CPU (~9 minutes)
    python bench.py code         code reward: MBPP reference programs graded/s (2 workers), p50/p99 per program,
                                 sandbox start-up cost per program (bwrap vs the rlimits fallback vs bare python)
    python bench.py precision    FSDP2 parameter dtype (issue 30, item 6): loss, gradient and alignment of fp32 vs
                                 bf16 parameters under bf16 autocast, against exact fp32 (CPU, ~1 minute)
    python bench.py gpu ...      the GPU proof (issue 41): the device plan, the slim vLLM kit and the two calls'
                                 phases live in bench_gpu.py (`python bench.py gpu plan` = `python
                                 bench_gpu.py plan`)
    python bench.py memory       bytes per parameter of full fine-tuning and of LoRA (ranks 1-128) from the real
                                 module sizes of Qwen2.5-1.5B / 7B shapes built on the meta device (distributed.py)
    python bench.py all
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_gpu import layer_params, response_length

ROOT = Path(__file__).resolve().parent


# ------------------------------------------------------------------------------------------------------------
# token_logprobs memory: each configuration runs in a fresh process so that its peak RSS is its own
# ------------------------------------------------------------------------------------------------------------
_LOGPROBS_CHILD = r"""
import resource, sys, time, torch
sys.path.insert(0, {root!r})
import logprobs
from transformers import Qwen2Config, Qwen2ForCausalLM
seq, vocab, hidden, chunk, device = {seq}, {vocab}, {hidden}, {chunk}, {device!r}
torch.manual_seed(0)
config = Qwen2Config(vocab_size=vocab, hidden_size=hidden, intermediate_size=int(hidden * {mlp_mult}),
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
logp = logprobs.token_logprobs(model, ids, attention, temperature=0.6, chunk_size=chunk)
logp.sum().backward()
if device == "cuda":
    torch.cuda.synchronize(); peak = torch.cuda.max_memory_allocated() / 2**30
else:
    peak = rss_gb()
print(f"RESULT {{peak - base:.3f}} {{time.perf_counter() - start:.2f}} {{base:.3f}}")
"""


def bench_logprobs(seq=32768, vocab=151936):
    print(f"== logprobs.token_logprobs forward+backward, one sequence of {seq} tokens, vocab {vocab}")
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
# One training step (train.update_policy) on a model of a real size: time and peak memory per phase
# ------------------------------------------------------------------------------------------------------------
def bench_step(*, response_lens=(4096, 8192), samples_per_step=32, prompt_len=512, hidden=1536, layers=28,
               mlp=8960, vocab=151936, device="cuda"):
    """train.py's update (fp32 master weights, bf16 autocast, gradient checkpointing, chunked log-probs, KL to a
    bf16 reference, AdamW) on random weights shaped like Qwen2.5-1.5B, and the weight gather of the sync
    (full_weights cast to bf16; the vLLM push itself needs vLLM on the GPU). Needs a GPU."""
    import tempfile

    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    import distributed
    import train
    from data import Sample
    if device == "cuda" and not torch.cuda.is_available():
        print("bench.py step: needs a GPU (the figures are for a 1.5B-parameter model)")
        return
    cuda = device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    path = Path(tempfile.mkdtemp()) / "model"
    config = Qwen2Config(vocab_size=vocab, hidden_size=hidden, intermediate_size=mlp, num_hidden_layers=layers,
                         num_attention_heads=max(1, hidden // 128), num_key_value_heads=max(1, hidden // 768),
                         max_position_embeddings=32768,
                         tie_word_embeddings=True)
    Qwen2ForCausalLM(config).save_pretrained(path)
    device = torch.device(device)
    for length in response_lens:
        args = train.parse_args(["--model", str(path), "--max_response_len", str(length), "--eval_data", "",
                                 "--dry_run"])
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        policy = distributed.load_model(str(path), device, torch.float32, gradient_checkpointing=True)
        policy.train()
        reference = distributed.load_model(str(path), device, torch.bfloat16).eval().requires_grad_(False)
        optimizer = torch.optim.AdamW(policy.parameters(), lr=args.lr, betas=(0.9, 0.999))
        resident = torch.cuda.memory_allocated() / 2**30 if cuda else 0.0
        g = torch.Generator().manual_seed(0)
        samples = []
        for k in range(samples_per_step):  # lengths spread like a real group: 50% to 100% of the limit
            n = int(length * (0.5 + 0.5 * (k % 8) / 7))
            ids = torch.randint(0, vocab, (prompt_len + n,), generator=g).tolist()
            samples.append(Sample(ids[:prompt_len], ids[prompt_len:], [-1.0] * n, "stop", ""))
        advantages = torch.randn(samples_per_step, generator=g)
        everyone = list(range(samples_per_step))
        autocast = torch.autocast(device.type, dtype=torch.bfloat16)
        times = []
        for step in range(3):  # the first is a warm-up
            sync()
            start = time.perf_counter()
            train.update_policy(policy, reference, optimizer, samples, advantages, scored=everyone, trained=everyone,
                                args=args, step=step, device=device, autocast=autocast, pad_id=0)
            sync()
            times.append(time.perf_counter() - start)
        peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else 0.0
        start = time.perf_counter()
        gathered = sum(t.numel() for _, t in distributed.full_weights(policy, dtype=torch.bfloat16))
        sync()
        gather_s = time.perf_counter() - start
        tokens = sum(len(s.prompt_ids) + len(s.response_ids) for s in samples)
        print(f"step: {samples_per_step} samples x (prompt {prompt_len} + response <= {length}) = {tokens} tokens: "
              f"update {statistics.median(times[1:]):.2f} s ({tokens / statistics.median(times[1:]):.0f} tokens/s), "
              f"peak {peak:.1f} GB (resident policy fp32 + AdamW-to-be + bf16 reference {resident:.1f} GB); "
              f"bf16 weight gather for the push {gather_s * 1e3:.0f} ms ({gathered / 1e9:.2f} B params)")
        del policy, reference, optimizer
        if cuda:
            torch.cuda.empty_cache()


# ------------------------------------------------------------------------------------------------------------
# Packed vs padded micro-batches (issue 23): trainer tokens/s and padding share at GRPO's real response lengths
# ------------------------------------------------------------------------------------------------------------
PACK_CAP = 8192            # response cap: the 1-8K
PACK_STEP = (64, 8)        # prompts x responses per step: recipes/single_gpu_1p5b.sh (--batch_size 64, group 8)
# Qwen2.5 configs (hidden, layers, heads, kv heads, head_dim, MLP, vocab): the bench model copies one's FLOP mix
QWEN = {"qwen2.5-0.5b": (896, 24, 14, 2, 64, 4864, 151936), "qwen2.5-1.5b": (1536, 28, 12, 2, 128, 8960, 151936),
        "qwen2.5-7b": (3584, 28, 28, 4, 128, 18944, 152064)}


def _pack_lengths(kind, rng, cap=PACK_CAP):
    """(prompt, response) lengths of one GRPO step, PACK_STEP = 64 prompts x 8 responses (the 8 share a prompt;
    prompts 64-512 tokens, a math problem in a chat template). Responses:

    uniform      uniform in [1024, cap]: the issue's 1-8K.
    long-tailed  R1-style reasoning RL at an 8K cap (DeepScaleR's 8K stage; docs/modules.md, bench.py): 5%
                 truncated at the cap, the rest log-normal (median 3,170, sigma 0.75, redrawn above the cap).
    all-at-cap   every response at the cap (the control: only the prompts differ)."""
    out = []
    for _ in range(PACK_STEP[0]):
        prompt = rng.randint(64, 512)
        for _ in range(PACK_STEP[1]):
            response = response_length(kind, rng, cap)
            out.append((prompt, response))
    return out


def bench_pack(kinds=("long-tailed", "uniform"), like="qwen2.5-1.5b", fraction=1 / 20, repeats=1, threads=1):
    """Trainer throughput, packed vs padded micro-batches, at GRPO's real response lengths (issue 23), on CPU.

    Work: forward + backward of the GRPO loss (logprobs.token_logprobs with the entropy as a metric, policy_loss;
    fp32, no gradient checkpointing) over one step's micro-batches, two ways at the same token budget, train.py's
    default --micro_batch_tokens 32768 and recipes/single_gpu_1p5b.sh's 16384:
      padded  batching.micro_batches over the step's 512 samples (length-sorted, count x longest <= budget), rows
              right-padded, transformers' sdpa with its [B, 1, S, S] mask: what `--packing 0` runs
      packed  packing.balanced_micro_batches (real tokens <= budget), one row each, attention per sequence
              (packing's "sdpa_varlen"): what `--packing 1` runs on CPU
    Timed: a systematic 1-in-1/fraction sample of each way's micro-batches (evenly spaced through its order, so
    short and long ones alike; a whole step is ~2M tokens, ~20 CPU-minutes a way), the two ways interleaved
    micro-batch by micro-batch (each one's minimum over `repeats` runs when > 1), in CPU seconds of this process on
    `threads` threads (1: CPU time is then the compute itself, which other jobs on a shared machine barely move).
    tokens/CPU s counts real tokens. The padding share is the whole step's.

    The model: Qwen2 architecture, 1 layer, one 64-dim attention head, sized so that its per-token FLOPs split
    between attention, the other matmuls and the output head as in `like` (Qwen2.5-1.5B by default: the recipes'
    model; why not a narrow toy: docs/modules.md, bench.py). Useful FLOPs per step (the same for both ways; len_i = prompt + response of sequence i):
        6 * P_backbone * T_real + 6 * P_head * T_scored + 6 * layers * heads * head_dim * sum_i len_i^2
    (the last: causal attention, QK^T and AV at len^2 / 2 * heads * head_dim multiply-adds each, x3 for backward)."""
    import random

    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    import batching
    import grpo
    import logprobs
    import packing
    from data import Sample
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    q_hidden, q_layers, q_heads, q_kv, q_head_dim, q_mlp, q_vocab = QWEN[like]
    q_layer = layer_params(q_hidden, q_heads, q_kv, q_head_dim, q_mlp)
    q_head_share = q_hidden * q_vocab / (q_layers * q_layer + q_hidden * q_vocab)
    hidden, head_dim = 320, 64
    layer = round(head_dim * q_layer / (q_heads * q_head_dim))        # same attention : matmul ratio per layer
    mlp = round((layer - layer_params(hidden, 1, 1, head_dim, 0)) / (3 * hidden))
    vocab = round(q_head_share / (1 - q_head_share) * layer_params(hidden, 1, 1, head_dim, mlp) / hidden)
    config = Qwen2Config(vocab_size=vocab, hidden_size=hidden, intermediate_size=mlp, num_hidden_layers=1,
                         num_attention_heads=1, num_key_value_heads=1, head_dim=head_dim,
                         max_position_embeddings=2 * PACK_CAP, tie_word_embeddings=False)
    model = Qwen2ForCausalLM(config)
    p_head = model.lm_head.weight.numel()
    p_backbone = layer_params(hidden, 1, 1, head_dim, mlp)
    print(f"== packed vs padded micro-batches: Qwen2 with {like}'s FLOP mix (hidden {hidden}, 1 layer, 1 head of "
          f"{head_dim}, MLP {mlp}, vocab {vocab}: {p_backbone / 1e6:.2f}M matmul + {p_head / 1e6:.2f}M head params), "
          f"fp32 CPU, {torch.get_num_threads()} thread(s); {PACK_STEP[0]} x {PACK_STEP[1]} samples/step, prompt 64-512 "
          f"+ response <= {PACK_CAP}; 1 in {round(1 / fraction)} micro-batches timed, min of {repeats}")
    print("   FLOPs = 6 P_backbone T_real + 6 P_head T_scored + 6 layers heads head_dim sum(len^2)")

    def run(mb, seqs, advantages, n_scored, packed):
        """One micro-batch's forward + backward; CPU seconds."""
        model.set_attn_implementation(packing.VARLEN_ATTENTION if packed else "sdpa")
        start = time.process_time()
        ids, attention, mask, _ = batching.collate([seqs[i] for i in mb], 0, "cpu")
        logp, _ = logprobs.token_logprobs(model, ids, attention, with_entropy=True, score_mask=mask, packed=packed)
        loss, _ = grpo.policy_loss(logp, logp.detach(), advantages[mb], mask, num_tokens=n_scored)
        loss.backward()
        seconds = time.process_time() - start
        model.zero_grad(set_to_none=True)
        return seconds

    def sample(micro):
        count = max(1, round(len(micro) * fraction))
        return [micro[int((j + 0.5) * len(micro) / count)] for j in range(count)]

    for kind in kinds:
        rng = random.Random(0)
        seqs = []
        for prompt, response in _pack_lengths(kind, rng):
            ids = [rng.randrange(vocab) for _ in range(prompt + response)]
            seqs.append(Sample(ids[:prompt], ids[prompt:], [0.0] * response, "stop", ""))
        n = len(seqs)
        advantages = torch.randn(n)
        lengths = [len(s.prompt_ids) + len(s.response_ids) for s in seqs]
        responses = sorted(len(s.response_ids) for s in seqs)
        real, scored = sum(lengths), sum(responses)

        def flops(idx):
            t = sum(lengths[i] for i in idx)
            s = sum(len(seqs[i].response_ids) for i in idx)
            return 6 * p_backbone * t + 6 * p_head * s + 6 * head_dim * sum(lengths[i] ** 2 for i in idx)

        attention_share = 6 * head_dim * sum(x * x for x in lengths) / flops(range(n))
        print(f"{kind}: responses mean {scored / n:.0f}, median {responses[n // 2]}, 5-95% {responses[n // 20]}-"
              f"{responses[-n // 20]}, at the cap {sum(r == PACK_CAP for r in responses) / n:.0%}; {real} real tokens; "
              f"attention {attention_share:.0%} of the useful FLOPs")
        for budget in (32768, 16384):
            ways = {"padded": (batching.micro_batches(list(range(n)), lengths, budget), False),
                    "packed": ([mb for mb in packing.balanced_micro_batches(lengths, budget)[0] if mb], True)}
            padded_tokens = sum(len(mb) * max(lengths[i] for i in mb) for mb in ways["padded"][0])
            timed = {name: sample(micro) for name, (micro, _) in ways.items()}
            seconds = {name: [float("inf")] * len(timed[name]) for name in ways}
            for _ in range(repeats):
                for j in range(max(map(len, timed.values()))):
                    for name, (_, packed) in ways.items():
                        if j < len(timed[name]):
                            seconds[name][j] = min(seconds[name][j], run(timed[name][j], seqs, advantages, scored, packed))
            print(f"  token budget {budget}:")
            rate = {}
            for name, (micro, _) in ways.items():
                idx = [i for mb in timed[name] for i in mb]
                total = sum(seconds[name])
                rate[name] = sum(lengths[i] for i in idx) / total
                share = 1 - real / padded_tokens if name == "padded" else 0.0
                print(f"    {name}: {len(micro):3d} micro-batches ({len(timed[name])} timed, {len(idx)} sequences), "
                      f"padding {100 * share:4.1f}%: {total:6.1f} CPU s, {rate[name]:5.0f} tokens/CPU s, "
                      f"{flops(idx) / total / 1e9:4.1f} useful GFLOP/CPU s")
            print(f"    packed / padded tokens per CPU second: {rate['packed'] / rate['padded']:.2f}x")


# ------------------------------------------------------------------------------------------------------------
# Grader: agreement with careful verdicts on real model outputs, adversarial table, speed; vs math-verify
# ------------------------------------------------------------------------------------------------------------
DEV_SET = ROOT.parent / "shared" / "data" / "grader_dev" / "real_outputs_dev.jsonl.gz"


def _response_format(text):
    """How a response states its answer (for the per-format table): json, long-cot, boxed, ####, A:, free text."""
    if '"answer"' in text:
        return "json field"
    if "<|begin_of_thought|>" in text or "<think>" in text or "</think>" in text:
        return "long CoT"
    if "\\boxed" in text or "\\fbox" in text:
        return "boxed"
    if "####" in text:
        return "####"
    if "\nA:" in text or text.startswith("A:"):
        return "A:"
    return "free text"


def _math_verify(gold, response):
    """math-verify 0.9's verdict, the way its README grades: gold parsed as LaTeX, the response as free text."""
    from math_verify import parse, verify
    try:
        parsed = parse("$" + gold + "$") or parse("\\boxed{" + gold + "}")
        return bool(verify(parsed, parse(response)))
    except Exception:  # noqa: BLE001 -- a crash counts as "not equal", as in a training loop
        return False


def _timed_math_verify(pair):
    start = time.perf_counter()
    verdict = _math_verify(*pair)
    return verdict, time.perf_counter() - start


def _have_math_verify():
    try:
        import math_verify  # noqa: F401
        return True
    except ImportError:
        print("(math-verify not installed: `pip install math-verify==0.9.0` in this environment to compare)")
        return False


def _agreement_table(rows, verdicts, key):
    """Per group: n, then for each grader: agreement %, false positives, false negatives."""
    groups = {}
    for row, row_verdicts in zip(rows, zip(*verdicts.values())):
        for name in (key(row), "ALL"):
            g = groups.setdefault(name, {"n": 0, **{k: [0, 0, 0] for k in verdicts}})
            g["n"] += 1
            for grader, v in zip(verdicts, row_verdicts):
                g[grader][0] += v == row["label"]
                g[grader][1] += v and not row["label"]
                g[grader][2] += (not v) and row["label"]
    header = "| group | n | " + " | ".join(f"{k} agree | FP | FN" for k in verdicts) + " |"
    print(header)
    print("|---|---:|" + "---:|---:|---:|" * len(verdicts))
    for name, g in sorted(groups.items(), key=lambda kv: (kv[0] == "ALL", kv[0])):
        cells = " | ".join(f"{100 * g[k][0] / g['n']:.1f} | {g[k][1]} | {g[k][2]}" for k in verdicts)
        print(f"| {name} | {g['n']} | {cells} |")


def bench_grader(dev=DEV_SET, math_verify_repo=None, show_disagreements=False, variants=None):
    from multiprocessing import Pool

    import reward
    have_mv = _have_math_verify()
    sys.path.insert(0, str(ROOT / "tests"))
    from grader_cases import EQUIV, RESPONSES

    # 1. real model outputs with careful verdicts
    if Path(dev).exists():
        import gzip
        with gzip.open(dev, "rt", encoding="utf-8") as f:
            rows = [json.loads(line) for line in f]
        responses, golds = [r["response"] for r in rows], [r["gold"] for r in rows]
        print(f"== {len(rows)} real model responses with careful verdicts ({dev})")
        reward.score_batch(responses[:8], golds[:8], workers=2)  # start the workers
        stats = {}
        start = time.perf_counter()
        ours = reward.score_batch(responses, golds, workers=2, timeout_s=reward.DEFAULT_TIMEOUT_S, stats=stats)
        ours_rate = len(rows) / (time.perf_counter() - start)
        latencies = []
        for response, gold in zip(responses, golds):
            t = time.perf_counter()
            reward.math_reward(response, gold)  # in-process (the main thread's alarm bounds it)
            latencies.append(time.perf_counter() - t)
        verdicts = {"ours": [s == 1.0 for s in ours]}
        if have_mv:
            start = time.perf_counter()
            with Pool(2) as pool:
                mv = pool.map(_timed_math_verify, list(zip(golds, responses)), chunksize=16)
            mv_rate = len(rows) / (time.perf_counter() - start)
            verdicts["math-verify"] = [v for v, _ in mv]
        print("\nby benchmark:")
        _agreement_table(rows, verdicts, lambda r: r["benchmark"].split(" (")[0])
        print("\nby answer format:")
        _agreement_table(rows, verdicts, lambda r: _response_format(r["response"]))
        if show_disagreements:
            print("\ndisagreements with the verdicts (row, benchmark, gold, extracted answer, verdict, ours):")
            for k, (row, v) in enumerate(zip(rows, verdicts["ours"])):
                if v != row["label"]:
                    print(f"  {k:5d} {row['benchmark'][:14]:14s} gold {row['gold'][:40]!r:44s} answer "
                          f"{(reward.extract_answer(row['response']) or '')[:50]!r:54s} verdict {row['label']!s:5s} ours {v}")
        q = statistics.quantiles(latencies, n=100)
        print(f"\nspeed: ours {ours_rate:.0f} items/s with 2 worker processes; per item p50 {1e3 * q[49]:.2f} ms, "
              f"p99 {1e3 * q[98]:.2f} ms, max {1e3 * max(latencies):.1f} ms (in-process); timeouts {stats['timeouts']}, "
              f"errors {stats['errors']}")
        if have_mv:
            mq = statistics.quantiles([t for _, t in mv], n=100)
            print(f"       math-verify {mv_rate:.0f} items/s with 2 processes; per item p50 {1e3 * mq[49]:.2f} ms, "
                  f"p99 {1e3 * mq[98]:.2f} ms, max {1e3 * max(t for _, t in mv):.1f} ms  ->  ours/math-verify "
                  f"throughput {ours_rate / mv_rate:.1f}x")
    else:
        print(f"(no dev set at {dev}: pass --dev PATH)")

    # 2. the adversarial table (tests/grader_cases.py)
    table = [(p, g, want) for rows_ in EQUIV.values() for p, g, want in rows_]
    print(f"\n== adversarial table: {len(table)} answer pairs ({sum(not w for *_, w in table)} wrong answers that look "
          f"right) + {len(RESPONSES)} whole responses")
    graders = {"ours": lambda g, r, question=None: reward.math_reward(r, g, question=question) == 1.0}
    if have_mv:
        graders["math-verify"] = lambda g, r, question=None: _math_verify(g, r)  # (math-verify reads no question)
    for name, grade in graders.items():
        pairs = [(g, "$" + p + "$" if name == "math-verify" else "\\boxed{" + p + "}", want) for p, g, want in table]
        pairs += [(g, r, want == 1.0) for r, g, want in RESPONSES]
        got = [grade(g, r) for g, r, _ in pairs]
        fp = sum(v and not w for v, (_, _, w) in zip(got, pairs))
        fn = sum(w and not v for v, (_, _, w) in zip(got, pairs))
        print(f"{name:12s} {len(pairs) - fp - fn}/{len(pairs)} agree: {fp} wrong answers rewarded, {fn} right answers "
              f"refused")

    # 3. other graders' published test cases (math-verify's own suite), when a checkout is given
    if math_verify_repo:
        cases = _published_cases(Path(math_verify_repo))
        print(f"\n== math-verify's published test cases ({len(cases)} from {math_verify_repo}/tests)")
        for name, grade in graders.items():
            got = [grade(g, p) for g, p, _ in cases]
            fp = sum(v and not want for v, (_, _, want) in zip(got, cases))
            fn = sum(want and not v for v, (_, _, want) in zip(got, cases))
            print(f"{name:12s} {len(cases) - fp - fn}/{len(cases)} agree with the expected verdict: {fp} wrong answers "
                  f"rewarded, {fn} right answers refused")

    # 3b. variants of each family written by someone who had not read the grader
    if variants:
        with open(variants, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        print(f"\n== independent variants ({len(rows)} from {variants}): agreement per family (wrong answers "
              f"rewarded / right answers refused)")
        verdicts = {name: [grade(r["gold"], r["response"], question=r.get("question")) for r in rows]
                    for name, grade in graders.items()}  # a row's `question` reaches the grader, as score_problems passes it
        for r in rows:
            r["label"] = bool(r["expected"])
        _agreement_table(rows, verdicts, lambda r: r["family"])

    # 4. secondary: reference solutions against their own answers, and against another problem's answer
    print("\n== self-consistency (secondary): reference solution vs its own gold; vs the gold of problem i+7")
    for name in ("math500", "minerva_math", "gsm8k_test", "aime2024"):
        pairs = _solution_rows(name)
        own = reward.score_batch([r for r, _ in pairs], [g for _, g in pairs], workers=2, timeout_s=10)
        shifted = [(r, pairs[(k + 7) % len(pairs)][1]) for k, (r, g) in enumerate(pairs)]
        shifted = [(r, g) for (r, g), (_, mine) in zip(shifted, pairs) if g.strip() != mine.strip()]
        other = reward.score_batch([r for r, _ in shifted], [g for _, g in shifted], workers=2, timeout_s=10)
        print(f"{name:14s} own gold {int(sum(own))}/{len(own)}; another problem's gold rewarded {int(sum(other))}/{len(other)}")


def _solution_rows(name):
    import data
    rows = [p for p in data.load_dataset(name) if p.get("solution")]
    if name.startswith("gsm8k"):
        return [(p["solution"] + f"\n#### {p['answer']}", p["answer"]) for p in rows]
    return [(p["solution"], p["answer"]) for p in rows if "\\boxed" in p["solution"]]


def _literal(node):
    """ast.literal_eval, plus the one computed form these tables use: an f-string of `math.<function>(<numbers>)`
    with a format spec (`f"{math.sqrt(17):.15f}"`), formatted here without running the file."""
    import ast
    import math
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(str(part.value))
                continue
            call = part.value
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and isinstance(call.func.value, ast.Name) and call.func.value.id == "math"
                    and callable(getattr(math, call.func.attr, None))
                    and all(isinstance(a, ast.Constant) and isinstance(a.value, (int, float)) for a in call.args)):
                raise ValueError("not a literal")
            spec = _literal(part.format_spec) if part.format_spec is not None else ""
            out.append(format(getattr(math, call.func.attr)(*[a.value for a in call.args]), spec))
        return "".join(out)
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_literal(x) for x in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    return ast.literal_eval(node)


def _published_cases(repo):
    """(gold, response, expected) from the pytest parametrize tables of a Math-Verify checkout (read with ast,
    never imported). Golds that are whole solutions are reduced to their boxed answer. Rows that set a flag away
    from verify()'s defaults (strict=False, allow_set_relation_comp=True) are left out: math-verify is run with its
    defaults. Tables without a gold and a pred column (test_string_extraction: parse() output) are not verdicts."""
    import ast
    import reward
    cases = []
    for path in sorted((repo / "tests").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            for deco in getattr(node, "decorator_list", []):
                if not (isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") == "parametrize"):
                    continue
                try:
                    names = [n.strip() for n in ast.literal_eval(deco.args[0]).split(",")]
                    values = _literal(deco.args[1])
                except (ValueError, SyntaxError, AttributeError, IndexError, TypeError):
                    continue
                for value in values:
                    row = dict(zip(names, value))
                    if "gold" not in row or "pred" not in row or row.get("strict") is False \
                            or row.get("allow_set_relation_comp"):
                        continue
                    gold = row["gold"]
                    if "\\boxed" in gold or len(gold) > 150:
                        gold = reward.extract_answer(gold, strict=True) or gold
                    cases.append((gold, row["pred"], bool(row.get("expected", row.get("result")))))
    return cases


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
    from hf_engine import HFEngine
    from rollout import VLLMEngine
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
# FSDP2 mixed precision (issue 30, item 6): what bf16 parameters change in the loss, the gradient and the
# sampler/trainer alignment, against today's fp32 parameters under bf16 autocast
# ------------------------------------------------------------------------------------------------------------
def bench_precision(seeds=(0, 1), hidden=128, layers=4, vocab=2048, samples=12):
    """One process, CPU, per seed: a random Qwen2 (hidden 128, 4 layers) and 12 random sequences of 48-192 tokens
    (responses masked after the prompt), GRPO's token-mean policy loss with random advantages, forward + backward
    three ways:
        exact   fp32 weights, fp32 compute                              (the reference)
        fp32    fp32 weights under bf16 autocast                        (train.py today: --fsdp_param_dtype float32)
        bf16    bf16 copies of the weights under bf16 autocast, gradients cast to fp32
                                                                        (FSDP2 MixedPrecisionPolicy(bf16, fp32))
    Per rank, FSDP2's policy computes exactly the bf16 row (it all-gathers the bf16 copy, casts gradients to fp32
    for the reduce-scatter), so one process measures it for any number of ranks. Alignment: exp(mean |dlogp|)
    against the model run wholly in bf16 (no fp32 anywhere), the stand-in here for vLLM's bf16 sampler."""
    import copy

    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    import grpo
    import logprobs
    print("== FSDP2 parameter dtype: loss, gradient and alignment of fp32 vs bf16 parameters (CPU, 1 thread)")
    torch.set_num_threads(1)
    rows = []
    for seed in seeds:
        torch.manual_seed(seed)
        config = Qwen2Config(vocab_size=vocab, hidden_size=hidden, intermediate_size=3 * hidden,
                             num_hidden_layers=layers, num_attention_heads=hidden // 32, num_key_value_heads=2,
                             head_dim=32, tie_word_embeddings=False)
        model = Qwen2ForCausalLM(config).float()
        g = torch.Generator().manual_seed(seed)
        lengths = torch.randint(48, 192, (samples,), generator=g).tolist()
        width = max(lengths)
        ids = torch.randint(0, vocab, (samples, width), generator=g)
        attention = (torch.arange(width)[None] < torch.tensor(lengths)[:, None]).long()
        mask = (attention[:, 1:] * attention[:, :-1]).float()
        mask[:, :32] = 0                                                   # the prompt
        advantages = torch.randn(samples, generator=g)
        norm = dict(num_tokens=mask.sum().item(), num_seqs=samples, max_len=width)

        def run(net, autocast):
            net.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                logp = logprobs.token_logprobs(net, ids, attention, temperature=1.0, score_mask=mask)
            loss, _ = grpo.policy_loss(logp, logp.detach(), advantages, mask, clip_low=0.2, clip_high=0.2,
                                       loss_agg="token-mean", **norm)
            loss = loss - 0.01 * (logp * mask).sum() / norm["num_tokens"]   # a likelihood term: the policy loss's
            loss.backward()                                                 # value is -mean(A) at ratio 1
            grad = torch.cat([p.grad.double().reshape(-1) for p in net.parameters()])
            return loss.item(), grad, logp.detach().float()

        exact = run(model, False)
        fp32 = run(model, True)
        bf16_model = copy.deepcopy(model).to(torch.bfloat16)
        bf16 = run(bf16_model, True)
        with torch.no_grad():
            sampler = logprobs.token_logprobs(bf16_model, ids, attention, temperature=1.0, score_mask=mask).float()
        m = mask.bool()
        for name, (loss, grad, logp) in (("fp32", fp32), ("bf16", bf16)):
            rows.append((seed, name, abs(loss - exact[0]), ((grad - exact[1]).norm() / exact[1].norm()).item(),
                         torch.nn.functional.cosine_similarity(grad, exact[1], dim=0).item(),
                         math.exp((logp - exact[2])[m].abs().mean().item()),
                         math.exp((logp - sampler)[m].abs().mean().item())))
    print("seed  params  |loss - exact|  |g - g_exact|/|g_exact|  cos(g, g_exact)  align vs exact  align vs bf16 sampler")
    for seed, name, dloss, gerr, cos, align_exact, align_sampler in rows:
        print(f"{seed:>4}  {name:6s}  {dloss:14.2e}  {gerr:23.4f}  {cos:15.6f}  {align_exact:14.5f}  {align_sampler:21.5f}")


# ------------------------------------------------------------------------------------------------------------
# Code reward (code_reward.py): throughput on real programs, and what the sandbox itself costs
# ------------------------------------------------------------------------------------------------------------
def bench_code(sets=("mbpp_train", "mbpp_valid", "mbpp_test"), repeats=40):
    import code_reward
    import data
    import sandbox
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
            assert code_reward.score_code_batch([f"```python\n{trivial[0]}```"], [trivial[1]], workers=1,
                                                sandbox=mode) == [1.0]
            times.append(time.perf_counter() - start)
        print(f"{mode:8s} one item through a grading worker: {1e3 * statistics.median(times):.1f} ms (min {1e3 * min(times):.1f})")
    bare = [sandbox.sandbox_python(), "-I", "-S", "-c", "pass"]
    namespaces = sandbox.bwrap_argv([])
    namespaces = namespaces[:namespaces.index("--chdir") + 2] + ["/bin/true"]
    uid = sandbox.SANDBOX_UID_BASE + os.getpid()   # as the sandbox runs it: an unprivileged uid when root
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


# ------------------------------------------------------------------------------------------------------------
# memory of the trained state: full fine-tuning vs LoRA, from real module sizes (meta device: no memory, no weights)
# ------------------------------------------------------------------------------------------------------------
def bench_memory(ranks=(1, 8, 32, 128), gpus=(1, 8), kl_reference=True, like=("qwen2.5-1.5b", "qwen2.5-7b"),
                 quiet=False):
    """What the trainer holds for the policy (and the KL reference) before activations and vLLM, for Qwen2.5-1.5B
    and 7B shapes (1.5B: tied embeddings, as Qwen2.5-1.5B; 7B: untied), built with transformers on the meta device
    and wrapped by lora.wrapper exactly as train.py does. Bytes are each tensor's numel x element size:
        full    fp32 weights + fp32 gradients + AdamW's 2 fp32 moments, + a bf16 reference copy when --kl_coef > 0
        LoRA    the frozen base in bf16 (no gradient, no Adam) + fp32 adapters with their gradients and 2 moments;
                the reference is the base itself (adapters off): nothing more
    Printed per base parameter and in GB per GPU with FSDP2 over N GPUs (everything shards evenly)."""
    import types

    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    import lora
    rows = []
    for name in like:
        tied = name != "qwen2.5-7b"
        hidden, layers, heads, kv, head_dim, mlp, vocab = QWEN[name]
        config = Qwen2Config(vocab_size=vocab, hidden_size=hidden, intermediate_size=mlp, num_hidden_layers=layers,
                             num_attention_heads=heads, num_key_value_heads=kv, head_dim=head_dim,
                             tie_word_embeddings=tied)
        with torch.device("meta"):
            base = Qwen2ForCausalLM(config).to(torch.bfloat16)
        n = sum(p.numel() for p in base.parameters())
        full = n * (4 + 4 + 8) + (n * 2 if kl_reference else 0)
        rows.append((name, n, "full fine-tuning" + (" + bf16 reference" if kl_reference else ""), full))
        for rank in ranks:
            with torch.device("meta"):
                model = Qwen2ForCausalLM(config).to(torch.bfloat16)
            model = lora.wrapper(types.SimpleNamespace(lora_rank=rank, lora_alpha=32, lora_targets=None, seed=0))(model)
            frozen = sum(p.numel() * p.element_size() for p in model.parameters() if not p.requires_grad)
            adapters = [p for p in model.parameters() if p.requires_grad]
            assert all(p.dtype == torch.float32 for p in adapters)
            trained = sum(p.numel() for p in adapters)
            rows.append((name, n, f"LoRA rank {rank} ({trained / 1e6:.1f}M adapter parameters)",
                         frozen + trained * (4 + 4 + 8)))
    if quiet:
        return rows
    print("| model | mode | bytes / parameter | " + " | ".join(f"GB per GPU, {g} GPU{'s' * (g > 1)}" for g in gpus)
          + " |\n|---|---|---:|" + "---:|" * len(gpus))
    for name, n, mode, total in rows:
        print(f"| {name} ({n / 1e9:.2f}B) | {mode} | {total / n:.2f} | "
              + " | ".join(f"{total / g / 1e9:.1f}" for g in gpus) + " |")
    return rows


def check_memory(like, lora_rank, gpu_gb, vllm_share, micro_batch_tokens, *, kl_reference=True, chunk=256):
    """A recipe's memory plan on one GPU, checked (recipes/single_gpu_7b_lora.sh runs it in its dry run). The
    trained state is exact (bench_memory's module sizes); activations are an estimate of train.py with gradient
    checkpointing: each layer's bf16 input kept for backward (tokens x hidden x 2 B x layers), one layer recomputed
    (tokens x (3 x mlp + 6 x hidden) x 2 B), the output head's chunks (chunk x vocab x 4 B x 6, measured by
    bench.py logprobs). vLLM sleeps (level 2) while the trainer steps, so the peak is the larger of state + vLLM's
    share (generation) and state + activations (update). Exits 1 when a peak passes 95% of the GPU."""
    rows = bench_memory((lora_rank,) if lora_rank else (), (1,), kl_reference, (like,), quiet=True)
    state = rows[-1][3] / 1e9 if lora_rank else rows[0][3] / 1e9
    hidden, layers, heads, kv, head_dim, mlp, vocab = QWEN[like]
    activations = (micro_batch_tokens * hidden * 2 * layers + micro_batch_tokens * (3 * mlp + 6 * hidden) * 2
                   + chunk * vocab * 4 * 6) / 1e9
    generation, update = state + vllm_share * gpu_gb, state + activations
    ok = max(generation, update) <= 0.95 * gpu_gb
    print(f"memory plan ({like}, {'LoRA rank %d' % lora_rank if lora_rank else 'full fine-tuning'}, one {gpu_gb:g} GB "
          f"GPU): trained state {state:.1f} GB; generating: + vLLM {vllm_share:g} x {gpu_gb:g} GB = {generation:.1f} GB; "
          f"updating: + activations at {micro_batch_tokens} tokens ~{activations:.1f} GB = {update:.1f} GB; "
          f"{'fits' if ok else 'DOES NOT FIT'} (95% = {0.95 * gpu_gb:.0f} GB)")
    if not ok:
        sys.exit(1)


def main():
    if sys.argv[1:2] == ["gpu"]:   # the GPU proof has its own command line (bench_gpu.py); alone: the plan
        import bench_gpu
        return bench_gpu.main(sys.argv[2:] or ["plan"])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["logprobs", "step", "pack", "grader", "reward", "rollout", "code", "gpu",
                                         "precision", "memory", "all"])
    parser.add_argument("--dev", default=str(DEV_SET), help="grader: JSONL(.gz) of real responses with verdicts "
                        "(fields response, gold, label, benchmark)")
    parser.add_argument("--math_verify_repo", default=None, help="grader: a Math-Verify checkout; its published "
                        "test cases are graded too")
    parser.add_argument("--disagreements", action="store_true", help="grader: list every row where ours and the "
                        "verdict differ")
    parser.add_argument("--threads", type=int, default=1, help="pack: torch CPU threads")
    parser.add_argument("--variants", default=None, help="grader: JSONL of independently written variants (fields "
                        "family, response, gold, expected; optional question): pass rate per family")
    parser.add_argument("--lengths", default="long-tailed,uniform", help="pack: length distributions "
                        "(long-tailed, uniform, all-at-cap)")
    parser.add_argument("--like", default="qwen2.5-1.5b", choices=sorted(QWEN), help="pack: the model whose FLOP "
                        "mix (attention / matmuls / head) the bench model copies")
    parser.add_argument("--check", action="store_true", help="memory: check one recipe's plan (the flags below) "
                        "instead of printing the table; exits 1 when it does not fit")
    parser.add_argument("--lora_rank", type=int, default=0, help="memory --check: 0 full fine-tuning, else LoRA rank")
    parser.add_argument("--gpu_gb", type=float, default=80, help="memory --check: GPU memory (GB)")
    parser.add_argument("--vllm_share", type=float, default=0.5, help="memory --check: --vllm_gpu_memory_utilization")
    parser.add_argument("--micro_batch_tokens", type=int, default=16384, help="memory --check: train.py's "
                        "--micro_batch_tokens")
    parser.add_argument("--dry_run", action="store_true", help="accepted so that recipes validate this command; "
                        "memory --check is cheap (meta device) and runs in full")
    parser.add_argument("--fraction", type=float, default=1 / 20, help="pack: share of each way's micro-batches timed")
    args = parser.parse_args()
    if args.what in ("logprobs", "all"):
        bench_logprobs()
    if args.what == "step":
        bench_step()
    if args.what == "precision":
        bench_precision()
    if args.what in ("pack", "all"):
        bench_pack(args.lengths.split(","), args.like, args.fraction, threads=args.threads)
    if args.what in ("grader", "reward", "all"):
        bench_grader(args.dev, args.math_verify_repo, args.disagreements, args.variants)
    if args.what in ("rollout", "all"):
        bench_rollout()
    if args.what in ("code", "all"):
        bench_code()
    if args.what == "memory" and args.check:
        check_memory(args.like, args.lora_rank, args.gpu_gb, args.vllm_share, args.micro_batch_tokens)
    elif args.what in ("memory", "all"):
        bench_memory()


if __name__ == "__main__":
    main()
