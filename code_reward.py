"""Code reward: run a model's program against a problem's tests in a sandbox; 1.0 only if every test passes.

Model-written code is hostile by default, so this file is built to fail closed:
- The verdict is never computed where the program runs. For function tests (MBPP asserts, HumanEval's
  `check(candidate)`) the TESTS run in a trusted checker process (a grading worker, workers.py) and the PROGRAM
  runs in a sandboxed process; every call the tests make to the program's functions crosses a pipe as plain data
  (ints, strings, lists, dicts, ...: one JSON line, parsed by the C JSON scanner without evaluating anything).
  Comparisons, builtins and asserts all live in the checker, so a program cannot exit early to look successful,
  print a magic string, redefine `assert`/builtins/harness names, return an object whose `__eq__` is always True,
  or read the expected values (they never enter the sandbox, on disk or in memory). An exception it raises
  reaches the tests as the same builtin type only if that type is an ordinary error (PROGRAM_ERRORS); any other
  (StopIteration, SystemExit, its own classes, ...) arrives as ProgramError, so it cannot end a test's
  `all(map(f, xs))` early. For stdin/stdout tests the checker compares the program's output itself.
- The checker's own work on an item (parsing replies, running the tests) stops at the item's deadline (an alarm);
  the grading worker is SIGKILLed only if C code holds it past the deadline + WORKER_GRACE_S.
- Statuses are measured by the trusted side: "timeout" means the item's wall clock ran out or the program's
  processes used their whole CPU allowance (wait4 rusage), never what the program's exit status says.

The sandbox, per mode (sandbox_guarantees() returns these claims; tests check every claim in each mode that makes
it). "bwrap" is the full sandbox: training and eval refuse to grade code without it (require_sandbox) unless the
user passes the flag that accepts the fallback. "cgroup" below: each grading worker makes one memory cgroup for
its sandboxes, as a child of its own, where the kernel lets this uid (cgroup v2: the memory controller enabled,
or enableable, for children of that group -- the top group as root, a delegated group that holds no process --;
cgroup v1's memory hierarchy: as root); "none": elsewhere (an ordinary user, mostly; a container).

    what a program may do                          bwrap (full)                    rlimits fallback
    ---------------------------------------------  ------------------------------  ---------------------------------
    write, read or reorder the verdicts its        no (Verdicts, below)            as root: no (Verdicts, below); as
      grading worker sends back                                                    a user: its own no, but ANOTHER
                                                                                   item's sandbox, of the same uid,
                                                                                   yes (NOT isolated: Verdicts)
    change the grader itself (this checkout's      no                              as root: no (own uid); as a user:
      files, the trainer's processes)                                              yes, it is you (NOT isolated)
    crash or fool the checker with what it sends   no (Decoding, below)            no (Decoding, below)
    have the checker's semantics changed by the    no (Environment, below)         no (Environment, below)
      host's environment (PYTHONOPTIMIZE, ...)
    run at most timeout_s wall clock, CPU limit    yes: killed at the deadline     yes
    hold memory, the kernel's for it included      bounded (Memory, below)         cgroup: bounded; none: NOT bounded
    system calls                                   allowlist (seccomp), some with  same allowlist
                                                   their arguments (fcntl, ioctl,
                                                   prlimit64, socket, clone)
    sockets                                        AF_UNIX streams only, empty     AF_UNIX streams only: it can
                                                   network namespace               connect to the host's unix
                                                                                   sockets (NOT isolated)
    use a device (a GPU: /dev/nvidia* is mostly    none there: bwrap's own /dev    open it, but drive it no: no
      mode 0666)                                   (null, zero, full, random,      device ioctl passes the allowlist
                                                   urandom, tty); no device ioctl  (no GPU memory, context, kernel)
    ptrace, keyctl, bpf, userfaultfd, perf,        refused (seccomp)               refused (seccomp)
      io_uring, mount, unshare/setns, namespaces
    gain privileges (setuid binaries)              no (no_new_privs, userns)       no (no_new_privs)
    SysV IPC / POSIX message queues                refused (seccomp), own ns       refused (seccomp)
    signal other processes                         no (own PID namespace; it is    as root: no (own uid); as a
                                                   its init: signals it sends      user: yes, it is you (NOT
                                                   itself are ignored)             isolated)
    see other processes (/proc)                    no                              yes (NOT isolated)
    read host files (tests, datasets, home)        no (only /usr, Python)          yes (NOT isolated)
    write files                                    in its working directory only:  there, and where its uid may
                                                   cgroup: a 64 MB tmpfs; none:    (world-writable directories; as
                                                   read-only (Memory, below)       a user: yours) (NOT isolated)
    outlive the item (processes, IPC, files)       no (PID namespace, its tmpfs)   as root: no: its uid's processes
                                                                                   killed, every file its uid owns
                                                                                   removed (Leftovers, below); as a
                                                                                   user: its process group only,
                                                                                   files stay (NOT isolated)

Verdicts (workers.py has the details). In no mode can a program write, read or reorder what its grading worker
sends back. The worker-scorer channel is a socketpair: a pipe can be reopened through /proc/PID/fd/N by any process
of the same uid (the fallback run by a user shares the worker's), a socket cannot. The worker is not dumpable, so
no process of its uid can open its /proc/PID/fd or read its memory. Every request carries a random per-item key
that the program never sees, and every reply carries it back: a reply that is not the current item's fails that
item ("failed", never paid) and its worker is replaced, so verdicts cannot shift. What no channel can give: a
program run as the trainer's own uid (the fallback as a user) is that user, and can rewrite this checkout's files
-- the grader included --, signal the trainer, and write its memory where the kernel lets a process of the same
uid (/proc/PID/mem: kernel.yama.ptrace_scope 0, or no Yama). The same holds between sandboxes: a program in one
item can open another concurrent item's sandbox pipes through /proc/PID/fd (the red team had wrong programs of
other items paid that way). Run the fallback as root (a uid per sandbox), or use bwrap.

Memory: every kind a program can make the kernel hold, and its bound. With a cgroup the kernel also counts all of
them together (slab: inodes, dentries, socket buffers; pipe buffers; tmpfs pages; page tables) against
SANDBOX_MEMORY_MB per sandbox, swap included, and stops it there (ENOMEM, or the OOM killer: a "crash"). The
per-kind bounds hold either way:

    kind                                   bwrap                           rlimits fallback
    -------------------------------------  ------------------------------  ------------------------------------
    all of it together                     cgroup: SANDBOX_MEMORY_MB;      cgroup: SANDBOX_MEMORY_MB; none: NOT
                                           none: the rows below, summed    bounded (the rows marked NOT)
    process memory (heap, stacks, maps)    RLIMIT_AS 512 MB x 8 processes  root: the same; user: 512 MB per
                                                                           process, processes unlimited (NOT)
    page tables, kernel stacks, VMAs       with its processes (<= 8)       root: the same; user: NOT bounded
    file data                              cgroup: 64 MB tmpfs; none:      <= 16 MB per file (RLIMIT_FSIZE);
                                           read-only, none                 on a tmpfs (/dev/shm): cgroup:
                                                                           counted, none: NOT bounded; on a
                                                                           disk: its space, NOT bounded until
                                                                           the item ends (then removed)
    inodes and dentries (empty files and   cgroup: counted; none: none     cgroup: counted; none: NOT bounded
      directories: ~1 KB each, no data)    (the directory is read-only:
                                           bwrap cannot set nr_inodes)
    pipe buffers                           64 KB per pipe (F_SETPIPE_SZ refused), pipes <= descriptors
    socket buffers                         AF_UNIX stream sockets only: net.core.wmem_default queued per socket
                                           (setsockopt refused), sockets <= descriptors; no datagram or pending
                                           connection queued without one (SOCK_DGRAM, listen, accept refused);
                                           TCP/UDP buffers: none (AF_INET(6) refused)
    descriptors (files, pipes, sockets,    RLIMIT_NOFILE 64 per process; in flight in SCM_RIGHTS messages: <=
      epoll, timers, pidfds)               RLIMIT_NOFILE per uid (the kernel's own limit). Fallback as a user:
                                           processes unlimited, so descriptors too (NOT bounded)
    file locks and leases                  flock: one per open file; byte-range (POSIX, OFD) locks and leases
                                           refused (FCNTL_COMMANDS)
    pending signals, POSIX timers          RLIMIT_SIGPENDING MAX_PENDING_SIGNALS
    memfd, SysV shm/sem/msg, mqueues,      refused (seccomp)
      io_uring, BPF maps, keys,
      userfaultfd, perf buffers
    negative dentries (missing names)      reclaimed by the kernel under pressure; cgroup: counted
    GPU memory                             no device                       no device ioctl (IOCTL_REQUESTS)

Leftovers (the fallback as root). After each item every process of its uid is killed and every entry its uid
owns wherever it could have written is removed: in each world-writable directory (o+w, reachable by others) on
every writable mount but the kernel's own (KERNEL_FILESYSTEMS), found by one walk of those mounts per scoring
process (seconds on a big disk, once), and in world-writable directories made below those since. A file of its
uid can be nowhere else: the uid is an unused one of its own, has no group, and creating or linking a name needs
write access to the directory. The removal goes through directory descriptors opened with O_NOFOLLOW and never
recurses (_remove_tree): no link a program made, and no path component it swapped for one, is followed (as root
the path-based sweep once unlinked a root-owned file elsewhere), and no depth of directories stops it. Not
covered (NOT isolated): bytes it writes into other users' world-writable FILES (mode 0666), and a hard link it
makes to such a file (the name is its owner's, not the item's uid: it stays); world-writable directories made
after the walk outside those it found; state it leaves in host services over AF_UNIX.

Decoding. Every message from a program is decoded at one boundary (_Sandbox.recv: whatever decoding raises --
OverflowError, RecursionError, MemoryError, ... -- makes it "not plain data", and the test fails), and every
value or text from it that reaches a result, a log or a terminal goes through _printable (ASCII: other characters,
lone surrogates and control characters but newlines escaped; at most MAX_DETAIL_CHARS a piece, twice that a
detail; it cannot raise). So grader_error counts our own bugs only.

Environment. Grading workers run `python -I -S` with the scorer's sys.path passed explicitly, minus any
world-writable directory (a trainer started from /tmp with `python -c` has the cwd there: a planted decimal.py
paid wrong LiveCodeBench programs), and only PATH, TMPDIR and the locale from the environment: no PYTHON* variable
(PYTHONOPTIMIZE, PYTHONPATH, ...), user site, sitecustomize, usercustomize or .pth code. Programs, preludes and
tests are compiled with optimize=0 and no inherited flags, and before each item the worker checks that a failing
assert fails, else it refuses the item. Sandboxed programs run `python -I -S` with an empty environment.

Kernel features relied on: user, PID, network, IPC, UTS namespaces (bwrap, unprivileged user namespaces or
root), seccomp filters (CONFIG_SECCOMP_FILTER, through libseccomp.so.2: the allowlist is built with it in the
grading worker and handed to bwrap with `--seccomp FD`, or loaded with prctl in the fallback), no_new_privs,
tmpfs size limits, rlimits, /proc (the fallback's uid sweep), PR_SET_CHILD_SUBREAPER (reaping),
PR_SET_DUMPABLE (workers), memory cgroups where offered (else the read-only working directory). Without a
feature the mode that needs it does not run weaker: its probe fails, and every item is refused (score 0,
counted as a sandbox refusal), or require_sandbox() stops the run. The allowlist names system calls, resolved
by libseccomp for the machine; a call through another ABI (i386's int 0x80, x32) kills the process
(libseccomp's architecture check).

Tests (the `tests` field of a problem row; data.validate_tests checks the schema):
    {"kind": "functional", "asserts": [str, ...], "prelude": str, "setup": str, "entry_point": str}
        prelude: trusted code run BEFORE the program in its namespace (imports and helpers the problem gives;
                 HumanEval's prompt) and in the checker (so tests can use the helpers);
        setup:   code run AFTER the program in its namespace (MBPP's test_setup_code builds inputs from the
                 program's own classes); asserts: statements run one by one in the checker; a name they use that
                 is neither bound by them, a builtin, nor a stdlib module used as `module.attr` is the program's,
                 and calling it runs the program's function in the sandbox; entry_point: always the program's.
    {"kind": "stdio", "cases": [{"input": str, "output": str}, ...], "prelude": str, "compare": "exact"|"lcb"}
        each case runs the program as __main__ in a fresh sandbox (after `prelude`, trusted code placed before
        the program's text: LiveCodeBench's imports); it passes when the program exits with status 0 and its
        stdout equals the expected output up to trailing whitespace on each line and blank lines at the end (no
        float tolerance; compare "lcb": LiveCodeBench's comparison, same_output_lcb).
    {"kind": "stdio"|"functional", "protocol": "acereason"|"lcb", "cases": [{"input", "output"}], "func_name",
     "starter_code"}: graded as a published protocol grades them (protocols.py: its extraction from the whole
        response, its in-process runner in ONE sandboxed process, its comparison here in the checker).
    Either kind may carry "time_limit_s", a limit per test as LiveCodeBench sets one (its 6 s per test case or
    call, wall clock, measured here by the trusted side): each stdio case's sandbox, and each call of a
    functional test (the program's loading too), must finish within it; the item's whole limit is then
    LiveCodeBench's global (limit + 1) x tests + 5 s (a protocol's own margin), or timeout_s if larger
    (item_timeout_s). "modules" and "memory_mb": what the sandbox lets the program import and use (sandbox side).

    score_code_batch(responses, tests_list, workers=2)  the one scoring entry point (reward.score_problems uses it)
    require_sandbox(allow_fallback)                      once per run, before grading: the mode, or a refusal
    python code_reward.py --references mbpp_test,humaneval   every reference solution through the reward
"""
import argparse
import ast
import builtins
import contextlib
import ctypes
import ctypes.util
import errno
import importlib
import json
import os
import re
import shutil
import signal
import select
import stat
import subprocess
import sys
import tempfile
import threading
import time

import data
import protocols
import workers

DEFAULT_TIMEOUT_S = 6.0       # wall-clock seconds per item (all of its tests), sandbox start-up included
WORKER_GRACE_S = 3.0          # a worker (the checker) still busy at timeout + this is killed (C code ignores alarms)
CPU_MARGIN_S = 1              # RLIMIT_CPU = ceil(timeout) + this: a busy loop dies even if the wall clock stalls
MEMORY_MB = 512               # address space per sandboxed process (RLIMIT_AS); at most MAX_PROCESSES x this
MAX_PROCESSES = 8             # processes + threads per sandbox (RLIMIT_NPROC; binds in bwrap mode and as root)
MAX_FILE_MB = 16              # largest file a program may write (RLIMIT_FSIZE)
SANDBOX_DIR_MB = 64           # size of the program's tmpfs working directory (bwrap mode, with a memory cgroup)
SANDBOX_MEMORY_MB = 1024      # all memory of one sandbox, the kernel's for it included (memory cgroup, where offered)
MAX_OPEN_FILES = 64           # RLIMIT_NOFILE
MAX_PENDING_SIGNALS = 64      # RLIMIT_SIGPENDING: queued signals and POSIX timers (kernel memory) of the program's uid
MAX_DETAIL_CHARS = 300        # a result's detail (and each piece of it that came from the program)
MAX_PROGRAM_CHARS = 200_000   # longer "programs" are not graded
MAX_OUTPUT_BYTES = 8 << 20    # stdout kept from a stdio program (more fails the case)
MAX_REPLY_BYTES = 8 << 20     # one value sent back by a program's function (more fails the test)
MAX_ITEMS = 1_000_000         # elements read from an iterator a function returns
PARTIAL_CREDIT = False        # True: reward = fraction of tests passed (asserts or cases) instead of all-or-nothing
SANDBOX = "bwrap"             # "bwrap": the full sandbox or refuse each item; "rlimits": the fallback (only with
                              # the user's consent: require_sandbox); "auto": bwrap when it works, else the fallback
SANDBOX_UID_BASE = 1_500_000_000  # when root, a program runs as uid SANDBOX_UID_BASE + its grading worker's pid (unused uids)
SANDBOX_SITE_PACKAGES = False # False: programs get the standard library only (python -S; ~6 ms faster start-up)
SANDBOX_PYTHON = None         # the programs' interpreter; None: this one, or /usr/bin/python3 (see sandbox_python)
WORKER_MEMORY_GB = 4.0        # address space of a grading worker (it runs the tests on the values it receives)
WORKDIR_IN_SANDBOX = "/sandbox"
# mounts of the kernel's own that hold no file a program could make: the fallback's sweep does not walk them
KERNEL_FILESYSTEMS = {"proc", "sysfs", "cgroup", "cgroup2", "devpts", "debugfs", "tracefs", "securityfs", "bpf",
                      "pstore", "configfs", "fusectl", "binfmt_misc", "efivarfs", "nsfs", "autofs", "selinuxfs"}
UNSAFE_FLAG = "--allow_unsafe_code_sandbox"   # the flag train.py / eval.py pass to require_sandbox(allow_fallback)

FENCE_LANGUAGES = ("python", "py", "python3")

# Exceptions a program's function may raise into the tests as themselves (a test may expect one: `except
# ValueError`), with their builtin subclasses (KeyError, ZeroDivisionError, FileNotFoundError, ...). Anything
# else -- StopIteration and StopAsyncIteration (they end map/filter/iter early), GeneratorExit, SystemExit,
# KeyboardInterrupt, ExceptionGroup, warnings, the program's own classes -- arrives as ProgramError.
PROGRAM_ERRORS = (ArithmeticError, AssertionError, AttributeError, EOFError, ImportError, LookupError, NameError,
                  NotImplementedError, OSError, RecursionError, TypeError, UnicodeError, ValueError)

# The system calls a sandboxed Python program may make (seccomp allowlist; names resolved by libseccomp for this
# architecture, unknown names skipped). Anything else fails with ENOSYS ("not implemented": library fallbacks
# such as glibc's clone3 -> clone work). Some only with the arguments listed, each compared as a whole 64-bit
# value (high bits the kernel would ignore never pass): socket/socketpair only for the families (else
# EAFNOSUPPORT) and types below; clone only without namespace flags (else EPERM); fcntl and ioctl only for
# FCNTL_COMMANDS and IOCTL_REQUESTS; prlimit64 only on itself (pid 0: another process's limits, its grading
# worker's included, are not its to change). Left out on purpose: ptrace, process_vm_*, keyctl & co, bpf,
# userfaultfd, perf_event_open, io_uring_*, memfd_create, SysV IPC, mq_*, mount & co, unshare, setns, chroot,
# set*id, kexec, modules, swap, reboot, time setting, mknod, open_by_handle_at, kcmp, pidfd_getfd, vmsplice,
# setsockopt (socket buffers stay at the system's default size), bind/listen/accept (no connection can wait in a
# queue without a descriptor), ...
ALLOWED_SYSCALLS = """
read write readv writev pread64 pwrite64 preadv preadv2 pwritev pwritev2 lseek close close_range dup dup2 dup3
open openat creat stat fstat lstat newfstatat statx fstatfs statfs access faccessat faccessat2 readlink
readlinkat getdents getdents64 getcwd chdir fchdir mkdir mkdirat rmdir unlink unlinkat rename renameat renameat2
link linkat symlink symlinkat chmod fchmod fchmodat truncate ftruncate fallocate fsync fdatasync fadvise64
flock fcntl pipe pipe2 umask utime utimes utimensat futimesat sendfile copy_file_range splice tee
getxattr lgetxattr fgetxattr listxattr llistxattr flistxattr
brk mmap munmap mremap mprotect madvise mincore msync membarrier rseq
clone fork vfork execve execveat exit exit_group wait4 waitid kill tkill tgkill
getpid getppid gettid getpgid setpgid getpgrp getsid setsid getuid geteuid getgid getegid getgroups getresuid
getresgid prctl arch_prctl set_tid_address set_robust_list futex futex_waitv nanosleep clock_nanosleep
clock_gettime clock_getres gettimeofday time times getrusage sysinfo uname getrlimit setrlimit prlimit64
sched_yield sched_getaffinity sched_getparam sched_getscheduler sched_get_priority_max sched_get_priority_min
getpriority setpriority getcpu getrandom restart_syscall
rt_sigaction rt_sigprocmask rt_sigreturn rt_sigpending rt_sigsuspend rt_sigtimedwait sigaltstack pause alarm
setitimer getitimer timer_create timer_settime timer_gettime timer_getoverrun timer_delete timerfd_create
timerfd_settime timerfd_gettime signalfd signalfd4 eventfd eventfd2 poll ppoll select pselect6 epoll_create
epoll_create1 epoll_ctl epoll_wait epoll_pwait epoll_pwait2 ioctl pidfd_open pidfd_send_signal
socket socketpair connect getsockname getpeername sendto recvfrom sendmsg recvmsg
sendmmsg recvmmsg shutdown getsockopt
""".split()
SOCKET_FAMILIES = {"AF_UNIX": 1}
SOCKET_TYPES = {"SOCK_STREAM": 1}   # (flags such as SOCK_CLOEXEC aside): no datagram queues that outlive the sender
# fcntl commands and ioctl requests a program may use (by name, resolved from the fcntl / termios modules): file
# descriptor flags and duplication, terminal queries. Left out: locks and leases (kernel memory per byte range),
# F_SETPIPE_SZ (pipe buffers outside RLIMIT_AS), F_NOTIFY, F_SETOWN/F_SETSIG, and every device's own ioctls
# (a GPU, /dev/fuse, a terminal's TIOCSTI can only be driven through them).
FCNTL_COMMANDS = ("F_DUPFD", "F_DUPFD_CLOEXEC", "F_GETFD", "F_SETFD", "F_GETFL", "F_SETFL")
IOCTL_REQUESTS = ("TCGETS", "TIOCGWINSZ", "TIOCGPGRP", "FIONREAD", "FIONBIO", "FIOCLEX", "FIONCLEX")
CLONE_NAMESPACE_FLAGS = 0x7E020080   # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME


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


# ------------------------------------------------------------------------------------------------------------
# The seccomp allowlist (libseccomp through ctypes: the library Debian, Ubuntu and Fedora ship with systemd)
# ------------------------------------------------------------------------------------------------------------
class _ArgCmp(ctypes.Structure):   # struct scmp_arg_cmp
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


_SCMP_ALLOW, _SCMP_EQ, _SCMP_GT, _SCMP_MASKED_EQ = 0x7FFF0000, 4, 6, 7


def _scmp_errno(code):
    return 0x00050000 | code


def _seccomp_program():
    """The allowlist as classic BPF bytes (cached per process), or None with the reason in _PROBED when
    libseccomp is missing or refuses a rule."""
    if "seccomp" in _PROBED:
        return _PROBED["seccomp"]
    _PROBED["seccomp"], _PROBED["seccomp_why"] = None, ""
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2")
    except OSError as exc:
        _PROBED["seccomp_why"] = f"libseccomp is not installed ({exc})"
        return None
    lib.seccomp_init.restype, lib.seccomp_init.argtypes = ctypes.c_void_p, [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_ArgCmp)]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(_scmp_errno(errno.ENOSYS))
    if not ctx:
        _PROBED["seccomp_why"] = "seccomp_init failed"
        return None

    def rule(action, name, *conditions):
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr < 0:   # not a system call on this architecture
            return True
        array = (_ArgCmp * max(1, len(conditions)))(*[_ArgCmp(*c) for c in conditions])
        return lib.seccomp_rule_add_array(ctx, action, nr, len(conditions), array) == 0

    import fcntl
    import termios
    conditional = {"fcntl": [getattr(fcntl, name) for name in FCNTL_COMMANDS],
                   "ioctl": [getattr(termios, name) for name in IOCTL_REQUESTS], "prlimit64": [0]}
    try:
        ok = all(rule(_SCMP_ALLOW, name) for name in ALLOWED_SYSCALLS
                 if name not in ("socket", "socketpair", "clone", *conditional))
        for name, values in conditional.items():   # argument 1 (the command), or 0 for prlimit64 (the pid)
            arg = 0 if name == "prlimit64" else 1
            ok &= all(rule(_SCMP_ALLOW, name, (arg, _SCMP_EQ, value, 0)) for value in values)
        for name in ("socket", "socketpair"):   # arg 0: the family, arg 1: the type (low 4 bits; the rest: flags)
            ok &= all(rule(_SCMP_ALLOW, name, (0, _SCMP_EQ, family, 0), (1, _SCMP_MASKED_EQ, 0xF, kind))
                      for family in SOCKET_FAMILIES.values() for kind in SOCKET_TYPES.values())
            refused = [f for f in range(max(SOCKET_FAMILIES.values())) if f not in SOCKET_FAMILIES.values()]
            ok &= all(rule(_scmp_errno(errno.EAFNOSUPPORT), name, (0, _SCMP_EQ, f, 0)) for f in refused)
            ok &= rule(_scmp_errno(errno.EAFNOSUPPORT), name, (0, _SCMP_GT, max(SOCKET_FAMILIES.values()), 0))
        ok &= rule(_SCMP_ALLOW, "clone", (0, _SCMP_MASKED_EQ, CLONE_NAMESPACE_FLAGS, 0))
        ok &= rule(_scmp_errno(errno.EPERM), "unshare") and rule(_scmp_errno(errno.EPERM), "setns")
        if not ok:
            _PROBED["seccomp_why"] = "libseccomp refused a rule of the allowlist"
            return None
        with tempfile.TemporaryFile() as f:
            if lib.seccomp_export_bpf(ctx, f.fileno()) != 0:
                _PROBED["seccomp_why"] = "libseccomp could not export the filter"
                return None
            f.seek(0)
            _PROBED["seccomp"] = f.read()
    finally:
        lib.seccomp_release(ctx)
    return _PROBED["seccomp"]


class _SockFprog(ctypes.Structure):   # struct sock_fprog
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _join_cgroup(cgroup):
    """preexec_fn of a bwrap sandbox: join the memory cgroup (before exec, so that every process it makes is in
    it; `cgroup` is what _memory_cgroup returns); exit 127 if that fails (refused)."""
    def join():
        if cgroup is not None:
            try:
                os.write(cgroup[1], b"0")   # "0": the writing process; the descriptor's opener's rights count
            except OSError:
                os._exit(127)
    return join


def _fallback_lock_down(program, cgroup):
    """preexec_fn of the fallback's sandboxed process (between fork and exec, after the uid change): join the
    memory cgroup, set no_new_privs (a setuid binary it execs gains nothing) and load the seccomp allowlist; exit
    127 if any fails, so the item is refused, never run weaker. The grading worker is single-threaded (fork-safe)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    pr_set_no_new_privs, pr_set_seccomp, seccomp_mode_filter = 38, 22, 2

    join = _join_cgroup(cgroup)

    def lock_down():
        join()
        if libc.prctl(pr_set_no_new_privs, 1, None, 0, 0) != 0 or \
                libc.prctl(pr_set_seccomp, seccomp_mode_filter, ctypes.addressof(fprog), 0, 0) != 0:
            os._exit(127)
    lock_down.keep = (buffer, fprog)   # alive until the fork
    return lock_down


# ------------------------------------------------------------------------------------------------------------
# The sandbox, from the checker's side
# ------------------------------------------------------------------------------------------------------------
_PROBED = {}   # per process: probe results, the seccomp program, whether this worker reaps orphans


def bwrap_argv(runner_args, seccomp_fd=None, writable=True):
    """bwrap command line: new user/pid/net/ipc/uts namespaces, read-only /usr and Python install, as the working
    directory a size-limited tmpfs (writable: where a memory cgroup counts its inodes; else an empty read-only
    directory), no other host path, no device but bwrap's own /dev (null, zero, full, random, urandom, tty: no GPU,
    whatever its mode on the host), and the seccomp allowlist (read from seccomp_fd). bwrap
    always runs as an unprivileged user (as root we start it as an unused uid), so the program is in a user
    namespace in which it cannot create another one (--disable-userns, and seccomp), RLIMIT_NPROC counts only its
    own processes, and it holds no capability outside its namespaces."""
    # --as-pid-1: the runner is the namespace's init, a direct child of bwrap, so that wait4 on bwrap reports the
    # program's CPU time (with bwrap's own init in between it does not; see _Sandbox._ended)
    argv = [shutil.which("bwrap") or "bwrap", "--as-pid-1", "--unshare-user", "--disable-userns", "--unshare-pid",
            "--unshare-net",
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
    # size-limited working directory is the only place a program can write. A tmpfs's size bounds its data, not
    # its inodes (empty files and directories: ~1 KB of kernel memory each, millions per second), and bwrap
    # cannot set nr_inodes: without a memory cgroup to count them the working directory is read-only.
    workdir = ["--perms", "1777", "--size", str(SANDBOX_DIR_MB << 20), "--tmpfs", WORKDIR_IN_SANDBOX] if writable \
        else ["--dir", WORKDIR_IN_SANDBOX]
    argv += ["--proc", "/proc", "--dev", "/dev", *workdir,
             "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", WORKDIR_IN_SANDBOX]
    assert not any(a.startswith("--dev-bind") for a in argv)   # no host device, a GPU least of all
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    return argv + _runner_command() + runner_args


def _runner_command():
    """python in isolated mode (no PYTHON* variables, no user site directory, no script directory on sys.path)
    running the runner block."""
    flags = ["-I"] if SANDBOX_SITE_PACKAGES else ["-I", "-S"]
    return [sandbox_python()] + flags + ["-c", RUNNER_SOURCE]


def _reachable_by_others(path, need=stat.S_IROTH):
    """True if a user with no relation to the owner can reach `path` (every parent directory searchable) and has
    the `need` permission on it (read, by default)."""
    path = os.path.realpath(path)
    parts = path.split("/")
    for k in range(2, len(parts) + 1):
        try:
            mode = os.stat("/".join(parts[:k]) or "/").st_mode
        except OSError:
            return False
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return False
    return bool(os.stat(path).st_mode & need)


def sandbox_python():
    """The interpreter sandboxed programs run on: SANDBOX_PYTHON when set, else this one; but as root the
    sandbox runs as another uid, which must be able to read it: an interpreter under /root (pyenv, conda) is
    then replaced by the system's /usr/bin/python3 (programs use the standard library only)."""
    if SANDBOX_PYTHON:
        return SANDBOX_PYTHON
    if "python" not in _PROBED:
        _PROBED["python"] = _default_python()
    return _PROBED["python"]


def _default_python():
    exe = os.path.realpath(sys.executable)
    if os.geteuid() == 0 and not (_reachable_by_others(exe) and _reachable_by_others(sys.base_prefix)):
        for other in ("/usr/bin/python3", "/usr/local/bin/python3"):
            if os.path.exists(other) and _reachable_by_others(other):
                return os.path.realpath(other)
    return exe


class _SandboxGone(BaseException):
    """The sandboxed process is gone or late. A BaseException so that test code's `except Exception` cannot
    swallow it (and a flag on the channel catches a bare `except:`)."""


class _Late(BaseException):
    """The item's deadline passed while the checker itself was busy (raised by an alarm)."""


class _Sandbox:
    """One sandboxed process and its pipes: request/reply lines (functional), stdin/stdout (stdio), and its
    merged stdout/stderr tail for diagnostics. failure: None, or "timeout" / "crash" / "refused" / "too_large"."""

    def __init__(self, kind, mode, timeout_s, deadline, opened):
        opened.append(self)   # first: whatever interrupts the start, the caller closes this sandbox
        self.deadline, self.kind, self.mode, self.failure, self.closed = deadline, kind, mode, None, False
        self.buffer, self.tail, self.stdout = bytearray(), bytearray(), bytearray()
        self.proc = self.workdir = self.uid = self.to_child = self.from_child = self.out = self.err = None
        self.cpu_limit_s = int(timeout_s + 0.999) + CPU_MARGIN_S
        program = _seccomp_program()
        if program is None or mode not in ("bwrap", "rlimits"):
            self.failure = "refused"
            return
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        inherited = [to_child_r, from_child_w]
        limits = {"RLIMIT_CPU": self.cpu_limit_s, "RLIMIT_AS": MEMORY_MB << 20, "RLIMIT_FSIZE": MAX_FILE_MB << 20,
                  "RLIMIT_NOFILE": MAX_OPEN_FILES, "RLIMIT_CORE": 0, "RLIMIT_SIGPENDING": MAX_PENDING_SIGNALS}
        user, cgroup = {}, _memory_cgroup()
        if os.geteuid() == 0:  # a program never runs as root: an unused uid of its own, no groups
            self.uid = SANDBOX_UID_BASE + os.getpid()
            user = {"user": self.uid, "group": self.uid, "extra_groups": []}
        if mode == "bwrap" or self.uid is not None:
            limits["RLIMIT_NPROC"] = MAX_PROCESSES  # bwrap: counted in its user namespace; as root: for its uid
        runner_args = [kind, f"{to_child_r},{from_child_w}", to_literal(limits)]
        if mode == "bwrap":
            seccomp_r, seccomp_w = os.pipe()   # bwrap reads the filter from a descriptor (a few KB: fits a pipe)
            os.write(seccomp_w, program)
            os.close(seccomp_w)
            inherited.append(seccomp_r)
            argv, cwd = bwrap_argv(runner_args, seccomp_r, writable=cgroup is not None), "/"
            lock_down = _join_cgroup(cgroup) if cgroup is not None else None
        else:
            self.workdir = cwd = tempfile.mkdtemp(prefix="nano-code-")
            if self.uid is not None:
                os.chown(cwd, self.uid, self.uid)
            argv, lock_down = _runner_command() + runner_args, _fallback_lock_down(program, cgroup)
        stdio = subprocess.PIPE if kind == "stdio" else subprocess.DEVNULL
        try:
            with _alarm_held():   # no _Late between the fork and self.proc
                self.proc = subprocess.Popen(argv, stdin=stdio, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE if kind == "stdio" else subprocess.STDOUT,
                                             pass_fds=inherited, cwd=cwd, env={}, start_new_session=True,
                                             preexec_fn=lock_down, **user)
        except (OSError, subprocess.SubprocessError):  # no interpreter / no bwrap binary / lock-down failed
            self.failure = "refused"
        finally:
            for fd in inherited:
                os.close(fd)
        if self.proc is None:
            return
        # the scorer cleans up after this sandbox itself if it has to kill the worker mid-item
        workers.note({"pgid": self.proc.pid, "uid": self.uid if mode != "bwrap" else None, "workdir": self.workdir})
        self.out = self.proc.stdout.fileno()
        self.err = self.proc.stderr.fileno() if kind == "stdio" else None
        for fd in (self.to_child, self.from_child, self.out) + ((self.err,) if self.err else ()):
            os.set_blocking(fd, False)
        try:
            hello = self.recv(allow_eof=True)
        except TypeError:
            hello = None
        if hello is None and self.failure in (None, "crash"):
            self.failure = "refused"    # the sandbox never started the runner (bwrap error, lock-down failed)

    # -- I/O with a deadline; the program's output is drained all the time so that it never blocks on it --
    def _pump(self, read_fd=None, write_fd=None):
        """Wait until read_fd is readable or write_fd writable (never past the deadline: _SandboxGone), draining
        the program's stdout/stderr meanwhile. Returns (read_fd is readable, write_fd is writable)."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.failure = self.failure or "timeout"
            raise _SandboxGone()
        outputs = [fd for fd in (self.out, self.err) if fd is not None]
        readable, writable, _ = select.select(outputs + ([read_fd] if read_fd is not None else []),
                                              [write_fd] if write_fd is not None else [], [], min(left, 1.0))
        for fd in outputs:
            if fd in readable:
                self._drain(fd)
        return read_fd is not None and read_fd in readable, bool(writable)

    def _drain(self, fd):
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        if not chunk:   # closed
            self.out, self.err = (None if fd == self.out else self.out), (None if fd == self.err else self.err)
        elif fd == self.out and self.kind == "stdio":
            self.stdout += chunk
            if len(self.stdout) > MAX_OUTPUT_BYTES:
                self.failure = self.failure or "too_large"
                raise _SandboxGone()
        else:
            self.tail = (self.tail + chunk)[-4096:]

    def send(self, message):
        data = (to_literal(message) + "\n").encode()
        while data:
            if self._pump(write_fd=self.to_child)[1]:
                try:
                    data = data[os.write(self.to_child, data):]
                except BlockingIOError:
                    pass
                except BrokenPipeError:
                    self._ended(within_s=1.0, mid_protocol=True)
                    raise _SandboxGone() from None

    def recv(self, allow_eof=False):
        """The next message (a dict); None at EOF when allow_eof; TypeError if it is not plain data."""
        while b"\n" not in self.buffer:
            try:
                readable = self._pump(read_fd=self.from_child)[0]
            except _SandboxGone:
                if allow_eof:
                    return None
                raise
            if readable:
                chunk = os.read(self.from_child, 1 << 20)
                if not chunk:
                    self._ended(within_s=1.0, mid_protocol=True)
                    if allow_eof:
                        return None
                    raise _SandboxGone()
                self.buffer += chunk
                if len(self.buffer) > MAX_REPLY_BYTES:
                    self.failure = self.failure or "too_large"
                    raise _SandboxGone()
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer[:] = rest
        try:
            reply = from_literal(line.decode(), CHECKER_HANDLES)
        except Exception as exc:  # noqa: BLE001 -- the boundary: whatever decoding raised, it is not plain data
            raise TypeError(f"the program sent something that is not plain data ({_printable(_describe(exc))})") \
                from None
        if not isinstance(reply, dict):
            raise TypeError("the program sent something that is not a message")
        return reply

    def _ended(self, within_s, mid_protocol=False):
        """The program's side closed: wait (at most within_s, never past the deadline) for its exit, and say what
        ended it, from what the trusted side measured: "timeout" when its processes used their whole CPU
        allowance (wait4's rusage, reaped descendants included), else "crash" for a signal, an abnormal exit
        status, or any exit in the middle of the protocol -- whatever status the program chose. Returns the exit
        code, or None if it is still running."""
        until = min(self.deadline, time.monotonic() + within_s)
        while True:
            pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > until:
                self.failure = self.failure or ("timeout" if time.monotonic() > self.deadline else "crash")
                return None
            time.sleep(0.002)
        code = self.proc.returncode = os.waitstatus_to_exitcode(status)
        if usage.ru_utime + usage.ru_stime >= self.cpu_limit_s - 0.05:
            self.failure = self.failure or "timeout"
        elif mid_protocol or code < 0 or code > 128:
            self.failure = self.failure or "crash"
        return code

    def run_stdio(self, program, stdin_text):
        """Send the program, feed stdin, collect stdout until exit. Returns the exit code."""
        self.send({"program": program})
        os.close(self.to_child)
        self.to_child = None
        data = stdin_text.encode()
        stdin_fd = self.proc.stdin.fileno()
        os.set_blocking(stdin_fd, False)
        while self.out is not None or self.err is not None:
            if not data and stdin_fd is not None:
                self.proc.stdin.close()
                stdin_fd = None
            if self._pump(write_fd=stdin_fd)[1]:
                try:
                    data = data[os.write(stdin_fd, data[:1 << 16]):]
                except BlockingIOError:
                    pass
                except BrokenPipeError:  # it exited or closed stdin without reading all of it: fine
                    data = b""
        code = self._ended(within_s=float("inf"))
        if code is None:
            raise _SandboxGone()
        return code

    def close(self):
        """Kill everything the program started (its process group; bwrap: the PID namespace dies with it; the
        fallback as root: every process of its uid) and remove what it left. Idempotent, and never interrupted
        by the item's alarm (a pending one is raised when it is done)."""
        if self.closed:
            return
        with _alarm_held():
            self._close()
        self.closed = True

    def _close(self):
        for fd in (self.to_child, self.from_child):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.to_child = self.from_child = None
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                self.proc.wait(timeout=5)   # reaped: only the program's own processes can remain in the group
            for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                with contextlib.suppress(OSError):
                    stream and stream.close()
        _clean_up({"pgid": self.proc.pid if self.proc else None, "workdir": self.workdir,
                   "uid": self.uid if self.mode != "bwrap" else None})
        if self.proc is not None:   # the scorer must not kill this pgid later: once reaped, the number is reused
            workers.note({"closed": self.proc.pid})
        self.proc = self.workdir = None


def _clean_up(child):
    """Kill and remove what one sandbox left: its process group; the fallback's uid (its processes, and every
    file it owns: _remove_owned); its working directory. In a grading worker, which is a child subreaper, every
    process a sandbox started that outlived it (setsid, double fork, a setuid binary) became the worker's child:
    those are killed and reaped (cheap). Elsewhere the fallback's processes are found by their real uid in /proc."""
    if child.get("pgid"):
        _kill_group(child["pgid"])
    if not _kill_orphans() and child.get("uid") is not None:
        _kill_user(child["uid"])
    if child.get("uid") is not None:   # its processes are gone: nothing can make a file behind the sweep
        _remove_owned(child["uid"])
    if child.get("workdir"):   # the parent is ours; the tree below it is the program's (no recursion, no links)
        with contextlib.suppress(OSError):
            parent = os.open(os.path.dirname(child["workdir"]), DIRECTORY_FLAGS)
            try:
                _remove_tree(parent, os.path.basename(child["workdir"]))
            finally:
                os.close(parent)


def _writable_dirs():
    """Every directory where a uid that owns nothing and has no group can create an entry: world-writable (o+w)
    and reachable by others (o+x all the way down), on every writable mount except the kernel's own
    (KERNEL_FILESYSTEMS). Found by walking those mounts once per scoring process, the first time the fallback
    grades as root (a second or more on a big disk; the workers get the list with each item); cached."""
    if "writable" in _PROBED:
        return _PROBED["writable"]
    found, seen = set(), set()
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            mounts = [line.split() for line in f]
    except OSError:
        mounts = []
    for fields in mounts:
        sep = fields.index("-") if "-" in fields else -1
        if sep < 0 or fields[sep + 1] in KERNEL_FILESYSTEMS or "ro" in fields[5].split(","):
            continue
        top = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[4])   # \040 is a space
        try:
            device = os.stat(top).st_dev
            if not _reachable_by_others(top, need=stat.S_IXOTH):
                continue
        except OSError:
            continue
        stack = [top]
        while stack:
            folder = stack.pop()
            with contextlib.suppress(OSError):
                st = os.stat(folder, follow_symlinks=False)
                if (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
                if st.st_mode & stat.S_IWOTH:
                    found.add(folder)
                for entry in os.scandir(folder):
                    with contextlib.suppress(OSError):
                        if entry.is_dir(follow_symlinks=False):
                            sub = entry.stat(follow_symlinks=False)
                            if sub.st_dev == device and sub.st_mode & stat.S_IXOTH:   # other mounts: their own walk
                                stack.append(entry.path)
    _PROBED["writable"] = sorted(found)
    return _PROBED["writable"]


DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
REMOVE_BUDGET = 1 << 22   # entries one removal may unlink or move (a program's ~1M-inode flood fits)


def _remove_tree(parent_fd, name, uid=None):
    """Remove the directory `name` below the open directory parent_fd and everything in it, through directory
    descriptors only, so that no symlink is followed anywhere: a program cannot swap a path component for a
    link between a check and the removal (the race that made root unlink a file elsewhere). Iterative, not
    recursive (a program can nest directories deeper than Python's recursion limit, and shutil.rmtree then
    raised RecursionError in the scorer): each subdirectory's entries are moved up into the top directory until
    none is left, so at most two descriptors are open. uid: only a directory that uid owns is removed."""
    top = os.open(name, DIRECTORY_FLAGS, dir_fd=parent_fd)
    try:
        if uid is not None and os.fstat(top).st_uid != uid:
            return
        budget, moved = REMOVE_BUDGET, 0
        while budget > 0:
            found_dir = False
            with os.scandir(top) as entries:
                names = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
            for entry, is_dir in names:
                budget -= 1
                with contextlib.suppress(OSError):
                    if not is_dir:
                        os.unlink(entry, dir_fd=top)
                        continue
                    found_dir = True
                    with contextlib.suppress(OSError):
                        os.rmdir(entry, dir_fd=top)
                        continue
                    sub = os.open(entry, DIRECTORY_FLAGS, dir_fd=top)
                    try:
                        with os.scandir(sub) as inner:
                            for child in [e.name for e in inner]:
                                moved += 1
                                budget -= 1
                                os.rename(child, f".removed-{moved}", src_dir_fd=sub, dst_dir_fd=top)
                    finally:
                        os.close(sub)
            if not found_dir:
                break
    finally:
        os.close(top)
    with contextlib.suppress(OSError):
        os.rmdir(name, dir_fd=parent_fd)


def _remove_owned(uid):
    """Remove everything `uid` (a fallback sandbox's own, after its item) owns wherever it could have written:
    every entry it owns in the world-writable directories (_writable_dirs), and, recursively, in world-writable
    directories of others below them (made after the walk). A file it made can be nowhere else: it owns nothing,
    has no group, and creating or linking a name needs write access to the directory. Every step goes through
    directory descriptors opened with O_NOFOLLOW (never a path a program could have re-pointed) and nothing
    recurses (_remove_tree)."""
    stack, seen = [], set()
    for path in _writable_dirs():
        with contextlib.suppress(OSError):
            stack.append(os.open(path, DIRECTORY_FLAGS))
    while stack:
        folder = stack.pop()
        try:
            here = os.fstat(folder)
            if (here.st_dev, here.st_ino) in seen:
                continue
            seen.add((here.st_dev, here.st_ino))
            with os.scandir(folder) as listing:
                entries = [e.name for e in listing]
            for name in entries:
                with contextlib.suppress(OSError):
                    st = os.stat(name, dir_fd=folder, follow_symlinks=False)
                    if st.st_uid == uid and stat.S_ISDIR(st.st_mode):
                        _remove_tree(folder, name, uid)
                    elif st.st_uid == uid:
                        os.unlink(name, dir_fd=folder)
                    elif stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_IWOTH and st.st_mode & stat.S_IXOTH:
                        stack.append(os.open(name, DIRECTORY_FLAGS, dir_fd=folder))
        except OSError:
            pass
        finally:
            os.close(folder)


def _kill_orphans():
    """In a grading worker (a child subreaper whose only children are sandboxes): SIGKILL and reap its children
    until none is left. False where that does not apply (not a subreaper, or no /proc/PID/task/TID/children)."""
    if not _PROBED.get("subreaper"):
        return False
    me = os.getpid()
    for _ in range(500):
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        try:
            with open(f"/proc/{me}/task/{me}/children", "rb") as f:
                children = [int(pid) for pid in f.read().split()]
        except OSError:
            return False
        if not children:
            return True
        for pid in children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.001)
    return False


def _kill_group(pgid):
    """SIGKILL a process group, then again while a live (non-zombie) member remains: a fork racing the kill
    can leave a child behind. Bounded: a group that keeps growing for ~1 s is left to its CPU limit."""
    for _ in range(500):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        if not _live_members(pgid=pgid):
            return
        time.sleep(0.002)


def _live_members(pgid=None, uid=None):
    """pids of live (non-zombie) processes in group pgid, or whose REAL uid is uid (a setuid binary changes
    only the effective uid, and the owner of /proc/PID); from /proc ([] without it)."""
    members = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                if uid is not None:
                    with open(f"/proc/{entry}/status", "rb") as f:
                        real_uid = int(next(line for line in f if line.startswith(b"Uid:")).split()[1])
            except (OSError, StopIteration, ValueError, IndexError):
                continue
            if fields[0] != b"Z" and (int(fields[2]) == pgid if pgid is not None else real_uid == uid):
                members.append(int(entry))
    return members


def _kill_user(uid):
    """SIGKILL every process of uid (the fallback's own sandbox uid) until none is left; bounded like _kill_group."""
    for _ in range(500):
        pids = _live_members(uid=uid)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.002)


# ------------------------------------------------------------------------------------------------------------
# Memory the kernel holds for a program: one memory cgroup per grading worker, where the kernel offers one
# ------------------------------------------------------------------------------------------------------------
def _memory_cgroup_parent():
    """This process's own memory cgroup directory, when this uid can make child groups with a memory limit there:
    cgroup v2 with the memory controller enabled (or enableable) for children -- root's top group, a delegated
    subtree -- or cgroup v1's memory hierarchy. None otherwise."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            own = [line.rstrip("\n").split(":", 2) for line in f]
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return None
    for number, controllers, path in own:
        v2 = number == "0" and controllers == ""
        if not v2 and "memory" not in controllers.split(","):
            continue
        for fields in mounts:
            fstype, options = fields[fields.index("-") + 1], fields[fields.index("-") + 3].split(",")
            if not ((fstype == "cgroup2") if v2 else (fstype == "cgroup" and "memory" in options)):
                continue
            root, point = fields[3], fields[4]   # the mount shows the hierarchy from `root` down
            if not (path + "/").startswith(root.rstrip("/") + "/"):
                continue
            folder = point + path[len(root.rstrip("/")):]
            if not os.access(folder, os.W_OK):
                return None
            if v2:
                with contextlib.suppress(OSError), open(folder + "/cgroup.subtree_control", "r+") as f:
                    if "memory" not in f.read().split():
                        f.write("+memory")   # refused (EBUSY) where the group holds processes and is not the top
                with contextlib.suppress(OSError), open(folder + "/cgroup.subtree_control") as f:
                    return folder if "memory" in f.read().split() else None
                return None
            return folder
    return None


def _memory_cgroup():
    """This grading worker's memory cgroup for its sandboxes, made once: (path, descriptor of the file a process
    writes "0" to to join it), or None where the kernel offers none to this uid. Limit SANDBOX_MEMORY_MB, no swap (v2: the whole group is
    killed at the limit). The descriptor is opened here, by the worker, because a sandbox joins in its preexec
    hook, after its uid changed: the kernel checks the rights of whoever opened the file. Groups of workers that
    are gone are removed when a new worker makes its own, and by close_pool."""
    if "cgroup" in _PROBED:
        return _PROBED["cgroup"]
    _PROBED["cgroup"] = None
    parent = _memory_cgroup_parent()
    if parent is None:
        return None
    _remove_stale_cgroups(parent)
    path = os.path.join(parent, f"nano-code-{os.getpid()}")
    limit = str(SANDBOX_MEMORY_MB << 20)
    try:
        os.makedirs(path, exist_ok=True)
        v1 = os.path.exists(path + "/memory.limit_in_bytes")
        settings = [("memory.limit_in_bytes", limit), ("memory.memsw.limit_in_bytes", limit)] if v1 else \
            [("memory.max", limit), ("memory.swap.max", "0"), ("memory.oom.group", "1")]
        for name, value in settings:
            if os.path.exists(os.path.join(path, name)) or name in ("memory.limit_in_bytes", "memory.max"):
                with open(os.path.join(path, name), "w") as f:
                    f.write(value)
        # v1: "tasks", which moves the writing thread alone -- the whole process between fork and exec -- without
        # the kernel's process-wide lock and its RCU wait (~5 ms per sandbox under load); v2 has no such file
        join = path + ("/tasks" if v1 else "/cgroup.procs")
        _PROBED["cgroup"] = (path, os.open(join, os.O_WRONLY | os.O_CLOEXEC))
    except OSError:
        with contextlib.suppress(OSError):
            os.rmdir(path)
    return _PROBED["cgroup"]


def _remove_stale_cgroups(parent):
    """Remove the (empty) memory cgroups of grading workers that are gone."""
    with contextlib.suppress(OSError):
        for name in os.listdir(parent):
            if name.startswith("nano-code-") and name[10:].isdigit() and not os.path.exists(f"/proc/{name[10:]}"):
                with contextlib.suppress(OSError):
                    os.rmdir(os.path.join(parent, name))


# ------------------------------------------------------------------------------------------------------------
# Modes: probe, refuse, and say what holds
# ------------------------------------------------------------------------------------------------------------
def _probe(mode):
    """(works, why): one trivial program through the sandbox `mode`, in a grading worker; cached per process."""
    if mode not in _PROBED:
        if mode == "bwrap" and not shutil.which("bwrap"):
            _PROBED[mode] = (False, "bwrap is not installed")
        elif _seccomp_program() is None:
            _PROBED[mode] = (False, f"no seccomp filter: {_PROBED['seccomp_why']}")
        else:
            result = _grade_in_workers(["def f():\n    return 41 + 1\n"],
                                       [{"kind": "functional", "asserts": ["assert f() == 42"]}], 1, 10.0, mode, False)[0]
            _PROBED[mode] = (result["status"] == "passed",
                             f"{mode} probe: {result['status']} {result.get('detail', '')} (interpreter "
                             f"{sandbox_python()})")
    return _PROBED[mode]


def sandbox_mode(requested=None):
    """The mode items are graded in: 'bwrap' when the full sandbox runs a probe program here; 'rlimits' when
    that is requested (or 'auto' and bwrap fails); 'unavailable' when the requested mode cannot run (every item
    is then refused). requested: None reads SANDBOX. Cached per process."""
    requested = requested or SANDBOX
    if requested not in ("auto", "bwrap", "rlimits"):
        raise ValueError(f"sandbox must be auto, bwrap or rlimits, got {requested!r}")
    if requested in ("auto", "bwrap") and _probe("bwrap")[0]:
        return "bwrap"
    if requested == "bwrap":
        return "unavailable"
    return "rlimits" if _probe("rlimits")[0] else "unavailable"


def require_sandbox(allow_fallback=False, log=print):
    """Call once before a run grades code (train.py, eval.py). Returns the mode every later grade in this process
    uses, after logging it: 'bwrap' (the full sandbox). Without it, raises SystemExit saying why, unless
    allow_fallback (the user passed UNSAFE_FLAG): then 'rlimits', with a warning naming what is missing -- a
    program can then read the shipped datasets (tests and reference solutions included) and earn reward
    without solving anything. Never falls back silently."""
    global SANDBOX
    works, why = _probe("bwrap")
    if works:
        SANDBOX = "bwrap"
    elif not allow_fallback:
        raise SystemExit(f"code_reward.py: the full code sandbox does not work here ({why}). Install bubblewrap "
                         f"and libseccomp (setup.sh), or pass {UNSAFE_FLAG} to grade with the rlimits fallback, "
                         f"in which a program can read the shipped datasets (the tests and reference solutions "
                         f"included), reach the network and write where this user can.")
    else:
        works, why_not = _probe("rlimits")
        if not works:
            raise SystemExit(f"code_reward.py: neither the sandbox ({why}) nor the fallback ({why_not}) runs here")
        SANDBOX = "rlimits"
        missing = [claim for claim, holds in sandbox_guarantees("rlimits").items() if not holds]
        log(f"code_reward.py: WARNING: {why}; {UNSAFE_FLAG}: programs run with the rlimits fallback, which does "
            f"NOT give: {'; '.join(missing)}")
    log(f"code_reward.py: code is graded in sandbox mode {SANDBOX!r}")
    return SANDBOX


def sandbox_guarantees(mode):
    """What holds in each mode (the tables in the module docstring; tests check each claim in the modes that make
    it). The fallback run by root still gives each program an unused uid of its own (so RLIMIT_NPROC binds, its
    processes can be found and killed, its files swept, and other users' processes are out of reach); run by a
    user, the program is you. Where this uid may make a memory cgroup, every sandbox is in one."""
    isolated = mode == "bwrap"
    own_uid = isolated or os.geteuid() == 0
    cgroup = _memory_cgroup_parent() is not None
    return {"own process group, killed at the deadline": True, "fresh empty working directory": True,
            "empty environment": True, "CPU time, address space, file size, open files limited": True,
            "system calls and their arguments limited to an allowlist; sockets AF_UNIX streams only": True,
            "no memory outside the address space limit (memfd, SysV shared memory refused)": True,
            "no SysV IPC or message queue outlives it (refused)": True,
            "cannot gain privileges (no_new_privs: setuid binaries run as the program's uid)": True,
            "its verdict channel out of its reach; replies keyed to the item": True,
            "other items' sandboxes and channels out of its reach": own_uid,
            "what it sends is decoded and printed by one boundary that cannot fail": True,
            "the checker ignores the host's Python environment; asserts self-checked": True,
            "devices cannot be driven (ioctl allowlist: no GPU use)": True,
            "runs as an unprivileged uid of its own; process count limited; every process reaped": own_uid,
            "cannot signal other users' processes or read their environment": own_uid,
            "cannot change the grader (its files, processes or memory)": own_uid,
            "nothing it wrote outlives the item": own_uid,
            "kernel memory for it bounded (a memory cgroup, or each kind refused or limited)": isolated or cgroup,
            "no network": isolated,
            "nothing writable outside its directory; working directory size-limited": isolated and cgroup,
            "nothing writable at all but its working directory (read-only without a memory cgroup)": isolated,
            "working directory writable": cgroup or not isolated,
            "whole memory bounded, files it writes included": isolated,
            "host files invisible (tests, datasets, home)": isolated,
            "no host device visible (no GPU)": isolated,
            "cannot see or signal any process outside the sandbox": isolated}


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
    item_deadline, limit = sandbox.deadline, tests.get("time_limit_s")
    if limit:   # LiveCodeBench's protocol: loading the program, then each call, within the limit
        sandbox.deadline = min(item_deadline, time.monotonic() + limit)
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
            sandbox.deadline = min(item_deadline, time.monotonic() + limit)
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
    item_deadline, limit = sandbox.deadline, tests.get("time_limit_s") or rules["time_limit_s"]

    def call(name, *args):   # raises what the program raised (a failed test), or _SandboxGone
        sandbox.deadline = min(item_deadline, time.monotonic() + limit)
        try:
            return ProgramName(name, sandbox)(*args)
        finally:
            sandbox.deadline = item_deadline

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


_ALARM = {"held": 0, "rang": False}   # the item's alarm: whether it is held off, and whether it rang meanwhile


@contextlib.contextmanager
def _alarm(deadline):
    """Raise _Late in this (main) thread at `deadline`: the checker's own work on an item (decoding replies,
    running tests on what the program sent) never runs past it. A no-op outside the main thread."""
    def late(signum, frame):
        if _ALARM["held"]:
            _ALARM["rang"] = True
        else:
            raise _Late()

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGALRM, late)
    signal.setitimer(signal.ITIMER_REAL, max(1e-3, deadline - time.monotonic()))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        _ALARM["rang"] = False


@contextlib.contextmanager
def _alarm_held():
    """Hold the item's alarm off while starting or cleaning up a sandbox (a _Late in the middle would leave a
    process nobody knows of); it is raised when the block ends. (Not a signal mask: children would inherit it.)"""
    _ALARM["held"] += 1
    try:
        yield
    finally:
        _ALARM["held"] -= 1
        if not _ALARM["held"] and _ALARM["rang"]:
            _ALARM["rang"] = False
            raise _Late()


def _run_tests(program, tests, timeout_s, mode, partial):
    """Run `program` (source text) against `tests` in the sandbox `mode`, with the tests in THIS process (a
    grading worker). Returns {"status": passed|failed|timeout|crash|refused|no_program, "passed": int, "total":
    int, "score": float, "detail": str, "seconds": float, "sandbox": mode}."""
    start = time.monotonic()
    deadline = start + timeout_s
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
        with _alarm(deadline + 0.05):
            limit = tests.get("time_limit_s") if not channel else None
            for k in range(1 if channel else len(cases)):
                sandbox = _Sandbox("functional" if channel else "stdio", mode, limit or timeout_s, deadline, sandboxes)
                try:
                    if sandbox.failure:
                        raise _SandboxGone()
                    if tests.get("protocol"):
                        _check_protocol(sandbox, program, tests, partial, result)
                    elif tests["kind"] == "functional":
                        result["passed"], result["detail"] = _check_functional(sandbox, program, tests, partial)
                    else:
                        if limit:   # this case's run, once its sandbox has started
                            sandbox.deadline = min(deadline, time.monotonic() + limit)
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
def worker_start():
    """Run once in each grading worker before it says it is ready (workers.py): adopt the sandboxes' orphans so
    that they can be reaped (zombies would otherwise pile up under an init that does not reap, and count against
    RLIMIT_NPROC)."""
    with contextlib.suppress(OSError, AttributeError):
        _PROBED["subreaper"] = ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) == 0   # PR_SET_CHILD_SUBREAPER


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


def _grade(program, tests, timeout_s, mode, partial, writable_dirs=None):
    """The grading worker's op: one item, unless the self-check fails (then every item is refused). writable_dirs:
    the scorer's _writable_dirs() for the fallback as root (walked once per scoring process, outside any item's
    clock), None otherwise."""
    if writable_dirs is not None:
        _PROBED["writable"] = writable_dirs
    why = _self_check()
    if why:
        return {"status": "refused", "passed": 0, "score": 0.0, "detail": why, "sandbox": mode}
    return _run_tests(program, tests, timeout_s, mode, partial)


WORKER_OPS = {"grade": _grade}
STAT_KEYS = ("code_timeouts", "code_crashes", "sandbox_refusals", "code_no_program", "code_grader_errors")
_STATUS_STAT = {"timeout": "code_timeouts", "crash": "code_crashes", "refused": "sandbox_refusals",
                "no_program": "code_no_program", "grader_error": "code_grader_errors"}


def _clean_up_after_kill(notes):
    """After the scorer killed a grading worker: clean up after each sandbox it started and had not closed."""
    closed = {note["closed"] for note in notes if "closed" in note}
    for child in notes:
        if "pgid" in child and child["pgid"] not in closed:
            _clean_up(child)


def _grade_in_workers(programs, tests_list, workers_n, timeout_s, mode, partial):
    """_run_tests for each item in grading workers; a worker still busy at timeout + WORKER_GRACE_S is killed
    (and its sandbox cleaned up from here). timeout_s: one for all, or a list (one per item)."""
    pool = workers.get_pool("code_reward", WORKER_MEMORY_GB * 2**30)
    todo = [k for k, program in enumerate(programs) if program is not None]   # nothing to run: no worker
    results = [{"status": "no_program", "score": 0.0, "detail": "no program", "sandbox": mode}] * len(programs)
    timeouts = timeout_s if isinstance(timeout_s, list) else [timeout_s] * len(programs)
    sweep = _writable_dirs() if mode == "rlimits" and os.geteuid() == 0 and todo else None
    outcomes = pool.run("grade", [(programs[k], tests_list[k], timeouts[k], mode, partial, sweep) for k in todo],
                        workers_n, max((timeouts[k] for k in todo), default=0) + WORKER_GRACE_S,
                        on_kill=_clean_up_after_kill)
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


def score_code_batch(responses, tests_list, workers=2, timeout_s=DEFAULT_TIMEOUT_S, stats=None,
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
                                [item_timeout_s(t, timeout_s) for t in checked], mode, partial)
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
    parent = _memory_cgroup_parent()
    if parent is not None:
        _remove_stale_cgroups(parent)


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
    parser.add_argument("--sandbox", default=SANDBOX, choices=["auto", "bwrap", "rlimits"],
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
    scores = score_code_batch(responses, tests, args.workers, args.timeout_s, stats, args.partial, args.sandbox)
    print(f"{len(scores)} rows, mean reward {sum(scores) / max(len(scores), 1):.4f}, {time.time() - start:.1f}s, {stats}")


if __name__ == "__main__":
    main()
