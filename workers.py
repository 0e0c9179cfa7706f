"""Killable worker processes with a hard per-item deadline: the one pool both graders use.

A grader must never hang or die on what a model wrote (a sympy expression that takes minutes, a program whose
checker gets stuck), so each item runs in a persistent worker process that is SIGKILLed and replaced when the
item is late. Workers are plain `python -c` children (no fork of a parent that holds vLLM threads, and no
re-import of the caller's __main__ as multiprocessing's spawn does), with an address-space limit.

Wire format, one JSON object per line:
    parent -> worker   {"op": name, "args": [...]}           op: a name in the module's WORKER_OPS
    worker -> parent   {"ready": true}                        once, after the module's imports
                       {"note": value}                        any number, while an item runs (see note())
                       {"result": value} | {"error": str}     one per item

    pool = get_pool("reward", memory_limit_bytes=4 << 30)
    outcomes = pool.run("op_name", [args, ...], workers=2, kill_after_s=10.0, on_kill=cleanup)
    # outcomes[k] = ("ok", result) | ("timeout", None) | ("error", why); on_kill(notes) after a kill
"""
import importlib
import json
import os
import resource
import select
import subprocess
import sys
import threading
import time

STARTUP_TIMEOUT_S = 120.0   # a worker's imports (sympy: ~0.5 s, much longer on a loaded machine) are not an item's time
POLL_S = 0.05               # how often the parent looks at the clock while every worker is busy


# ------------------------------------------------------------------------------------------------------------
# Worker side
# ------------------------------------------------------------------------------------------------------------
def _reply(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def note(value):
    """Worker side: tell the parent something about the item in progress (e.g. a sandbox it started, so that
    the parent can clean up after it if it has to kill this worker). A no-op outside a worker."""
    if _SERVING:
        _reply({"note": value})


_SERVING = []


def serve(module_name, memory_limit_bytes):
    """Worker loop: import `module_name`, then run {"op", "args"} requests one at a time until stdin closes."""
    try:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))
    except (ValueError, OSError):
        pass
    module = importlib.import_module(module_name)
    ops = module.WORKER_OPS
    _SERVING.append(module_name)
    _reply({"ready": True})
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply = {"result": ops[request["op"]](*request["args"])}
        except Exception as exc:  # noqa: BLE001 -- a grader bug fails its item, never the batch
            reply = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        try:
            _reply(reply)
        except BrokenPipeError:   # the parent is gone
            os._exit(0)


# ------------------------------------------------------------------------------------------------------------
# Parent side
# ------------------------------------------------------------------------------------------------------------
class _Worker:
    def __init__(self, module_name, memory_limit_bytes):
        here = os.path.dirname(os.path.abspath(__file__))
        code = (f"import sys; sys.path.insert(0, {here!r}); import workers; "
                f"workers.serve({module_name!r}, {int(memory_limit_bytes)})")
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     start_new_session=True)
        self.fd = self.proc.stdout.fileno()
        self.buffer, self.ready, self.started, self.notes = bytearray(), False, None, []

    def read(self):
        """Complete messages read now (call when select says the pipe is readable); None at EOF."""
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            return None
        self.buffer += chunk
        *lines, rest = bytes(self.buffer).split(b"\n")
        self.buffer[:] = rest
        return [json.loads(line) for line in lines]

    def send(self, op, args):
        if not self.ready:   # the clock of an item starts only once the worker's imports are done
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            while not self.ready:
                readable, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
                messages = self.read() if readable else None
                if not messages and (messages is None or time.monotonic() > deadline):
                    raise OSError("grading worker did not start")
                self.ready = any(m.get("ready") for m in messages)
        self.proc.stdin.write((json.dumps({"op": op, "args": list(args)}) + "\n").encode())
        self.proc.stdin.flush()
        self.started, self.notes = time.monotonic(), []

    def kill(self):
        self.proc.kill()
        self.proc.wait()


class Pool:
    """Persistent workers running one module's WORKER_OPS, reused across batches (a start costs an import)."""

    def __init__(self, module_name, memory_limit_bytes):
        self.module_name, self.memory_limit_bytes = module_name, memory_limit_bytes
        self.workers, self.lock = [], threading.Lock()

    def _replace(self, w):
        self.workers[w].kill()
        self.workers[w] = _Worker(self.module_name, self.memory_limit_bytes)

    def run(self, op, arg_lists, workers, kill_after_s, on_kill=None):
        """op(*args) for each args in arg_lists, `workers` processes at a time. An item still running
        kill_after_s seconds after it was sent (or answering later) is ("timeout", None) and its worker is
        SIGKILLed and replaced, after which on_kill(notes) cleans up what the item noted; a worker that dies
        or an op that raises gives ("error", why). Returns [("ok", result) | ("timeout", None) | ("error", why)]."""
        outcomes = [None] * len(arg_lists)
        workers = max(1, workers)
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
                            self.workers[w].send(op, arg_lists[k])
                        except OSError:   # a dead worker: replace it and retry the item once
                            self._replace(w)
                            self.workers[w].send(op, arg_lists[k])
                        busy[w] = k
                readable, _, _ = select.select([self.workers[w].fd for w in busy], [], [], POLL_S)
                now = time.monotonic()
                for w in list(busy):
                    worker, k = self.workers[w], busy[w]
                    messages = worker.read() if worker.fd in readable else []
                    answer = None
                    for message in messages or []:
                        if "note" in message:
                            worker.notes.append(message["note"])
                        else:
                            answer = message
                    if answer is None and messages is not None and now - worker.started <= kill_after_s:
                        continue   # still working, in time
                    del busy[w]
                    if answer is not None and now - worker.started > kill_after_s:
                        outcomes[k] = ("timeout", None)   # answered, but too late: like any timeout
                    elif answer is not None:
                        outcomes[k] = ("ok", answer["result"]) if "result" in answer else \
                            ("error", str(answer.get("error", "bad reply")))
                    else:   # died (its memory limit, a segfault), or late: killed, and its item cleaned up
                        outcomes[k] = ("error", "grading worker died") if messages is None else ("timeout", None)
                        notes = worker.notes
                        self._replace(w)
                        if on_kill:
                            on_kill(notes)
        return outcomes

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
