"""Code reward: run a model's program against a problem's tests in a sandbox; 1.0 only if every test passes.

Model-written code is hostile by default, so this file is built to fail closed:
- The verdict is never computed where the program runs. For function tests (MBPP asserts, HumanEval's
  `check(candidate)`) the TESTS run in a trusted checker process (a grading worker) and the PROGRAM runs in a
  sandboxed process; every call the tests make to the program's functions crosses a pipe as plain data (ints,
  strings, lists, dicts, ...: Python literals, parsed without evaluating anything). Comparisons, builtins and
  asserts all live in the checker, so a program cannot exit early to look successful, print a magic string,
  redefine `assert`/builtins/harness names, return an object whose `__eq__` is always True, or read the expected
  values (they never enter the sandbox, on disk or in memory). For stdin/stdout tests the checker compares the
  program's output itself. Whatever the program does, the worst it can do is send wrong plain data.
- The sandbox (see README "Code RL"): with bubblewrap (`bwrap`) each program gets new user, PID, network, IPC and
  UTS namespaces (no network at all, no other processes visible, no nested user namespace), a read-only view of
  /usr and the Python install only, an empty size-limited tmpfs as its working directory, an empty environment,
  an unprivileged uid (also when we are root), and rlimits on CPU time, address space, processes, file size and
  open files; the checker kills it at the item's wall-clock deadline (PID namespace: every process it started
  dies with it). Without bwrap the
  fallback keeps the limits, the process group, the empty environment and the fresh directory (and, run as
  root, an unused uid of its own per program), but NOT the network, filesystem or process isolation: `sandbox_guarantees()` says which holds, and a one-time warning names
  what is missing. When the sandbox cannot start, the item scores 0 and counts as a refusal: it is never re-run
  with weaker isolation.

Tests (the `tests` field of a problem row; data.validate_tests checks the schema):
    {"kind": "functional", "asserts": [str, ...], "prelude": str, "setup": str, "entry_point": str}
        prelude: trusted code run BEFORE the program in its namespace (imports and helpers the problem gives;
                 HumanEval's prompt) and in the checker (so tests can use the helpers);
        setup:   code run AFTER the program in its namespace (MBPP's test_setup_code builds inputs from the
                 program's own classes); asserts: statements run one by one in the checker; a name they use that
                 is neither bound by them, a builtin, nor a stdlib module used as `module.attr` is the program's,
                 and calling it runs the program's function in the sandbox; entry_point: always the program's.
    {"kind": "stdio", "cases": [{"input": str, "output": str}, ...]}
        each case runs the program as __main__ in a fresh sandbox; it passes when the program exits with status
        0 and its stdout equals the expected output up to trailing whitespace on each line and blank lines at
        the end (no float tolerance).

    code_reward(response, tests) -> float               one response (a worker process, sandboxed)
    score_code_batch(responses, tests_list, workers=2)  parallel, hard per-item timeout, stats for metrics
    python code_reward.py --references mbpp_test,humaneval   every reference solution through the reward
"""
import builtins
import os
import sys
import time

# Imports are kept light and the checker side imports what it needs inside its functions: the runner block below
# runs in every sandboxed process, where each import is start-up time (json, signal, ast pull in re/enum: ~15 ms).

DEFAULT_TIMEOUT_S = 6.0       # wall-clock seconds per item (all of its tests), sandbox start-up included
WORKER_GRACE_S = 3.0          # a worker (the checker) later than timeout + this is killed
CPU_MARGIN_S = 1              # RLIMIT_CPU = ceil(timeout) + this: a busy loop dies even if the wall clock stalls
MEMORY_MB = 512               # address space per sandboxed process (RLIMIT_AS); at most MAX_PROCESSES x this
MAX_PROCESSES = 8             # processes + threads per sandbox (RLIMIT_NPROC; binds in bwrap mode only)
MAX_FILE_MB = 16              # largest file a program may write (RLIMIT_FSIZE)
SANDBOX_DIR_MB = 64           # size of the program's tmpfs working directory (bwrap mode)
MAX_OPEN_FILES = 64           # RLIMIT_NOFILE
MAX_PROGRAM_CHARS = 200_000   # longer "programs" are not graded
MAX_OUTPUT_BYTES = 8 << 20    # stdout kept from a stdio program (more fails the case)
MAX_REPLY_BYTES = 8 << 20     # one value sent back by a program's function (more fails the test)
MAX_ITEMS = 1_000_000         # elements read from an iterator a function returns
PARTIAL_CREDIT = False        # True: reward = fraction of tests passed (asserts or cases) instead of all-or-nothing
SANDBOX = "auto"              # "auto": bwrap when it works, else the rlimits fallback; "bwrap": bwrap or refuse
SANDBOX_UID_BASE = 1_500_000_000  # when root, a program runs as uid SANDBOX_UID_BASE + its grading worker's pid (unused uids)
SANDBOX_SITE_PACKAGES = False # False: programs get the standard library only (python -S; ~6 ms faster start-up)
SANDBOX_PYTHON = None         # the programs' interpreter; None: this one, or /usr/bin/python3 (see sandbox_python)
WORKER_MEMORY_GB = 4.0        # address space of a grading worker (it runs the tests on the values it receives)
WORKDIR_IN_SANDBOX = "/sandbox"

FENCE_LANGUAGES = ("python", "py", "python3")


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


def extract_program(response):
    """The program in a response: the last ```python (or ```py / ```python3) block; if there is none, the last
    ``` block without a language tag; else None (scores 0). Blocks tagged with another language never count."""
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
# none of it: whatever it sends is parsed as plain literals (from_literal).
# ------------------------------------------------------------------------------------------------------------
# RUNNER BEGIN
# builtin types a test may pass to a program (MBPP: `remove_datatype(t, int)`) or get back from it
PLAIN_TYPES = {t.__name__: t for t in (int, float, complex, str, bytes, bool, list, tuple, dict, set, frozenset,
                                       type(None), range)}


def to_literal(value, _depth=0):
    """Plain value -> literal text. Subclasses of the plain types (namedtuple, Counter, IntEnum) are sent as
    their base type; iterators as __iter__([...]); ranges as range(...); numpy values via tolist(); builtin types
    as __type__('int'); the checker's ProgramName / ProgramObject as references to the program's objects.
    Anything else raises TypeError: an object with a custom __eq__ never reaches a comparison as itself."""
    if _depth > 100:
        raise TypeError("value nested too deeply")
    t = type(value)
    if value is None or t is bool:
        return repr(value)
    if isinstance(value, bool):
        return repr(bool(value))
    if isinstance(value, int):
        value = int(value)
        # str(int) is quadratic and capped at 4300 digits; hexadecimal is linear and uncapped
        return hex(value) if value.bit_length() > 10_000 else repr(value)
    if isinstance(value, float):
        value = float(value)
        return repr(value) if value == value and abs(value) != float("inf") else f"float({repr(value)!r})"
    if isinstance(value, complex):
        return repr(complex(value))
    if isinstance(value, str):
        return repr(str(value))
    if isinstance(value, (bytes, bytearray)):
        return repr(bytes(value))
    reference = getattr(type(value), "sandbox_literal", None)   # the checker's ProgramName / ProgramObject
    if reference is not None:
        return reference(value)
    if isinstance(value, type) and PLAIN_TYPES.get(value.__name__) is value:
        return f"__type__({value.__name__!r})"
    if isinstance(value, range):
        return f"range({value.start}, {value.stop}, {value.step})"
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        if isinstance(value, dict):
            inner = ", ".join(f"{to_literal(k, _depth + 1)}: {to_literal(v, _depth + 1)}" for k, v in value.items())
            return "{" + inner + "}"
        inner = ", ".join(to_literal(v, _depth + 1) for v in value)
        if isinstance(value, list):
            return "[" + inner + "]"
        if isinstance(value, tuple):
            return "(" + inner + ("," if len(value) == 1 else "") + ")"
        return ("set" if isinstance(value, set) else "frozenset") + "([" + inner + "])"
    if hasattr(value, "__next__") and hasattr(value, "__iter__"):
        items = []
        for item in value:
            items.append(item)
            if len(items) > MAX_ITEMS:
                raise TypeError("iterator too long")
        return "__iter__(" + to_literal(items, _depth + 1) + ")"
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return to_literal(value.tolist(), _depth + 1)
    raise TypeError(f"a function returned a {t.__module__}.{t.__qualname__}, which is not plain data")


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
    """Sandboxed side. argv: kind, fds "R,W", limits (a literal). Sets the limits (first: no program code has
    run yet), says hello, reads the job, then either runs the program as __main__ (stdio) or loads it and answers
    calls by name (functional). Messages both ways are one-line Python literals. Nothing here is trusted by the
    checker: the program can replace any of it, and can still only send plain data."""
    import resource
    kind, fds, limits = argv[0], argv[1], eval(argv[2])  # noqa: S307 -- the checker's own literal
    read_fd, write_fd = (int(x) for x in fds.split(","))
    for name, value in limits.items():
        resource.setrlimit(getattr(resource, name), (value, value + 1 if name == "RLIMIT_CPU" else value))
    os.environ.clear()  # the parent passes none; this drops what bwrap (PWD) and Python (LC_CTYPE) add
    _write_line(write_fd, to_literal({"hello": os.getpid()}))
    buffer = bytearray()
    # the checker's messages: literals it wrote itself (in this process nothing is worth protecting from them)
    objects = []   # values returned that are not plain data: the checker gets __obj__(index) handles
    scope = {"__builtins__": {}, "set": set, "frozenset": frozenset, "float": float, "range": range, "__iter__": iter,
             "__type__": PLAIN_TYPES.__getitem__, "__obj__": objects.__getitem__}
    line = _read_line(read_fd, buffer)
    if line is None:
        os._exit(0)
    job = eval(line, scope)  # noqa: S307
    if kind == "stdio":
        os.close(read_fd)
        os.close(write_fd)
        sys.argv = ["solution.py"]
        code = compile(job["program"], "solution.py", "exec")
        exec(code, {"__name__": "__main__", "__builtins__": builtins})  # noqa: S102 -- this is the sandbox
        return
    namespace = {"__name__": "__solution__", "__builtins__": builtins}
    try:
        for part, filename in ((job.get("prelude"), "prelude.py"), (job["program"], "solution.py"),
                               (job.get("setup"), "setup.py")):
            if part:
                exec(compile(part, filename, "exec"), namespace)  # noqa: S102
    except BaseException as exc:  # noqa: BLE001 -- SystemExit included: exiting while loading is a failure
        _write_line(write_fd, to_literal({"ready": False, "error": _describe(exc)}))
        os._exit(0)
    _write_line(write_fd, to_literal({"ready": True}))
    scope["__ref__"] = namespace.__getitem__
    while True:
        line = _read_line(read_fd, buffer)
        if line is None:
            os._exit(0)
        try:
            request = eval(line, scope)  # noqa: S307
            value = namespace[request["name"]](*request["args"], **request["kwargs"])
            try:
                text = to_literal(value)
            except Exception:  # noqa: BLE001 -- not plain data: the checker gets an opaque handle
                objects.append(value)
                text = f"__obj__({len(objects) - 1})"
            reply = "{'value': " + text + "}"
        except BaseException as exc:  # noqa: BLE001 -- reported to the checker, which fails the test
            reply = to_literal({"raised": type(exc).__name__, "message": _describe(exc)})
        _write_line(write_fd, reply)


def _describe(exc):
    try:
        return f"{type(exc).__name__}: {exc}"[:300]
    except BaseException:  # noqa: BLE001 -- a hostile __str__
        return type(exc).__name__
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
class ProgramName:
    """Checker side: a name in the program's namespace. Calling it runs the program's function in the sandbox
    and returns the plain value it sends back; passing it as an argument passes the program's own object (by
    name, e.g. MBPP's `root` tree built by the setup code). The program never receives the checker's objects."""

    def __init__(self, name, sandbox):
        self.name = self.__name__ = self.__qualname__ = name
        self.sandbox = sandbox

    def sandbox_literal(self):
        return f"__ref__({self.name!r})"

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
        # only ordinary exceptions are re-raised by type (a test may expect one); never SystemExit & co
        if not (isinstance(error, type) and issubclass(error, Exception)):
            error = RuntimeError
        raise error(f"raised in the program: {str(reply.get('message'))[:300]}")


class ProgramObject:
    """Checker side: an object a program's function returned that is not plain data (an instance of one of its
    own classes, MBPP's `Pair`). The checker cannot look inside it; it can only pass it back to the program.
    It equals only itself, and truth-testing it is an error, so it can never make an assert pass by itself."""

    def __init__(self, index):
        self.index = index

    def sandbox_literal(self):
        return f"__obj__({self.index})"

    def __bool__(self):
        raise TypeError("an object the program returned cannot be truth-tested by the checker")

    def __repr__(self):
        return f"<program object {self.index}>"


def from_literal(text):
    """Checker side: literal text -> value, accepting only literals: numbers, strings, bytes, None, True/False,
    tuples, lists, dicts, set([...]), frozenset([...]), float('nan'/'inf'), range(a, b, c), __iter__([...]),
    __type__('int') (a builtin type) and __obj__(k) (a ProgramObject). Raises ValueError on anything else."""
    import ast
    tree = ast.parse(text, mode="eval").body

    def build(node):
        if isinstance(node, ast.Constant) and not isinstance(node.value, type(...)):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) \
                and isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float, complex):
            return -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)) \
                and type(node.right) is ast.Constant and type(node.right.value) is complex:
            left, right = build(node.left), node.right.value
            if type(left) not in (int, float):
                raise ValueError("bad complex literal")
            return left + right if isinstance(node.op, ast.Add) else left - right
        if isinstance(node, ast.Tuple):
            return tuple(build(e) for e in node.elts)
        if isinstance(node, ast.List):
            return [build(e) for e in node.elts]
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise ValueError("** in a dict literal")
            return {build(k): build(v) for k, v in zip(node.keys, node.values)}
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            name, args = node.func.id, [build(a) for a in node.args]
            if name in ("set", "frozenset") and len(args) == 1 and type(args[0]) is list:
                return set(args[0]) if name == "set" else frozenset(args[0])
            if name == "float" and len(args) == 1 and args[0] in ("nan", "inf", "-inf"):
                return float(args[0])
            if name == "range" and len(args) == 3 and all(type(a) is int for a in args):
                return range(*args)
            if name == "__iter__" and len(args) == 1 and type(args[0]) is list:
                return iter(args[0])
            if name == "__type__" and len(args) == 1 and args[0] in PLAIN_TYPES:
                return PLAIN_TYPES[args[0]]
            if name == "__obj__" and len(args) == 1 and type(args[0]) is int:
                return ProgramObject(args[0])
        raise ValueError(f"not a plain literal: {type(node).__name__}")

    return build(tree)


# ------------------------------------------------------------------------------------------------------------
# The sandbox, from the checker's side
# ------------------------------------------------------------------------------------------------------------
_PROBED = {}


def _bwrap_argv(runner_args):
    """bwrap command line: new user/pid/net/ipc/uts namespaces, read-only /usr and Python install, a size-limited
    tmpfs as the working directory, no other host path. bwrap always runs as an unprivileged user (as root we
    start it as an unused uid), so the program is in a user namespace in which it cannot create another one
    (--disable-userns: no private mounts, e.g. of an unbounded tmpfs), RLIMIT_NPROC counts only its own
    processes, and it holds no capability outside its namespaces."""
    import shutil
    argv = [shutil.which("bwrap"), "--unshare-user", "--disable-userns", "--unshare-pid", "--unshare-net",
            "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", "--hostname", "sandbox", "--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):  # merged-/usr symlinks, or real dirs
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    argv += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    python = sandbox_python()
    installs = {os.path.dirname(os.path.dirname(python))}
    if python == os.path.realpath(sys.executable):
        installs.add(sys.base_prefix)
        if SANDBOX_SITE_PACKAGES:
            installs.add(sys.prefix)
    made = set()
    for target in sorted(installs):
        if target == "/usr" or target.startswith("/usr/"):
            continue
        parts = target.split("/")[1:-1]
        for k in range(1, len(parts) + 1):  # its parents inside the sandbox: plain directories anyone can enter
            parent = "/" + "/".join(parts[:k])
            if parent not in made:
                argv += ["--perms", "0755", "--dir", parent]
                made.add(parent)
        argv += ["--ro-bind", os.path.realpath(target), target]
    # the root and /dev are tmpfs that bwrap builds, owned by the sandbox user: read-only, so that the
    # size-limited working directory is the only place a program can write
    argv += ["--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", str(SANDBOX_DIR_MB << 20), "--tmpfs", WORKDIR_IN_SANDBOX,
             "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", WORKDIR_IN_SANDBOX]
    return argv + _runner_command() + runner_args


def _runner_command():
    """python in isolated mode (no PYTHON* variables, no user site directory, no script directory on sys.path)
    running the runner block."""
    flags = ["-I"] if SANDBOX_SITE_PACKAGES else ["-I", "-S"]
    return [sandbox_python()] + flags + ["-c", RUNNER_SOURCE]


def _reachable_by_others(path):
    """True if a user with no relation to the owner can read `path` (every parent directory searchable)."""
    import stat
    path = os.path.realpath(path)
    parts = path.split("/")
    for k in range(2, len(parts) + 1):
        try:
            mode = os.stat("/".join(parts[:k]) or "/").st_mode
        except OSError:
            return False
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return False
    return bool(os.stat(path).st_mode & stat.S_IROTH)


def sandbox_python():
    """The interpreter sandboxed programs run on: SANDBOX_PYTHON when set, else this one; but as root the
    sandbox runs as another uid, which must be able to read it: an interpreter under /root (pyenv, conda) is
    then replaced by the system's /usr/bin/python3 (programs use the standard library only)."""
    if SANDBOX_PYTHON:
        return SANDBOX_PYTHON
    exe = os.path.realpath(sys.executable)
    if os.geteuid() == 0 and not (_reachable_by_others(exe) and _reachable_by_others(sys.base_prefix)):
        for other in ("/usr/bin/python3", "/usr/local/bin/python3"):
            if os.path.exists(other) and _reachable_by_others(other):
                return os.path.realpath(other)
    return exe


class _SandboxGone(BaseException):
    """The sandboxed process is gone or late. A BaseException so that test code's `except Exception` cannot
    swallow it (and a flag on the channel catches a bare `except:`)."""


class _Sandbox:
    """One sandboxed process and its pipes: request/reply lines (functional), stdin/stdout (stdio), and its
    merged stdout/stderr tail for diagnostics."""

    def __init__(self, kind, mode, timeout_s, deadline, notify=None):
        import subprocess
        import tempfile
        self.deadline, self.kind, self.mode = deadline, kind, mode
        self.failure = None            # "timeout" / "crash" / "refused" / "too_large": the sandbox broke
        self.buffer, self.tail, self.stdout = bytearray(), bytearray(), bytearray()
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        limits = {"RLIMIT_CPU": int(timeout_s + 0.999) + CPU_MARGIN_S, "RLIMIT_AS": MEMORY_MB << 20,
                  "RLIMIT_FSIZE": MAX_FILE_MB << 20, "RLIMIT_NOFILE": MAX_OPEN_FILES, "RLIMIT_CORE": 0}
        runner_args = [kind, f"{to_child_r},{from_child_w}", to_literal(limits)]
        self.workdir, self.uid, user = None, None, {}
        try:
            if os.geteuid() == 0:  # a program never runs as root: an unused uid of its own, no groups
                self.uid = SANDBOX_UID_BASE + os.getpid()
                user = {"user": self.uid, "group": self.uid, "extra_groups": []}
            if mode == "bwrap" or self.uid is not None:
                # bwrap: counted in the sandbox's user namespace; fallback as root: counted for its own uid
                limits["RLIMIT_NPROC"] = MAX_PROCESSES
                runner_args[2] = to_literal(limits)
            if mode == "bwrap":
                argv, cwd = _bwrap_argv(runner_args), "/"
            else:
                self.workdir = cwd = tempfile.mkdtemp(prefix="nano-code-")
                if self.uid is not None:
                    os.chown(cwd, self.uid, self.uid)
                argv = _runner_command() + runner_args
            stdio = subprocess.PIPE if kind == "stdio" else subprocess.DEVNULL
            self.proc = subprocess.Popen(argv, stdin=stdio, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE if kind == "stdio" else subprocess.STDOUT,
                                         pass_fds=(to_child_r, from_child_w), cwd=cwd, env={},
                                         start_new_session=True, **user)
        except OSError:  # no interpreter / no bwrap binary: nothing runs, the item is refused
            self.proc, self.failure = None, "refused"
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        if self.proc is None:
            return
        if notify:  # the scorer cleans up after this sandbox itself if it has to kill the worker mid-item
            notify({"pgid": self.proc.pid, "uid": self.uid if mode != "bwrap" else None, "workdir": self.workdir})
        self.out = self.proc.stdout.fileno()
        self.err = self.proc.stderr.fileno() if kind == "stdio" else None
        for fd in (self.to_child, self.from_child, self.out) + ((self.err,) if self.err else ()):
            os.set_blocking(fd, False)
        try:
            hello = self.recv(allow_eof=True)
        except TypeError:
            hello = None
        if hello is None and self.failure is None:
            self.failure = "refused"    # the sandbox never started the runner (bwrap error, limits too small)

    # -- I/O with a deadline; the program's output is drained all the time so that it never blocks on it --
    def _drain(self, fd, readable):
        if fd not in readable:
            return True
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return True
        if fd == self.out and self.kind == "stdio":
            self.stdout += chunk
            if len(self.stdout) > MAX_OUTPUT_BYTES:
                self.failure = self.failure or "too_large"
                raise _SandboxGone()
        else:
            self.tail = (self.tail + chunk)[-4096:]
        return bool(chunk)

    def _wait(self, read_fds, write_fds=()):
        import select
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.failure = self.failure or "timeout"
            raise _SandboxGone()
        return select.select(read_fds, write_fds, [], min(left, 1.0))[:2]

    def _open_outputs(self):
        return [fd for fd in (self.out, self.err) if fd is not None]

    def send(self, message):
        data = (to_literal(message) + "\n").encode()
        while data:
            readable, writable = self._wait(self._open_outputs(), [self.to_child])
            for fd in self._open_outputs():
                if not self._drain(fd, readable):
                    self._close_output(fd)
            if writable:
                try:
                    data = data[os.write(self.to_child, data):]
                except BlockingIOError:
                    pass
                except BrokenPipeError:
                    self.failure = self.failure or self._exit_kind()
                    raise _SandboxGone() from None

    def recv(self, allow_eof=False):
        while b"\n" not in self.buffer:
            try:
                readable, _ = self._wait([self.from_child] + self._open_outputs())
            except _SandboxGone:
                if allow_eof:
                    return None
                raise
            for fd in self._open_outputs():
                if not self._drain(fd, readable):
                    self._close_output(fd)
            if self.from_child in readable:
                chunk = os.read(self.from_child, 1 << 20)
                if not chunk:
                    if allow_eof:
                        return None
                    self.failure = self.failure or self._exit_kind()
                    raise _SandboxGone()
                self.buffer += chunk
                if len(self.buffer) > MAX_REPLY_BYTES:
                    self.failure = self.failure or "too_large"
                    raise _SandboxGone()
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer[:] = rest
        try:
            reply = from_literal(line.decode())
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError, UnicodeDecodeError) as exc:
            raise TypeError(f"the program sent something that is not plain data ({_describe(exc)})") from None
        if not isinstance(reply, dict):
            raise TypeError("the program sent something that is not a message")
        return reply

    def _close_output(self, fd):
        if fd == self.out:
            self.out = None
        if fd == self.err:
            self.err = None

    def _exit_kind(self):
        """After the reply pipe closed: 'timeout' if the CPU limit or a kill ended it, else 'crash'."""
        import signal
        try:
            code = self.proc.wait(timeout=max(0.0, min(1.0, self.deadline - time.monotonic())))
        except Exception:  # noqa: BLE001 -- still running (it closed the pipe itself): a crash of the protocol
            return "crash"
        return "timeout" if code in (-signal.SIGXCPU, 128 + signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGKILL) \
            else "crash"

    def run_stdio(self, program, stdin_text):
        """Send the program, feed stdin, collect stdout until exit. Returns the exit code (None if it broke)."""
        import signal
        self.send({"program": program})
        os.close(self.to_child)
        self.to_child = None
        data = stdin_text.encode()
        stdin_fd = self.proc.stdin.fileno()
        os.set_blocking(stdin_fd, False)
        if not data:
            self.proc.stdin.close()
            stdin_fd = None
        while self.out is not None or self.err is not None:
            readable, writable = self._wait(self._open_outputs(), [stdin_fd] if stdin_fd is not None else [])
            for fd in self._open_outputs():
                if not self._drain(fd, readable):
                    self._close_output(fd)
            if stdin_fd is not None and writable:
                try:
                    data = data[os.write(stdin_fd, data[:1 << 16]):]
                except BlockingIOError:
                    continue
                except BrokenPipeError:  # it exited or closed stdin without reading all of it: fine
                    data = b""
                if not data:
                    self.proc.stdin.close()
                    stdin_fd = None
        while True:
            code = self.proc.poll()
            if code is not None:
                if code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
                    self.failure = "timeout"
                elif code < 0 or code > 128:
                    self.failure = self.failure or "crash"
                return code
            if time.monotonic() > self.deadline:
                self.failure = self.failure or "timeout"
                raise _SandboxGone()
            time.sleep(0.002)

    def close(self):
        """Kill everything the program started: its process group (bwrap: the PID namespace dies with it)."""
        import signal
        for fd in (self.to_child, self.from_child):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        if self.proc is None:
            if self.workdir:
                import shutil
                shutil.rmtree(self.workdir, ignore_errors=True)
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)   # reaped: only the program's own processes can remain in the group
        except Exception:  # noqa: BLE001
            pass
        _kill_group(self.proc.pid)
        if self.mode != "bwrap" and self.uid is not None:
            _kill_user(self.uid)   # the fallback as root: whatever left the group (setsid) still has its uid
        if _PROBED.get("subreaper"):  # a grading worker: the program's orphans are its children; reap them
            while True:
                try:
                    if os.waitpid(-1, os.WNOHANG)[0] == 0:
                        break
                except ChildProcessError:
                    break
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        if self.workdir:
            import shutil
            shutil.rmtree(self.workdir, ignore_errors=True)


def _kill_group(pgid):
    """SIGKILL a process group, then again while a live (non-zombie) member remains: a fork racing the kill
    can leave a child behind. Bounded: a group that keeps growing for ~1 s is left to its CPU limit."""
    import signal
    for _ in range(500):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        if not _live_members(pgid=pgid):
            return
        time.sleep(0.002)


def _live_members(pgid=None, uid=None):
    """pids of live (non-zombie) processes in group pgid, or owned by uid (from /proc; [] without /proc)."""
    members = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                owner = os.stat(f"/proc/{entry}").st_uid if uid is not None else None
            except OSError:
                continue
            if fields[0] != b"Z" and (int(fields[2]) == pgid if pgid is not None else owner == uid):
                members.append(int(entry))
    return members


def _kill_user(uid):
    """SIGKILL every process of uid (the fallback's own sandbox uid) until none is left; bounded like _kill_group."""
    import signal
    for _ in range(500):
        pids = _live_members(uid=uid)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.002)


def _probe(mode):
    """(works, why): one trivial program through the sandbox `mode`, cached per process."""
    if mode not in _PROBED:
        import shutil
        if mode == "bwrap" and not shutil.which("bwrap"):
            _PROBED[mode] = (False, "bwrap is not installed")
        else:
            result = run_tests("def f():\n    return 41 + 1\n", {"kind": "functional", "asserts": ["assert f() == 42"]},
                               timeout_s=10.0, mode=mode)
            _PROBED[mode] = (result["status"] == "passed",
                             f"{mode} probe: {result['status']} {result.get('detail', '')} (interpreter "
                             f"{sandbox_python()})")
    return _PROBED[mode]


def sandbox_mode(requested=SANDBOX):
    """'bwrap' when bubblewrap runs a probe program here, else 'rlimits' (the fallback) -- or 'unavailable'
    when `requested` is 'bwrap' and it does not work (every item is then refused). Cached per process."""
    if requested not in ("auto", "bwrap", "rlimits"):
        raise ValueError(f"sandbox must be auto, bwrap or rlimits, got {requested!r}")
    if requested == "rlimits":
        return "rlimits"
    ok, why = _probe("bwrap")
    if ok:
        return "bwrap"
    if requested == "bwrap":
        return "unavailable"
    if not _PROBED.get("warned"):
        _PROBED["warned"] = True
        missing = [claim for claim, holds in sandbox_guarantees("rlimits").items() if not holds]
        print(f"code_reward.py: WARNING: {why}; programs run with the rlimits fallback, which does NOT give: "
              f"{'; '.join(missing)} (README 'Code RL'). Install bubblewrap for the sandbox.", file=sys.stderr)
        works, why_not = _probe("rlimits")
        if not works:  # e.g. root, and no interpreter the sandbox uid may read: fail closed, and say why
            print(f"code_reward.py: WARNING: the fallback cannot run programs either ({why_not}): every code item "
                  f"will be refused (score 0). Set code_reward.SANDBOX_PYTHON to a Python that others can read.",
                  file=sys.stderr)
    return "rlimits"


def sandbox_guarantees(mode):
    """What holds in each mode (the README table; tests check each claim in the modes that make it). The
    fallback run by root still gives each program an unused uid of its own (so RLIMIT_NPROC binds, its processes
    can be found and killed, and other users' processes are out of reach); run by a user, the program is you."""
    isolated = mode == "bwrap"
    own_uid = isolated or os.geteuid() == 0
    return {"own process group, killed at the deadline": True, "fresh empty working directory": True,
            "empty environment": True, "CPU time, address space, file size, open files limited": True,
            "runs as an unprivileged uid of its own; process count limited; every process reaped": own_uid,
            "cannot signal other users' processes or read their environment": own_uid,
            "no network": isolated,
            "nothing writable outside its directory; working directory size-limited": isolated,
            "host files invisible (tests, datasets, home)": isolated,
            "cannot see or signal any process outside the sandbox": isolated}


# ------------------------------------------------------------------------------------------------------------
# The checker: runs the tests, calls into the sandbox, decides
# ------------------------------------------------------------------------------------------------------------
def _names(code):
    """(names loaded, names bound, names used as `name.attr`) anywhere in code."""
    import ast
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
    """Returns (passed, total, detail)."""
    asserts = tests["asserts"]
    sandbox.send({"prelude": tests.get("prelude", ""), "program": program, "setup": tests.get("setup", "")})
    try:
        ready = sandbox.recv()
    except TypeError as exc:
        return 0, len(asserts), f"program failed to load: {exc}"
    if ready.get("ready") is not True:
        return 0, len(asserts), f"program failed to load: {str(ready.get('error'))[:300]}"
    checker = {"__name__": "__checker__", "__builtins__": builtins}
    if tests.get("prelude"):
        exec(compile(tests["prelude"], "prelude.py", "exec"), checker)  # noqa: S102 -- trusted (dataset) code
    loaded, bound, attr_bases = _names("\n".join(asserts))
    for name in sorted(loaded - bound - set(checker) - set(dir(builtins))):
        if name in sys.stdlib_module_names and name in attr_bases:
            import importlib
            checker[name] = importlib.import_module(name)   # `math.isclose` is the real one, never the program's
        else:
            checker[name] = ProgramName(name, sandbox)
    if tests.get("entry_point"):
        checker[tests["entry_point"]] = ProgramName(tests["entry_point"], sandbox)
    passed, detail = 0, ""
    for k, statement in enumerate(asserts):
        try:
            exec(compile(statement, f"test_{k}.py", "exec"), checker)  # noqa: S102 -- trusted (dataset) code
            ok = sandbox.failure is None   # a bare `except:` in a test cannot hide a dead or late sandbox
        except _SandboxGone:
            return passed, len(asserts), f"test {k}: sandbox {sandbox.failure}"
        except BaseException as exc:  # noqa: BLE001 -- a failing test, whatever it raised
            ok, detail = False, f"test {k}: {_describe(exc)}"
        if sandbox.failure:
            return passed, len(asserts), f"test {k}: sandbox {sandbox.failure}"
        passed += ok
        if not ok and not partial:
            break
    return passed, len(asserts), detail


def run_tests(program, tests, timeout_s=DEFAULT_TIMEOUT_S, mode=None, partial=PARTIAL_CREDIT, notify=None):
    """Run `program` (source text) against `tests` in the sandbox. Call it in a grading worker (the tests run
    here, in this process). Returns {"status": passed|failed|timeout|crash|refused|no_program, "passed": int,
    "total": int, "score": float, "detail": str, "seconds": float}."""
    start = time.monotonic()
    deadline = start + timeout_s
    mode = mode or sandbox_mode()
    total = len(tests["asserts"]) if tests["kind"] == "functional" else len(tests["cases"])
    result = {"status": "failed", "passed": 0, "total": total, "score": 0.0, "detail": ""}
    if program is None or len(program) > MAX_PROGRAM_CHARS:
        result.update(status="no_program", detail="no program" if program is None else "program too long")
    elif mode == "unavailable":
        result.update(status="refused", detail="bwrap required but not usable")
    elif tests["kind"] == "functional":
        sandbox = None
        try:
            sandbox = _Sandbox("functional", mode, timeout_s, deadline, notify)
            if sandbox.failure:
                raise _SandboxGone()
            passed, _, detail = _check_functional(sandbox, program, tests, partial)
            result.update(passed=passed, detail=detail)
        except _SandboxGone:
            pass
        finally:
            if sandbox is not None:
                sandbox.close()
                if sandbox.failure:
                    result["status"] = sandbox.failure if sandbox.failure != "too_large" else "failed"
                    result["detail"] = (result["detail"] or f"sandbox {sandbox.failure}") + \
                        (f"; output: {bytes(sandbox.tail[-300:]).decode(errors='replace')}" if sandbox.tail else "")
    else:
        passed, detail = 0, ""
        for k, case in enumerate(tests["cases"]):
            sandbox = None
            try:
                sandbox = _Sandbox("stdio", mode, timeout_s, deadline, notify)
                if sandbox.failure:
                    raise _SandboxGone()
                code = sandbox.run_stdio(program, case["input"])
                if code == 0 and sandbox.failure is None and \
                        same_output(bytes(sandbox.stdout).decode(errors="replace"), case["output"]):
                    passed += 1
                else:
                    detail = f"case {k}: exit {code}" + (", wrong output" if code == 0 else "") + \
                             (f"; stderr: {bytes(sandbox.tail[-300:]).decode(errors='replace')}" if sandbox.tail else "")
            except _SandboxGone:
                pass
            finally:
                if sandbox is not None:
                    sandbox.close()
            if sandbox is not None and sandbox.failure:
                result["status"] = sandbox.failure if sandbox.failure != "too_large" else "failed"
                detail = f"case {k}: sandbox {sandbox.failure}"
                if sandbox.failure in ("timeout", "refused"):
                    break
            if passed < k + 1 and not partial:
                break
        result.update(passed=passed, detail=detail)
    if result["passed"] == total and total > 0 and result["status"] == "failed":
        result["status"] = "passed"
    if result["status"] == "passed" or (partial and result["status"] not in ("refused", "no_program")):
        result["score"] = result["passed"] / total if partial else 1.0
    result["seconds"] = time.monotonic() - start
    return result


def same_output(got, expected):
    """stdout comparison: equal after dropping trailing whitespace on each line and blank lines at the end."""
    def lines(text):
        out = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
        while out and not out[-1]:
            out.pop()
        return out
    return lines(got) == lines(expected)


# ------------------------------------------------------------------------------------------------------------
# Grading workers: trusted checker processes with a hard per-item timeout (killed when late)
# ------------------------------------------------------------------------------------------------------------
def _serve(mode, memory_limit_bytes):
    """Worker loop: one JSON job per stdin line ({program, tests, timeout_s, partial}), one JSON reply per line
    ({"child": pgid} when a sandbox starts, then {"result": ...})."""
    import json
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))
    except (ImportError, ValueError, OSError):
        pass
    try:  # orphans of a sandboxed program become this worker's children, so that it can reap them: zombies
        import ctypes  # would otherwise pile up under an init that does not reap, and count against RLIMIT_NPROC
        _PROBED["subreaper"] = ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) == 0   # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass

    def notify(child):
        sys.stdout.write(json.dumps({"child": child}) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        job = json.loads(line)
        try:
            result = run_tests(job["program"], job["tests"], job["timeout_s"], mode, job["partial"], notify)
        except Exception as exc:  # noqa: BLE001 -- a grader bug must not take the batch down
            result = {"status": "grader_error", "score": 0.0, "detail": _describe(exc)}
        sys.stdout.write(json.dumps({"result": result}) + "\n")
        sys.stdout.flush()


class _Worker:
    """A grading process (the checker): a plain `python -c` child, so no fork of a parent holding vLLM threads."""

    def __init__(self, mode):
        import subprocess
        here = os.path.dirname(os.path.abspath(__file__))
        code = (f"import sys; sys.path.insert(0, {here!r}); import code_reward; "
                f"code_reward._serve({mode!r}, {int(WORKER_MEMORY_GB * 2**30)})")
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     start_new_session=True)
        self.fd = self.proc.stdout.fileno()
        self.buffer, self.started, self.children = bytearray(), None, []

    def send(self, job):
        import json
        self.proc.stdin.write((json.dumps(job) + "\n").encode())
        self.proc.stdin.flush()
        self.started, self.children = time.monotonic(), []

    def replies(self):
        """Complete reply lines read so far (after select said the pipe is readable); None at EOF."""
        import json
        chunk = os.read(self.fd, 1 << 20)
        if not chunk:
            return None
        self.buffer += chunk
        *lines, rest = bytes(self.buffer).split(b"\n")
        self.buffer[:] = rest
        return [json.loads(line) for line in lines]

    def kill(self):
        """Kill the worker and what its current sandbox left: the process group (bwrap: the whole sandbox dies
        with its parent anyway), the fallback's uid, the fallback's working directory."""
        import shutil
        self.proc.kill()
        self.proc.wait()
        for child in self.children:
            _kill_group(child["pgid"])
            if child["uid"] is not None:
                _kill_user(child["uid"])
            if child["workdir"]:
                shutil.rmtree(child["workdir"], ignore_errors=True)


_POOL = {}  # mode -> persistent workers (starting one costs ~50 ms; they are reused across batches)

STAT_KEYS = ("code_timeouts", "code_crashes", "sandbox_refusals", "code_no_program", "code_grader_errors")


def score_code_batch(responses, tests_list, workers=2, timeout_s=DEFAULT_TIMEOUT_S, stats=None,
                     partial=PARTIAL_CREDIT, sandbox=SANDBOX, results=None):
    """code_reward for each (response, tests) in parallel grading workers, each item with a hard timeout.

    Returns a list of len(responses) floats. `stats`, when a dict, receives counts (STAT_KEYS): timeouts
    (the program or the tests ran out of time), crashes (the program's process died mid-protocol: a signal, the
    memory limit, os._exit), sandbox refusals (it could not start), responses without a program, and grader
    errors. `results`, when a list, receives each item's run_tests dict (status, detail, seconds)."""
    import select
    if len(responses) != len(tests_list):
        raise ValueError(f"{len(responses)} responses but {len(tests_list)} test sets")
    import data
    checked = []
    for k, tests in enumerate(tests_list):
        tests, error = data.validate_tests(tests)
        if error:
            raise ValueError(f"item {k}: {error}")
        checked.append(tests)
    mode = sandbox_mode(sandbox)
    jobs = [{"program": extract_program(r), "tests": t, "timeout_s": timeout_s, "partial": partial}
            for r, t in zip(responses, checked)]
    outcome = [None] * len(jobs)
    pool = _POOL.setdefault(mode, [])
    workers = max(1, workers)
    while len(pool) < workers:
        pool.append(_Worker(mode))
    queue = list(reversed(range(len(jobs))))
    busy = {}  # worker index -> item index
    while queue or busy:
        for w in range(workers):
            if w not in busy and queue:
                k = queue.pop()
                if jobs[k]["program"] is None:   # nothing to run: no need to involve a worker
                    outcome[k] = {"status": "no_program", "score": 0.0, "detail": "no program"}
                    continue
                try:
                    pool[w].send(jobs[k])
                except OSError:  # a dead worker: replace it and retry the item
                    pool[w].kill()
                    pool[w] = _Worker(mode)
                    pool[w].send(jobs[k])
                busy[w] = k
        if not busy:
            continue
        ready, _, _ = select.select([pool[w].fd for w in busy], [], [], 0.05)
        now = time.monotonic()
        for w in list(busy):
            worker, k = pool[w], busy[w]
            if worker.fd in ready:
                replies = worker.replies()
                if replies is None:      # the worker died (its memory limit): replace it
                    outcome[k] = {"status": "grader_error", "score": 0.0, "detail": "grading worker died"}
                    worker.kill()
                    pool[w] = _Worker(mode)
                    del busy[w]
                    continue
                for reply in replies:
                    if "child" in reply:
                        worker.children.append(reply["child"])
                    else:
                        outcome[k] = reply["result"]
                        del busy[w]
            elif now - worker.started > timeout_s + WORKER_GRACE_S:
                outcome[k] = {"status": "timeout", "score": 0.0, "detail": "grading worker killed at the deadline"}
                worker.kill()
                pool[w] = _Worker(mode)
                del busy[w]
    if stats is not None:
        status_to_key = {"timeout": "code_timeouts", "crash": "code_crashes", "refused": "sandbox_refusals",
                         "no_program": "code_no_program", "grader_error": "code_grader_errors"}
        for key in STAT_KEYS:
            stats.setdefault(key, 0)
        for o in outcome:
            if o["status"] in status_to_key:
                stats[status_to_key[o["status"]]] += 1
    if results is not None:
        results.extend(outcome)
    return [float(o["score"]) for o in outcome]


def close_pool():
    """Stop the grading workers (the next batch starts new ones)."""
    for pool in _POOL.values():
        for worker in pool:
            worker.kill()
    _POOL.clear()


def code_reward(response, tests, timeout_s=DEFAULT_TIMEOUT_S, partial=PARTIAL_CREDIT):
    """1.0 if the program in `response` passes every test in `tests` (else 0.0; with partial=True the fraction
    of tests passed). Runs in a grading worker and a sandbox like score_code_batch."""
    return score_code_batch([response], [tests], workers=1, timeout_s=timeout_s, partial=partial)[0]


# ------------------------------------------------------------------------------------------------------------
# CLI
# ------------------------------------------------------------------------------------------------------------
def check_references(specs, workers=2, timeout_s=DEFAULT_TIMEOUT_S, sandbox=SANDBOX, log=print):
    """Run every reference solution of each set through the reward. Returns {set: (passed, total, failures)}
    where failures lists (id, status, detail)."""
    import data
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
    import argparse
    import json
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
    parser.add_argument("--sandbox", default=SANDBOX, choices=["auto", "bwrap", "rlimits"], help="isolation")
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
    scores = score_code_batch(responses, tests, args.workers, args.timeout_s, stats, args.partial, args.sandbox)
    print(f"{len(scores)} rows, mean reward {sum(scores) / max(len(scores), 1):.4f}, {time.time() - start:.1f}s, {stats}")


if __name__ == "__main__":
    main()
