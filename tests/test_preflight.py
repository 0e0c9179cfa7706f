"""Issue 30 on CPU: what a first GPU run would hit, caught before anything loads (preflight.py), and the launch
and install lines: the context length against the model's config (a tiny model with a short context, and a
Hugging Face cache holding the configs the recipes and the README name), --config_overrides, the memory refusal,
the no-GPU message and setup.sh's driver check with a fake nvidia-smi on PATH, LAUNCHER for sft.py."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import preflight
from hub_configs import HUB_CONFIGS, hub_cache  # noqa: F401  (a fixture)

ROOT = Path(__file__).resolve().parents[1]

def run(argv, env=None, **kwargs):
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", **(env or {})}, **kwargs)


# ---------------------------------------------------------------------------------------------- item 2: context
def test_too_long_for_the_context_is_refused_before_loading_naming_the_flags(tiny_model_path, capsys):
    import train
    base = ["--device", "cpu", "--model", tiny_model_path, "--eval_data", "", "--dry_run"]  # context 2048
    with pytest.raises(SystemExit):
        train.parse_args(base + ["--max_response_len", "1500"])
    err = capsys.readouterr().err
    assert "--max_prompt_len 1024 + --max_response_len 1500 = 2524 tokens exceed" in err and "2048" in err
    assert "--config_overrides" in err
    with pytest.raises(SystemExit):
        train.parse_args(base + ["--max_model_len", "4096"])
    assert "--max_model_len 4096 exceeds" in capsys.readouterr().err
    # the extension DAPO used: a larger max_position_embeddings, for the trainer and vLLM
    train.parse_args(base + ["--max_response_len", "1500", "--config_overrides", '{"max_position_embeddings": 4096}'])
    assert "2524 tokens fit" in capsys.readouterr().out
    for bad, message in [('{"max_posn": 4096}', "not a field"), ("[1]", "JSON object"), ("{", "not JSON")]:
        with pytest.raises(SystemExit):
            train.parse_args(base + ["--config_overrides", bad])
        assert message in capsys.readouterr().err


def test_sft_and_eval_check_the_same_context(tiny_model_path, capsys):
    import eval as evaluation
    import sft
    flags = ["--device", "cpu", "--model", tiny_model_path, "--train_data", "x.jsonl", "--dry_run"]
    with pytest.raises(SystemExit):
        sft.parse_args(flags + ["--max_len", "3000"])
    assert "--max_len 3000 = 3000 tokens exceed" in capsys.readouterr().err
    sft.parse_args(flags + ["--max_len", "3000", "--config_overrides", '{"max_position_embeddings": 4096}'])
    assert "context checked" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="--max_model_len 8192 exceeds"):
        evaluation.main(["--model", tiny_model_path, "--max_model_len", "8192", "--dry_run"])
    evaluation.main(["--model", tiny_model_path, "--dry_run"])
    assert "vLLM runs at" in capsys.readouterr().out


def test_context_as_vllm_derives_it(tmp_path):
    """Linear RoPE scaling multiplies the context (vLLM multiplies it too); llama3 / yarn do not (their
    max_position_embeddings is already the extended one); the tokenizer's model_max_length does not cap it (vLLM
    reads it for pooling models only: DeepSeek-R1-Distill-Qwen ships 16,384 there and runs at 131,072)."""
    from transformers import AutoConfig
    linear = AutoConfig.for_model("qwen2", max_position_embeddings=4096,
                                  rope_scaling={"rope_type": "linear", "factor": 2.0})
    assert preflight.context_length(linear)[0] == 8192
    llama = AutoConfig.for_model(**HUB_CONFIGS["meta-llama/Llama-3.1-8B-Instruct"])
    assert preflight.context_length(llama)[0] == 131072
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(HUB_CONFIGS["Qwen/Qwen2.5-Math-7B"]))
    (model / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 2048}))
    assert preflight.context_length(AutoConfig.from_pretrained(model)) == (4096, "max_position_embeddings")
    assert preflight.check_context("train.py", model, (3000, "--max_prompt_len 1000 + --max_response_len 2000"))[0] \
        is None


def test_config_overrides_reach_the_trainer_model(tiny_model_path):
    """load_model builds the trainer's model from the overridden config (vLLM gets the same dict as hf_overrides:
    tests/test_bench_gpu.py runs an engine with one and checks the alignment)."""
    import torch

    import distributed
    model = distributed.load_model(tiny_model_path, torch.device("cpu"), torch.float32,
                                   overrides={"max_position_embeddings": 8192})
    assert model.config.max_position_embeddings == 8192


ROPE_PROBE = """
import json, math, sys
from pathlib import Path
import torch
import distributed
from logprobs import token_logprobs
from rollout import VLLMEngine
from tiny_model import build_tiny_model
path, overrides = build_tiny_model(Path(sys.argv[1]) / "hub_style"), json.loads(sys.argv[2])
config = json.loads(Path(path, "config.json").read_text())   # a top-level rope_theta, as the hub's configs have it
config["rope_theta"] = config.pop("rope_parameters")["rope_theta"]
Path(path, "config.json").write_text(json.dumps(config))
trainer = distributed.load_model(path, torch.device("cpu"), torch.float32, overrides=overrides)
plain = distributed.load_model(path, torch.device("cpu"), torch.float32)
engine = VLLMEngine(path, dtype="float32", max_model_len=1024, seed=0, load_format="dummy", hf_overrides=overrides)
engine.update_weights(trainer.state_dict().items())
prompt = [(7 * k) % 500 + 10 for k in range(600)]
sample = engine.generate([prompt], temperature=1.0, max_tokens=24, seed=3)[0]
ids = torch.tensor([prompt + sample.response_ids])
with torch.no_grad():
    got = {n: token_logprobs(m, ids, torch.ones_like(ids))[0, len(prompt) - 1:] for n, m in (("trainer", trainer),
                                                                                           ("plain", plain))}
print(json.dumps({n: math.exp((lp - torch.tensor(sample.logprobs)).abs().mean().item()) for n, lp in got.items()}))
"""
ROPE_OVERRIDES = {"rope_scaling": {"rope_scaling": {"rope_type": "linear", "factor": 4.0}},
                  "rope_theta": {"rope_theta": 40000.0}}


def rope_probe(folder, overrides):
    """ROPE_PROBE in a subprocess of its own (its own vLLM engine, in the background: background_jobs.py) on the
    tests' tiny model, built there."""
    return dict(args=[sys.executable, "-c", ROPE_PROBE, str(folder), json.dumps(ROPE_OVERRIDES[overrides])],
                env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")]),
                     "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"},
                timeout=300)


@pytest.mark.parametrize("overrides", list(ROPE_OVERRIDES))
@pytest.mark.background(job=rope_probe)
def test_a_rope_override_reaches_the_trainer_and_a_pushed_engine_alike(overrides, background):
    """--config_overrides with a RoPE change goes to the trainer's model (load_model) and to vLLM (hf_overrides,
    through preflight.vllm_overrides) of an engine started as train.py starts it (dummy load, then the push). On a
    600-token prompt the change moves log-probs measurably (alignment against the unchanged model ~1.0004, ~2,000x
    the fp32 noise), and the engine matches the changed trainer to fp32 noise (~1.0000002). The model's config is
    written as the hub's Qwen2.5-Math configs are (a top-level rope_theta of 10,000). Without vllm_overrides, vLLM
    ignored an overridden rope_theta, and a rope_scaling dict lost the theta (Qwen2: 1e6)."""
    proc, _ = background
    assert proc.returncode == 0, proc.stderr[-3000:]
    alignment = json.loads(proc.stdout.strip().splitlines()[-1])
    assert alignment["trainer"] < 1 + 1e-5 and alignment["plain"] > 1 + 1e-4, alignment


def test_readme_gpu_commands_check_the_context_from_the_cache(hub_cache, tmp_path):
    """Done-when of issue 30: every command of the README's GPU quickstart passes a dry run that checks the
    context when the config is in the cache, and says so when it is not (the recipes: tests/test_recipes.py).
    One process runs them all, as each script's main(argv + ["--dry_run"])."""
    commands = readme_gpu_commands()
    assert len(commands) >= 9
    driver = (f"import json, sys\nsys.argv = ['x']\nimport eval, sft, train\n"
              f"for cmd in json.loads(sys.stdin.read()):\n"
              f"    print('COMMAND', cmd)\n"
              f"    {{'train.py': train, 'sft.py': sft, 'eval.py': eval}}[cmd[0]].main(cmd[1:] + ['--dry_run'])\n")
    proc = run([sys.executable, "-c", driver], {"HF_HUB_CACHE": str(hub_cache)}, input=json.dumps(commands))
    assert proc.returncode == 0, proc.stderr[-3000:]
    outputs = proc.stdout.split("COMMAND ")[1:]
    assert len(outputs) == len(commands)
    for command, out in zip(commands, outputs):
        notes = [l for l in out.splitlines() if ": context " in l]
        # in the cache: checked; a checkpoint of an earlier run (out/...) is not there yet
        assert len(notes) == 1 and ("context checked" in notes[0] or "no config of out/" in notes[0]), (command, out)
    assert sum("context checked" in out for out in outputs) >= 6
    assert "Qwen/Qwen2.5-Math-1.5B's context of 4096" in outputs[[c[0] for c in commands].index("sft.py") + 1]
    # without the cache the same command says that nothing could be checked
    proc = run([sys.executable, "train.py", "--dry_run"], {"HF_HUB_CACHE": str(tmp_path)})
    assert proc.returncode == 0 and "context not checked: no config of deepseek-ai" in proc.stdout


def readme_gpu_commands():
    """The python / torchrun command lines of the README's GPU quickstart (launcher stripped: a dry run is one
    process), plot.py left out (it loads no model)."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## GPU quickstart"):text.index("## What each file owns")]
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = line.split("  #")[0].split()
            while words and not words[0].endswith(".py"):
                words = words[1:]  # python, .venv/bin/python, torchrun and its options
            if words and words[0] != "plot.py":
                commands.append(words)
    return commands


# ---------------------------------------------------------------------------------------------- item 3: memory
def test_full_finetuning_that_cannot_fit_is_refused_with_what_to_do_instead(hub_cache, monkeypatch):
    from transformers import AutoConfig
    llama = AutoConfig.for_model(**HUB_CONFIGS["meta-llama/Llama-3.1-8B-Instruct"])
    params = preflight.count_parameters(llama)
    assert 8.0e9 < params < 8.1e9
    h100 = 80e9
    problem = preflight.check_memory("sft.py", params, h100)
    assert "128 GB per GPU on 1 process" in problem
    for remedy in ("torchrun --nproc_per_node", "--fsdp_cpu_offload 1", "--lora_rank"):
        assert remedy in problem
    assert preflight.check_memory("sft.py", params, h100, world=8) is None        # 16 GB per GPU
    assert preflight.check_memory("sft.py", params, h100, cpu_offload=True) is None
    qwen = preflight.count_parameters(AutoConfig.for_model(**HUB_CONFIGS["Qwen/Qwen2.5-Math-1.5B"]))
    assert 1.5e9 < qwen < 1.6e9
    assert preflight.check_memory("train.py", qwen, h100, vllm_share=0.35, reference_bytes=2) is None
    beside = preflight.check_memory("train.py", 4e9, h100, vllm_share=0.5)      # 48 GB resident beside 40 GB
    assert "beside vLLM's share" in beside and "--vllm_gpu_memory_utilization" in beside
    # LoRA: the frozen bf16 base and small adapters, the reference is the base itself: 8B fits one GPU beside vLLM
    assert preflight.check_memory("sft.py", params, h100, lora=True) is None
    assert preflight.check_memory("train.py", params, h100, vllm_share=0.5, reference_bytes=2, lora=True) is None
    assert "LoRA" in preflight.check_memory("train.py", 70e9, h100, vllm_share=0.5, lora=True)   # 189 GB


# ---------------------------------------------------------------------------------------------- item 4: driver
def fake_nvidia_smi(folder, driver):
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvidia-smi"
    script.write_text(f"""#!/bin/sh
case "$*" in
  *-L*) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)" ;;
  *name*) echo "{driver}, NVIDIA H100 80GB HBM3" ;;
  *) echo "{driver}" ;;
esac
""")
    script.chmod(0o755)
    return {"PATH": f"{folder}:{os.environ['PATH']}"}


def test_setup_checks_the_driver_before_installing(tmp_path):
    for driver, stack, ok, said in [("550.54.15", "", False, "STACK=cu128 bash setup.sh"),
                                    ("550.54.15", "cu128", True, "requirements-cu128.txt"),
                                    ("580.65.06", "", True, "requirements.txt"),
                                    ("470.1", "cu128", False, "needs >= 525")]:
        env = {**fake_nvidia_smi(tmp_path / driver, driver), "VENV": str(tmp_path / "venv"), "DEVICE": ""}
        if stack:
            env["STACK"] = stack
        proc = run(["bash", "setup.sh", "--check"], env)
        assert (proc.returncode == 0) == ok, (driver, stack, proc.stdout, proc.stderr)
        assert said in proc.stdout + proc.stderr, (driver, stack, proc.stdout, proc.stderr)
        assert not (tmp_path / "venv").exists()   # nothing installed


def test_no_gpu_message_names_the_driver_and_torchs_cuda(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", fake_nvidia_smi(tmp_path, "550.54.15")["PATH"])
    old = preflight.no_gpu_message("train.py", "2.13.0+cu130", "13.0")
    assert "driver 550.54.15" in old and "CUDA 13.0" in old and ">= 580" in old and "STACK=cu128" in old
    cpu_build = preflight.no_gpu_message("train.py", "2.13.0+cpu", None)
    assert "CPU build" in cpu_build and "DEVICE=gpu" in cpu_build
    assert "CUDA_VISIBLE_DEVICES" in preflight.no_gpu_message("train.py", "2.10.0+cu128", "12.8")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert "demo.py" in preflight.no_gpu_message("train.py")
    # train.py itself says it, on this CPU machine with the fake nvidia-smi
    proc = run([sys.executable, "train.py", "--model", "/nonexistent", "--eval_data", ""],
               fake_nvidia_smi(tmp_path, "550.54.15"))
    assert proc.returncode != 0 and "nvidia-smi sees 1 GPU(s)" in proc.stderr and "550.54.15" in proc.stderr


# ---------------------------------------------------------------------------------------------- item 3: launcher
def test_launcher_starts_sft_and_train_alike(tmp_path):
    """LAUNCHER applies to sft.py as to train.py (recipes/_common.sh), and to eval.py (issue 36: an engine per
    GPU). A fake interpreter records what the run phase would start (tests/test_recipes.py runs the real dry runs)."""
    log = tmp_path / "launched"
    fake = tmp_path / "fake"
    fake.write_text(f'#!/bin/sh\ncase "$*" in *--dry_run*) exit 0 ;; esac\necho "$0 $*" >> {log}\n')
    fake.chmod(0o755)
    proc = run(["bash", "recipes/perplexity_llama.sh"], {"PYTHON": str(fake), "LAUNCHER": f"{fake} --nproc 8"})
    assert proc.returncode == 0, proc.stderr
    started = log.read_text().splitlines()
    assert [l.split()[1:4] for l in started] == [["--nproc", "8", script] for script in
                                                ("eval.py", "sft.py", "train.py", "eval.py")]
