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


# ---------------------------------------------------------------------------------------------- issue 36, item 11
@pytest.fixture()
def sft_checkpoint(tmp_path, tiny_model_path):
    """A checkpoint as sft.py writes it: model/ and run.json, trained with --template think_answer."""
    import json
    ckpt = tmp_path / "sft" / "ckpt-000010"
    ckpt.mkdir(parents=True)
    (ckpt / "model").symlink_to(tiny_model_path)
    (ckpt / "run.json").write_text(json.dumps({"flags": {"template": "think_answer", "stage": 1}}))
    return ckpt


def test_a_stage_from_a_checkpoint_keeps_its_template(sft_checkpoint, capsys):
    """train.py --init_from an SFT checkpoint trained on think_answer prompts: without --template the RL stage
    asks the same prompts (it used to fall back to the default, chat, silently); a --template given with
    another value is kept (AceReason switches to code on purpose) and warned about. sft.py --model alike."""
    import sft
    import train
    common = ["--init_from", str(sft_checkpoint), "--device", "cpu", "--dry_run", "--max_response_len", "64",
              "--max_prompt_len", "64"]
    assert train.parse_args(common).template == "think_answer"
    assert "--template think_answer, as " in capsys.readouterr().out
    assert train.parse_args(common + ["--template", "chat"]).template == "chat"
    assert "WARNING: --template chat, but" in capsys.readouterr().out
    assert train.parse_args(common + ["--template", "think_answer"]).template == "think_answer"
    assert "template" not in capsys.readouterr().out
    assert train.parse_args(["--device", "cpu", "--dry_run", "--model", str(sft_checkpoint / "model"),
                             "--max_response_len", "64", "--max_prompt_len", "64"]).template == "chat"
    args = sft.parse_args(["--model", str(sft_checkpoint), "--train_data", "math500", "--device", "cpu",
                           "--dry_run", "--max_len", "256"])
    assert args.template == "think_answer"


def test_sft_says_which_knobs_to_turn_when_out_of_memory(tmp_path, tiny_model_path):
    """sft.py's command line on an out-of-memory error (forced here where the tokenizer loads): train.py's kind of
    message naming the knobs, no traceback."""
    import subprocess
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    code = ("import runpy, sys, torch, transformers\n"
            "def oom(*a, **k): raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 2.00 GiB')\n"
            "transformers.AutoTokenizer.from_pretrained = oom\n"
            f"sys.argv = ['sft.py', '--train_data', 'math500', '--device', 'cpu', '--model', {tiny_model_path!r}, "
            f"'--out_dir', {str(tmp_path / 'out')!r}, '--max_len', '512', '--contamination_check', '0']\n"
            "runpy.run_path('sft.py', run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "sft.py: out of GPU memory (CUDA out of memory. Tried to allocate 2.00 GiB)" in proc.stderr
    assert "--micro_batch_tokens" in proc.stderr and "Traceback" not in proc.stderr
