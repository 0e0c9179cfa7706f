"""Replayed rollouts: the engine interface over recorded samples, so that two runs see identical samples and only
the trainer is compared (1 rank vs 2 ranks; a flag on vs off). The samples come from the real vLLM engine
(tests/conftest.py records them) or are written by a test that needs exact texts."""
import json
from pathlib import Path

from data import Sample


class ReplayEngine:
    """generate() returns the recorded samples of each prompt (the first n); update_weights() consumes what it is
    given (gathering FSDP2 tensors is a collective: every rank must iterate them all)."""

    def __init__(self, path_or_rows):
        rows = json.loads(Path(path_or_rows).read_text()) if isinstance(path_or_rows, (str, Path)) else path_or_rows
        self.by_prompt = {}
        for row in rows:
            self.by_prompt.setdefault(tuple(row["prompt_ids"]), []).append(Sample(**row))
        self.prompts_seen = []

    def generate(self, prompt_token_ids, n=1, **_):
        self.prompts_seen.append([list(p) for p in prompt_token_ids])
        return [s for ids in prompt_token_ids for s in self.by_prompt[tuple(ids)][:n]]

    def update_weights(self, named_tensors):
        for _ in named_tensors:
            pass
        return 0.0

    def sleep(self):
        pass

    def wake_up(self):
        pass


def sample_rows(samples):
    return [{"prompt_ids": s.prompt_ids, "response_ids": s.response_ids, "logprobs": s.logprobs,
             "finish_reason": s.finish_reason, "text": s.text} for s in samples]
