"""runs.py: the W&B run a resume continues, checkpoints (optimizer state where a resume needs it, written sharded),
the template a new stage inherits."""
import sys
import types

import pytest

import runs


# ---------------------------------------------------------------------------------------------- issue 36, item 10
@pytest.fixture()
def fake_wandb(monkeypatch):
    """A stand-in for the wandb package that records every init call (wandb need not be installed)."""
    calls, ids = [], iter(f"id{k}" for k in range(100))
    module = types.SimpleNamespace(util=types.SimpleNamespace(generate_id=lambda: next(ids)),
                                   init=lambda **kwargs: calls.append(kwargs) or types.SimpleNamespace(log=None))
    monkeypatch.setitem(sys.modules, "wandb", module)
    return calls


def test_a_resumed_run_continues_its_wandb_run(fake_wandb, tmp_path):
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
    runs.Logger(tmp_path / "a", wandb="proj")              # a new run
    (tmp_path / "a" / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2}\n')
    runs.Logger(tmp_path / "a", resumed_step=1, wandb="proj")   # --resume: the same W&B run
    runs.Logger(tmp_path / "b", wandb="proj")              # another run: another W&B run
    first, resumed, other = fake_wandb
    assert first["id"] == resumed["id"] == (tmp_path / "a" / "wandb_run_id").read_text().strip()
    assert other["id"] != first["id"] and all(c["resume"] == "allow" and c["project"] == "proj" for c in fake_wandb)
