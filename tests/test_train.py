"""train.py end to end on CPU with the real vLLM engine (the session's one, re-used: train.main pushes its own
weights into it first), the tiny model and the real grader."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import batching
import data
import distributed
import eval as evaluation
import grpo
import logprobs
import metrics
import runs
import train
from conftest import assert_grads_close  # noqa: E402
from tiny_model import TOY_FLAGS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def toy(tmp_path_factory, warm_model_path):
    from tiny_model import synthetic_task
    path = tmp_path_factory.mktemp("toy") / "task.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in synthetic_task(200)))
    return str(path)


def demo_args(model, data, out_dir, **overrides):
    args = [*TOY_FLAGS, "--model", model, "--train_data", data, "--out_dir", str(out_dir)]
    for key, value in overrides.items():
        args += [f"--{key}", str(value)]
    return args


def read_metrics(out_dir):
    return [json.loads(line) for line in Path(out_dir, "metrics.jsonl").read_text().splitlines()]


def test_grpo_learns_the_toy_task(vllm_engine, warm_model_path, toy, tmp_path, capsys):
    """The README's CPU quickstart, in-process: mean reward from <= 0.2 to >= 0.8 (wall time is in the README).
    The console shows one progress line per step (issue 15, item 12)."""
    train.main(demo_args(warm_model_path, toy, tmp_path / "run"), engine=vllm_engine)
    progress = [line for line in capsys.readouterr().out.splitlines() if line.startswith("step ")]
    assert [line.split()[1] for line in progress] == [f"{k}/30" for k in range(1, 31)]
    assert all("reward" in line and "align" in line for line in progress)
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
                     save_every=1, keep_last=1, loss_agg="seq-mean-token-sum-norm", contamination_check=1,
                     eval_temperature=0.9, eval_top_p=0.8)
    policy = train.main(args, engine=vllm_engine)
    metrics = read_metrics(out)
    assert [m["step"] for m in metrics] == [1, 2]
    assert all(torch.isfinite(torch.tensor(m["policy/loss"])) for m in metrics)
    assert "eval/math500" in metrics[-1] and metrics[-1]["policy/kl_ref"] >= 0
    summary = json.loads((out / "eval-000002" / "summary.json").read_text())
    assert summary["results"]["math500"]["problems"] == 3
    assert summary["settings"]["temperature"] == 0.9 and summary["settings"]["top_p"] == 0.8  # eval flags
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
    assert runs.latest_checkpoint(out).name == "ckpt-000001"

    def broken_save(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError):
        train.main(demo_args(warm_model_path, toy, tmp_path / "ignored", max_steps=2, save_every=1) +
                   ["--resume", str(out)], engine=vllm_engine)
    monkeypatch.undo()
    assert runs.latest_checkpoint(out).name == "ckpt-000001"
    assert (out / "ckpt-000001" / "trainer_state.pt").exists()
    # and the run resumes from it
    train.main(demo_args(warm_model_path, toy, tmp_path / "ignored", max_steps=2, save_every=1) +
               ["--resume", str(out)], engine=vllm_engine)
    assert runs.latest_checkpoint(out).name == "ckpt-000002"


@pytest.mark.parametrize("flags,message", [
    (["--group_size", "1"], "--group_size 1 >= 2"),
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
        assert proc.returncode != 0 and "demo.py" in proc.stderr
    helptext = subprocess.run([sys.executable, str(ROOT / "train.py"), "--help"], capture_output=True, text=True,
                              env=env, cwd=ROOT).stdout
    for flag in ("--kl_coef", "--clip_high", "--mask_truncated", "--tis_cap", "--resume", "--init_from", "--template"):
        assert flag in helptext


def test_repetition_detector():
    assert metrics.ends_in_loop([5, 6, 7] + [1, 2] * 20)
    assert metrics.ends_in_loop([9] * 40)
    assert not metrics.ends_in_loop(list(range(100)))
    assert not metrics.ends_in_loop([1, 2] * 5)  # too short to call a loop


# ---------------------------------------------------------------------------------------------- issue 15
from replay import ReplayEngine, sample_rows  # noqa: E402


def first_metrics(out_dir):
    return read_metrics(out_dir)[0]


def recorded_gradients(monkeypatch):
    """Records every parameter's gradient as train.py hands it to the optimizer (before clipping and AdamW):
    a list with one {name: gradient} per optimizer step. The comparison of two computations that agree up to
    rounding belongs here, not after AdamW (conftest.py's docstring)."""
    import distributed
    steps = []

    def recording_step(policy, optimizer, loss, grad_clip, step):
        steps.append({n: p.grad.detach().clone() for n, p in policy.named_parameters() if p.grad is not None})
        return distributed.optimizer_step(policy, optimizer, loss, grad_clip, step)
    monkeypatch.setattr(train, "optimizer_step", recording_step)
    return steps


@pytest.mark.parametrize("loss_agg,top_entropy", [("token-mean", 1.0), ("seq-mean-token-sum-norm", 1.0),
                                                  ("token-mean", 0.5)])
def test_skip_equal_groups_changes_compute_only(recorded_toy, warm_model_path, tmp_path, monkeypatch, loss_agg,
                                                top_entropy):
    """Item 1: the same batch (replayed vLLM rollouts), flag on vs off, KL and entropy off: equal loss, equal
    pre-clip gradient norm, equal gradients (fp32 rounding, normwise). The normalisers count every response of the
    batch; with --top_entropy_quantile the threshold is taken over every scored token, the skipped groups' too
    (issue 35), so the selection and the gradient do not move either."""
    task, replay = recorded_toy
    common = dict(max_steps=1, batch_size=16, group_size=4, kl_coef=0, entropy_coef=0, loss_agg=loss_agg,
                  lr=1e-3, grad_clip=1e9, top_entropy_quantile=top_entropy)
    grads = recorded_gradients(monkeypatch)
    train.main(demo_args(warm_model_path, task, tmp_path / "on", skip_equal_groups=1, **common),
               engine=ReplayEngine(replay))
    train.main(demo_args(warm_model_path, task, tmp_path / "off", skip_equal_groups=0, **common),
               engine=ReplayEngine(replay))
    m_on, m_off = first_metrics(tmp_path / "on"), first_metrics(tmp_path / "off")
    assert 0 < m_on["policy/trained_frac"] < 1 == m_off["policy/trained_frac"], "the batch must have equal groups"
    assert m_on["policy/grad_norm"] > 0
    assert m_on["policy/grad_norm"] == pytest.approx(m_off["policy/grad_norm"], rel=1e-5)
    assert m_on["policy/loss"] == pytest.approx(m_off["policy/loss"], rel=1e-5, abs=1e-9)
    assert len(grads) == 2
    assert_grads_close(grads[0], grads[1])


@pytest.fixture(scope="module")
def handmade(tmp_path_factory, warm_model_path):
    """4 problems x 4 responses written by hand (exact texts and finish reasons), with the warmed-up model's own
    log-probs as the sampler's: a task file, the rows, and the trainer's log-probs per sample."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from data import render_prompt
    from data import Sample
    from tiny_model import QUESTIONS
    tok = AutoTokenizer.from_pretrained(warm_model_path)
    model = AutoModelForCausalLM.from_pretrained(warm_model_path, dtype=torch.float32)
    eos = tok.eos_token_id
    right, wrong = tok.encode("\\boxed{7}") + [eos], tok.encode("\\boxed{3}") + [eos]
    cut = tok.encode("\\boxed{7} so the answer is seven, because a week has")  # truncated: no EOS
    groups = [[right, wrong, cut, wrong], [right, right, cut, wrong], [wrong, wrong, cut, wrong], [right, wrong, wrong, cut]]
    rows, problems = [], []
    for (question, answer), group in zip(QUESTIONS, groups):
        problems.append({"id": f"hand-{len(problems)}", "problem": question, "answer": answer})
        prompt = render_prompt(question, tok, "chat")
        for response in group:
            ids = torch.tensor([prompt + response])
            with torch.no_grad():
                logp = logprobs.token_logprobs(model, ids, torch.ones_like(ids))[0, len(prompt) - 1:]
            rows += sample_rows([Sample(prompt, response, logp.tolist(), "length" if response is cut else "stop",
                                        tok.decode(response, skip_special_tokens=True))])
    task = tmp_path_factory.mktemp("hand") / "task.jsonl"
    task.write_text("".join(json.dumps(p) + "\n" for p in problems))
    return str(task), rows


def expected_pg_loss(rows, mask_truncated):
    """Hand computation of step 1's token-mean policy-gradient loss (ratio 1): sum over trained samples of
    -A_i * n_i, over the response tokens of every scored sample."""
    truncated = [r["finish_reason"] == "length" for r in rows]
    rewards = torch.tensor([0.0 if cut else float(r["text"] == "\\boxed{7}") for r, cut in zip(rows, truncated)])
    adv = grpo.group_advantages(rewards, 4)
    scored = [i for i in range(len(rows)) if not (mask_truncated and truncated[i])]
    total = sum(-adv[i].item() * len(rows[i]["response_ids"]) for i in scored)
    return total / sum(len(rows[i]["response_ids"]) for i in scored), rewards


@pytest.mark.parametrize("mask_truncated", [0, 1])
def test_truncated_responses_get_zero_and_leave_the_loss_when_masked(handmade, warm_model_path, tmp_path,
                                                                     mask_truncated):
    """Item 2: a truncated response holding an early \\boxed{7} still gets reward 0; --mask_truncated 1 takes
    truncated samples out of the loss and its normaliser (TRL's mask_truncated_completions)."""
    task, rows = handmade
    train.main(demo_args(warm_model_path, task, tmp_path / "run", max_steps=1, batch_size=4, group_size=4,
                         max_response_len=32, kl_coef=0.05, **({"mask_truncated": 1} if mask_truncated else {})),
               engine=ReplayEngine(rows))
    m = first_metrics(tmp_path / "run")
    expected, rewards = expected_pg_loss(rows, mask_truncated)
    assert m["reward/mean"] == pytest.approx(rewards.mean().item()) == pytest.approx(4 / 16)
    assert m["response/truncated_frac"] == pytest.approx(4 / 16)
    assert m["policy/scored_frac"] == pytest.approx(12 / 16 if mask_truncated else 1.0)
    assert m["policy/pg_loss"] == pytest.approx(expected, rel=1e-5)
    assert m["policy/pg_loss"] != pytest.approx(expected_pg_loss(rows, 1 - mask_truncated)[0], rel=1e-3)


def test_tis_weights_are_pi_old_over_vllm_computed_once(handmade, warm_model_path, tmp_path, monkeypatch):
    """Item 3: off-policy (2 epochs x 2 mini-batches, large lr), the truncated IS weight of every token in every
    update is min(pi_old / pi_vllm, cap), with pi_old the trainer's log-prob before any update; not
    pi_theta / pi_vllm, which changes with every update and counts the PPO ratio twice."""
    task, rows = handmade
    shifted = [dict(r, logprobs=[lp - 0.3 for lp in r["logprobs"]]) for r in rows]  # vLLM 'disagrees' by 0.3 nat
    calls = []
    real = grpo.policy_loss

    def spy(logp, old_logp, advantages, mask, *args, is_weights=None, **kwargs):
        calls.append((logp.detach().clone(), old_logp.detach().clone(), is_weights.clone(), mask.bool().clone()))
        return real(logp, old_logp, advantages, mask, *args, is_weights=is_weights, **kwargs)

    monkeypatch.setattr(grpo, "policy_loss", spy)
    train.main(demo_args(warm_model_path, task, tmp_path / "tis", max_steps=1, batch_size=4, group_size=4,
                         max_response_len=32, skip_equal_groups=0, ppo_epochs=2, mini_batches=2, lr=2e-2,
                         tis_cap=2.0, grad_clip=1e9), engine=ReplayEngine(shifted))
    assert len(calls) >= 4
    moved = 0.0
    for logp, old, weights, mask in calls:
        torch.testing.assert_close(weights[mask], torch.full_like(weights[mask], math.exp(0.3)), rtol=0, atol=1e-4)
        moved = max(moved, (logp - old)[mask].abs().max().item())
    assert moved > 0.05, "the policy must have moved, or the test shows nothing"
    m = first_metrics(tmp_path / "tis")
    assert m["rollout/align_mean"] == pytest.approx(math.exp(0.3), rel=1e-4)  # pi_old vs vLLM, once per batch


@pytest.mark.parametrize("flags,message", [
    (["--top_p", "0.95"], "--top_p 0.95"),
])
def test_refused_training_flags(flags, message, capsys):
    with pytest.raises(SystemExit):
        train.parse_args(["--device", "cpu"] + flags)
    assert message in capsys.readouterr().err
    assert train.parse_args(["--device", "cpu", "--eval_top_p", "0.9"]).eval_top_p == 0.9


@pytest.mark.parametrize("flags,message", [
    (["--tis_mode", "sequence_mask"], "--tis_mode: nothing reads it without --tis_cap > 0"),
    (["--tis_low", "0.5", "--tis_mode", "token_mask"], "--tis_low, --tis_mode: nothing reads them without --tis_cap"),
    (["--overlong_penalty", "0.5"], "--overlong_penalty: nothing reads it without --overlong_buffer_len > 0"),
    (["--max_sampling_rounds", "5"], "--max_sampling_rounds: nothing reads it without --dynamic_sampling"),
    (["--kl_coef", "0", "--kl_estimator", "k1"], "--kl_estimator: nothing reads it without --kl_coef > 0"),
    (["--engine", "hf", "--vllm_sleep_level", "1"], "--vllm_sleep_level: nothing reads it without --engine vllm"),
    (["--clip_ratio_c", "3", "--loss_type", "cispo"], "dual clipping is PPO's"),
    (["--clip_ratio_c", "0.5"], "needs c > 1"),
])
def test_a_flag_nothing_reads_is_refused(flags, message, capsys):
    """Issue 35: a flag set in a combination where nothing reads it would silently leave the run different from
    its command line; it is refused, naming the flag it needs."""
    with pytest.raises(SystemExit):
        train.parse_args(["--device", "cpu", "--eval_data", "", "--dry_run"] + flags)
    assert message in capsys.readouterr().err


def test_flags_that_act_only_off_policy_are_noted(capsys):
    """Strictly on-policy the ratio is 1: the clip range, the loss type and dual clipping change nothing. Not an
    error (recipes set them for their off-policy stages) but said once; with --mini_batches 2 nothing is said."""
    base = ["--device", "cpu", "--eval_data", "", "--dry_run", "--clip_high", "0.28", "--loss_type", "gspo"]
    train.parse_args(base)
    assert "--clip_high, --loss_type change nothing strictly on-policy" in capsys.readouterr().out
    train.parse_args(base + ["--mini_batches", "2", "--clip_ratio_c", "0"])
    assert "strictly on-policy" not in capsys.readouterr().out


def test_metrics_do_not_scale_with_mini_batches(recorded_toy, warm_model_path, tmp_path):
    """Item 5: 1 vs 2 mini-batches with a vanishing lr (the two updates see the same policy): policy/loss,
    pg_loss, entropy and the KL are the same numbers (Dr. GRPO's normaliser splits evenly), not M times larger."""
    task, replay = recorded_toy
    common = dict(max_steps=1, batch_size=16, group_size=4, lr=1e-9, kl_coef=0.05, entropy_coef=0.1,
                  loss_agg="seq-mean-token-sum-norm", skip_equal_groups=1)
    for m in (1, 2):
        train.main(demo_args(warm_model_path, task, tmp_path / f"m{m}", mini_batches=m, **common),
                   engine=ReplayEngine(replay))
    one, two = first_metrics(tmp_path / "m1"), first_metrics(tmp_path / "m2")
    assert one["policy/entropy"] > 0 and one["policy/loss"] != 0
    for key in ("policy/loss", "policy/pg_loss", "policy/entropy", "policy/kl_ref"):
        assert two[key] == pytest.approx(one[key], rel=1e-4, abs=1e-7), key


class Recording:
    """The real engine, recording the prompts it is asked to sample."""

    def __init__(self, engine):
        self.engine, self.prompts = engine, []

    def generate(self, prompts, **kwargs):
        self.prompts.append([list(p) for p in prompts])
        return self.engine.generate(prompts, **kwargs)

    def __getattr__(self, name):
        return getattr(self.engine, name)


def test_resume_restores_the_runs_flags_and_refuses_changes(vllm_engine, warm_model_path, toy, tmp_path, capsys):
    """Item 4: --resume with no learning flags continues the run with its own flags (not this invocation's
    defaults or preset); run-control flags may change; a learning flag given with another value is refused."""
    common = dict(save_every=1, keep_last=5, batch_size=8, group_size=4, lr=1e-3, kl_coef=0.01, temperature=0.9)
    straight = train.main(demo_args(warm_model_path, toy, tmp_path / "a", max_steps=3, **common), engine=vllm_engine)
    train.main(demo_args(warm_model_path, toy, tmp_path / "b", max_steps=2, **common), engine=vllm_engine)
    resumed = train.main(["--resume", str(tmp_path / "b"), "--max_steps", "3", "--eval_every", "0"],
                         engine=vllm_engine)
    for (name, a), (_, b) in zip(straight.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(a, b), name
    assert comparable(read_metrics(tmp_path / "a")) == comparable(read_metrics(tmp_path / "b"))
    run = json.loads((tmp_path / "b" / "ckpt-000003" / "run.json").read_text())
    assert run["flags"]["lr"] == 1e-3 and run["flags"]["stage_start"] == warm_model_path
    with pytest.raises(SystemExit, match=r"--lr 0.005 \(the run has 0.001\)"):
        train.parse_args(["--resume", str(tmp_path / "b"), "--lr", "5e-3"])


def test_a_stage_resumes_toward_its_own_start_and_gets_a_new_data_order(vllm_engine, warm_model_path, toy, tmp_path):
    """Item 4: a stage started with --init_from regularises toward that checkpoint also after --resume (not
    toward --model), and does not replay the previous stage's data order (unless --data_seed asks for it)."""
    first = Recording(vllm_engine)
    train.main(demo_args(warm_model_path, toy, tmp_path / "s1", max_steps=1, batch_size=8, group_size=4, lr=1e-2),
               engine=first)
    start = tmp_path / "s1" / "ckpt-000001"
    stage = dict(max_steps=2, batch_size=8, group_size=4, lr=1e-3, kl_coef=0.5, save_every=1, keep_last=5,
                 skip_equal_groups=0)  # every sample carries the KL term
    second = Recording(vllm_engine)
    straight = train.main(demo_args(warm_model_path, toy, tmp_path / "s2", **stage) + ["--init_from", str(start)],
                          engine=second)
    train.main(demo_args(warm_model_path, toy, tmp_path / "s2b", **dict(stage, max_steps=1)) +
               ["--init_from", str(start)], engine=vllm_engine)
    # the stage's own flags repeated on the command line are accepted (they equal the stored ones)
    resumed = train.main(demo_args(warm_model_path, toy, tmp_path / "ignored", **stage) +
                         ["--resume", str(tmp_path / "s2b")], engine=vllm_engine)
    for (name, a), (_, b) in zip(straight.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(a, b), name
    run = json.loads((tmp_path / "s2b" / "ckpt-000002" / "run.json").read_text())
    assert run["flags"]["stage"] == 2 and run["flags"]["stage_start"] == str(start / "model")
    assert second.prompts[0] != first.prompts[0], "stage 2 replayed stage 1's data order"
    same_order = Recording(vllm_engine)
    train.main(demo_args(warm_model_path, toy, tmp_path / "s2c", **dict(stage, max_steps=1, kl_coef=0)) +
               ["--init_from", str(start), "--data_seed", "0"], engine=same_order)
    assert same_order.prompts[0] == first.prompts[0]


def test_a_checkpoint_without_run_json_is_refused_on_resume(vllm_engine, warm_model_path, toy, tmp_path, capsys):
    """--resume restores the run's flags from run.json; without it the run's flags are unknown, so resuming is
    refused with the way out (a new stage from those weights), not guessed from the command line."""
    out = tmp_path / "bare"
    train.main(demo_args(warm_model_path, toy, out, max_steps=1, batch_size=8, group_size=4), engine=vllm_engine)
    (out / "ckpt-000001" / "run.json").unlink()
    with pytest.raises(SystemExit, match="has no run.json.*--init_from"):
        train.parse_args(demo_args(warm_model_path, toy, tmp_path / "x", max_steps=2) + ["--resume", str(out)])


def test_long_prompt_is_skipped_and_counted_in_training(vllm_engine, warm_model_path, tmp_path, capsys):
    """Item 6: a problem whose prompt exceeds the engine's context (512 here; --max_prompt_len is 1024) is
    skipped with a warning naming it, and the step goes on."""
    from tiny_model import synthetic_task
    # 683 tokens: within --max_prompt_len (1024), beyond the engine's context (512)
    rows = synthetic_task(15) + [{"id": "too-long", "problem": "What is three plus four? " * 80, "answer": "7"}]
    task = tmp_path / "task.jsonl"
    task.write_text("".join(json.dumps(r) + "\n" for r in rows))
    train.main(demo_args(warm_model_path, str(task), tmp_path / "run", max_steps=1, batch_size=16, group_size=2),
               engine=vllm_engine)
    m = first_metrics(tmp_path / "run")
    assert m["data/skipped_prompts"] == 1 and m["response/length_mean"] > 0
    out = capsys.readouterr().out
    assert "WARNING" in out and "too-long" in out


def test_full_weights_gathers_offloaded_shards_on_the_device_in_the_engine_dtype():
    """Items 7 and 9, the mechanism (NCCL needs a GPU to show it for real): each FSDP2 shard is cast to the
    engine's dtype and moved to the GPU BEFORE full_tensor(), one tensor per request. The stand-in below
    behaves like a DTensor whose local shard lives in host memory (--fsdp_cpu_offload 1)."""
    log = []

    class OffloadedShard:
        def __init__(self, name, device="cpu", dtype=torch.float32):
            self.name, self.device, self.dtype = name, device, dtype

        def to(self, device=None, dtype=None):
            return OffloadedShard(self.name, device or self.device, dtype or self.dtype)

        def full_tensor(self):
            log.append(("gather", self.name, self.device, self.dtype))
            if self.device != "cuda":
                raise RuntimeError("NCCL all-gathers GPU tensors only")
            return torch.zeros(2, dtype=self.dtype)

    class Model:
        def state_dict(self):
            return {"a": OffloadedShard("a"), "b": OffloadedShard("b")}

    stream = distributed.full_weights(Model(), dtype=torch.bfloat16, device="cuda")
    name, tensor = next(stream)
    assert log == [("gather", "a", "cuda", torch.bfloat16)] and tensor.dtype == torch.bfloat16  # lazy: one so far
    assert [n for n, _ in stream] == ["b"] and len(log) == 2


def test_parts_a_second_script_can_reuse(warm_model_path, tmp_path):
    """Item 13: what sft.py will import -- model loading, micro-batching/collate, a step, checkpoint save and
    load (optimizer state and trainer state restored), the metrics logger -- works outside train.main."""
    from data import Sample
    device = torch.device("cpu")
    model = distributed.load_model(warm_model_path, device, torch.float32).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    samples = [Sample([1, 2, 3], [4, 5], [0.0, 0.0], "stop", ""), Sample([1, 2], [6, 7, 8], [0.0] * 3, "stop", "")]
    lengths = [len(s.prompt_ids) + len(s.response_ids) for s in samples]
    for mb in batching.micro_batches(range(2), lengths, token_budget=5):
        ids, attention, mask, _ = batching.collate([samples[i] for i in mb], pad_id=0, device=device)
        logp = logprobs.token_logprobs(model, ids, attention, score_mask=mask)
        (-(logp * mask).sum() / 5).backward()
    optimizer.step()
    from transformers import AutoTokenizer
    ckpt = runs.save_checkpoint(tmp_path, 7, model, AutoTokenizer.from_pretrained(warm_model_path), optimizer,
                                 keep_last=2, trainer_state={"epoch": 3}, run_info={"flags": {"lr": 1e-3}})
    assert runs.latest_checkpoint(tmp_path) == ckpt and runs.read_run_info(ckpt)["flags"]["lr"] == 1e-3
    again = distributed.load_model(ckpt / "model", device, torch.float32)
    fresh = torch.optim.AdamW(again.parameters(), lr=1e-3)
    state = runs.load_checkpoint(ckpt, again, fresh)
    assert state["step"] == 7 and state["epoch"] == 3
    for (name, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items()):
        assert torch.equal(a, b), name
    for a, b in zip(optimizer.state.values(), fresh.state.values()):
        assert torch.equal(a["exp_avg"], b["exp_avg"]) and torch.equal(a["exp_avg_sq"], b["exp_avg_sq"])
    logger = runs.Logger(tmp_path)
    logger.log({"step": 1, "loss": 0.5})
    assert json.loads((tmp_path / "metrics.jsonl").read_text()) == {"step": 1, "loss": 0.5}


def test_a_new_run_refuses_another_runs_out_dir(warm_model_path, toy, tmp_path):
    """A fresh run into a folder that holds another run would append to its metrics.jsonl and, with keep_last,
    could delete its own new checkpoints in favour of the old run's higher-numbered ones: refused, with the way out."""
    for leftover in ("metrics.jsonl", "ckpt-000900"):
        out = tmp_path / leftover.split(".")[0]
        out.mkdir()
        (out / leftover).mkdir() if leftover.startswith("ckpt") else (out / leftover).write_text('{"step": 1}\n')
        with pytest.raises(SystemExit, match=f"--out_dir {out} holds another run.*--resume {out}"):
            train.main(demo_args(warm_model_path, toy, out, max_steps=1))


# ------------------------------------------------------------------------------------------------------------
# Issue 19: defects of the loop (each test fails on the code before it)
# ------------------------------------------------------------------------------------------------------------
def eval_args(model, task, out_dir, **flags):
    return train.parse_args(demo_args(model, task, out_dir, eval_data=task, eval_temperature=0, **flags))


def test_periodic_eval_never_reuses_samples_left_by_a_killed_run(vllm_engine, warm_model_path, toy, tmp_path):
    """Defect 1: eval-<step>/ left by a run killed between its evaluation and its checkpoint holds samples of
    other weights (or other eval flags). The resumed run must sample again: the planted records (every answer
    correct) are not reported, and a lower --eval_limit than theirs does not crash."""
    from transformers import AutoModelForCausalLM
    vllm_engine.update_weights(AutoModelForCausalLM.from_pretrained(warm_model_path).state_dict().items())
    args = eval_args(warm_model_path, toy, tmp_path, eval_limit=8)
    stem = Path(toy).name.split(".")[0]
    stale = tmp_path / "eval-000002" / stem / "samples.jsonl"
    stale.parent.mkdir(parents=True)
    problems = [json.loads(line) for line in Path(toy).read_text().splitlines()][:12]
    stale.write_text("".join(json.dumps({"id": p["id"], "gold": "7", "prompt": "PLANTED", "response": "\\boxed{7}",
                                         "extracted": "7", "correct": True, "finish_reason": "stop", "tokens": 3})
                             + "\n" for p in problems))
    metrics = evaluation.evaluate_during_training(vllm_engine, vllm_engine.tokenizer, args, 2, 0, dp_world=1, tp=1)
    assert metrics[f"eval/{stem}_problems"] == 8
    records = [json.loads(line) for line in stale.read_text().splitlines()]
    assert len(records) == 8 and not any(r["prompt"] == "PLANTED" for r in records)
    assert metrics[f"eval/{stem}"] == sum(r["correct"] for r in records) / 8


def test_periodic_eval_says_how_many_problems_each_score_covers(vllm_engine, warm_model_path, tmp_path):
    """Defect 2: prompts longer than the engine's context are skipped; the score says over how many problems it
    was taken, and a benchmark with none left still reports that it covered 0 problems."""
    from tiny_model import synthetic_task
    long_rows = [{"id": f"long-{k}", "problem": "What is three plus four? " * 80, "answer": "7"} for k in range(3)]
    mixed, only_long = tmp_path / "mixed.jsonl", tmp_path / "only_long.jsonl"
    mixed.write_text("".join(json.dumps(r) + "\n" for r in synthetic_task(5) + long_rows))
    only_long.write_text("".join(json.dumps(r) + "\n" for r in long_rows))
    args = eval_args(warm_model_path, f"{mixed},{only_long}", tmp_path)
    metrics = evaluation.evaluate_during_training(vllm_engine, vllm_engine.tokenizer, args, 1, 0, dp_world=1, tp=1)
    assert metrics["eval/mixed_problems"] == 5 and metrics["eval/mixed_skipped"] == 3 and "eval/mixed" in metrics
    assert metrics["eval/only_long_problems"] == 0 and metrics["eval/only_long_skipped"] == 3
    assert "eval/only_long" not in metrics, "no score for a benchmark with no problem scored"


def test_metric_names_mean_one_thing(vllm_engine, warm_model_path, toy, tmp_path):
    """Defect 4: train.py's throughput is generated tokens per generation second, and says so in its name."""
    train.main(demo_args(warm_model_path, toy, tmp_path / "run", max_steps=1, batch_size=8, group_size=4),
               engine=vllm_engine)
    m = first_metrics(tmp_path / "run")
    assert "perf/tokens_per_s" not in m and m["perf/generated_tokens_per_s"] > 0


def test_samples_log_has_no_duplicates_after_a_resume(vllm_engine, warm_model_path, toy, tmp_path, monkeypatch):
    """Defect 6: a run killed after logging step 2 but before its checkpoint resumes from step 1 and logs step 2
    again: samples.jsonl (like metrics.jsonl) must hold each step once."""
    common = dict(batch_size=8, group_size=4, save_every=1, keep_last=5, eval_every=1, eval_data=toy, eval_limit=2,
                  eval_temperature=0)
    out = tmp_path / "run"
    real_save = train.save_checkpoint

    def killed_at_step_2(out_dir, step, *args, **kwargs):  # the kill: step 2 logged, its checkpoint never written
        if step == 2:
            raise KeyboardInterrupt
        return real_save(out_dir, step, *args, **kwargs)

    monkeypatch.setattr(train, "save_checkpoint", killed_at_step_2)
    with pytest.raises(KeyboardInterrupt):
        train.main(demo_args(warm_model_path, toy, out, max_steps=2, **common), engine=vllm_engine)
    monkeypatch.undo()
    train.main(demo_args(warm_model_path, toy, tmp_path / "ignored", max_steps=3, **common) + ["--resume", str(out)],
               engine=vllm_engine)
    steps = [json.loads(line)["step"] for line in (out / "samples.jsonl").read_text().splitlines()]
    assert steps == sorted(steps) and steps.count(2) == steps.count(1) > 0 and 3 in steps
    assert [m["step"] for m in read_metrics(out)] == [1, 2, 3]


# ------------------------------------------------------------------------------------------------------------
# Issue 22: the 2026 toolbox in the loop
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("combo", [{}, {"kl_coef": 0.1, "entropy_coef": 0.01, "loss_agg": "seq-mean-token-mean"},
                                   {"ppo_epochs": 2, "mini_batches": 2, "tis_cap": 2.0},
                                   {"mask_truncated": 1, "skip_equal_groups": 0, "loss_agg": "seq-mean-token-sum-norm"}])
def test_with_every_new_flag_off_the_step_is_bit_identical_to_before(recorded_toy, warm_model_path, tmp_path, combo):
    """The step of today's train.py (new flags at their defaults) equals the step of the code before issue 22
    (tests/frozen_step.py, with the frozen grpo functions) on the same replayed batch: weights equal bit for bit."""
    import contextlib

    from frozen_step import frozen_update_policy
    from test_grpo import frozen_group_advantages
    from transformers import AutoTokenizer
    task, replay = recorded_toy
    flags = {**dict(max_steps=1, batch_size=8, group_size=4, micro_batch_tokens=64, lr=1e-3, kl_coef=0, packing=0), **combo}
    engine = ReplayEngine(replay)
    policy = train.main(demo_args(warm_model_path, task, tmp_path / "run", **flags), engine=engine)

    args = train.parse_args(demo_args(warm_model_path, task, tmp_path / "frozen", **flags))
    tokenizer = AutoTokenizer.from_pretrained(warm_model_path)
    batcher = data.PromptBatcher(data.load_dataset(task), args.batch_size, seed=args.data_seed)
    problems, prompts, _ = train.next_prompts(batcher, tokenizer, args.template, 10**6)
    assert prompts == engine.prompts_seen[0]
    samples = ReplayEngine(replay).generate(prompts, n=args.group_size)
    rewards, _, _ = train.score(samples, problems, args)
    _, scored, trained = train.select_samples(samples, rewards, args, 0, 1)
    torch.manual_seed(args.seed)
    model = distributed.load_model(warm_model_path, torch.device("cpu"), torch.float32).train()
    reference = None
    if args.kl_coef > 0:
        reference = distributed.load_model(warm_model_path, torch.device("cpu"), torch.float32).eval().requires_grad_(False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay, betas=(0.9, 0.999))
    frozen_update_policy(model, reference, optimizer, samples, frozen_group_advantages(rewards, args.group_size),
                         scored, trained, args, 0, torch.device("cpu"), contextlib.nullcontext(), tokenizer.pad_token_id)
    for (name, a), (_, b) in zip(policy.state_dict().items(), model.state_dict().items()):
        assert torch.equal(a, b), name
    assert any(not torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                     distributed.load_model(warm_model_path, "cpu", torch.float32).state_dict().values()))


NEW_FLAGS = {
    "dynamic_sampling": dict(dynamic_sampling=1, max_sampling_rounds=3),
    "overlong": dict(overlong_buffer_len=4),
    "gspo": dict(loss_type="gspo", clip_low=3e-4, clip_high=4e-4, loss_agg="seq-mean-token-mean"),
    "cispo": dict(loss_type="cispo", clip_low=1.0, clip_high=4.0),
    "icepop": dict(tis_cap=5.0, tis_mode="token_mask", tis_low=0.5),
    "sequence_mask": dict(tis_cap=2.0, tis_mode="sequence_mask", tis_low=0.5),
    "sequence_truncate": dict(tis_cap=2.0, tis_mode="sequence_truncate"),
    "entropy_80_20": dict(top_entropy_quantile=0.2),
}
NEW_FLAGS["all"] = {k: v for flags in NEW_FLAGS.values() for k, v in flags.items() if k not in ("tis_cap", "tis_mode", "tis_low", "loss_type", "clip_low", "clip_high", "loss_agg")} | NEW_FLAGS["sequence_mask"] | NEW_FLAGS["gspo"]


@pytest.mark.parametrize("name", list(NEW_FLAGS))
def test_each_new_flag_runs_the_real_loop(vllm_engine, warm_model_path, toy, tmp_path, name):
    """Every issue-22 flag (and all together) through train.main on the real vLLM engine: finite losses, the
    mismatch metrics every step, and each flag's own signature in the metrics."""
    flags = dict(max_steps=2, batch_size=8, group_size=4, max_response_len=8, **NEW_FLAGS[name])
    train.main(demo_args(warm_model_path, toy, tmp_path / "run", **flags), engine=vllm_engine)
    metrics = read_metrics(tmp_path / "run")
    assert [m["step"] for m in metrics] == [1, 2]
    for m in metrics:
        assert math.isfinite(m["policy/loss"]) and math.isfinite(m["policy/grad_norm"]) and not m["policy/skipped"]
        for key in ("kl_k1", "kl_k3", "ratio_min", "ratio_max", "ratio_mean", "out_token_frac", "out_seq_frac"):
            assert math.isfinite(m[f"rollout/{key}"]), key
        assert m["rollout/ratio_min"] <= m["rollout/ratio_mean"] <= m["rollout/ratio_max"]
        if "dynamic_sampling" in NEW_FLAGS[name]:
            assert 1 <= m["data/rounds"] <= 3 and m["data/groups_kept"] <= 8 <= m["data/groups_generated"]
            if "overlong_buffer_len" not in NEW_FLAGS[name]:  # (a length penalty can even out a mixed group)
                assert m["reward/equal_group_frac"] == 0, "a kept group had all-equal rewards"
        if "overlong_buffer_len" in NEW_FLAGS[name]:
            assert m["reward/mean"] < m["reward/accuracy"] or m["response/length_mean"] <= 4


def test_overlong_penalty_is_added_to_the_reward(handmade, warm_model_path, tmp_path):
    """DAPO eq. 13 in the loop: the handmade batch's rewards are correctness plus the penalty of each length."""
    task, rows = handmade
    calls, engine = [], ReplayEngine(rows)
    real = grpo.group_advantages
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(grpo, "group_advantages", lambda r, *a, **k: calls.append(r.clone()) or real(r, *a, **k))
        train.main(demo_args(warm_model_path, task, tmp_path / "run", max_steps=1, batch_size=4, group_size=4,
                             max_response_len=16, overlong_buffer_len=8), engine=engine)
    samples = ReplayEngine(rows).generate(engine.prompts_seen[0], n=4)   # in the order the step saw them
    lengths = torch.tensor([len(s.response_ids) for s in samples], dtype=torch.float32)
    correct = torch.tensor([0.0 if s.finish_reason == "length" else float(s.text == "\\boxed{7}") for s in samples])
    assert 0 < correct.sum() < len(samples) and lengths.max() > 8, "the batch must show both terms"
    torch.testing.assert_close(calls[0], correct + (-(lengths - 8) / 8).clamp(-1, 0))


def test_dynamic_sampling_resumes_exactly(vllm_engine, warm_model_path, toy, tmp_path):
    """With dynamic sampling a step consumes several batches of the data order: a resumed run continues exactly
    (same metrics, same weights) because the cursor saved with the checkpoint counts every round."""
    common = dict(save_every=1, keep_last=5, batch_size=8, group_size=4, dynamic_sampling=1, max_sampling_rounds=3)
    straight = train.main(demo_args(warm_model_path, toy, tmp_path / "a", max_steps=3, **common), engine=vllm_engine)
    train.main(demo_args(warm_model_path, toy, tmp_path / "b", max_steps=2, **common), engine=vllm_engine)
    resumed = train.main(["--resume", str(tmp_path / "b"), "--max_steps", "3"], engine=vllm_engine)
    assert comparable(read_metrics(tmp_path / "a")) == comparable(read_metrics(tmp_path / "b"))
    assert sum(m["data/rounds"] for m in read_metrics(tmp_path / "a")) > 3, "no step needed a second round"
    for (name, a), (_, b) in zip(straight.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(a, b), name


# ------------------------------------------------------------------------------------------------------------
# Issue 23: packed micro-batches in the loop
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("combo", [{}, {"kl_coef": 0.1, "ppo_epochs": 2, "mini_batches": 2, "tis_cap": 2.0}])
def test_packed_step_equals_padded_step(recorded_toy, warm_model_path, tmp_path, combo):
    """--packing 1 (default) and --packing 0 on the same replayed batch: the same losses, KL, entropy and gradient
    norm (fp32 on CPU: to float rounding), whatever the micro-batch budget."""
    task, replay = recorded_toy
    runs = {}
    for name, extra in (("padded", dict(packing=0, micro_batch_tokens=64)),
                        ("packed", dict(packing=1, micro_batch_tokens=40)), ("packed_big", dict(packing=1))):
        flags = {**dict(max_steps=1, batch_size=8, group_size=4, lr=1e-3, kl_coef=0, grad_clip=1e9), **combo, **extra}
        runs[name] = (train.main(demo_args(warm_model_path, task, tmp_path / name, **flags), engine=ReplayEngine(replay)),
                      first_metrics(tmp_path / name))
    m0 = runs["padded"][1]
    for name in ("packed", "packed_big"):
        m = runs[name][1]
        for key in ("policy/loss", "policy/pg_loss", "policy/grad_norm", "policy/kl_ref", "policy/entropy"):
            assert m[key] == pytest.approx(m0[key], rel=1e-5, abs=1e-7), (name, key)
        # (weights after AdamW are not compared: Adam turns rounding noise in near-zero gradients into lr-sized
        # steps; the gradient itself is compared through its norm, and per tensor in tests/test_packing.py)
