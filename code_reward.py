"""Code reward: run a model's program against a problem's tests in a sandbox; 1.0 only if every test passes.

Model-written code is hostile, so this file fails closed: the verdict is never computed where the program runs.
- Function tests (MBPP asserts, HumanEval's `check(candidate)`): the TESTS run in a trusted checker process (a
  grading worker, workers.py), the PROGRAM in a sandboxed one (sandbox.py); every call a test makes to the
  program's functions crosses a pipe as plain data (one JSON line of ints, strings, lists, dicts, ...).
  Comparisons, builtins and asserts live in the checker, so a program cannot exit early to look successful, print
  a magic string, redefine `assert`, return an always-equal object or read the expected values. An exception it
  raises reaches the tests as itself only if it is an ordinary error (PROGRAM_ERRORS), else as ProgramError.
  Stdin/stdout tests: the checker compares the program's output itself.
- Each item is charged its own time (sandbox.ItemClock): the CPU seconds of its program and checker, and the
  seconds it sat idle, each against timeout_s; then its processes are killed (the grading worker WORKER_GRACE_S
  later). "timeout" is what the trusted side measured, never what the program's exit status says.
- Everything a program sends is decoded at one boundary (_Sandbox.recv) and printed through _printable, so
  grader_error counts our own bugs only. The sandbox and what each mode promises are sandbox.py's.

Tests (the `tests` field of a problem row; data.validate_tests checks the schema):
    {"kind": "functional", "asserts": [str, ...], "prelude": str, "setup": str, "entry_point": str}
        prelude: trusted code run before the program (imports, HumanEval's prompt), in both processes; setup: run
        after the program in its namespace (MBPP's test_setup_code); asserts: run one by one in the checker, where
        a name that is neither bound by them, a builtin nor a stdlib module is the program's (a call runs it in
        the sandbox); entry_point: always the program's.
    {"kind": "stdio", "cases": [{"input": str, "output": str}, ...], "prelude": str, "compare": "exact"|"lcb"}
        each case runs the program as __main__ in a fresh sandbox; it passes on exit status 0 with stdout equal to
        the expected output up to trailing whitespace and blank lines at the end (same_output; "lcb":
        LiveCodeBench's comparison, same_output_lcb).
    {"kind": ..., "protocol": "acereason"|"lcb", "cases": [...], "func_name": str, "starter_code": str}
        graded as the published protocol grades them (protocols.py), its comparison run here in the checker.
    Either kind may carry "time_limit_s" (per stdio case or function call, as LiveCodeBench; the item's whole
    limit is then item_timeout_s), "modules" (third-party packages the program may import, from
    sandbox.SANDBOX_MODULES) and "memory_mb" (the program's memory for the item).

    score_code_batch(responses, tests_list, workers=2)       the scoring entry point (reward.score_problems uses it)
    require_sandbox(allow_fallback)                          once per run, before grading: the mode, or a refusal
    python code_reward.py --references mbpp_test,humaneval   every reference solution through the reward
"""
import argparse
import ast
import builtins
import importlib
import json
import os
import sys
import time

import data
import protocols
import sandbox as sandboxing   # `sandbox` is score_code_batch's argument (a mode name)
import workers
# re-exported: callers (train.py, eval.py, preflight.py) and readers find the sandbox's entry points here too
from sandbox import (MEMORY_MB, UNSAFE_FLAG, bwrap_argv, require_sandbox, sandbox_guarantees,  # noqa: F401
                     sandbox_mode, sandbox_python)
# the checker's names for the sandbox's signals (public names there; kept short and private here)
from sandbox import Late as _Late
from sandbox import SandboxGone as _SandboxGone
from sandbox import item_alarm as _alarm

DEFAULT_TIMEOUT_S = 6.0       # wall-clock seconds per item (all of its tests), sandbox start-up included
WORKER_GRACE_S = 3.0          # a worker (the checker) still busy at timeout + this is killed (C code ignores alarms)
MAX_DETAIL_CHARS = 300        # a result's detail (and each piece of it that came from the program)
MAX_PROGRAM_CHARS = 200_000   # longer "programs" are not graded
MAX_ITEMS = 1_000_000         # elements read from an iterator a function returns
PARTIAL_CREDIT = False        # True: reward = fraction of tests passed (asserts or cases) instead of all-or-nothing
WORKER_MEMORY_GB = 4.0        # address space of a grading worker (it runs the tests on the values it receives)

FENCE_LANGUAGES = ("python", "py", "python3")

# Exceptions a program's function may raise into the tests as themselves (a test may expect one: `except
# ValueError`), with their builtin subclasses (KeyError, ZeroDivisionError, FileNotFoundError, ...). Anything
# else -- StopIteration and StopAsyncIteration (they end map/filter/iter early), GeneratorExit, SystemExit,
# KeyboardInterrupt, ExceptionGroup, warnings, the program's own classes -- arrives as ProgramError.
PROGRAM_ERRORS = (ArithmeticError, AssertionError, AttributeError, EOFError, ImportError, LookupError, NameError,
                  NotImplementedError, OSError, RecursionError, TypeError, UnicodeError, ValueError)



# ------------------------------------------------------------------------------------------------------------
# Extracting the program from a response
# ------------------------------------------------------------------------------------------------------------
def _fenced_blocks(text):
    """(language, body) of every closed ``` block, in order. An unclosed last block (a truncated response) is
    not a block."""
    blocks, pos = [], 0
    while True:
        start = text.find("```", pos)
        if start < 0:
            return blocks
        line_end = text.find("\n", start)
        if line_end < 0:
            return blocks
        language = text[start + 3:line_end].strip().lower()
        end = text.find("```", line_end + 1)
        if end < 0:
            return blocks
        blocks.append((language, text[line_end + 1:end]))
        pos = end + 3


def extract_program(response, tests=None):
    """The program in a response. Tests under a published protocol (tests['protocol']): that protocol's rule on the
    whole response (protocols.extract_program). Ours: the last ```python (or ```py / ```python3) block; if there is
    none, the last ``` block without a language tag; else None (scores 0). Blocks tagged with another language
    never count."""
    if tests is not None and tests.get("protocol"):
        return protocols.extract_program(response, tests)
    blocks = _fenced_blocks(response)
    for wanted in (lambda lang: lang in FENCE_LANGUAGES, lambda lang: lang == ""):
        chosen = [body for lang, body in blocks if wanted(lang)]
        if chosen and chosen[-1].strip():
            return chosen[-1]
    return None


# ------------------------------------------------------------------------------------------------------------
# Plain data across the pipe, and the runner: the code between the two RUNNER lines is ALSO the whole program of
# every sandboxed process (sent as `python -c` source, so no host file needs to be visible in the sandbox). It
# is the first code that process runs; the program can replace any of it afterwards, and the checker trusts
# none of it: whatever it sends is decoded as plain data (from_literal).
#
# Wire format: one JSON line per message, written by to_literal and read by the C scanner of `_json` (linear
# time, and no `json`/`re` import in the sandbox's start-up). JSON's own values stand for themselves (objects
# excepted); every other value is a one-key object: {"tuple": [..]}, {"set": [..]}, {"frozenset": [..]},
# {"dict": [[k, v], ..]}, {"bytes": latin-1 text}, {"complex": [re, im]}, {"float": "nan"|"inf"|"-inf"},
# {"int": hex} (more than 10,000 bits), {"range": [a, b, c]}, {"iter": [..]} (an iterator's items), {"type":
# "int"} (a builtin type), {"obj": k} (an object the program keeps) and {"ref": name} (a name in its namespace).
# ------------------------------------------------------------------------------------------------------------
# RUNNER BEGIN
import _json

# builtin types a test may pass to a program (MBPP: `remove_datatype(t, int)`) or get back from it
PLAIN_TYPES = {t.__name__: t for t in (int, float, complex, str, bytes, bool, list, tuple, dict, set, frozenset,
                                       type(None), range)}
_text = _json.encode_basestring_ascii   # str -> JSON string, every character escaped to ASCII (surrogates too)


def to_literal(value, _depth=0):
    """Plain value -> one JSON line's text (see the wire format above). Subclasses of the plain types
    (namedtuple, Counter, IntEnum) are sent as their base type; numpy values via tolist(); the checker's
    ProgramName / ProgramObject as references. Anything else raises TypeError: an object with a custom __eq__
    never reaches a comparison as itself."""
    if _depth > 100:
        raise TypeError("value nested too deeply")
    t = type(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        value = int(value)
        # str(int) is quadratic and capped at 4300 digits; hexadecimal is linear and uncapped
        return '{"int": "%s"}' % hex(value) if value.bit_length() > 10_000 else repr(value)
    if isinstance(value, float):
        value = float(value)
        return repr(value) if value == value and abs(value) != float("inf") else '{"float": "%r"}' % value
    if isinstance(value, complex):
        return '{"complex": [%s, %s]}' % (to_literal(value.real), to_literal(value.imag))
    if isinstance(value, str):
        return _text(str(value))
    if isinstance(value, (bytes, bytearray)):
        return '{"bytes": %s}' % _text(bytes(value).decode("latin-1"))
    reference = getattr(type(value), "sandbox_literal", None)   # the checker's ProgramName / ProgramObject
    if reference is not None:
        return reference(value)
    if isinstance(value, type) and PLAIN_TYPES.get(value.__name__) is value:
        return '{"type": "%s"}' % value.__name__
    if isinstance(value, range):
        return '{"range": [%d, %d, %d]}' % (value.start, value.stop, value.step)
    if isinstance(value, dict):
        return '{"dict": [' + ", ".join(f"[{to_literal(k, _depth + 1)}, {to_literal(v, _depth + 1)}]"
                                        for k, v in value.items()) + "]}"
    if isinstance(value, (list, tuple, set, frozenset)):
        inner = "[" + ", ".join(to_literal(v, _depth + 1) for v in value) + "]"
        if isinstance(value, list):
            return inner
        return '{"%s": %s}' % ("tuple" if isinstance(value, tuple) else
                               "set" if isinstance(value, set) else "frozenset", inner)
    if hasattr(value, "__next__") and hasattr(value, "__iter__"):
        items = []
        for item in value:
            items.append(item)
            if len(items) > MAX_ITEMS:
                raise TypeError("iterator too long")
        return '{"iter": ' + to_literal(items, _depth + 1) + "}"
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return to_literal(value.tolist(), _depth + 1)
    raise TypeError(f"a function returned a {t.__module__}.{t.__qualname__}, which is not plain data")


def _plain(tagged, handles):
    """One tagged JSON object -> its value (the scanner's object_hook). handles: {"obj": f, "ref": f}, the
    side's meaning of object and name references (a tag without a handle is refused)."""
    if len(tagged) == 1:
        (tag, x), = tagged.items()
        t = type(x)
        if tag == "tuple" and t is list:
            return tuple(x)
        if tag in ("set", "frozenset") and t is list:   # built element by element (see _grow)
            return _grow(set(), x, set.add) if tag == "set" else frozenset(_grow(set(), x, set.add))
        if tag == "dict" and t is list and all(type(p) is list and len(p) == 2 for p in x):
            return _grow({}, x, lambda d, pair: d.__setitem__(*pair))
        if tag == "bytes" and t is str:
            return x.encode("latin-1")
        if tag == "complex" and t is list and len(x) == 2 and all(type(v) in (int, float) for v in x):
            return complex(x[0], x[1])
        if tag == "float" and x in ("nan", "inf", "-inf"):
            return float(x)
        if tag == "int" and t is str and x.lstrip("-").startswith("0x"):
            return int(x, 16)
        if tag == "range" and t is list and len(x) == 3 and all(type(v) is int for v in x) and x[2] and \
                -(-(x[1] - x[0]) // x[2]) <= MAX_ITEMS:   # no longer than an iterator may be: a test's sum() of
            return range(*x)                            # range(2 ** 62) would hold the checker in C
        if tag == "iter" and t is list:
            return iter(x)
        if tag == "type" and t is str and x in PLAIN_TYPES:
            return PLAIN_TYPES[x]
        if tag in handles and (t is int if tag == "obj" else t is str):
            return handles[tag](x)
    raise ValueError(f"not a plain value: {str(tagged)[:100]}")


def _grow(container, items, add):
    """Fill a set or dict from reply items one at a time, in Python: keys crafted to share one hash make each
    insertion cost O(n) in C, and one C call for the whole container would keep the checker past the item's
    deadline; between insertions the item's alarm can stop it."""
    for item in items:
        add(container, item)
    return container


class _Scan:
    """What `_json.make_scanner` reads its settings from."""
    strict, object_pairs_hook, parse_float, parse_int = True, None, float, int

    def __init__(self, handles):
        self.object_hook = lambda tagged: _plain(tagged, handles)

    def parse_constant(self, name):
        raise ValueError(f"not a plain value: {name}")


def from_literal(text, handles=None):
    """One message's text -> value; ValueError (or TypeError, RecursionError) on anything but plain data."""
    try:
        value, end = _json.make_scanner(_Scan(handles or {}))(text, 0)
    except StopIteration:   # the C scanner's way to say "no value here"
        raise ValueError("not a plain value") from None
    if text[end:].strip():
        raise ValueError("extra text after the value")
    return value


def _write_line(fd, text):
    data = (text + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


def _read_line(fd, buffer):
    while b"\n" not in buffer:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return None
        buffer += chunk
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    return line.decode()


def _runner_main(argv):
    """Sandboxed side. argv: kind, fds "R,W", limits (a message). Sets the limits (first: no program code has
    run yet), says hello, reads the job, then either runs the program as __main__ (stdio) or loads it and answers
    calls by name (functional). Nothing here is trusted by the checker: the program can replace any of it, and
    can still only send plain data."""
    import resource
    kind, fds, limits = argv[0], argv[1], from_literal(argv[2])
    read_fd, write_fd = (int(x) for x in fds.split(","))
    for name, value in limits.items():
        resource.setrlimit(getattr(resource, name), (value, value + 1 if name == "RLIMIT_CPU" else value))
    os.environ.clear()  # the parent passes none; this drops what bwrap (PWD) and Python (LC_CTYPE) add
    import _sitebuiltins   # exit() and quit() as the site module defines them (python -S leaves them out)
    builtins.exit, builtins.quit = (_sitebuiltins.Quitter(name, "Ctrl-D (i.e. EOF)") for name in ("exit", "quit"))
    _write_line(write_fd, to_literal({"hello": os.getpid()}))
    buffer = bytearray()
    objects = []   # values returned that are not plain data: the checker gets {"obj": index} handles
    namespace = {"__name__": "__solution__", "__builtins__": builtins}
    handles = {"obj": objects.__getitem__, "ref": namespace.__getitem__}   # from the checker's own messages
    line = _read_line(read_fd, buffer)
    if line is None:
        os._exit(0)
    job = from_literal(line, handles)
    if kind == "stdio":
        os.close(read_fd)
        os.close(write_fd)
        sys.argv = ["solution.py"]
        exec(_compile(job["program"], "solution.py"), {"__name__": "__main__", "__builtins__": builtins})  # noqa: S102
        return
    try:
        for part, filename in ((job.get("prelude"), "prelude.py"), (job["program"], "solution.py"),
                               (job.get("setup"), "setup.py")):
            if part:
                exec(_compile(part, filename), namespace)  # noqa: S102 -- this is the sandbox
    except BaseException as exc:  # noqa: BLE001 -- SystemExit included: exiting while loading is a failure
        _write_line(write_fd, to_literal({"ready": False, "error": _describe(exc)}))
        os._exit(0)
    _write_line(write_fd, to_literal({"ready": True}))
    while True:
        line = _read_line(read_fd, buffer)
        if line is None:
            os._exit(0)
        try:
            request = from_literal(line, handles)
            value = namespace[request["name"]](*request["args"], **request["kwargs"])
            try:
                text = to_literal(value)
            except Exception:  # noqa: BLE001 -- not plain data: the checker gets an opaque handle
                objects.append(value)
                text = '{"obj": %d}' % (len(objects) - 1)
            reply = '{"dict": [["value", ' + text + "]]}"
        except BaseException as exc:  # noqa: BLE001 -- reported to the checker, which fails the test
            reply = to_literal({"raised": type(exc).__name__, "message": _describe(exc)})
        _write_line(write_fd, reply)


def _describe(exc):
    try:
        return f"{type(exc).__name__}: {exc}"[:300]
    except BaseException:  # noqa: BLE001 -- a hostile __str__, or an int past the int-to-str limit
        return type(exc).__name__


def _compile(source, filename):
    """Every program, prelude and test is compiled here: with asserts (optimize=0) and no inherited __future__
    flags, whatever the interpreter's -O or PYTHONOPTIMIZE say."""
    return compile(source, filename, "exec", dont_inherit=True, optimize=0)
# RUNNER END


def _runner_source():
    """The runner block above, with its imports and constants, as `python -c` source."""
    text = open(os.path.abspath(__file__), encoding="utf-8").read()
    block = text[text.index("# RUNNER BEGIN"):text.index("# RUNNER END")]
    return (f"import builtins, os, sys\nMAX_ITEMS = {MAX_ITEMS}\n{block}\n"
            f"_runner_main(sys.argv[1:])\n")


RUNNER_SOURCE = _runner_source()


# ------------------------------------------------------------------------------------------------------------
# The checker's side of the channel
# ------------------------------------------------------------------------------------------------------------
class ProgramError(Exception):
    """An exception the program raised that is not one of PROGRAM_ERRORS (a plain failure for the tests)."""


# The trusted side's one boundary for what came from a program: every message is decoded by _Sandbox.recv (any
# failure there -- a complex() of a 4000-digit int, a set of unhashable members, nesting, memory -- is "not plain
# data": the test fails) and every piece of text or value that reaches a result, a log or a terminal goes through
# _printable, which cannot fail. Nothing a program sends can raise in the checker's own code, so grader_error
# stays the count of our bugs.
_CONTROL_CHARACTERS = {c: f"\\x{c:02x}" for c in (*range(32), 127) if c != 10}


def _printable(value, limit=MAX_DETAIL_CHARS):
    """Any value -> ASCII text of at most `limit` characters that prints anywhere and moves no cursor: non-ASCII
    characters (lone surrogates included) and control characters but newlines are written as escapes; a value
    whose str() fails (an int past the int-to-str limit, a hostile __str__) is named by its type."""
    try:
        text = value if type(value) is str else str(value)
    except BaseException:  # noqa: BLE001 -- anything str() may raise: then the type says enough
        text = f"<{type(value).__name__}>"
    text = text[:limit].encode("ascii", "backslashreplace").decode("ascii").translate(_CONTROL_CHARACTERS)
    return text[:limit]


class ProgramName:
    """Checker side: a name in the program's namespace. Calling it runs the program's function in the sandbox
    and returns the plain value it sends back; passing it as an argument passes the program's own object (by
    name, e.g. MBPP's `root` tree built by the setup code). The program never receives the checker's objects."""

    def __init__(self, name, sandbox):
        self.name = self.__name__ = self.__qualname__ = name
        self.sandbox = sandbox

    def sandbox_literal(self):
        return '{"ref": %s}' % to_literal(self.name)

    def __call__(self, *args, **kwargs):
        sandbox = self.sandbox
        if sandbox.failure:
            raise _SandboxGone()
        request = {"name": self.name, "args": list(args), "kwargs": dict(kwargs)}
        try:
            to_literal(request)
        except TypeError as exc:
            raise TypeError(f"cannot pass this argument to the program: {exc}") from None
        sandbox.send(request)
        reply = sandbox.recv()   # TypeError if it is not plain data: the test fails
        if "value" in reply:
            return reply["value"]
        raised = reply.get("raised")
        error = getattr(builtins, raised, None) if isinstance(raised, str) else None
        if not (isinstance(error, type) and issubclass(error, PROGRAM_ERRORS)):
            error = ProgramError
        message = f"raised in the program: {_printable(reply.get('message'))}"
        try:
            exc = error(message)
        except Exception:  # noqa: BLE001  a class whose constructor wants more (UnicodeDecodeError): its own
            exc = error.__new__(error)   # TypeError here would be the checker's, and a test expecting one would pass
            exc.args = (message,)
        raise exc


class ProgramObject:
    """Checker side: an object a program's function returned that is not plain data (an instance of one of its
    own classes, MBPP's `Pair`). The checker cannot look inside it; it can only pass it back to the program.
    It equals only itself, and truth-testing it is an error, so it can never make an assert pass by itself."""

    def __init__(self, index):
        self.index = index

    def sandbox_literal(self):
        return '{"obj": %d}' % self.index

    def __bool__(self):
        raise TypeError("an object the program returned cannot be truth-tested by the checker")

    def __repr__(self):
        return f"<program object {self.index}>"


CHECKER_HANDLES = {"obj": ProgramObject}   # what a program may send besides plain data: handles to its objects


class _Sandbox(sandboxing.Sandbox):
    """The sandbox (sandbox.py) running this file's runner: messages in the wire format above, decoded here."""
    RUNNER_SOURCE = RUNNER_SOURCE
    encode = staticmethod(to_literal)

    def recv(self, allow_eof=False):
        """The next message (a dict); None at EOF when allow_eof; TypeError if it is not plain data."""
        line = self.read_line(allow_eof)
        if line is None:
            return None
        try:
            reply = from_literal(line.decode(), CHECKER_HANDLES)
        except Exception as exc:  # noqa: BLE001 -- the boundary: whatever decoding raised, it is not plain data
            raise TypeError(f"the program sent something that is not plain data ({_printable(_describe(exc))})") \
                from None
        if not isinstance(reply, dict):
            raise TypeError("the program sent something that is not a message")
        return reply



# ------------------------------------------------------------------------------------------------------------
# The checker: runs the tests, calls into the sandbox, decides
# ------------------------------------------------------------------------------------------------------------
def _names(code):
    """(names loaded, names bound, names used as `name.attr`) anywhere in code."""
    loaded, bound, attr_bases = set(), set(), set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            attr_bases.add(node.value.id)
    return loaded, bound, attr_bases


def _check_functional(sandbox, program, tests, partial):
    """Returns (passed, detail)."""
    asserts = tests["asserts"]
    limit = tests.get("time_limit_s")
    if limit:   # LiveCodeBench's protocol: loading the program, then each call, within the limit
        sandbox.limit_test(limit)
    sandbox.send({"prelude": tests.get("prelude", ""), "program": program, "setup": tests.get("setup", "")})
    try:
        ready = sandbox.recv()
    except TypeError as exc:
        return 0, f"program failed to load: {exc}"
    if ready.get("ready") is not True:
        return 0, f"program failed to load: {_printable(ready.get('error'))}"
    checker = {"__name__": "__checker__", "__builtins__": builtins}
    if tests.get("prelude"):
        exec(_compile(tests["prelude"], "prelude.py"), checker)  # noqa: S102 -- trusted (dataset) code
    loaded, bound, attr_bases = _names("\n".join(asserts))
    for name in sorted(loaded - bound - set(checker) - set(dir(builtins))):
        if name in sys.stdlib_module_names and name in attr_bases:
            checker[name] = importlib.import_module(name)   # `math.isclose` is the real one, never the program's
        else:
            checker[name] = ProgramName(name, sandbox)
    if tests.get("entry_point"):
        checker[tests["entry_point"]] = ProgramName(tests["entry_point"], sandbox)
    passed, detail = 0, ""
    for k, statement in enumerate(asserts):
        if limit:
            sandbox.limit_test(limit)
        try:
            exec(_compile(statement, f"test_{k}.py"), checker)  # noqa: S102 -- trusted (dataset) code
            ok = sandbox.failure is None   # a bare `except:` in a test cannot hide a dead or late sandbox
        except (_SandboxGone, _Late):
            raise
        except BaseException as exc:  # noqa: BLE001 -- a failing test, whatever it raised
            ok, detail = False, f"test {k}: {_describe(exc)}"
        if sandbox.failure:
            raise _SandboxGone()
        passed += ok
        if not ok and not partial:
            break
    return passed, detail


def _check_protocol(sandbox, program, tests, partial, result):
    """Tests under a published protocol (protocols.py): the sandbox runs upstream's in-process runner
    (protocols.HARNESS) and answers one call per test, each within the protocol's per-test limit (so is each
    compile); the expected values never leave this process, where the protocol's comparison decides. Updates
    result's passed, detail and case (the test being run, for a sandbox failure's message)."""
    protocol, cases = tests["protocol"], tests["cases"]
    rules = protocols.rules(protocol)
    limit = tests.get("time_limit_s") or rules["time_limit_s"]

    def call(name, *args):   # raises what the program raised (a failed test), or _SandboxGone
        sandbox.limit_test(limit)
        try:
            return ProgramName(name, sandbox)(*args)
        finally:
            sandbox.limit_test(None)

    sandbox.send({"program": protocols.HARNESS})
    ready = sandbox.recv()
    if ready.get("ready") is not True:
        result["detail"] = f"the protocol's runner failed to load: {_printable(ready.get('error'))}"
        return
    call("_protocol_setup", rules["stdin"], rules["int_max_str_digits"])
    functional = tests["kind"] == "functional"
    try:   # what the protocol reads from the tests before anything runs (a case it cannot read fails them all)
        if functional and protocol == "lcb":
            arguments, expected = protocols.lcb_arguments(cases), protocols.lcb_expected(cases)
        elif functional:
            arguments = [protocols.ace_arguments(c["input"], k) for k, c in enumerate(cases)]
            expected = protocols.ace_expected(cases)
        else:
            arguments, expected = [c["input"] for c in cases], [c["output"] for c in cases]
    except ValueError as exc:
        result["detail"] = f"unreadable tests: {exc}"
        return
    name = protocols.function_name(tests)
    try:
        if not functional:
            call("_protocol_load", protocols.stdio_module(program, protocol), "wrapped_function")
        elif protocol == "lcb":
            call("_protocol_load", protocols.call_module(program, protocol), name)
    except (_SandboxGone, _Late):
        raise
    except BaseException as exc:  # noqa: BLE001 -- the program did not compile or load: every test fails
        result["detail"] = f"program failed to load: {_describe(exc)}"
        return
    for k, (argument, want) in enumerate(zip(arguments, expected)):
        result["case"] = k
        try:
            if not functional:
                ok = protocols.same_output(call("_protocol_stdio", argument), want, protocol)
            else:   # AceReason compiles the program again for every test, the call in its source
                if protocol == "acereason":
                    call("_protocol_load", protocols.call_source(program, name, argument), "run_main_code")
                value = call("_protocol_call", *(argument if protocol == "lcb" else ()))
                # an object that is not plain data never equals a value (upstream would call its own __eq__)
                ok = not isinstance(value, ProgramObject) and protocols.same_value(value, want, protocol)
            detail = "" if ok else f"case {k}: wrong " + ("output" if not functional else "value")
        except (_SandboxGone, _Late):
            raise
        except BaseException as exc:  # noqa: BLE001 -- what the program raised: this test fails
            ok, detail = False, f"case {k}: {_describe(exc)}"
        if sandbox.failure:
            raise _SandboxGone()
        result["passed"] += ok
        if not ok:
            result["detail"] = detail
            if not partial:
                break
    result.pop("case", None)


def _run_tests(program, tests, timeout_s, mode, partial):
    """Run `program` (source text) against `tests` in the sandbox `mode`, with the tests in THIS process (a
    grading worker). Returns {"status": passed|failed|timeout|crash|refused|no_program, "passed": int, "total":
    int, "score": float, "detail": str, "seconds": float, "sandbox": mode}."""
    start = time.monotonic()
    clock = sandboxing.ItemClock(timeout_s)   # the item's own CPU and idle time (not a neighbour's load)
    cases = _cases(tests)
    result = {"status": "failed", "passed": 0, "total": len(cases), "score": 0.0, "detail": "", "sandbox": mode}
    if program is None or len(program) > MAX_PROGRAM_CHARS:
        result.update(status="no_program", detail="no program" if program is None else "program too long")
        return result
    # one sandboxed process answers calls (functional tests; every test of a published protocol, whose runner is
    # in-process upstream), or one process per stdio case
    channel = tests["kind"] == "functional" or bool(tests.get("protocol"))
    sandboxes = []
    try:
        with _alarm(clock):
            limit = tests.get("time_limit_s") if not channel else None
            for k in range(1 if channel else len(cases)):
                sandbox = _Sandbox("functional" if channel else "stdio", mode, clock, sandboxes,
                                   modules=tests.get("modules", ()), memory_mb=tests.get("memory_mb"))
                try:
                    if sandbox.failure:
                        raise _SandboxGone()
                    if tests.get("protocol"):
                        _check_protocol(sandbox, program, tests, partial, result)
                    elif tests["kind"] == "functional":
                        result["passed"], result["detail"] = _check_functional(sandbox, program, tests, partial)
                    else:
                        if limit:   # this case's run, once its sandbox has started
                            sandbox.limit_test(limit)
                        code = sandbox.run_stdio(tests["prelude"] + "\n" + program if tests.get("prelude") else program,
                                                 cases[k]["input"])
                        output = bytes(sandbox.stdout).decode(errors="replace")
                        same = same_output_lcb if tests.get("compare") == "lcb" else same_output
                        if code == 0 and sandbox.failure is None and same(output, cases[k]["output"]):
                            result["passed"] += 1
                        else:
                            result["detail"] = f"case {k}: exit {code}" + (", wrong output" if code == 0 else "") + \
                                (f"; stderr: {bytes(sandbox.tail).decode(errors='replace')[-MAX_DETAIL_CHARS:]}"
                                 if sandbox.tail else "")
                except _SandboxGone:
                    pass
                sandbox.close()
                if sandbox.failure:
                    result["status"] = sandbox.failure if sandbox.failure != "too_large" else "failed"
                    where = f"case {result.pop('case', k)}: " if "case" in result or not channel else ""
                    result["detail"] = f"{where}sandbox {sandbox.failure}" + \
                        (f"; output: {bytes(sandbox.tail).decode(errors='replace')[-MAX_DETAIL_CHARS:]}"
                         if sandbox.tail else "")
                    if sandbox.failure in ("timeout", "refused"):
                        break
                if not channel and result["passed"] < k + 1 and not partial:
                    break
    except _Late:
        result.update(status="timeout", detail="the checker reached the item's deadline")
    finally:
        for sandbox in sandboxes:
            sandbox.close()
    result.pop("case", None)
    if result["passed"] == len(cases) and len(cases) > 0 and result["status"] == "failed":
        result["status"] = "passed"
    if result["status"] == "passed" or (partial and result["status"] not in ("refused", "no_program")):
        result["score"] = result["passed"] / len(cases) if partial else 1.0
    result["seconds"] = time.monotonic() - start
    result["detail"] = _printable(result["detail"], 2 * MAX_DETAIL_CHARS)   # pieces came from the program
    return result


def same_output_lcb(got, expected):
    """LiveCodeBench's stdout comparison (lcb_runner/evaluation/testing_util.py grade_stdio): both stripped and
    split into lines, each line stripped; the same number of lines, each equal as text or, token by token, as
    decimal numbers (`0.50` equals `0.5`, `1e2` equals `100`; no tolerance: `0.3333` is not `0.33333`)."""
    return protocols.same_output(got, expected, "lcb")


def item_timeout_s(tests, timeout_s):
    """An item's wall-clock limit: timeout_s, or for tests with a per-test limit the global limit (limit + 1) x
    tests + margin, when larger: margin 5 s as lcb_runner (compute_code_generation_metrics.check_correctness),
    or the protocol's (protocols.PROTOCOLS item_margin_s)."""
    limit = tests.get("time_limit_s")
    if not limit:
        return timeout_s
    margin = protocols.rules(tests["protocol"])["item_margin_s"] if tests.get("protocol") else 5
    return max(timeout_s, (limit + 1) * len(_cases(tests)) + margin)


def _cases(tests):
    """The tests of an item one by one: stdio cases, protocol cases, or functional asserts."""
    return tests["cases"] if "cases" in tests else tests["asserts"]


def same_output(got, expected):
    """stdout comparison: equal after dropping trailing whitespace on each line and blank lines at the end."""
    def lines(text):
        out = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
        while out and not out[-1]:
            out.pop()
        return out
    return lines(got) == lines(expected)


# ------------------------------------------------------------------------------------------------------------
# Scoring: grading workers (workers.py) with a hard per-item timeout
# ------------------------------------------------------------------------------------------------------------
worker_start = sandboxing.worker_start   # run once in each grading worker (workers.py): reaps the sandboxes' orphans


def _self_check():
    """None when, compiled and run as the tests are, a passing assert passes and a failing one fails; else why
    not. Asserts are the tests: a checker where they are stripped (PYTHONOPTIMIZE, -O, a patched compile) would
    pay an empty program, so it grades nothing."""
    try:
        exec(_compile("assert 1 + 1 == 2", "self_check.py"), {})   # noqa: S102
        exec(_compile("assert 1 + 1 == 3", "self_check.py"), {})   # noqa: S102
    except AssertionError:
        return None
    except BaseException as exc:  # noqa: BLE001
        return f"the checker's self-check failed ({_printable(_describe(exc))}): refusing to grade"
    return "the checker's self-check failed (a failing assert did not fail): refusing to grade"


def _grade(program, tests, timeout_s, mode, partial):
    """The grading worker's op: one item, unless the self-check fails (then every item is refused)."""
    why = _self_check()
    if why:
        return {"status": "refused", "passed": 0, "score": 0.0, "detail": why, "sandbox": mode}
    return _run_tests(program, tests, timeout_s, mode, partial)


WORKER_OPS = {"grade": _grade}
STAT_KEYS = ("code_timeouts", "code_crashes", "sandbox_refusals", "code_no_program", "code_grader_errors")
_STATUS_STAT = {"timeout": "code_timeouts", "crash": "code_crashes", "refused": "sandbox_refusals",
                "no_program": "code_no_program", "grader_error": "code_grader_errors"}


def _grade_in_workers(programs, tests_list, workers_n, timeout_s, mode, *, partial):
    """_run_tests for each item in grading workers. timeout_s: each item's CPU allowance (one for all, or a list).
    Per item, whatever its checker is doing, the pool kills the program's processes once the item's allowance
    or wall cap is spent (sandbox.pool_limits), and the worker WORKER_GRACE_S later if it still has not
    answered; then it cleans up after it (sandbox.clean_up_after_kill) and only then starts a replacement."""
    pool = workers.get_pool("code_reward", WORKER_MEMORY_GB * 2**30)
    todo = [k for k, program in enumerate(programs) if program is not None]   # nothing to run: no worker
    results = [{"status": "no_program", "score": 0.0, "detail": "no program", "sandbox": mode}] * len(programs)
    timeouts = timeout_s if isinstance(timeout_s, list) else [timeout_s] * len(programs)
    cpu_s, wall_s = zip(*[sandboxing.pool_limits(timeouts[k]) for k in todo]) if todo else ((), ())
    outcomes = pool.run("grade", [(programs[k], tests_list[k], timeouts[k], mode, partial) for k in todo],
                        workers_n, list(wall_s), cpu_after_s=list(cpu_s), grace_s=WORKER_GRACE_S,
                        cleanup_s=sandboxing.CLEANUP_S, on_kill=sandboxing.clean_up_after_kill)
    for k, (kind, value) in zip(todo, outcomes):
        if kind == "ok":
            results[k] = value
        elif kind == "timeout":
            results[k] = {"status": "timeout", "score": 0.0, "detail": "grading worker killed at the deadline"}
        elif kind == "forged":   # only a program could have tampered with the channel: its item fails
            results[k] = {"status": "failed", "score": 0.0, "detail": f"grading worker replaced: {value}"}
        else:
            results[k] = {"status": "grader_error", "score": 0.0, "detail": _printable(value)}
        results[k].setdefault("sandbox", mode)
    return results


def score_code_batch(responses, tests_list, *, workers=2, timeout_s=DEFAULT_TIMEOUT_S, stats=None,
                     partial=PARTIAL_CREDIT, sandbox=None, results=None):
    """The code reward: for each (response, tests), 1.0 if the program in the response passes every test (with
    partial=True the fraction passed), else 0.0; graded in parallel workers, each item with a hard timeout.

    Returns a list of len(responses) floats; timeout_s is each item's limit (item_timeout_s: more for tests with
    a per-test limit). sandbox: None uses SANDBOX (set by require_sandbox). `stats`, when
    a dict, receives counts (STAT_KEYS): timeouts (the item's wall clock ran out, or the program used its whole
    CPU allowance), crashes (the program's process died mid-protocol: a signal, the memory limit, os._exit),
    sandbox refusals (it could not start), responses without a program, and grader errors. `results`, when a
    list, receives each item's dict (status, detail, seconds, sandbox: the mode that graded it)."""
    if len(responses) != len(tests_list):
        raise ValueError(f"{len(responses)} responses but {len(tests_list)} test sets")
    checked = []
    for k, tests in enumerate(tests_list):
        tests, error = data.validate_tests(tests)
        if error:
            raise ValueError(f"item {k}: {error}")
        checked.append(tests)
    mode = sandbox_mode(sandbox)
    outcome = _grade_in_workers([extract_program(r, t) for r, t in zip(responses, checked)], checked, workers,
                                [item_timeout_s(t, timeout_s) for t in checked], mode, partial=partial)
    if stats is not None:
        for key in STAT_KEYS:
            stats.setdefault(key, 0)
        for o in outcome:
            if o["status"] in _STATUS_STAT:
                stats[_STATUS_STAT[o["status"]]] += 1
    if results is not None:
        results.extend(outcome)
    return [float(o["score"]) for o in outcome]


def close_pool():
    """Stop the grading workers (the next batch starts new ones) and remove their memory cgroups."""
    workers.close_pools("code_reward")
    parent = sandboxing.memory_cgroup_parent()
    if parent is not None:
        sandboxing.remove_stale_cgroups(parent)


# ------------------------------------------------------------------------------------------------------------
# CLI
# ------------------------------------------------------------------------------------------------------------
def check_references(specs, workers=2, timeout_s=DEFAULT_TIMEOUT_S, sandbox=None, log=print):
    """Run every reference solution of each set through the reward. Returns {set: (passed, total, failures)}
    where failures lists (id, status, detail)."""
    report = {}
    for spec in specs:
        problems = [p for p in data.load_dataset(spec) if p.get("tests") is not None and p.get("solution")]
        results = []
        start = time.time()
        scores = score_code_batch([f"```python\n{p['solution']}\n```" for p in problems], [p["tests"] for p in problems],
                                  workers=workers, timeout_s=timeout_s, sandbox=sandbox, results=results)
        failures = [(p["id"], r["status"], r.get("detail", "")) for p, s, r in zip(problems, scores, results) if s < 1]
        report[spec] = (int(sum(scores)), len(problems), failures)
        log(f"{spec}: {int(sum(scores))}/{len(problems)} reference solutions pass "
            f"({time.time() - start:.1f}s, sandbox {sandbox_mode(sandbox)})")
        for pid, status, detail in failures:
            log(f"  {pid}: {status}: {detail[:200]}")
    return report


def main():
    parser = argparse.ArgumentParser(description="Code reward. Examples:\n"
                                     "  python code_reward.py --references mbpp_train,mbpp_valid,mbpp_test,humaneval,stdio_demo\n"
                                     "  python code_reward.py --describe\n"
                                     "  python code_reward.py graded.jsonl   (rows with 'response' and 'tests')",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", nargs="?", help="JSONL file of {'response', 'tests'} rows to grade")
    parser.add_argument("--references", help="comma-separated sets: run each reference solution through the reward")
    parser.add_argument("--describe", action="store_true", help="print the sandbox mode and what it guarantees")
    parser.add_argument("--workers", type=int, default=2, help="grading workers")
    parser.add_argument("--timeout_s", type=float, default=DEFAULT_TIMEOUT_S, help="hard limit per item")
    parser.add_argument("--sandbox", default=sandboxing.SANDBOX, choices=["auto", "bwrap", "rlimits"],
                        help="isolation: bwrap (the full sandbox, else refuse), rlimits (the fallback: programs can "
                             "read this machine's files, the shipped tests and reference solutions included), auto")
    parser.add_argument("--partial", action="store_true", help="reward = fraction of tests passed")
    args = parser.parse_args()
    if args.describe or not (args.file or args.references):
        mode = sandbox_mode(args.sandbox)
        print(f"sandbox mode: {mode}; programs run on {sandbox_python()}")
        for claim, holds in sandbox_guarantees(mode).items():
            print(f"  [{'x' if holds else ' '}] {claim}")
        return
    if args.references:
        check_references([s for s in args.references.split(",") if s], args.workers, args.timeout_s, args.sandbox)
        return
    responses, tests = [], []
    with open(args.file, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if line.strip():
                try:
                    row = json.loads(line)
                    responses.append(row["response"])
                    tests.append(row["tests"])
                except (ValueError, KeyError, TypeError) as exc:
                    sys.exit(f"{args.file}:{line_no}: bad row ({exc}); need an object with 'response' and 'tests'")
    stats = {}
    start = time.time()
    scores = score_code_batch(responses, tests, workers=args.workers, timeout_s=args.timeout_s, stats=stats,
                              partial=args.partial, sandbox=args.sandbox)
    print(f"{len(scores)} rows, mean reward {sum(scores) / max(len(scores), 1):.4f}, {time.time() - start:.1f}s, {stats}")


if __name__ == "__main__":
    main()
