"""Killable worker processes with a hard per-item deadline: the one pool both graders use.

A grader must never hang or die on what a model wrote (a sympy expression that takes minutes, a program whose
checker gets stuck), so each item runs in a persistent worker process that is SIGKILLed and replaced when the
item is late. Workers are plain `python -c` children (no fork of a parent that holds vLLM threads, and no
re-import of the caller's __main__ as multiprocessing's spawn does), with an address-space limit.

Verdicts cannot be forged, read or reordered, in any sandbox mode (sandbox.py runs hostile programs as children
of these workers; in its fallback run by an ordinary user they even share the workers' uid):
- The channel is one AF_UNIX socketpair per worker, not pipes: a pipe can be reopened through /proc/PID/fd/N by a
  process of the same uid, a socket cannot (ENXIO); pidfd_getfd, ptrace and the like are refused by the sandbox.
- Workers are not dumpable (prctl PR_SET_DUMPABLE 0): their /proc/PID/{fd,mem,environ,...} belong to root.
- Each request carries a fresh random key (128 bits) that only the pool and that worker hold; every message about
  the item (notes, the result) carries it back. A message without it (a forged line, junk, another item's answer)
  makes the item ("forged", why), never paid, its worker killed and replaced (its authentic notes clean up).
- Workers take no semantics from the environment: `python -I -S` (no PYTHON* variable, user site, sitecustomize
  or .pth code), the pool's sys.path passed explicitly minus every directory another uid could change
  (safe_to_import_from: a sandbox's uid could plant a module there), and only PATH, TMPDIR and the locale.
  The module may define worker_start(), run once before "ready".
Each item is charged its own time: the wall clock since it was sent and, when the caller gives CPU limits, the
CPU time of the worker's whole process tree since then (tree_cpu_s). Past its limit the worker's descendants are
SIGKILLed; past the limit + grace the worker itself (descendants first), on_kill(notes) cleans up, and only then
is the worker replaced (a replacement never runs beside what its predecessor's item left). Where a program runs
as the trainer's own uid without Landlock (sandbox.py's unsafe fallback), it is that user: no channel helps.

Wire format, one JSON object per line:
    parent -> worker   {"op": name, "args": [...], "key": k}    op: a name in the module's WORKER_OPS
    worker -> parent   {"ready": true}                          once, after the module's imports
                       {"note": value, "key": k}                any number, while an item runs (see note())
                       {"result": value, "key": k} | {"error": str, "key": k}     one per item

    pool = get_pool("reward", memory_limit_bytes=4 << 30)
    outcomes = pool.run("op_name", [args, ...], workers=2, kill_after_s=10.0, on_kill=cleanup)
    # outcomes[k] = ("ok", result) | ("timeout", None) | ("error", why) | ("forged", why); on_kill(notes) after a kill
    # per item: kill_after_s=[...], cpu_after_s=[...], grace_s=3.0; notes {"limits": [cpu_s, wall_s]} narrow them,
    # {"cleaning": true/false} suspend them while the worker removes what the item left (cleanup_s more)
"""
import contextlib
import ctypes
import importlib
import json
import os
import resource
import secrets
import select
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

STARTUP_TIMEOUT_S = 120.0   # a worker's imports (sympy: ~0.5 s, much longer on a loaded machine) are not an item's time
POLL_S = 0.05               # how often the parent looks at the clock while every worker is busy
KEY_BYTES = 16              # the per-item key (random, never shown to a program)
PR_SET_DUMPABLE = 4
TICKS_PER_S = os.sysconf("SC_CLK_TCK")   # the unit of /proc/PID/stat's CPU times


# ------------------------------------------------------------------------------------------------------------
# Worker side
# ------------------------------------------------------------------------------------------------------------
_WORKER = {"channel": None, "key": None}   # in a worker: its channel's descriptor, and the current item's key


def _reply(message):
    data = (json.dumps(message) + "\n").encode()
    while data:
        data = data[os.write(_WORKER["channel"], data):]


def note(value):
    """Worker side: tell the parent something about the item in progress (e.g. a sandbox it started, so that
    the parent can clean up after it if it has to kill this worker). A no-op outside a worker."""
    if _WORKER["key"]:
        _reply({"note": value, "key": _WORKER["key"]})


def serve(module_name, memory_limit_bytes):
    """Worker loop: import `module_name`, then run {"op", "args", "key"} requests one at a time until the channel
    closes."""
    # not dumpable first: from here on no process of this uid can open our descriptors or our memory in /proc
    if ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise SystemExit("workers.py: prctl(PR_SET_DUMPABLE, 0) failed")
    # the channel (the socket on fd 0 and 1) moves to a private, non-inheritable descriptor; 0 and 1 become
    # /dev/null and stderr, so that neither a stray print nor a child started without explicit stdio can touch it
    _WORKER["channel"] = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))
    except (ValueError, OSError):
        pass
    module = importlib.import_module(module_name)
    ops = module.WORKER_OPS
    if hasattr(module, "worker_start"):
        module.worker_start()
    _reply({"ready": True})
    buffer = b""
    while True:
        while b"\n" not in buffer:
            chunk = os.read(_WORKER["channel"], 1 << 16)
            if not chunk:   # the parent is gone
                os._exit(0)
            buffer += chunk
        line, buffer = buffer.split(b"\n", 1)
        request = json.loads(line)
        _WORKER["key"] = request["key"]
        try:
            reply = {"result": ops[request["op"]](*request["args"])}
        except Exception as exc:  # noqa: BLE001 -- a grader bug fails its item, never the batch
            try:
                reply = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            except Exception:  # noqa: BLE001 -- its message cannot be made (an int past the int-to-str limit)
                reply = {"error": type(exc).__name__}
        reply["key"], _WORKER["key"] = _WORKER["key"], None
        try:
            _reply(reply)
        except (BrokenPipeError, ConnectionResetError):   # the parent is gone
            os._exit(0)


# ------------------------------------------------------------------------------------------------------------
# Parent side
# ------------------------------------------------------------------------------------------------------------
WORKER_ENVIRONMENT = ("PATH", "TMPDIR", "LANG", "LC_ALL")   # all a worker inherits (no LD_PRELOAD, no PYTHON*)


def safe_to_import_from(folder):
    """May a worker import from this sys.path entry? Only if no other uid can change what it finds there: the
    entry exists, and it and every directory above it are owned by root or by this uid and writable by neither
    group nor others -- except a sticky directory above it (/tmp), whose children others cannot replace. Not
    /tmp itself when the trainer was started there with `python -c` (a planted decimal.py paid wrong
    LiveCodeBench programs), not an entry that does not exist, and not one a sandbox's uid made (a module planted
    in a missing PYTHONPATH entry under /tmp ran as root in a replacement worker). Symlinks are checked where
    they sit and where they lead."""
    def unchangeable(path, resolved):
        parts = path.split("/")
        for k in range(1, len(parts) + 1):
            here = "/".join(parts[:k]) or "/"
            try:
                st = os.stat(here) if resolved else os.lstat(here)
            except OSError:
                return False
            writable = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not stat.S_ISLNK(st.st_mode)   # links: 0777
            if st.st_uid not in (0, os.geteuid()) or writable and (k == len(parts) or not st.st_mode & stat.S_ISVTX):
                return False
        return True
    folder = os.path.abspath(folder)
    return unchangeable(folder, False) and unchangeable(os.path.realpath(folder), True)


def _stat(pid):
    """(parent pid, CPU seconds: user + system of the process and of the children it reaped) from /proc."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return int(fields[1]), sum(int(x) for x in fields[11:15]) / TICKS_PER_S


def process_tree(pid, waits=False):
    """{pid: (parent pid, CPU seconds)} of process `pid` and every live process below it, from /proc (zombies
    included: their time counts until they are reaped). Follows /proc/PID/task/TID/children (the tree's own
    size, not the machine's), or where the kernel lacks them scans every process. waits: each value gets a third
    field, the seconds its threads have waited for a CPU while runnable (/proc/PID/task/TID/schedstat; 0 where
    the kernel keeps none)."""
    tree, todo = {}, [pid]
    while todo:
        p = todo.pop()
        if p in tree:
            continue
        try:
            parent, cpu = _stat(p)
            waited = 0.0
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children", "rb") as f:
                    todo += [int(child) for child in f.read().split()]
                if waits:
                    with contextlib.suppress(OSError, IndexError, ValueError), \
                            open(f"/proc/{p}/task/{task}/schedstat", "rb") as f:
                        waited += int(f.read().split()[1]) / 1e9
            tree[p] = (parent, cpu, waited) if waits else (parent, cpu)
        except FileNotFoundError:
            if p == pid and not os.path.exists(f"/proc/{pid}/task/{pid}/children") and os.path.exists(f"/proc/{pid}"):
                return _scanned_tree(pid, waits)   # no CONFIG_PROC_CHILDREN
        except OSError:
            continue
    return tree


def _scanned_tree(pid, waits=False):
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                table[int(entry)] = _stat(entry)
            except OSError:
                continue
    children = {}
    for p, (parent, _) in table.items():
        children.setdefault(parent, []).append(p)
    tree, todo = {}, [pid]
    while todo:
        p = todo.pop()
        if p in table and p not in tree:
            tree[p] = table[p] + ((0.0,) if waits else ())
            todo += children.get(p, [])
    return tree


def tree_cpu_s(pid):
    """CPU seconds charged so far to process `pid` and everything below it: its own time, that of the children it
    reaped, and that of its live (or not yet reaped) descendants. Complete while no process in the tree lets the
    kernel reap its children unseen (SIGCHLD ignored: code_reward's sandboxes refuse that)."""
    return sum(cpu for _, cpu in process_tree(pid).values())


def kill_descendants(pid, rounds=200):
    """SIGKILL every process below `pid` (not `pid` itself) until none is left alive; bounded (a tree that keeps
    forking faster than this kills is left to its own limits). Returns whether none is left."""
    for _ in range(rounds):
        alive = [p for p in process_tree(pid) if p != pid and not _is_zombie(p)]
        if not alive:
            return True
        for p in alive:
            try:
                os.kill(p, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.002)
    return False


def _is_zombie(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except OSError:
        return True


class _Worker:
    def __init__(self, module_name, memory_limit_bytes):
        here = os.path.dirname(os.path.abspath(__file__))
        path = [p for p in dict.fromkeys([here] + [os.path.abspath(p) for p in sys.path]) if safe_to_import_from(p)]
        code = (f"import sys; sys.path[:] = {path!r}; import workers; "
                f"workers.serve({module_name!r}, {int(memory_limit_bytes)})")
        env = {k: os.environ[k] for k in WORKER_ENVIRONMENT if k in os.environ}
        self.sock, theirs = socket.socketpair()
        try:
            self.proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", code], stdin=theirs, stdout=theirs,
                                         start_new_session=True, env=env)
        finally:
            theirs.close()
        self.fd = self.sock.fileno()
        self.buffer, self.ready, self.started, self.notes, self.key = bytearray(), False, None, [], None
        self.limits, self.stopped, self.next_cpu_check, self.cpu_over, self.cpu_base = None, False, None, 0.0, 0.0
        self.cleaning = False

    def read(self):
        """Complete messages read now (call when select says the channel is readable); None at EOF. A line that
        is not a JSON object comes back as {} (no key: a forgery)."""
        try:
            chunk = os.read(self.fd, 1 << 16)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            return None
        self.buffer += chunk
        *lines, rest = bytes(self.buffer).split(b"\n")
        self.buffer[:] = rest
        messages = []
        for line in lines:
            try:
                message = json.loads(line)
            except ValueError:
                message = {}
            messages.append(message if isinstance(message, dict) else {})
        return messages

    def send(self, op, args, measure_cpu=False):
        if not self.ready:   # the clock of an item starts only once the worker's imports are done
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            while not self.ready:
                readable, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
                messages = self.read() if readable else None
                if not messages and (messages is None or time.monotonic() > deadline):
                    raise OSError("grading worker did not start")
                self.ready = any(m.get("ready") is True for m in messages)
        self.key = secrets.token_hex(KEY_BYTES)
        # idle between items, with nothing below it: its own times are the whole tree's
        self.cpu_base = _own_cpu_s(self.proc.pid) if measure_cpu else 0.0
        self.sock.sendall((json.dumps({"op": op, "args": list(args), "key": self.key}) + "\n").encode())
        self.started, self.notes, self.limits, self.stopped, self.cleaning = time.monotonic(), [], None, False, False
        self.next_cpu_check, self.cpu_over = None, float("-inf")

    def kill(self):
        """Stop the worker (it starts nothing more), SIGKILL its descendants (while it lives, every process it
        started, and every orphan of theirs it adopted as a subreaper, is below it), then the worker. Its pid
        cannot name another process meanwhile: it is our child, unreaped."""
        try:
            self.proc.send_signal(signal.SIGSTOP)
            kill_descendants(self.proc.pid)
        finally:
            self.proc.kill()
            self.proc.wait()
            self.sock.close()


def _own_cpu_s(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return sum(int(x) for x in f.read().rsplit(b")", 1)[1].split()[11:15]) / TICKS_PER_S
    except OSError:
        return 0.0


class Pool:
    """Persistent workers running one module's WORKER_OPS, reused across batches (a start costs an import)."""

    def __init__(self, module_name, memory_limit_bytes):
        self.module_name, self.memory_limit_bytes = module_name, memory_limit_bytes
        self.workers, self.lock = [], threading.Lock()

    def _replace(self, w, on_kill):
        """Kill worker w, clean up after its item (on_kill(notes): its authentic notes only), then replace it."""
        worker = self.workers[w]
        worker.kill()
        if on_kill:
            on_kill(worker.notes)
        self.workers[w] = _Worker(self.module_name, self.memory_limit_bytes)

    def run(self, op, arg_lists, workers, kill_after_s, *, cpu_after_s=None, grace_s=0.0, cleanup_s=0.0,
            on_kill=None):
        """op(*args) for each args in arg_lists, `workers` processes at a time. Each item is charged its own time
        (kill_after_s, cpu_after_s: one for all, or one per item): the wall clock since it was sent and, with
        cpu_after_s, the CPU time of the worker's process tree since then (tree_cpu_s); a note {"limits":
        [cpu_s, wall_s]} from the worker narrows them from then on (a test's own limit), and while it says
        {"cleaning": true} (removing what the item left: trusted work, proportional to what the item did) its
        time is not the item's: only the wall clock counts, with cleanup_s more. Past either, the
        worker's descendants are SIGKILLed; past either + grace_s, and still without an answer, the item is
        ("timeout", None) and its worker SIGKILLed, on_kill(notes) cleans up, and only then is the worker
        replaced. An answer is taken whenever it arrives before that (the worker keeps its own clocks). A message
        that is not about the item in progress (not its key) makes it ("forged", why), its worker killed and
        replaced the same way. A worker that dies or an op that raises gives ("error", why).
        Returns [("ok", result) | ("timeout", None) | ("error", why) | ("forged", why)]."""
        outcomes = [None] * len(arg_lists)
        workers = max(1, workers)
        walls = kill_after_s if isinstance(kill_after_s, list) else [kill_after_s] * len(arg_lists)
        cpus = cpu_after_s if isinstance(cpu_after_s, list) else [cpu_after_s] * len(arg_lists)
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        with self.lock:
            while len(self.workers) < workers:
                self.workers.append(_Worker(self.module_name, self.memory_limit_bytes))
            queue = list(reversed(range(len(arg_lists))))
            busy = {}   # worker index -> item index
            while queue or busy:
                for w in range(workers):
                    if w not in busy and queue:
                        k = queue.pop()
                        try:
                            self.workers[w].send(op, arg_lists[k], cpus[k] is not None)
                        except OSError:   # a dead worker: replace it and retry the item once
                            self._replace(w, None)
                            self.workers[w].send(op, arg_lists[k], cpus[k] is not None)
                        busy[w] = k
                readable, _, _ = select.select([self.workers[w].fd for w in busy], [], [], POLL_S)
                for w in list(busy):
                    worker, k = self.workers[w], busy[w]
                    messages = worker.read() if worker.fd in readable else []
                    answer = forged = None
                    for message in messages or []:
                        if message.get("key") != worker.key or answer is not None:
                            forged = "a message that is not about this item (forged, or out of order)"
                            break
                        if "note" in message:
                            worker.notes.append(message["note"])
                            if isinstance(message["note"], dict) and "limits" in message["note"]:
                                worker.limits = message["note"]["limits"]
                            if isinstance(message["note"], dict) and "cleaning" in message["note"]:
                                worker.cleaning = message["note"]["cleaning"]
                        else:
                            answer = message
                    if forged is None and answer is not None:
                        del busy[w]
                        outcomes[k] = ("ok", answer["result"]) if "result" in answer else \
                            ("error", str(answer.get("error", "bad reply")))
                        continue
                    if forged is None and messages is not None:
                        over = self._over(worker, walls[k], cpus[k], cores, cleanup_s)
                        if over is None:
                            continue   # still working, in time
                        if not worker.stopped:   # the item's allowance is spent: its processes die now
                            kill_descendants(worker.proc.pid)
                            worker.stopped = True
                        if over < grace_s:
                            continue   # the worker has the grace to say so itself
                    del busy[w]
                    # forged, late, or died (its memory limit, a segfault): killed, and its item cleaned up
                    outcomes[k] = ("forged", forged) if forged else \
                        ("error", "grading worker died") if messages is None else ("timeout", None)
                    self._replace(w, on_kill)
        return outcomes

    @staticmethod
    def _over(worker, wall_s, cpu_s, cores, cleanup_s):
        """By how much the worker's item is past its limits (seconds, >= 0), or None while within them. The tree
        is measured only once it could have used up its CPU time since the last look (at most `cores` seconds of
        CPU per second of wall clock): an item that ends early costs no /proc walk."""
        now = time.monotonic()
        if worker.limits is not None:
            cpu_s, wall_s = worker.limits
        if worker.cleaning:
            cpu_s, wall_s = None, wall_s + cleanup_s
        over = now - worker.started - wall_s
        if cpu_s is not None:
            if worker.next_cpu_check is None:
                worker.next_cpu_check = worker.started + cpu_s / cores
            if now >= worker.next_cpu_check:
                used = tree_cpu_s(worker.proc.pid) - worker.cpu_base
                worker.cpu_over = used - cpu_s
                worker.next_cpu_check = now + max(POLL_S, (cpu_s - used) / cores)
            over = max(over, worker.cpu_over)
        return over if over >= 0 else None

    def close(self):
        with self.lock:
            for worker in self.workers:
                worker.kill()
            self.workers.clear()


_POOLS = {}   # (module, memory limit) -> Pool
_POOLS_LOCK = threading.Lock()


def get_pool(module_name, memory_limit_bytes):
    """The persistent pool of workers that serve `module_name` (its WORKER_OPS) under that memory limit."""
    with _POOLS_LOCK:
        return _POOLS.setdefault((module_name, int(memory_limit_bytes)), Pool(module_name, memory_limit_bytes))


def close_pools(module_name=None):
    """Stop the workers (of one module, or all); the next run starts new ones."""
    with _POOLS_LOCK:
        for (name, _), pool in list(_POOLS.items()):
            if module_name in (None, name):
                pool.close()
