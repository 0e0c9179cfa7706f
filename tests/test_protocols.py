"""protocols.py and the seed table's protocols (issue 42), on rows written here in the upstream layouts (LiveCodeBench's
code_generation_lite, GPQA's CSV columns, DeepCoder's tests) -- no hub, nothing fetched.

Every verdict marked "upstream" below was measured by running the upstream code itself on the same row and program
(lcb_runner/evaluation/testing_util.py run_test at LiveCodeBench/LiveCodeBench 28fef95; AceReason's
tools/code_verifier.py run_test, public copy ThakiCloud/vllm-eval-public 3a868ef; simple-evals gpqa_eval.py). Each
rule is shown in both directions where it has two: a program upstream passes that our own runner failed, and one
upstream fails that our own runner passed (`ours`: hub_sets.stdin_tests, the runner our training rows use)."""
import base64
import json
import pickle
import random
import zlib
from collections import namedtuple

import pytest

import code_reward
import data
import eval as evaluation
import hub_sets
import protocols
import reward
from data import DatasetError, Sample

SLOW_S = 60.0   # an item's limit where a pass is expected: generous, so that a loaded machine does not fail it
FENCE = "`" * 3


@pytest.fixture(autouse=True)
def fresh_hub_cache():
    hub_sets._CACHE.clear()
    yield
    hub_sets._CACHE.clear()


# ------------------------------------------------------------------------------------------------------------
# Rows in the upstream layouts
# ------------------------------------------------------------------------------------------------------------
def pack(value):
    """LiveCodeBench's private-test encoding: base64 of zlib of a pickle of the JSON text."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(value)))).decode()


def lcb_row(qid, tests, func_name=None, starter="", date="2024-09-01T00:00:00"):
    """A row of livecodebench/code_generation_lite: the first test public, the rest private."""
    kind = "functional" if func_name else "stdin"
    tests = [{"input": i, "output": o, "testtype": kind} for i, o in tests]
    return {"question_title": f"Problem {qid}", "question_content": f"Invented problem {qid}.",
            "platform": "leetcode" if func_name else "atcoder", "question_id": qid, "contest_id": "c1",
            "contest_date": date, "starter_code": starter, "difficulty": "easy",
            "public_test_cases": json.dumps(tests[:1]), "private_test_cases": pack(tests[1:]),
            "metadata": json.dumps({"func_name": func_name} if func_name else {})}


def answer(program, *, tag="python", think=True):
    """A reasoning model's response: its reasoning closed, then the program in a fenced block."""
    return ("Let me think.\n</think>\n" if think else "Let me think.\n") + f"Here it is.\n{FENCE}{tag}\n{program}{FENCE}\n"


def grade_all(items, timeout_s=SLOW_S):
    """items: [(response, tests)] -> [(score, result)], graded in one batch."""
    results = []
    scores = code_reward.score_code_batch([r for r, _ in items], [t for _, t in items], workers=2,
                                          timeout_s=timeout_s, results=results)
    return list(zip(scores, results))


SUM = [("1 2\n", "3\n"), ("10 20\n", "30\n")]
STARTER = "class Solution:\n    def lastSum(self, nums: List[int], k: int) -> int:\n        "
LAST_SUM = [("[1,2,3]\n2", "5"), ("[4,5]\n1", "5")]
LAST_SUM_REFERENCE = "class Solution:\n    def lastSum(self, nums, k):\n        return sum(nums[-k:])\n"


def stdin_problem(tests, protocol):
    return hub_sets.lcb_problem(lcb_row("abc1_a", tests), "row 0", protocol=protocol)


def call_problem(tests, protocol):
    return hub_sets.lcb_problem(lcb_row("lc1", tests, "lastSum", STARTER), "row 0", protocol=protocol)


# ------------------------------------------------------------------------------------------------------------
# 2. The verifier: each rule, with upstream's verdict under each protocol (and our own runner's)
# ------------------------------------------------------------------------------------------------------------
Rule = namedtuple("Rule", "name program tests acereason lcb ours")
STDIN_RULES = [
    # comparison: AceReason compares float tokens with numpy.allclose, lcb_runner with Decimal, ours as Decimal
    Rule("float tokens within rtol 1e-5", "input()\nprint('0.10000000000000001')\n", [("1\n", "0.1\n")],
         True, False, False),
    Rule("a 17-digit integer off by one (floats)", "input()\nprint(10**17 + 1)\n", [("1\n", f"{10**17}\n")],
         True, False, False),
    # recursion: AceReason sets 1 << 25 before the program, lcb_runner 50,000 (ours: 50,000)
    Rule("100,000-deep recursion", "def d(n):\n    return 0 if n == 0 else 1 + d(n - 1)\n"
         "a, b = map(int, input().split())\nprint(a + b + d(100000) - 100000)\n", SUM, True, False, False),
    # the int/str digit limit: lcb_runner 50,000, AceReason none; ours the interpreter's 4,300
    Rule("a 10,000-digit integer", "input()\nprint(10**10000)\n", [("1\n", "1" + "0" * 10000 + "\n")],
         True, True, False),
    Rule("a 60,000-digit integer", "input()\nprint(10**60000)\n", [("1\n", "1" + "0" * 60000 + "\n")],
         True, False, False),
    # SystemExit: swallowed in-process upstream (ours needs exit status 0)
    Rule("exit(1) after the right output", "a, b = map(int, input().split())\nprint(a + b)\nexit(1)\n", SUM,
         True, True, False),
    # stdin: AceReason's StringIO, lcb_runner's MockStdinWithBuffer; stdout captured by a StringIO in both
    Rule("sys.stdin.buffer.read()", "import sys\na, b = map(int, sys.stdin.buffer.read().split())\nprint(a + b)\n",
         SUM, False, True, True),
    Rule("sys.stdin.buffer.readline() twice", "import sys\nn = int(sys.stdin.buffer.readline())\n"
         "print(sum(map(int, sys.stdin.buffer.readline().split())))\n", [("2\n3 4\n", "7\n")], False, False, True),
    Rule("sys.stdout.buffer.write", "import sys\na, b = map(int, input().split())\n"
         "sys.stdout.buffer.write(str(a + b).encode() + b'\\n')\n", SUM, False, False, True),
    Rule("for line in sys.stdin", "import sys\nfor line in sys.stdin:\n    a, b = map(int, line.split())\n"
         "    print(a + b)\n", SUM, True, False, True),
    Rule("open(0).read()", "a, b = map(int, open(0).read().split())\nprint(a + b)\n", SUM, True, False, True),
    Rule("from sys import stdin; readline()[:-1]", "from sys import stdin\ns = stdin.readline()[:-1]\n"
         "a, b = map(int, s.split())\nprint(a + b)\n", SUM, False, False, True),
    # the program's body runs inside a function: a module-level `global` misses, __name__ is not __main__
    Rule("a module-level global", "n = 0\ndef f():\n    global n\n    n += 3\nf()\ninput()\nprint(n)\n",
         [("1 2\n", "3\n")], False, False, True),
    Rule("if __name__ == '__main__': not last", "def main():\n    a, b = map(int, input().split())\n"
         "    print(a + b)\nif __name__ == '__main__':\n    main()\nx = 1\n", SUM, True, False, True),
    Rule("a stdin program naming class Solution", "class Solution:\n    pass\na, b = map(int, input().split())\n"
         "print(a + b)\n", SUM, False, False, True),
    # AceReason rebuilds the body from source segments: decorators are dropped
    Rule("@dataclass at the top level", "from dataclasses import dataclass\n@dataclass\nclass P:\n    a: int\n"
         "    b: int\np = P(*map(int, input().split()))\nprint(p.a + p.b)\n", SUM, False, True, True),
    # reliability_guard: builtins.quit is None upstream
    Rule("quit() after the right output", "a, b = map(int, input().split())\nprint(a + b)\nquit()\n", SUM,
         False, False, True),
]


def test_stdin_rules_give_upstreams_verdicts_in_both_directions():
    items, expected = [], []
    for rule in STDIN_RULES:
        for protocol in protocols.NAMES:
            items.append((answer(rule.program), stdin_problem(rule.tests, protocol)["tests"]))
            expected.append((rule.name, protocol, getattr(rule, protocol)))
        ours = hub_sets.stdin_tests([(i, o, None, "") for i, o in rule.tests])
        items.append((answer(rule.program), ours))
        expected.append((rule.name, "ours", rule.ours))
    got = grade_all(items)
    wrong = [(name, who, want, result["status"], result["detail"][:120])
             for (name, who, want), (score, result) in zip(expected, got) if (score == 1.0) != want]
    assert not wrong, wrong
    # both directions, under the default protocol: passes upstream and failed ours, and the other way round
    assert {(r.acereason, r.ours) for r in STDIN_RULES} >= {(True, False), (False, True)}
    assert {(r.lcb, r.ours) for r in STDIN_RULES} >= {(True, False), (False, True)}


CALL_RULES = [
    Rule("the reference", LAST_SUM_REFERENCE, LAST_SUM, True, True, None),
    # AceReason's value comparison: json.dumps equal, float() allclose, a list's items float() allclose
    Rule("a number returned as a string", LAST_SUM_REFERENCE.replace("return sum", "return str(sum").replace(
        "k:])", "k:]))"), LAST_SUM, True, False, None),
    Rule("within rtol 1e-5", LAST_SUM_REFERENCE.replace("k:])", "k:]) * (1 + 1e-7)"), LAST_SUM, True, False, None),
    Rule("tuples inside the returned list", "class Solution:\n    def lastSum(self, nums, k):\n"
         "        return [(x, x) for x in nums[-k:]]\n", [("[1,2,3]\n2", "[[2, 2], [3, 3]]"), ("[4,5]\n1", "[[5, 5]]")],
         True, False, None),
    # AceReason compiles the program and makes a Solution() for every test; lcb_runner keeps one for all
    Rule("module state between tests", "calls = []\nclass Solution:\n    def lastSum(self, nums, k):\n"
         "        calls.append(1)\n        return sum(nums[-k:]) + len(calls) - 1\n", LAST_SUM, True, False, None),
    # the program's own recursion limit stands (ours reset it to 50,000 after the program)
    Rule("its own recursion limit, 100,000 deep", "import sys\nsys.setrecursionlimit(10**6)\ndef d(n):\n"
         "    return 0 if n == 0 else 1 + d(n - 1)\nclass Solution:\n    def lastSum(self, nums, k):\n"
         "        return sum(nums[-k:]) + d(100000) - 100000\n", LAST_SUM, True, True, None),
    # AceReason keeps top-level imports/assignments/defs/classes, from their source segments: no decorator
    Rule("a @dataclass helper", "from dataclasses import dataclass\n@dataclass\nclass P:\n    a: int\n"
         "class Solution:\n    def lastSum(self, nums, k):\n        return P(sum(nums[-k:])).a\n", LAST_SUM,
         False, True, None),
    # a long integer expected: read under the protocol's digit limit (lcb_runner 50,000), not this process's 4,300
    Rule("a 10,000-digit integer returned", "class Solution:\n    def lastSum(self, nums, k):\n        return 10**10000\n",
         [("[1,2,3]\n2", "1" + "0" * 10000)], True, True, None),
    # AceReason evaluates the input as Python source: JSON's true is an undefined name
    Rule("a JSON true argument", LAST_SUM_REFERENCE, [("[1,2,3]\ntrue", "3")], False, True, None),
]


def test_call_rules_give_upstreams_verdicts():
    items, expected = [], []
    for rule in CALL_RULES:
        for protocol in protocols.NAMES:
            items.append((answer(rule.program), call_problem(rule.tests, protocol)["tests"]))
            expected.append((rule.name, protocol, getattr(rule, protocol)))
    got = grade_all(items)
    wrong = [(name, who, want, result["status"], result["detail"][:120])
             for (name, who, want), (score, result) in zip(expected, got) if (score == 1.0) != want]
    assert not wrong, wrong


def test_an_object_that_equals_everything_is_never_paid():
    """Both upstreams call the returned object's __eq__ (and pay this program): a named deviation, the safe side."""
    program = ("class Anything:\n    def __eq__(self, other):\n        return True\nclass Solution:\n"
               "    def lastSum(self, nums, k):\n        return Anything()\n")
    got = grade_all([(answer(program), call_problem(LAST_SUM, p)["tests"]) for p in protocols.NAMES])
    assert [score for score, _ in got] == [0.0, 0.0], got


EXTRACTION = [
    # (name, response, acereason, lcb, ours): ours = the last ```python block after the reasoning
    ("the reasoning never closed", answer(LAST_SUM_REFERENCE, think=False), False, True, True),
    ("a ```py block", answer(LAST_SUM_REFERENCE, tag="py"), False, True, True),
    ("a ```Python block", answer(LAST_SUM_REFERENCE, tag="Python"), False, True, True),
    ("a ```python3 block", answer(LAST_SUM_REFERENCE, tag="python3"), True, True, True),
    ("a ```py3 block", answer(LAST_SUM_REFERENCE, tag="py3"), False, True, False),
    ("the right program drafted in the reasoning, a wrong untagged one after it",
     f"{FENCE}python\n{LAST_SUM_REFERENCE}{FENCE}\n</think>\n{FENCE}\nclass Solution:\n    def lastSum(self, nums, k):\n"
     f"        return 0\n{FENCE}\n", True, False, False),
    ("a note in a fenced block after the program", answer(LAST_SUM_REFERENCE) + f"Note:\n{FENCE}\nO(k)\n{FENCE}\n",
     True, False, True),
    ("a helper in a block of the reasoning", f"{FENCE}python\ndef helper(x):\n    return x\n{FENCE}\n</think>\n"
     f"{FENCE}python\nclass Solution:\n    def lastSum(self, nums, k):\n        return helper(sum(nums[-k:]))\n{FENCE}\n",
     True, False, False),
]


def test_extraction_per_protocol():
    items, expected = [], []
    for name, response, ace, lcb, ours in EXTRACTION:
        for protocol, want in (("acereason", ace), ("lcb", lcb)):
            items.append((response, call_problem(LAST_SUM, protocol)["tests"]))
            expected.append((name, protocol, want))
        # ours (the training reward's rule): the last python block of the text after the reasoning
        assert (code_reward.extract_program(response.split("</think>")[-1]) == LAST_SUM_REFERENCE) == ours, name
    got = grade_all(items)
    wrong = [(name, who, want, result["status"], result["detail"][:120])
             for (name, who, want), (score, result) in zip(expected, got) if (score == 1.0) != want]
    assert not wrong, wrong
    assert {(ace, ours) for _, _, ace, _, ours in EXTRACTION} >= {(True, False), (False, True)}
    assert protocols.extract_program("no fences at all\n</think>", call_problem(LAST_SUM, "acereason")["tests"]) is None


def test_the_training_reward_hands_a_protocol_the_whole_response():
    """reward.score_problems gives our own rows the text after the reasoning, a protocol's rows the whole response
    (each protocol has its own rule about the reasoning): AceReason pays the program written in the reasoning of
    a response whose reasoning closed (the text after it holds none), and nothing before `</think>`."""
    problem = call_problem(LAST_SUM, "acereason")
    adder = "a, b = map(int, input().split())\nprint(a + b)\n"
    stdin_ace = stdin_problem(SUM, "acereason")
    stdin_ours = dict(stdin_ace, tests=hub_sets.stdin_tests([(i, o, None, "") for i, o in SUM]))  # after it only
    responses = [f"Reasoning.\n{FENCE}python\n{LAST_SUM_REFERENCE}{FENCE}\n</think>\nDone, see above.",
                 f"Reasoning, never closed.\n{FENCE}python\n{LAST_SUM_REFERENCE}{FENCE}",
                 f"Reasoning.\n{FENCE}python\n{adder}{FENCE}\n</think>\nDone, see above."]
    scores = reward.score_problems(responses + responses[2:], [problem, problem, stdin_ace, stdin_ours], workers=2,
                                   code_timeout_s=SLOW_S, think_prefilled=True)
    assert scores == [1.0, 0.0, 1.0, 0.0]


def test_each_protocols_limits_modules_and_memory_travel_with_its_tests():
    for protocol, limit, margin in (("acereason", 10, 10), ("lcb", 6, 5)):
        tests = stdin_problem(SUM, protocol)["tests"]
        assert tests["time_limit_s"] == limit and tests["modules"] == ["numpy"] and tests["memory_mb"] == 4096
        assert code_reward.item_timeout_s(tests, 1.0) == (limit + 1) * 2 + margin
        assert data.validate_tests(tests) == (tests, None)
    assert protocols.switch(stdin_problem(SUM, "acereason")["tests"], "lcb")["time_limit_s"] == 6
    bad = dict(stdin_problem(SUM, "lcb")["tests"], protocol="nope")
    assert data.validate_tests(bad)[1].startswith("field 'tests.protocol': expected one of acereason, lcb")
    assert data.validate_tests(dict(bad, protocol="lcb", cases=[]))[1].startswith("field 'tests.cases'")


def test_the_expected_output_never_enters_the_sandbox_under_a_protocol():
    """The protocols change what is compared, never the sandbox: a program that searches its whole process for the
    expected output finds nothing (it stays in the checker), under both."""
    secret = "zebra-" + "".join(random.Random(7).choices("abcdefghij", k=24))
    seeker = ("import gc\ninput()\nfound = [o for o in gc.get_objects() if isinstance(o, str) and o.startswith('zebra-')]\n"
              "print(found[0] if found else 'nothing')\n")
    items = [(answer(seeker), stdin_problem([("1\n", secret + "\n")], p)["tests"]) for p in protocols.NAMES]
    assert [score for score, _ in grade_all(items)] == [0.0, 0.0]


# ------------------------------------------------------------------------------------------------------------
# The tests that need the sandbox side of the interface (issue 46: tests fields `modules` and `memory_mb`); they
# fail until the sandbox mounts numpy read-only and applies memory_mb
# ------------------------------------------------------------------------------------------------------------
def test_numpy_is_importable_under_both_protocols():
    """AceReason's prelude imports numpy as np; lcb_runner's environment has it installed (upstream: both pass)."""
    items = [(answer("a, b = map(int, input().split())\nprint(int(np.int64(a) + b))\n"),
              stdin_problem(SUM, "acereason")["tests"]),
             (answer("import numpy\na, b = map(int, input().split())\nprint(int(numpy.array([a, b]).sum()))\n"),
              stdin_problem(SUM, "lcb")["tests"])]
    got = grade_all(items)
    assert [score for score, _ in got] == [1.0, 1.0], [r["detail"] for _, r in got]


def test_a_640_mb_list_fits_both_protocols_memory():
    """Upstream sets no memory limit; a protocol's memory_mb (4 GB) lets a 640 MB list live (512 MB did not)."""
    program = "a, b = map(int, input().split())\nbig = [0] * (80 * 2**20)\nprint(a + b + big[-1])\n"
    got = grade_all([(answer(program), stdin_problem(SUM[:1], p)["tests"]) for p in protocols.NAMES])
    assert [score for score, _ in got] == [1.0, 1.0], [r["detail"] for _, r in got]


# ------------------------------------------------------------------------------------------------------------
# 1. The problem set per release, its expected count
# ------------------------------------------------------------------------------------------------------------
def hub_files(tmp_path, monkeypatch, rows_by_file):
    files = {}
    for name in hub_sets.LCB_RELEASE_FILES["release_v6"]:
        path = tmp_path / name
        path.write_text("".join(json.dumps(r) + "\n" for r in rows_by_file.get(name, [])))
        files[name] = str(path)
    monkeypatch.setattr(hub_sets, "hub_file", lambda spec, repo, filename: files[filename])


def test_v5_reads_release_v5_and_v6_the_problems_release_v6_added(tmp_path, monkeypatch):
    hub_files(tmp_path, monkeypatch, {
        "test4.jsonl": [lcb_row("q_jul", SUM, date="2024-07-31T23:00:00"), lcb_row("q_aug", SUM, date="2024-08-01T00:00:00")],
        "test5.jsonl": [lcb_row("q_jan5", SUM, date="2025-01-25T12:00:00")],
        "test6.jsonl": [lcb_row("abc387_b", SUM, date="2025-01-04T00:00:00"),   # January, but new in release_v6
                        lcb_row("q_feb", SUM, date="2025-02-01T00:00:00"), lcb_row("q_apr", SUM, date="2025-04-20T00:00:00")]})
    assert [p["id"] for p in data.load_dataset("livecodebench")] == ["q_aug", "q_jan5"]        # not abc387_b
    assert [p["id"] for p in data.load_dataset("livecodebench:v6")] == ["abc387_b", "q_feb", "q_apr"]
    assert [p["id"] for p in data.load_dataset("livecodebench:2024-08-01..2025-02-01")] == ["q_aug", "q_jan5", "abc387_b"]
    assert hub_sets.load_report("livecodebench") == {"malformed": [], "expected": 279, "rows": 2, "problems": 2}
    assert hub_sets.load_report("livecodebench:v6")["expected"] == 175
    assert hub_sets.expected_problems("livecodebench:2024-08-01..2025-02-01") is None


def test_a_column_is_called_v5_only_with_v5s_count(tmp_path, monkeypatch):
    many = [lcb_row(f"q{k}", SUM[:1], date="2024-10-01T00:00:00") for k in range(279)]
    hub_files(tmp_path, monkeypatch, {"test5.jsonl": many})
    problems = data.load_dataset("livecodebench")
    kept, checks = evaluation.protocol_checks("livecodebench", problems, "acereason", "simple-evals", whole=True)
    assert len(kept) == 279 and "column" not in checks["summary"]
    assert checks["summary"]["found_problems"] == checks["summary"]["expected_problems"] == 279
    assert checks["lines"] == ["279 problems, as the published v5 column"]
    hub_sets._CACHE.clear()
    hub_files(tmp_path, monkeypatch, {"test5.jsonl": many[:3], "test6.jsonl": [lcb_row("abc387_b", SUM[:1], date="2025-01-04T00:00:00")]})
    problems = data.load_dataset("livecodebench:2024-08-01..2025-02-01")   # the window over release_v6: no column
    kept, checks = evaluation.protocol_checks("livecodebench:2024-08-01..2025-02-01", problems, "acereason",
                                              "simple-evals", whole=True)
    assert len(kept) == 4 and checks["summary"] == {"code_protocol": "acereason"}
    problems = data.load_dataset("livecodebench")
    _, checks = evaluation.protocol_checks("livecodebench", problems, "acereason", "simple-evals", whole=True)
    assert checks["summary"]["column"] == "livecodebench (NOT v5: 3 problems, v5 has 279)"
    _, checks = evaluation.protocol_checks("livecodebench", problems, "acereason", "simple-evals", whole=False)
    assert "column" not in checks["summary"]   # --limit: a part of the column, not another one


# ------------------------------------------------------------------------------------------------------------
# 5. Malformed hub rows: skipped and counted, refused only when all are
# ------------------------------------------------------------------------------------------------------------
def malformed_rows():
    bad_base64 = dict(lcb_row("bad_b64", SUM), private_test_cases="not%base64!")
    trailing = lcb_row("trailing_nl", [("[1,2,3]\n2\n", "5"), ("[4,5]\n1", "5")], "lastSum", STARTER)
    mismatch = lcb_row("mismatch", SUM)
    mismatch["metadata"] = json.dumps({"func_name": "lastSum"})   # stdin tests, but a function named
    return [lcb_row("good", SUM), bad_base64, trailing, mismatch]


def test_malformed_hub_rows_are_skipped_and_counted(tmp_path, monkeypatch):
    hub_files(tmp_path, monkeypatch, {"test5.jsonl": malformed_rows()})
    lines = []
    problems = hub_sets.named_rows("livecodebench", log=lines.append)[1]
    # AceReason reads the trailing newline as a trailing comma (its argument list); lcb_runner cannot (below)
    assert [p["id"] for _, p in problems] == ["good", "trailing_nl"]
    report = hub_sets.load_report("livecodebench")
    assert report["rows"] == 4 and report["problems"] == 2 and len(report["malformed"]) == 2
    (first, why_first), (second, why_second) = report["malformed"]
    assert first == "test5.jsonl:2" and why_first.startswith("field 'private_test_cases': neither JSON nor base64")
    assert second == "test5.jsonl:4" and why_second.startswith("field 'public_test_cases[0].testtype': 'stdin', but "
                                                               "the problem is functional")
    assert lines == [f"livecodebench/code_generation_lite: skipped 2 of 4 malformed rows (e.g. test5.jsonl:4: "
                     f"{why_second})"]
    kept, checks = evaluation.protocol_checks("livecodebench", data.load_dataset("livecodebench"), "lcb",
                                              "simple-evals", whole=True)
    assert [p["id"] for p in kept] == ["good"] and checks["summary"]["malformed"] == 3
    assert checks["summary"]["malformed_examples"][2].startswith("trailing_nl: an input line is not JSON")
    # every row malformed: refused, saying why
    hub_sets._CACHE.clear()
    hub_files(tmp_path, monkeypatch, {"test5.jsonl": malformed_rows()[1::2]})
    with pytest.raises(DatasetError, match=r"no row with supported, well-formed tests \(all 2 skipped"):
        data.load_dataset("livecodebench")
    # a local file in the same layout is the user's: a malformed row is refused, naming it
    path = tmp_path / "lcb_local.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in malformed_rows()))
    with pytest.raises(DatasetError, match=r"lcb_local.jsonl:2: field 'private_test_cases'"):
        data.load_dataset(str(path))


def gpqa_row(k, **extra):
    return {"Question": f"Invented question {k}?", "Correct Answer": f"teal {k}", "Incorrect Answer 1": f"mauve {k}",
            "Incorrect Answer 2": f"ochre {k}", "Incorrect Answer 3": f"umber {k}", "Record ID": f"rec{k:03d}", **extra}


def test_a_gpqa_row_with_duplicate_options_is_skipped_and_counted(monkeypatch):
    rows = [gpqa_row(0), gpqa_row(1, **{"Incorrect Answer 3": "teal 1"}), gpqa_row(2)]
    monkeypatch.setattr(hub_sets, "hub_rows", lambda spec, path, config, split, gated: [dict(r) for r in rows])
    assert [p["id"] for p in data.load_dataset("gpqa_diamond")] == ["rec000", "rec002"]
    report = hub_sets.load_report("gpqa_diamond")
    assert report["rows"] == 3 and [m[0] for m in report["malformed"]] == ["row 1"]


# ------------------------------------------------------------------------------------------------------------
# 4. GPQA-Diamond: simple-evals' verdict for the seed table, ours beside it
# ------------------------------------------------------------------------------------------------------------
def test_simple_evals_takes_the_first_answer_line_anywhere():
    letter = protocols.simple_evals_letter
    assert letter("Maybe Answer: B at first.\n</think>\nAnswer: C") == "B"      # reasoning included, first wins
    assert letter("answer : $d$") == "d" and letter("Answer:\tA") == "A"       # its regex's case and spacing
    assert letter("Answer: **C**") is None and letter("\\boxed{C}") is None and letter("Answer: (C)") is None


class Tokenizer:
    bos_token_id = None

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=True):
        return [ord(c) for c in f"<user>{messages[-1]['content']}<assistant>"]

    def decode(self, ids):
        return "".join(chr(i) for i in ids)


class RightLetterEngine:
    """Answers each GPQA prompt with the right letter, written as `style` (a format string of the letters)."""
    max_model_len = 10_000

    def __init__(self, style):
        self.style = style

    def generate(self, prompts, n, temperature, top_p, max_tokens, seed, logprobs=True):
        out = []
        for ids in prompts:
            text = "".join(chr(i) for i in ids)
            right = next(line[0] for line in text.split("\n") if line[3:].startswith("teal"))
            wrong = "A" if right != "A" else "B"
            out += [Sample(list(ids), [1], [0.0], "stop", self.style.format(right=right, wrong=wrong))] * n
        return out


@pytest.mark.parametrize("style,simple_evals,ours", [
    # upstream pays it, ours did not: a hedge after the first answer line
    ("Thinking.\nAnswer: {right} or {wrong}", 1.0, 0.0),
    # upstream does not pay it, ours did: bold, and a wrong guess in the reasoning before the right final answer
    ("Answer: **{right}**", 0.0, 1.0),
    ("I guess Answer: {wrong}. Checking...\n</think>\nThe answer is \\boxed{{{right}}}", 0.0, 1.0),
])
def test_gpqa_is_graded_by_simple_evals_and_ours_is_reported_beside_it(style, simple_evals, ours, monkeypatch):
    rows = [gpqa_row(k) for k in range(3)]
    monkeypatch.setattr(hub_sets, "hub_rows", lambda spec, path, config, split, gated: [dict(r) for r in rows])
    problems = data.load_dataset("gpqa_diamond")
    records, _ = evaluation.sample_and_grade(RightLetterEngine(style), Tokenizer(), problems, 4, template="chat_raw",
                                             workers=1)
    assert all(r["correct"] == bool(simple_evals) and r["verdicts"] == {"simple-evals": bool(simple_evals),
                                                                       "ours": bool(ours)} for r in records), records[0]
    summary = evaluation.summarize(records, 4)
    assert summary["avg@4"] == simple_evals and summary["verdicts"] == {"simple-evals": simple_evals, "ours": ours,
                                                                        "disagreement": 1.0}
    records, _ = evaluation.sample_and_grade(RightLetterEngine(style), Tokenizer(), problems, 1, template="chat_raw",
                                             workers=1, gpqa_protocol="ours")
    assert [r["correct"] for r in records] == [bool(ours)] * 3
    notes = evaluation.protocol_notes("gpqa_diamond", {**summary, "gpqa_protocol": "simple-evals"})
    assert notes == [f"- gpqa_diamond: graded by `simple-evals`; by `ours` avg@4 would be {100 * ours:.1f}; the two "
                     f"disagree on 100.0% of samples"]


# ------------------------------------------------------------------------------------------------------------
# The eval end to end: protocol, window count and malformed rows in the results file
# ------------------------------------------------------------------------------------------------------------
class ProgramEngine:
    """Answers a prompt with a function header with one program, any other with another."""
    max_model_len = 100_000

    def __init__(self, call, stdin):
        self.call, self.stdin = call, stdin

    def generate(self, prompts, n, temperature, top_p, max_tokens, seed, logprobs=True):
        return [Sample(list(ids), [1], [0.0], "stop", self.call if "Function header" in "".join(map(chr, ids))
                       else self.stdin) for ids in prompts for _ in range(n)]


def test_eval_writes_the_protocol_the_count_and_the_malformed_rows(tmp_path, monkeypatch):
    hub_files(tmp_path, monkeypatch, {"test5.jsonl": malformed_rows()})
    engine = ProgramEngine(answer(LAST_SUM_REFERENCE), answer("a, b = map(int, input().split())\nprint(a + b)\n"))
    results = evaluation.evaluate(engine, Tokenizer(), ["livecodebench"], k=1, out_dir=tmp_path / "out", workers=2,
                                  timeout_s=SLOW_S, log=lambda line: None)
    summary = results["livecodebench"]
    assert summary["problems"] == 2 and summary["avg@1"] == 1.0 and summary["malformed"] == 2
    assert summary["avg@1_malformed_as_0"] == 0.5 and summary["code_protocol"] == "acereason"
    text = (tmp_path / "out" / "results.md").read_text()
    assert "| livecodebench (NOT v5: 4 problems, v5 has 279) | avg@1 | 100.0 |" in text
    assert "- livecodebench: code protocol `acereason` (NVIDIA AceReason evaluation toolkit" in text
    assert "- livecodebench: 2 malformed row(s) skipped (e.g. test5.jsonl:2: field 'private_test_cases'" in text
    assert "scored 0 as upstream does: avg@1 50.0" in text
    saved = json.loads((tmp_path / "out" / "summary.json").read_text())["results"]["livecodebench"]
    assert saved["malformed"] == 2 and saved["expected_problems"] == 279 and saved["found_problems"] == 4


# ------------------------------------------------------------------------------------------------------------
# 6. DeepCoder's training rows as rllm builds them
# ------------------------------------------------------------------------------------------------------------
def test_deepcoder_rows_are_built_as_rllm_builds_them():
    taco = {"problem": "Invented TACO problem.", "starter_code": "", "metadata": "{}",
            "tests": json.dumps({"inputs": ["1 2\n", "10 20\n", "5 5\n"], "outputs": ["3\n", "30\n"]})}
    prime = {"problem": "Invented PrimeIntellect problem.", "starter_code": "", "metadata": "{}",
             "tests": json.dumps([{"type": "stdin_stdout", "input": f"{k} 1\n" + "x" * k, "output": f"{k + 1}\n"}
                                  for k in range(20)])}
    lcb = {"problem": "Invented LeetCode problem.", "starter_code": STARTER,
           "tests": json.dumps([{"input": i, "output": o, "testtype": "functional"} for i, o in LAST_SUM * 10]),
           "metadata": json.dumps({"func_name": "lastSum"})}
    problems = [p for _, p in hub_sets.convert_rows([(f"row {k}", r) for k, r in enumerate([taco, prime, lcb])],
                                                    "deepcoder")]
    taco_tests, prime_tests, lcb_tests = (p["tests"] for p in problems)
    assert [c["input"] for c in taco_tests["cases"]] == ["1 2\n", "10 20\n"]     # zipped: the shorter wins
    assert taco_tests["time_limit_s"] == prime_tests["time_limit_s"] == 12
    assert len(prime_tests["cases"]) == 15 and prime_tests["cases"][0]["input"].startswith("5 1\n")  # the 15 longest
    assert lcb_tests["protocol"] == "lcb" and lcb_tests["time_limit_s"] == 6 and len(lcb_tests["cases"]) == 20
    got = grade_all([(answer("a, b = map(int, input().split())\nprint(a + b)\n"), taco_tests),
                     (answer(LAST_SUM_REFERENCE), lcb_tests)])
    assert [score for score, _ in got] == [1.0, 1.0], got
