"""The code sandbox: run an untrusted Python program in a process that cannot reach the host, with limits.

Two modes (code_reward.py grades in them; its checker, the trusted side, never runs where the program runs):
- "bwrap": bubblewrap's user, PID, network, IPC and UTS namespaces, a read-only view of /usr and the Python
  install, a size-limited working directory, five devices (no GPU, no pty), the seccomp allowlist below,
  rlimits, and a memory cgroup where the kernel offers one. Training and eval refuse to grade code without it
  unless the user passes UNSAFE_FLAG.
- "rlimits": the fallback where bwrap cannot start (Docker's default seccomp profile, many Kubernetes pods): the
  same allowlist and rlimits, no_new_privs, an unused uid of its own when run by root, a memory cgroup where
  offered, and Landlock (Linux >= 5.13): writes only in its working directory, reads only of the system, Python
  and the allowed modules, and (Landlock ABI >= 6) signals and abstract unix sockets only within its sandbox.
  Without Landlock it is the unsafe mode: the program writes wherever its uid may, and require_sandbox says so.
In both, an item is charged its own time (ItemClock): the CPU seconds of its processes and its checker, and the
time it sat idle (neither running nor waiting to run), each against its allowance: a neighbour's load delays
it without using up either. The pool (workers.py) kills the program's processes when that is spent even if the
checker is stuck, and cleans up after a killed worker (cgroups included) before replacing it.
A problem may allow third-party packages (its tests' "modules", from SANDBOX_MODULES: visible read-only, nothing
else of site-packages) and set its memory ("memory_mb": the cgroup's limit where there is one, else RLIMIT_AS).
What each mode promises, claim by claim: sandbox_guarantees(mode) and the tables above it.

Entry points:
    ItemClock(cpu_s)                                   one item's time; limit_test(s) narrows it for one test
    Sandbox(kind, mode, clock, opened, modules=(), memory_mb=None)   one sandboxed process and its pipes,
                                                       subclassed by the caller with its runner (RUNNER_SOURCE,
                                                       encode, recv)
    item_alarm(clock)                                  raises Late in the checker when the item's time is spent
    sandbox_mode(requested) / require_sandbox(allow_fallback) / sandbox_guarantees(mode)
    pool_limits(cpu_s)                                 what workers.Pool.run enforces for an item of cpu_s
    clean_up_after_kill(notes)                         the scorer's cleanup after it killed a grading worker
    worker_start()                                     once in each grading worker (reaps the sandboxes' orphans)
    python sandbox.py                                  print the mode and what it guarantees here
"""
import contextlib
import ctypes
import ctypes.util
import errno
import importlib.util
import json
import os
import resource
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

import workers

WALL_CAP_FACTOR = 10          # an item's wall clock never runs past this x its CPU allowance (idle time stops it first)
LOOK_EVERY_S = 0.1            # an item's processes are looked at this often (what a process waited dies with it)
KILL_MARGIN_S = 0.5           # the pool kills the program's processes this far past their item's allowance
CLEANUP_S = 60.0              # a worker removing what an item left may take this long past the item's wall clock
CPU_MARGIN_S = 1              # RLIMIT_CPU per process = ceil(allowance) + this (the kernel's own backstop)
MEMORY_MB = 512               # address space per sandboxed process (RLIMIT_AS); at most MAX_PROCESSES x this
MAX_PROCESSES = 8             # processes + threads per sandbox (RLIMIT_NPROC; binds in bwrap mode and as root)
MAX_FILE_MB = 16              # largest file a program may write (RLIMIT_FSIZE)
SANDBOX_DIR_MB = 64           # size of the program's tmpfs working directory (bwrap mode, with a memory cgroup)
SANDBOX_MEMORY_MB = 1024      # all memory of one sandbox, the kernel's for it included (memory cgroup, where offered)
MAX_MEMORY_MB = 16384         # the most a problem's tests may ask for ("memory_mb")
MAX_OPEN_FILES = 64           # RLIMIT_NOFILE
MAX_PENDING_SIGNALS = 64      # RLIMIT_SIGPENDING: queued signals and POSIX timers (kernel memory) of the program's uid
MAX_OUTPUT_BYTES = 8 << 20    # stdout kept from a stdio program (more fails the case)
MAX_REPLY_BYTES = 8 << 20     # one value sent back by a program's function (more fails the test)
SANDBOX = "bwrap"             # "bwrap": the full sandbox or refuse each item; "rlimits": the fallback (only with
                              # the user's consent: require_sandbox); "auto": bwrap when it works, else the fallback
SANDBOX_UID_BASE = 1_500_000_000  # when root, a program runs as uid SANDBOX_UID_BASE + its grading worker's pid (unused uids)
SANDBOX_SITE_PACKAGES = False # False: programs get the standard library only (python -S; ~6 ms faster start-up)
SANDBOX_PYTHON = None         # the programs' interpreter; None: this one, or /usr/bin/python3 (see sandbox_python)
SANDBOX_MODULES = ("numpy",)  # third-party packages a problem may let its program import (its tests' "modules")
MODULE_THREADS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # BLAS at import
WORKDIR_IN_SANDBOX = "/sandbox"
MODULES_IN_SANDBOX = "/modules"
DEVICES = ("null", "zero", "full", "random", "urandom")   # the only devices a program can open (no GPU, no pty)
PROBE_TIMEOUT_S = 30.0        # a probe program's limit (generous: the first start on a loaded machine is slow)
UNSAFE_FLAG = "--allow_unsafe_code_sandbox"   # the flag train.py / eval.py pass to require_sandbox(allow_fallback)

# The system calls a sandboxed Python program may make (seccomp allowlist; names resolved by libseccomp for this
# architecture, unknown names skipped). Anything else fails with ENOSYS ("not implemented": library fallbacks
# such as glibc's clone3 -> clone work). Some only with the arguments listed, each compared as a whole 64-bit
# value (high bits the kernel would ignore never pass): socket/socketpair only for the families (else
# EAFNOSUPPORT) and types below; clone only without namespace flags (else EPERM); fcntl, ioctl and prctl only for
# FCNTL_COMMANDS, IOCTL_REQUESTS and PRCTL_OPTIONS; prlimit64 only on itself (pid 0: another process's limits,
# its grading worker's included, are not its to change); rt_sigaction may not set SIGCHLD's action (ignoring it
# makes the kernel reap children unseen, and their CPU time would be charged to no item). Left out on purpose:
# ptrace, process_vm_*, keyctl & co, bpf, userfaultfd, perf_event_open, io_uring_*, memfd_create, SysV IPC,
# mq_*, mount & co, unshare, setns, chroot, set*id, kexec, modules, swap, reboot, time setting, mknod,
# open_by_handle_at, kcmp, pidfd_getfd, vmsplice, landlock_*, setsockopt (socket buffers stay at the system's
# default size), bind/listen/accept (no connection can wait in a queue without a descriptor), connect (no socket
# of the host -- a user's D-Bus session bus, an agent -- is reachable by name, abstract or not: Landlock does not
# cover connecting to a socket file), chmod & co and utime & co (Landlock does not cover a file's metadata: the
# fallback run by a user could chmod the user's files), setpriority (a user's trainer is not its to renice;
# itself at nice 19 would wait runnable, not idle, and stretch its item on a loaded machine), ...
ALLOWED_SYSCALLS = """
read write readv writev pread64 pwrite64 preadv preadv2 pwritev pwritev2 lseek close close_range dup dup2 dup3
open openat creat stat fstat lstat newfstatat statx fstatfs statfs access faccessat faccessat2 readlink
readlinkat getdents getdents64 getcwd chdir fchdir mkdir mkdirat rmdir unlink unlinkat rename renameat renameat2
link linkat symlink symlinkat truncate ftruncate fallocate fsync fdatasync fadvise64
flock fcntl pipe pipe2 umask sendfile copy_file_range splice tee
getxattr lgetxattr fgetxattr listxattr llistxattr flistxattr
brk mmap munmap mremap mprotect madvise mincore msync membarrier rseq
clone fork vfork execve execveat exit exit_group wait4 waitid kill tkill tgkill
getpid getppid gettid getpgid setpgid getpgrp getsid setsid getuid geteuid getgid getegid getgroups getresuid
getresgid prctl arch_prctl set_tid_address set_robust_list futex futex_waitv nanosleep clock_nanosleep
clock_gettime clock_getres gettimeofday time times getrusage sysinfo uname getrlimit setrlimit prlimit64
sched_yield sched_getaffinity sched_getparam sched_getscheduler sched_get_priority_max sched_get_priority_min
getpriority getcpu getrandom restart_syscall
rt_sigaction rt_sigprocmask rt_sigreturn rt_sigpending rt_sigsuspend rt_sigtimedwait sigaltstack pause alarm
setitimer getitimer timer_create timer_settime timer_gettime timer_getoverrun timer_delete timerfd_create
timerfd_settime timerfd_gettime signalfd signalfd4 eventfd eventfd2 poll ppoll select pselect6 epoll_create
epoll_create1 epoll_ctl epoll_wait epoll_pwait epoll_pwait2 ioctl pidfd_open pidfd_send_signal
socket socketpair getsockname getpeername sendto recvfrom sendmsg recvmsg
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
# prctl options a program may use (linux/prctl.h): its name, its parent-death signal, and reading its own state.
# Left out, among others: PR_FUTEX_HASH (a private futex hash of 2^24 slots made the kernel allocate 1 GB per
# process outside RLIMIT_AS), PR_SET_MM, PR_SET_VMA (names held per mapping), PR_SET_THP_DISABLE,
# PR_SET_CHILD_SUBREAPER, PR_SCHED_CORE, PR_SET_SYSCALL_USER_DISPATCH, PR_SET_IO_FLUSHER, PR_SET_SECCOMP.
PRCTL_OPTIONS = {"PR_SET_PDEATHSIG": 1, "PR_GET_PDEATHSIG": 2, "PR_GET_DUMPABLE": 3, "PR_SET_NAME": 15,
                 "PR_GET_NAME": 16, "PR_GET_SECCOMP": 21, "PR_CAPBSET_READ": 23, "PR_GET_TIMERSLACK": 30,
                 "PR_GET_NO_NEW_PRIVS": 39}
CLONE_NAMESPACE_FLAGS = 0x7E020080   # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME

PROBED = {}   # per process: probe results, the seccomp program, Landlock's ABI, cgroups, whether this worker reaps


# ------------------------------------------------------------------------------------------------------------
# The seccomp allowlist (libseccomp through ctypes: the library Debian, Ubuntu and Fedora ship with systemd)
# ------------------------------------------------------------------------------------------------------------
class _ArgCmp(ctypes.Structure):   # struct scmp_arg_cmp
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


_SCMP_ALLOW, _SCMP_NE, _SCMP_EQ, _SCMP_GT, _SCMP_MASKED_EQ = 0x7FFF0000, 1, 4, 6, 7


def _scmp_errno(code):
    return 0x00050000 | code


def _seccomp_program():
    """The allowlist as classic BPF bytes (cached per process), or None with the reason in PROBED when
    libseccomp is missing or refuses a rule."""
    if "seccomp" in PROBED:
        return PROBED["seccomp"]
    PROBED["seccomp"], PROBED["seccomp_why"] = None, ""
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2")
    except OSError as exc:
        PROBED["seccomp_why"] = f"libseccomp is not installed ({exc})"
        return None
    lib.seccomp_init.restype, lib.seccomp_init.argtypes = ctypes.c_void_p, [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_ArgCmp)]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(_scmp_errno(errno.ENOSYS))
    if not ctx:
        PROBED["seccomp_why"] = "seccomp_init failed"
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
                   "ioctl": [getattr(termios, name) for name in IOCTL_REQUESTS], "prlimit64": [0],
                   "prctl": list(PRCTL_OPTIONS.values())}
    argument = {"fcntl": 1, "ioctl": 1, "prlimit64": 0, "prctl": 0}   # the command, the pid, the option
    try:
        ok = all(rule(_SCMP_ALLOW, name) for name in ALLOWED_SYSCALLS
                 if name not in ("socket", "socketpair", "clone", "rt_sigaction", *conditional))
        for name, values in conditional.items():
            ok &= all(rule(_SCMP_ALLOW, name, (argument[name], _SCMP_EQ, value, 0)) for value in values)
        for name in ("socket", "socketpair"):   # arg 0: the family, arg 1: the type (low 4 bits; the rest: flags)
            ok &= all(rule(_SCMP_ALLOW, name, (0, _SCMP_EQ, family, 0), (1, _SCMP_MASKED_EQ, 0xF, kind))
                      for family in SOCKET_FAMILIES.values() for kind in SOCKET_TYPES.values())
            refused = [f for f in range(max(SOCKET_FAMILIES.values())) if f not in SOCKET_FAMILIES.values()]
            ok &= all(rule(_scmp_errno(errno.EAFNOSUPPORT), name, (0, _SCMP_EQ, f, 0)) for f in refused)
            ok &= rule(_scmp_errno(errno.EAFNOSUPPORT), name, (0, _SCMP_GT, max(SOCKET_FAMILIES.values()), 0))
        ok &= rule(_SCMP_ALLOW, "clone", (0, _SCMP_MASKED_EQ, CLONE_NAMESPACE_FLAGS, 0))
        ok &= rule(_scmp_errno(errno.EPERM), "unshare") and rule(_scmp_errno(errno.EPERM), "setns")
        # rt_sigaction(signal, new action, ...): any signal but SIGCHLD, and SIGCHLD's only to read it (no action)
        ok &= rule(_SCMP_ALLOW, "rt_sigaction", (0, _SCMP_NE, signal.SIGCHLD, 0))
        ok &= rule(_SCMP_ALLOW, "rt_sigaction", (0, _SCMP_EQ, signal.SIGCHLD, 0), (1, _SCMP_EQ, 0, 0))
        if not ok:
            PROBED["seccomp_why"] = "libseccomp refused a rule of the allowlist"
            return None
        with tempfile.TemporaryFile() as f:
            if lib.seccomp_export_bpf(ctx, f.fileno()) != 0:
                PROBED["seccomp_why"] = "libseccomp could not export the filter"
                return None
            f.seek(0)
            PROBED["seccomp"] = f.read()
    finally:
        lib.seccomp_release(ctx)
    return PROBED["seccomp"]


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


def _fallback_lock_down(program, cgroup, ruleset):
    """preexec_fn of the fallback's sandboxed process (between fork and exec, after the uid change): join the
    memory cgroup, set no_new_privs (a setuid binary it execs gains nothing), restrict itself to the Landlock
    ruleset (a descriptor, or None where the kernel has no Landlock) and load the seccomp allowlist; exit 127 if
    any fails, so the item is refused, never run weaker. The grading worker is single-threaded (fork-safe)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    libc.syscall.restype = ctypes.c_long
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    pr_set_no_new_privs, pr_set_seccomp, seccomp_mode_filter = 38, 22, 2

    join = _join_cgroup(cgroup)

    def lock_down():
        join()
        if libc.prctl(pr_set_no_new_privs, 1, None, 0, 0) != 0 or \
                ruleset is not None and libc.syscall(_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0 or \
                libc.prctl(pr_set_seccomp, seccomp_mode_filter, ctypes.addressof(fprog), 0, 0) != 0:
            os._exit(127)
    lock_down.keep = (buffer, fprog)   # alive until the fork
    return lock_down


# ------------------------------------------------------------------------------------------------------------
# Landlock: the fallback's filesystem (and, from ABI 6, signals and abstract sockets), enforced by the kernel
# ------------------------------------------------------------------------------------------------------------
_LANDLOCK_CREATE_RULESET, _LANDLOCK_ADD_RULE, _LANDLOCK_RESTRICT_SELF = 444, 445, 446   # x86_64, arm64 (generic)
_FS = {name: 1 << bit for bit, name in enumerate(
    "EXECUTE WRITE_FILE READ_FILE READ_DIR REMOVE_DIR REMOVE_FILE MAKE_CHAR MAKE_DIR MAKE_REG MAKE_SOCK "
    "MAKE_FIFO MAKE_BLOCK MAKE_SYM REFER TRUNCATE IOCTL_DEV".split())}
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
_READ = _FS["EXECUTE"] | _FS["READ_FILE"] | _FS["READ_DIR"]
_DEVICE = _FS["READ_FILE"] | _FS["WRITE_FILE"]   # no IOCTL_DEV: a device's own ioctls stay refused
_WORKDIR = ~(_FS["MAKE_CHAR"] | _FS["MAKE_BLOCK"] | _FS["MAKE_SOCK"] | _FS["MAKE_FIFO"] | _FS["IOCTL_DEV"])


class _RulesetAttr(ctypes.Structure):   # struct landlock_ruleset_attr
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):   # struct landlock_path_beneath_attr (packed)
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi():
    """The kernel's Landlock ABI version (7 on Linux 6.15+), or 0 where it has none (Linux < 5.13, or the LSM not
    enabled: then the fallback is the unsafe mode). Cached per process."""
    if "landlock" not in PROBED:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        PROBED["landlock"] = max(0, libc.syscall(_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                                                 ctypes.c_uint32(1)))   # LANDLOCK_CREATE_RULESET_VERSION
    return PROBED["landlock"]


def _landlock_ruleset(workdir, readable):
    """A Landlock ruleset (its descriptor; the caller closes it) for one fallback sandbox: every filesystem
    right its ABI knows is handled, and granted only as follows -- under `workdir` everything but making
    devices, sockets and fifos; the five DEVICES read and written (no ioctl); each of `readable` (the system's
    and Python's directories, the allowed modules) read and executed. Nothing else: no write, no read (/proc,
    /tmp, home, datasets), no pty. From ABI 4 TCP bind/connect are handled with no rule (none), from ABI 6
    signals and abstract unix sockets are scoped to the sandbox. None where the kernel has no Landlock."""
    abi = landlock_abi()
    if not abi:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    handled = _FS_BY_ABI.get(abi, _FS_BY_ABI[5])
    attr = _RulesetAttr(handled, 3 if abi >= 4 else 0, 3 if abi >= 6 else 0)   # net: bind+connect TCP
    ruleset = libc.syscall(_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                           ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    rules = [(workdir, _WORKDIR)] + [(f"/dev/{name}", _DEVICE) for name in DEVICES] + \
        [(path, _READ) for path in readable]
    try:
        for path, access in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue   # not on this machine (/lib32, ...)
            try:
                file_only = _FS["EXECUTE"] | _FS["WRITE_FILE"] | _FS["READ_FILE"] | _FS["TRUNCATE"] | _FS["IOCTL_DEV"]
                allowed = access & handled & (file_only if not stat.S_ISDIR(os.fstat(fd).st_mode) else ~0)
                beneath = _PathBeneath(allowed, fd)
                if libc.syscall(_LANDLOCK_ADD_RULE, ruleset, 1, ctypes.byref(beneath), 0) != 0:   # PATH_BENEATH
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
            finally:
                os.close(fd)
    except OSError:
        os.close(ruleset)
        raise
    return ruleset


# ------------------------------------------------------------------------------------------------------------
# Launching: bwrap's command line, the interpreter, the allowed modules
# ------------------------------------------------------------------------------------------------------------
def workdir_parent():
    """Where the fallback makes each sandbox's working directory: /dev/shm where it is a writable tmpfs (what a
    program writes there is memory, counted in its cgroup where there is one, and removing even a million
    entries takes seconds: on a disk's journal 50,000 took 105 s here), else TMPDIR."""
    if "workdir_parent" not in PROBED:
        PROBED["workdir_parent"] = tempfile.gettempdir()
        with contextlib.suppress(OSError), open("/proc/self/mounts", encoding="utf-8") as f:
            if any(line.split()[1:3] == ["/dev/shm", "tmpfs"] for line in f) and os.access("/dev/shm", os.W_OK):
                PROBED["workdir_parent"] = "/dev/shm"
    return PROBED["workdir_parent"]


def _python_installs():
    """The directories of the programs' interpreter and its standard library (read-only in every mode)."""
    python = sandbox_python()
    installs = {os.path.dirname(os.path.dirname(python))}
    if python == os.path.realpath(sys.executable):
        installs.add(sys.base_prefix)
        if SANDBOX_SITE_PACKAGES:
            installs.add(sys.prefix)
    return sorted(installs)


SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def bwrap_argv(command, seccomp_fd=None, writable=True, modules=None):
    """bwrap command line: new user/pid/net/ipc/uts namespaces, read-only /usr and Python install, as the working
    directory a size-limited tmpfs (writable: where a memory cgroup counts its inodes; else an empty read-only
    directory), the allowed modules read-only under MODULES_IN_SANDBOX (modules: {name: [host directories]}),
    no other host path, and no device but DEVICES (null, zero, full, random, urandom, bound one by one: no GPU
    whatever its mode on the host, no ptmx or devpts), and the seccomp allowlist (read from seccomp_fd). bwrap
    always runs as an unprivileged user (as root we start it as an unused uid), so the program is in a user
    namespace in which it cannot create another one (--disable-userns, and seccomp), RLIMIT_NPROC counts only its
    own processes, and it holds no capability outside its namespaces. command: what runs inside (argv)."""
    # --as-pid-1: the runner is the namespace's init, a direct child of bwrap (no bwrap init in between)
    argv = [shutil.which("bwrap") or "bwrap", "--as-pid-1", "--unshare-user", "--disable-userns", "--unshare-pid",
            "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent",
            "--new-session", "--cap-drop", "ALL", "--hostname", "sandbox", "--ro-bind", "/usr", "/usr"]
    for top in SYSTEM_DIRS[1:]:  # merged-/usr symlinks, or real dirs
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    argv += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    made = set()
    for target in _python_installs():
        if target == "/usr" or target.startswith("/usr/"):
            continue
        parts = target.split("/")[1:-1]
        for k in range(1, len(parts) + 1):  # its parents inside the sandbox: plain directories anyone can enter
            parent = "/" + "/".join(parts[:k])
            if parent not in made:
                argv += ["--perms", "0755", "--dir", parent]
                made.add(parent)
        argv += ["--ro-bind", os.path.realpath(target), target]
    for folders in (modules or {}).values():
        for folder in folders:
            argv += ["--ro-bind", folder, f"{MODULES_IN_SANDBOX}/{os.path.basename(folder)}"]
    # the root is a tmpfs that bwrap builds, owned by the sandbox user: read-only, so that the size-limited
    # working directory is the only place a program can write. A tmpfs's size bounds its data, not its inodes
    # (empty files and directories: ~1 KB of kernel memory each, millions per second), and bwrap cannot set
    # nr_inodes: without a memory cgroup to count them the working directory is read-only. /dev is a directory of
    # that root with the five devices bound in (bwrap's --dev would add a devpts instance and ptmx).
    workdir = ["--perms", "1777", "--size", str(SANDBOX_DIR_MB << 20), "--tmpfs", WORKDIR_IN_SANDBOX] if writable \
        else ["--dir", WORKDIR_IN_SANDBOX]
    argv += ["--proc", "/proc", "--dir", "/dev"]
    for name in DEVICES:
        argv += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        argv += ["--symlink", target, f"/dev/{name}"]
    argv += [*workdir, "--remount-ro", "/", "--chdir", WORKDIR_IN_SANDBOX]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    return argv + command


def python_command(source, modules=None):
    """python in isolated mode (no PYTHON* variables, no user site directory, no script directory on sys.path)
    running `source`; modules ({name: package directory as the sandbox sees it}) are imported first, by path,
    with one BLAS thread (MODULE_THREADS: their libraries read it as they load; the runner then empties the
    environment): the program's `import numpy` finds them loaded, and nothing else of site-packages."""
    flags = ["-I"] if SANDBOX_SITE_PACKAGES else ["-I", "-S"]
    if modules:
        source = (f"import os as _o, sys as _s, importlib.util as _u\n_o.environ.update({MODULE_THREADS!r})\n"
                  f"for _n, _p in {sorted(modules.items())!r}:\n"
                  "    _m = _u.spec_from_file_location(_n, _p + '/__init__.py', submodule_search_locations=[_p])\n"
                  "    _s.modules[_n] = _x = _u.module_from_spec(_m)\n"
                  "    _m.loader.exec_module(_x)\n"
                  "del _o, _s, _u, _n, _p, _m, _x\n") + source
    return [sandbox_python()] + flags + ["-c", source]


def module_dirs(names):
    """{name: [its package directory, and the directory of the shared libraries its wheel ships (numpy.libs)]}
    for allowed modules, as this interpreter finds them. Raises ValueError saying why a module cannot be given
    to the sandbox: not in SANDBOX_MODULES, not installed, built for another Python, or (as root) not readable by
    the sandbox's uid."""
    found = {}
    for name in names:
        if name not in SANDBOX_MODULES:
            raise ValueError(f"module {name!r} is not one a program may import (SANDBOX_MODULES)")
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise ValueError(f"module {name!r} is not installed for the grading workers' Python")
        package = os.path.realpath(list(spec.submodule_search_locations)[0])
        libs = os.path.join(os.path.dirname(package), f"{name}.libs")
        found[name] = [package] + ([libs] if os.path.isdir(libs) else [])
    if found and _sandbox_python_version() != sys.version_info[:2]:
        raise ValueError(f"{', '.join(found)} is installed for Python {'.'.join(map(str, sys.version_info[:2]))}; "
                         f"the sandbox runs {sandbox_python()}")
    if found and os.geteuid() == 0:
        for folder in [f for folders in found.values() for f in folders]:
            if not _reachable_by_others(folder, need=stat.S_IROTH | stat.S_IXOTH):
                raise ValueError(f"{folder} is not readable by the sandbox's uid")
    return found


def _sandbox_python_version():
    if "python_version" not in PROBED:
        if sandbox_python() == os.path.realpath(sys.executable):
            PROBED["python_version"] = sys.version_info[:2]
        else:
            out = subprocess.run([sandbox_python(), "-I", "-S", "-c", "import sys; print(*sys.version_info[:2])"],
                                 capture_output=True, text=True, timeout=60, env={})
            PROBED["python_version"] = tuple(int(x) for x in out.stdout.split()) or None
    return PROBED["python_version"]


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
    if "python" not in PROBED:
        PROBED["python"] = _default_python()
    return PROBED["python"]


def _default_python():
    exe = os.path.realpath(sys.executable)
    if os.geteuid() == 0 and not (_reachable_by_others(exe) and _reachable_by_others(sys.base_prefix)):
        for other in ("/usr/bin/python3", "/usr/local/bin/python3"):
            if os.path.exists(other) and _reachable_by_others(other):
                return os.path.realpath(other)
    return exe


class SandboxGone(BaseException):
    """The sandboxed process is gone or late. A BaseException so that test code's `except Exception` cannot
    swallow it (and a flag on the channel catches a bare `except:`)."""


class Late(BaseException):
    """The item's time ran out while the checker itself was busy (raised by its alarm)."""


# ------------------------------------------------------------------------------------------------------------
# An item's time: its own CPU seconds and idle seconds, and a wall-clock cap
# ------------------------------------------------------------------------------------------------------------
def backstop_s(cpu_s):
    """The wall clock an item of cpu_s may never pass, whatever it does (the pool's last resort for a worker that
    is stuck without using CPU): WALL_CAP_FACTOR x cpu_s."""
    return WALL_CAP_FACTOR * cpu_s


def pool_limits(cpu_s):
    """(CPU seconds, wall seconds) past which workers.Pool kills the program's processes of an item of cpu_s,
    whatever its checker is doing: its allowance and its wall cap, plus KILL_MARGIN_S (the worker stops its own
    sandboxes at the allowance; this is for a worker held in C code)."""
    return cpu_s + KILL_MARGIN_S, backstop_s(cpu_s) + KILL_MARGIN_S


class ItemClock:
    """One item's time in a grading worker, charged to the item alone. Two budgets, each of cpu_s seconds:
    - CPU: the CPU seconds of this worker's process tree since the item began (the checker's own work and every
      process of its sandboxes, reaped or not: workers.process_tree);
    - idle: the seconds in which no process of the item ran or waited to run (wall clock minus the time they
      spent running or runnable, /proc's schedstat), for a program that sleeps or blocks.
    A neighbour that takes the machine delays this item's processes (they wait, runnable), so it uses up neither
    budget: "timeout" means the item used its CPU allowance, or sat idle as long. The wall clock is only a cap
    (backstop_s). A test's own limit (LiveCodeBench's per-test seconds) narrows all three until the next test
    (limit_test); the pool is told each narrowing (a note), so that it enforces the same limits."""

    def __init__(self, cpu_s):
        self.start, self.cores = time.monotonic(), max(1, len(os.sched_getaffinity(0)))
        me = os.getpid()
        self.base, self.peak, self.idle = self._own(), 0.0, 0.0
        tree = workers.process_tree(me, waits=True)
        self.last = {pid: cpu + waited for pid, (_, cpu, waited) in tree.items()}
        self.last_cpu, self.reaped = {pid: cpu for pid, (_, cpu, _) in tree.items()}, os.times()[2:4]
        self.item_cpu, self.item_wall = cpu_s, self.start + backstop_s(cpu_s)
        self.cpu_until, self.idle_until, self.wall_until = cpu_s, cpu_s, self.item_wall
        self.last_look, self.next_look, self.narrowed = self.start, None, False

    @staticmethod
    def _own():
        own, children = os.times()[:2], os.times()[2:4]   # this process, and the children it reaped
        return sum(own) + sum(children)

    def _measure(self):
        """(CPU seconds used, {pid: (parent, CPU seconds, wait seconds)}) of this worker's tree, the worker's CPU
        counted since the item began."""
        me = os.getpid()
        tree = workers.process_tree(me, waits=True)
        return self._own() - self.base + sum(cpu for pid, (_, cpu, _) in tree.items() if pid != me), tree

    def used(self, _tree=None):
        """CPU seconds charged to the item so far: this worker's, and its descendants' (live ones from /proc).
        The most ever read, since a PID namespace's init that dies reaps its processes with their times (bwrap's),
        of two readings in a row: a child reaped between two /proc reads is counted twice in one of them."""
        first, tree = self._measure()
        if first > self.peak:
            second, tree = self._measure()
            self.peak = max(self.peak, min(first, second))
        if _tree is not None:
            _tree.update(tree)
        return self.peak

    def _look(self):
        """Measure now: CPU used, and the idle time since the last look (the interval minus the time any process
        of the tree ran or waited to run in it, each process's own since it was last seen)."""
        now, tree, reaped = time.monotonic(), {}, os.times()[2:4]
        used = self.used(tree)
        busy = {pid: cpu + waited for pid, (_, cpu, waited) in tree.items()}
        cpu = {pid: seconds for pid, (_, seconds, _) in tree.items()}
        active = sum(max(0.0, value - self.last.get(pid, 0.0)) for pid, value in busy.items())
        # processes reaped since the last look ran for the CPU the worker's children times gained, less what was
        # seen of them alive (a stdio case's sandbox is often born and gone between two looks)
        gone = sum(seconds for pid, seconds in self.last_cpu.items() if pid not in cpu)
        active += max(0.0, sum(reaped) - sum(self.reaped) - gone)
        self.idle += max(0.0, now - self.last_look - active)
        self.last, self.last_cpu, self.reaped, self.last_look = busy, cpu, reaped, now
        return used

    def limit_test(self, limit_s=None):
        """From now until the next call: at most limit_s more CPU seconds, limit_s more idle seconds and
        backstop_s(limit_s) more wall seconds, within the item's own. None: back to the item's limits."""
        now = time.monotonic()
        if limit_s is None:
            self.cpu_until, self.idle_until, self.wall_until = self.item_cpu, self.item_cpu, self.item_wall
            self.next_look = None
        else:
            used = self._look()
            self.cpu_until = min(self.item_cpu, used + limit_s)
            self.idle_until = min(self.item_cpu, self.idle + limit_s)
            self.wall_until = min(self.item_wall, now + backstop_s(limit_s))
            self.next_look = now + min((self.cpu_until - used) / self.cores, self.idle_until - self.idle, LOOK_EVERY_S)
        if limit_s is not None or self.narrowed:   # the pool enforces what the worker does
            cpu_s, wall_s = pool_limits(self.cpu_until)[0], self.wall_until - self.start + KILL_MARGIN_S
            workers.note({"limits": [cpu_s, wall_s]})
        self.narrowed = limit_s is not None

    def spent(self):
        """True when the test's (or item's) CPU time, idle time or wall cap is used up. The tree is looked at
        only when a budget could have run out since the last look (CPU: at most `cores` CPU seconds per second
        of wall clock; idle: at most one idle second per second)."""
        now = time.monotonic()
        if now >= self.wall_until:
            return True
        if self.next_look is None:
            self.next_look = self.last_look + min(self.cpu_until / self.cores, self.idle_until - self.idle,
                                                  LOOK_EVERY_S)
        if now < self.next_look:
            return False
        used = self._look()
        self.next_look = self.last_look + max(0.01, min((self.cpu_until - used) / self.cores,
                                                        self.idle_until - self.idle, LOOK_EVERY_S))
        return used >= self.cpu_until or self.idle >= self.idle_until

    def wait_s(self):
        """How long one may wait before spent() could change."""
        now = time.monotonic()
        return max(0.0, min(self.wall_until, now if self.next_look is None else self.next_look) - now)


_ALARM = {"held": 0, "rang": False}   # the item's alarm: whether it is held off, and whether it rang meanwhile


@contextlib.contextmanager
def item_alarm(clock):
    """Raise Late in this (main) thread when the item's time is spent while the checker itself works (decoding
    replies, running tests on what the program sent): at its wall cap (ITIMER_REAL), and once this process
    has used the item's remaining CPU time itself (ITIMER_PROF: by then the whole tree has, at least). While the
    checker waits for the program, Sandbox watches the clock. A no-op outside the main thread."""
    def late(signum, frame):
        if _ALARM["held"]:
            _ALARM["rang"] = True
        else:
            raise Late()

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGALRM, late), signal.signal(signal.SIGPROF, late)
    signal.setitimer(signal.ITIMER_REAL, max(1e-3, clock.item_wall - time.monotonic()))
    signal.setitimer(signal.ITIMER_PROF, max(1e-3, clock.item_cpu))   # the item has just begun: used() ~ 0
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGALRM, previous[0])
        signal.signal(signal.SIGPROF, previous[1])
        _ALARM["rang"] = False


@contextlib.contextmanager
def alarm_held():
    """Hold the item's alarm off while starting or cleaning up a sandbox (a Late in the middle would leave a
    process nobody knows of); it is raised when the block ends. (Not a signal mask: children would inherit it.)"""
    _ALARM["held"] += 1
    try:
        yield
    finally:
        _ALARM["held"] -= 1
        if not _ALARM["held"] and _ALARM["rang"]:
            _ALARM["rang"] = False
            raise Late()


# ------------------------------------------------------------------------------------------------------------
# One sandboxed process, from the checker's side
# ------------------------------------------------------------------------------------------------------------
class Sandbox:
    """One sandboxed process and its pipes: request/reply lines (functional), stdin/stdout (stdio), and its
    merged stdout/stderr tail for diagnostics. failure: None, or "timeout" / "crash" / "refused" / "too_large".
    clock: its item's ItemClock (every wait below stops when it is spent). modules: allowed packages the program
    may import (SANDBOX_MODULES); memory_mb: its memory (the cgroup's limit where there is one, else RLIMIT_AS).
    The caller subclasses it with its runner: RUNNER_SOURCE (the Python source every sandboxed process runs, with
    argv: kind, "R,W" (its pipe descriptors), its limits as one message), encode (message -> one line of text)
    and recv (the next message, decoded; None at EOF when allow_eof)."""
    RUNNER_SOURCE = None
    encode = None

    def __init__(self, kind, mode, clock, opened, *, modules=(), memory_mb=None):
        opened.append(self)   # first: whatever interrupts the start, the caller closes this sandbox
        self.clock, self.kind, self.mode, self.failure, self.closed = clock, kind, mode, None, False
        self.buffer, self.tail, self.stdout = bytearray(), bytearray(), bytearray()
        self.proc = self.workdir = self.uid = self.to_child = self.from_child = self.out = self.err = None
        clock.limit_test(None)   # a new sandbox (the next stdio case) starts under the item's own limits
        program = _seccomp_program()
        if program is None or mode not in ("bwrap", "rlimits"):
            self.failure = "refused"
            return
        try:
            found = module_dirs(modules)
        except ValueError as exc:
            self.failure, self.tail = "refused", bytearray(str(exc).encode())
            return
        try:
            cgroup = _memory_cgroup(memory_mb or SANDBOX_MEMORY_MB)
        except OSError as exc:
            self.failure, self.tail = "refused", bytearray(f"the memory cgroup refused its limit ({exc})".encode())
            return
        address_space = memory_mb or MEMORY_MB   # without a cgroup RLIMIT_AS is the bound; with one, the cgroup
        if memory_mb and cgroup is not None:
            address_space = max(MEMORY_MB, 4 * memory_mb)   # numpy maps more address space than it touches
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]   # a child cannot be given more than its grading worker has
        if hard != resource.RLIM_INFINITY:
            address_space = min(address_space, hard >> 20)
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        inherited, ruleset = [to_child_r, from_child_w], None
        limits = {"RLIMIT_CPU": int(clock.item_cpu + 0.999) + CPU_MARGIN_S, "RLIMIT_AS": address_space << 20,
                  "RLIMIT_FSIZE": MAX_FILE_MB << 20, "RLIMIT_NOFILE": MAX_OPEN_FILES, "RLIMIT_CORE": 0,
                  "RLIMIT_SIGPENDING": MAX_PENDING_SIGNALS}
        user = {}
        if os.geteuid() == 0:  # a program never runs as root: an unused uid of its own, no groups
            self.uid = SANDBOX_UID_BASE + os.getpid()
            user = {"user": self.uid, "group": self.uid, "extra_groups": []}
        if mode == "bwrap" or self.uid is not None:
            limits["RLIMIT_NPROC"] = MAX_PROCESSES  # bwrap: counted in its user namespace; as root: for its uid
            clock.cores = min(clock.cores, MAX_PROCESSES + 1)   # the fastest the item can use CPU: its tasks, checker
        try:
            if mode == "bwrap":
                inside = {name: f"{MODULES_IN_SANDBOX}/{name}" for name in found}
                command = python_command(self.RUNNER_SOURCE, inside)
                seccomp_r, seccomp_w = os.pipe()   # bwrap reads the filter from a descriptor (a few KB: a pipe's)
                os.write(seccomp_w, program)
                os.close(seccomp_w)
                inherited.append(seccomp_r)
                argv = bwrap_argv(command + [kind, f"{to_child_r},{from_child_w}", self.encode(limits)], seccomp_r,
                                  writable=cgroup is not None, modules=found)
                cwd, lock_down = "/", _join_cgroup(cgroup) if cgroup is not None else None
            else:
                self.workdir = cwd = tempfile.mkdtemp(prefix="nano-code-", dir=workdir_parent())
                if self.uid is not None:
                    os.chown(cwd, self.uid, self.uid)
                readable = [*SYSTEM_DIRS, "/etc/ld.so.cache", *_python_installs(), *(f for fs in found.values()
                                                                                      for f in fs)]
                ruleset = _landlock_ruleset(cwd, readable)
                command = python_command(self.RUNNER_SOURCE, {name: folders[0] for name, folders in found.items()})
                argv = command + [kind, f"{to_child_r},{from_child_w}", self.encode(limits)]
                lock_down = _fallback_lock_down(program, cgroup, ruleset)
            stdio = subprocess.PIPE if kind == "stdio" else subprocess.DEVNULL
            with alarm_held():   # no Late between the fork and self.proc
                self.proc = subprocess.Popen(argv, stdin=stdio, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE if kind == "stdio" else subprocess.STDOUT,
                                             pass_fds=inherited, cwd=cwd, env={}, start_new_session=True,
                                             preexec_fn=lock_down, **user)
        except (OSError, subprocess.SubprocessError):  # no interpreter / no bwrap binary / lock-down failed
            self.failure = "refused"
        finally:
            for fd in inherited + ([ruleset] if ruleset is not None else []):
                os.close(fd)
        if self.proc is None:
            return
        # the scorer cleans up after this sandbox itself if it has to kill the worker mid-item
        workers.note({"pgid": self.proc.pid, "uid": self.uid if mode != "bwrap" else None, "workdir": self.workdir,
                      "cgroup": cgroup[0] if cgroup else None})
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

    def limit_test(self, limit_s):
        """This test (a call, a stdio case) may use at most limit_s more CPU seconds (the clock's limit_test)."""
        self.clock.limit_test(limit_s)

    # -- I/O within the item's time; the program's output is drained all the time so that it never blocks on it --
    def _pump(self, read_fd=None, write_fd=None):
        """Wait until read_fd is readable or write_fd writable (never past the item's time: SandboxGone), draining
        the program's stdout/stderr meanwhile. Returns (read_fd is readable, write_fd is writable)."""
        if self.clock.spent():
            self.failure = self.failure or "timeout"
            raise SandboxGone()
        outputs = [fd for fd in (self.out, self.err) if fd is not None]
        readable, writable, _ = select.select(outputs + ([read_fd] if read_fd is not None else []),
                                              [write_fd] if write_fd is not None else [], [],
                                              min(self.clock.wait_s(), 1.0))
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
                raise SandboxGone()
        else:
            self.tail = (self.tail + chunk)[-4096:]

    def send(self, message):
        data = (self.encode(message) + "\n").encode()
        while data:
            if self._pump(write_fd=self.to_child)[1]:
                try:
                    data = data[os.write(self.to_child, data):]
                except BlockingIOError:
                    pass
                except BrokenPipeError:
                    self._ended(within_s=1.0, mid_protocol=True)
                    raise SandboxGone() from None

    def read_line(self, allow_eof=False):
        """The next line the runner sent (bytes, without its newline); None at EOF when allow_eof."""
        while b"\n" not in self.buffer:
            try:
                readable = self._pump(read_fd=self.from_child)[0]
            except SandboxGone:
                if allow_eof:
                    return None
                raise
            if readable:
                chunk = os.read(self.from_child, 1 << 20)
                if not chunk:
                    self._ended(within_s=1.0, mid_protocol=True)
                    if allow_eof:
                        return None
                    raise SandboxGone()
                self.buffer += chunk
                if len(self.buffer) > MAX_REPLY_BYTES:
                    self.failure = self.failure or "too_large"
                    raise SandboxGone()
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer[:] = rest
        return line

    def _ended(self, within_s, mid_protocol=False):
        """The program's side closed: wait (at most within_s, never past the item's time) for its exit, and say
        what ended it, from what the trusted side measured: "timeout" when the item's time is spent (its
        processes and checker used their CPU allowance: ItemClock), else "crash" for a signal, an abnormal exit
        status, or any exit in the middle of the protocol -- whatever status the program chose. Returns the exit
        code, or None if it is still running."""
        until = time.monotonic() + within_s
        while True:
            pid, status = os.waitpid(self.proc.pid, os.WNOHANG)
            if pid:
                break
            if self.clock.spent() or time.monotonic() > until:
                self.failure = self.failure or ("timeout" if self.clock.spent() else "crash")
                return None
            time.sleep(0.002)
        code = self.proc.returncode = os.waitstatus_to_exitcode(status)
        if self.clock.spent():   # RLIMIT_CPU (the allowance rounded up + CPU_MARGIN_S) is past it too
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
            raise SandboxGone()
        return code

    def close(self):
        """Kill everything the program started (its process group; bwrap: the PID namespace dies with it; the
        fallback: every process below the worker, its subreaper; as root: every process of its uid) and remove
        its working directory. Idempotent, and never interrupted by the item's alarm (a pending one is raised
        when it is done)."""
        if self.closed:
            return
        with alarm_held():
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


# ------------------------------------------------------------------------------------------------------------
# Leftovers: nothing of an item outlives it, after a normal end or a kill
# ------------------------------------------------------------------------------------------------------------
def _clean_up(child):
    """Kill and remove what one sandbox left: its process group; every process below the grading worker (a
    child subreaper: whatever a sandbox started that outlived it -- setsid, double fork, a setuid binary --
    became its child), or else, as root, every process of the sandbox's uid (from /proc); its working directory.
    Nothing else: the program could write nowhere else (bwrap's tmpfs; the fallback's Landlock)."""
    if child.get("pgid"):
        _kill_group(child["pgid"])
    if not _kill_orphans() and child.get("uid") is not None:
        _kill_user(child["uid"])
    if child.get("workdir"):   # the parent is ours; the tree below it is the program's (no recursion, no links)
        workers.note({"cleaning": True})   # the pool does not count this against the item (it is not its CPU)
        with contextlib.suppress(OSError):
            parent = os.open(os.path.dirname(child["workdir"]), DIRECTORY_FLAGS)
            try:
                _remove_tree(parent, os.path.basename(child["workdir"]))
            finally:
                os.close(parent)
        workers.note({"cleaning": False})


def clean_up_after_kill(notes):
    """After the scorer killed a grading worker (workers.Pool: its descendants first): clean up after each
    sandbox it started and had not closed, then empty and remove the worker's cgroups -- all of it before the
    pool starts a replacement."""
    closed = {note["closed"] for note in notes if "closed" in note}
    for child in notes:
        if "pgid" in child and child["pgid"] not in closed:
            _clean_up(child)
    for group in dict.fromkeys(note["cgroup"] for note in notes if note.get("cgroup")):
        _remove_cgroup(group)


def worker_start():
    """Run once in each grading worker before it says it is ready (workers.py): adopt the sandboxes' orphans so
    that they can be reaped (zombies would otherwise pile up under an init that does not reap, and count against
    RLIMIT_NPROC), and so that every process an item starts stays below its worker (ItemClock, Pool's kills)."""
    with contextlib.suppress(OSError, AttributeError):
        PROBED["subreaper"] = ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) == 0   # PR_SET_CHILD_SUBREAPER


DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
REMOVE_BUDGET = 1 << 22   # entries one removal may unlink or move (a program's ~1M-inode flood fits)


def _remove_tree(parent_fd, name):
    """Remove the directory `name` below the open directory parent_fd and everything in it, through directory
    descriptors only, so that no symlink is followed anywhere: a program cannot swap a path component for a
    link between a check and the removal (the race that made root unlink a file elsewhere). Iterative, not
    recursive (a program can nest directories deeper than Python's recursion limit, and shutil.rmtree then
    raised RecursionError in the scorer): each subdirectory's entries are moved up into the top directory until
    none is left, so at most two descriptors are open."""
    top = os.open(name, DIRECTORY_FLAGS, dir_fd=parent_fd)
    try:
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


def _kill_orphans():
    """In a grading worker (a child subreaper whose only children are sandboxes): SIGKILL and reap its children
    until none is left. False where that does not apply (not a subreaper, or no /proc/PID/task/TID/children)."""
    if not PROBED.get("subreaper"):
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
def memory_cgroup_parent():
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


def _memory_cgroup(limit_mb):
    """This grading worker's memory cgroup for its sandboxes, made once, with its limit set to limit_mb (the item's
    memory: its tests' memory_mb or SANDBOX_MEMORY_MB; no swap; v2: the whole group is killed at the limit): (path,
    descriptor of the file a process writes "0" to to join it), or None where the kernel offers none to this uid;
    OSError if the group cannot take the limit (the item is refused, never run without it). The descriptor is opened
    here, by the worker, because a sandbox joins in its preexec hook, after its uid changed: the kernel checks the
    rights of whoever opened the file. Groups of workers that are gone are removed when a new worker makes its own,
    after a kill (clean_up_after_kill), and by close_pool."""
    if "cgroup" not in PROBED:
        PROBED["cgroup"], PROBED["cgroup_mb"] = None, None
        parent = memory_cgroup_parent()
        if parent is None:
            return None
        remove_stale_cgroups(parent)
        path = os.path.join(parent, f"nano-code-{os.getpid()}")
        try:
            os.makedirs(path, exist_ok=True)
            v1 = os.path.exists(path + "/memory.limit_in_bytes")
            if not v1:
                for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                    if os.path.exists(os.path.join(path, name)):
                        with open(os.path.join(path, name), "w") as f:
                            f.write(value)
            # v1: "tasks", which moves the writing thread alone -- the whole process between fork and exec --
            # without the kernel's process-wide lock and its RCU wait (~5 ms per sandbox under load)
            join = path + ("/tasks" if v1 else "/cgroup.procs")
            PROBED["cgroup"] = (path, os.open(join, os.O_WRONLY | os.O_CLOEXEC))
        except OSError:
            with contextlib.suppress(OSError):
                os.rmdir(path)
            return None
    if PROBED["cgroup"] is not None and PROBED["cgroup_mb"] != limit_mb:
        path, limit = PROBED["cgroup"][0], str(limit_mb << 20)
        names = ["memory.max"] if os.path.exists(path + "/memory.max") else \
            ["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"]   # v1: memory <= memory+swap at every step
        if PROBED["cgroup_mb"] is not None and limit_mb > PROBED["cgroup_mb"]:
            names.reverse()
        for attempt in range(2):
            try:
                for name in names:
                    if os.path.exists(os.path.join(path, name)):
                        with open(os.path.join(path, name), "w") as f:
                            f.write(limit)
                break
            except OSError:   # v1: usage (page cache of earlier sandboxes) above the new limit: reclaim it once
                if attempt or not os.path.exists(path + "/memory.force_empty"):
                    raise
                with open(path + "/memory.force_empty", "w") as f:
                    f.write("0")
        PROBED["cgroup_mb"] = limit_mb
    return PROBED["cgroup"]


def _remove_cgroup(path, within_s=5.0):
    """SIGKILL whatever is left in a (dead worker's) cgroup until it is empty, then remove it. Bounded."""
    until = time.monotonic() + within_s
    while time.monotonic() < until:
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            pass
        try:
            with open(os.path.join(path, "cgroup.procs")) as f:
                pids = [int(p) for p in f.read().split()]
        except OSError:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)


def remove_stale_cgroups(parent):
    """Remove the memory cgroups of grading workers that are gone (killing what is left in them)."""
    with contextlib.suppress(OSError):
        for name in os.listdir(parent):
            if name.startswith("nano-code-") and name[10:].isdigit() and not os.path.exists(f"/proc/{name[10:]}"):
                _remove_cgroup(os.path.join(parent, name))


# ------------------------------------------------------------------------------------------------------------
# Modes: probe, refuse, and say what holds
# ------------------------------------------------------------------------------------------------------------
class _ProbeSandbox(Sandbox):
    """A sandbox whose runner sets its limits as a real runner does, says hello, and answers one number."""
    RUNNER_SOURCE = ("import json, os, resource, sys\n"
                     "for name, value in json.loads(sys.argv[3]).items():\n"
                     "    resource.setrlimit(getattr(resource, name), (value, value + (name == 'RLIMIT_CPU')))\n"
                     "r, w = (int(x) for x in sys.argv[2].split(','))\n"
                     "os.write(w, b'hello\\n')\n"
                     "os.write(w, b'%d\\n' % (41 + int(os.read(r, 100))))\n")
    encode = staticmethod(json.dumps)

    def recv(self, allow_eof=False):
        line = self.read_line(allow_eof)
        return None if line is None else line.decode(errors="replace")


def _probe_op(mode):
    """Worker side of _probe: None when a probe program runs in the sandbox `mode`, else why not."""
    opened, clock = [], ItemClock(PROBE_TIMEOUT_S)
    try:
        with item_alarm(clock):
            box = _ProbeSandbox("functional", mode, clock, opened)
            if not box.failure:
                box.send(1)
                answer = box.recv()
                box.failure = None if answer == "42" else f"answered {answer[:100]!r}"
    except (SandboxGone, Late):
        pass
    finally:
        for box in opened:
            box.close()
    why = opened and opened[0].failure
    return None if not why else f"sandbox {why}; output: {bytes(opened[0].tail).decode(errors='replace')[-300:]}"


WORKER_OPS = {"probe": _probe_op}


def _probe(mode):
    """(works, why): a probe program through the sandbox `mode`, in a grading worker; cached per process."""
    if mode not in PROBED:
        if mode == "bwrap" and not shutil.which("bwrap"):
            PROBED[mode] = (False, "bwrap is not installed")
        elif _seccomp_program() is None:
            PROBED[mode] = (False, f"no seccomp filter: {PROBED['seccomp_why']}")
        else:
            pool = workers.get_pool("sandbox", 1 << 30)
            try:
                (kind, why), = pool.run("probe", [(mode,)], 1, 2 * PROBE_TIMEOUT_S, on_kill=clean_up_after_kill)
            finally:
                workers.close_pools("sandbox")
            why = why if kind == "ok" else f"the probe's worker: {kind} {why or ''}"
            PROBED[mode] = (why is None, f"{mode} probe: {why} (interpreter {sandbox_python()})")
    return PROBED[mode]


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
    allow_fallback (the user passed UNSAFE_FLAG): then 'rlimits', with a warning naming what is missing (and,
    where the kernel has no Landlock, that the program can then write, and read, wherever this uid may: the
    shipped datasets' tests and reference solutions included). Never falls back silently."""
    global SANDBOX
    works, why = _probe("bwrap")
    if works:
        SANDBOX = "bwrap"
    elif not allow_fallback:
        raise SystemExit(f"sandbox.py: the full code sandbox does not work here ({why}). Install bubblewrap "
                         f"and libseccomp (setup.sh), or pass {UNSAFE_FLAG} to grade with the rlimits fallback, "
                         f"in which a program shares this machine's kernel memory and processes without "
                         f"namespaces, and, where the kernel has no Landlock, can read the shipped datasets (the "
                         f"tests and reference solutions included) and write where this user can.")
    else:
        works, why_not = _probe("rlimits")
        if not works:
            raise SystemExit(f"sandbox.py: neither the sandbox ({why}) nor the fallback ({why_not}) runs here")
        SANDBOX = "rlimits"
        missing = [claim for claim, holds in sandbox_guarantees("rlimits").items() if not holds]
        landlock = f"Landlock ABI {landlock_abi()}" if landlock_abi() else \
            "NO Landlock in this kernel (Linux < 5.13 or not enabled): the UNSAFE fallback, writing and reading " \
            "wherever this uid may"
        log(f"sandbox.py: WARNING: {why}; {UNSAFE_FLAG}: programs run with the rlimits fallback ({landlock}), "
            f"which does NOT give: {'; '.join(missing)}")
    log(f"sandbox.py: code is graded in sandbox mode {SANDBOX!r}")
    return SANDBOX


# ------------------------------------------------------------------------------------------------------------
# What each mode promises (sandbox_guarantees returns these claims; tests check each in the modes making it)
# ------------------------------------------------------------------------------------------------------------
# "bwrap" is the full sandbox: training and eval refuse to grade code without it (require_sandbox) unless the
# user passes the flag that accepts the fallback. "Landlock": the fallback on a kernel with Landlock (ABI >= 1,
# Linux >= 5.13; "ABI 6": Linux >= 6.12); without it the fallback is the unsafe mode (last paragraph). "cgroup":
# each grading worker makes one memory cgroup for its sandboxes, as a child of its own, where the kernel lets
# this uid (cgroup v2: the memory controller enabled, or enableable, for its children -- the top group as root,
# a delegated group that holds no process --; cgroup v1's memory hierarchy: as root); "none": elsewhere (an
# ordinary user, mostly; a container).
#
#   what a program may do                      bwrap (full)                    rlimits fallback with Landlock
#   -----------------------------------------  ------------------------------  --------------------------------
#   write, read or reorder the verdicts its    no (Verdicts, below)            no (Verdicts, below)
#     grading worker sends back
#   change the grader (this checkout's files,  no                              no files (Landlock; ABI >= 3 for
#     the trainer's processes or memory)                                       truncate; chmod, utime refused);
#                                                                              as root: no (own uid); as a user:
#                                                                              ABI 6: no; ABI < 6: signal them,
#                                                                              yes (NOT); renice: refused
#   crash or fool the checker                  no (code_reward.py: Decoding, Environment)
#   use more than its CPU time, or sleep       no: the item is charged its own CPU (its processes and its checker)
#     past it                                  and its idle time (none of them running or runnable: ItemClock),
#                                              and killed when either is spent, by its worker or, if that is
#                                              stuck, by the pool; the wall clock is only a cap (10x)
#   hold memory, the kernel's for it included  bounded (Memory, below)         cgroup: bounded; none: per kind
#   system calls                               allowlist (seccomp), some with their arguments (fcntl, ioctl,
#                                              prctl, rt_sigaction, prlimit64, socket, clone); no connect, chmod,
#                                              utime, setpriority: both modes
#   sockets                                    pairs of AF_UNIX streams only (socketpair): no other family, no
#                                              connect (no socket of the host, abstract or a file: a user's D-Bus
#                                              session bus), no bind, listen or accept; bwrap: an empty network
#   use a device (a GPU: /dev/nvidia* is       none there but null, zero,      opens none but null, zero, full,
#     mostly mode 0666), a pseudo-terminal     full, random, urandom; no       random, urandom (Landlock); no
#                                              device ioctl, no ptmx/devpts    device ioctl, no pty
#   ptrace, keyctl, bpf, userfaultfd, perf,    refused (seccomp; Landlock also keeps other processes' /proc out
#     io_uring, mount, unshare/setns           of reach)
#   gain privileges (setuid binaries)          no (no_new_privs, userns)       no (no_new_privs)
#   SysV IPC / POSIX message queues            refused (seccomp), own ns       refused (seccomp)
#   signal other processes                     no (own PID namespace)          ABI 6: no (scoped); ABI < 6: as
#                                                                              root no (own uid), as a user yes
#   see other processes (/proc)                no                              no (Landlock: /proc unreadable)
#   read host files (tests, datasets, home)    no (only /usr, Python, the      no (the same: Landlock; a name it
#                                              allowed modules)                guesses can be stat'ed)
#   write files                                in its working directory only:  in its working directory only
#                                              cgroup: a 64 MB tmpfs; none:    (in /dev/shm: Memory, below)
#                                              read-only (Memory, below)
#   outlive the item (processes, IPC, files)   no (PID namespace, its tmpfs)   no: every process below the worker
#                                                                              killed (subreaper; the pool after a
#                                                                              kill), its directory removed
#
# Verdicts (workers.py has the details). In no mode can a program write, read or reorder what its grading worker
# sends back. The worker-scorer channel is a socketpair (a pipe can be reopened through /proc/PID/fd/N by any
# process of the same uid, a socket cannot); the worker is not dumpable; every request carries a random per-item
# key that the program never sees, and a reply without it fails the item ("failed", never paid) and replaces the
# worker. The fallback as a user shares the worker's uid: Landlock keeps it out of every process outside its
# sandbox (ptrace checks: /proc/PID/fd, mem, environ) and out of /proc; signals need ABI 6.
#
# Memory: every kind a program can make the kernel hold, and its bound. With a cgroup the kernel also counts all of
# them together (slab: inodes, dentries, socket buffers; pipe buffers; tmpfs pages; page tables) against
# the item's memory (its tests' memory_mb, else SANDBOX_MEMORY_MB) per sandbox, swap included, and stops it there
# (ENOMEM, or the OOM killer: a "crash"); RLIMIT_AS is then 512 MB per process, or 4 x memory_mb (numpy maps
# more than it touches). Without a cgroup RLIMIT_AS is memory_mb (else 512 MB) per process. The kinds:
#
#   kind                                   bwrap                           rlimits fallback
#   -------------------------------------  ------------------------------  ------------------------------------
#   all of it together                     cgroup: the item's memory;      cgroup: the item's memory; none: NOT
#                                          none: the rows below, summed    bounded (the rows marked NOT)
#   process memory (heap, stacks, maps)    RLIMIT_AS x 8 processes         root: the same; user: RLIMIT_AS per
#                                                                          process, processes unlimited (NOT)
#   page tables and VMAs                   cgroup: counted; none: per process at most vm.max_map_count (65530)
#                                          VMAs, each with at most a page-table and a directory page (8 KB):
#                                          ~0.5 GB per process, x 8 processes (~4 GB per sandbox: the red team
#                                          reached 1.9 GB); user fallback: processes unlimited (NOT)
#   kernel stacks                          16 KB per task, tasks <= 8 (RLIMIT_NPROC); user fallback: NOT
#   file data                              cgroup: 64 MB tmpfs; none:      <= 16 MB per file (RLIMIT_FSIZE) in
#                                          read-only, none                 /dev/shm (workdir_parent): cgroup:
#                                                                          counted; none: NOT bounded in number
#                                                                          until the item ends (then removed)
#   inodes and dentries (empty files and   cgroup: counted; none: none     cgroup: counted; none: NOT bounded
#     directories: ~1 KB each, no data)    (the directory is read-only)    (its directory only)
#   pipe buffers                           64 KB per pipe (F_SETPIPE_SZ refused), pipes <= descriptors
#   socket buffers                         AF_UNIX stream sockets only: net.core.wmem_default queued per socket
#                                          (setsockopt refused), sockets <= descriptors; no datagram or pending
#                                          connection queued without one (SOCK_DGRAM, listen, accept refused)
#   descriptors (files, pipes, sockets,    RLIMIT_NOFILE 64 per process; in flight in SCM_RIGHTS messages: <=
#     epoll, timers, pidfds)               RLIMIT_NOFILE per uid. Fallback as a user: processes unlimited (NOT)
#   file locks and leases                  flock: one per open file; byte-range locks and leases refused
#   pending signals, POSIX timers          RLIMIT_SIGPENDING MAX_PENDING_SIGNALS
#   futex hash, prctl state                refused (PRCTL_OPTIONS: PR_FUTEX_HASH held 1 GB per process)
#   pseudo-terminals                       none (no ptmx)                  none (Landlock)
#   memfd, SysV shm/sem/msg, mqueues,      refused (seccomp)
#     io_uring, BPF maps, keys,
#     userfaultfd, perf buffers
#   negative dentries (missing names)      reclaimed by the kernel under pressure; cgroup: counted
#   GPU memory                             no device                       no device (Landlock), no ioctl
#
# Modules (a problem's tests' "modules", from SANDBOX_MODULES): the package's directory and its wheel's shared
# libraries (numpy.libs), read-only (bwrap: bound under MODULES_IN_SANDBOX; the fallback: Landlock read rules),
# imported before the runner starts, by path, with one BLAS thread; nothing else of site-packages is visible.
#
# Without Landlock (the unsafe fallback, said so by require_sandbox): the program writes and reads wherever its
# uid may (as root: world-writable directories, never swept: files outlive the item), opens any device node its
# uid may (ptys included), and as a user can signal and read the trainer and other items' sandboxes.
#
# Kernel features relied on: user, PID, network, IPC, UTS namespaces (bwrap, unprivileged user namespaces or root),
# seccomp filters (CONFIG_SECCOMP_FILTER, through libseccomp.so.2: built in the grading worker, handed to bwrap with
# `--seccomp FD` or loaded with prctl in the fallback), Landlock (the fallback), no_new_privs, tmpfs size limits,
# rlimits, /proc (CPU accounting and kills: /proc/PID/task/TID/children, else a scan of /proc; idle time:
# .../schedstat, CONFIG_SCHED_INFO, without which waiting to run counts as idle), PR_SET_CHILD_SUBREAPER,
# PR_SET_DUMPABLE (workers), memory cgroups where offered. Without a feature the mode that needs it does not run
# weaker: its probe fails and every item is refused, or require_sandbox() stops the run. A system call through
# another ABI (i386's int 0x80, x32) kills the process (libseccomp's architecture check).
def sandbox_guarantees(mode):
    """What holds in each mode (the tables above; tests check each claim in the modes that make it). The
    fallback run by root gives each program an unused uid of its own (so RLIMIT_NPROC binds); run by a user, the
    program is that user, kept from the rest by Landlock (scopes from ABI 6). Where this uid may make a memory
    cgroup, every sandbox is in one."""
    isolated = mode == "bwrap"
    own_uid = isolated or os.geteuid() == 0
    landlock = 0 if isolated else landlock_abi()
    scoped = isolated or landlock >= 6
    cgroup = memory_cgroup_parent() is not None
    return {"own process group, killed at the deadline": True, "fresh empty working directory": True,
            "empty environment": True,
            "CPU and idle time charged to the item alone (its processes and checker); wall clock capped": True,
            "address space, file size, open files limited": True,
            "system calls and their arguments limited to an allowlist; sockets AF_UNIX streams only": True,
            "no memory outside the address space limit (memfd, SysV shared memory refused)": True,
            "no SysV IPC or message queue outlives it (refused)": True,
            "cannot gain privileges (no_new_privs: setuid binaries run as the program's uid)": True,
            "its verdict channel out of its reach; replies keyed to the item": True,
            "other items' sandboxes and channels out of its reach": own_uid or landlock > 0,
            "what it sends is decoded and printed by one boundary that cannot fail": True,
            "the checker ignores the host's Python environment; asserts self-checked": True,
            "devices cannot be driven (ioctl allowlist: no GPU use)": True,
            "runs as an unprivileged uid of its own; process count limited; every process reaped": own_uid,
            "cannot signal other users' processes or read their environment": own_uid or scoped,
            "cannot change the grader (its files, processes or memory)": isolated or landlock >= 3 and
                                                                          (own_uid or scoped),
            "nothing it wrote outlives the item": isolated or landlock > 0,
            "kernel memory for it bounded (a memory cgroup, or each kind refused or limited)": isolated or cgroup,
            "no network": True,   # AF_INET(6) and every family but AF_UNIX refused; connect refused
            "no socket of the host reachable (abstract or a socket file: connect refused)": True,
            "nothing writable outside its working directory": isolated or landlock > 0,
            "nothing writable outside its directory; working directory size-limited": isolated and cgroup,
            "nothing writable at all but its working directory (read-only without a memory cgroup)": isolated,
            "working directory writable": cgroup or not isolated,
            "whole memory bounded, files it writes included": isolated,
            "host files invisible (tests, datasets, home)": isolated or landlock > 0,
            "no host device visible (no GPU)": isolated,
            "no pseudo-terminal (no ptmx, no devpts)": isolated or landlock > 0,
            "cannot see or signal any process outside the sandbox": scoped}


if __name__ == "__main__":
    print(f"sandbox mode: {sandbox_mode('auto')}; programs run on {sandbox_python()}; Landlock ABI {landlock_abi()}")
    for claim, holds in sandbox_guarantees(sandbox_mode("auto")).items():
        print(f"  [{'x' if holds else ' '}] {claim}")
