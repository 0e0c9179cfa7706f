"""A grading-worker module for the tests only: reward.py's operations, except that a check of "<hang>" sleeps for
ten minutes -- a check that really hangs, to be killed at its deadline. Tests point reward.WORKER_MODULE here
(the workers import it from the tests folder, which is on the pool's sys.path)."""
import time

import reward

HANG_S = 600


def _hanging(op):
    def run(*args):
        if args and args[0] == "<hang>":
            time.sleep(HANG_S)
        return op(*args)
    return run


WORKER_OPS = {name: _hanging(op) for name, op in reward.WORKER_OPS.items()}
