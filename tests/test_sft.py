"""sft.py on CPU: the loss falls on real shipped worked solutions, only response tokens are in it, micro-batching
and 2 ranks change nothing, resume is exact, and the checkpoint is what train.py, eval.py and vLLM load."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import batching
import data
import sft
import train
from conftest import assert_adam_weights_close, assert_grads_close  # noqa: E402
from tiny_model import TOY_FLAGS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def sft_args(model, out_dir, *extra, **flags):
    """Flags of a short CPU run on shipped GSM8K test solutions (the 40% that fit in 300 tokens of the tiny BPE)."""
    base = dict(model=model, train_data="gsm8k_test", template="chat", device="cpu", batch_size=8, max_steps=6,
                lr=3e-3, warmup_steps=2, max_len=300, micro_batch_tokens=4096, gradient_checkpointing=0,
                contamination_check=0, out_dir=out_dir, seed=0)
    base.update(flags)
    return [x for k, v in base.items() for x in (f"--{k}", str(v))] + list(extra)


def read_metrics(out_dir):
    return [json.loads(line) for line in Path(out_dir, "metrics.jsonl").read_text().splitlines()]


def weights(path):
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).state_dict()


def test_loss_falls_on_real_data_and_the_checkpoint_loads_everywhere(tiny_model_path, vllm_engine, tmp_path):
    """20 steps on GSM8K solutions (gradient checkpointing on): the mean loss of the last 4 steps is well below
    that of the first 4. The checkpoint is HF format: transformers reloads it bit for bit, train.py starts an RL
    stage from it (--init_from), and vLLM generates from it (its weights pushed into the session's engine)."""
    out = tmp_path / "sft"
    model = sft.main(sft_args(tiny_model_path, out, max_steps=20, gradient_checkpointing=1, save_every=10))
    losses = [m["sft/loss"] for m in read_metrics(out)]
    assert len(losses) == 20 and all(m["perf/trained_tokens_per_s"] > 0 for m in read_metrics(out))
    first, last = sum(losses[:4]) / 4, sum(losses[-4:]) / 4
    assert last < 0.8 * first, losses
    lrs = [m["sft/lr"] for m in read_metrics(out)]
    assert lrs[0] == pytest.approx(1.5e-3) and lrs[1] == pytest.approx(3e-3) and lrs[-1] == pytest.approx(3e-4)
    ckpt = out / "ckpt-000020"
    assert sorted(p.name for p in out.glob("ckpt-*")) == ["ckpt-000010", "ckpt-000020"]
    assert json.loads((ckpt / "run.json").read_text())["flags"]["train_data"] == "gsm8k_test"
    reloaded = weights(ckpt / "model")
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, reloaded[name]), name
    # RL from the SFT checkpoint (the toy preset's flags on the tiny model)
    rl = tmp_path / "rl"
    train.main([*TOY_FLAGS, "--init_from", str(ckpt), "--train_data", "gsm8k_train", "--out_dir", str(rl),
                "--max_steps", "1", "--batch_size", "4", "--group_size", "2", "--max_response_len", "8"],
               engine=vllm_engine)
    assert json.loads((rl / "ckpt-000001" / "run.json").read_text())["flags"]["stage_start"] == str(ckpt / "model")
    # vLLM: the checkpoint's tensors load into the engine by name, and greedy decoding matches transformers'
    vllm_engine.update_weights(reloaded.items())
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(ckpt / "model")
    prompt = data.render_prompt(data.load_dataset("gsm8k_test")[0]["problem"], tok, "chat")
    sample = vllm_engine.generate([prompt], n=1, temperature=0, max_tokens=12)[0]
    model.eval()
    with torch.no_grad():
        expected = model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=12,
                                  pad_token_id=tok.pad_token_id)[0, len(prompt):].tolist()
    assert sample.response_ids == expected[:len(sample.response_ids)] and len(sample.response_ids) > 0


def test_only_response_tokens_are_in_the_loss(tiny_model_path):
    """sft_step's loss is exactly -mean log p(response token | all before it) over the response tokens (EOS
    included) of the batch, computed here from the model's full logits; the same sum with the prompt tokens
    added is a different number, so a prompt token leaking into the loss fails this test."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    examples = data.load_sft_dataset("gsm8k_test")[:5]
    samples, skipped = sft.tokenize_examples(examples, tok, "chat", max_len=1000)
    assert not skipped and all(s.response_ids[-1] == tok.eos_token_id for s in samples)
    assert all(s.prompt_ids == data.render_prompt(e["problem"], tok, "chat") for s, e in zip(samples, examples))
    assert sft.tokenize_examples(examples, tok, "chat", max_len=300)[1] == ["gsm8k-test-2", "gsm8k-test-4"]
    response_nll, prompt_nll, n_response = 0.0, 0.0, 0
    with torch.no_grad():
        for s in samples:
            ids = torch.tensor([s.prompt_ids + s.response_ids])
            logp = model(ids).logits[0, :-1].log_softmax(-1).gather(-1, ids[0, 1:, None])[:, 0]  # [S-1]
            p = len(s.prompt_ids)
            response_nll -= logp[p - 1:].sum().item()       # predicts tokens p .. end: the response
            prompt_nll -= logp[:p - 1].sum().item()
            n_response += len(s.response_ids)
    args = sft.parse_args(sft_args(tiny_model_path, "unused", micro_batch_tokens=1000))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    out = sft.sft_step(model, optimizer, samples, args, torch.device("cpu"),
                       autocast=torch.autocast("cpu", enabled=False), pad_id=tok.pad_token_id, step=0)
    assert out["response_tokens"] == n_response
    assert out["loss"] == pytest.approx(response_nll / n_response, rel=1e-5)
    assert out["loss"] != pytest.approx((response_nll + prompt_nll) / n_response, rel=1e-2)


def test_micro_batching_changes_nothing(tiny_model_path):
    """One step on 6 examples as 1 micro-batch or as 5 small ones: the same loss and the same gradient (SGD with
    lr 1: the weight change is the clipped gradient)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    samples, _ = sft.tokenize_examples(data.load_sft_dataset("gsm8k_test")[:6], tok, "chat", max_len=1000)
    after = []
    for budget in (100_000, 700):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
        assert len(batching.micro_batches(range(6), [len(s.prompt_ids) + len(s.response_ids) for s in samples],
                                       budget)) == (1 if budget > 1000 else 5)
        args = sft.parse_args(sft_args(tiny_model_path, "unused", micro_batch_tokens=budget))
        optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
        out = sft.sft_step(model, optimizer, samples, args, torch.device("cpu"),
                           autocast=torch.autocast("cpu", enabled=False), pad_id=tok.pad_token_id, step=0)
        after.append((out, model.state_dict()))
    (one, w1), (many, w2) = after
    assert one["loss"] == pytest.approx(many["loss"], rel=1e-5)
    assert one["grad_norm"] == pytest.approx(many["grad_norm"], rel=1e-5)
    start = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32).state_dict()
    # SGD, lr 1: the weight change IS the clipped gradient; normwise (conftest.py's docstring)
    assert_grads_close({k: w1[k] - start[k] for k in w1}, {k: w2[k] - start[k] for k in w1})


def comparable(metrics):
    return [{k: v for k, v in m.items() if not k.startswith(("time/", "perf/"))} for m in metrics]


def test_resume_is_exact(tiny_model_path, tmp_path, monkeypatch):
    """A run interrupted after its step-2 checkpoint and resumed equals the straight run: weights, optimizer
    state, data order (a cosine schedule and 2 epochs of a 12-example set) and metrics."""
    examples = tmp_path / "worked.jsonl"
    examples.write_text("".join(json.dumps(e) + "\n" for e in data.load_sft_dataset("gsm8k_test")[:12]))
    flags = dict(train_data=examples, batch_size=5, max_steps=4, save_every=2, keep_last=5, min_lr_ratio=0.1,
                 max_len=1000)
    sft.main(sft_args(tiny_model_path, tmp_path / "a", **flags))
    real_step, steps = sft.sft_step, []

    def interrupted(*args, **kwargs):  # stopped after the step-2 checkpoint (only the newest keeps the optimizer)
        if len(steps) == 2:
            raise KeyboardInterrupt
        steps.append(args[-1])
        return real_step(*args, **kwargs)

    monkeypatch.setattr(sft, "sft_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sft.main(sft_args(tiny_model_path, tmp_path / "b", **flags))
    monkeypatch.undo()
    assert sorted(p.name for p in (tmp_path / "b").glob("ckpt-*")) == ["ckpt-000002"]
    sft.main(["--resume", str(tmp_path / "b")])
    assert comparable(read_metrics(tmp_path / "a")) == comparable(read_metrics(tmp_path / "b"))
    a, b = weights(tmp_path / "a" / "ckpt-000004" / "model"), weights(tmp_path / "b" / "ckpt-000004" / "model")
    for name in a:
        assert torch.equal(a[name], b[name]), name
    sa, sb = (torch.load(tmp_path / r / "ckpt-000004" / "trainer_state.pt", weights_only=False) for r in "ab")
    assert sa["batcher"] == sb["batcher"] and sa["batcher"]["epoch"] == 1
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save  # optimizer/: DCP's format (runs.py)
    for r in "ab":
        dcp_to_torch_save(tmp_path / r / "ckpt-000004" / "optimizer", tmp_path / f"{r}_optimizer.pt")
    oa, ob = (torch.load(tmp_path / f"{r}_optimizer.pt", weights_only=False)["optimizer"] for r in "ab")
    assert oa["state"].keys() == ob["state"].keys() and oa["state"]
    for key, value in oa["state"].items():
        assert torch.equal(value["exp_avg_sq"], ob["state"][key]["exp_avg_sq"]), key


def test_resume_refuses_a_learning_flag_change(tiny_model_path, tmp_path, capsys):
    sft.main(sft_args(tiny_model_path, tmp_path / "run", max_steps=1))
    with pytest.raises(SystemExit, match=r"--lr 0.0001 \(the run has 0.003\)"):
        sft.parse_args(["--resume", str(tmp_path / "run"), "--lr", "1e-4"])
    assert sft.parse_args(["--resume", str(tmp_path / "run"), "--eval_every", "5"]).lr == 3e-3


def test_two_ranks_equal_one_rank(tiny_model_path, tmp_path):
    """torchrun --nproc_per_node 2 (gloo, FSDP2) against one process: the same losses, grad norms and weights."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    for ranks in (1, 2):
        prefix = [sys.executable] if ranks == 1 else \
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
        proc = subprocess.run(prefix + [str(ROOT / "sft.py")] + sft_args(tiny_model_path, tmp_path / f"r{ranks}",
                                                                         max_steps=3),
                              capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
        assert proc.returncode == 0, proc.stderr[-4000:]
    one, two = read_metrics(tmp_path / "r1"), read_metrics(tmp_path / "r2")
    assert [m["step"] for m in two] == [1, 2, 3], "rank 0 alone logs"
    for a, b in zip(one, two):
        for key in ("sft/loss", "sft/grad_norm", "sft/response_tokens"):
            assert a[key] == pytest.approx(b[key], rel=1e-4), key
    w1, w2 = weights(tmp_path / "r1" / "ckpt-000003" / "model"), weights(tmp_path / "r2" / "ckpt-000003" / "model")
    start = weights(tiny_model_path)
    assert any((start[n] - w1[n]).abs().max() > 1e-3 for n in w1), "training changed nothing"
    assert_adam_weights_close(w1, w2, start)   # after AdamW: normwise (conftest.py's docstring)


def test_periodic_eval_goes_through_eval_py(tiny_model_path, vllm_engine, tmp_path):
    """--eval_before_train and --eval_every: eval/* at steps 0, 2 and 3 (the end), from eval.py's samples."""
    out = tmp_path / "sft"
    sft.main(sft_args(tiny_model_path, out, max_steps=3, eval_data="gsm8k_test", eval_limit=3, eval_every=2,
                      eval_before_train=1, eval_temperature=0, max_response_len=8), engine=vllm_engine)
    evals = [(m["step"], m["eval/gsm8k_test"]) for m in read_metrics(out) if "eval/gsm8k_test" in m]
    assert [step for step, _ in evals] == [0, 2, 3]
    summary = json.loads((out / "eval-000003" / "summary.json").read_text())
    assert summary["results"]["gsm8k_test"]["problems"] == 3 and summary["settings"]["temperature"] == 0


@pytest.mark.parametrize("row,message", [
    ({"problem": "1+1?", "answer": "2"}, ":1: missing or empty 'solution'"),
    ({"solution": "x", "answer": "2"}, ":1: missing or empty 'problem'"),
    ({"messages": [{"role": "user", "content": "hi"}]}, ":1: 'messages' must be"),
    ({"messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": "again"}]}, ":1: 'messages'"),
])
def test_bad_worked_examples_name_file_line_and_field(tmp_path, row, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(data.DatasetError, match=message) as info:
        data.load_sft_dataset(str(path))
    assert str(path) in str(info.value)


def test_targets_follow_the_template_and_conversations_are_taught_as_written(tokenizer, tmp_path):
    ex = {"id": "1", "problem": "1+1?", "solution": "One and one make two.", "answer": "2"}
    assert sft.sft_response(ex, "chat") == "One and one make two.\nThe final answer is $\\boxed{2}$."
    assert sft.sft_response(ex, "think_answer") == "<think>One and one make two.</think> <answer>2</answer>"
    boxed = dict(ex, solution="So it is $\\boxed{2}$.")
    assert sft.sft_response(boxed, "boxed") == "So it is $\\boxed{2}$."
    from reward import math_reward
    for template in ("chat", "boxed", "think_answer"):   # the grader reads what SFT teaches
        assert math_reward(sft.sft_response(ex, template), "2") == 1.0
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "Say hi."},
                                             {"role": "assistant", "content": "hi"}]}) + "\n")
    samples, _ = sft.tokenize_examples(data.load_sft_dataset(str(path)), tokenizer, "chat", max_len=100)
    assert tokenizer.decode(samples[0].prompt_ids) == "<|im_start|>user\nSay hi.<|im_end|>\n<|im_start|>assistant\n"
    assert tokenizer.decode(samples[0].response_ids) == "hi<|im_end|>"


def test_cli_dry_run_and_bad_flags():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    dry = subprocess.run([sys.executable, str(ROOT / "sft.py"), "--device", "cpu", "--train_data", "out/traces.jsonl",
                          "--dry_run"], capture_output=True, text=True, env=env, cwd=ROOT)
    assert dry.returncode == 0 and "dry run ok" in dry.stdout
    bad = subprocess.run([sys.executable, str(ROOT / "sft.py"), "--device", "cpu", "--train_data", "nope.jsonl"],
                         capture_output=True, text=True, env=env, cwd=ROOT)
    assert bad.returncode != 0 and "nope.jsonl" in bad.stderr


def test_a_prompt_that_opens_think_gets_a_target_that_closes_it(tokenizer, tmp_path):
    """DeepSeek-R1-Distill's chat template ends the prompt with `<think>\\n`; RL and eval then grade with
    think_prefilled (a response that never writes </think> earns 0), so SFT must teach responses that close the
    block and then state the boxed answer. R1-style traces are not wrapped twice; a conversation's leading <think>
    (already in the prompt) is dropped; an answer-less row whose solution has no box is skipped, not taught."""
    from reward import math_reward
    r1 = tokenizer.__class__.from_pretrained(tokenizer.name_or_path)
    r1.chat_template = tokenizer.chat_template.replace("assistant\n{% endif %}", "assistant\n<think>\n{% endif %}")
    assert data.prompt_opens_think(r1, "chat") and not data.prompt_opens_think(tokenizer, "chat")
    rows = [{"id": "plain", "problem": "1+1?", "solution": "One and one make two.", "answer": "2"},
            {"id": "boxed", "problem": "2+2?", "solution": "Two twos: $\\boxed{4}$."},
            {"id": "trace", "problem": "3+3?", "solution": "<think>three and three</think> It is $\\boxed{6}$.",
             "answer": "6"},
            {"id": "no-answer", "problem": "4+4?", "solution": "Eight, I think."},
            {"id": "empty-answer", "problem": "5+5?", "solution": "Ten: $\\boxed{10}$.", "answer": ""},
            {"id": "talk", "messages": [{"role": "user", "content": "6+6?"},
                                        {"role": "assistant", "content": "<think>\nsix and six\n</think>\n\n\\boxed{12}"}]}]
    path = tmp_path / "r1.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    examples = data.load_sft_dataset(str(path))
    assert examples[4]["answer"] is None   # an empty answer is no answer (the box in the solution is)
    samples, skipped = sft.tokenize_examples(examples, r1, "chat", max_len=400)
    assert skipped == ["no-answer"]
    golds = ["2", "4", "6", "10", "12"]
    for sample, gold in zip(samples, golds):
        prompt, response = r1.decode(sample.prompt_ids), r1.decode(sample.response_ids)
        assert prompt.endswith("<think>\n") and response.count("</think>") == 1 and "<think>" not in response
        assert response.endswith("<|im_end|>") and response.count("<|im_end|>") == 1
        assert math_reward(response, gold, think_prefilled=True) == 1.0, response
        assert math_reward(response, str(int(gold) + 1), think_prefilled=True) == 0.0
    # the same rows without a prefilled <think>: the trace keeps its one pair of tags, think_answer gets one pair
    plain, _ = sft.tokenize_examples(examples, tokenizer, "chat", max_len=400)
    assert tokenizer.decode(plain[2].response_ids).count("<think>") == 1
    trace = sft.sft_response(examples[2], "think_answer")
    assert trace == "<think>three and three</think> <answer>6</answer>"
    assert sft.sft_response(examples[1], "think_answer") == "<think>Two twos: $\\boxed{4}$.</think> <answer>4</answer>"


def test_epochs_count_whole_batches(tiny_model_path, tmp_path):
    """--epochs E is E passes over the examples in whole batches (the batcher never draws a partial batch)."""
    rows = [{"id": str(k), "problem": f"{k}+1?", "solution": f"It is $\\boxed{{{k + 1}}}$."} for k in range(10)]
    path = tmp_path / "ten.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    sft.main(sft_args(tiny_model_path, tmp_path / "run", "--epochs", "2", max_steps=0, batch_size=4,
                      train_data=str(path), max_len=200))
    metrics = read_metrics(tmp_path / "run")
    assert [m["step"] for m in metrics] == [1, 2, 3, 4]      # 2 epochs x (10 // 4) batches


def test_a_new_run_refuses_another_runs_out_dir(tiny_model_path, tmp_path):
    sft.main(sft_args(tiny_model_path, tmp_path / "run", max_steps=1))
    with pytest.raises(SystemExit, match="holds another run"):
        sft.main(sft_args(tiny_model_path, tmp_path / "run", max_steps=1))
    assert [m["step"] for m in read_metrics(tmp_path / "run")] == [1]   # the first run's log is untouched


def test_sft_refuses_to_guess_its_training_set(capsys):
    """Defect 3: the default training set was gsm8k_test, a test split that eval.py --preset seed reports on."""
    with pytest.raises(SystemExit):
        sft.parse_args(["--device", "cpu", "--model", "Qwen/Qwen2.5-Math-1.5B"])
    assert "--train_data" in capsys.readouterr().err


def test_a_continued_sft_stage_gets_a_new_data_order(tmp_path):
    """Defect 5: SFT from an SFT checkpoint (--model ckpt) is stage 2 with its own data seed, so it does not
    replay stage 1's order; --data_seed still pins an order when asked."""
    ckpt = tmp_path / "sft" / "ckpt-000010"
    ckpt.mkdir(parents=True)
    stage1 = sft.parse_args(["--device", "cpu", "--model", "Qwen/Qwen2.5-Math-1.5B", "--train_data", "x.jsonl",
                             "--dry_run"])
    (ckpt / "run.json").write_text(json.dumps({"flags": vars(stage1)}))
    stage2 = sft.parse_args(["--device", "cpu", "--model", str(ckpt), "--train_data", "x.jsonl", "--dry_run"])
    assert (stage1.stage, stage2.stage) == (1, 2) and stage1.data_seed != stage2.data_seed
    orders = [next(data.PromptBatcher(list(range(64)), 8, seed=a.data_seed)) for a in (stage1, stage2)]
    assert orders[0] != orders[1]
    pinned = sft.parse_args(["--device", "cpu", "--model", str(ckpt), "--train_data", "x.jsonl", "--dry_run",
                             "--data_seed", str(stage1.data_seed)])
    assert pinned.data_seed == stage1.data_seed
