"""runs.py: the W&B run a resume continues, checkpoints (optimizer state where a resume needs it, written sharded),
the template a new stage inherits."""
import sys
import types

import pytest
from hub_configs import hub_cache  # noqa: F401  (a fixture)

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


# ---------------------------------------------------------------------------------------------- issue 36, item 8
CKPT_WORKER = '''
import os, sys, torch
sys.path.insert(0, os.environ["ROOT"])
from pathlib import Path
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict
from transformers import AutoTokenizer
import runs
from distributed import init_distributed, load_model, shutdown_distributed
rank, world = init_distributed("cpu")
model_path, out = os.environ["MODEL"], Path(os.environ["OUT"])
tokenizer = AutoTokenizer.from_pretrained(model_path)
model = load_model(model_path, torch.device("cpu"), torch.float32, world).train()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
torch.manual_seed(0)
ids = torch.randint(0, 1000, (2, 12))
for step in (1, 2):   # two steps, a checkpoint after each
    model(input_ids=ids).logits.float().pow(2).mean().backward()
    optimizer.step()
    optimizer.zero_grad()
    runs.save_checkpoint(out, step, model, tokenizer, optimizer, keep_last=5, run_info={"flags": {}})
full = StateDictOptions(full_state_dict=True, cpu_offload=True)
reference = get_optimizer_state_dict(model, optimizer, options=full)
if rank == 0:
    torch.save(reference, out / "reference.pt")
again = load_model(out / "ckpt-000002" / "model", torch.device("cpu"), torch.float32, world).train()
fresh = torch.optim.AdamW(again.parameters(), lr=1e-3)
runs.load_checkpoint(out / "ckpt-000002", again, fresh)
resumed = get_optimizer_state_dict(again, fresh, options=full)
if rank == 0:
    for name, value in reference["state"].items():
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(value[key], resumed["state"][name][key]), (name, key)
    print("resumed on", world, "ranks: optimizer state equal")
shutdown_distributed()   # as train.py's entry point ends
'''


def test_optimizer_state_is_written_sharded_and_kept_in_the_newest_checkpoint(tiny_model_path, tmp_path):
    """2 gloo ranks (FSDP2): each rank writes its own shard of AdamW's state (torch.distributed.checkpoint), the
    older checkpoint keeps its weights only, a resume on 2 ranks restores the state exactly, and so does a resume
    on ONE process (DCP reshards the two shards into full tensors)."""
    import os
    import subprocess
    from pathlib import Path

    import torch
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    import distributed
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "run"
    script = tmp_path / "ckpt_worker.py"
    script.write_text(CKPT_WORKER)
    env = {**os.environ, "ROOT": str(root), "MODEL": str(tiny_model_path), "OUT": str(out), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(script)], capture_output=True, text=True, env=env, timeout=600, cwd=root)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "resumed on 2 ranks: optimizer state equal" in proc.stdout
    newest = out / "ckpt-000002"
    assert sorted(p.name for p in (newest / "optimizer").iterdir()) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    assert not (out / "ckpt-000001" / "optimizer").exists() and (out / "ckpt-000001" / "model").is_dir()
    # a 2-rank checkpoint resumed on one process: full tensors from the two shards
    model = distributed.load_model(newest / "model", torch.device("cpu"), torch.float32).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    assert runs.load_checkpoint(newest, model, optimizer)["step"] == 2
    reference = torch.load(out / "reference.pt", weights_only=False)
    resumed = get_optimizer_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True))
    assert reference["state"].keys() == resumed["state"].keys()
    for name, value in reference["state"].items():
        assert torch.equal(value["exp_avg_sq"], resumed["state"][name]["exp_avg_sq"]), name
    # an older checkpoint is weights only: a resume from it says what to do instead
    with pytest.raises(SystemExit, match="no optimizer state .* --init_from"):
        runs.load_checkpoint(out / "ckpt-000001", model, torch.optim.AdamW(model.parameters(), lr=1e-3))


def test_the_run_states_its_checkpoint_sizes(hub_cache):
    """The sizes of runs.py's docstring, from a model of Qwen2.5-7B's shape (7.6B parameters, on the meta device):
    30.5 GB of fp32 weights, 61 GB of AdamW state, 152 GB on disk with --keep_last 3 (244 GB during a save)."""
    import json

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    folder = next((hub_cache / "models--deepseek-ai--DeepSeek-R1-Distill-Qwen-7B" / "snapshots").iterdir())
    config = AutoConfig.for_model(**json.loads((folder / "config.json").read_text()))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    note = runs.checkpoint_note(model, 3, 50, "train.py")
    assert note == ("train.py: checkpoints (every 50 steps and at the end): weights 30.5 GB each (model/), AdamW state "
                    "60.9 GB in the newest only (optimizer/); with --keep_last 3: 152.3 GB on disk, 243.7 GB while the "
                    "next is written"), note
