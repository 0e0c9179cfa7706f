"""reward.py: a table of positive and negative cases per category, real dataset solutions, hostile inputs."""
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reward import extract_answer, format_reward, gold_is_valid, is_equiv, last_boxed, math_reward, score_batch

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"

from grader_cases import EQUIV, QUESTIONS, RESPONSES  # noqa: E402  (tests/ is on sys.path: see conftest.py)

TABLE = [(family, p, g, want) for family, rows in EQUIV.items() for p, g, want in rows]


def test_table_is_large_enough():
    assert len(TABLE) >= 300, len(TABLE)
    assert sum(not w for *_, w in TABLE) >= 150, "at least half must be wrong answers that look right"
    assert len({(p, g) for _, p, g, _ in TABLE}) == len(TABLE), "duplicate rows"


@pytest.mark.parametrize("family,pred,gold,want", TABLE, ids=[f"{c}:{p}|{g}" for c, p, g, _ in TABLE])
def test_equivalence_table(family, pred, gold, want):
    assert is_equiv(pred, gold) is want


@pytest.mark.parametrize("response,gold,want", RESPONSES, ids=[f"{r[:40]}|{g}" for r, g, _ in RESPONSES])
def test_response_formats(response, gold, want):
    assert math_reward(response, gold) == want


@pytest.mark.parametrize("text,expected", [
    ("so the answer is \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}"),
    ("\\boxed{1} then \\boxed{2}", "2"),
    ("\\boxed{840} \\boxed{840}", "840"),
    ("\\boxed{\\text{(B)}}", "\\text{(B)}"),
    ("\\boxed{\\{1,2\\}}", "\\{1,2\\}"),
    ("<think>maybe \\boxed{1}</think> final \\boxed{2}", "2"),
    ("<think>\\boxed{3}</think> I give up", None),
    ("So the final answer is $42$.", "42"),
    ("The answer is: 7", "7"),
    ("\\boxed{\\frac{1}{2}} and \\boxed{3", None),  # the last box never closes: the answer was cut off
    ("\\boxed{1} and \\boxed{2}", "1, 2"),
    ("\\boxed{1} or \\boxed{2}", "1 \\text{ or } 2"),
    ('{"reasoning": "r", "answer": "\\\\frac{1}{2}"}', "\\frac{1}{2}"),
    ("", None),
])
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


def test_strict_mode_and_prefilled_think():
    free_text = "So the total is 18 dollars."
    assert math_reward(free_text, "18") == 1.0
    assert math_reward(free_text, "18", strict=True) == 0.0           # strict: explicit answers only
    assert math_reward("The answer is 18.", "18", strict=True) == 1.0
    # a template that opens <think> in the prompt: no </think> means the response was cut off mid-thought
    assert math_reward("hmm \\boxed{18}", "18", think_prefilled=True) == 0.0
    assert math_reward("hmm</think> \\boxed{18}", "18", think_prefilled=True) == 1.0
    # a base model that invents the next turn is graded on its own answer, not on the invented one
    invented = " 3+2=5 </think> <answer>5</answer>\nUser: What is 3+4?\nAssistant: <think> 3+4=7 </think> <answer>7</answer>"
    assert math_reward(invented, "7", think_prefilled=True) == 0.0
    assert math_reward(invented, "5", think_prefilled=True) == 1.0


@pytest.mark.parametrize("question,response,gold,want", QUESTIONS, ids=[f"{q[:30]}|{r[:30]}" for q, r, _, _ in QUESTIONS])
def test_answers_that_give_the_question_back(question, response, gold, want):
    """With the problem's text (score_problems passes it), an expression the question asks to compute, given back
    unevaluated, is not paid; without it, the same answer is compared by value."""
    assert math_reward(response, gold, question=question) == want
    assert score_batch([response], [gold], workers=0, questions=[question]) == [want]


def test_gsm8k_dollar_answer_is_graded():
    assert math_reward("She makes $18.\n#### $18", "18") == 1.0


def test_format_reward():
    good = "<think>a</think> <answer>1</answer>"
    assert format_reward(good, "strict") == 1.0
    assert format_reward("<think>a</think><think>b</think><answer>1</answer>", "strict") == 0.0
    assert format_reward("<think>a</think><think>b</think><answer>1</answer>", "loose") == 1.0
    assert format_reward("hello <answer>1</answer>", "loose") == 0.0
    assert format_reward(good + " trailing", "strict") == 0.0
    with pytest.raises(ValueError):
        format_reward(good, "medium")


def test_invalid_gold_never_rewards_and_is_counted(capsys):
    assert not gold_is_valid("\\frac{1}{")
    assert not gold_is_valid("")
    assert not gold_is_valid("???")
    stats = {}
    scores = score_batch(["\\boxed{\\frac{1}{}", "\\boxed{5}"], ["\\frac{1}{", "5"], workers=0, ids=["row-a", "row-b"],
                         stats=stats)
    assert scores == [0.0, 1.0] and stats["invalid_gold"] == 1
    assert "row-a" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ real data
def _solutions(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return [r for r in rows if r.get("solution") and "\\boxed" in r["solution"] or "gsm8k" in r["id"] and r.get("solution")]


def _graded(rows):
    responses = [r["solution"] + (f"\n#### {r['answer']}" if r["id"].startswith("gsm8k") else "") for r in rows]
    return responses, [r["answer"] for r in rows]


# datasets whose solutions state the answer (AIME/olympiad solutions are prose: see README, "Grader accuracy")
REAL_SETS = ["math500", "minerva_math", "gsm8k_test"]


@pytest.mark.parametrize("name", REAL_SETS)
def test_every_solution_matches_its_own_answer(name):
    rows = _solutions(ROOT / "data" / f"{name}.jsonl.gz")
    responses, golds = _graded(rows)
    stats = {}
    scores = score_batch(responses, golds, workers=2, timeout_s=10, stats=stats)
    misses = [r["id"] for r, s in zip(rows, scores) if s != 1.0]
    assert not misses, f"{len(misses)} of {len(rows)} missed: {misses[:10]}"
    assert stats == {"timeouts": 0, "errors": 0, "invalid_gold": 0}


def _last_of_several(solution, gold):
    """The solution boxes several answers and the gold is only its last box."""
    last_box = last_boxed(solution[solution.rfind("\\boxed"):])
    return extract_answer(solution) != last_box and is_equiv(last_box, gold)


@pytest.mark.skipif(not SHARED.exists(), reason="../shared/data (full MATH train/test) not beside the checkout")
@pytest.mark.parametrize("name", ["math_test", "math_train"])
def test_full_math_solutions_match_their_answers(name):
    rows = _solutions(SHARED / f"{name}.jsonl")
    responses, golds = _graded(rows)
    scores = score_batch(responses, golds, workers=2, timeout_s=10)
    misses = [r for r, s in zip(rows, scores) if s != 1.0]
    # MATH's `answer` field is the LAST box of the solution; where a solution boxes several answers ("the answers
    # are $\\boxed{-2}$ and $\\boxed{1}$"), the dataset's gold is incomplete and the grader rightly reads a list
    data_errors = [r for r in misses if _last_of_several(r["solution"], r["answer"])]
    assert len(misses) == len(data_errors) <= 0.003 * len(rows), [r["id"] for r in misses if r not in data_errors][:10]


@pytest.mark.parametrize("name", ["math500", "minerva_math"])
def test_solutions_against_other_problems_answers_score_zero(name):
    rows = _solutions(ROOT / "data" / f"{name}.jsonl.gz")
    responses, golds = _graded(rows)
    shifted = golds[7:] + golds[:7]
    scores = score_batch(responses, shifted, workers=2, timeout_s=10)
    same = sum(1 for g, h in zip(golds, shifted) if g.strip() == h.strip())  # genuinely equal answers
    assert sum(scores) <= same + 0.02 * len(rows), (sum(scores), same)


# ------------------------------------------------------------------------------------------------ hostile input
HOSTILE = [
    "\\boxed{9^{9^{9^{9}}}}",
    "\\boxed{10^{10^{10^{10}}}}",
    "\\boxed{" + "{" * 100 + "1" + "}" * 100 + "}",
    "\\boxed{",
    "x" * 1_000_000 + " \\boxed{5",
    "\\boxed{" * 200_000,
    "\\boxed{__import__('os').system('touch /tmp/pwned_by_grader')}",
    "\\boxed{eval(\"open('/tmp/pwned_by_grader','w')\")}",
    '{"reasoning": "x", "answer": "__import__(\'os\').system(\'touch /tmp/pwned_by_grader\')"}',
    "\\boxed{1000000!}",
    "\\boxed{3!!!!}",
    "\\boxed{\\sin(10^{100})}",
    "\\boxed{\\sin(e^{e^{e^{5}}})}",             # sympy itself hangs evaluating this
    "\\boxed{e^{e^{e^{e^{5}}}}}",
    "\\boxed{\\cos(10^{10^{3}})}",
    "\\boxed{\\sqrt[10^{9}]{2}}",
    "\\boxed{\\binom{10^{9}}{5 \\cdot 10^{8}}}",
    "\\boxed{x^{10^{6}}}",
    "\\boxed{" + "(" * 5000 + "}",
    "\\boxed{" + "2^" * 500 + "2}",
    "\\boxed{" + "+".join(["1"] * 400) + "}",
    "\\boxed{9^{9^{9^{9}}}} = \\boxed{9^{9^{9^{9}}}}",
    "<think>" * 10_000 + "</think>" * 10_000 + "\\boxed{",
    "The answer is " + "1, " * 20_000 + "5.",
    "Please put the answer in \\boxed{} " * 50_000,
    "The answer is " + "$1 " * 60_000 + "5.",
    "Answer: " + "the total for 3 shirts is " * 8_000 + "$45.",
]


def test_hostile_outputs_finish_fast_score_zero_and_execute_nothing():
    marker = Path("/tmp/pwned_by_grader")
    marker.unlink(missing_ok=True)
    stats = {}
    start = time.time()
    scores = score_batch(HOSTILE, ["5"] * len(HOSTILE), workers=2, timeout_s=5, stats=stats)
    elapsed = time.time() - start
    assert scores == [0.0] * len(HOSTILE)
    assert elapsed < 5 * len(HOSTILE) / 2 + 10
    assert not marker.exists(), "grader executed model output"
    # in-process: every call is bounded too (the parser's guards, then the alarm)
    for text in HOSTILE:
        start = time.time()
        assert math_reward(text, "5", timeout_s=3) == 0.0
        assert time.time() - start < 4, text[:60]
    assert not marker.exists()


def test_in_process_checks_are_bounded_in_any_thread(monkeypatch):
    """The alarm in the main thread, a killable worker elsewhere: a check that would hang returns in time."""
    import threading

    import reward
    slow = "\\boxed{\\sin(e^{e^{e^{5}}})}"  # refused by the parser's size guard, not evaluated
    start = time.time()
    assert math_reward(slow, "\\sin(e^{e^{e^{5}}}) + 0", timeout_s=2) == 0.0
    assert time.time() - start < 3
    # the alarm: a check that would never end returns False at its deadline, in this (main) thread
    monkeypatch.setattr(reward, "equivalent", lambda p, g: time.sleep(1000))
    start = time.time()
    assert is_equiv("1", "2", timeout_s=1) is False and math_reward("\\boxed{1}", "2", timeout_s=1) == 0.0
    assert time.time() - start < 4
    monkeypatch.undo()
    results = []
    thread = threading.Thread(target=lambda: results.append((math_reward("\\boxed{5}", "5"),
                                                              is_equiv("0.5", "\\frac12"))))
    thread.start()
    thread.join(60)
    assert results == [(1.0, True)]
    # a check that really hangs, from a thread: the worker is killed at the deadline
    reward.close_pool()
    monkeypatch.setattr(reward, "WORKER_MODULE", "hanging_grader")   # tests/hanging_grader.py: "<hang>" hangs
    out = []
    thread = threading.Thread(target=lambda: out.append(math_reward("<hang>", "5", timeout_s=1)))
    start = time.time()
    thread.start()
    thread.join(30)
    assert out == [0.0] and time.time() - start < 10
    reward.close_pool()


# ------------------------------------------------------------------------------------------------ real model outputs
DEV = SHARED / "grader_dev" / "real_outputs_dev.jsonl.gz"


@pytest.mark.skipif(not DEV.exists(), reason="../shared/data/grader_dev (real model outputs) not beside the checkout")
def test_agreement_with_careful_verdicts_on_real_model_outputs():
    """8,204 real responses of 10 models with careful verdicts (the grader's development set): agreement >= 99.5%
    and no more false positives than the rows whose verdicts we dispute (README, "Grader accuracy")."""
    with gzip.open(DEV, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    verdicts = [math_reward(r["response"], r["gold"]) == 1.0 for r in rows]
    agree = sum(v == r["label"] for v, r in zip(verdicts, rows)) / len(rows)
    false_pos = sum(v and not r["label"] for v, r in zip(verdicts, rows))
    assert agree >= 0.995, agree
    # disputed verdicts: 26 Minerva answers in e-notation (counted correct when the held-out set was re-judged,
    # issue 21), 2 more from round 2, and 3 equivalent answers of round 3's families (`\\frac{\\pi}{6} + n\\pi` for
    # `... + \\pi k`, two ODEs rearranged: row ids 839, 1934, 1940). (Row 5725, arithmetic done in words after "the
    # answer (arabic numerals) is", is refused again since round 7: working in words is no answer in words.) Round 9 pays
    # row 2356, the same four solution families as its gold with n for k (`\\frac{\\pi}{6} + n\\pi, ...`), as row 839.
    # Round 10 pays row 2188, `f(x) = x` for the gold `f(z)=z`: one function, its variable named otherwise.
    assert false_pos <= 33, false_pos


def test_power_tower_gold_against_itself_does_not_hang():
    start = time.time()
    assert score_batch(["\\boxed{9^{9^{9^{9}}}}"], ["9^{9^{9^{9}}}"], workers=1, timeout_s=5) in ([0.0], [1.0])
    assert time.time() - start < 8


def test_timeout_kills_and_counts(monkeypatch):  # noqa: D103
    """A check that really hangs is killed at the timeout, counted, and the batch still completes."""
    import reward
    monkeypatch.setattr(reward, "WORKER_MODULE", "hanging_grader")   # tests/hanging_grader.py: "<hang>" hangs
    stats = {}
    start = time.time()
    scores = reward.score_batch(["\\boxed{5}", "<hang>", "\\boxed{5}", "<hang>", "\\boxed{6}"], ["5"] * 5,
                                workers=2, timeout_s=1.0, stats=stats)
    assert time.time() - start < 15
    assert scores == [1.0, 0.0, 1.0, 0.0, 0.0] and stats["timeouts"] == 2
    # the pool recovered: its workers were replaced and grade correctly
    assert reward.score_batch(["\\boxed{5}", "\\boxed{6}"], ["5", "5"], workers=2, timeout_s=5) == [1.0, 0.0]
    reward.close_pool()


def test_cli(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, str(ROOT / "reward.py"), "--response", "so \\boxed{0.5}", "--gold", "\\frac12"],
                         capture_output=True, text=True, env=env, check=True).stdout
    assert "correct:   True" in out and "'0.5'" in out
    f = tmp_path / "graded.jsonl"
    f.write_text("\n".join(json.dumps({"response": f"\\boxed{{{k}}}", "gold": "3"}) for k in range(4)) + "\n")
    out = subprocess.run([sys.executable, str(ROOT / "reward.py"), str(f)], capture_output=True, text=True, env=env,
                         check=True).stdout
    assert "4 rows, accuracy 0.2500" in out
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"response": "x", "gold": "1"}\n{not json}\n')
    proc = subprocess.run([sys.executable, str(ROOT / "reward.py"), str(bad)], capture_output=True, text=True, env=env)
    assert proc.returncode != 0 and "bad.jsonl:2" in proc.stderr


# ---------------------------------------------------------------------------------------------- issue 36, item 2
def test_code_and_math_follow_one_rule_after_a_prefilled_think(monkeypatch):
    """R1-distill templates open <think> in the prompt. A response that never closes it was cut off (or stopped)
    mid-thought: math gives it 0, and so does code, even when a draft program written while thinking would pass;
    the program after </think> is the one graded. A <think> the response opens itself follows the same rule."""
    import sandbox
    from reward import score_problems
    monkeypatch.setattr(sandbox, "SANDBOX", "auto")   # bwrap where it works here, else the rlimits fallback
    code = {"id": "c", "problem": "Write add.", "tests": {"kind": "functional", "asserts": ["assert add(1, 2) == 3"]}}
    math = {"id": "m", "problem": "1 + 2?", "answer": "3"}
    program = "```python\ndef add(a, b):\n    return a + b\n```"
    draft = f"Let me try:\n{program}\nHmm, but wait"                  # cut off while thinking
    closed = f"Let me try:\n```python\ndef add(a, b):\n    return 0\n```\nNo.</think>\n\nThe program:\n{program}"
    rows = [(draft, code, True, 0.0), (closed, code, True, 1.0), (draft, code, False, 1.0),
            (f"<think>{draft}", code, False, 0.0), ("hmm \\boxed{3}", math, True, 0.0),
            ("hmm</think> \\boxed{3}", math, True, 1.0)]
    for response, problem, prefilled, want in rows:
        stats = {}
        assert score_problems([response], [problem], workers=1, stats=stats, think_prefilled=prefilled) == [want], \
            (response, prefilled, stats)
        if problem is code and want == 0.0:
            assert stats["code_no_program"] == 1, stats
