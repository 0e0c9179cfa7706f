"""Background jobs of the test session (tests/conftest.py owns the hooks): a test whose cost is one long subprocess
it only reads the result of is marked

    @pytest.mark.background(job=main_job)                   # or jobs=[a, b], params={...}
    def test_main_job_claims(background):
        proc, folder = background                            # subprocess.CompletedProcess, the job's folder

`main_job(folder, **params)` returns subprocess.run's keywords, or a list of them. Every collected test's jobs
start when collection ends and run in collection order, WORKERS at a time and niced, beside the other tests: on
the cores that pytest's own process leaves idle; the marked tests run last. Only WHEN (and at which priority) the
subprocess runs changes, never what it computes. The jobs are children of pytest's process: code that charges this
process's CPU and its reaped children's (sandbox.ItemClock called in-process) sees theirs; run it in a subprocess.
"""
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Two jobs at a time: when the tests in the foreground wait on one core (a subprocess, a sandbox) or are done, no
# core is left idle. Niced, so that the foreground tests, whose verdicts may hold wall-clock caps, come first;
# the background jobs have no such cap but their own generous timeouts.
WORKERS, NICE = 2, 10


class BackgroundJobs:
    """The collected tests' background jobs, in collection order, WORKERS at a time, each niced (NICE).

    A job is called at the end of collection, in the main thread before any test runs (so the environment and
    working directory are the session's, not a test's monkeypatched ones); it may write small inputs into its
    folder. subprocess.run's keywords it returns: args; optionally env, cwd (default: the repository), timeout,
    input. A list of them runs one after the other, each whatever the previous one returned. params: the marker's,
    else the test's parametrization; tests naming the same job and params share one run."""

    def __init__(self):
        self.root = None        # a temporary folder, made when the first job is added
        self.jobs = {}          # key -> {"spec", "folder", "done": Event, "result": CompletedProcess | Exception}
        self.running = set()    # the Popens of the jobs now running
        self.stopped = False
        self.lock = threading.Lock()   # guards `waiting` and `running`: stop() and a job's start exclude each other
        self.waiting = []       # the entries no worker has taken yet

    @staticmethod
    def keys(item):
        """(job, params) of each job the test's marker names."""
        marker = item.get_closest_marker("background")
        jobs = marker.kwargs.get("jobs") or [marker.kwargs["job"]]
        params = marker.kwargs["params"] if "params" in marker.kwargs else \
            getattr(getattr(item, "callspec", None), "params", {})
        return [(job, tuple(sorted(params.items()))) for job in jobs]

    def add(self, item):
        for key in self.keys(item):
            if key in self.jobs:
                continue
            self.root = self.root or Path(tempfile.mkdtemp(prefix="pytest-background-"))
            folder = self.root / f"job{len(self.jobs)}"
            folder.mkdir()
            entry = {"folder": folder, "done": threading.Event(), "result": None}
            try:
                entry["spec"] = key[0](folder, **dict(key[1]))
            except Exception as exc:   # reported by the test that needs it
                entry["spec"], entry["result"] = None, exc
                entry["done"].set()
            self.jobs[key] = entry

    def start(self):
        self.waiting = [entry for entry in self.jobs.values() if entry["spec"] is not None]
        for k in range(min(WORKERS, len(self.waiting))):
            threading.Thread(target=self.work, daemon=True, name=f"background-jobs-{k}").start()

    def work(self):
        while True:
            with self.lock:
                if not self.waiting:
                    return
                entry = self.waiting.pop(0)
            try:
                spec = entry["spec"]
                entry["result"] = [self.run_one(one) for one in spec] if isinstance(spec, list) else \
                    self.run_one(spec)
            except Exception as exc:
                entry["result"] = exc
            entry["done"].set()

    def run_one(self, spec):
        spec = dict(spec)
        args, timeout, given = spec.pop("args"), spec.pop("timeout", None), spec.pop("input", None)
        with self.lock:
            if self.stopped:
                raise RuntimeError("the session ended before this background job started")
            # a session of its own: on timeout or at the session's end the whole tree (bash's, torchrun's
            # children) dies
            proc = subprocess.Popen(["nice", "-n", str(NICE), *map(str, args)],
                                    stdin=subprocess.PIPE if given is not None else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    start_new_session=True, **{"cwd": ROOT, **spec})
            self.running.add(proc)
        try:
            stdout, stderr = proc.communicate(given, timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill(proc)
            proc.communicate()
            raise
        finally:
            with self.lock:
                self.running.discard(proc)
        return subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)

    @staticmethod
    def kill(proc):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def results(self, item):
        """[(CompletedProcess, folder)] of the test's jobs, in the marker's order, once they have finished."""
        out = []
        for key in self.keys(item):
            entry = self.jobs[key]
            entry["done"].wait()
            if isinstance(entry["result"], Exception):
                raise entry["result"]
            out.append((entry["result"], entry["folder"]))
        return out

    def stop(self):
        """At the session's end: the running job killed, the jobs' folders removed."""
        with self.lock:
            self.stopped = True
            for proc in self.running:
                self.kill(proc)
        if self.root:
            shutil.rmtree(self.root, ignore_errors=True)
