"""reward.py: a table of positive and negative cases per category, real dataset solutions, hostile inputs."""
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reward import extract_answer, format_reward, gold_is_valid, is_equiv, math_reward, score_batch

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"

# (prediction, gold, equivalent?) grouped by what they test
CASES = {
    "integers and separators": [
        ("1000", "1,000", True), ("1,000", "1000", True), ("1\\,000", "1000", True), ("1{,}000", "1000", True),
        ("16,\\!386", "16386", True), ("1,234,567", "1234567", True), ("033", "33", True), ("-7", "-7", True),
        ("12346", "12345", False), ("1, 000", "1000", False), ("1,2", "12", False), ("32, 349", "32349", False),
        ("840840", "840", False), ("0", "-0", True), ("+5", "5", True), ("5", "-5", False),
        ("100", "1000", False), ("3.00", "3", True), ("3.0", "3", True), ("3.5", "3", False),
    ],
    "fractions and decimals": [
        ("0.5", "\\frac12", True), ("1/2", "\\dfrac{1}{2}", True), ("\\tfrac{1}{2}", "0.5", True),
        ("\\frac{2}{4}", "\\frac{1}{2}", True), ("\\frac{1}{3}", "0.333", True), ("0.3333", "\\frac13", True),
        ("0.3", "\\frac13", False), ("0.33", "\\frac{1}{3}", False), ("\\frac{1}{3}", "0.3", True),
        ("\\frac{-1}{2}", "-\\frac{1}{2}", True), ("-0.5", "\\frac{1}{2}", False), ("\\frac{3}{2}", "1.5", True),
        ("1.6", "1.62", False), ("1.62", "1.6", True), ("2.5", "\\frac{5}{2}", True), ("\\frac{7}{8}", "0.875", True),
        ("\\frac{1}{2^{99}}", "\\frac{1}{2^{98}}", False), ("10^{-10}", "0", False), (".5", "0.5", True),
        ("\\frac{9}{7}", "\\dfrac{9}{7}", True), ("\\frac 9 7", "\\frac{9}{7}", True), ("9/7", "\\frac{7}{9}", False),
    ],
    "mixed numbers": [
        ("2\\frac{1}{2}", "\\frac{5}{2}", True), ("2\\frac12", "2.5", True), ("-1\\frac{1}{4}", "-\\frac54", True),
        ("2\\frac{1}{2}", "1", False), ("3\\frac{1}{3}", "\\frac{10}{3}", True),
    ],
    "percent": [
        ("50\\%", "50", True), ("50%", "50", True), ("50", "50\\%", True), ("0.5", "50\\%", False),
        ("25", "0.25", False), ("12.5\\%", "12.5", True),
    ],
    "units and text": [
        ("5\\text{ cm}", "5", True), ("5 \\mbox{inches}", "5", True), ("10^\\circ", "10", True),
        ("10^{\\circ}", "10", True), ("\\$5", "5", True), ("\\$18.00", "18", True), ("5 cm", "5", True),
        ("12 square feet", "12", True), ("6\\text{ cm}^2", "6", True), ("5\\text{ cm}", "6", False),
        ("\\text{5}", "5", True), ("90^\\circ", "90", True), ("45^\\circ", "\\frac{\\pi}{4}", False),
    ],
    "constants and radicals": [
        ("\\sqrt{2}/2", "\\frac{1}{\\sqrt2}", True), ("\\frac{\\sqrt{2}}{2}", "\\frac{\\sqrt2}{2}", True),
        ("10\\sqrt{2}", "\\sqrt{200}", True), ("2\\sqrt{3}", "\\sqrt{12}", True), ("\\sqrt{3}", "\\sqrt{2}", False),
        ("\\pi", "3.14159", True), ("3.14", "\\pi", True), ("3.1", "\\pi", False), ("2\\pi", "2 \\pi", True),
        ("\\pi r^2", "r^2\\pi", True), ("e", "2.71828", True), ("e^{i\\pi}", "-1", True), ("i^2", "-1", True),
        ("\\infty", "\\infty", True), ("-\\infty", "\\infty", False), ("\\sqrt[3]{8}", "2", True),
        ("3+2i", "2i+3", True), ("3-2i", "3+2i", False), ("\\frac{\\pi}{2}", "\\pi/2", True),
        ("4\\sqrt{2}", "4\\sqrt2", True), ("\\sqrt{8}", "2\\sqrt2", True), ("2^{10}", "1024", True),
        ("\\binom{5}{2}", "10", True), ("5!", "120", True), ("\\log_2 8", "3", True), ("\\ln e", "1", True),
        ("\\sin(\\pi/6)", "\\frac12", True), ("\\cos 0", "1", True), ("|-3|", "3", True),
    ],
    "scientific notation": [
        ("4.5e33", "4.5\\times 10^{33}", True), ("4.5 \\times 10^{33}", "4.5e33", True), ("4.4e7", "44000000", True),
        ("4.5e33", "4.6e33", False), ("1.6\\times10^{-19}", "1.6e-19", True), ("3\\cdot 10^8", "300000000", True),
    ],
    "assignments and equations": [
        ("x = 3", "3", True), ("3", "x=3", True), ("x=3", "y=3", False), ("y = 2x + 1", "y = 1 + 2x", True),
        ("2y = 4x + 2", "y = 2x + 1", True), ("y = 2x + 2", "y = 2x + 1", False), ("x^2-4=0", "0", False),
        ("a+2z=5+96=101", "101", True), ("101", "a+2z=101", False), ("x^2+y^2=1", "y^2+x^2=1", True),
        ("k = 5", "5", True), ("x_1 = 2", "2", True),
    ],
    "plus-minus": [
        ("\\pm 3", "3, -3", True), ("3, -3", "\\pm 3", True), ("1 \\pm \\sqrt{2}", "1+\\sqrt2, 1-\\sqrt2", True),
        ("\\pm 3", "3", False), ("3", "\\pm 3", False),
    ],
    "lists and tuples": [
        ("1, 2", "2, 1", True), ("2, 1", "1, 2", True), ("1, 2, 3", "1, 2", False), ("(1, 2)", "(1,2)", True),
        ("(1, 2)", "(2, 1)", False), ("(1,8,19), (2,7,13)", "(2,7,13),(1,8,19)", True), ("(1, 2)", "1, 2", False),
        ("(3, \\frac{\\pi}{2})", "\\left( 3, \\frac{\\pi}{2} \\right)", True), ("(0.5, 1)", "(\\frac12, 1)", True),
        ("1,2,2", "1,2", False), ("-1, 1", "1, -1", True),
    ],
    "intervals and unions": [
        ("(-\\infty, 3] \\cup (4, 5)", "(4,5)\\cup(-\\infty,3]", True), ("(0,9)", "[0,9)", False),
        ("[0, 9)", "[0,9)", True), ("(0, 9]", "(0,9)", False), ("x \\in [1,2]", "[1,2]", True),
        ("[-2, 1)", "-2 \\le x < 1", True), ("(-\\infty, 0)", "x < 0", True), ("(-\\infty, 0]", "x < 0", False),
        ("(5, \\infty)", "x > 5", True), ("(-\\infty, 3) \\cup (3, \\infty)", "(-\\infty,3)\\cup(3,\\infty)", True),
        ("(-\\infty, 3)", "(-\\infty,3)\\cup(3,\\infty)", False),
    ],
    "inequalities": [
        ("x > 5", "5 < x", True), ("x>5", "x<5", False), ("x \\geq 2", "x \\ge 2", True), ("x \\ge 2", "x > 2", False),
        ("2 \\leq x", "x \\geq 2", True), ("x < 5", "5", False), ("-1 < x < 1", "(-1,1)", True),
    ],
    "sets": [
        ("\\{1,2\\}", "\\{2,1\\}", True), ("\\{1,2,3\\}", "\\{1,2\\}", False), ("1, 2", "\\{1, 2\\}", True),
        ("\\{3\\}", "\\{3\\}", True), ("\\{-1, 1\\}", "\\{1,-1\\}", True),
    ],
    "matrices and vectors": [
        ("\\begin{pmatrix}1\\\\2\\end{pmatrix}", "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", True),
        ("\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", True),
        ("\\begin{bmatrix} 1 & 2 \\\\ 3 & 4 \\end{bmatrix}", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", True),
        ("\\begin{pmatrix} 2 & 1 \\\\ 3 & 4 \\end{pmatrix}", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", False),
        ("\\begin{pmatrix} \\frac12 \\\\ 0.5 \\end{pmatrix}", "\\begin{pmatrix} 0.5 \\\\ \\frac{1}{2} \\end{pmatrix}", True),
        ("\\begin{pmatrix}1\\\\2\\end{pmatrix}", "\\begin{pmatrix}1\\\\2\\\\3\\end{pmatrix}", False),
    ],
    "expressions": [
        ("2x+3", "3+2x", True), ("\\frac{x}{2}", "x/2", True), ("x^2+2x+1", "(x+1)^2", True),
        ("x^2+1", "(x+1)^2", False), ("2(x+1)", "2x+2", True), ("a+b", "b+a", True), ("a-b", "b-a", False),
        ("\\frac{1}{2n+2}", "\\frac{1}{2(n+1)}", True), ("2n", "n+n", True), ("2n-2", "2(n-1)", True),
        ("n^2", "n^3", False), ("xy", "yx", True), ("x", "y", False), ("\\sin^2 x + \\cos^2 x", "1", False),
        ("\\frac{x+1}{x-1}", "\\frac{x-1}{x+1}", False), ("2^{n+1}", "2\\cdot 2^n", True), ("x^{-1}", "\\frac1x", True),
    ],
    "multiple choice": [
        ("(B)", "B", True), ("B", "(B)", True), ("\\text{(B)}", "B", True), ("\\textbf{(C)}", "C", True),
        ("\\text{(C)}", "B", False), ("A", "B", False), ("(E) 42", "E", True),
    ],
    "words": [
        ("\\text{even}", "even", True), ("Even", "\\text{even}", True), ("odd", "even", False),
        ("\\text{Monday}", "Monday", True), ("Tuesday", "Monday", False), ("yes", "\\text{Yes}", True),
    ],
    "special golds": [
        ("52_8", "52_8", True), ("52_{8}", "52_8", True), ("42", "52_8", False), ("3:1", "3:1", True),
        ("1:3", "3:1", False), ("1 : 2", "1:2", True), ("4\\!:\\!30", "4:30", True),
    ],
    "sizing and spacing": [
        ("\\left(1,2\\right)", "(1,2)", True), ("\\displaystyle\\frac{1}{2}", "0.5", True), ("1\\!000", "1000", True),
        ("\\frac{1}{2}.", "\\frac12", True), ("$\\frac{1}{2}$", "\\frac12", True), ("  7 ", "7", True),
    ],
    "not an answer": [
        ("", "5", False), ("\\frac{", "5", False), ("five", "5", False), ("the answer", "5", False),
        ("5 or 6", "5", False), ("x", "5", False), ("I(0)", "0", False), ("f(0)", "0", False), ("0x", "0", False),
    ],
}
TABLE = [(cat, p, g, want) for cat, rows in CASES.items() for p, g, want in rows]


def test_table_is_large_enough():
    assert len(TABLE) >= 200, len(TABLE)
    assert sum(not w for *_, w in TABLE) >= 60, "need plenty of negative cases"


@pytest.mark.parametrize("category,pred,gold,want", TABLE, ids=[f"{c}:{p}|{g}" for c, p, g, _ in TABLE])
def test_equivalence_table(category, pred, gold, want):
    assert is_equiv(pred, gold) is want


# ------------------------------------------------------------------------------------------------ extraction
@pytest.mark.parametrize("text,expected", [
    ("so the answer is \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}"),
    ("\\boxed{1} then \\boxed{2}", "2"),
    ("\\boxed{840} \\boxed{840}", "840"),
    ("\\boxed 5$", "5"),
    ("\\fbox{7}", "7"),
    ("\\boxed{\\text{(B)}}", "\\text{(B)}"),
    ("\\boxed{\\{1,2\\}}", "\\{1,2\\}"),
    ("<think>maybe \\boxed{1}</think> final \\boxed{2}", "2"),
    ("<think>long thought</think><answer>42</answer>", "42"),
    ("<think>\\boxed{3}</think> I give up", None),
    ("She makes 18 dollars.\n#### 18", "18"),
    ("#### $1,234", "$1,234"),
    ("So the final answer is $42$.", "42"),
    ("The answer is: 7", "7"),
    ("no answer here", None),
    ("\\boxed{\\frac{1}{2}} and \\boxed{3", "\\frac{1}{2}"),
    ("", None),
])
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


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


@pytest.mark.skipif(not SHARED.exists(), reason="../shared/data (full MATH train/test) not beside the checkout")
@pytest.mark.parametrize("name", ["math_test", "math_train"])
def test_full_math_solutions_match_their_answers(name):
    rows = _solutions(SHARED / f"{name}.jsonl")
    responses, golds = _graded(rows)
    scores = score_batch(responses, golds, workers=2, timeout_s=10)
    misses = [r["id"] for r, s in zip(rows, scores) if s != 1.0]
    assert not misses, f"{len(misses)} of {len(rows)} missed: {misses[:10]}"


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
    "\\boxed{__import__('os').system('touch /tmp/pwned_by_grader')}",
    "\\boxed{eval(\"open('/tmp/pwned_by_grader','w')\")}",
    "\\boxed{1000000!}",
    "\\boxed{\\sin(10^{100})}",
    "\\boxed{" + "(" * 5000 + "}",
    "\\boxed{" + "2^" * 500 + "2}",
    "\\boxed{9^{9^{9^{9}}}} = \\boxed{9^{9^{9^{9}}}}",
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
    # the same, in-process: the parser's own guards must stop them without a timeout
    start = time.time()
    for text in HOSTILE:
        assert math_reward(text, "5") == 0.0
    assert time.time() - start < 20


def test_power_tower_gold_against_itself_does_not_hang():
    start = time.time()
    assert score_batch(["\\boxed{9^{9^{9^{9}}}}"], ["9^{9^{9^{9}}}"], workers=1, timeout_s=5) in ([0.0], [1.0])
    assert time.time() - start < 8


def test_timeout_kills_and_counts(monkeypatch):
    """A check that really hangs is killed at the timeout, counted, and the batch still completes."""
    import reward
    for worker in reward._POOL:  # fresh workers that see the test-only hang switch
        worker.kill()
    reward._POOL.clear()
    monkeypatch.setenv("REWARD_TEST_HANG_S", "600")
    stats = {}
    start = time.time()
    scores = reward.score_batch(["\\boxed{5}", "<hang>", "\\boxed{5}", "<hang>", "\\boxed{6}"], ["5"] * 5,
                                workers=2, timeout_s=1.0, stats=stats)
    assert time.time() - start < 15
    assert scores == [1.0, 0.0, 1.0, 0.0, 0.0] and stats["timeouts"] == 2
    # the pool recovered: its workers were replaced and grade correctly
    assert reward.score_batch(["\\boxed{5}", "\\boxed{6}"], ["5", "5"], workers=2, timeout_s=5) == [1.0, 0.0]
    for worker in reward._POOL:
        worker.kill()
    reward._POOL.clear()


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
