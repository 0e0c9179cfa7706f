"""eval.py: estimators against brute force, the CLI on shipped benchmarks, resume, pass-rate round trip."""
import itertools
import json
import random

import pytest

import data
import eval as evaluation


@pytest.mark.parametrize("n,c", [(1, 0), (1, 1), (4, 2), (5, 1), (8, 3), (8, 8), (6, 0)])
def test_pass_at_k_matches_brute_force(n, c):
    outcomes = [1] * c + [0] * (n - c)
    for k in range(1, n + 1):
        subsets = list(itertools.combinations(range(n), k))
        brute = sum(any(outcomes[i] for i in s) for s in subsets) / len(subsets)
        assert evaluation.pass_at_k(n, c, k) == pytest.approx(brute, abs=1e-12)
    with pytest.raises(ValueError):
        evaluation.pass_at_k(n, c, n + 1)


def test_majority_vote_groups_equivalent_answers():
    # 0.5, 1/2 and \frac12 are one answer (3 votes) and beat "3" (2 votes)
    assert evaluation.majority_correct(["0.5", "3", "\\frac12", "3", "1/2"], [True, False, True, False, True])
    assert not evaluation.majority_correct(["3", "3", "0.5", None, None], [False, False, True, False, False])
    assert not evaluation.majority_correct([None, None], [False, False])
    # brute force on random tables of plain integer answers
    rng = random.Random(0)
    for _ in range(50):
        answers = [str(rng.randrange(3)) for _ in range(rng.randrange(1, 7))]
        gold = "1"
        corrects = [a == gold for a in answers]
        counts = {a: answers.count(a) for a in answers}
        best = max(counts.values())
        winner = next(a for a in answers if counts[a] == best)  # ties: first seen
        assert evaluation.majority_correct(answers, corrects) == (winner == gold)


def test_summarize_on_a_hand_made_table():
    table = {"p1": [1, 1, 0, 0], "p2": [0, 0, 0, 0], "p3": [1, 1, 1, 1]}
    records = [{"id": pid, "correct": bool(c), "extracted": "1" if c else "2", "finish_reason": "stop" if j else "length",
                "tokens": 10 + j} for pid, cs in table.items() for j, c in enumerate(cs)]
    s = evaluation.summarize(records, 4)
    assert s["avg@4"] == pytest.approx((0.5 + 0 + 1) / 3)
    assert s["pass@1"] == pytest.approx(s["avg@4"])
    assert s["pass@2"] == pytest.approx((evaluation.pass_at_k(4, 2, 2) + 0 + 1) / 3)
    assert s["pass@4"] == pytest.approx(2 / 3)
    assert s["maj@4"] == pytest.approx(1 / 3 + 1 / 3)  # p1 ties 2-2: first seen ("1", correct) wins; p3 correct
    assert s["truncated_frac"] == pytest.approx(0.25) and s["mean_response_tokens"] == pytest.approx(11.5)
    per = [0.5, 0.0, 1.0]
    import statistics
    assert s["stderr"] == pytest.approx(statistics.stdev(per) / len(per) ** 0.5)


def test_cli_on_two_benchmarks_outputs_agree_and_resume(vllm_engine, tmp_path):
    out = tmp_path / "eval"
    argv = ["--model", "unused", "--benchmarks", "aime2024,amc2023", "--k", "3", "--limit", "4", "--max_tokens", "24",
            "--out", str(out), "--temperature", "1.0"]
    results = evaluation.main(argv, engine=vllm_engine)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["results"] == json.loads(json.dumps(results))
    table = (out / "results.md").read_text()
    assert "| aime2024 | avg@3 |" in table and "| amc2023 | avg@3 |" in table
    for name in ("aime2024", "amc2023"):
        rows = [json.loads(line) for line in (out / name / "samples.jsonl").read_text().splitlines()]
        assert len(rows) == 12 and {len([r for r in rows if r["id"] == pid]) for pid in {r["id"] for r in rows}} == {3}
        assert set(rows[0]) >= {"id", "prompt", "response", "extracted", "correct", "finish_reason", "tokens"}
        assert evaluation.summarize(rows, 3) == {k: v for k, v in results[name].items()
                                                 if k not in ("seconds", "skipped_long_prompts", "skipped_ids",
                                                              "template")}
        gold = {p["id"]: p["answer"] for p in data.load_dataset(name)}
        assert all(r["gold"] == gold[r["id"]] for r in rows)

    # interruption: keep 2 complete problems of aime2024 and half of a third, then re-run
    samples = out / "aime2024" / "samples.jsonl"
    lines = samples.read_text().splitlines()
    samples.write_text("\n".join(lines[:7]) + "\n" + lines[7][:20])   # 2 problems + 1 sample + a torn line
    resumed = evaluation.main(argv, engine=vllm_engine)
    strip = lambda r: {k: v for k, v in r.items() if k != "seconds"}  # noqa: E731
    assert strip(resumed["aime2024"]) == strip(results["aime2024"])
    assert samples.read_text().splitlines() == lines


def test_pass_rates_round_trip_into_the_filter(vllm_engine, tmp_path):
    out, rates = tmp_path / "pr", tmp_path / "rates.jsonl"
    evaluation.main(["--model", "unused", "--benchmarks", "gsm8k_train", "--k", "4", "--limit", "5", "--max_tokens", "8",
                     "--out", str(out), "--pass_rates", str(rates)], engine=vllm_engine)
    rows = [json.loads(line) for line in rates.read_text().splitlines()]
    assert len(rows) == 5 and all(r["total"] == 4 and 0 <= r["correct"] <= 4 for r in rows)
    problems = data.load_dataset("gsm8k_train")[:5]
    kept, counts = data.filter_by_pass_rate(problems, str(rates), low=0.0, high=6 / 16)
    expected = [p["id"] for p in problems if next(r for r in rows if r["id"] == p["id"])["correct"] / 4 <= 6 / 16]
    assert [p["id"] for p in kept] == expected and counts["unmeasured"] == 0


def test_cli_validation(capsys):
    with pytest.raises(SystemExit):
        evaluation.main(["--model", "m", "--benchmarks", "nope"])
    assert evaluation.main(["--model", "m", "--preset", "seed", "--dry_run"]) is None
    assert "dry run ok" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------- issue 15
def test_pass_at_k_for_k_itself_and_the_two_standard_errors():
    table = {"p1": [1, 1, 0], "p2": [0, 0, 0], "p3": [1, 1, 1], "p4": [1, 0, 0]}
    records = [{"id": pid, "correct": bool(c), "extracted": str(c), "finish_reason": "stop", "tokens": 5}
               for pid, cs in table.items() for c in cs]
    s = evaluation.summarize(records, 3)
    assert {"pass@1", "pass@2", "pass@3"} <= set(s) and "pass@4" not in s
    assert s["pass@3"] == pytest.approx(3 / 4)  # p1, p3, p4 have a correct sample
    assert s["pass@2"] == pytest.approx((evaluation.pass_at_k(3, 2, 2) + 0 + 1 + evaluation.pass_at_k(3, 1, 2)) / 4)
    # run-to-run s.e.: unbiased per-problem Bernoulli variance c (k - c) / (k (k - 1)), divided by k, summed, / n
    within = sum(c * (3 - c) / (3 * 2) / 3 for c in (2, 0, 3, 1))
    assert s["run_stderr"] == pytest.approx(within ** 0.5 / 4)
    assert evaluation.summarize(records, 3)["stderr"] > s["run_stderr"]
    assert set(evaluation.summarize(records[:1], 1)) >= {"pass@1", "run_stderr"}
    assert evaluation.summarize(records[:1], 1)["run_stderr"] is None  # one sample per problem: not estimable
    s5 = evaluation.summarize([dict(r, id=f"{r['id']}-{j}") for j in range(2) for r in records], 3)
    assert "pass@3" in s5
    five = [{"id": "a", "correct": j < 2, "extracted": "1", "finish_reason": "stop", "tokens": 1} for j in range(5)]
    assert {"pass@1", "pass@2", "pass@4", "pass@5"} <= set(evaluation.summarize(five, 5))


def test_run_stderr_matches_the_spread_of_repeated_evaluations():
    """Simulate many evaluations of the same 60 problems (k = 8 samples each): the std of avg@k between them is
    what run_stderr estimates; stderr (over problems) is larger (about 2x here)."""
    rng = random.Random(0)
    probs = [rng.random() for _ in range(60)]
    scores, estimates = [], []
    for run in range(1000):
        records = [{"id": i, "correct": rng.random() < p, "extracted": None, "finish_reason": "stop", "tokens": 1}
                   for i, p in enumerate(probs) for _ in range(8)]
        s = evaluation.summarize(records, 8)
        scores.append(s["avg@8"])
        estimates.append(s["run_stderr"])
    mean = sum(scores) / len(scores)
    spread = (sum((x - mean) ** 2 for x in scores) / (len(scores) - 1)) ** 0.5
    assert sum(estimates) / len(estimates) == pytest.approx(spread, rel=0.08)
    assert s["stderr"] > 1.5 * spread


def test_long_prompts_are_skipped_and_counted_not_a_crash(vllm_engine, tmp_path):
    """MATH-500 problem 168 renders to 754 tokens with the tiny tokenizer; the session engine's context is 512."""
    out = tmp_path / "long"
    lines = []
    results = evaluation.evaluate(vllm_engine, vllm_engine.tokenizer, ["math500"], k=1, out_dir=out, limit=170,
                                  max_tokens=4, log=lines.append)
    s = results["math500"]
    assert s["problems"] == 169 and s["skipped_long_prompts"] == 1
    assert s["skipped_ids"] == ["test/counting_and_probability/181.json"]
    assert any("WARNING" in line and "test/counting_and_probability/181.json" in line for line in lines)
    assert "| 1 |" in (out / "results.md").read_text()
    # resuming over the same skip gives the same result
    again = evaluation.evaluate(vllm_engine, vllm_engine.tokenizer, ["math500"], k=1, out_dir=out, limit=170,
                                max_tokens=4, log=lines.append)
    assert {k: v for k, v in again["math500"].items() if k != "seconds"} == {k: v for k, v in s.items() if k != "seconds"}


def test_sharded_evaluation_equals_one_rank(vllm_engine, tmp_path):
    """train.py's multi-rank eval: each data-parallel rank samples a contiguous block, seeds follow the global
    index, the gathered records equal a one-rank evaluation."""
    kwargs = dict(k=2, limit=5, max_tokens=6, temperature=1.0)
    whole = evaluation.evaluate(vllm_engine, vllm_engine.tokenizer, ["amc2023"], log=lambda m: None, **kwargs)
    blocks = {}

    def gather_from(rank):
        def gather(records):
            blocks[rank] = records
            return [r for part in (blocks.get(0, []), blocks.get(1, [])) for r in part]
        return gather

    evaluation.evaluate(vllm_engine, vllm_engine.tokenizer, ["amc2023"], shard=(0, 2), gather=gather_from(0),
                        log=lambda m: None, **kwargs)
    sharded = evaluation.evaluate(vllm_engine, vllm_engine.tokenizer, ["amc2023"], shard=(1, 2),
                                  gather=gather_from(1), log=lambda m: None, out_dir=tmp_path / "rank0", **kwargs)
    assert len(blocks[0]) == 6 and len(blocks[1]) == 4   # 3 + 2 problems, k = 2
    strip = lambda s: {k: v for k, v in s.items() if k != "seconds"}  # noqa: E731
    assert strip(sharded["amc2023"]) == strip(whole["amc2023"])
    assert len((tmp_path / "rank0" / "amc2023" / "samples.jsonl").read_text().splitlines()) == 10
