"""hub_sets.py: GPQA-Diamond, LiveCodeBench and DeepCoder rows built here in each set's exact column layout (no hub:
the tests never fetch anything). GPQA rows are invented: the set's examples must not appear in plain text."""
import base64
import collections
import json
import os
import pickle
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

import code_reward
import data
import eval as evaluation
import hub_sets
import reward
from data import DatasetError, Sample

ROOT = Path(__file__).resolve().parents[1]
SLOW_S = 20.0   # an item's limit where a pass is expected: generous, so that a loaded machine does not fail it


# ------------------------------------------------------------------------------------------------------------
# Rows in the hub layouts
# ------------------------------------------------------------------------------------------------------------
def gpqa_row(k, **extra):
    """An invented question in GPQA's column layout (the hub's extra columns too)."""
    return {"Pre-Revision Question": "", "Question": f"Invented question {k}: which colour is sample {k}?",
            "Correct Answer": f"teal {k}", "Incorrect Answer 1": f"mauve {k}", "Incorrect Answer 2": f"ochre {k}",
            "Incorrect Answer 3": f"umber {k}", "Explanation": "invented", "Subdomain": "Invented subdomain",
            "High-level domain": "Invented", "Record ID": f"rec{k:03d}", **extra}


def pack(value):
    """LiveCodeBench's private-test encoding: base64 of zlib of a pickle."""
    return base64.b64encode(zlib.compress(pickle.dumps(value))).decode()


def lcb_row(qid, tests, func_name=None, starter="", date="2024-09-01T00:00:00", public=1):
    """A row in livecodebench/code_generation_lite's layout: the first `public` tests public (JSON), the rest
    private (base64 + zlib + pickle of the JSON text, as the hub stores them)."""
    testtype = "functional" if func_name else "stdin"
    tests = [{"input": i, "output": o, "testtype": testtype} for i, o in tests]
    return {"question_title": f"Problem {qid}", "question_content": f"Invented problem {qid}.", "platform":
            "leetcode" if func_name else "atcoder", "question_id": qid, "contest_id": "c1", "contest_date": date,
            "starter_code": starter, "difficulty": "easy", "public_test_cases": json.dumps(tests[:public]),
            "private_test_cases": pack(json.dumps(tests[public:])),
            "metadata": json.dumps({"func_name": func_name} if func_name else {})}


SUM_TESTS = [("1 2\n", "3\n1.5\n"), ("10 20\n", "30\n15.0\n"), ("-4 4\n", "0\n0")]   # "0" vs 0.0: LCB's decimals
SUM_REFERENCE = "a, b = map(int, input().split())\nprint(a + b)\nprint((a + b) / 2)\n"
SUM_WRONG = "a, b = map(int, input().split())\nprint(a - b)\nprint((a + b) / 2)\n"
TWO_SUM_STARTER = "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n        "
TWO_SUM_TESTS = [("[2,7,11,15]\n9", "[0, 1]"), ("[3,2,4]\n6", "[1, 2]"), ("[3,3]\n6", "[0, 1]")]
# no `from typing import List`: LiveCodeBench's imports come first; a tuple result is compared as a list
TWO_SUM_REFERENCE = ("class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
                     "        seen = {}\n        for i, x in enumerate(nums):\n            if target - x in seen:\n"
                     "                return (seen[target - x], i)\n            seen[x] = i\n")
TWO_SUM_WRONG = "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n        return [0, 1]\n"


def fenced(program):
    """A reasoning model's response: its reasoning closed (AceReason's verifier grades no other), then the program."""
    return f"Some reasoning.\n</think>\n```python\n{program}```\n"


@pytest.fixture(autouse=True)
def fresh_hub_cache():
    """hub_sets remembers each named set (and each failure) per process: every test starts without them."""
    hub_sets._CACHE.clear()
    yield
    hub_sets._CACHE.clear()


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# ------------------------------------------------------------------------------------------------------------
# GPQA
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("balanced", [True, False])
def test_gpqa_shuffle_is_deterministic_and_balanced_over_letters(balanced):
    ids = [f"rec{k:03d}" for k in range(200)]
    orders = {(q, s): hub_sets.choice_order(q, s, balanced=balanced) for q in ids for s in range(8)}
    assert orders == {(q, s): hub_sets.choice_order(q, s, balanced=balanced) for q in ids for s in range(8)}
    assert all(sorted(order) == [0, 1, 2, 3] for order in orders.values())
    assert len({tuple(order) for order in orders.values()}) == 24          # every permutation occurs
    assert any(orders[(q, 0)] != orders[(q, 1)] for q in ids)              # a new order per sample
    right = collections.Counter(order.index(0) for order in orders.values())
    if balanced:   # each question's right answer under every letter exactly twice in 8 samples (and once in 4)
        for q in ids:
            assert sorted(orders[(q, s)].index(0) for s in range(8)) == [0, 0, 1, 1, 2, 2, 3, 3]
            assert sorted(orders[(q, s)].index(0) for s in range(4)) == [0, 1, 2, 3]
        assert set(right.values()) == {400}
    else:          # simple-evals' uniform permutations: balanced in expectation (these seeds: within 10%)
        assert all(360 <= n <= 440 for n in right.values()), right
    # the wrong options are shuffled too: each sits under each letter
    assert {order.index(1) for order in orders.values()} == {0, 1, 2, 3}


def test_gpqa_rows_load_in_the_hub_layout(tmp_path, monkeypatch):
    rows = [gpqa_row(k) for k in range(6)]
    for problems in (data.load_dataset(str(write_jsonl(tmp_path / "gpqa_local.jsonl", rows))), None):
        if problems is None:   # the named set, its hub call replaced by the same rows
            monkeypatch.setattr(hub_sets, "hub_rows", lambda spec, path, config, split, gated: (
                [dict(r) for r in rows] if (path, config, split, gated) == (hub_sets.GPQA_HUB, "gpqa_diamond",
                                                                               "train", True) else None))
            problems = data.load_dataset("gpqa_diamond")
        assert [p["id"] for p in problems] == [f"rec{k:03d}" for k in range(6)]
        for k, p in enumerate(problems):
            assert p["choices"] == [f"teal {k}", f"mauve {k}", f"ochre {k}", f"umber {k}"]
            assert p["options"][p["answer"]] == f"teal {k}" and sorted(p["options"].values()) == sorted(p["choices"])
            assert p["problem"].startswith("Answer the following multiple choice question. The last line of your "
                                           "response should be of the following format: 'Answer: $LETTER'")
            assert f"\n\nInvented question {k}: which colour is sample {k}?\n\nA) " in p["problem"]
            assert f"\n{p['answer']}) teal {k}\n" in p["problem"] + "\n"
            assert p["subdomain"] == "Invented subdomain" and "Explanation" not in p


def test_gpqa_bad_rows_name_the_row_and_field(tmp_path):
    rows = [gpqa_row(0), {k: v for k, v in gpqa_row(1).items() if k != "Incorrect Answer 2"}]
    with pytest.raises(DatasetError, match=r"gpqa_bad.jsonl:2: field 'Incorrect Answer 2' missing"):
        data.load_dataset(str(write_jsonl(tmp_path / "gpqa_bad.jsonl", rows)))
    rows = [gpqa_row(0), gpqa_row(1, **{"Incorrect Answer 3": "teal 1"})]
    with pytest.raises(DatasetError, match=r"gpqa_twice.jsonl:2: two options have the same text"):
        data.load_dataset(str(write_jsonl(tmp_path / "gpqa_twice.jsonl", rows)))
    rows = [gpqa_row(0), gpqa_row(1, **{"Correct Answer": "  "})]
    with pytest.raises(DatasetError, match=r"gpqa_empty.jsonl:2: field 'Correct Answer': missing or empty"):
        data.load_dataset(str(write_jsonl(tmp_path / "gpqa_empty.jsonl", rows)))


def test_gpqa_right_letter_scores_1_and_a_hedge_0():
    base = hub_sets.gpqa_problems([("row 0", gpqa_row(7))], "invented")[0][1]
    row = hub_sets.multiple_choice_sample(base, 3)
    right = row["answer"]
    wrong = next(letter for letter in "ABCD" if letter != right)
    responses = {f"Reasoning.\n\nAnswer: {right}": 1.0, f"Answer: ({right})": 1.0, f"Answer: {right}) teal 7": 1.0,
                 f"so the answer is \\boxed{{{right}}}": 1.0, "Answer: teal 7": 1.0,   # the option's text itself
                 f"Answer: {wrong}": 0.0, f"Answer: {right} or {wrong}": 0.0, f"Answer: {wrong} or {right}": 0.0,
                 f"Answer: {row['options'][wrong]}": 0.0, "No letter at all.": 0.0}
    scores = reward.score_problems(list(responses), [row] * len(responses), workers=1)
    assert dict(zip(responses, scores)) == responses


class LetterTokenizer:
    """Enough of a tokenizer for eval.sample_and_grade: one id per character, a chat template without <think>."""
    bos_token_id = None

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=True):
        return [ord(c) for c in f"<user>{messages[-1]['content']}<assistant>"]

    def encode(self, text, add_special_tokens=False):
        return [ord(c) for c in text]

    def decode(self, ids):
        return "".join(chr(i) for i in ids)


class LetterEngine:
    """Answers every prompt with the letter under which `wanted` (an option's text, or a fixed letter) sits."""
    max_model_len = 10_000

    def __init__(self, wanted):
        self.wanted, self.calls = wanted, []

    def generate(self, prompts, n, temperature, top_p, max_tokens, seed, logprobs=True):
        self.calls.append((len(prompts), n, seed))
        out = []
        for ids in prompts:
            text = "".join(chr(i) for i in ids)
            letter = self.wanted if len(self.wanted) == 1 else next(
                line[0] for line in text.split("\n") if line[3:].startswith(self.wanted))
            out += [Sample(list(ids), [1], [0.0], "stop", f"Thinking.\n\nAnswer: {letter}")] * n
        return out


def test_eval_gives_each_gpqa_sample_its_own_order(tmp_path):
    path = write_jsonl(tmp_path / "gpqa_local.jsonl", [gpqa_row(k) for k in range(5)])
    problems = data.load_dataset(str(path))
    tokenizer = LetterTokenizer()
    engine = LetterEngine("A")   # always the same letter: right in exactly 1 sample of 4 (balanced shuffling)
    records, _ = evaluation.sample_and_grade(engine, tokenizer, problems, 4, template="chat_raw", workers=1,
                                             first_index=10, seed=3)
    assert engine.calls == [(20, 1, 3 + 10 * 4)]   # one prompt per (problem, sample), sampled once
    assert [r["id"] for r in records] == [p["id"] for p in problems for _ in range(4)]
    assert [sum(r["correct"] for r in records if r["id"] == p["id"]) for p in problems] == [1] * 5
    assert len({r["prompt"] for r in records}) == 20 and all(len(r["options_order"]) == 4 for r in records)
    summary = evaluation.summarize(records, 4)
    assert summary["avg@4"] == 0.25 and "maj@4" not in summary   # letters mean other options in each sample
    right, _ = evaluation.sample_and_grade(LetterEngine("teal"), tokenizer, problems, 4, template="chat_raw",
                                           workers=1)
    assert all(r["correct"] for r in right)


# ------------------------------------------------------------------------------------------------------------
# LiveCodeBench
# ------------------------------------------------------------------------------------------------------------
def grade(problem, program, timeout_s=SLOW_S):
    results = []
    score = code_reward.score_code_batch([fenced(program)], [problem["tests"]], workers=1, timeout_s=timeout_s,
                                         results=results)[0]
    return score, results[0]


def test_lcb_stdin_row_passes_with_a_reference_and_fails_with_a_wrong_one():
    problem = hub_sets.lcb_problem(lcb_row("abc1_a", SUM_TESTS), "row 0")
    assert problem["problem"] == ("Invented problem abc1_a.\n\n" + hub_sets.CODE_INSTRUCTION_STDIN)
    tests = problem["tests"]   # graded as AceReason's verifier grades them (protocols.py), its 10 s per test
    assert tests["kind"] == "stdio" and tests["protocol"] == "acereason" and tests["time_limit_s"] == 10
    assert [c["input"] for c in tests["cases"]] == [i for i, _ in SUM_TESTS]   # public, then the decoded private
    score, result = grade(problem, SUM_REFERENCE)
    assert score == 1.0 and result["passed"] == 3, result
    score, result = grade(problem, SUM_WRONG)
    assert score == 0.0 and result["status"] == "failed", result
    # the protocol's imports precede the program (`sqrt` unimported), its recursion limit is above 5,000
    deep = "def depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)\n" \
           "a, b = map(int, input().split())\nprint(a + b + depth(5000) - 5000)\nprint(sqrt((a + b) ** 2) / 2)\n"
    assert grade(problem, deep)[0] == 1.0


def test_lcb_output_comparison():
    same = code_reward.same_output_lcb
    assert same("3\n1.50\n", "3\n1.5") and same("  1 2  \n\n", "1 2") and same("1e2\n", "100")
    assert same("\n1\r\n2\n", "1\n2\n")                      # leading blank lines and \r: stripped
    assert not same("1 2\n", "1  2 3") and not same("0.3333", "0.33333") and not same("1\n2", "1\n2\n3")
    assert not same("yes", "Yes") and not same("nan", "nan\n0")


def test_lcb_functional_row_passes_with_a_reference_and_fails_with_a_wrong_one():
    problem = hub_sets.lcb_problem(lcb_row("lc1", TWO_SUM_TESTS, "twoSum", TWO_SUM_STARTER), "row 0")
    assert problem["problem"] == ("Invented problem lc1.\n\nSolve the problem starting with the provided function "
                                  "header.\n\nFunction header:\n```\n" + TWO_SUM_STARTER + "\n```\n\n"
                                  + hub_sets.CODE_INSTRUCTION_STARTER)
    assert problem["tests"]["kind"] == "functional" and len(problem["tests"]["cases"]) == 3
    assert problem["tests"]["func_name"] == "twoSum" and problem["tests"]["starter_code"] == TWO_SUM_STARTER
    score, result = grade(problem, TWO_SUM_REFERENCE)
    assert score == 1.0 and result["passed"] == 3, result
    score, result = grade(problem, TWO_SUM_WRONG)
    assert score == 0.0 and result["passed"] == 1, result    # the first test happens to want [0, 1]
    # lcb_runner: ONE Solution() for all tests (state kept between calls is the program's business); AceReason
    # makes a new one for every test
    counting = ("class Solution:\n    calls = 0\n    def twoSum(self, nums, target):\n        self.calls += 1\n"
                "        return [0, 1] if self.calls != 2 else [1, 2]\n")
    lcb = hub_sets.lcb_problem(lcb_row("lc1", TWO_SUM_TESTS, "twoSum", TWO_SUM_STARTER), "row 0", protocol="lcb")
    assert grade(lcb, counting)[0] == 1.0 and grade(problem, counting)[0] == 0.0
    # without a Solution class, a module-level function of that name (lcb_runner's fallback)
    assert grade(problem, TWO_SUM_REFERENCE.replace("Solution", "Answer") + "def twoSum(nums, target):\n"
                 "    return Answer().twoSum(nums, target)\n")[0] == 1.0


def test_lcb_time_limit_is_per_test_and_the_item_limit_is_lcbs():
    """Each test (stdin case, functional call) within time_limit_s, however long all of them take together; the
    item's limit is then LiveCodeBench's (limit + 1) x tests + 5 s, not the 1 s asked for. Margins: 1.8 s a test."""
    sleepy = "import time\ntime.sleep(1.2)\n" + SUM_REFERENCE   # 1.2 s per case, 3.6 s in all
    problem = hub_sets.lcb_problem(lcb_row("abc1_b", SUM_TESTS), "row 0")
    problem["tests"]["time_limit_s"] = 3
    assert code_reward.item_timeout_s(problem["tests"], 1.0) == (3 + 1) * 3 + 10   # AceReason's margin
    assert code_reward.item_timeout_s(dict(problem["tests"], protocol="lcb"), 1.0) == (3 + 1) * 3 + 5
    score, result = grade(problem, sleepy, timeout_s=1.0)
    assert score == 1.0, result
    score, result = grade(problem, "while True:\n    pass\n", timeout_s=1.0)
    assert score == 0.0 and result["status"] == "timeout" and result["detail"].startswith("case 0:"), result
    functional = hub_sets.lcb_problem(lcb_row("lc2", TWO_SUM_TESTS, "twoSum", TWO_SUM_STARTER), "row 0", protocol="lcb")
    functional["tests"]["time_limit_s"] = 3
    slow_calls = "import time\n" + TWO_SUM_REFERENCE.replace("seen = {}", "time.sleep(1.2)\n        seen = {}")
    assert grade(functional, slow_calls, timeout_s=1.0)[0] == 1.0
    stuck = TWO_SUM_REFERENCE.replace("seen = {}", "while nums:\n            pass")
    score, result = grade(functional, stuck, timeout_s=1.0)   # stopped by the call's 3 s, not the item's 17 s
    assert score == 0.0 and result["status"] == "timeout" and result["seconds"] < 15, result


class Hostile:
    """A pickle payload: unpickling it would call exec() and write the marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))


def test_a_hostile_pickle_in_the_private_tests_is_refused_without_running(tmp_path):
    marker = tmp_path / "ran.txt"
    row = lcb_row("evil", SUM_TESTS)
    row["private_test_cases"] = pack([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}, Hostile(marker)])
    assert pickle.loads(zlib.decompress(base64.b64decode(row["private_test_cases"]))) and marker.exists()  # it is live
    marker.unlink()
    with pytest.raises(DatasetError, match=r"row 9: field 'private_test_cases': pickle refused .*builtins\.exec"):
        hub_sets.lcb_problem(row, "row 9")
    path = write_jsonl(tmp_path / "lcb.jsonl", [lcb_row("fine", SUM_TESTS), row])
    with pytest.raises(DatasetError, match=r"lcb.jsonl:2: field 'private_test_cases': pickle refused"):
        data.load_dataset(str(path))
    assert not marker.exists()
    # plain pickles of the JSON text, of a list, of bytes-free nested data decode; other objects do not
    assert hub_sets.decode_private_tests(pack('[{"input": "1", "output": "2"}]'), "w") == [{"input": "1", "output": "2"}]
    assert hub_sets.decode_private_tests(pack([{"input": "1", "output": "2"}]), "w") == [{"input": "1", "output": "2"}]
    with pytest.raises(DatasetError, match="pickle refused"):
        hub_sets.decode_private_tests(pack({1, 2}), "w")
    with pytest.raises(DatasetError, match="neither JSON nor base64"):
        hub_sets.decode_private_tests("not base64 at all!", "w")


def test_lcb_rows_load_for_training_and_errors_name_the_field(tmp_path):
    rows = [lcb_row("abc1_a", SUM_TESTS), lcb_row("lc1", TWO_SUM_TESTS, "twoSum", TWO_SUM_STARTER)]
    problems = data.load_dataset(str(write_jsonl(tmp_path / "lcb_rows.jsonl", rows)))   # what --train_data does
    assert [p["id"] for p in problems] == ["abc1_a", "lc1"] and [p["tests"]["kind"] for p in problems] == \
        ["stdio", "functional"]
    assert all(data.validate_tests(p["tests"])[1] is None for p in problems)
    bad = lcb_row("lc2", [("[1,2\n3", "[0]")], "twoSum", TWO_SUM_STARTER)
    with pytest.raises(DatasetError, match=r"bad.jsonl:1: field 'public_test_cases\[0\]': the input is not a Python "
                                           r"argument list \(protocol acereason\)"):
        data.load_dataset(str(write_jsonl(tmp_path / "bad.jsonl", [bad])))
    with pytest.raises(DatasetError, match=r"field 'public_test_cases\[0\]': an input line is not JSON"):
        hub_sets.lcb_problem(lcb_row("lc2", [("[1,2]\n3\n", "[0]")], "twoSum", TWO_SUM_STARTER), "row 0", protocol="lcb")
    mixed = lcb_row("lc3", TWO_SUM_TESTS)   # functional tests, but no func_name in the metadata
    mixed["public_test_cases"] = json.dumps([{"input": "[1]\n1", "output": "[0]", "testtype": "functional"}])
    with pytest.raises(DatasetError, match=r"field 'public_test_cases\[0\].testtype': 'functional'"):
        hub_sets.lcb_problem(mixed, "row 0")


def test_lcb_window_is_half_open_and_specs_are_checked(tmp_path, monkeypatch):
    dates = ["2024-07-31T23:00:00", "2024-08-01T00:00:00", "2025-01-31T12:00:00", "2025-02-01T00:00:00"]
    rows = [lcb_row(f"q{k}", SUM_TESTS, date=d) for k, d in enumerate(dates)]
    files = {name: write_jsonl(tmp_path / name, rows[:3] if name == "test5.jsonl" else rows[3:] if name == "test6.jsonl"
                               else []) for name in hub_sets.LCB_RELEASE_FILES["release_v6"]}
    monkeypatch.setattr(hub_sets, "hub_file", lambda spec, repo, filename: str(files[filename]))
    assert [p["id"] for p in data.load_dataset("livecodebench")] == ["q1", "q2"]     # v5: Aug 2024 .. Jan 2025
    assert [p["id"] for p in data.load_dataset("livecodebench:v6")] == ["q3"]
    assert [p["id"] for p in data.load_dataset("livecodebench:2024-07-01..2024-08-01")] == ["q0"]
    assert all(p["source"] == "livecodebench" for p in data.load_dataset("livecodebench"))
    assert hub_sets.spec_error("livecodebench:v7").startswith("livecodebench:v7: the window must be one of v5")
    assert hub_sets.spec_error("deepcoder:lcbv6").startswith("deepcoder:lcbv6: unknown DeepCoder config 'lcbv6'")
    assert hub_sets.spec_error("livecodebench:2025-02-01..2024-08-01")
    assert all(hub_sets.spec_error(s) is None for s in ("gpqa_diamond", "livecodebench", "deepcoder:lcbv5+taco"))
    problems = data.unknown_specs(["livecodebench:v7", "deepcoder:taco", "gpqa_diamond", "gpqa_diamnd"])
    assert sorted(p[0].split(":")[0] for p in problems) == ["data 'gpqa_diamnd'", "data livecodebench"]


def test_hub_sets_fail_with_one_line_without_the_hub(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(hub_sets, "hf_token", lambda: None)
    for spec in ("gpqa_diamond", "livecodebench", "deepcoder:taco"):
        with pytest.raises(hub_sets.HubUnavailable) as exc:
            data.load_dataset(spec)
        assert str(exc.value).startswith(f"{spec}: ") and "\n" not in str(exc.value), exc.value
        with pytest.raises(hub_sets.HubUnavailable) as again:   # remembered: not tried again in this process
            data.load_dataset(spec)
        assert again.value is exc.value
    hub_sets._CACHE.clear()
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with pytest.raises(hub_sets.HubUnavailable, match="gated: accept its terms"):   # no token: not even tried
        data.load_dataset("gpqa_diamond")
    assert evaluation.load_benchmarks("gpqa_diamond") == []


def test_eval_skips_an_unavailable_hub_set_and_goes_on(tmp_path, monkeypatch):
    monkeypatch.setattr(hub_sets, "hf_token", lambda: None)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    lines = []
    results = evaluation.evaluate(LetterEngine("A"), LetterTokenizer(), ["gpqa_diamond", "amc2023"], k=1, limit=2,
                                  out_dir=tmp_path / "out", workers=1, log=lines.append)
    assert list(results) == ["amc2023"] and results["amc2023"]["template"] == "chat"
    assert [line for line in lines if line.startswith("gpqa_diamond: SKIPPED: gpqa_diamond: ")], lines
    assert "Not evaluated: gpqa_diamond" in (tmp_path / "out" / "results.md").read_text()
    # the same during training: the periodic eval reports the set as empty and the run goes on
    from types import SimpleNamespace
    args = SimpleNamespace(eval_data="gpqa_diamond,amc2023", eval_k=1, out_dir=str(tmp_path / "run"), eval_limit=2,
                           eval_temperature=0.6, eval_top_p=1.0, max_response_len=16, template="chat", seed=0,
                           reward_workers=1)
    metrics = evaluation.evaluate_during_training(LetterEngine("A"), LetterTokenizer(), args, 5, 0, dp_world=1, tp=1)
    assert metrics["eval/gpqa_diamond_problems"] == 0 and metrics["eval/amc2023_problems"] == 2


def test_eval_dry_run_lists_the_seed_table(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HF_TOKEN_PATH")}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))   # no token here, whatever this machine holds
    proc = subprocess.run([sys.executable, str(ROOT / "eval.py"), "--model", "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
                           "--preset", "seed", "--dry_run"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line.split()[1:3] for line in proc.stdout.splitlines() if line.startswith("  ")}
    assert rows.pop("benchmark") == ["k", "template"]
    assert rows == {"aime2024": ["avg@64", "chat"], "aime2025": ["avg@64", "chat"], "math500": ["avg@4", "chat"],
                    "amc2023": ["avg@5", "chat"], "gsm8k_test": ["avg@1", "chat"], "minerva_math": ["avg@1", "chat"],
                    "gaokao2023en": ["avg@1", "chat"], "olympiadbench": ["avg@1", "chat"],
                    "college_math": ["avg@1", "chat"], "gpqa_diamond": ["avg@8", "chat_raw"],
                    "livecodebench": ["avg@8", "chat_raw"]}
    assert "2024-08-01 <= d < 2025-02-01 (v5: expected 279 problems)" in proc.stdout
    assert "protocol acereason: public + private tests, 10 s per test" in proc.stdout
    assert "eval.py: livecodebench: expected 279 problems (the published column)" in proc.stdout
    assert "graded by simple-evals (first 'Answer: X' anywhere; ours beside it)" in proc.stdout
    assert "options shuffled per question and sample" in proc.stdout
    skipped = [line for line in proc.stdout.splitlines() if "would be SKIPPED" in line]
    assert len(skipped) == 1 and skipped[0].startswith("eval.py: gpqa_diamond: would be SKIPPED here: ")
    bad = subprocess.run([sys.executable, str(ROOT / "eval.py"), "--model", "m", "--benchmarks", "livecodebench:v9",
                          "--dry_run"], capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode != 0 and "the window must be one of" in bad.stderr


# ------------------------------------------------------------------------------------------------------------
# DeepCoder's training layout
# ------------------------------------------------------------------------------------------------------------
def test_deepcoder_rows_load_for_training(tmp_path):
    lcb_tests = [{"input": i, "output": o, "testtype": "functional"} for i, o in TWO_SUM_TESTS]
    rows = [
        {"problem": "Invented LeetCode-style problem.", "starter_code": TWO_SUM_STARTER,   # config lcbv5
         "tests": json.dumps(lcb_tests), "metadata": json.dumps({"func_name": "twoSum"})},
        {"problem": "Invented stdin problem.", "starter_code": "", "metadata": "{}",        # config taco (stdin)
         "tests": json.dumps({"inputs": [i for i, _ in SUM_TESTS], "outputs": [o for _, o in SUM_TESTS]})},
        {"problem": "Invented PrimeIntellect problem.", "starter_code": "", "metadata": "{}",
         "tests": json.dumps([{"type": "stdin_stdout", "input": i, "output": o} for i, o in SUM_TESTS * 7])},
        {"problem": "Invented call problem.", "starter_code": "", "metadata": "{}",   # unsupported: skipped, counted
         "tests": json.dumps({"inputs": [[1, 2]], "outputs": [[3]], "fn_name": "add"})},
    ]
    lines = []
    hub_sets_log = hub_sets.convert_rows([(f"row {k}", r) for k, r in enumerate(rows)], "deepcoder.jsonl",
                                         log=lines.append)
    assert len(hub_sets_log) == 3 and lines == ["deepcoder.jsonl: skipped 1 of 4 rows whose tests are not supported "
                                                "(e.g. row 3: TACO function-call tests (fn_name 'add') are not "
                                                "supported)"]
    problems = data.load_dataset(str(write_jsonl(tmp_path / "deepcoder_rows.jsonl", rows)))   # --train_data
    assert [p["tests"]["kind"] for p in problems] == ["functional", "stdio", "stdio"]
    assert len(problems[2]["tests"]["cases"]) == hub_sets.TRAIN_MAX_TESTS   # the 15 longest of 21
    assert problems[0]["problem"].endswith(hub_sets.CODE_INSTRUCTION_STARTER) and problems[0]["starter_code"]
    scores = code_reward.score_code_batch([fenced(TWO_SUM_REFERENCE), fenced(SUM_REFERENCE), fenced(SUM_WRONG)],
                                          [p["tests"] for p in problems], workers=2, timeout_s=SLOW_S)
    assert scores == [1.0, 1.0, 0.0]
    with pytest.raises(DatasetError, match=r"bad_dc.jsonl:1: field 'tests': expected a list of tests"):
        data.load_dataset(str(write_jsonl(tmp_path / "bad_dc.jsonl", [{"problem": "p", "tests": "[]"}])))


def test_recipe_code_stage_uses_a_hub_set_outside_the_eval_window():
    """recipes/acereason.sh trains its code stages on DeepCoder's set (its lcbv5 part ends before the v5 window)
    and evaluates on LiveCodeBench v5; a dry run checks the spec (the whole recipe's dry run: test_recipes.py)."""
    text = (ROOT / "recipes" / "acereason.sh").read_text()
    code_data = text.split("CODE_DATA=${CODE_DATA:-")[1].split("}")[0]
    assert code_data == "deepcoder" and "--template chat_raw" in text and "--eval_data livecodebench" in text
    assert all(hub_sets.spec_error(s) is None for s in code_data.split(","))
    assert hub_sets.LCB_WINDOWS["pre_v5"][2] == hub_sets.LCB_WINDOWS["v5"][1] == "2024-08-01"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    for spec, ok in (("deepcoder", True), ("deepcoder:lcbv6", False)):
        proc = subprocess.run([sys.executable, str(ROOT / "train.py"), "--train_data", spec, "--template", "chat_raw",
                               "--eval_data", "livecodebench", "--dry_run"], capture_output=True, text=True, env=env,
                              timeout=300)
        assert (proc.returncode == 0) == ok, proc.stderr
    assert "unknown DeepCoder config 'lcbv6'" in proc.stderr
