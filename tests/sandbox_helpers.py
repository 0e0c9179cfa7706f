"""Helpers of the sandbox tests (tests/test_sandbox_round2.py, tests/test_sandbox_round3.py): programs graded
through the real scorer (fenced, functional, grade_all), the claims a mode makes (claims), and a script run as an
ordinary user (as_nobody, with NOBODY_PRELUDE's grade_all inside it)."""
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

import code_reward
import sandbox
from code_reward import score_code_batch

ROOT = Path(__file__).resolve().parents[1]
HAVE_BWRAP = code_reward.sandbox_mode("auto") == "bwrap"
MODES = ["bwrap", "rlimits"] if HAVE_BWRAP else ["rlimits"]
SLOW_S = 10.0   # items that must pass or fail on their merits: generous, so that load never decides them
NOBODY = 65534
CAN_BE_NOBODY = os.geteuid() == 0 and os.path.exists("/usr/bin/setpriv") and os.path.exists("/usr/bin/python3")
# the modules a scorer run as an ordinary user needs, copied where that user can read them
SCORER_MODULES = ("code_reward.py", "sandbox.py", "workers.py", "data.py", "hub_sets.py", "protocols.py")


def fenced(program):
    return f"```python\n{program}\n```"


def functional(*asserts, **extra):
    return {"kind": "functional", "asserts": list(asserts), **extra}


def grade_all(programs, tests, mode, timeout_s=SLOW_S, workers_n=1):
    """Programs through the real path, by default one worker (so that a shifted verdict would show):
    (scores, results, stats)."""
    results, stats = [], {}
    tests = tests if isinstance(tests, list) else [tests] * len(programs)
    scores = score_code_batch([fenced(p) for p in programs], tests, workers=workers_n, timeout_s=timeout_s,
                              sandbox=mode, results=results, stats=stats)
    return scores, results, stats


def claims(mode, claim):
    return sandbox.sandbox_guarantees(mode)[claim]


# What every script run by as_nobody starts with: our modules on the path (argv[1]; with_numpy: numpy's
# site-packages folder, argv[2], after them), MODES as that user finds them, and grade_all as above.
NOBODY_IMPORTS = "\nimport json, os, sys\nsys.path.insert(0, sys.argv[1])\n"
NOBODY_NUMPY = "sys.path.append(sys.argv[2])\n"
NOBODY_PRELUDE = r"""import code_reward as c
import sandbox
MODES = [m for m in ("bwrap", "rlimits") if c.sandbox_mode(m) == m]


def grade_all(programs, tests, mode, timeout_s=10.0):
    results, stats = [], {}
    tests = tests if isinstance(tests, list) else [tests] * len(programs)
    scores = c.score_code_batch(["```python\n" + p + "\n```" for p in programs], tests, workers=1,
                                timeout_s=timeout_s, sandbox=mode, results=results, stats=stats)
    return scores, results, stats
"""


def as_nobody(script, *args, timeout=300, with_numpy=False):
    """Run the prelude + `script` (Python source) as uid 65534 with the system Python and copies of our modules;
    its last stdout line is JSON. argv[1]: the modules' folder; with_numpy: argv[2] is numpy's site-packages
    folder; then args. The test process stays root."""
    if not CAN_BE_NOBODY:
        pytest.skip("needs root (to become an ordinary user), setpriv and /usr/bin/python3")
    site = []
    if with_numpy:
        import numpy
        site = [str(Path(numpy.__file__).parents[1])]
    prelude = NOBODY_IMPORTS + (NOBODY_NUMPY if with_numpy else "") + NOBODY_PRELUDE
    readable = Path(tempfile.mkdtemp(prefix="nano-code-modules-"))
    try:
        readable.chmod(0o755)
        for module in SCORER_MODULES:
            shutil.copy(ROOT / module, readable / module)
            (readable / module).chmod(0o644)
        proc = subprocess.run(["setpriv", "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups",
                               "/usr/bin/python3", "-c", prelude + script, str(readable), *site, *args],
                              capture_output=True, text=True, timeout=timeout, cwd="/", stdin=subprocess.DEVNULL)
    finally:
        shutil.rmtree(readable, ignore_errors=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
