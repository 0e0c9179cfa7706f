"""Run train.main under torchrun for tests/test_distributed.py.

    torchrun --nproc_per_node 2 tests/dist_worker.py [--replay ROLLOUTS.json] -- TRAIN_FLAGS...

--replay: instead of a vLLM engine, serve pre-generated rollouts (recorded from the real vLLM engine by the test)
keyed by prompt, so that a 1-rank and a 2-rank run see identical samples and only the trainer is compared.

DIST_PROBE=DIR (environment): each rank writes DIR/rank<R>.json with what it did that costs memory: how many
times it read model weights from disk (from_pretrained), which trainer_state.pt it loaded, whether gradients were
freed after the last optimizer step, and whether the reference model's root (embeddings, head) was resharded.
"""
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

import train  # noqa: E402
from distributed import shutdown_distributed  # noqa: E402
from replay import ReplayEngine  # noqa: E402


def probe(argv, engine, out_dir):
    import torch
    from transformers import AutoModelForCausalLM
    reads, loads, models = [], [], []
    real_from_pretrained, real_load = AutoModelForCausalLM.from_pretrained, torch.load

    def from_pretrained(path, *args, **kwargs):
        reads.append(str(path))
        model = real_from_pretrained(path, *args, **kwargs)
        models.append(model)
        return model

    def load(path, *args, **kwargs):
        loads.append(Path(path).name if isinstance(path, (str, os.PathLike)) else "<in-memory>")
        return real_load(path, *args, **kwargs)

    AutoModelForCausalLM.from_pretrained, torch.load = from_pretrained, load
    if hasattr(train, "load_model"):
        real_load_model = train.load_model
        train.load_model = lambda *a, **k: models.append(real_load_model(*a, **k)) or models[-1]
    policy = train.main(argv, engine=engine)
    reference = [m for m in models if m is not policy and not any(p.requires_grad for p in m.parameters())
                 and hasattr(m, "reshard")]
    rank = int(os.environ.get("RANK", "0"))
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps({
        "weight_reads": reads, "torch_loads": loads,
        "grads_freed": all(p.grad is None for p in policy.parameters()),
        "reference_root_sharded": [type(m.get_input_embeddings().weight).__name__ == "DTensor" for m in reference]}))


if __name__ == "__main__":
    argv = sys.argv[1:]
    engine = None
    if argv[:1] == ["--replay"]:
        engine, argv = ReplayEngine(argv[1]), argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if os.environ.get("DIST_PROBE"):
        probe(argv, engine, os.environ["DIST_PROBE"])
    else:
        train.main(argv, engine=engine)
    shutdown_distributed()   # as train.py's own entry point ends
