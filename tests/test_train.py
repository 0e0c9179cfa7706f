"""train.py end to end on CPU with the real vLLM engine (the session's one, re-used: train.main pushes its own
weights into it first), the tiny model and the real grader."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import train

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def toy(tmp_path_factory, warm_model_path):
    from tiny_model import synthetic_task
    path = tmp_path_factory.mktemp("toy") / "task.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in synthetic_task(200)))
    return str(path)


def demo_args(model, data, out_dir, **overrides):
    args = ["--preset", "cpu_demo", "--model", model, "--train_data", data, "--out_dir", str(out_dir)]
    for key, value in overrides.items():
        args += [f"--{key}", str(value)]
    return args


def read_metrics(out_dir):
    return [json.loads(line) for line in Path(out_dir, "metrics.jsonl").read_text().splitlines()]


def test_grpo_learns_the_toy_task(vllm_engine, warm_model_path, toy, tmp_path):
    """The README's CPU quickstart, in-process: mean reward from <= 0.2 to >= 0.8 (wall time is in the README)."""
    train.main(demo_args(warm_model_path, toy, tmp_path / "run"), engine=vllm_engine)
    rewards = [m["reward/mean"] for m in read_metrics(tmp_path / "run")]
    assert len(rewards) == 30
    assert sum(rewards[:3]) / 3 <= 0.2, rewards
    assert sum(rewards[-5:]) / 5 >= 0.8, rewards
    last = read_metrics(tmp_path / "run")[-1]
    assert last["rollout/align_max"] <= 1.001, "vLLM and the trainer disagree: the weight sync is broken"
    assert (tmp_path / "run" / "ckpt-000030" / "model" / "config.json").exists()


def comparable(metrics):
    return [{k: v for k, v in m.items() if not k.startswith(("time/", "perf/"))} for m in metrics]


def test_resume_is_exact(vllm_engine, warm_model_path, toy, tmp_path):
    common = dict(max_steps=4, save_every=2, keep_last=5, batch_size=8, group_size=4)
    straight = train.main(demo_args(warm_model_path, toy, tmp_path / "a", **common), engine=vllm_engine)
    train.main(demo_args(warm_model_path, toy, tmp_path / "b", **dict(common, max_steps=2)), engine=vllm_engine)
    resumed = train.main(demo_args(warm_model_path, toy, tmp_path / "ignored", **common) +
                         ["--resume", str(tmp_path / "b")], engine=vllm_engine)
    assert comparable(read_metrics(tmp_path / "a")) == comparable(read_metrics(tmp_path / "b"))
    for (name, a), (_, b) in zip(straight.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(a, b), name
    assert sorted(p.name for p in (tmp_path / "b").glob("ckpt-*")) == ["ckpt-000002", "ckpt-000004"]


def test_end_to_end_on_real_data_with_every_option(vllm_engine, tiny_model_path, tmp_path):
    """Real shipped data (rewards ~0 with a random model): every path runs -- KL reference, entropy bonus,
    truncated-IS correction, off-policy epochs, eval, checkpoints, and a new stage from a checkpoint."""
    out = tmp_path / "real"
    args = demo_args(tiny_model_path, "gsm8k_train", out, max_steps=2, batch_size=4, group_size=2, max_response_len=16,
                     kl_coef=0.01, entropy_coef=0.01, tis_cap=2.0, mask_truncated=1, skip_equal_groups=0,
                     ppo_epochs=2, mini_batches=2, eval_every=1, eval_data="math500", eval_limit=3, eval_k=2,
                     save_every=1, keep_last=1, loss_agg="seq-mean-token-sum-norm", contamination_check=1)
    policy = train.main(args, engine=vllm_engine)
    metrics = read_metrics(out)
    assert [m["step"] for m in metrics] == [1, 2]
    assert all(torch.isfinite(torch.tensor(m["policy/loss"])) for m in metrics)
    assert "eval/math500" in metrics[-1] and metrics[-1]["policy/kl_ref"] >= 0
    summary = json.loads((out / "eval-000002" / "summary.json").read_text())
    assert summary["results"]["math500"]["problems"] == 3
    assert [p.name for p in out.glob("ckpt-*")] == ["ckpt-000002"], "keep_last=1 keeps only the newest"
    from transformers import AutoModelForCausalLM
    reloaded = AutoModelForCausalLM.from_pretrained(out / "ckpt-000002" / "model", dtype=torch.float32)
    for (name, a), (_, b) in zip(policy.state_dict().items(), reloaded.state_dict().items()):
        assert torch.equal(a, b), name
    assert (out / "samples.jsonl").exists()
    # next stage: weights from the checkpoint, fresh optimizer, new flags
    stage2 = train.main(demo_args(tiny_model_path, "gsm8k_train", tmp_path / "stage2", max_steps=1, batch_size=4,
                                  group_size=2, max_response_len=8) + ["--init_from", str(out / "ckpt-000002")],
                        engine=vllm_engine)
    assert read_metrics(tmp_path / "stage2")[0]["step"] == 1 and stage2 is not None


def test_nan_loss_skips_the_update(vllm_engine, warm_model_path, toy, tmp_path, monkeypatch, capsys):
    import grpo
    real = grpo.policy_loss

    def poisoned(*args, **kwargs):
        loss, stats = real(*args, **kwargs)
        return loss * float("nan"), stats

    monkeypatch.setattr(grpo, "policy_loss", poisoned)
    from transformers import AutoModelForCausalLM
    before = AutoModelForCausalLM.from_pretrained(warm_model_path, dtype=torch.float32).state_dict()
    after = train.main(demo_args(warm_model_path, toy, tmp_path / "nan", max_steps=2), engine=vllm_engine)
    for name, tensor in after.state_dict().items():
        assert torch.equal(tensor, before[name]), f"{name} changed after a NaN step"
    assert all(m["policy/skipped"] == 1 for m in read_metrics(tmp_path / "nan"))
    assert "update skipped" in capsys.readouterr().out
    monkeypatch.undo()
    # vLLM still holds the (unchanged) trainer weights: generation afterwards is aligned
    sample = vllm_engine.generate([[1, 2, 3]], n=1, max_tokens=4, seed=0)[0]
    assert len(sample.response_ids) > 0


def test_crash_mid_checkpoint_keeps_the_previous_one(vllm_engine, warm_model_path, toy, tmp_path, monkeypatch):
    out = tmp_path / "crash"
    train.main(demo_args(warm_model_path, toy, out, max_steps=1, save_every=1), engine=vllm_engine)
    assert train.latest_checkpoint(out).name == "ckpt-000001"

    def broken_save(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError):
        train.main(demo_args(warm_model_path, toy, tmp_path / "ignored", max_steps=2, save_every=1) +
                   ["--resume", str(out)], engine=vllm_engine)
    monkeypatch.undo()
    assert train.latest_checkpoint(out).name == "ckpt-000001"
    assert (out / "ckpt-000001" / "trainer_state.pt").exists()
    # and the run resumes from it
    train.main(demo_args(warm_model_path, toy, tmp_path / "ignored", max_steps=2, save_every=1) +
               ["--resume", str(out)], engine=vllm_engine)
    assert train.latest_checkpoint(out).name == "ckpt-000002"


@pytest.mark.parametrize("flags,message", [
    (["--group_size", "1"], "group_size 1"),
    (["--clip_low", "1.5"], "clip_low"),
    (["--train_data", "no_such_data.jsonl"], "no_such_data.jsonl"),
    (["--resume", "/nonexistent/run"], "no checkpoint"),
    (["--batch_size", "10", "--mini_batches", "3"], "mini_batches"),
    (["--loss_agg", "mean"], "invalid choice"),
])
def test_bad_flags_fail_before_loading_anything(flags, message, capsys):
    with pytest.raises(SystemExit):
        train.parse_args(["--device", "cpu"] + flags)
    assert message in capsys.readouterr().err


def test_cli_dry_run_and_gpu_default_without_gpu():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    dry = subprocess.run([sys.executable, str(ROOT / "train.py"), "--device", "cpu", "--dry_run"], capture_output=True,
                         text=True, env=env, cwd=ROOT)
    assert dry.returncode == 0 and "dry run ok" in dry.stdout
    if not torch.cuda.is_available():
        proc = subprocess.run([sys.executable, str(ROOT / "train.py")], capture_output=True, text=True, env=env, cwd=ROOT)
        assert proc.returncode != 0 and "--preset cpu_demo" in proc.stderr
    helptext = subprocess.run([sys.executable, str(ROOT / "train.py"), "--help"], capture_output=True, text=True,
                              env=env, cwd=ROOT).stdout
    for flag in ("--kl_coef", "--clip_high", "--mask_truncated", "--tis_cap", "--resume", "--init_from", "--template"):
        assert flag in helptext


def test_repetition_detector():
    assert train.ends_in_loop([5, 6, 7] + [1, 2] * 20)
    assert train.ends_in_loop([9] * 40)
    assert not train.ends_in_loop(list(range(100)))
    assert not train.ends_in_loop([1, 2] * 5)  # too short to call a loop
