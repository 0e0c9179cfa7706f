"""Run train.main under torchrun for tests/test_distributed.py.

    torchrun --nproc_per_node 2 tests/dist_worker.py [--replay ROLLOUTS.json] -- TRAIN_FLAGS...

--replay: instead of a vLLM engine, serve pre-generated rollouts (recorded from the real vLLM engine by the test)
keyed by prompt, so that a 1-rank and a 2-rank run see identical samples and only the trainer is compared.
"""
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

import train  # noqa: E402
from rollout import Sample  # noqa: E402


class ReplayEngine:
    """The engine interface over recorded samples: generate() returns the recorded n samples of each prompt."""

    def __init__(self, path):
        self.by_prompt = {}
        for row in json.loads(Path(path).read_text()):
            self.by_prompt.setdefault(tuple(row["prompt_ids"]), []).append(Sample(**row))

    def generate(self, prompt_token_ids, n=1, **_):
        return [s for ids in prompt_token_ids for s in self.by_prompt[tuple(ids)][:n]]

    def update_weights(self, named_tensors):
        for _ in named_tensors:  # gathering the full tensors is a collective: every rank must iterate them all
            pass
        return 0.0

    def sleep(self):
        pass

    def wake_up(self):
        pass


if __name__ == "__main__":
    argv = sys.argv[1:]
    engine = None
    if argv[:1] == ["--replay"]:
        engine, argv = ReplayEngine(argv[1]), argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    train.main(argv, engine=engine)
