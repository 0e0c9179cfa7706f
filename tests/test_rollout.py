"""rollout.py on the real vLLM CPU engine (one per session) and the transformers fallback, tiny model, fp32."""
import math

import pytest
import torch

from data import render_prompt
from logprobs import token_logprobs

PROBLEMS = ["What is $1+1$?", "Compute \\frac{3}{4} + \\frac{1}{4}.", "Find x if 2x = 10.", "How many primes are below 20?"]


@pytest.fixture(scope="module")
def prompts(tokenizer):
    return [render_prompt(p, tokenizer, "chat") for p in PROBLEMS]


@pytest.fixture(scope="module")
def trainer_model(tiny_model_path):
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)


@pytest.fixture(scope="module", autouse=True)
def engine_holds_the_trainer_weights(vllm_engine, trainer_model):
    """The session's engine may hold weights another test trained: start from the trainer's."""
    vllm_engine.update_weights(trainer_model.state_dict().items())


def alignment(model, samples, temperature, pad_id):
    """The Perplexity study's metric, exp(mean |logp_trainer - logp_sampler|), worst sequence and mean."""
    width = max(len(s.prompt_ids) + len(s.response_ids) for s in samples)
    ids = torch.full((len(samples), width), pad_id)
    attention = torch.zeros_like(ids)
    for b, s in enumerate(samples):
        seq = s.prompt_ids + s.response_ids
        ids[b, :len(seq)] = torch.tensor(seq)
        attention[b, :len(seq)] = 1
    with torch.no_grad():
        logp = token_logprobs(model, ids, attention, temperature=temperature)
    per_seq = []
    for b, s in enumerate(samples):
        start = len(s.prompt_ids) - 1  # logp[:, t] scores token t+1
        trainer = logp[b, start:start + len(s.response_ids)]
        diff = (trainer - torch.tensor(s.logprobs)).abs()
        per_seq.append(math.exp(diff.mean().item()))
    return max(per_seq), sum(per_seq) / len(per_seq)


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_vllm_logprobs_align_with_trainer(vllm_engine, trainer_model, prompts, tokenizer, temperature):
    samples = vllm_engine.generate(prompts, n=4, temperature=temperature, max_tokens=48, seed=1)
    worst, mean = alignment(trainer_model, samples, temperature, tokenizer.pad_token_id)
    assert worst <= 1.001, (worst, mean)


def test_update_weights_pushes_every_parameter(vllm_engine, trainer_model, prompts, tokenizer):
    import copy
    original = {k: v.clone() for k, v in trainer_model.state_dict().items()}
    perturbed = copy.deepcopy(trainer_model)
    torch.manual_seed(5)
    with torch.no_grad():
        for name, p in perturbed.named_parameters():  # embeddings (tied head), norms, biases, projections
            p.add_(torch.randn_like(p) * (0.5 * p.abs().mean() + 0.02))
    try:
        seconds = vllm_engine.update_weights(perturbed.state_dict().items())
        assert seconds >= 0
        samples = vllm_engine.generate(prompts, n=4, temperature=1.0, max_tokens=48, seed=2)
        new_worst, _ = alignment(perturbed, samples, 1.0, tokenizer.pad_token_id)
        _, old_mean = alignment(trainer_model, samples, 1.0, tokenizer.pad_token_id)
        assert new_worst <= 1.001, new_worst
        assert old_mean > 1.05, f"samples still look like the old weights ({old_mean})"
    finally:
        vllm_engine.update_weights(original.items())
    samples = vllm_engine.generate(prompts[:1], n=2, temperature=1.0, max_tokens=16, seed=3)
    assert alignment(trainer_model, samples, 1.0, tokenizer.pad_token_id)[0] <= 1.001


def check_bookkeeping(engine, prompts, eos_id, max_tokens=48, short_max_tokens=None):
    n = 16
    samples = engine.generate(prompts, n=n, temperature=1.0, max_tokens=max_tokens, seed=7)
    if short_max_tokens:  # a model that always stops early: cut some responses off on purpose
        samples += engine.generate(prompts, n=n, temperature=1.0, max_tokens=short_max_tokens, seed=7)
    assert len(samples) == len(prompts) * n * (2 if short_max_tokens else 1)
    for i, prompt in enumerate(prompts):
        for s in samples[i * n:(i + 1) * n]:
            assert s.prompt_ids == prompt, "samples must come n per prompt, in prompt order"
    finishes = {s.finish_reason for s in samples}
    assert finishes <= {"stop", "length"}
    for s in samples:
        assert len(s.logprobs) == len(s.response_ids) > 0
        assert all(lp <= 0 for lp in s.logprobs)
        if s.finish_reason == "length":
            assert len(s.response_ids) in (max_tokens, short_max_tokens) and s.response_ids[-1] != eos_id
        else:
            assert s.response_ids[-1] == eos_id and eos_id not in s.response_ids[:-1]
    assert "stop" in finishes and "length" in finishes, finishes
    first = samples[:len(prompts) * n]
    again = engine.generate(prompts, n=n, temperature=1.0, max_tokens=max_tokens, seed=7)
    assert [s.response_ids for s in again] == [s.response_ids for s in first], "same seed, same samples"
    other = engine.generate(prompts, n=n, temperature=1.0, max_tokens=max_tokens, seed=8)
    assert [s.response_ids for s in other] != [s.response_ids for s in first]
    within = [tuple(s.response_ids) for s in samples[:n]]
    assert len(set(within)) > 1, "the n samples of one prompt must differ"
    return samples[:len(prompts) * n]


def test_vllm_grouping_finish_reason_eos_and_seed(vllm_engine, prompts, tokenizer):
    samples = check_bookkeeping(vllm_engine, prompts, tokenizer.eos_token_id)
    s = samples[0]
    assert s.text == tokenizer.decode(s.response_ids, skip_special_tokens=True)


def test_vllm_refuses_without_valid_weights_and_long_prompts(vllm_engine, trainer_model, prompts):
    vllm_engine.weights_valid = False  # what a dummy load or a level-2 sleep leaves behind
    with pytest.raises(RuntimeError, match="update_weights"):
        vllm_engine.generate(prompts, n=1, max_tokens=4)
    vllm_engine.update_weights(trainer_model.state_dict().items())
    assert len(vllm_engine.generate(prompts, n=1, max_tokens=4)) == len(prompts)
    with pytest.raises(ValueError, match="max_model_len"):
        vllm_engine.generate([[1] * 600], n=1, max_tokens=4)
    with pytest.raises(ValueError):
        vllm_engine.generate([], n=1)


@pytest.fixture(scope="module")
def hf_engine(tiny_model_path):
    from hf_engine import HFEngine
    return HFEngine(tiny_model_path, seed=0)


def test_hf_engine_bookkeeping(warm_model_path, prompts, tokenizer):
    from hf_engine import HFEngine
    # the warmed model ends its answers with EOS after ~6 tokens; 3 tokens cut them off
    check_bookkeeping(HFEngine(warm_model_path, seed=0), prompts, tokenizer.eos_token_id, max_tokens=48,
                      short_max_tokens=3)


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_hf_engine_logprobs_align_with_trainer(hf_engine, trainer_model, prompts, tokenizer, temperature):
    samples = hf_engine.generate(prompts[:2], n=3, temperature=temperature, max_tokens=32, seed=4)
    assert alignment(trainer_model, samples, temperature, tokenizer.pad_token_id)[0] <= 1.001


def test_hf_engine_update_weights(hf_engine, trainer_model, prompts, tokenizer):
    import copy
    perturbed = copy.deepcopy(trainer_model)
    with torch.no_grad():
        for p in perturbed.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    hf_engine.update_weights(perturbed.state_dict().items())
    samples = hf_engine.generate(prompts[:1], n=3, temperature=1.0, max_tokens=24, seed=5)
    assert alignment(perturbed, samples, 1.0, tokenizer.pad_token_id)[0] <= 1.001
    hf_engine.update_weights(trainer_model.state_dict().items())


def test_generated_ids_decode_back_to_text(vllm_engine, hf_engine, prompts, tokenizer):
    """Issue 2's smoke test: both engines produce ids that decode to the text they report."""
    for engine in (vllm_engine, hf_engine):
        for s in engine.generate(prompts[:1], n=2, temperature=1.0, max_tokens=16, seed=11):
            assert s.text == tokenizer.decode(s.response_ids, skip_special_tokens=True)
            assert len(s.text) > 0


# ---------------------------------------------------------------------------------------------- issue 15
def test_session_engine_was_dummy_loaded_then_pushed(vllm_engine, trainer_model, prompts, tokenizer):
    """train.py starts vLLM with load_format="dummy" (no second read of the checkpoint): the first push must
    make it the real model (vLLM 0.32 records reload metadata at model creation, whatever the loader)."""
    assert vllm_engine.llm.llm_engine.vllm_config.load_config.load_format == "dummy"
    samples = vllm_engine.generate(prompts, n=2, temperature=1.0, max_tokens=24, seed=12)
    assert alignment(trainer_model, samples, 1.0, tokenizer.pad_token_id)[0] <= 1.001


def test_weight_push_streams_one_tensor_at_a_time(vllm_engine, trainer_model):
    """update_weights consumes a lazy generator one tensor at a time and keeps none of them: when the next tensor
    is asked for, the earlier ones still alive are those vLLM 0.32's own loader holds -- the pieces of the fused
    layer being filled (q/k/v weights and biases until qkv_proj is complete) and one or two recent tensors --
    never the model (the old list() kept all 27). Each tensor's memory is a numpy buffer whose lifetime a weakref
    observes (a tensor's Python object can die while its storage lives on, so tensors are not watched)."""
    import gc
    import weakref
    buffers, alive_at_each_request = [], []

    def gathered():
        for name, tensor in trainer_model.state_dict().items():
            gc.collect()
            alive_at_each_request.append((name, [n for n, ref in buffers if ref() is not None]))
            array = tensor.detach().numpy().copy()       # a fresh buffer, as an FSDP gather makes one
            buffers.append((name, weakref.ref(array)))
            yield name, torch.from_numpy(array)
            del array

    vllm_engine.update_weights(gathered())
    assert len(alive_at_each_request) == len(trainer_model.state_dict()) == 27
    most = max(alive_at_each_request, key=lambda x: len(x[1]))
    assert len(most[1]) <= 5, most  # at v_proj.bias: q, k, v weights, q and k biases
    assert all(".self_attn." in name for name in most[1])


def test_weight_push_casts_to_the_engine_dtype(vllm_engine, trainer_model, prompts, tokenizer):
    """The trainer pushes what it has (fp32 masters, bf16 here); vLLM receives its own dtype (fp32 in this test;
    bf16 on GPU, which also avoids vLLM's per-tensor 'Attempted to load weight ... with dtype' warning)."""
    received = []
    real_rpc = vllm_engine.llm.collective_rpc

    def spy(method, *args, **kwargs):
        if method == "reload_weights":
            inner = kwargs["kwargs"]["weights_iterator"]

            def watch():
                for name, tensor in inner:
                    received.append(tensor.dtype)
                    yield name, tensor
            kwargs["kwargs"] = dict(kwargs["kwargs"], weights_iterator=watch())
        return real_rpc(method, *args, **kwargs)

    vllm_engine.llm.collective_rpc = spy
    try:
        vllm_engine.update_weights((n, t.to(torch.bfloat16)) for n, t in trainer_model.state_dict().items())
    finally:
        del vllm_engine.llm.collective_rpc
        vllm_engine.update_weights(trainer_model.state_dict().items())
    assert vllm_engine.dtype == torch.float32
    assert len(received) == len(trainer_model.state_dict()) and set(received) == {torch.float32}


def test_per_step_vllm_lines_are_quiet_and_real_warnings_stay(vllm_engine, trainer_model):
    """A push + prefix-cache reset (what every step does) logs none of vLLM's per-step lines, even at INFO; a
    failed load of a real layer (a partial push) still warns."""
    import logging
    records = []

    class Collect(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    root = logging.getLogger("vllm")
    handler, level = Collect(), root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        for _ in range(2):
            vllm_engine.update_weights(trainer_model.state_dict().items())
        logging.getLogger("vllm.model_executor.model_loader.reload.layerwise").warning(
            "%s: Failed to load weights", "ParallelLMHead")
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    for line in ("RotaryEmbedding: Failed to load weights", "Successfully reset prefix cache", "Reloading weights"):
        assert not any(line in r for r in records), (line, records)
    assert "ParallelLMHead: Failed to load weights" in records
