"""The published protocols: how the seed tables' sources graded LiveCodeBench and GPQA-Diamond, in one place.

A number is comparable with a published one only when the problems, the prompt and the verdict rules are the
source's. The rules of each code protocol are the rows of PROTOCOLS (data, read by everything else) and the
functions below them; each function names the upstream file it follows. README.md, "Evaluation: the seed table",
says which column uses which and why.

    "acereason"  NVIDIA's AceReason evaluation toolkit (tools/code_verifier.py): the seeds' LiveCodeBench column
                 (AceReason-Nemotron and AceMath-RL report LiveCodeBench with it); the default for livecodebench
    "lcb"        lcb_runner (LiveCodeBench/LiveCodeBench, lcb_runner/evaluation/testing_util.py): the benchmark's
                 own harness; DeepCoder's training reward grades its LiveCodeBench rows with a copy of it

Where a protocol runs: the checker (code_reward.py, a trusted process) extracts the program (extract_program),
rewrites it as upstream does (stdio_module, call_source), parses the expected values and compares
(same_output, same_value). The sandboxed process runs HARNESS: upstream's in-process runner (a fresh module per
compile, stdin mocked with unittest.mock exactly as upstream patches it, stdout captured, SystemExit swallowed,
upstream's reliability_guard), so a program sees what it saw upstream. Whatever the protocol, the sandbox keeps
every guarantee: a protocol may only ask for the tests fields `modules` (read-only, the sandbox's allowlist) and
`memory_mb`; the verdict is still computed from plain data by the checker.

Deviations kept on purpose: memory is bounded (upstream sets none); a value that is not plain data (an object
with its own __eq__) never equals the expected value (both the safe side); a returned numpy array is compared as
its list (upstream's `==` on one of more than one element raises: it refuses what this pays).

    extract_program(response, tests)      the program a protocol grades, or None
    check_tests(tests)                    None, or why the tests cannot be graded by their protocol
    code_tests(kind, cases, protocol)     a problem's tests under a protocol (Unreadable: it cannot read them)
    switch(tests, protocol)               the same problem's tests under another protocol
    simple_evals_letter(response)         GPQA: simple-evals' extracted letter (first `Answer: X`), or None
"""
import ast
import json
import math
import re

# ------------------------------------------------------------------------------------------------------------
# The rules, one row per protocol
# ------------------------------------------------------------------------------------------------------------
# lcb_runner/evaluation/testing_util.py import_string, verbatim (its last line sets the recursion limit, before
# the program: a limit the program sets itself stands)
LCB_IMPORTS = "".join(f"from {m} import *\n" for m in (
    "string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random", "statistics",
    "itertools", "functools", "operator", "io", "sys", "json", "builtins", "typing")) + "".join(
    f"import {m}\n" for m in ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random",
                              "statistics", "itertools", "functools", "operator", "io", "sys", "json")) + \
    "sys.setrecursionlimit(50000)\n"
# AceReason's code_verifier.py import_string (the line of rllm's TACO runner it descends from; one public copy
# widens `from typing import List, Tuple` to `*` and adds `comb`). numpy is imported when the sandbox offers it
# (tests field `modules`): without it the program gets no `np` rather than no verdict.
ACE_IMPORTS = ("import sys\nsys.setrecursionlimit(1 << 25)\nimport time\nimport re\nimport bisect\nimport itertools\n"
               "from itertools import accumulate, product, permutations, combinations\nimport collections\n"
               "from collections import Counter, OrderedDict, deque, defaultdict, ChainMap\n"
               "from functools import lru_cache\nimport math\n"
               "from math import sqrt, sin, cos, tan, ceil, fabs, floor, gcd, exp, log, log2\nimport fractions\n"
               "from typing import List, Tuple\ntry:\n    import numpy as np\nexcept ImportError:\n    pass\n"
               "import random\nimport heapq\nfrom heapq import *\n")

PROTOCOLS = {
    "acereason": {
        "source": "NVIDIA AceReason evaluation toolkit tools/code_verifier.py + evaluate_livecodebench.py (public "
                  "copy: ThakiCloud/vllm-eval-public eval/nvidia_eval/)",
        "extraction": "needs '</think>'; ```python blocks anywhere (```python3 too, not ```py / ```Python); stdin: "
                      "the last; call-based: all of them, top-level imports/assignments/defs/classes only "
                      "(decorators dropped)",
        "tests": "public + private",
        "time_limit_s": 10,        # evaluate_livecodebench.py --timeout default, per test (and per compile)
        "item_margin_s": 10,       # the whole item: (limit + 1) x tests + this (its check_correctness)
        "memory_mb": 4096,         # upstream: none (reliability_guard(None)); here: bounded, 4 GB
        "modules": ["numpy"],      # imported as np by its import_string
        "int_max_str_digits": 0,   # the verifier sets none (issue 42 reads it as lifted: an interpreter before 3.10.7)
        "prelude": ACE_IMPORTS,    # before the program; recursion limit 1 << 25, the program's own stands
        "stdin": "stringio",       # sys.stdin = StringIO(input): no sys.stdin.buffer
        "stdout": "captured",      # sys.stdout = StringIO: no sys.stdout.buffer; os.write(1) is not seen
        "system_exit": "swallowed",
        "compare_stdout": "lines stripped, same count; a line equal as text, as float tokens, or numpy.allclose "
                          "(rtol 1e-5, atol 1e-8): 10**17 and 10**17 + 1 are equal",
        "compare_value": "==, or json.dumps equal, or float() allclose, or a list's items float() allclose",
        "call": "a fresh module and Solution() per test; the input's lines, joined by commas at depth 0, are the "
                "call's argument source (Python, not JSON: true/null are undefined names)",
        "function": "the first `def NAME(` of the starter code",
    },
    "lcb": {
        "source": "LiveCodeBench/LiveCodeBench lcb_runner/evaluation/testing_util.py (May 2025), "
                  "compute_code_generation_metrics.py, utils/extraction_utils.py, runner/parser.py",
        "extraction": "the text between the last two lines containing ``` anywhere in the response",
        "tests": "public + private",
        "time_limit_s": 6,         # runner/parser.py --timeout, per test (and per compile)
        "item_margin_s": 5,        # compute_code_generation_metrics.py: (timeout + 1) x tests + 5
        "memory_mb": 4096,         # upstream: none; here: bounded, 4 GB
        "modules": ["numpy"],      # installed with lcb_runner: a program may import it
        "int_max_str_digits": 50000,   # compute_code_generation_metrics.py sys.set_int_max_str_digits(50000)
        "prelude": LCB_IMPORTS,
        "stdin": "buffer",         # MockStdinWithBuffer: read() whole, readline() with '\n', readlines() without,
                                   # buffer.read() bytes, buffer.readline() always the first line; no iteration
        "stdout": "captured",
        "system_exit": "swallowed",
        "compare_stdout": "lines stripped, same count; a line equal as text or as a list of Decimals",
        "compare_value": "== (a returned tuple as a list); stop at the first failure",
        "call": "one Solution() (or the module) for all tests; each input line one JSON argument",
        "function": "metadata.func_name",
    },
}
NAMES = tuple(PROTOCOLS)
DEFAULT = "acereason"


def rules(protocol):
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown code protocol {protocol!r} (choose from {', '.join(NAMES)})")
    return PROTOCOLS[protocol]


# ------------------------------------------------------------------------------------------------------------
# The tests of a problem under a protocol
# ------------------------------------------------------------------------------------------------------------
class Unreadable(ValueError):
    """Tests a protocol cannot read (upstream grades such a problem 0 for every program). case: the index of the
    case at fault, or None (the outputs are read all or nothing)."""

    def __init__(self, case, why):
        super().__init__(why)
        self.case, self.why = case, why


def code_tests(kind, cases, protocol=DEFAULT, func_name=None, starter_code=""):
    """A problem's tests under `protocol` (data.validate_tests' schema): kind 'stdio' or 'functional', cases
    [{input, output}] (LiveCodeBench's text, unparsed), the protocol's limits, modules and memory. Unreadable
    (a ValueError) when the protocol cannot read a case."""
    row = rules(protocol)
    tests = {"kind": kind, "protocol": protocol, "cases": [{"input": c["input"], "output": c["output"]} for c in cases],
             "time_limit_s": row["time_limit_s"], "modules": list(row["modules"]), "memory_mb": row["memory_mb"]}
    if kind == "functional":
        tests.update(func_name=func_name, starter_code=starter_code or "")
        name = function_name(tests)
        if not (isinstance(name, str) and name.isidentifier()):
            raise Unreadable(None, f"no function name for protocol {protocol} (got {name!r})")
        if protocol == "lcb":
            lcb_arguments(tests["cases"])
            lcb_expected(tests["cases"])
        else:
            for k, case in enumerate(tests["cases"]):
                ace_arguments(case["input"], k)
            ace_expected(tests["cases"])
    return tests


def switch(tests, protocol):
    """The same problem's tests under another protocol (its limits and rules); Unreadable if it cannot read them."""
    return code_tests(tests["kind"], tests["cases"], protocol, tests.get("func_name"), tests.get("starter_code", ""))


def check_tests(tests):
    """None when the protocol named by tests['protocol'] can read every case; else why not, naming the field."""
    protocol = tests.get("protocol")
    if protocol not in PROTOCOLS:
        return f"field 'tests.protocol': expected one of {', '.join(NAMES)}, got {protocol!r}"
    cases = tests.get("cases")
    if not isinstance(cases, list) or not cases or not all(
            isinstance(c, dict) and set(c) == {"input", "output"} and all(isinstance(v, str) for v in c.values())
            for c in cases):
        return "field 'tests.cases': expected a non-empty list of {input: str, output: str}"
    if tests.get("kind") not in ("stdio", "functional"):
        return f"field 'tests.kind': must be 'functional' or 'stdio', got {tests.get('kind')!r}"
    try:
        code_tests(tests["kind"], cases, protocol, tests.get("func_name"), tests.get("starter_code", ""))
    except Unreadable as exc:
        where = "cases" if exc.case is None else f"cases[{exc.case}]"
        return f"field 'tests.{where}': {exc.why} (protocol {protocol})"
    return None


def function_name(tests):
    """The function a call-based test calls: AceReason derives it from the starter code (evaluate_livecodebench.py
    get_starter_code: the text between the first 'def' and '('), lcb_runner reads metadata.func_name."""
    if tests["protocol"] == "acereason" and tests.get("starter_code"):
        header = tests["starter_code"]
        return header.split("def")[1].split("(")[0].strip() if "def " in header else header
    return tests.get("func_name")


def _json(text, protocol):
    """json.loads with the integer digits the protocol's process allows (upstream's json.loads of a long integer
    runs under its own set_int_max_str_digits; this process keeps Python's default)."""
    limit = rules(protocol)["int_max_str_digits"]

    def read_int(digits):
        body = digits.lstrip("-")
        if limit and len(body) > limit:
            raise ValueError(f"an integer of {len(body)} digits (the protocol's limit: {limit})")
        if len(body) <= 4000:
            return int(digits)
        half = len(body) // 2   # two halves under the default limit: no process-wide setting changed
        value = read_int(body[:-half]) * 10 ** half + read_int(body[-half:])
        return -value if digits.startswith("-") else value
    return json.loads(text, parse_int=read_int)


def lcb_arguments(cases):
    """lcb_runner grade_call_based: every input line is one JSON argument (all parsed before any test runs)."""
    arguments = []
    for k, case in enumerate(cases):
        try:
            arguments.append([_json(line, "lcb") for line in case["input"].split("\n")])
        except (ValueError, RecursionError) as exc:
            raise Unreadable(k, f"an input line is not JSON ({getattr(exc, 'msg', exc)}; a trailing newline "
                                f"leaves an empty line)") from None
    return arguments


def lcb_expected(cases):
    expected = []
    for k, case in enumerate(cases):
        try:
            expected.append(_json(case["output"], "lcb"))
        except (ValueError, RecursionError) as exc:
            raise Unreadable(k, f"the output is not JSON ({getattr(exc, 'msg', exc)})") from None
    return expected


def ace_arguments(text, k=0):
    """code_verifier.py replace_newlines: the input's newlines outside [] and {} become commas; the result is the
    call's argument source, evaluated as Python in the program's module. Unreadable if that is not a call's
    argument list."""
    depth, out = 0, []
    for char in text:
        depth += (char in "[{") - (char in "]}")
        out.append("," if char == "\n" and depth == 0 else char)
    source = "".join(out)
    try:
        ast.parse(f"f({source})", mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise Unreadable(k, "the input is not a Python argument list") from None
    return source


def ace_expected(cases):
    """code_verifier.py grade_call_based: every output as JSON; else every one as a Python literal through JSON;
    else every one as a Python argument tuple (one bracketed literal: a list of it). Unreadable if none reads all."""
    outputs = [case["output"] for case in cases]
    try:
        return [_json(o, "acereason") for o in outputs]
    except (ValueError, RecursionError):
        pass
    try:
        return [json.loads(json.dumps(ast.literal_eval(o))) for o in outputs]
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    values = []
    for o in outputs:
        s = o.strip()
        try:
            value = ast.literal_eval(f"({o},)" if s.startswith("[") and s.endswith("]") else f"({o})")
            values.append(list(value))
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise Unreadable(None, "the outputs are neither all JSON nor all Python literals") from None
    return values


# ------------------------------------------------------------------------------------------------------------
# Extraction (checker side: plain text in, program text out)
# ------------------------------------------------------------------------------------------------------------
ACE_BLOCK = re.compile(r"```python(?:[a-zA-Z0-9]*)\n(.*?)```", re.DOTALL)   # code_verifier.py has_code


def extract_program(response, tests):
    """The program the protocol grades from the WHOLE response (reasoning included), or None: no block, the
    reasoning never closed (acereason), call-based blocks that do not parse (acereason's "Compile Error")."""
    if tests["protocol"] == "lcb":   # lcb_runner/utils/extraction_utils.py extract_code
        lines = response.split("\n")
        fences = [i for i, line in enumerate(lines) if "```" in line]
        program = "\n".join(lines[fences[-2] + 1:fences[-1]]) if len(fences) >= 2 else ""
        return program if program.strip() else None
    # AceReason: code_verifier.py run_test + has_code + post_process_code
    if "</think>" not in response:
        return None
    blocks = ACE_BLOCK.findall(response)
    if blocks and blocks[0] == "Your code\n":
        blocks = blocks[1:]
    if not blocks:
        return None
    if tests["kind"] == "functional":   # every block, top-level definitions only (extract_functions)
        joined = "\n".join(blocks)
        try:
            code = "\n".join(_segments(joined, (ast.Import, ast.ImportFrom, ast.Assign, ast.FunctionDef, ast.ClassDef)))
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return None   # upstream: "Compile Error", nothing runs
    else:
        code = blocks[-1]
    code = code.split("</code>")[0].replace("```python", "").split("```")[0].replace("<code>", "")
    return (code.replace("\t", "    ").replace('if __name__ == "__main__":', "if True:")
            .replace("if __name__ == '__main__':", "if True:"))


def _segments(code, kinds):
    """The source text of each top-level statement of one of `kinds` (ast.get_source_segment: a decorated def's
    segment starts at `def`, so its decorators are not in it)."""
    return [ast.get_source_segment(code, node) for node in ast.parse(code).body if isinstance(node, kinds)]


# ------------------------------------------------------------------------------------------------------------
# Rewriting the program as upstream runs it (checker side)
# ------------------------------------------------------------------------------------------------------------
def stdio_module(program, protocol):
    """The module upstream compiles for a stdin program: the program's body inside `def wrapped_function():`,
    its top-level imports hoisted, after the protocol's prelude; a final `if __name__ == '__main__':` unwrapped.
    A program that does not parse is left as it is (its compile then fails, as upstream's)."""
    if protocol == "lcb":   # testing_util.py clean_if_name + make_function (ast.unparse)
        try:
            tree = ast.parse(program)
            last = tree.body[-1]
            if isinstance(last, ast.If) and ast.unparse(last.test).strip() == "__name__ == '__main__'":
                program = ast.unparse(tree.body[:-1]) + "\n" + ast.unparse(last.body)
        except Exception:  # noqa: BLE001 -- upstream's bare except: the program stays as it is
            pass
        try:
            body = ast.parse(program).body
            imports = [s for s in body if isinstance(s, (ast.Import, ast.ImportFrom))]
            function = ast.FunctionDef(name="wrapped_function", args=ast.arguments(
                posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
                body=[s for s in body if s not in imports], decorator_list=[], returns=None, type_comment=None,
                lineno=-1, **({"type_params": []} if "type_params" in ast.FunctionDef._fields else {}))
            return LCB_IMPORTS + "\n" + ast.unparse(imports) + "\n" + ast.unparse(function)
        except Exception:  # noqa: BLE001
            return program
    # AceReason: code_verifier.py clean_if_name + make_function (source segments, each line indented 4 spaces)
    try:
        tree = ast.parse(program)
        last = tree.body[-1] if tree.body else None
        if isinstance(last, ast.If):
            test = ast.get_source_segment(program, last.test)
            if test and test.strip() == "__name__ == '__main__'":
                pieces = [ast.get_source_segment(program, node) for node in tree.body[:-1] + last.body]
                program = "\n".join(p for p in pieces if p is not None)
    except Exception:  # noqa: BLE001
        pass
    try:
        body = ast.parse(program).body
        imports = [s for s in (ast.get_source_segment(program, n) for n in body
                               if isinstance(n, (ast.Import, ast.ImportFrom))) if s]
        others = [s for s in (ast.get_source_segment(program, n) for n in body
                              if not isinstance(n, (ast.Import, ast.ImportFrom))) if s]
        indented = ["\n".join("    " + line if line.strip() else line for line in s.splitlines()) for s in others]
        return ACE_IMPORTS + "\n" + "\n".join(imports) + "\n" + "def wrapped_function():\n" + "\n".join(indented)
    except Exception:  # noqa: BLE001
        return program


def call_module(program, protocol):
    """lcb_runner grade_call_based: the module compiled once for a call-based problem."""
    return LCB_IMPORTS + "\n\n" + program if protocol == "lcb" else program


def call_source(program, name, arguments):
    """AceReason grade_call_based: the module compiled for ONE test, ending in run_main_code, which calls the
    function (Solution's method when the text names that class) with the test's argument source."""
    base = ACE_IMPORTS + "\n\n" + program + "\n\n"
    if "class Solution" in program:
        return (base + "def run_main_code(self):\n" + f"    return self.{name}({arguments})\n"
                "Solution.run_main_code = run_main_code\n")
    return base + "def run_main_code():\n" + f"    return {name}({arguments})\n"


# ------------------------------------------------------------------------------------------------------------
# The sandboxed side: upstream's in-process runner. Defines _protocol_load, _protocol_call, _protocol_stdio in the
# runner's namespace; the program runs in its own module (tmp_sol), as upstream's compile_code makes it.
# ------------------------------------------------------------------------------------------------------------
HARNESS = r'''
import builtins as _builtins, io as _io, sys as _sys, types as _types
from unittest import mock as _mock


class _BufferStdin:   # lcb_runner testing_util.py MockStdinWithBuffer (May 2025)
    def __init__(self, text):
        self._text, self._stream, self.buffer = text, _io.StringIO(text), _Buffer(text)

    def read(self, *args):
        return self._text

    def readline(self, *args):
        return self._stream.readline(*args)

    def readlines(self, *args):
        return self._text.split("\n")

    def __getattr__(self, name):
        return getattr(self._stream, name)


class _Buffer:
    def __init__(self, text):
        self._data = text.encode("utf-8")

    def read(self, *args):
        return self._data

    def readline(self, *args):
        return self._data.split(b"\n")[0] + b"\n"


def _guard():   # testing_util.py reliability_guard(), called with no memory limit
    import os, shutil, subprocess
    _builtins.quit = None
    _builtins.help = None
    os.environ["OMP_NUM_THREADS"] = "1"
    for name in ("kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork", "forkpty",
                 "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod", "fchown", "chmod", "chown",
                 "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir"):
        setattr(os, name, None)
    shutil.rmtree = shutil.move = shutil.chown = None
    subprocess.Popen = None
    for name in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        _sys.modules[name] = None


_STATE = {}


def _protocol_setup(stdin, digits):
    _STATE["stdin"] = stdin
    _sys.set_int_max_str_digits(digits)
    _guard()


def _protocol_load(source, name):   # compile_code + get_function
    module = _types.ModuleType("tmp_sol", "")
    exec(source, module.__dict__)
    compiled = module.Solution() if "class Solution" in source else module
    _STATE["method"] = getattr(compiled, name)


def _protocol_call(*args):
    value = _STATE["method"](*args)
    return list(value) if isinstance(value, tuple) else value


def _protocol_stdio(text):   # Capturing + call_method: the patches entered in upstream's decorator order
    lines = iter(text.split("\n"))
    fake = _BufferStdin(text) if _STATE["stdin"] == "buffer" else _io.StringIO(text)
    patches = [_mock.patch("sys.stdin.read", lambda *a: text), _mock.patch("sys.stdin.readlines", lambda *a: text.split("\n")),
               _mock.patch("sys.stdin.readline", lambda *a: next(lines)), _mock.patch("sys.stdin", fake),
               _mock.patch("builtins.open", _mock.mock_open(read_data=text))]
    captured = _io.StringIO()
    captured.close = lambda x: 1
    saved, _sys.stdout = _sys.stdout, captured
    entered = []
    try:
        for patch in patches:
            patch.__enter__()
            entered.append(patch)
        try:
            _STATE["method"]()
        except SystemExit:
            pass
    finally:
        for patch in reversed(entered):
            patch.__exit__(None, None, None)
        _sys.stdout = saved
    return captured.getvalue()
'''


# ------------------------------------------------------------------------------------------------------------
# Comparisons (checker side, on plain data)
# ------------------------------------------------------------------------------------------------------------
def _stripped_lines(text):   # testing_util.py get_stripped_lines
    return [line.strip() for line in text.strip().split("\n")]


def _close(a, b):
    """numpy.isclose(a, b) with its defaults (rtol 1e-5, atol 1e-8; infinities close only to themselves; nan never)."""
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= 1e-8 + 1e-5 * abs(b)


def same_output(got, expected, protocol):
    """A stdin test's verdict: the captured stdout against the expected text (testing_util.py grade_stdio for
    lcb, with Decimals; code_verifier.py grade_stdio for acereason, with floats and allclose)."""
    from decimal import Decimal, InvalidOperation
    number = Decimal if protocol == "lcb" else float
    got_lines, expected_lines = _stripped_lines(got), _stripped_lines(expected)
    if len(got_lines) != len(expected_lines):
        return False
    for a, b in zip(got_lines, expected_lines):
        if a == b:
            continue
        try:
            xs, ys = [number(t) for t in a.split()], [number(t) for t in b.split()]
        except (InvalidOperation, ValueError, OverflowError):
            return False
        try:
            if xs == ys:
                continue
        except InvalidOperation:   # a signalling NaN: upstream's comparison raises, the test fails
            return False
        if protocol == "lcb" or len(xs) != len(ys) or not all(_close(x, y) for x, y in zip(xs, ys)):
            return False
    return True


def same_value(got, expected, protocol):
    """A call-based test's verdict on the returned value, plain data (a tuple already made a list in the sandbox;
    the checker never passes an object that is not plain data: upstream would call its own __eq__)."""
    equal = got == expected
    if protocol == "lcb":
        return equal is True
    if equal is True:
        return True
    try:
        if json.dumps(got) == json.dumps(expected):
            return True
    except (TypeError, ValueError, RecursionError):
        pass
    try:
        if _close(float(got), float(expected)):
            return True
    except (TypeError, ValueError, OverflowError):
        pass
    if isinstance(got, list):
        try:
            return len(got) == len(expected) and all(_close(float(a), float(b)) for a, b in zip(got, expected))
        except (TypeError, ValueError, OverflowError):
            return False
    return False


# ------------------------------------------------------------------------------------------------------------
# GPQA-Diamond: simple-evals' verdict (openai/simple-evals gpqa_eval.py, common.py ANSWER_PATTERN_MULTICHOICE)
# ------------------------------------------------------------------------------------------------------------
SIMPLE_EVALS_ANSWER = re.compile(r"(?i)Answer[ \t]*:[ \t]*\$?([A-D])\$?")
GPQA_PROTOCOLS = ("simple-evals", "ours")   # the seed table's (DeepSeek-R1's GPQA figures) / reward.py's rules
GPQA_DEFAULT = "simple-evals"


def simple_evals_letter(response):
    """The FIRST `Answer: X` anywhere in the response (reasoning included), case-insensitive, or None. The verdict
    compares it with the right letter as written: a lower-case `answer: b` extracts 'b', which is not 'B'."""
    match = SIMPLE_EVALS_ANSWER.search(response)
    return match.group(1) if match else None
