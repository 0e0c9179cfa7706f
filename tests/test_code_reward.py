"""code_reward.py: extraction, the literal channel, every reference solution, hostile programs, reward hacks,
stdin/stdout problems, batch stats; then train.py on MBPP and eval.py on HumanEval with the tiny model.

Hostile programs run for real. Each check runs in every sandbox mode that claims the guarantee it tests
(code_reward.sandbox_guarantees): the bwrap mode where bubblewrap works here, and the rlimits fallback for the
claims the fallback makes. A program whose escape would harm the machine (signals, fork bombs, writes outside
its directory) never runs in a mode that does not claim to contain it.
"""
import contextlib
import json
import os
import platform
import secrets
import shutil
import socket
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
from code_reward import extract_program, from_literal, score_code_batch, to_literal
from tiny_model import TOY_FLAGS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HAVE_BWRAP = code_reward.sandbox_mode("auto") == "bwrap"
MODES = ["bwrap", "rlimits"] if HAVE_BWRAP else ["rlimits"]
FAST_S = 2.0     # timeout for hostile items: each must end within this (+ start-up and kill margin)
SLOW_S = 10.0    # timeout for items that must pass: generous, so that a loaded machine does not fail them
# start-up, kill and reap on top of a deadline; on a machine loaded by other work (load average above the core
# count) everything takes longer, so the margin grows with the load
MARGIN_S = 1.5 + 0.5 * max(0.0, os.getloadavg()[0] / (os.cpu_count() or 1) - 1)
# an item is charged CPU and idle time (sandbox.ItemClock): on a loaded machine a hostile item of FAST_S ends later
# in wall clock, at most at its wall cap; the CPU-time claims themselves are tests/test_sandbox_round3.py's
FAST_WALL_S = sandbox.backstop_s(FAST_S)


def fenced(program):
    return f"```python\n{program}\n```"


def needs(mode, claim):
    if not code_reward.sandbox_guarantees(mode)[claim]:
        pytest.skip(f"the {mode} sandbox does not claim: {claim}")


def grade(program, tests, mode, timeout_s=SLOW_S, partial=False):
    """One response through the real path (grading worker + sandbox): (score, result dict, seconds)."""
    results = []
    start = time.monotonic()
    score = score_code_batch([fenced(program)], [tests], workers=1, timeout_s=timeout_s, sandbox=mode,
                             results=results, partial=partial)[0]
    note_our_workers()
    return score, results[0], time.monotonic() - start


def warm(mode):
    """Start the mode's grading worker, so that timed items measure the item, not the worker's start-up."""
    assert grade("def f():\n    return 1\n", functional("assert f() == 1"), mode)[0] == 1


def grading_worker():
    """The first persistent grading worker of the code reward (workers.py)."""
    return workers.get_pool("code_reward", code_reward.WORKER_MEMORY_GB * 2**30).workers[0]


def functional(*asserts, entry_point=None, **extra):
    tests = {"kind": "functional", "asserts": list(asserts), **extra}
    if entry_point:
        tests["entry_point"] = entry_point
    return tests


OUR_WORKERS = {os.getpid()}   # this session's grading workers (and itself): as root, their sandboxes' uids name them


def note_our_workers():
    for pool in workers._POOLS.values():
        OUR_WORKERS.update(worker.proc.pid for worker in pool.workers)


def leftover_runners(wait_s=2.0, uids=()):
    """Processes of this session's sandboxes still alive after wait_s (a SIGKILLed process takes a moment to
    go): the runner's command line names its entry function. As root, a sandbox runs as SANDBOX_UID_BASE + its
    grading worker's pid, which tells ours from those of other checkouts tested on the same machine."""
    note_our_workers()
    ours = {sandbox.SANDBOX_UID_BASE + pid for pid in OUR_WORKERS} | set(uids) if os.geteuid() == 0 else None
    deadline = time.monotonic() + wait_s
    while True:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            uid = int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])
            if b"_runner_main" in cmd and state != "Z" and (ours is None or uid in ours):
                found.append(int(pid))
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


# ------------------------------------------------------------------------------------------------------------
# Extraction and the literal channel
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("response,program", [
    ("text\n```python\na = 1\n```\nmore\n```python\nb = 2\n```\n", "b = 2\n"),   # the last python block
    ("```py\nx = 1\n```", "x = 1\n"),
    ("```Python3\nx = 1\n```", "x = 1\n"),
    ("```\nuntagged = 1\n```", "untagged = 1\n"),                                   # fallback: untagged block
    ("```python\nfirst = 1\n```\n```\nuntagged = 1\n```", "first = 1\n"),        # a tagged block wins
    ("```cpp\nint main() {}\n```", None),                                          # other languages never count
    ("```python\ntruncated = 1\n", None),                                          # an unclosed block is not a block
    ("no code at all", None),
    ("```python\n   \n```", None),
    ("```python\n```", None),
])
def test_extract_program(response, program):
    assert extract_program(response) == program


@pytest.mark.parametrize("value", [
    0, -5, 2**5000 * 3 + 1, -(2**40000) + 7, 1.5, -0.0, 1e308, 3 + 4j, "", "a'b\"c\n\\", b"\x00\xff", None, True,
    [], [1, [2, (3,)]], (1,), (), {"a": 1, (1, 2): [3]}, {1, 2}, frozenset({"x"}), set(), range(2, 10, 3),
], ids=lambda value: type(value).__name__)
def test_plain_values_cross_the_channel_unchanged(value):
    back = from_literal(to_literal(value))
    assert back == value and type(back) is type(value)


def test_special_values_cross_the_channel():
    assert str(from_literal(to_literal(float("nan")))) == "nan"
    assert from_literal(to_literal(float("-inf"))) == float("-inf")
    assert list(from_literal(to_literal(iter([1, 2, 3])))) == [1, 2, 3]
    assert from_literal(to_literal((x * x for x in range(3)))) != [0, 1, 4]  # a generator is not a list
    assert from_literal(to_literal(int)) is int and from_literal(to_literal(type(None))) is type(None)
    from collections import Counter, OrderedDict, namedtuple
    assert type(from_literal(to_literal(Counter("aab")))) is dict
    assert from_literal(to_literal(namedtuple("P", "x y")(1, 2))) == (1, 2)
    assert from_literal(to_literal(OrderedDict(a=1))) == {"a": 1}
    with pytest.raises(TypeError):
        to_literal(object())
    with pytest.raises(TypeError):
        to_literal(lambda: 0)
    deep = []
    for _ in range(150):
        deep = [deep]
    with pytest.raises(TypeError):
        to_literal(deep)


@pytest.mark.parametrize("text", [
    "__import__('os').system('true')", "(lambda: 1)()", "x", "a.b", "[x for x in y]", "f'{1}'", "set(x)",
    "float('1e5')", "{**a}", "open('/etc/passwd')", "1 if True else 2", "...", "__ref__('x')", "__obj__('x')",
    "__type__('object')", "range(1, 2)", "[1, 2", "(" * 300 + ")" * 300,
])
def test_the_checker_refuses_anything_but_literals(text):
    with pytest.raises((ValueError, SyntaxError, MemoryError, RecursionError)):
        from_literal(text)


# ------------------------------------------------------------------------------------------------------------
# Reference solutions
# ------------------------------------------------------------------------------------------------------------
CODE_SETS = {"mbpp_train": 374, "mbpp_valid": 90, "mbpp_test": 500, "humaneval": 164, "stdio_demo": 6}


def test_every_reference_solution_passes_its_own_tests():
    """All 1134 reference programs, through the real path. None fails on this machine (README "Code RL": the
    failures SOURCES.md expects did not show up, with our checker or with a plain exec of code + asserts).
    The timeout is generous: mbpp-123's reference takes ~4 s of CPU here."""
    report = code_reward.check_references(list(CODE_SETS), workers=2, timeout_s=30.0, log=lambda _: None)
    for name, (passed, total, failures) in report.items():
        assert total == CODE_SETS[name], name
        assert passed == total, f"{name}: {failures[:5]}"


def test_another_problems_reference_solution_fails():
    problems = data.load_dataset("mbpp_test,humaneval,stdio_demo")[::7]
    shifted = [fenced(problems[(i + 1) % len(problems)]["solution"]) for i in range(len(problems))]
    stats = {}
    scores = score_code_batch(shifted, [p["tests"] for p in problems], timeout_s=30.0, stats=stats)
    assert len(scores) == len(problems) > 90 and sum(scores) == 0
    assert stats["code_timeouts"] == stats["code_crashes"] == stats["sandbox_refusals"] == 0


# ------------------------------------------------------------------------------------------------------------
# Hostile programs: each ends within the limit, scores 0, and leaves the machine as it was
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_infinite_loops_end_at_the_deadline(mode):
    warm(mode)
    for program, tests in [("def f():\n    while True:\n        pass\n", functional("assert f() == 1")),
                           ("while True:\n    pass\n", functional("assert f() == 1")),
                           ("while True:\n    pass\n", {"kind": "stdio", "cases": [{"input": "", "output": "1"}]})]:
        score, result, seconds = grade(program, tests, mode, timeout_s=FAST_S)
        assert score == 0 and result["status"] == "timeout", result
        assert seconds < FAST_WALL_S + MARGIN_S
    assert not leftover_runners()


@pytest.mark.parametrize("mode", MODES)
def test_a_program_that_never_reads_stdin(mode):
    big = {"kind": "stdio", "cases": [{"input": "x" * (8 << 20) + "\n", "output": "done"}]}
    warm(mode)
    score, result, seconds = grade("import time\ntime.sleep(60)\n", big, mode, timeout_s=FAST_S)
    assert score == 0 and result["status"] == "timeout" and seconds < FAST_WALL_S + MARGIN_S
    # not reading its input is allowed: the harness must not block on the pipe
    score, result, _ = grade("print('done')\n", big, mode)
    assert score == 1, result["detail"]


@pytest.mark.parametrize("mode", MODES)
def test_fork_bomb_is_contained_and_reaped(mode):
    needs(mode, "runs as an unprivileged uid of its own; process count limited; every process reaped")
    bomb = "import os\ndef f():\n    while True:\n        try:\n            os.fork()\n        except OSError:\n            pass\n"
    counter = ("import os, time\ndef f():\n    n = 0\n    for _ in range(100):\n        try:\n"
               "            if os.fork() == 0:\n                time.sleep(60)\n                os._exit(0)\n"
               "            n += 1\n        except OSError:\n            break\n    return n\n")
    escaper = counter.replace("if os.fork() == 0:", "if os.fork() == 0:\n                os.setsid()")
    warm(mode)
    score, result, seconds = grade(bomb, functional("assert f() == 1"), mode, timeout_s=FAST_S)
    assert score == 0 and result["status"] == "timeout" and seconds < FAST_WALL_S + MARGIN_S
    # the limit binds (root included: the program runs as an unprivileged uid): it forks fewer than MAX_PROCESSES
    score, _, _ = grade(counter, functional(f"assert f() < {sandbox.MAX_PROCESSES}"), mode)
    assert score == 1
    score, result, _ = grade(escaper, functional("assert f() > 0"), mode)   # children that leave the process group
    assert score == 1, result["detail"]
    time.sleep(0.2)
    assert not leftover_runners(), "the sleeping children must die with the sandbox"


@pytest.mark.parametrize("mode", MODES)
def test_memory_bomb_fails_fast(mode):
    probe = ("def f():\n    try:\n        bytearray(8 << 30)\n    except MemoryError:\n        return 'limited'\n"
             "    return 'allocated'\n")
    score, result, _ = grade(probe, functional("assert f() == 'limited'"), mode)
    assert score == 1, result["detail"]
    grow = "def f():\n    blocks = []\n    while True:\n        blocks.append(bytearray(1 << 20))\n"
    score, result, seconds = grade(grow, functional("assert f() == 1"), mode, timeout_s=FAST_S)
    assert score == 0 and seconds < FAST_WALL_S + MARGIN_S, result   # MemoryError at 512 MB (or the deadline, if slow)
    score, result, seconds = grade("x = bytearray(8 << 30)\ndef f():\n    return 1\n", functional("assert f() == 1"), mode)
    assert score == 0 and "MemoryError" in result["detail"], result


@pytest.mark.parametrize("mode", MODES)
def test_a_10gb_write_stops_at_the_file_size_limit(mode, tmp_path):
    needs(mode, "working directory writable")
    writer = ("import errno\ndef f():\n    chunk = b'x' * (1 << 20)\n    try:\n        with open('big', 'wb') as out:\n"
              "            for _ in range(10 * 1024):\n                out.write(chunk)\n    except OSError as e:\n"
              "        return errno.errorcode[e.errno]\n    return 'wrote 10 GB'\n")
    before = set(Path(sandbox.workdir_parent()).glob("nano-code-*"))
    score, result, seconds = grade(writer, functional("assert f() == 'wrote 10 GB'"), mode)
    assert score == 0 and seconds < FAST_WALL_S + MARGIN_S
    score, result, _ = grade(writer, functional("assert f() == 'EFBIG'"), mode)   # stopped by RLIMIT_FSIZE
    assert score == 1, result["detail"]
    assert set(Path(sandbox.workdir_parent()).glob("nano-code-*")) <= before, "the working directory is removed"


def test_many_files_fill_only_the_size_limited_directory():
    needs("bwrap" if HAVE_BWRAP else "rlimits", "nothing writable outside its directory; working directory size-limited")
    filler = ("import errno\ndef f():\n    chunk = b'x' * (1 << 20)\n    for k in range(1000):\n        try:\n"
              "            with open(f'part{k}', 'wb') as out:\n                for _ in range(8):\n"
              "                    out.write(chunk)\n        except OSError as e:\n"
              "            return errno.errorcode[e.errno], k\n    return 'wrote 8 GB'\n")
    score, result, _ = grade(filler, functional(f"assert f()[0] == 'ENOSPC' and f()[1] <= {sandbox.SANDBOX_DIR_MB // 8}"),
                             "bwrap")
    assert score == 1, result["detail"]


def test_no_private_mounts_through_a_nested_user_namespace():
    """A user namespace of its own would let a program mount a tmpfs that no size limit covers (memory)."""
    needs("bwrap" if HAVE_BWRAP else "rlimits", "nothing writable at all but its working directory (read-only "
          "without a memory cgroup)")
    program = ("import ctypes, os\ndef f():\n    libc = ctypes.CDLL(None, use_errno=True)\n"
               "    if libc.unshare(0x10000000 | 0x00020000) != 0:\n        return 'refused'\n"
               "    if libc.mount(b'none', b'/sandbox', b'tmpfs', 0, b'size=1g') != 0:\n        return 'no mount'\n"
               "    return 'mounted'\n")
    score, result, _ = grade(program, functional("assert f() == 'mounted'"), "bwrap")
    assert score == 0, result
    assert grade(program, functional("assert f() == 'refused'"), "bwrap")[0] == 1


def test_writes_and_deletes_outside_the_directory_fail(tmp_path):
    needs("bwrap" if HAVE_BWRAP else "rlimits", "nothing writable outside its directory; working directory size-limited")
    os.chmod(tmp_path, 0o777)
    canary = tmp_path / "canary.txt"
    canary.write_text("intact")
    canary.chmod(0o666)
    nonce = secrets.token_hex(4)
    targets = [str(canary), str(tmp_path / f"new-{nonce}"), f"/tmp/escape-{nonce}", f"/dev/shm/escape-{nonce}",
               str(ROOT / f"escape-{nonce}"), str(ROOT / "code_reward.py"), "/usr/escape", "/escape", "/nano/code_reward.py",
               "/nano/escape", "/dev/escape", "/proc/escape"]
    program = f"""
import os
def f():
    escaped = []
    for path in {targets!r}:
        try:
            with open(path, 'a') as out:
                out.write('pwned')
            escaped.append(path)
        except OSError:
            pass
    try:
        os.remove({str(canary)!r})
        escaped.append('removed canary')
    except OSError:
        pass
    with open('mine.txt', 'w') as out:   # its own directory works
        out.write('ok')
    return escaped if escaped else open('mine.txt').read()
"""
    score, result, _ = grade(program, functional("assert f() != 'ok'"), "bwrap")
    assert score == 0, result
    score, result, _ = grade(program, functional("assert f() == 'ok'"), "bwrap")
    assert score == 1, result["detail"]
    assert canary.read_text() == "intact"
    for path in targets[1:5] + [str(ROOT / f"escape-{nonce}")]:
        assert not os.path.exists(path), path
    assert "pwned" not in (ROOT / "code_reward.py").read_text()[-100:]


@pytest.mark.parametrize("mode", MODES)
def test_no_network_even_to_a_listener_on_localhost(mode):
    needs(mode, "no network")
    token = secrets.token_hex(8)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    server.settimeout(0.2)
    abstract = socket.socket(socket.AF_UNIX)
    abstract_name = f"\0nano-test-{token}"
    abstract.bind(abstract_name)
    abstract.listen(5)
    abstract.settimeout(0.2)
    accepted = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            for s in (server, abstract):
                try:
                    conn, _ = s.accept()
                    accepted.append(1)
                    conn.sendall(token.encode())
                    conn.close()
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    port = server.getsockname()[1]
    program = f"""
import socket
def f():
    got = []
    for family, address in ((socket.AF_INET, ('127.0.0.1', {port})), (socket.AF_UNIX, {abstract_name!r})):
        try:
            s = socket.socket(family)
            s.settimeout(1)
            s.connect(address)
            got.append(s.recv(100).decode())
        except OSError as e:
            got.append(type(e).__name__)
    return got
"""
    try:
        score, result, _ = grade(program, functional(f"assert {token!r} in f()"), mode)
        assert score == 0, result
        score, result, _ = grade(program, functional(f"assert {token!r} not in f()"), mode)
        assert score == 1, result   # it ran, and got errors instead of the token
    finally:
        stop.set()
        thread.join(2)
        server.close()
        abstract.close()
    assert not accepted, "a sandboxed program reached a listener on the host"


@pytest.mark.parametrize("mode", MODES)
def test_the_environment_is_empty(mode):
    score, result, _ = grade("import os\ndef f():\n    return dict(os.environ)\n", functional("assert f() == {}"), mode)
    assert score == 1, result["detail"]


@pytest.mark.parametrize("mode", MODES)
def test_the_parents_environment_and_memory_are_out_of_reach(mode, monkeypatch):
    needs(mode, "cannot signal other users' processes or read their environment")
    secret = "NANO-SECRET-" + secrets.token_hex(8)
    code_reward.close_pool()                        # new workers inherit the secret
    monkeypatch.setenv("NANO_TEST_SECRET", secret)
    program = """
import os
def f():
    seen = []
    try:
        pids = [p for p in os.listdir('/proc') if p.isdigit()]
    except OSError:   # the fallback's Landlock: /proc is not readable at all
        pids = []
    for pid in pids + ['self', str(os.getppid())]:
        for name in ('environ', 'cmdline'):
            try:
                blob = open(f'/proc/{pid}/{name}', 'rb').read().decode(errors='replace')
            except OSError:
                continue
            seen.append(pid)
            for part in blob.split('\\0'):
                if 'NANO-SECRET-' in part:
                    return part.split('=', 1)[-1]
    return f'not found in {len(set(seen))} processes'
"""
    try:
        score, result, _ = grade(program, functional(f"assert f() == {secret!r}"), mode)
        assert score == 0, result
        score, result, _ = grade(program, functional("assert f().startswith('not found in')"), mode)
        assert score == 1, result["detail"]
    finally:
        code_reward.close_pool()


@pytest.mark.parametrize("mode", MODES)
def test_signalling_the_parent_or_everyone_hurts_nobody(mode):
    needs(mode, "cannot signal other users' processes or read their environment")
    grade("def f():\n    return 1\n", functional("assert f() == 1"), mode)      # start the worker
    worker = grading_worker()
    program = f"""
import os, signal
def f():
    for own in (os.getppid(), 1):     # the sandbox's own init: harmless either way
        try:
            os.kill(own, signal.SIGKILL)
        except OSError:
            pass
    hits = []
    for pid in ({os.getpid()}, {worker.proc.pid}):   # the test process and the grading worker, by host pid
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.kill(pid, sig)
                hits.append(pid)
            except OSError:
                pass
    try:
        os.kill(-1, signal.SIGKILL)   # everything it may signal: only its own sandbox
    except OSError:
        pass
    return hits
"""
    score, result, seconds = grade(program, functional("assert f() != []"), mode)   # it hit something
    assert score == 0 and seconds < FAST_WALL_S + MARGIN_S, result
    score, result, _ = grade(program, functional("assert f() == []"), mode)         # it ran, and hit nothing
    assert score == 1, result["detail"]
    assert worker.proc.poll() is None and grading_worker() is worker, "the grading worker survived"
    score, _, _ = grade("def f():\n    return 1\n", functional("assert f() == 1"), mode)
    assert score == 1 and grading_worker() is worker


UNPRIVILEGED_CHECKS = r"""
import os, sys, time
sys.path.insert(0, sys.argv[1])
import code_reward as c
import sandbox
assert c.sandbox_mode("auto") == "bwrap", sandbox.PROBED
T = lambda *a: {"kind": "functional", "asserts": list(a)}


def run(program, tests, timeout_s=10.0):
    results = []
    c.score_code_batch(["```python\n" + program + "\n```"], [tests], workers=1, timeout_s=timeout_s, sandbox="bwrap",
                       results=results)
    return results[0]


bomb = "import os\ndef f():\n    while True:\n        try:\n            os.fork()\n        except OSError:\n            pass\n"
start = time.monotonic()
assert run(bomb, T("assert f() == 1"), timeout_s=2)["status"] == "timeout"
assert time.monotonic() - start < sandbox.backstop_s(2) + float(sys.argv[2])   # the item's wall cap + margin
forks = ("import os, time\ndef f():\n    n = 0\n    for _ in range(100):\n        try:\n"
         "            if os.fork() == 0:\n                time.sleep(60)\n                os._exit(0)\n"
         "            n += 1\n        except OSError:\n            break\n    return n\n")
assert run(forks, T(f"assert f() < {sandbox.MAX_PROCESSES}"))["status"] == "passed"
fill = ("import errno\ndef f():\n    for k in range(1000):\n        try:\n            open(f'p{k}', 'wb').write(b'x' * (8 << 20))\n"
        "        except OSError as e:\n            return errno.errorcode[e.errno]\n")
rw = sandbox.memory_cgroup_parent() is not None   # else the working directory is read-only (issue 31)
assert run(fill, T("assert f() == %r" % ("ENOSPC" if rw else "EROFS")))["status"] == "passed"
import socket
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(1)
reach = ("import socket\ndef f():\n    try:\n        socket.create_connection(('127.0.0.1', %d), timeout=1)\n"
         "        return 'connected'\n    except OSError as e:\n        return type(e).__name__\n") % listener.getsockname()[1]
assert run(reach, T("assert f() == 'OSError'"))["status"] == "passed"   # AF_INET is refused (issue 31)
env = "import os\ndef f():\n    return [dict(os.environ), len([p for p in os.listdir('/proc') if p.isdigit()])]\n"
assert run(env, T("assert f()[0] == {} and f()[1] <= 3"))["status"] == "passed"
writable = ("import os\ndef f():\n    ok = []\n    for d in ('/', '/dev', '/dev/shm', '/nano', '/proc', '/sandbox'):\n"
            "        try:\n            open(os.path.join(d, 'probe'), 'w').write('x')\n            ok.append(d)\n"
            "        except OSError:\n            pass\n    return ok\n")   # bwrap's own tmpfs root and /dev too
assert run(writable, T("assert f() == %r" % (["/sandbox"] if rw else [])))["status"] == "passed"
print("unprivileged sandbox ok")
"""


def test_an_unprivileged_user_gets_the_same_sandbox():
    """Most users are not root: bwrap then builds a user namespace and the runner's RLIMIT_NPROC counts only the
    sandbox's processes. Run as uid 65534 with the system Python (ours may live in a directory only root reads)."""
    python = "/usr/bin/python3"
    if not (HAVE_BWRAP and os.geteuid() == 0 and os.path.exists(python) and os.path.exists("/usr/bin/setpriv")):
        pytest.skip("needs root (to become another user), bwrap, setpriv and /usr/bin/python3")
    # the modules it imports, where that user can read them: the checkout may sit in a directory only we can enter
    readable = Path(tempfile.mkdtemp(prefix="nano-code-modules-"))
    try:
        readable.chmod(0o755)
        for module in ("code_reward.py", "sandbox.py", "workers.py", "data.py", "hub_sets.py", "protocols.py"):
            shutil.copy(ROOT / module, readable / module)
            (readable / module).chmod(0o644)
        proc = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", python, "-c",
                               UNPRIVILEGED_CHECKS, str(readable), str(MARGIN_S)], capture_output=True, text=True,
                              timeout=120, cwd="/")
    finally:
        shutil.rmtree(readable, ignore_errors=True)
    assert proc.returncode == 0 and "unprivileged sandbox ok" in proc.stdout, proc.stdout + proc.stderr
    assert not leftover_runners(uids={65534})


# ------------------------------------------------------------------------------------------------------------
# Issue 25: each class of escape, run for real in each mode it applies to
# ------------------------------------------------------------------------------------------------------------
X86_64 = platform.machine() == "x86_64"   # the raw syscall numbers below are x86_64's


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("raised", ["StopIteration", "StopAsyncIteration", "GeneratorExit", "KeyboardInterrupt",
                                    "SystemExit", "Halt", "StopIteration(1)", "BaseExceptionGroup('x', [Halt()])"])
def test_control_flow_exceptions_reach_the_tests_as_failures(mode, raised):
    """A program's exception that is not an ordinary error must not change how a test runs: StopIteration would
    end map()/filter()/iter() early and make `all(...)` true with no solution."""
    program = f"class Halt(BaseException):\n    pass\ndef f(x=0):\n    raise {raised}\n"
    for test in ("assert all(map(f, [1, 2, 3]))", "assert list(filter(f, [1])) == []",
                 "assert next(iter(f, None), 'end') == 'end'", "assert [f(x) for x in (1,)] == [] or True"):
        score, result, _ = grade(program, functional(test), mode)
        assert score == 0, (test, result)
    # an ordinary error still arrives as itself (a test may expect it)
    program = "def f(x):\n    raise KeyError(x)\n"
    assert grade(program, functional("try:\n    f(1)\nexcept KeyError:\n    pass\nelse:\n    assert False"), mode)[0] == 1


MEMORY_ROUTES = {   # each holds up to 1.5 GB outside ordinary heap memory, 16 MB at a time (RLIMIT_FSIZE)
    "memfd_fallocate": "import os\nfds = []\ndef grab(k):\n    fds.append(os.memfd_create('m'))\n"
                       "    os.posix_fallocate(fds[-1], 0, 16 << 20)\n",
    "memfd_write": "import os\nfds = []\ndef grab(k):\n    fds.append(os.memfd_create('m'))\n"
                   "    os.write(fds[-1], b'x' * (8 << 20))\n    os.write(fds[-1], b'x' * (8 << 20))\n",
    "sysv_shm": "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.shmat.restype = ctypes.c_void_p\n"
                "def grab(k):\n    sid = libc.shmget(0, 16 << 20, 0o1600)\n    if sid < 0:\n        raise OSError('shmget')\n"
                "    at = libc.shmat(sid, None, 0)\n    if at in (None, ctypes.c_void_p(-1).value):\n        raise OSError('shmat')\n"
                "    ctypes.memset(at, 1, 16 << 20)\n    libc.shmdt(ctypes.c_void_p(at))\n",
    "dev_shm_files": "def grab(k):\n    with open(f'/dev/shm/nano-grab-{k}', 'wb') as out:\n        out.write(b'x' * (16 << 20))\n",
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("route", sorted(MEMORY_ROUTES))
def test_memory_outside_the_address_space_is_bounded(mode, route):
    """RLIMIT_AS counts mappings only: memory a program holds in files (memfd, tmpfs, SysV segments) after
    unmapping them escapes it (RLIMIT_FSIZE only caps each file). Each route must stop well below the 1.5 GB it
    tries to hold: at most the size of the working directory."""
    if route == "dev_shm_files":
        needs(mode, "whole memory bounded, files it writes included")
    else:
        needs(mode, "no memory outside the address space limit (memfd, SysV shared memory refused)")
    program = MEMORY_ROUTES[route] + ("def f():\n    held = 0\n    for k in range(96):\n        try:\n"
                                      "            grab(k)\n        except (OSError, MemoryError):\n            break\n"
                                      "        held += 16\n    return held\n")
    before = set(Path("/dev/shm").glob("nano-grab-*"))
    score, result, _ = grade(program, functional(f"assert f() <= {sandbox.SANDBOX_DIR_MB}"), mode)
    assert score == 1, result
    assert set(Path("/dev/shm").glob("nano-grab-*")) <= before


SYSCALL_ATTEMPTS = r"""
import ctypes, os, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    return libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
def f():
    out = {}
    for name, family, kind in [("AF_UNIX", 1, 1), ("AF_INET", 2, 1), ("AF_INET6", 10, 1), ("AF_NETLINK", 16, 3),
                               ("AF_PACKET", 17, 3), ("AF_ALG", 38, 5), ("AF_VSOCK", 40, 1), ("AF_XDP", 44, 3),
                               ("AF_MCTP", 45, 2), ("AF_VSOCK_high_bits", (1 << 32) | 40, 1)]:
        fd = call(41, family, kind, 0)
        out[name] = "created" if fd >= 0 else "refused"
        pair = (ctypes.c_int * 2)()
        if libc.socketpair(ctypes.c_int(family & 0xFFFFFFFF), kind, 0, pair) == 0:
            out[name + " pair"] = "created"
    buffer = ctypes.create_string_buffer(256)
    for name, nr, args in [("ptrace", 101, (0, 0, 0, 0)), ("keyctl", 250, (0, -3, 1)), ("add_key", 248, (0, 0, 0, 0, -3)),
                           ("bpf", 321, (5, 0, 0)), ("userfaultfd", 323, (1,)), ("perf_event_open", 298, (0, 0, -1, -1, 0)),
                           ("unshare", 272, (0x00020000,)), ("unshare_user", 272, (0x10000000,)), ("setns", 308, (0, 0)),
                           ("mount", 165, (0, 0, 0, 0, 0)), ("io_uring_setup", 425, (1, ctypes.addressof(buffer))),
                           ("memfd_create", 319, (ctypes.addressof(buffer), 0)), ("process_vm_readv", 310, (1, 0, 0, 0, 0, 0)),
                           ("clone_newns", 56, (0x00020000 | 17, 0, 0, 0, 0)), ("shmget", 29, (0, 4096, 0o1600)),
                           ("msgget", 68, (0, 0o1600)), ("semget", 64, (0, 1, 0o1600)), ("mq_open", 240, (0, 0, 0, 0)),
                           ("kcmp", 312, (1, 1, 0, 0, 0)), ("pidfd_getfd", 438, (0, 0, 0)), ("setuid", 105, (0,))]:
        ctypes.set_errno(0)
        result = call(nr, *args)
        if name == "clone_newns" and result == 0:
            os._exit(0)
        out[name] = "refused" if result < 0 and ctypes.get_errno() in (1, 38, 97) else f"ran ({result}, errno {ctypes.get_errno()})"
    return out
"""


@pytest.mark.skipif(not X86_64, reason="raw x86_64 system call numbers")
@pytest.mark.parametrize("mode", MODES)
def test_only_an_allowlist_of_system_calls_and_socket_families(mode):
    """The network namespace does not cover every socket family (AF_VSOCK reaches the hypervisor), and a
    program needs none of the kernel's debugging, key, BPF, io_uring or namespace interfaces: refused (EPERM,
    ENOSYS or EAFNOSUPPORT), whatever their number, while what programs use keeps working. AF_INET(6) too since
    issue 31: TCP buffers grow to megabytes per socket by themselves, and in bwrap there is nothing to reach."""
    allowed = {"AF_UNIX", "AF_UNIX pair"}
    score, result, _ = grade(SYSCALL_ATTEMPTS, functional(
        "got = f()\n"
        f"assert {{k for k, v in got.items() if v != 'refused'}} == {allowed!r}, got"), mode)
    assert score == 1, result["detail"]
    assert grade("import subprocess, sys, threading\ndef f():\n    t = threading.Thread(target=print)\n    t.start()\n"
                 "    t.join()\n    return subprocess.run([sys.executable, '-c', 'print(6 * 7)'], capture_output=True,"
                 " text=True).stdout\n", functional("assert f() == '42\\n'"), mode)[0] == 1


@pytest.mark.skipif(not X86_64, reason="x86_64's other system call ABIs")
@pytest.mark.parametrize("mode", MODES)
def test_system_calls_through_another_abi_kill_the_program(mode):
    """An allowlist by number is only as good as its architecture check: the same call through x32 numbering
    or i386's int 0x80 must not slip past the filter's rules (libseccomp kills the process instead)."""
    x32 = ("import ctypes\nlibc = ctypes.CDLL(None)\nlibc.syscall.restype = ctypes.c_long\ndef f():\n"
           "    return libc.syscall(ctypes.c_long(41 | 0x40000000), ctypes.c_long(40), ctypes.c_long(1), ctypes.c_long(0))\n")
    i386 = ("import ctypes, mmap\ndef f():\n    m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
            "    m.write(bytes([0xb8, 0x14, 0, 0, 0, 0xcd, 0x80, 0xc3]))   # mov eax, 20 (getpid); int 0x80; ret\n"
            "    return ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))()\n")
    for program in (x32, i386):
        score, result, _ = grade(program, functional("assert f() >= 0"), mode)
        assert score == 0 and result["status"] == "crash", result


@pytest.fixture
def setuid_copies(tmp_path_factory):
    """Root-owned setuid copies of `id` and `sleep` in a directory the sandbox uid can reach."""
    if os.geteuid() != 0:
        pytest.skip("needs root (to make setuid binaries)")
    folder = Path(tempfile.mkdtemp(prefix="nano-setuid-"))
    folder.chmod(0o755)
    copies = {}
    for name in ("id", "sleep"):
        copy = folder / f"suid-{name}"
        shutil.copy(shutil.which(name), copy)
        copy.chmod(0o4755)
        copies[name] = str(copy)
    yield copies
    shutil.rmtree(folder, ignore_errors=True)


def test_the_fallback_gains_no_privileges_and_leaves_no_setuid_process(setuid_copies):
    """The fallback as root: a child that leaves the process group and execs a setuid binary must neither run
    as root (no_new_privs; with Landlock it cannot even execute a file outside the system's and Python's
    directories) nor outlive the item (processes are found by their real uid)."""
    mode = "rlimits"
    score, result, _ = grade("import subprocess\ndef f():\n    try:\n        return subprocess.run([%r, '-u'], "
                             "capture_output=True, text=True).stdout.strip()\n    except PermissionError:\n"
                             "        return 'refused'\n" % setuid_copies["id"], functional("assert f() != '0'"), mode)
    assert score == 1, result["detail"]
    escaper = ("import os\ndef f():\n    if os.fork() == 0:\n        os.setsid()\n        try:\n"
               "            os.execv(%r, ['sleep', '60'])\n        finally:\n            os._exit(0)\n"
               "    return 1\n" % setuid_copies["sleep"])
    assert grade(escaper, functional("assert f() == 1"), mode)[0] == 1
    time.sleep(0.3)
    note_our_workers()
    ours = {sandbox.SANDBOX_UID_BASE + pid for pid in OUR_WORKERS}   # not other checkouts' tests on this machine
    survivors = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError, StopIteration):
            status = Path(f"/proc/{pid}/status").read_text()
            uid = int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep\x0060") and uid in ours:
                survivors.append(pid)
    assert not survivors, "the setuid child survived the grade"


def sysv_objects():
    return {kind: Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:] for kind in ("shm", "sem", "msg")}


@pytest.mark.parametrize("mode", MODES)
def test_sysv_ipc_does_not_outlive_the_program(mode):
    """Shared memory segments, semaphores and message queues stay in the kernel after their creator dies."""
    if not Path("/proc/sysvipc/shm").exists():
        pytest.skip("no /proc/sysvipc")
    before = sysv_objects()
    program = ("import ctypes\nlibc = ctypes.CDLL(None)\ndef f():\n"
               "    return [libc.shmget(0, 1 << 20, 0o1600), libc.semget(0, 1, 0o1600), libc.msgget(0, 0o1600)]\n")
    grade(program, functional("assert f()"), mode)
    assert sysv_objects() == before


@pytest.mark.parametrize("mode", MODES)
def test_a_program_cannot_choose_its_statistics_bucket(mode):
    """"timeout" is what the trusted side measured (the clock, the CPU time it used), not the exit status the
    program picked: killing itself with SIGXCPU or exiting with 128 + SIGXCPU is a crash (or, under bwrap, where
    the runner is its PID namespace's init and a signal it sends itself is ignored, a plain failure)."""
    warm(mode)
    fakes = ["import os, signal\ndef f():\n    os.kill(os.getpid(), signal.SIGXCPU)\n",
             "import os\ndef f():\n    os._exit(128 + 24)\n",
             "import os, signal\ndef f():\n    os.kill(os.getpid(), signal.SIGKILL)\n"]
    stats, results = {}, []
    score_code_batch([fenced(p) for p in fakes], [functional("assert f() == 1")] * len(fakes), workers=1,
                     timeout_s=SLOW_S, stats=stats, results=results, sandbox=mode)
    assert results[1]["status"] == "crash" and stats["code_timeouts"] == 0, results
    assert all(r["status"] in ("crash", "failed") for r in results), results
    stdio = {"kind": "stdio", "cases": [{"input": "", "output": "1"}]}
    stats = {}
    score_code_batch([fenced("import os, signal\nos.kill(os.getpid(), signal.SIGXCPU)\n"), fenced("import os\nos._exit(152)\n")],
                     [stdio] * 2, workers=1, stats=stats, sandbox=mode)
    assert stats["code_timeouts"] == 0, stats
    # burning the CPU allowance is a timeout, whatever the wall clock
    stats = {}
    score_code_batch([fenced("def f():\n    while True:\n        pass\n")], [functional("assert f() == 1")], workers=1,
                     timeout_s=1.0, stats=stats, sandbox=mode)
    assert stats["code_timeouts"] == 1, stats


@pytest.mark.parametrize("mode", MODES)
def test_a_crafted_reply_is_decoded_within_the_items_deadline(mode):
    """Replies are one line of at most MAX_REPLY_BYTES; decoding the worst of them (millions of tiny elements)
    must end within the item's deadline, without the grading worker being killed at deadline + grace."""
    warm(mode)
    for body in ("b'[' + b'0,' * 4_000_000 + b'0]'", "b'[' + b'{\"tuple\": []},' * 700_000 + b'0]'",
                 "b'{\"dict\": [' + b'[0, 0],' * 1_000_000 + b'[0, 0]]}'", "b'[' * 4_000_000"):
        program = ("import os, sys, time\ndef f():\n"
                   "    fd = int([a for a in sys.argv if ',' in a and a.replace(',', '').isdigit()][0].split(',')[1])\n"
                   f"    os.write(fd, {body} + b'\\n')\n    time.sleep(60)\n")
        score, result, seconds = grade(program, functional("assert f() == 1"), mode, timeout_s=FAST_S)
        assert score == 0 and not result["detail"].startswith("grading worker killed"), result
        assert seconds < FAST_WALL_S + MARGIN_S, (body, result)


def test_training_refuses_to_run_code_without_the_full_sandbox(monkeypatch, capsys):
    """require_sandbox: the full sandbox, or a refusal that names the flag and the risk; with the flag, the
    fallback, said out loud; every result says which mode graded it."""
    assert sandbox.SANDBOX == "bwrap"   # the library default refuses rather than falls back
    if HAVE_BWRAP:
        assert code_reward.require_sandbox(allow_fallback=False) == "bwrap"
    monkeypatch.setattr(sandbox, "SANDBOX", "bwrap")
    monkeypatch.setitem(sandbox.PROBED, "bwrap", (False, "pretend bwrap is broken"))
    with pytest.raises(SystemExit, match="allow_unsafe_code_sandbox.*reference solutions"):
        code_reward.require_sandbox(allow_fallback=False)
    results = []
    assert score_code_batch([fenced("def f():\n    return 1\n")], [functional("assert f() == 1")], results=results,
                            stats=(stats := {})) == [0.0]
    assert results[0]["status"] == "refused" and stats["sandbox_refusals"] == 1   # never a silent fallback
    assert code_reward.require_sandbox(allow_fallback=True) == "rlimits"
    assert "WARNING" in capsys.readouterr().out
    results = []
    assert score_code_batch([fenced("def f():\n    return 1\n")], [functional("assert f() == 1")], results=results) == [1.0]
    assert results[0]["sandbox"] == "rlimits"


# ------------------------------------------------------------------------------------------------------------
# Reward hacking: none of these passes without passing the tests
# ------------------------------------------------------------------------------------------------------------
ADD_TESTS = functional("assert add(2, 3) == 5", "assert add(-7, 10) == 3", "assert abs(add(0.1, 0.2) - 0.3) < 1e-9",
                       entry_point="add")
WRONG_ADD = "def add(a, b):\n    return 0\n"
HACKS = {
    "sys.exit(0) first": "import sys\nsys.exit(0)\n" + WRONG_ADD,
    "os._exit(0) first": "import os\nos._exit(0)\n" + WRONG_ADD,
    "exit inside the function": "import sys\ndef add(a, b):\n    sys.exit(0)\n",
    "os._exit inside the function": "import os\ndef add(a, b):\n    os._exit(0)\n",
    "KeyboardInterrupt inside": "def add(a, b):\n    raise KeyboardInterrupt\n",
    "print what a harness looks for": "print('All tests passed'); print('PASSED'); print({'value': 5})\n"
                                      "print(\"{'ready': True}\")\n" + WRONG_ADD,
    "redefine builtins": "import builtins\nbuiltins.abs = lambda x: 0\nbuiltins.AssertionError = KeyError\n"
                         "builtins.isinstance = lambda *a: True\nabs = lambda x: 0\n" + WRONG_ADD,
    "redefine harness names": "check = lambda *a: None\ncandidate = None\nProgramName = None\nfrom_literal = eval\n"
                              "_check_functional = None\n__builtins__ = {}\n" + WRONG_ADD,
    "always-equal object": "class Eq:\n    __eq__ = lambda self, other: True\n    __ne__ = lambda self, other: False\n"
                           "    __lt__ = __le__ = __gt__ = __ge__ = __eq__\n    __sub__ = __rsub__ = lambda self, o: 0\n"
                           "    __abs__ = lambda self: 0\n    __hash__ = object.__hash__\n"
                           "def add(a, b):\n    return Eq()\n",
    "int subclass that equals everything": "class E(int):\n    def __eq__(self, other):\n        return True\n"
                                           "    __hash__ = int.__hash__\ndef add(a, b):\n    return E(0)\n",
    "forge replies on every descriptor": "import os, threading\n"
                                         "def spam():\n    for _ in range(200):\n        for fd in range(3, 40):\n"
                                         "            try:\n                os.write(fd, b\"{'value': 5}\\n{'ready': True}\\n\")\n"
                                         "            except OSError:\n                pass\n"
                                         "spam()\nthreading.Thread(target=spam, daemon=True).start()\n" + WRONG_ADD,
    "junk and code on the reply pipe": "import os\nfor fd in range(3, 40):\n    try:\n"
                                       "        os.write(fd, b\"{'value': __import__('os').getpid()}\\n\")\n"
                                       "    except OSError:\n        pass\n" + WRONG_ADD,
    "look for expected values in the caller": "import gc, sys\ndef add(a, b):\n    f = sys._getframe(1)\n"
                                              "    seen = [o for o in gc.get_objects() if isinstance(o, int) and o == 5]\n"
                                              "    return f.f_locals.get('expected', 0)\n",
}


@pytest.mark.parametrize("name", sorted(HACKS))
def test_reward_hacks_score_zero(name):
    mode = MODES[0]
    score, result, seconds = grade(HACKS[name], ADD_TESTS, mode)
    assert score == 0, result
    assert seconds < FAST_WALL_S + MARGIN_S
    assert grade("def add(a, b):\n    return a + b\n", ADD_TESTS, mode)[0] == 1   # and the next item is fine


def test_harness_name_hacks_on_a_check_candidate_test():
    tests = functional("def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(1, 1) == 2\n\n"
                       "check(add)\n", entry_point="add", prelude="def add(a, b):\n    '''Add two numbers.'''\n")
    assert grade("def add(a, b):\n    return a + b\n", tests, MODES[0])[0] == 1
    for program in ("def check(candidate):\n    return True\n" + WRONG_ADD,
                    "import builtins\nbuiltins.check = lambda c: None\n" + WRONG_ADD,
                    "add = None\n",                       # the prelude's stub (returns None) stays: it fails
                    "def candidate(a, b):\n    return a + b\n"):
        assert grade(program, tests, MODES[0])[0] == 0, program


def test_reading_the_tests_from_disk_finds_nothing(tmp_path):
    needs("bwrap" if HAVE_BWRAP else "rlimits", "host files invisible (tests, datasets, home)")
    secret = "NANO-SECRET-" + secrets.token_hex(8)
    tests = functional(f"assert get() == {secret!r}", entry_point="get")
    (tmp_path / "tests.json").write_text(json.dumps(tests))          # on the host, where a harness might leave it
    program = f"""
import os, sys
SKIP = ('/proc', '/sys', '/dev', '/usr', {sys.base_prefix!r})
def get():
    scanned = 0
    for path in ['/proc/self/cmdline', '/proc/1/cmdline'] + [f'/proc/self/fd/{{fd}}' for fd in range(64)]:
        try:
            if 'NANO-SECRET-' in open(path, errors='replace').read(1 << 20):
                return 'found in ' + path
        except (OSError, ValueError):
            pass
    for top in ['/', {str(tmp_path)!r}, {str(ROOT)!r}, os.path.expanduser('~')]:
        for folder, dirs, files in os.walk(top):
            if folder.startswith(SKIP):
                dirs[:] = []
                continue
            for name in files:
                try:
                    text = open(os.path.join(folder, name), errors='replace').read(4 << 20)
                except OSError:
                    continue
                scanned += 1
                at = text.find('NANO-SECRET-')
                if at >= 0:
                    return text[at:at + 28]
    return f'nothing in {{scanned}} files'
"""
    score, result, _ = grade(program, tests, "bwrap", timeout_s=5.0)
    assert score == 0, result
    assert grade(program, functional("assert get().startswith('nothing in')", entry_point="get"), "bwrap",
                 timeout_s=5.0)[0] == 1


def test_a_huge_return_value_fails_without_hurting_the_checker():
    score, result, _ = grade("def f():\n    return 'x' * (100 << 20)\n", functional("assert len(f()) > 0"), MODES[0],
                             timeout_s=5.0)
    assert score == 0 and result["status"] != "passed", result   # too large, its memory limit, or slow
    assert grade("def f():\n    return 'x' * 1000\n", functional("assert len(f()) == 1000"), MODES[0])[0] == 1


# ------------------------------------------------------------------------------------------------------------
# What legitimate programs may do
# ------------------------------------------------------------------------------------------------------------
def test_legitimate_program_features():
    mode = MODES[0]
    # expected exceptions keep their type; objects of the program's own classes go back and forth by handle
    tests = functional("try:\n    root(-1)\n    ok = False\nexcept ValueError:\n    ok = True\nassert ok",
                       "assert root(9) == 3",
                       "assert area([Box(1, 2), Box(3, 4)]) == 14",
                       "assert kinds((1, 'a', 2.0), int) == [1]",
                       "assert list(gen(3)) == [0, 1, 2] and gen(3) != [0, 1, 2]",
                       "assert math.isclose(root(2) ** 2, 2)", entry_point="root")
    program = ("import math\nclass Box:\n    def __init__(self, w, h):\n        self.w, self.h = w, h\n"
               "def root(x):\n    if x < 0:\n        raise ValueError('negative')\n    return math.isqrt(x) if x == 9 else math.sqrt(x)\n"
               "def area(boxes):\n    return sum(b.w * b.h for b in boxes)\n"
               "def kinds(items, t):\n    return [i for i in items if type(i) is t]\n"
               "def gen(n):\n    yield from range(n)\n"
               "if __name__ == '__main__':\n    input('a __main__ block does not run')\n")
    score, result, _ = grade(program, tests, mode)
    assert score == 1, result["detail"]


@pytest.mark.parametrize("mode", MODES)
def test_stdio_problems(mode):
    tests = {"kind": "stdio", "cases": [{"input": "2 3\n", "output": "5\n"}, {"input": "10 -4", "output": "6"}]}
    assert grade("a, b = map(int, input().split())\nprint(a + b)\n", tests, mode)[0] == 1
    assert grade("a, b = map(int, input().split())\nprint(a + b, ' ')\nprint()\n", tests, mode)[0] == 1  # whitespace
    assert grade("import sys\na, b = map(int, input().split())\nprint(a + b)\nsys.exit(0)\n", tests, mode)[0] == 1
    assert grade("a, b = map(int, input().split())\nprint(a - b)\n", tests, mode)[0] == 0
    assert grade("a, b = map(int, input().split())\nprint(a + b)\nraise SystemExit(3)\n", tests, mode)[0] == 0
    assert grade("a, b = map(int, input().split())\nprint(a + b)\n1 / 0\n", tests, mode)[0] == 0
    assert grade("print(5)\n", tests, mode, partial=True)[0] == 0.5


def test_partial_credit_is_off_by_default():
    tests = functional("assert f(1) == 1", "assert f(2) == 4", "assert f(3) == 10", entry_point="f")
    program = "def f(x):\n    return x * x\n"
    assert grade(program, tests, MODES[0])[0] == 0
    assert grade(program, tests, MODES[0], partial=True)[0] == pytest.approx(2 / 3)


def test_batch_stats_count_timeouts_crashes_and_refusals(monkeypatch):
    tests = functional("assert f() == 1", entry_point="f")
    responses = [fenced("def f():\n    return 1\n"), fenced("def f():\n    return 2\n"),
                 fenced("def f():\n    while True:\n        pass\n"), fenced("import os\ndef f():\n    os._exit(3)\n"),
                 fenced("import ctypes\ndef f():\n    ctypes.string_at(0)\n"), "no code here"]   # a real segfault
    stats, results = {}, []
    scores = score_code_batch(responses, [tests] * len(responses), workers=2, timeout_s=4.0, stats=stats,
                              results=results)
    assert scores == [1, 0, 0, 0, 0, 0]
    assert [r["status"] for r in results] == ["passed", "failed", "timeout", "crash", "crash", "no_program"]
    assert stats == {"code_timeouts": 1, "code_crashes": 2, "sandbox_refusals": 0, "code_no_program": 1,
                     "code_grader_errors": 0}
    # a sandbox that cannot start refuses (never runs the program some weaker way)
    monkeypatch.setitem(sandbox.PROBED, "bwrap", (False, "pretend bwrap is broken"))
    stats = {}
    assert score_code_batch(responses[:2], [tests] * 2, sandbox="bwrap", stats=stats) == [0, 0]
    assert stats["sandbox_refusals"] == 2
    # in a process of its own: the item's clock charges its process's CPU and reaped children, and this session's
    # background jobs (tests/background_jobs.py) are this process's children
    probe = ("import json, sys\nimport code_reward, sandbox\nsandbox.SANDBOX_PYTHON = '/nonexistent/python'\n"
             "sandbox.PROBED['bwrap'] = (False, 'pretend bwrap is broken')\n"
             "print(code_reward._run_tests('def f():\\n    return 1\\n', json.loads(sys.argv[1]), 10.0, sys.argv[2], "
             "False)['status'])")
    proc = subprocess.run([sys.executable, "-c", probe, json.dumps(tests), MODES[0]], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout.strip() == "refused", proc.stdout + proc.stderr[-3000:]


@pytest.mark.parametrize("mode", MODES)
def test_a_late_checker_is_killed_and_replaced(mode):
    """Trusted test code that never ends: Python code stops at the item's deadline (the worker's alarm); C code
    that ignores signals is ended by the scorer, which kills the worker and cleans up its sandbox itself."""
    program = fenced("import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\ndef f():\n    return 1\n")
    before = set(Path(sandbox.workdir_parent()).glob("nano-code-*"))
    code_reward.close_pool()
    warm(mode)
    worker = grading_worker()
    for hang, killed in [("while True:\n    pass", False), ("sum(range(10 ** 12))", True)]:
        stats, results = {}, []
        start = time.monotonic()
        scores = score_code_batch([program], [functional(hang, entry_point="f")], workers=1, timeout_s=3.0,
                                  stats=stats, results=results, sandbox=mode)
        assert scores == [0] and stats["code_timeouts"] == 1, results
        assert results[0]["detail"].startswith("grading worker killed") == killed, results
        assert (grading_worker() is worker) != killed
        assert time.monotonic() - start < sandbox.pool_limits(3.0)[1] + \
            (code_reward.WORKER_GRACE_S if killed else 0) + MARGIN_S
        assert score_code_batch([fenced("def f():\n    return 1\n")], [functional("assert f() == 1")], workers=1,
                                sandbox=mode) == [1]
        if code_reward.sandbox_guarantees(mode)["runs as an unprivileged uid of its own; process count limited; "
                                                "every process reaped"]:
            assert not leftover_runners()   # the child that left the process group too
        assert set(Path(sandbox.workdir_parent()).glob("nano-code-*")) <= before


def test_bad_tests_are_refused_with_the_field_named():
    with pytest.raises(ValueError, match=r"item 1: field 'tests.cases\[0\].output'"):
        score_code_batch(["x", "y"], [functional("assert True"), {"kind": "stdio", "cases": [{"input": "", "output": 1}]}])


def test_cli_describes_the_sandbox_and_grades_a_file(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "code_reward.py"), "--describe"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and f"sandbox mode: {MODES[0]}" in proc.stdout and "[x] empty environment" in proc.stdout
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"response": fenced(p), "tests": functional("assert f() == 1")}) + "\n"
                            for p in ("def f():\n    return 1\n", "def f():\n    return 0\n")))
    proc = subprocess.run([sys.executable, str(ROOT / "code_reward.py"), str(rows)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and "2 rows, mean reward 0.5000" in proc.stdout, proc.stderr


# ------------------------------------------------------------------------------------------------------------
# The reward is chosen by the data; train.py and eval.py on code
# ------------------------------------------------------------------------------------------------------------
def test_dispatcher_grades_each_row_by_its_data():
    import reward
    assert reward.score_code_batch is code_reward.score_code_batch
    math_row = data.load_dataset("math500")[0]
    code_row = data.load_dataset("humaneval")[0]
    responses = [f"\\boxed{{{math_row['answer']}}}", fenced(code_row["solution"]), "\\boxed{nope}", "```python\npass\n```"]
    stats = {}
    scores = reward.score_problems(responses, [math_row, code_row, math_row, code_row], workers=2, stats=stats,
                                   timeout_s=60.0)   # generous: the math workers' first start imports sympy
    assert scores == [1.0, 1.0, 0.0, 0.0]
    assert stats["code_timeouts"] == 0 and stats["timeouts"] == 0


class ScriptedCode:
    """The session's real engine, except that each response's TEXT is replaced: even samples of a group by the
    reference program of the problem in the prompt, odd ones by a program that fails. The loop then has to route
    every response to its own problem's tests for the rewards to come out right."""

    def __init__(self, engine, problems):
        self.engine, self.problems = engine, problems

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def generate(self, prompt_token_ids, n=1, **kwargs):
        samples = self.engine.generate(prompt_token_ids, n=n, **kwargs)
        for i, ids in enumerate(prompt_token_ids):
            prompt = self.engine.tokenizer.decode(ids)
            solution = next(p["solution"] for p in self.problems if p["problem"] in prompt)
            for j in range(n):
                samples[i * n + j].text = fenced(solution if j % 2 == 0 else "def nothing():\n    pass\n")
                samples[i * n + j].finish_reason = "stop"  # a complete program (truncated responses earn 0)
        return samples


def test_train_on_mbpp_and_eval_on_humaneval(vllm_engine, tiny_model_path, tmp_path):
    """A short real run on MBPP with the code template: the code reward runs inside the loop (half of each group
    is the problem's reference program: reward exactly 0.5) and periodic eval on HumanEval; then eval.py on a few
    HumanEval problems with the plain tiny model (random text: no program, pass@k 0)."""
    import eval as evaluation
    import train
    out = tmp_path / "code_run"
    scripted = ScriptedCode(vllm_engine, data.load_dataset("mbpp_train") + data.load_dataset("humaneval"))
    train.main([*TOY_FLAGS, "--model", tiny_model_path, "--train_data", "mbpp_train", "--template", "code",
                "--out_dir", str(out), "--max_steps", "2", "--batch_size", "4", "--group_size", "2",
                "--max_response_len", "16", "--eval_every", "2", "--eval_data", "humaneval", "--eval_limit", "2",
                "--contamination_check", "1", "--code_timeout_s", "10"], engine=scripted)
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    for m in metrics:
        assert m["reward/mean"] == 0.5 and m["reward/equal_group_frac"] == 0
        assert m["reward/code_no_program"] == m["reward/code_timeouts"] == m["reward/sandbox_refusals"] == 0
        assert m["policy/trained_frac"] == 1 and m["policy/grad_norm"] > 0
    assert metrics[-1]["eval/humaneval"] == 1.0   # eval_k 1: sample 0, the reference program
    results = evaluation.main(["--model", "unused", "--benchmarks", "humaneval", "--limit", "3", "--k", "2",
                               "--max_tokens", "16", "--template", "code", "--out", str(tmp_path / "eval"),
                               "--temperature", "1.0"], engine=vllm_engine)
    summary = results["humaneval"]
    assert summary["problems"] == 3 and {"avg@2", "pass@1", "pass@2"} <= set(summary) and "maj@2" not in summary
    rows = [json.loads(line) for line in (tmp_path / "eval" / "humaneval" / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and all(r["correct"] is False and r["gold"] is None for r in rows)
    assert data.CODE_INSTRUCTION in rows[0]["prompt"] and "HumanEval" not in rows[0]["prompt"]


def test_train_and_eval_refuse_code_without_the_full_sandbox(warm_model_path, tmp_path, monkeypatch):
    """Issue 25, class 6 in the scripts themselves: with the full sandbox broken, train.py and eval.py stop before
    loading a model, naming the flag and the risk; they never grade code with the fallback unasked."""
    import eval as evaluation
    import train
    monkeypatch.setitem(sandbox.PROBED, "bwrap", (False, "pretend bwrap is broken"))
    with pytest.raises(SystemExit, match="allow_unsafe_code_sandbox"):
        train.main([*TOY_FLAGS, "--model", warm_model_path, "--train_data", "mbpp_train", "--template", "code",
                    "--out_dir", str(tmp_path / "run")])
    with pytest.raises(SystemExit, match="allow_unsafe_code_sandbox"):
        train.main([*TOY_FLAGS, "--model", warm_model_path, "--eval_data", "humaneval", "--out_dir",
                    str(tmp_path / "run2")])   # math training, code evaluation: refused as well
    with pytest.raises(SystemExit, match="allow_unsafe_code_sandbox"):
        evaluation.main(["--model", "unused", "--benchmarks", "humaneval", "--template", "code"])


@pytest.mark.parametrize("mode", MODES)
def test_replies_that_cost_the_checker_c_time_end_at_the_deadline(mode):
    """Red-team finds (issue 25, "replies bounded by the item's deadline"): a reply whose set members all share one
    hash costs O(n^2) to build, and a reply range(2 ** 62) makes a test's sum() run for ever -- both in C, where the
    alarm cannot reach. Sets and dicts are now built one member at a time (the alarm stops it at the deadline) and
    a range is no longer than an iterator may be: the item ends at its deadline and the worker is not killed."""
    colliding = fenced("import sys\nP = 2 ** 61 - 1\ndef f():\n    return 1\n"
                       "def forged(value, _depth=0):\n"
                       "    return '{\"set\": [' + ','.join(str(k * P) for k in range(150000)) + ']}'\n"
                       "sys.modules['__main__'].to_literal = forged\n")
    huge_range = fenced("def f():\n    return range(2 ** 62)\n")
    warm(mode)
    worker = grading_worker()
    for program, test in ((colliding, "assert f() == {1}"), (huge_range, "assert sum(f()) == 9")):
        results, start = [], time.monotonic()
        assert score_code_batch([program], [functional(test)], workers=1, timeout_s=3.0, results=results,
                                sandbox=mode) == [0], results
        assert not results[0].get("detail", "").startswith("grading worker killed"), results
        assert time.monotonic() - start < sandbox.backstop_s(3.0) + MARGIN_S, results
    assert grading_worker() is worker
