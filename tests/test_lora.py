"""LoRA (lora.py, train.py / sft.py --lora_rank) on CPU: the tiny model, the session's real vLLM engine, PEFT itself.

What is proved here: with B = 0 the policy IS the base model and only the adapters get gradients; the merged push
makes vLLM sample from the LoRA model (alignment as tight as full fine-tuning's); the KL reference (adapters off)
is the base model exactly, so KL is 0 before the first update; a LoRA run learns the toy task, resumes exactly,
saves an adapter PEFT loads to the same log-probs and a merged model/ transformers loads, starts a new stage from
its checkpoint, and runs sft.py -> train.py; 2 gloo ranks equal 1; bad flags fail before anything is written.
"""
import json
import math
import types
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from conftest import assert_adam_weights_close
from tiny_model import TOY_FLAGS
from transformers import AutoModelForCausalLM

import distributed
import lora
import sft
import train
from logprobs import token_logprobs

ROOT = Path(__file__).resolve().parents[1]
LORA_FLAGS = ["--lora_rank", "4", "--lr", "3e-3"]


def flags(rank=4, alpha=32, targets=None, seed=0):
    return types.SimpleNamespace(lora_rank=rank, lora_alpha=alpha, lora_targets=targets, seed=seed)


def lora_model(path, dtype=torch.float32, **kwargs):
    return distributed.load_model(path, torch.device("cpu"), dtype, wrap=lora.wrapper(flags(**kwargs)))


def batch(tokenizer, texts=("What is 2+2? \\boxed{4}", "Compute 3*7 and explain. The answer is 21.")):
    rows = [tokenizer.encode(t) for t in texts]
    width = max(map(len, rows))
    ids = torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows])
    attention = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    return ids, attention


def logp(model, ids, attention, temperature=1.0):
    with torch.no_grad():
        return token_logprobs(model, ids, attention, temperature) * attention[:, 1:]


def perturb_adapters(model, std=0.05, seed=1):
    """B != 0 (as after training), so the LoRA model differs from the base."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * std)


def test_zero_B_is_the_base_model_and_only_adapters_get_gradients(tiny_model_path, tokenizer):
    base = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    policy = lora_model(tiny_model_path)
    ids, attention = batch(tokenizer)
    assert torch.equal(logp(policy, ids, attention), logp(base, ids, attention))   # exactly, not approximately
    (-token_logprobs(policy, ids, attention)[attention[:, 1:].bool()].sum()).backward()
    adapters = {n: p for n, p in policy.named_parameters() if p.requires_grad}
    layers = base.config.num_hidden_layers
    assert len(adapters) == 2 * 7 * layers          # A and B on q, k, v, o, gate, up, down of every layer
    assert all(".lora_A." in n or ".lora_B." in n for n in adapters)
    assert all(p.grad is None for p in policy.parameters() if not p.requires_grad)
    assert all(adapters[n].grad.abs().sum() > 0 for n in adapters if ".lora_B." in n)   # A's gradient is B^T(...) = 0
    q_v = lora_model(tiny_model_path, targets="q_proj,v_proj")
    assert sum(p.requires_grad for p in q_v.parameters()) == 2 * 2 * layers


def test_base_stays_in_the_compute_dtype_and_adapters_are_fp32(tiny_model_path):
    """No fp32 master copy of the frozen weights: the base loads in --dtype (bf16 here), the adapters are fp32."""
    policy = lora_model(tiny_model_path, dtype=torch.bfloat16)
    assert {p.dtype for p in policy.parameters() if not p.requires_grad} == {torch.bfloat16}
    assert {p.dtype for p in policy.parameters() if p.requires_grad} == {torch.float32}


def test_in_bf16_the_trainer_computes_with_exactly_the_pushed_weights(tiny_model_path, tokenizer):
    """bf16 base under autocast (the GPU setting): the LoRA policy's log-probs equal, bit for bit, those of a plain
    model holding the merged weights the engine is pushed, bf16(W + scale B A) (lora._MergedLinear). PEFT's own
    forward, bf16 W x + B A x, would differ from them by the merge's rounding (measured here: mean 0.007 nats)."""
    policy = lora_model(tiny_model_path, dtype=torch.bfloat16)
    perturb_adapters(policy)
    engine_side = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.bfloat16)
    engine_side.load_state_dict(dict(distributed.full_weights(policy, torch.bfloat16)))
    ids, attention = batch(tokenizer)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        trainer, engine = logp(policy, ids, attention), logp(engine_side, ids, attention)
        assert torch.equal(trainer, engine)
        (-token_logprobs(policy, ids, attention)[attention[:, 1:].bool()].sum()).backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all()
               for p in policy.parameters() if p.requires_grad)


def test_engine_exact_forward_has_peft_gradients(tiny_model_path, tokenizer):
    """The adapters' gradients through lora._MergedLinear (low-rank formulas) equal those of PEFT's own forward
    (autograd through W x + s B A x) in fp32."""
    from peft.tuners.lora import Linear as LoraLinear
    policy = lora_model(tiny_model_path)
    perturb_adapters(policy)
    ids, attention = batch(tokenizer)

    def grads():
        policy.zero_grad()
        (-token_logprobs(policy, ids, attention)[attention[:, 1:].bool()].sum()).backward()
        return {n: p.grad.clone() for n, p in policy.named_parameters() if p.requires_grad}

    ours = grads()
    for module in policy.modules():
        if isinstance(module, LoraLinear):
            del module.forward          # PEFT's class forward again
    peft = grads()
    for name in ours:
        assert torch.allclose(ours[name], peft[name], rtol=1e-4, atol=1e-6), name


def test_reference_with_adapters_off_is_the_base_model(tiny_model_path, tokenizer):
    base = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    policy = lora_model(tiny_model_path)
    perturb_adapters(policy)
    ids, attention = batch(tokenizer)
    reference = lora.adapters_disabled(policy)
    assert torch.equal(logp(reference, ids, attention), logp(base, ids, attention))
    assert not torch.allclose(logp(policy, ids, attention), logp(base, ids, attention), atol=1e-3)
    assert not torch.equal(logp(policy, ids, attention), logp(reference, ids, attention))  # switched back on


def test_merged_push_makes_vllm_sample_the_lora_model(vllm_engine, tiny_model_path, tokenizer):
    """The engine gets W + scale * B A (lora.merged_weights through distributed.full_weights): vLLM's log-probs of
    its own samples equal the trainer's LoRA model's (<= 1.001, as full fine-tuning's push in test_rollout.py)
    and not the base model's."""
    from data import render_prompt
    from test_rollout import alignment
    base = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    policy = lora_model(tiny_model_path)
    perturb_adapters(policy)
    names = [n for n, _ in distributed.full_weights(policy)]
    assert sorted(names) == sorted(base.state_dict()), "the merged push names every tensor of the base model"
    merged = dict(distributed.full_weights(policy))
    assert not torch.equal(merged["model.layers.0.mlp.down_proj.weight"], base.state_dict()["model.layers.0.mlp.down_proj.weight"])
    vllm_engine.update_weights(distributed.full_weights(policy, vllm_engine.dtype))
    prompts = [render_prompt(p, tokenizer, "chat") for p in ("What is 1+1?", "Find x if 2x = 10.")]
    for temperature in (1.0, 0.6):
        samples = vllm_engine.generate(prompts, n=4, temperature=temperature, max_tokens=32, seed=3)
        worst, _ = alignment(policy, samples, temperature, tokenizer.pad_token_id)
        assert worst <= 1.001, worst
        assert alignment(base, samples, temperature, tokenizer.pad_token_id)[0] > 1.01, "the push changed nothing"
    vllm_engine.update_weights(base.state_dict().items())


def test_lora_learns_the_toy_task_with_kl_zero_before_the_first_update(vllm_engine, warm_model_path, tmp_path):
    """--lora_rank 4 on the toy task (tiny_model.synthetic_task, as test_train.py's full fine-tuning run); the KL
    reference is the policy with adapters off, so the first step's KL is exactly 0.
    At temperature 0.3, not 1: the tiny model's logits span ~2 nats (embeddings of norm ~0.2, tied to the head),
    and LoRA cannot grow the embeddings or the final norm, so at T = 1 it caps P(7) near 0.3 (measured: supervised
    on \boxed{7} it plateaus there, where full fine-tuning goes to 1; GRPO at T = 1 stays at ~0.2). A real LM's
    logits span tens of nats. At T = 0.3 (measured, seed 0): 0.15 -> 0.73 in 30 steps."""
    from tiny_model import synthetic_task
    task = tmp_path / "task.jsonl"
    task.write_text("".join(json.dumps(r) + "\n" for r in synthetic_task(200)))
    out = tmp_path / "run"
    train.main([*TOY_FLAGS, "--model", warm_model_path, "--train_data", str(task), "--out_dir", str(out),
                *LORA_FLAGS, "--kl_coef", "0.001", "--max_steps", "30", "--temperature", "0.3"], engine=vllm_engine)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    rewards = [m["reward/mean"] for m in rows]
    assert rows[0]["policy/kl_ref"] == 0.0
    assert rows[-1]["policy/kl_ref"] > 0
    assert sum(rewards[:3]) / 3 <= 0.2 and sum(rewards[-5:]) / 5 >= 0.6, rewards
    assert max(m["rollout/align_max"] for m in rows) <= 1.001
    assert (out / "ckpt-000030" / "adapter" / "adapter_config.json").exists()


@pytest.fixture(scope="module")
def lora_runs(tmp_path_factory, vllm_engine, warm_model_path):
    """A LoRA run of 4 steps straight, and one of 2 steps resumed to 4."""
    from tiny_model import synthetic_task
    tmp = tmp_path_factory.mktemp("lora_runs")
    task = tmp / "task.jsonl"
    task.write_text("".join(json.dumps(r) + "\n" for r in synthetic_task(64)))

    def args(out, steps):
        return [*TOY_FLAGS, "--model", warm_model_path, "--train_data", str(task), "--out_dir", str(out),
                *LORA_FLAGS, "--kl_coef", "0.01", "--max_steps", str(steps), "--save_every", "2", "--keep_last", "5",
                "--batch_size", "8", "--group_size", "4"]

    straight = train.main(args(tmp / "a", 4), engine=vllm_engine)
    train.main(args(tmp / "b", 2), engine=vllm_engine)
    resumed = train.main(args(tmp / "ignored", 4) + ["--resume", str(tmp / "b")], engine=vllm_engine)
    return types.SimpleNamespace(tmp=tmp, task=task, args=args, straight=straight, resumed=resumed)


def comparable(out_dir):
    return [{k: v for k, v in json.loads(line).items() if not k.startswith(("time/", "perf/"))}
            for line in Path(out_dir, "metrics.jsonl").read_text().splitlines()]


def test_resume_is_exact(lora_runs):
    assert comparable(lora_runs.tmp / "a") == comparable(lora_runs.tmp / "b")
    a, b = (load_file(lora_runs.tmp / run / "ckpt-000004" / "adapter" / "adapter_model.safetensors") for run in "ab")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert all(v.dtype == torch.float32 for v in a.values())
    first = load_file(lora_runs.tmp / "a" / "ckpt-000002" / "adapter" / "adapter_model.safetensors")
    assert any(not torch.equal(first[k], a[k]) for k in a), "steps 3-4 changed nothing"
    for (name, x), (_, y) in zip(lora_runs.straight.state_dict().items(), lora_runs.resumed.state_dict().items()):
        assert torch.equal(x, y), name


def test_checkpoint_loads_in_peft_transformers_and_as_a_new_stage(lora_runs, warm_model_path, tokenizer, vllm_engine):
    """adapter/ is PEFT's format: PeftModel.from_pretrained on the base gives the trained policy's log-probs;
    model/ (merged) loads in transformers with the same log-probs; --init_from the checkpoint starts a new stage
    on the merged weights (its KL reference), so its first KL is 0 again."""
    from peft import PeftModel
    ckpt = lora_runs.tmp / "a" / "ckpt-000004"
    assert json.loads((ckpt / "adapter" / "adapter_config.json").read_text())["r"] == 4
    ids, attention = batch(tokenizer)
    trained = logp(lora_runs.straight, ids, attention)
    peft_model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(warm_model_path), str(ckpt / "adapter"))
    assert torch.allclose(logp(peft_model, ids, attention), trained, atol=1e-5)   # PEFT's own forward: W x + s B A x
    merged = AutoModelForCausalLM.from_pretrained(ckpt / "model", dtype=torch.float32)
    assert torch.allclose(logp(merged, ids, attention), trained, atol=1e-5)
    # vLLM generates from the exported model/ what the trained policy would (the path eval.py --model takes)
    from data import render_prompt
    from test_rollout import alignment
    vllm_engine.update_weights(merged.state_dict().items())
    samples = vllm_engine.generate([render_prompt("What number comes after six?", tokenizer, "chat")], n=8,
                                   temperature=1.0, max_tokens=12, seed=5)
    assert alignment(lora_runs.straight, samples, 1.0, tokenizer.pad_token_id)[0] <= 1.001
    assert not torch.allclose(logp(AutoModelForCausalLM.from_pretrained(warm_model_path), ids, attention), trained,
                              atol=1e-5)
    out = lora_runs.tmp / "stage2"
    train.main(lora_runs.args(out, 1) + ["--init_from", str(ckpt)], engine=vllm_engine)
    run = json.loads((out / "ckpt-000001" / "run.json").read_text())["flags"]
    assert run["stage"] == 2 and run["stage_start"] == str(ckpt / "model")
    assert comparable(out)[0]["policy/kl_ref"] == 0.0


def test_resume_refuses_changed_lora_flags(lora_runs):
    for changed in (["--lora_rank", "8"], ["--lora_alpha", "16.0"], ["--lora_targets", "q_proj"]):
        with pytest.raises(SystemExit) as exc:
            train.parse_args(["--resume", str(lora_runs.tmp / "b"), *changed])
        message = str(exc.value.code)
        assert f"{changed[0]} {changed[1]}" in message and "(the run has" in message, message
    assert sorted(p.name for p in (lora_runs.tmp / "b").glob("ckpt-*")) == ["ckpt-000002", "ckpt-000004"]


def test_sft_with_lora_then_train_with_lora(tiny_model_path, vllm_engine, tmp_path):
    from test_sft import sft_args
    sft.main(sft_args(tiny_model_path, tmp_path / "sft", max_steps=3, lora_rank=4, lr=1e-2))
    ckpt = tmp_path / "sft" / "ckpt-000003"
    assert (ckpt / "adapter" / "adapter_model.safetensors").exists() and (ckpt / "model" / "config.json").exists()
    assert not torch.equal(AutoModelForCausalLM.from_pretrained(ckpt / "model").state_dict()["model.layers.0.mlp.up_proj.weight"],
                           AutoModelForCausalLM.from_pretrained(tiny_model_path).state_dict()["model.layers.0.mlp.up_proj.weight"])
    from tiny_model import synthetic_task
    task = tmp_path / "task.jsonl"
    task.write_text("".join(json.dumps(r) + "\n" for r in synthetic_task(16)))
    train.main([*TOY_FLAGS, "--init_from", str(ckpt), "--train_data", str(task), "--out_dir", str(tmp_path / "rl"),
                *LORA_FLAGS, "--kl_coef", "0.01", "--max_steps", "1", "--batch_size", "4", "--group_size", "4"],
               engine=vllm_engine)
    row = comparable(tmp_path / "rl")[0]
    assert row["policy/kl_ref"] == 0.0 and row["rollout/align_max"] <= 1.001


@pytest.mark.parametrize("argv, message", [
    (["--lora_rank", "-1"], "--lora_rank -1: must be > 0"),
    (["--lora_rank", "0", "--lora_targets", "q_proj"], "takes no --lora_targets"),
    (["--lora_rank", "4", "--lora_alpha", "0"], "--lora_alpha 0.0: must be > 0"),
    (["--lora_rank", "4", "--lora_targets", "q_proj,qkv_proj"], "qkv_proj match(es) no linear layer"),
])
@pytest.mark.parametrize("script", ["train", "sft"])
def test_bad_lora_flags_fail_before_anything_is_written(argv, message, script, tiny_model_path, tmp_path, capsys):
    module = {"train": train, "sft": sft}[script]
    out = tmp_path / "run"
    with pytest.raises(SystemExit):
        module.parse_args(["--model", tiny_model_path, "--train_data", "gsm8k_test", "--out_dir", str(out), *argv])
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_two_gloo_ranks_equal_one_rank_and_resume(recorded_toy, warm_model_path, tmp_path):
    """FSDP2 shards base and adapters together (mixed bf16/fp32 blocks on GPU; fp32 here): 2 ranks give the 1-rank
    metrics and adapters, and a 2-rank resume continues exactly."""
    from test_distributed import flags as dist_flags
    from test_distributed import launch, metrics
    task, replay = recorded_toy
    extra = dict(lora_rank=4, lr="3e-3")
    launch(1, dist_flags(warm_model_path, task, tmp_path / "one", 2, **extra), replay=replay)
    launch(2, dist_flags(warm_model_path, task, tmp_path / "two", 2, **extra), replay=replay)
    for a, b in zip(metrics(tmp_path / "one"), metrics(tmp_path / "two")):
        for key in ("reward/mean", "policy/loss", "policy/kl_ref", "policy/grad_norm", "policy/entropy"):
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key

    def adapter(run, step):
        return load_file(tmp_path / run / f"ckpt-{step:06d}" / "adapter" / "adapter_model.safetensors")

    one, two = adapter("one", 2), adapter("two", 2)
    assert any(not torch.equal(adapter("one", 1)[k], one[k]) for k in one)
    # after AdamW, normwise (conftest.py's docstring): the scale is what training moved, B from 0 and A from step 1
    moved = torch.sqrt(sum((one[k] ** 2).sum() for k in one if "lora_B" in k)
                       + sum(((one[k] - adapter("one", 1)[k]) ** 2).sum() for k in one if "lora_A" in k))
    assert one.keys() == two.keys()
    assert torch.sqrt(sum(((one[k] - two[k]) ** 2).sum() for k in one)) <= 1e-2 * moved
    launch(2, dist_flags(warm_model_path, task, tmp_path / "two_b", 1, **extra), replay=replay)  # stopped after 1
    launch(2, dist_flags(warm_model_path, task, tmp_path / "ignored", 2, **extra) + ["--resume", str(tmp_path / "two_b")],
           replay=replay)
    resumed = adapter("two_b", 2)
    assert all(torch.equal(resumed[k], two[k]) for k in two)
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "two" / "ckpt-000002" / "model").state_dict()
    single = AutoModelForCausalLM.from_pretrained(tmp_path / "one" / "ckpt-000002" / "model").state_dict()
    assert_adam_weights_close(single, merged, AutoModelForCausalLM.from_pretrained(warm_model_path).state_dict())
    assert not math.isnan(metrics(tmp_path / "two_b")[-1]["policy/loss"])
