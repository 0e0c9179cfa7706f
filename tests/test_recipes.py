"""Recipes validate in dry-run mode; plot.py draws a real tiny run's metrics."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hub_configs import write_hub_cache
from tiny_model import TOY_FLAGS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RECIPES = sorted(p.name for p in (ROOT / "recipes").glob("*.sh") if not p.name.startswith("_"))


def test_there_are_the_six_recipes():
    assert RECIPES == ["acemath_rl.sh", "acereason.sh", "dapo.sh", "perplexity_llama.sh", "single_gpu_1p5b.sh",
                       "single_gpu_7b_lora.sh"]
    acereason = (ROOT / "recipes" / "acereason.sh").read_text()   # math stages first, then code-only RL
    assert acereason.index("$MATH") < acereason.index("run train.py $CODE") and "--template code" in acereason


def dry_run(folder, script, *, env=None):
    """subprocess.run's keywords for `bash SCRIPT --dry_run` (background_jobs.py) against a Hugging Face
    cache of the published configs (tests/hub_configs.py), offline, with no token and an empty HF_HOME."""
    env = {**os.environ, "PYTHON": sys.executable, "HF_HUB_CACHE": str(write_hub_cache(folder / "hub")),
           "HF_HUB_OFFLINE": "1", "HF_HOME": str(folder / "hf_home"), **(env or {})}
    env.pop("HF_TOKEN", None)
    return dict(args=["bash", str(script), "--dry_run"], env=env, timeout=600)


def recipe_dry_run(folder, recipe):
    return dry_run(folder, ROOT / "recipes" / recipe)


def broken_copy(folder, recipe, old, new):
    """`recipe` with `old` (a regex) replaced by `new`, written into `folder` (it sources _common.sh from ROOT)."""
    text = re.sub(old, new, (ROOT / "recipes" / recipe).read_text())
    broken = folder / recipe
    broken.write_text(text.replace('source "$(dirname "$0")/_common.sh"', f'source "{ROOT}/recipes/_common.sh"'))
    return broken


def dapo_without_its_context_extension(folder):
    return dry_run(folder, broken_copy(folder, "dapo.sh", r"--config_overrides '[^']*' ", ""))


def recipe_with_a_typo(folder):
    return dry_run(folder, broken_copy(folder, "single_gpu_1p5b.sh", "--max_steps 500", "--max_stepz 500"))


def recipe_without_datasets(folder, recipe):
    """The recipe's dry run where `import datasets` fails."""
    blocker = folder / "no_datasets"
    blocker.mkdir()
    (blocker / "datasets.py").write_text("raise ImportError('datasets is not installed (test)')\n")
    return dry_run(folder, ROOT / "recipes" / recipe, env={"PYTHONPATH": str(blocker)})


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.background(job=recipe_dry_run)
def test_recipe_dry_run_validates_every_command(recipe, background):
    """Every command's flags, and its context length against its model's config, read from a Hugging Face cache
    holding the published configs (tests/hub_configs.py): Qwen2.5-Math-7B's 4,096 tokens hold DAPO's 22,528 only
    with --config_overrides. What is not yet there (an earlier stage's checkpoint) is said to be unchecked."""
    proc, _ = background
    assert proc.returncode == 0, proc.stderr
    assert "every command validated" in proc.stdout
    notes = [line for line in proc.stdout.splitlines() if ": context " in line]
    assert notes and any("context checked" in line for line in notes), proc.stdout
    for line in notes:
        assert "context checked" in line or "no config of out/" in line, line


@pytest.mark.background(job=dapo_without_its_context_extension)
def test_dapo_without_its_context_extension_is_refused(background):
    proc, _ = background
    assert proc.returncode != 0 and "22528 tokens exceed Qwen/Qwen2.5-Math-7B's context of 4096" in proc.stderr


@pytest.mark.background(job=recipe_with_a_typo)
def test_recipe_with_a_typo_fails_fast(background):
    proc, _ = background
    assert proc.returncode != 0 and "invalid command" in proc.stderr


def test_plot_draws_a_tiny_run(vllm_engine, warm_model_path, tmp_path):
    import json
    import train
    from tiny_model import synthetic_task
    task = tmp_path / "task.jsonl"
    task.write_text("".join(json.dumps(r) + "\n" for r in synthetic_task(64)))
    run = tmp_path / "run"
    train.main([*TOY_FLAGS, "--model", warm_model_path, "--train_data", str(task), "--out_dir", str(run),
                "--max_steps", "3", "--batch_size", "8", "--group_size", "4", "--kl_coef", "0.01",
                "--eval_every", "3", "--eval_data", "amc2023", "--eval_limit", "2"], engine=vllm_engine)
    out = tmp_path / "plots"
    proc = subprocess.run([sys.executable, str(ROOT / "plot.py"), str(run), str(run / "metrics.jsonl"), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for name in ("reward.png", "length.png", "truncated.png", "entropy.png", "kl.png", "alignment.png", "eval.png"):
        png = out / name
        assert png.exists() and png.stat().st_size > 5000, name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.background(jobs=[recipe_without_datasets, recipe_dry_run],
                        params={"recipe": "perplexity_llama.sh"})
def test_a_recipe_dry_run_checks_the_package_its_hub_data_needs(background):
    """Issue 36, item 3: recipes/perplexity_llama.sh's SFT data is a hub: spec. Without the `datasets` package its
    dry run fails (it used to pass, run the first eval, then die at SFT); with it (the recipe's own dry run,
    test_recipe_dry_run_validates_every_command's), the hub spec that the offline hub cannot check is said to be
    unchecked, and the gated model is noted."""
    (proc, _), (with_datasets, _) = background
    assert proc.returncode != 0 and "recipe: invalid command: " + sys.executable + " sft.py" in proc.stderr
    assert "needs the `datasets` package, which setup.sh installs" in proc.stderr, proc.stderr[-2000:]
    proc = with_datasets
    assert proc.returncode == 0, proc.stderr
    assert "data: hub:open-r1/OpenR1-Math-220k:train: not checked against the hub" in proc.stdout
    assert "is gated and no Hugging Face token was found" in proc.stderr


def test_a_dry_run_refuses_to_grade_code_without_the_sandbox(monkeypatch, capsys):
    """AceReason's code stages come after days of math stages: their dry run checks the sandbox they will need
    (bubblewrap + libseccomp), as the real run does at its start, unless the fallback is accepted."""
    import code_reward
    import data
    import eval as evaluation
    import preflight
    import train
    assert data.has_code_rows("mbpp_train") and data.has_code_rows("humaneval") and not data.has_code_rows("aime2024")
    monkeypatch.setattr(code_reward, "sandbox_mode", lambda requested=None: "unavailable")
    code = ["--device", "cpu", "--dry_run", "--train_data", "mbpp_train", "--eval_data", "humaneval"]
    with pytest.raises(SystemExit):
        train.parse_args(code + ["--template", "code"])
    assert "the full code sandbox does not work here" in capsys.readouterr().err
    train.parse_args(code + ["--template", "code", "--allow_unsafe_code_sandbox", "1"])
    train.parse_args(["--device", "cpu", "--dry_run"])                 # math only: no sandbox needed
    with pytest.raises(SystemExit, match="sandbox does not work here"):
        evaluation.main(["--model", "m", "--benchmarks", "humaneval,mbpp_test", "--template", "code", "--dry_run"])
    assert preflight.check_code_sandbox("eval.py", ["math500"], "chat", False) is None
