"""Packed micro-batches (packing.py, logprobs.token_logprobs(packed=True)) equal the padded path: per-token log-probs,
losses and gradients within 1e-5 (fp32, CPU), for any packing, on 1 rank and on 2 (gloo)."""
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import grpo  # noqa: E402
import logprobs  # noqa: E402
import packing  # noqa: E402

VOCAB = 1024  # tests/tiny_model.py's vocabulary


# ---------------------------------------------------------------------------------------------- helpers
def make_sequences(shapes, seed):
    """shapes: [(prompt_len, response_len)] -> [(prompt ids, response ids)] of random tokens."""
    g = torch.Generator().manual_seed(seed)
    return [(torch.randint(1, VOCAB, (p,), generator=g).tolist(), torch.randint(1, VOCAB, (r,), generator=g).tolist())
            for p, r in shapes]


def collate(seqs, side="right"):
    """[(prompt, response)] -> ids, attention [B, S]; response mask [B, S-1] aligned with token_logprobs."""
    width = max(len(p) + len(r) for p, r in seqs)
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    attention = torch.zeros_like(ids)
    mask = torch.zeros(len(seqs), width - 1)
    for b, (p, r) in enumerate(seqs):
        n = len(p) + len(r)
        start = 0 if side == "right" else width - n
        ids[b, start:start + n] = torch.tensor(p + r)
        attention[b, start:start + n] = 1
        mask[b, start + len(p) - 1:start + n - 1] = 1   # logp[:, t] scores token t+1
    return ids, attention, mask


def loss_and_grads(model, seqs, micro_batches, advantages, packed, side="right"):
    """Sum over micro-batches of the token-mean GRPO loss (policy term + entropy bonus, normalised over the WHOLE
    batch), its gradients, and the per-sequence response log-probs."""
    num_tokens = sum(len(r) for _, r in seqs)
    model.zero_grad()
    total, logps = 0.0, {}
    for mb in micro_batches:
        if not mb:
            continue
        ids, attention, mask = collate([seqs[i] for i in mb], side)
        logp, entropy = logprobs.token_logprobs(model, ids, attention, temperature=0.7, chunk_size=5, with_entropy=True,
                                            score_mask=mask, entropy_grad=True, packed=packed)
        old = logp.detach() - 0.05 * mask  # ratio != 1, so the clip is exercised
        loss, _ = grpo.policy_loss(logp, old, advantages[mb], mask, num_tokens=num_tokens)
        loss = loss - 0.01 * grpo.aggregate(entropy, mask, num_tokens=num_tokens)
        loss.backward()
        total += loss.item()
        for row, i in enumerate(mb):
            logps[i] = logp[row][mask[row].bool()].detach()
    return total, {n: p.grad.clone() for n, p in model.named_parameters()}, logps


def assert_same(a, b):
    loss_a, grads_a, logp_a = a
    loss_b, grads_b, logp_b = b
    assert loss_a == pytest.approx(loss_b, abs=1e-5)
    assert logp_a.keys() == logp_b.keys()
    for i in logp_a:
        torch.testing.assert_close(logp_a[i], logp_b[i], rtol=0, atol=1e-5)
    for name in grads_a:  # fp32 sums in another order: within 1e-5 of the gradient tensor's own scale
        scale = max(grads_b[name].abs().max().item(), 1.0)
        assert (grads_a[name] - grads_b[name]).abs().max().item() <= 1e-5 * scale, name


@pytest.fixture(scope="module", params=["sdpa", packing.VARLEN_ATTENTION])
def model(request, tiny_model_path):
    """The suite's tiny Qwen2, in fp32, with transformers' sdpa (packed rows get a block-diagonal mask) or with
    packing's per-sequence varlen sdpa. (Attending across a boundary moves its log-probs by ~0.25: differences
    show at 1e-5.)"""
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    model.set_attn_implementation(request.param)
    return model


# ---------------------------------------------------------------------------------------------- layout
def test_pack_layout_of_left_and_right_padding():
    attention = torch.tensor([[1, 1, 1, 0], [0, 0, 0, 0], [0, 1, 1, 1], [1, 0, 0, 0]])
    layout = packing.pack(attention)
    assert layout.flat_index.tolist() == [0, 1, 2, 9, 10, 11, 12]
    assert layout.position_ids.tolist() == [[0, 1, 2, 0, 1, 2, 0]]
    assert layout.cu_seqlens.tolist() == [0, 3, 6, 7] and layout.cu_seqlens.dtype == torch.int32
    assert layout.max_len == 3
    assert layout.inverse.tolist() == [[0, 1, 2, -1], [-1] * 4, [-1, 3, 4, 5], [6, -1, -1, -1]]
    source, rows = packing.packed_rows(layout)  # [B*(S-1)] rows whose token and next token are real
    assert rows.tolist() == [0, 1, 7, 8] and source.tolist() == [0, 1, 3, 4]
    score = torch.zeros(4, 3)
    score[2, 2] = 1
    source, rows = packing.packed_rows(layout, score)
    assert rows.tolist() == [8] and source.tolist() == [4]


def test_pack_rejects_what_it_cannot_pack():
    with pytest.raises(ValueError, match="row 1 has a hole"):
        packing.pack(torch.tensor([[1, 1, 0], [1, 0, 1]]))
    with pytest.raises(ValueError, match="no real token"):
        packing.pack(torch.zeros(2, 3))
    layout = packing.pack(torch.tensor([[1, 1, 0]]))
    with pytest.raises(ValueError, match=r"score_mask\[0, 1\] is set but token 1 or 2 of row 0 is padding"):
        packing.packed_rows(layout, torch.tensor([[1.0, 1.0]]))


# ---------------------------------------------------------------------------------------------- balanced split
@pytest.mark.parametrize("seed", range(6))
def test_balanced_micro_batches_cover_fit_and_balance(seed):
    rng = random.Random(seed)
    lengths = [rng.choice([rng.randint(1, 40), rng.randint(100, 300)]) for _ in range(rng.randint(1, 60))]
    budget, world = rng.choice([1, 64, 256, 1000]), rng.randint(1, 4)
    ranks = packing.balanced_micro_batches(lengths, budget, world)
    assert len(ranks) == world and len({len(r) for r in ranks}) == 1, "same count on every rank"
    placed = sorted(i for r in ranks for mb in r for i in mb)
    assert placed == list(range(len(lengths))), "every sequence exactly once"
    for mb in (mb for r in ranks for mb in r):
        assert len(mb) <= 1 or sum(lengths[i] for i in mb) <= budget, "over budget only alone"
    totals = [sum(lengths[i] for mb in r for i in mb) for r in ranks]
    assert max(totals) - min(totals) <= max(budget, max(lengths))
    count = len(ranks[0])
    assert packing.balanced_micro_batches(lengths, budget, world, min_count=count + 2)[0].__len__() == count + 2


def test_balanced_micro_batches_spread_work_evenly():
    """64 GRPO-like lengths (most short, a few at the cap), 4 ranks: the ranks' token totals within 10%."""
    rng = random.Random(0)
    lengths = [1024 if rng.random() < 0.1 else rng.randint(50, 300) for _ in range(64)]
    ranks = packing.balanced_micro_batches(lengths, 2048, 4)
    totals = [sum(lengths[i] for mb in r for i in mb) for r in ranks]
    assert max(totals) <= 1.1 * min(totals), totals


# ---------------------------------------------------------------------------------------------- packed == padded
PACKINGS = {
    # name: (prompt/response shapes, token budget)
    "one_sequence_per_row": ([(5, 7), (3, 12), (8, 2), (4, 4)], 1),
    "many_short": ([(2, 1), (1, 2), (3, 3), (2, 4), (1, 1), (4, 2), (2, 2), (3, 1), (2, 5), (1, 3)] * 2, 40),
    "exactly_fills_the_budget": ([(10, 22), (4, 8), (6, 6), (5, 3), (2, 2)], 32),
    "longer_than_the_budget_goes_alone": ([(12, 40), (3, 5), (4, 6), (2, 9)], 24),
    "one_token_responses": ([(6, 1), (3, 1), (9, 1), (2, 1), (5, 1)], 16),
}


@pytest.mark.parametrize("name", sorted(PACKINGS))
def test_packed_equals_padded(model, name):
    shapes, budget = PACKINGS[name]
    seqs = make_sequences(shapes, seed=len(name))
    lengths = [p + r for p, r in shapes]
    micro = packing.balanced_micro_batches(lengths, budget)[0]
    if name == "longer_than_the_budget_goes_alone":
        assert [0] in micro
    if name == "exactly_fills_the_budget":
        assert [0] in micro and lengths[0] == budget
    advantages = torch.randn(len(seqs), generator=torch.Generator().manual_seed(1))
    padded = loss_and_grads(model, seqs, [list(range(len(seqs)))], advantages, packed=False)
    assert_same(loss_and_grads(model, seqs, micro, advantages, packed=True), padded)
    assert_same(loss_and_grads(model, seqs, micro, advantages, packed=True, side="left"), padded)


@pytest.mark.parametrize("seed", range(3))
def test_random_packings_equal_padded(model, seed):
    rng = random.Random(seed)
    shapes = [(rng.randint(1, 12), rng.choice([1, rng.randint(1, 8), rng.randint(20, 40)])) for _ in range(12)]
    seqs = make_sequences(shapes, seed)
    advantages = torch.randn(len(seqs), generator=torch.Generator().manual_seed(seed))
    padded = loss_and_grads(model, seqs, [list(range(len(seqs)))], advantages, packed=False)
    for budget in (rng.randint(20, 60), rng.randint(60, 200)):
        micro = packing.balanced_micro_batches([p + r for p, r in shapes], budget)[0]
        assert_same(loss_and_grads(model, seqs, micro, advantages, packed=True), padded)


def test_packed_attention_stays_within_each_sequence(model):
    """Changing one sequence's tokens changes no other sequence's log-probs in the same packed row."""
    seqs = make_sequences([(4, 6), (5, 5), (3, 7)], seed=5)
    ids, attention, mask = collate(seqs)
    with torch.no_grad():
        before = logprobs.token_logprobs(model, ids, attention, score_mask=mask, packed=True)
        ids[1, :10] = torch.randint(1, VOCAB, (10,), generator=torch.Generator().manual_seed(6))
        after = logprobs.token_logprobs(model, ids, attention, score_mask=mask, packed=True)
    assert torch.equal(before[0], after[0]) and torch.equal(before[2], after[2])
    assert not torch.equal(before[1], after[1])


def test_varlen_attention_is_sdpa_on_padded_calls(tiny_model_path):
    """A model switched to "sdpa_varlen" gives bit-identical padded results: padded passes are unchanged."""
    from transformers import AutoModelForCausalLM
    stock = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    varlen = packing.use_varlen_attention(AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32))
    assert varlen.config._attn_implementation == packing.VARLEN_ATTENTION
    ids, attention, _ = collate(make_sequences([(4, 9), (2, 3)], seed=7), side="left")
    with torch.no_grad():
        assert torch.equal(logprobs.token_logprobs(stock, ids, attention), logprobs.token_logprobs(varlen, ids, attention))


# ---------------------------------------------------------------------------------------------- 2 ranks (gloo)
DIST_SHAPES = [(6, 30), (3, 2), (8, 12), (2, 1), (5, 44), (4, 3), (7, 9), (3, 20), (2, 2), (6, 5), (9, 1)]
DIST_BUDGET = 48


def _rank_worker(model_path, out_dir):
    """torchrun entry point: this rank's share of the balanced split, packed, gradients summed over ranks."""
    import torch.distributed as dist
    from transformers import AutoModelForCausalLM
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = packing.use_varlen_attention(AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32))
    seqs = make_sequences(DIST_SHAPES, seed=11)
    advantages = torch.randn(len(seqs), generator=torch.Generator().manual_seed(12))
    mine = packing.balanced_micro_batches([p + r for p, r in DIST_SHAPES], DIST_BUDGET, world)[rank]
    loss, grads, logps = loss_and_grads(model, seqs, mine, advantages, packed=True)
    flat = torch.cat([g.reshape(-1) for g in grads.values()] + [torch.tensor([loss])])
    dist.all_reduce(flat)  # the loss is normalised over the whole batch: rank sums are the batch's
    torch.save({"micro_batches": mine, "sum": flat, "logps": logps}, Path(out_dir) / f"rank{rank}.pt")
    dist.destroy_process_group()


def test_two_ranks_equal_one_rank(tiny_model_path, tmp_path):
    from transformers import AutoModelForCausalLM
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", __file__,
           str(tiny_model_path), str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1)]
    assert len(ranks[0]["micro_batches"]) == len(ranks[1]["micro_batches"]) >= 2
    assert sorted(i for r in ranks for mb in r["micro_batches"] for i in mb) == list(range(len(DIST_SHAPES)))
    assert torch.equal(ranks[0]["sum"], ranks[1]["sum"])

    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    seqs = make_sequences(DIST_SHAPES, seed=11)
    advantages = torch.randn(len(seqs), generator=torch.Generator().manual_seed(12))
    loss, grads, logps = loss_and_grads(model, seqs, [list(range(len(seqs)))], advantages, packed=False)
    two_rank_grads, offset = {}, 0
    for name, g in grads.items():
        two_rank_grads[name] = ranks[0]["sum"][offset:offset + g.numel()].view_as(g)
        offset += g.numel()
    assert_same((ranks[0]["sum"][-1].item(), two_rank_grads, {**ranks[0]["logps"], **ranks[1]["logps"]}),
                (loss, grads, logps))


if __name__ == "__main__":
    _rank_worker(*sys.argv[1:3])


def test_lengths_cross_from_the_device_once_per_micro_batch_not_per_layer(monkeypatch):
    """Issue 30, item 5: a packed pass reads the sequence lengths to the host once (packing.pack), not in every
    layer's attention (a torch.equal and a .tolist() per layer and pass were two GPU syncs each). Counted on CPU
    as the calls that would sync on a GPU -- .tolist(), .item()/int() (aten._local_scalar_dense), torch.equal --
    in a forward + backward of a 1-layer and a 4-layer model: the same count."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from transformers import Qwen2Config, Qwen2ForCausalLM
    calls = []
    real_tolist = torch.Tensor.tolist
    monkeypatch.setattr(torch.Tensor, "tolist", lambda self: calls.append("tolist") or real_tolist(self))

    class Syncs(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func in (torch.ops.aten._local_scalar_dense.default, torch.ops.aten.equal.default):
                calls.append(str(func))
            return func(*args, **(kwargs or {}))

    ids, attention, mask = collate(make_sequences([(5, 9), (3, 4), (7, 12)], seed=0))
    counts = []
    for layers in (1, 4):
        torch.manual_seed(0)
        config = Qwen2Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                             num_attention_heads=2, num_key_value_heads=1, head_dim=32)
        model = packing.use_varlen_attention(Qwen2ForCausalLM(config))
        calls.clear()
        with Syncs():
            logp = logprobs.token_logprobs(model, ids, attention, score_mask=mask, packed=True)
            logp.sum().backward()
        counts.append(len(calls))
    assert counts[0] == counts[1], (counts, calls)
