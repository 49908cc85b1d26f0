"""The local worker's seccomp filter: an allow-list, so a system call nobody listed is refused.

A deny-list lets through whatever its authors did not think of (a new system call, a command
of `fcntl` that has the kernel signal another process); this filter names what CPython, numpy,
pandas, pyarrow and Pillow call once the worker is confined, found by tracing the local
executor's tests and attack suite (``strace -f``), and grouped by what each group touches.
Anything else answers ENOSYS, as on a kernel too old to have it, so that the C library falls
back to an older call where it has one (``clone3`` to ``clone``, ``faccessat2`` to
``faccessat``). The dangers the worker is known to reach for answer EPERM instead, which Python
raises as a plain `PermissionError`: new programs and processes, sockets, other processes,
namespaces and mounts, the kernel itself, what would undo the other layers (limits, Landlock's
paths, the parent-death signal), memory that ``RLIMIT_DATA`` does not count (memfds, shared
anonymous and writable shared mappings, SysV and POSIX shared memory), signals delivered by the
kernel on the worker's behalf (``fcntl`` owner and signal commands), and typing into the
terminal. System calls with arguments that decide (`kill`, `clone`, `mmap`, `fcntl`, `ioctl`,
`prctl`, `prlimit64` and the scheduling calls) are allowed only with the arguments listed.

Names unknown on the architecture are skipped; other architectures' system calls (the x32 ABI on
x86_64) kill the thread, libseccomp's default for them.
"""

from __future__ import annotations

import errno
from typing import Any

__all__ = ["ALLOWED", "REFUSED", "build_filter"]

#: Allowed whatever their arguments, grouped by what they touch. Paths are Landlock's to judge.
#: Each group has ordinary work in the tests that fails without it.
ALLOWED: dict[str, tuple[str, ...]] = {
    # the process's own memory (mmap is below: its flags decide)
    "memory": ("brk", "munmap", "mremap", "mprotect", "madvise", "mincore", "msync", "mbind", "get_mempolicy"),
    # threads and their synchronisation (clone is below: only threads)
    "threads": (
        *("futex", "futex_waitv", "set_robust_list", "get_robust_list", "set_tid_address", "rseq"),
        *("sched_yield", "sched_getaffinity", "sched_getparam", "sched_getscheduler", "sched_get_priority_max"),
        *("sched_get_priority_min", "sched_rr_get_interval", "membarrier", "getcpu", "arch_prctl", "exit"),
        "exit_group",
    ),
    # signals within the worker (kill and its kin are below: only the worker itself)
    "signals": (
        *("rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait", "rt_sigpending"),
        *("sigaltstack", "setitimer", "getitimer", "alarm", "timer_create", "timer_settime", "timer_gettime"),
        *("timer_getoverrun", "timer_delete", "pause", "restart_syscall"),
    ),
    "time": ("clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time", "times"),
    "who and where": (
        *("getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getgroups", "getresuid"),
        *("getresgid", "getpgrp", "getpgid", "getsid", "uname", "sysinfo", "getrusage", "getrandom"),
    ),
    # open descriptors (fcntl and ioctl are below: only the commands listed)
    "descriptors": (
        *("read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2"),
        *("close", "close_range", "dup", "dup2", "dup3", "lseek", "fstat", "fstatfs", "ftruncate", "fsync"),
        *("fdatasync", "fadvise64", "fallocate", "sendfile", "copy_file_range", "splice", "tee"),
        *("pipe", "pipe2", "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl"),
        *("epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "getdents", "getdents64"),
    ),
    # the channel to the host, the one socket the worker has (inherited connected)
    "the channel": ("sendto", "recvfrom", "sendmsg", "recvmsg", "shutdown", "getsockopt", "getsockname", "getpeername"),
    # paths, which Landlock allows or refuses one by one
    "paths": (
        *("open", "openat", "openat2", "stat", "lstat", "newfstatat", "statx", "statfs", "access", "faccessat"),
        *("faccessat2", "readlink", "readlinkat", "getcwd", "chdir", "fchdir", "mkdir", "mkdirat", "rmdir"),
        *("unlink", "unlinkat", "rename", "renameat", "renameat2", "truncate", "getxattr", "lgetxattr"),
        *("fgetxattr", "listxattr", "llistxattr", "flistxattr", "umask", "wait4", "waitid"),
    ),
}

#: Refused with EPERM, by what each group would reach: what the worker is known to reach for,
#: named so that the refusal is plain. Each group has an attack in the tests that it alone stops.
REFUSED: dict[str, tuple[str, ...]] = {
    "programs": ("execve", "execveat", "fork", "vfork"),
    "sockets": ("socket", "socketpair", "connect", "bind", "listen", "accept", "accept4"),
    "other processes": (
        *("ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp", "pidfd_getfd"),
        "pidfd_send_signal",
    ),
    "namespaces and mounts": (
        *("mount", "umount2", "pivot_root", "chroot", "setns", "unshare", "mount_setattr", "move_mount"),
        *("open_tree", "fsopen", "fsconfig", "fsmount", "fspick"),
    ),
    "the kernel": (
        *("kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "bpf"),
        *("perf_event_open", "keyctl", "add_key", "request_key", "reboot", "swapon", "swapoff"),
        *("syslog", "acct", "iopl", "ioperm"),
    ),
    # memory the kernel fills on the worker's behalf, and rings it reads from: old routes to exploits
    "kernel queues": ("userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register"),
    # a handle opens a file by number, past the paths Landlock judges
    "files by handle": ("open_by_handle_at", "name_to_handle_at"),
    # glibc sets limits through prlimit64 (below); the old call is refused for code that calls it directly
    "limits": ("setrlimit",),
    "memory outside RLIMIT_DATA": ("memfd_create", "memfd_secret", "shmget", "shmat", "shmctl", "mq_open"),
    "SysV messages and semaphores": ("msgget", "semget"),
    "the other layers": ("seccomp", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"),
    # modes, owners and times are not Landlock's to judge; links are refused before Landlock looks
    "modes, owners, times and links": (
        *("chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "utime", "utimes"),
        *("utimensat", "futimesat", "link", "linkat", "symlink", "symlinkat", "mknod", "mknodat"),
    ),
    "extended attributes": ("setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr"),
    # a lock on any file it can read (the interpreter's own) would hold up other processes
    "locks": ("flock",),
}

#: Signals and process look-ups allowed only when aimed at the worker itself (its pid as argument 0).
SELF_ONLY = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open")
#: Scheduling and page placement allowed only for the worker itself, named as 0.
SELF_AS_ZERO = (
    *("sched_setscheduler", "sched_setparam", "sched_setattr", "sched_setaffinity", "sched_getattr"),
    *("migrate_pages", "move_pages"),
)
#: Commands refused by name (EPERM): F_SETOWN, F_SETSIG, F_SETOWN_EX; TIOCSTI, TIOCLINUX; PR_SET_PDEATHSIG,
#: PR_SET_DUMPABLE, PR_SET_SECCOMP, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER, PR_SET_MM.
DANGEROUS_COMMANDS = {
    "fcntl": (8, 10, 15),
    "ioctl": (0x5412, 0x541C),
    "prctl": (1, 4, 22, 24, 38, 36, 35),
}
CLONE_THREAD = 0x00010000
MAP_SHARED = 0x01  # MAP_SHARED_VALIDATE (0x03) has this bit too
MAP_ANONYMOUS = 0x20  # alike on x86_64 and aarch64
MAP_GROWSDOWN = 0x100  # alike on x86_64 and aarch64
PROT_WRITE = 0x2
#: fcntl commands allowed: descriptor flags, status flags, duplication, locks, pipe sizes, seals read.
#: Not F_SETOWN, F_SETOWN_EX or F_SETSIG, which have the kernel signal a process the worker names
#: (the host, where Landlock cannot scope signals), nor F_SETLEASE, F_NOTIFY or F_ADD_SEALS.
FCNTL_COMMANDS = (0, 1, 2, 3, 4, 5, 6, 7, 9, 11, 16, 36, 37, 38, 1030, 1032, 1034)
#: ioctl requests allowed: the terminal's settings and size read (isatty, the console width), and
#: a descriptor's close-on-exec and non-blocking flags. Not TIOCSTI or TIOCLINUX, which type into it.
IOCTL_REQUESTS = (0x5401, 0x5413, 0x5451, 0x5450, 0x5421, 0x541B)
#: prctl options allowed: reading state, and naming a thread (OpenBLAS's threads do). Nothing
#: that changes the process: not PR_SET_PDEATHSIG (the worker would outlive its host), dumpable,
#: the child subreaper, seccomp, no_new_privs (set already) or the capability bounding set.
PRCTL_OPTIONS = (2, 3, 15, 16, 21, 23, 39)


def build_filter(pid: int, *, notify: bool = False) -> Any:
    """The filter for the worker `pid`, built but not loaded, so a failure leaves the process untouched.

    With `notify`, what it refuses goes to a listener the host holds (`seccomp_notices`), which
    answers EPERM and counts it; the calls refused are the same either way."""
    import pyseccomp as sc

    built = sc.SyscallFilter(sc.ERRNO(errno.ENOSYS))
    eperm = sc.NOTIFY if notify else sc.ERRNO(errno.EPERM)

    def rule(action: Any, name: str, *args: Any) -> None:
        number = sc.resolve_syscall(sc.Arch.NATIVE, name)
        if number >= 0:  # unknown names and those absent on this architecture resolve below zero
            built.add_rule(action, number, *args)

    for names in ALLOWED.values():
        for name in names:
            rule(sc.ALLOW, name)
    for names in REFUSED.values():
        for name in names:
            rule(eperm, name)
    rule(sc.ALLOW, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, CLONE_THREAD))
    rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
    for name in SELF_ONLY:
        rule(sc.ALLOW, name, sc.Arg(0, sc.EQ, pid))
        rule(eperm, name, sc.Arg(0, sc.NE, pid))
    for name in SELF_AS_ZERO:
        rule(sc.ALLOW, name, sc.Arg(0, sc.EQ, 0))
        rule(eperm, name, sc.Arg(0, sc.NE, 0))
    for name, process in (("setpriority", 0), ("ioprio_set", 1)):  # PRIO_ and IOPRIO_WHO_PROCESS, self as 0
        rule(sc.ALLOW, name, sc.Arg(0, sc.EQ, process), sc.Arg(1, sc.EQ, 0))
        rule(eperm, name, sc.Arg(0, sc.NE, process))
        rule(eperm, name, sc.Arg(0, sc.EQ, process), sc.Arg(1, sc.NE, 0))
    for name in ("getpriority", "ioprio_get"):
        rule(sc.ALLOW, name)
    _memory_maps(rule, sc, eperm)
    _commands(rule, sc, eperm, pid)
    return built


def _memory_maps(rule: Any, sc: Any, eperm: Any) -> None:
    """Private mappings, and read-only shared mappings of files (numpy.memmap's "r", pandas'
    memory_map): those hold nothing beyond the file. Refused: shared anonymous memory, and a
    writable shared mapping, which memory outside ``RLIMIT_DATA`` would back; and a mapping that
    grows down, which the kernel counts as a stack, never against ``RLIMIT_DATA`` (threads' stacks
    are ordinary mappings). A read-only shared mapping of a file opened for writing can still be
    made writable by ``mprotect``, whose call does not say what it maps: that writes no more than
    ``write()`` to the same file could, a file Landlock lets the worker write and ``RLIMIT_FSIZE``
    bounds."""
    rule(sc.ALLOW, "mmap", sc.Arg(3, sc.MASKED_EQ, MAP_SHARED | MAP_GROWSDOWN, 0))
    rule(
        sc.ALLOW,
        "mmap",
        sc.Arg(2, sc.MASKED_EQ, PROT_WRITE, 0),
        sc.Arg(3, sc.MASKED_EQ, MAP_SHARED | MAP_ANONYMOUS | MAP_GROWSDOWN, MAP_SHARED),
    )
    rule(eperm, "mmap", sc.Arg(3, sc.MASKED_EQ, MAP_GROWSDOWN, MAP_GROWSDOWN))
    rule(
        eperm,
        "mmap",
        sc.Arg(3, sc.MASKED_EQ, MAP_SHARED | MAP_ANONYMOUS | MAP_GROWSDOWN, MAP_SHARED | MAP_ANONYMOUS),
    )
    rule(
        eperm,
        "mmap",
        sc.Arg(2, sc.MASKED_EQ, PROT_WRITE, PROT_WRITE),
        sc.Arg(3, sc.MASKED_EQ, MAP_SHARED | MAP_ANONYMOUS | MAP_GROWSDOWN, MAP_SHARED),
    )


def _commands(rule: Any, sc: Any, eperm: Any, pid: int) -> None:
    """The calls whose first or second argument is a command: only the commands listed, the rest EPERM."""
    for name, position, allowed in (
        ("fcntl", 1, FCNTL_COMMANDS),
        ("ioctl", 1, IOCTL_REQUESTS),
        ("prctl", 0, PRCTL_OPTIONS),
    ):
        for command in allowed:
            rule(sc.ALLOW, name, sc.Arg(position, sc.MASKED_EQ, 0xFFFFFFFF, command))
        for command in DANGEROUS_COMMANDS[name]:  # the rest answer ENOSYS; these say plainly that they are refused
            rule(eperm, name, sc.Arg(position, sc.MASKED_EQ, 0xFFFFFFFF, command))
    # getrlimit goes through prlimit64 with no new limit, for the worker itself (0 or its pid) only;
    # setting one is refused, and another process's limits are not the worker's to read
    for own in (0, pid):
        rule(sc.ALLOW, "prlimit64", sc.Arg(0, sc.EQ, own), sc.Arg(2, sc.EQ, 0))
    rule(eperm, "prlimit64", sc.Arg(2, sc.NE, 0))
