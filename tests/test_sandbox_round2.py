"""Issue 31 (sandbox round 2): each class of weakness, run for real in every mode it applies to.

    1. verdicts: no program can write, read or reorder what a grading worker sends back; a reply that is not the
       current item's is detected, never paid, and its worker replaced
    2. memory the kernel holds for a program (inodes, pipe and socket buffers, locks, ...) is bounded
    3. nothing a program wrote outlives its item (the fallback as root sweeps by ownership)
    4. what a program sends cannot crash the trusted side: any failure is a plain `failed` item with a bounded,
       printable detail
    5. the checker takes no semantics from the host's environment (PYTHONOPTIMIZE, PYTHONPATH, sitecustomize),
       and refuses to grade when a failing assert does not fail
    and: the full sandbox exposes no GPU (or any other host) device, and no device can be driven (ioctl allowlist)

Modes: bwrap (the full sandbox) where it works here; the rlimits fallback as root (this process) and as an
ordinary user (the whole scorer run as uid 65534 through setpriv, where root is available to do that).
"""
import io
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

import code_reward
import data
import sandbox
import workers

from sandbox_helpers import HAVE_BWRAP, MODES, ROOT, SLOW_S, as_nobody, claims, functional, grade_all


# ------------------------------------------------------------------------------------------------------------
# 1. Verdicts: forged, stolen or shifted replies are never paid
# ------------------------------------------------------------------------------------------------------------
FORGING_OPS = r'''
import os, sys, time
import workers

FORGED = {"unkeyed result": b'{"result": 1.0}\n', "another key": b'{"result": 1.0, "key": "%s"}\n' % (b"0" * 32),
          "junk": b"junk\n", "unkeyed note": b'{"note": {"pgid": 1, "workdir": "/"}}\n'}


def call(kind, honest):
    """An op that writes a line on its own channel first (a stand-in for anything that reaches it), then answers."""
    channel = workers._WORKER["channel"] if hasattr(workers, "_WORKER") else sys.stdout.fileno()
    if kind in FORGED:
        os.write(channel, FORGED[kind])
        time.sleep(0.5)   # the line arrives on its own, long before the answer
    return honest


WORKER_OPS = {"call": call}
'''


@pytest.mark.parametrize("forged", ["unkeyed result", "another key", "junk", "unkeyed note"])
def test_a_reply_that_is_not_the_items_is_never_paid(forged, tmp_path, monkeypatch):
    """The pool took the first line a worker wrote as the item's result: one forged line was paid and shifted
    every later verdict of that worker by one item. Replies are now keyed to the item: anything else fails the
    item ("forged"), the worker is replaced, and the next items get their own answers."""
    module = f"nano_forging_ops_{secrets.token_hex(4)}"
    (tmp_path / f"{module}.py").write_text(FORGING_OPS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))   # how a worker found it before it was started isolated
    pool = workers.get_pool(module, 1 << 30)
    try:
        outcomes = pool.run("call", [(forged, 0.0), ("honest", 1.0), ("honest", 0.0), ("honest", 1.0)], 1, 30.0)
    except ValueError as exc:   # the old pool choked on a line that is not JSON
        pytest.fail(f"the pool crashed on a forged line: {exc!r}")
    finally:
        workers.close_pools(module)
    assert outcomes[0][0] == "forged", outcomes
    assert outcomes[1:] == [("ok", 1.0), ("ok", 0.0), ("ok", 1.0)], outcomes


FORGER = r"""
import json, os
FORGED = json.dumps({"result": {"status": "passed", "score": 1.0, "passed": 1, "total": 1, "detail": "",
                                "sandbox": "rlimits"}}).encode() + b"\n"
def f():
    reached, pid = [], os.getppid()
    for _ in range(4):                  # the grading worker, the scorer (the trainer), and above
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            fds = []
        for fd in fds:
            try:
                out = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
                os.write(out, FORGED * 4)
                reached.append(f"{pid}/{fd}")
            except OSError:
                pass
        try:
            pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if pid <= 1:
            break
    return reached
"""
HONEST = ["def f():\n    return 1\n", "def f():\n    return 0\n", "def f():\n    return 1\n"]


@pytest.mark.parametrize("mode", MODES)
def test_forged_verdicts_are_never_paid(mode):
    """A program writes forged results into every descriptor it can open through /proc of its ancestors (the
    grading worker, the scorer); its item scores 0 and the next items of the same worker keep their own verdicts."""
    scores, results, _ = grade_all([FORGER] + HONEST, functional("assert f() == 1"), mode)
    assert scores == [0, 1, 0, 1], results


FORGING_AS_NOBODY = r"""
forger, honest = json.loads(sys.argv[2]), json.loads(sys.argv[3])
out = {}
for mode in MODES:
    scores, results, _ = grade_all([forger] + honest, {"kind": "functional", "asserts": ["assert f() == 1"]}, mode)
    out[mode] = [scores, [r["status"] for r in results]]
print(json.dumps(out))
"""


def test_forged_verdicts_are_never_paid_as_an_ordinary_user():
    """Issue 31's find: in the fallback run by an ordinary user the program has the worker's uid, opened the
    worker's stdout through /proc/<parent>/fd/1 and wrote a result line: paid 1.0, and every later verdict of
    that worker shifted by one item (honest 0, 1, 0 came back 1, 0, 1)."""
    out = as_nobody(FORGING_AS_NOBODY, json.dumps(FORGER), json.dumps(HONEST))
    assert "rlimits" in out, out
    for mode, (scores, statuses) in out.items():
        assert scores == [0, 1, 0, 1], (mode, statuses)


# ------------------------------------------------------------------------------------------------------------
# 2. Memory the kernel holds for a program
# ------------------------------------------------------------------------------------------------------------
INODE_FLOOD = r"""
import errno, os
def f():
    base, n = {base!r}, 0
    try:
        os.makedirs(base, exist_ok=True)
        while n < {count}:               # ~1 KB of kernel memory each on a tmpfs, no data page
            os.mkdir(f"{{base}}/{{n}}")
            n += 1
    except OSError as e:
        return errno.errorcode[e.errno], n
    return "made", n
"""
FLOOD_DIRS = 200_000   # >= 100 MB of the kernel's memory: quick to make, and plain to see in a cgroup's peak


def worker_cgroup():
    """The memory cgroup of the (first) code grading worker, as the test process sees it; None without one."""
    parent = sandbox.memory_cgroup_parent()
    pool = workers.get_pool("code_reward", code_reward.WORKER_MEMORY_GB * 2**30)
    return Path(parent) / f"nano-code-{pool.workers[0].proc.pid}" if parent and pool.workers else None


def cgroup_file(folder, v2_name, v1_name):
    return folder / v2_name if (folder / v2_name).exists() else folder / v1_name


@pytest.mark.parametrize("mode", MODES)
def test_empty_directories_cannot_hold_the_kernels_memory(mode):
    """Issue 31's find: one 6-second item made 1.8 million empty directories on bwrap's 64 MB tmpfs (inodes use
    no data pages) and grew the host's slab by 2.7 GB, counted nowhere. With a memory cgroup the kernel charges
    them to the sandbox's group (limit SANDBOX_MEMORY_MB: ENOMEM or its OOM killer past it); without one the
    full sandbox's working directory is read-only. The fallback (Landlock since round 3) makes them in its own
    directory only (its /dev/shm attempt: tests/test_sandbox_round3.py), counted in the same group."""
    if not claims(mode, "kernel memory for it bounded (a memory cgroup, or each kind refused or limited)"):
        pytest.skip(f"the {mode} sandbox does not claim to bound the kernel's memory here")
    nonce = secrets.token_hex(4)
    base = "flood"
    program = INODE_FLOOD.format(base=base, count=FLOOD_DIRS)
    grade_all(["def f():\n    return 1\n"], functional("assert f() == 1"), mode)   # the worker, and its group
    folder = worker_cgroup()
    _, results, _ = grade_all([program], functional("r = f()\nassert r == 1, r"), mode, timeout_s=60.0)
    assert not list(Path("/dev/shm").glob(f"nano-inodes-{nonce}*"))
    if folder is None:   # bwrap without a memory cgroup: nowhere to make them
        assert "EROFS" in results[0]["detail"], results
        return
    assert "('made', %d)" % FLOOD_DIRS in results[0]["detail"] or results[0]["status"] == "crash", results
    peak = cgroup_file(folder, "memory.peak", "memory.max_usage_in_bytes")
    limit = cgroup_file(folder, "memory.max", "memory.limit_in_bytes")
    assert int(limit.read_text()) == sandbox.SANDBOX_MEMORY_MB << 20
    assert int(peak.read_text()) >= FLOOD_DIRS * 500, "the directories' inodes were not counted in the group"


def test_sandboxes_are_in_a_memory_cgroup_where_the_kernel_offers_one():
    """Where this uid can make memory cgroups (v2 delegated or root, v1 memory hierarchy), each grading worker
    keeps its sandboxes in one limited to SANDBOX_MEMORY_MB, swap included: slab, pipes, sockets, tmpfs pages."""
    if sandbox.memory_cgroup_parent() is None:
        pytest.skip("no memory cgroup this uid can make here (the per-kind bounds apply)")
    mode = MODES[0]
    sleeper = "import time\ndef f():\n    time.sleep(3)\n    return 1\n"
    grade_all(["def f():\n    return 1\n"], functional("assert f() == 1"), mode)   # start the worker
    folder = worker_cgroup()
    assert int(cgroup_file(folder, "memory.max", "memory.limit_in_bytes").read_text()) == \
        sandbox.SANDBOX_MEMORY_MB << 20
    members = []
    thread = threading.Thread(target=lambda: grade_all([sleeper], functional("assert f() == 1"), mode))
    thread.start()
    deadline = time.monotonic() + 30
    while thread.is_alive() and not members and time.monotonic() < deadline:
        members = (folder / "cgroup.procs").read_text().split()
        time.sleep(0.05)
    thread.join()
    assert members, "the sandbox never joined its worker's memory cgroup"


KERNEL_MEMORY_KINDS = r"""
import ctypes, fcntl, os, resource, socket, struct, termios
libc = ctypes.CDLL(None, use_errno=True)
def attempt(action):
    try:
        action()
        return "allowed"
    except OSError as e:
        return "refused" if e.errno in (1, 38, 97) else f"errno {e.errno}"   # EPERM, ENOSYS, EAFNOSUPPORT
def f():
    r, w = os.pipe()
    out = {"F_SETPIPE_SZ 1 MB": attempt(lambda: fcntl.fcntl(w, 1031, 1 << 20))}
    lock = struct.pack("hhqqi", fcntl.F_RDLCK, 0, 0, 1, 0)
    target = os.open(os.__file__, os.O_RDONLY)
    out["POSIX byte-range lock"] = attempt(lambda: fcntl.fcntl(target, fcntl.F_SETLK, lock))
    out["OFD lock"] = attempt(lambda: fcntl.fcntl(target, 37, lock))
    out["lease"] = attempt(lambda: fcntl.fcntl(target, 1024, fcntl.F_RDLCK))
    a, b = socket.socketpair()
    out["SO_SNDBUF"] = attempt(lambda: a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 << 20))
    out["AF_INET socket"] = attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close())
    out["datagram socket"] = attempt(lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM))
    out["listen"] = attempt(lambda: socket.socket(socket.AF_UNIX).listen(4096))
    out["ioctl TIOCSTI"] = attempt(lambda: fcntl.ioctl(r, termios.TIOCSTI, b"x"))
    out["ioctl of a GPU driver"] = attempt(lambda: fcntl.ioctl(r, 0xC020462A, bytes(32)))  # NV_ESC_RM_ALLOC's shape
    other = os.getppid() or 2 ** 22 - 1   # under bwrap the runner is its namespace's init: no parent to name
    out["prlimit of its parent"] = attempt(lambda: resource.prlimit(other, resource.RLIMIT_NOFILE))
    out["own limits"] = attempt(lambda: resource.setrlimit(resource.RLIMIT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE)))
    out["descriptor flags"] = attempt(lambda: (os.set_inheritable(r, True), os.set_blocking(r, False), os.dup(r)))
    out["pending signals"] = resource.getrlimit(resource.RLIMIT_SIGPENDING)[0]
    return out
"""


@pytest.mark.parametrize("mode", MODES)
def test_kernel_memory_without_a_bound_is_refused(mode):
    """Issue 31's find: pipe buffers enlarged with F_SETPIPE_SZ held 65 MB outside RLIMIT_AS. The same family:
    byte-range locks and leases (kernel memory per range), socket buffers raised with SO_SNDBUF, TCP buffers that
    grow by themselves, datagrams and pending connections queued after their sender closed, pending signals. Each is refused by the allowlist or bounded by a limit, in every mode;
    what Python itself needs (descriptor flags, its own limits) still works."""
    expected = {"F_SETPIPE_SZ 1 MB": "refused", "POSIX byte-range lock": "refused", "OFD lock": "refused",
                "lease": "refused", "SO_SNDBUF": "refused", "AF_INET socket": "refused", "datagram socket": "refused",
                "listen": "refused", "ioctl TIOCSTI": "refused",
                "ioctl of a GPU driver": "refused", "prlimit of its parent": "refused", "own limits": "allowed",
                "descriptor flags": "allowed", "pending signals": sandbox.MAX_PENDING_SIGNALS}
    scores, results, _ = grade_all([KERNEL_MEMORY_KINDS], functional(f"got = f()\nassert got == {expected!r}, got"),
                                   mode)
    assert scores == [1], results[0]["detail"]


# ------------------------------------------------------------------------------------------------------------
# 3. Nothing a program wrote outlives its item
# ------------------------------------------------------------------------------------------------------------
LEAVE_FILES = r"""
import os
def f():
    left = []
    for folder in {folders!r}:
        for name in ("{nonce}", "{nonce}-dir/inner"):
            path = os.path.join(folder, name)
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as out:
                    out.write("left by the previous item")
                left.append(path)
            except OSError:
                pass
    return left
"""
FIND_FILES = r"""
import os
def f():
    return [p for p in {paths!r} if os.path.exists(p)]
"""


@pytest.mark.parametrize("mode", MODES)
def test_nothing_a_program_wrote_outlives_its_item(mode, tmp_path):
    """Issue 31's find: the fallback as root swept /tmp, /var/tmp and /dev/shm, but /run/lock (and /var/lock) are
    world-writable too, and a file left there was read back by the next item of the same worker. Now everything
    the item's uid owns wherever it could write is gone before the next item: here /run/lock, a world-writable
    directory outside the usual places made before the scorer's walk, and one made after it (inside /tmp)."""
    if not claims(mode, "nothing it wrote outlives the item"):
        pytest.skip(f"the {mode} sandbox does not claim it")
    nonce = "nano-left-" + secrets.token_hex(4)
    early = Path(tempfile.mkdtemp(prefix="nano-ww-", dir="/var/cache" if os.path.isdir("/var/cache") else None))
    early.chmod(0o777)
    sandbox.PROBED.pop("writable", None)   # as in a new scoring process: its walk finds `early`
    late = None
    try:
        grade_all(["def f():\n    return 0\n"], functional("assert f() == 0"), mode)   # the walk happens here
        late = Path(tempfile.mkdtemp(prefix="nano-ww-", dir="/tmp"))
        late.chmod(0o777)
        folders = ["/run/lock", "/var/lock", "/var/tmp", "/tmp", "/dev/shm", str(early), str(late)]
        _, results, _ = grade_all([LEAVE_FILES.format(folders=folders, nonce=nonce)], functional("assert f() == 0"),
                                  mode)
        candidates = [os.path.join(f, name) for f in folders for name in (nonce, f"{nonce}-dir")]
        scores, results, _ = grade_all([FIND_FILES.format(paths=candidates)], functional("assert f() == []"), mode)
        assert scores == [1], results[0]["detail"]          # the next item of the same worker finds nothing
        assert [p for p in candidates if os.path.lexists(p)] == []
    finally:
        shutil.rmtree(early, ignore_errors=True)
        if late:
            shutil.rmtree(late, ignore_errors=True)
        sandbox.PROBED.pop("writable", None)


# ------------------------------------------------------------------------------------------------------------
# 4. What a program sends cannot crash the trusted side
# ------------------------------------------------------------------------------------------------------------
FORGE_READY = "import sys\nsys.modules['__main__'].to_literal = lambda value, _depth=0: {text!r}\ndef f():\n    return 1\n"
HUGE_HEX = "0x" + "f" * 17000   # 68,000 bits: str() of it passes Python's 4,300-digit int-to-str limit
CRAFTED = {
    "ready: complex of a 4000-digit int": FORGE_READY.format(text='{"complex": [' + "9" * 4000 + ", 0]}"),
    "ready: error text is a 20000-digit int": FORGE_READY.format(
        text='{"dict": [["ready", false], ["error", {"int": "%s"}]]}' % HUGE_HEX),
    "load error: lone surrogates and terminal escapes": "raise ValueError('\\ud800 \\udfff \\x1b[2J\\x1b]0;pwned\\x07 "
                                                         "\\x9b31m \\r')\ndef f():\n    return 1\n",
    "reply: raised with a 20000-digit int as message":
        "import sys\ndef f():\n    sys.modules['__main__'].to_literal = lambda value, _depth=0: "
        "'{\"dict\": [[\"raised\", \"ValueError\"], [\"message\", {\"int\": \"%s\"}]]}'\n    raise ValueError()\n" % HUGE_HEX,
    "reply: value is a complex of a 4000-digit int":
        "import sys\ndef f():\n    sys.modules['__main__'].to_literal = lambda value, _depth=0: "
        "'{\"complex\": [" + "9" * 4000 + ", 0]}'\n    return 1\n",
}


def assert_printable(result):
    detail = result["detail"]
    assert detail.isascii() and not any(ord(c) < 32 and c != "\n" or ord(c) == 127 for c in detail), repr(detail)
    assert len(detail) <= 2 * code_reward.MAX_DETAIL_CHARS, len(detail)
    print(detail, file=io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict"))   # a strict terminal


@pytest.mark.parametrize("mode", MODES)
def test_what_a_program_sends_cannot_crash_the_checker(mode):
    """Issue 31's find: a "ready" message holding complex(<4000-digit int>, 0) raised OverflowError, an error text
    holding a 20,000-digit int raised ValueError (both ended as grader_error, the counter meant for our own bugs,
    which a program could then inflate), and lone surrogates or terminal escapes reached result["detail"] and
    raised UnicodeEncodeError when printed. Each is now a plain failed item with a bounded, printable detail."""
    names = sorted(CRAFTED)
    stdio = {"kind": "stdio", "cases": [{"input": "", "output": "1"}]}
    programs = [CRAFTED[n] for n in names] + ["import sys\nsys.stderr.write('\\x1b[2J\\x1b]0;pwned\\x07\\ud800')\n"
                                              "sys.stderr.flush()\nraise SystemExit(3)\n"]
    tests = [functional("assert f() == 1")] * len(names) + [stdio]
    scores, results, stats = grade_all(programs, tests, mode)
    for name, score, result in zip(names + ["stdio: terminal escapes on stderr"], scores, results):
        assert score == 0 and result["status"] == "failed", (name, result)
        assert_printable(result)
    assert stats["code_grader_errors"] == 0, stats


# ------------------------------------------------------------------------------------------------------------
# 5. The checker takes no semantics from the host's environment
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_the_hosts_python_environment_changes_nothing(mode, tmp_path, monkeypatch):
    """Issue 31's find: with PYTHONOPTIMIZE=1 in the trainer's environment, workers inherited it and compiled the
    tests without their asserts: an empty program scored 1.0 on MBPP asserts and a wrong function passed a
    HumanEval check(). The same family: PYTHONPATH, sitecustomize / usercustomize, PYTHONWARNINGS, ..."""
    marker = tmp_path / "customized"
    for name in ("sitecustomize", "usercustomize"):
        (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write({name!r})\n"
                                             "import builtins\nbuiltins.AssertionError = type('Nope', (Exception,), {})\n")
    for key, value in {"PYTHONOPTIMIZE": "2", "PYTHONPATH": str(tmp_path), "PYTHONWARNINGS": "ignore",
                       "PYTHONINTMAXSTRDIGITS": "0", "PYTHONSAFEPATH": "0"}.items():
        monkeypatch.setenv(key, value)
    mbpp = data.load_dataset("mbpp_test")[0]
    humaneval = data.load_dataset("humaneval")[0]
    wrong = f"def {humaneval['tests']['entry_point']}(*args):\n    return None\n"
    code_reward.close_pool()   # workers start with this environment
    try:
        scores, results, _ = grade_all(["x = 0\n", wrong, mbpp["solution"], humaneval["solution"]],
                                       [mbpp["tests"], humaneval["tests"], mbpp["tests"], humaneval["tests"]], mode)
    finally:
        code_reward.close_pool()
    assert scores == [0, 0, 1, 1], [r["detail"] for r in results]
    assert not marker.exists(), marker.read_text()


def test_the_pool_refuses_to_grade_when_a_failing_assert_passes(monkeypatch):
    """A checker whose asserts are stripped (here: compile() itself made to optimize, as a patched or odd
    interpreter might) would pay an empty program: its self-check fails and it refuses every item."""
    real_compile = compile

    def stripping_compile(source, filename, mode, flags=0, dont_inherit=False, optimize=-1, **kwargs):
        return real_compile(source, filename, mode, flags, dont_inherit, 2)

    monkeypatch.setattr("builtins.compile", stripping_compile)
    result = code_reward._grade("x = 0\n", functional("assert f() == 1"), SLOW_S, MODES[0], False)
    assert result["status"] == "refused" and result["score"] == 0, result


# ------------------------------------------------------------------------------------------------------------
# Devices: no GPU in the full sandbox, and no device can be driven in any mode
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.skipif(not HAVE_BWRAP, reason="bwrap does not work here")
def test_the_full_sandbox_exposes_no_gpu_device():
    """/dev/nvidia* is usually mode 0666 on GPU hosts: bwrap mounts only its own minimal /dev (no --dev-bind), so
    no GPU, render node or other host device exists inside, whatever the host's modes."""
    argv = code_reward.bwrap_argv([])
    assert not any("nvidia" in a or "/dev/dri" in a for a in argv), argv
    assert [argv[k + 1] for k, a in enumerate(argv) if a.startswith("--dev-bind")] == \
        [f"/dev/{name}" for name in sandbox.DEVICES], argv   # only these five, one by one
    program = "import os\ndef f():\n    return sorted(os.listdir('/dev'))\n"
    minimal = {"console", "core", "fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout",
               "tty", "urandom", "zero"}
    scores, results, _ = grade_all([program], functional(f"assert set(f()) <= {minimal!r}, f()"), "bwrap")
    assert scores == [1], results[0]["detail"]


# ------------------------------------------------------------------------------------------------------------
# The other classes, as an ordinary user (the fallback's program then has the trainer's own uid)
# ------------------------------------------------------------------------------------------------------------
AS_NOBODY = r"""
crafted, kinds, expected_kinds = json.loads(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4])
out = {}
for mode in MODES:
    functional = {"kind": "functional", "asserts": ["assert f() == 1"]}
    scores, results, stats = grade_all(list(crafted.values()), functional, mode)
    details = [r["detail"] for r in results]
    statuses = [r["status"] for r in results]
    check = "got = f()\nassert got == %r, got" % expected_kinds
    kinds_score = grade_all([kinds], {"kind": "functional", "asserts": [check]}, mode)[1][0]
    out[mode] = {"statuses": statuses, "details": details, "grader_errors": stats["code_grader_errors"],
                 "kinds": [kinds_score["status"], kinds_score["detail"]]}
print(json.dumps(out, ensure_ascii=True))
"""


def test_decoding_and_kernel_memory_as_an_ordinary_user():
    """Classes 4 and 2 with the scorer run by uid 65534: crafted messages are plain failures with printable
    details, and the refused kinds of kernel memory stay refused."""
    expected = {"F_SETPIPE_SZ 1 MB": "refused", "POSIX byte-range lock": "refused", "OFD lock": "refused",
                "lease": "refused", "SO_SNDBUF": "refused", "AF_INET socket": "refused", "datagram socket": "refused",
                "listen": "refused", "ioctl TIOCSTI": "refused",
                "ioctl of a GPU driver": "refused", "prlimit of its parent": "refused", "own limits": "allowed",
                "descriptor flags": "allowed", "pending signals": sandbox.MAX_PENDING_SIGNALS}
    out = as_nobody(AS_NOBODY, json.dumps(CRAFTED), json.dumps(KERNEL_MEMORY_KINDS), json.dumps(expected))
    assert "rlimits" in out, out
    for mode, got in out.items():
        assert got["grader_errors"] == 0 and set(got["statuses"]) == {"failed"}, (mode, got)
        for detail in got["details"]:
            assert_printable({"detail": detail})
        assert got["kinds"][0] == "passed", (mode, got["kinds"])


ENVIRONMENT_AS_NOBODY = r"""
c.close_pool()
os.environ.update(PYTHONOPTIMIZE="2", PYTHONPATH=sys.argv[1])
c.close_pool()
out = {}
for mode in MODES:
    out[mode] = grade_all(["x = 0\n", "def f():\n    return 1\n"], {"kind": "functional", "asserts": ["assert f() == 1"]},
                          mode)[0]
print(json.dumps(out))
"""


def test_the_hosts_python_environment_changes_nothing_as_an_ordinary_user():
    out = as_nobody(ENVIRONMENT_AS_NOBODY)
    assert "rlimits" in out, out
    for mode, scores in out.items():
        assert scores == [0, 1], (mode, scores)


INODES_AS_NOBODY = r"""
program = json.loads(sys.argv[2])
out = {}
if "bwrap" in MODES:
    _, results, _ = grade_all([program], {"kind": "functional", "asserts": ["r = f()\nassert r == 1, r"]}, "bwrap",
                              timeout_s=60.0)
    out["bwrap"] = [results[0]["status"], results[0]["detail"]]
out["cgroup"] = sandbox.memory_cgroup_parent() is not None
print(json.dumps(out))
"""


def test_empty_directories_cannot_hold_the_kernels_memory_as_an_ordinary_user():
    """bwrap run by an ordinary user: usually no memory cgroup it may make, so the working directory is read-only
    (the fallback run by a user claims no such bound: its program is that user)."""
    if not HAVE_BWRAP:
        pytest.skip("bwrap does not work here")
    out = as_nobody(INODES_AS_NOBODY, json.dumps(INODE_FLOOD.format(base="flood", count=FLOOD_DIRS)))
    if "bwrap" not in out:
        pytest.skip("bwrap does not work for an ordinary user here")
    assert out["cgroup"] or "EROFS" in out["bwrap"][1], out


# ---------------------------------------------------------------------------------------------- red team, round 2
@pytest.mark.parametrize("mode", MODES)
def test_an_exception_the_checker_cannot_rebuild_is_still_the_programs(mode):
    """Class 4: a program raising UnicodeDecodeError (whose constructor wants five arguments) made the checker's
    rebuild raise TypeError itself, and a test expecting a TypeError passed a wrong program."""
    program = "def f(x):\n    raise UnicodeDecodeError('utf-8', b'', 0, 1, 'x')"
    expects_type_error = ("try:\n    f('bad')\nexcept TypeError:\n    pass\n"
                          "else:\n    raise AssertionError('no TypeError')")
    honest = "def f(x):\n    raise TypeError('bad input')"
    scores, results, _ = grade_all([program, honest], functional(expects_type_error), mode)
    assert scores == [0.0, 1.0], results
    scores, results, _ = grade_all([program], functional("try:\n    f(1)\nexcept UnicodeDecodeError:\n    pass"), mode)
    assert scores == [1.0], results   # the program's own exception still reaches the test as its class


DEEP_AND_LINKED = """
import os
def f():
    os.symlink({victim_dir!r}, "evil")             # the removal must unlink these links, never follow them
    os.symlink({victim!r}, "victim")
    for _ in range(5000):                          # deeper than Python's recursion limit
        os.mkdir("d")
        os.chdir("d")
        os.symlink({victim_dir!r}, "evil")
    return 1
"""


@pytest.mark.parametrize("mode", MODES)
def test_the_working_directory_is_removed_through_no_link_and_at_any_depth(mode, tmp_path):
    """Class 3, the cleanup itself (red team: as root the path-based sweep unlinked a root-owned file when a
    program re-pointed a path component at it, and a 5,000-deep tree raised RecursionError in the scorer). The
    sweep is gone (Landlock: nothing to sweep); what remains, the working directory's removal, goes through
    directory descriptors opened with O_NOFOLLOW and never recurses: links are removed, never followed."""
    if mode == "bwrap":
        pytest.skip("bwrap's working directory is a tmpfs that dies with its namespace")
    victim_dir = tmp_path / "host"
    victim_dir.mkdir()
    (victim_dir / "victim").write_text("root's")
    before = set(Path(sandbox.workdir_parent()).glob("nano-code-*"))
    program = DEEP_AND_LINKED.format(victim_dir=str(victim_dir), victim=str(victim_dir / "victim"))
    scores, results, _ = grade_all([program], functional("assert f() == 1"), mode, timeout_s=30.0)
    assert scores == [1], results
    assert (victim_dir / "victim").read_text() == "root's" and os.listdir(victim_dir) == ["victim"]
    assert set(Path(sandbox.workdir_parent()).glob("nano-code-*")) <= before


def test_a_module_planted_where_the_trainer_started_is_never_imported_by_the_checker(tmp_path):
    """Class 5 (red team): a trainer started with `python -c` from a world-writable directory has that directory
    ('' = the cwd) on sys.path, which the workers got; a program planted decimal.py there and the LiveCodeBench
    comparison, importing decimal later, paid wrong programs. Workers import from no world-writable directory."""
    planted = tmp_path / "shared"
    planted.mkdir()
    planted.chmod(0o777)
    (planted / "decimal.py").write_text("class InvalidOperation(ArithmeticError):\n    pass\n"
                                        "class Decimal:\n    def __init__(self, text):\n        pass\n"
                                        "    def __eq__(self, other):\n        return True\n")
    script = ("import sys; sys.path.insert(1, %r)\n"
              "import code_reward\n"
              "tests = {'kind': 'stdio', 'cases': [{'input': '4\\n', 'output': '5\\n'}], 'compare': 'lcb'}\n"
              "print(code_reward.score_code_batch(['```python\\nprint(int(input()) + 2)\\n```'], [tests], workers=1,"
              " timeout_s=10, sandbox='rlimits'))\n" % str(ROOT))
    proc = subprocess.run([sys.executable, "-c", script], cwd=planted, capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "[0.0]", proc.stdout
    assert not workers.safe_to_import_from(str(planted)) and workers.safe_to_import_from(str(ROOT))
