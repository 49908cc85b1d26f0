"""The operating system's confinement of the local executor's worker process.

The policy decides what the model's code may say; this module makes the kernel refuse what the
code must not do even if the policy is bypassed. The worker calls `confine(...)` once, before any
model code runs and before any thread starts (see `confine`); every layer is irreversible.

- rlimits: `RLIMIT_DATA` (not `RLIMIT_AS`) holds `max_memory_bytes`. `RLIMIT_DATA` counts private
  writable memory (heap and anonymous `mmap`, since Linux 4.7), `RLIMIT_AS` every reservation too:
  each thread that allocates gets a 64 MiB glibc arena reserve and an 8 MiB stack. Measured on
  CPython 3.11, numpy 2.4, pandas 3.1 (2 cores): after `import numpy, pandas` and small work
  VmData is 183-315 MiB and VmSize 400-535 MiB, and 16 threads doing numpy work take VmSize to
  1.26 GiB with VmData at 234 MiB. So `RLIMIT_AS` at 1 GiB would fail ordinary threaded code, and
  at 512 MiB OpenBLAS cannot even start, while `RLIMIT_DATA` at 1 GiB passes both and still turns
  `numpy.ones(400_000_000)` and `(0).to_bytes(3_000_000_000, "big")` into `MemoryError` (as does
  256 MiB). Shared memory escapes `RLIMIT_DATA`, so seccomp refuses memfds and shared writable
  mappings; file growth is held by `RLIMIT_FSIZE`. Also `RLIMIT_NOFILE` 256 and `RLIMIT_CORE` 0. Soft and hard
  limits are set alike; raising them needs `CAP_SYS_RESOURCE`, which no_new_privs drops, and
  `RLIMIT_NPROC` does not bind root, so refusing new processes is seccomp's job.
- no_new_privs: `PR_SET_NO_NEW_PRIVS` (Landlock and seccomp require it), and every capability is
  dropped, so a worker started as root keeps root's files but not root's powers (mounts,
  namespaces, raising limits, reading what other users own, signalling anyone).
- seccomp: an allow-list (see `seccomp_filter`): what CPython, numpy, pandas, pyarrow and Pillow
  call, with the calls whose arguments decide (threads but not processes, signals to the worker
  itself, private or read-only mappings, the fcntl, ioctl and prctl commands listed) allowed only
  with those arguments. The rest answers ENOSYS, and the dangers the worker is known to reach for
  answer EPERM (Python raises `PermissionError`): new programs, processes and sockets; other
  processes; namespaces and mounts; the kernel; what would undo the other layers (limits, the
  parent-death signal, `chmod` and `utimensat`, which Landlock does not judge); memory outside
  `RLIMIT_DATA` (memfds, shared anonymous and writable shared mappings, SysV and POSIX shared
  memory); the kernel signalling a process for the worker (`fcntl` F_SETOWN and F_SETSIG); typing
  into the terminal (TIOCSTI, TIOCLINUX).
- landlock: every filesystem right the kernel's ABI knows is handled; `read_paths` may be read
  (files and directories), `write_paths` read and written (files made, truncated, renamed within,
  removed), nothing else: no /proc (a same-uid worker could read the host's environment there),
  no /etc/passwd, no execution. From ABI 4 TCP bind and connect are refused, from ABI 6 signals
  and abstract unix sockets outside the worker too. `interpreter_read_paths()` grants every
  `sys.path` entry: a worker given the host's `sys.path` must drop a script's own folder first
  if that folder holds what the model's code must not read.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import socket
import stat
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from codeward.executors.local.seccomp_filter import build_filter
from codeward.executors.local.seccomp_notices import listener_fd, notify_supported

LAYERS = ("rlimits", "no_new_privs", "seccomp", "landlock")
OPEN_FILES = 256
DEFAULT_MAX_FILE_BYTES = 1 << 30
NOT_LINUX = "not Linux: only resource limits apply"


class ConfinementError(RuntimeError):
    """A layer that was required (strict) could not be applied; the message names it and why."""


def interpreter_read_paths() -> list[Path]:
    """What this interpreter reads to import and run numpy, pandas and codeward: the prefixes,
    `sys.path`, the system libraries, time zones and two devices; nothing of /proc or /etc's user
    data. An empty `sys.path` entry (the current directory) is left out: it may be anywhere."""
    names = [sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path]
    names += ["/usr/lib", "/usr/local/lib", "/lib", "/lib64", "/usr/share/zoneinfo"]
    names += ["/etc/localtime", "/etc/ld.so.cache", "/dev/null", "/dev/urandom"]
    paths = dict.fromkeys(Path(name) for name in names if name)
    return [path for path in paths if path.exists()]


# --- finding out what this machine has --------------------------------------------------------

PR_GET_SECCOMP, PR_SET_NO_NEW_PRIVS, PR_GET_NO_NEW_PRIVS = 21, 38, 39


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _call(result: int, what: str) -> int:
    """Raise the errno of a libc call that failed, as an OSError naming the call."""
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return result


def _syscall(what: str, number: int, *args: Any) -> int:
    return _call(_libc().syscall(number, *args), what)


def _rlimits_missing() -> str | None:
    try:
        import resource  # noqa: F401  (absent on Windows)
    except ImportError:
        return "this platform has no resource limits"
    return None


def _no_new_privs_missing() -> str | None:
    if not sys.platform.startswith("linux"):
        return NOT_LINUX
    if _libc().prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) < 0:
        return "the kernel has no PR_SET_NO_NEW_PRIVS (Linux 3.5+ needed)"
    return None


def _seccomp_missing() -> str | None:
    if not sys.platform.startswith("linux"):
        return NOT_LINUX
    try:
        import pyseccomp  # noqa: F401
    except ImportError:
        return "the pyseccomp package is not installed: pip install 'pyseccomp>=0.1.2'"
    except (RuntimeError, OSError):
        return "libseccomp is not installed: apt-get install libseccomp2"
    if _libc().prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0:
        return "the kernel has no seccomp filters (CONFIG_SECCOMP_FILTER)"
    return None


def _landlock_abi() -> int:
    """The kernel's Landlock ABI version (1 and up), or minus the errno that says why none."""
    if not sys.platform.startswith("linux"):
        return -errno.ENOSYS
    version = _libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return int(version) if version >= 0 else -ctypes.get_errno()


def _landlock_missing() -> str | None:
    if not sys.platform.startswith("linux"):
        return NOT_LINUX
    abi = _landlock_abi()
    if abi > 0:
        return None
    if -abi == errno.ENOSYS:
        return "the kernel has no Landlock (Linux 5.13+ needed)"
    if -abi == errno.EOPNOTSUPP:
        return "Landlock is built into the kernel but off: add landlock to the lsm= boot parameter"
    return f"Landlock's system calls are refused here ({os.strerror(-abi)}), as by a container's seccomp profile"


_CHECKS: dict[str, Callable[[], str | None]] = {
    "rlimits": _rlimits_missing,
    "no_new_privs": _no_new_privs_missing,
    "seccomp": _seccomp_missing,
    "landlock": _landlock_missing,
}


def missing_layers() -> dict[str, str]:
    """Each layer this machine cannot apply, with the reason in words (empty when all can)."""
    reasons = {layer: _CHECKS[layer]() for layer in LAYERS}
    return {layer: reason for layer, reason in reasons.items() if reason}


# --- rlimits and no_new_privs -----------------------------------------------------------------


def _apply_rlimits(max_memory_bytes: int | None, max_file_bytes: int | None) -> None:
    import resource

    limits = {resource.RLIMIT_CORE: 0, resource.RLIMIT_NOFILE: OPEN_FILES}
    if max_memory_bytes is not None:
        limits[resource.RLIMIT_DATA] = max_memory_bytes
    if max_file_bytes is not None:
        limits[resource.RLIMIT_FSIZE] = max_file_bytes
    for which, value in limits.items():
        hard = resource.getrlimit(which)[1]
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))


def _apply_no_new_privs() -> None:
    """No privilege gained by any means from here on, and every capability given up."""
    _call(_libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    nothing = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: two 32-bit words each
    _call(_libc().capset(header, nothing), "capset")


# --- seccomp ----------------------------------------------------------------------------------

# --- Landlock ---------------------------------------------------------------------------------

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # alike on every architecture
_RULE_PATH_BENEATH = 1
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR, REMOVE_DIR, REMOVE_FILE = (1 << bit for bit in range(6))
MAKE_DIR, MAKE_REG, REFER, TRUNCATE, IOCTL_DEV = 1 << 7, 1 << 8, 1 << 13, 1 << 14, 1 << 15
_FS_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
READ_RIGHTS = READ_FILE | READ_DIR
WRITE_RIGHTS = READ_RIGHTS | WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | REFER | TRUNCATE
_NET_TCP = 0b11  # LANDLOCK_ACCESS_NET_BIND_TCP | CONNECT_TCP, ABI 4
_SCOPES = 0b11  # LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | SIGNAL, ABI 6


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _handled_fs(abi: int) -> int:
    return _FS_RIGHTS_BY_ABI[max(version for version in _FS_RIGHTS_BY_ABI if version <= abi)]


def _create_ruleset(abi: int) -> int:
    """A ruleset handling every right the ABI knows; the struct's size says which fields count."""
    attr = _RulesetAttr(_handled_fs(abi), _NET_TCP if abi >= 4 else 0, _SCOPES if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    return _syscall("landlock_create_ruleset", _CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)


def _allow(ruleset: int, path: Path, rights: int) -> None:
    """Grant `rights` beneath `path` (a file takes only file rights); a missing path is skipped."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FILE_RIGHTS
        rule = _PathBeneath(rights, fd)
        _syscall(f"landlock_add_rule({path})", _ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0)
    finally:
        os.close(fd)


def _apply_landlock(read_paths: Iterable[Path], write_paths: Iterable[Path]) -> None:
    abi = _landlock_abi()
    handled = _handled_fs(abi)
    ruleset = _create_ruleset(abi)
    try:
        for path in read_paths:
            _allow(ruleset, Path(path), READ_RIGHTS & handled)
        for path in write_paths:
            _allow(ruleset, Path(path), WRITE_RIGHTS & handled)
        _syscall("landlock_restrict_self", _RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)


# --- all together -----------------------------------------------------------------------------


def _other_threads() -> int:
    """Threads besides this one, the kernel's count: OpenBLAS starts its own when numpy loads."""
    try:
        return len(os.listdir("/proc/self/task")) - 1
    except OSError:
        return 0


def _load_seccomp(built: Any, handover: socket.socket | None) -> None:
    """Load the filter; with `handover`, hand its listener to the host before anything else runs. A
    filter that cannot have a listener here (an old kernel or libseccomp) is built again to answer
    EPERM itself."""
    if handover is None:
        built.load()
        return
    try:
        built.load()
    except OSError:
        handover.close()
        build_filter(os.getpid()).load()
        return
    try:
        listener = listener_fd(built)
    except (OSError, AttributeError) as exc:  # a listener no one could answer would hold refused calls
        raise ConfinementError(f"the seccomp filter's listener could not be handed to the host: {exc}") from exc
    try:
        socket.send_fds(handover, [b"L"], [listener])
    finally:
        os.close(listener)  # the host's copy is the one: once it closes, refused calls get ENOSYS
        handover.close()


def _refuse(missing: dict[str, str]) -> ConfinementError:
    named = "; ".join(f"{layer}: {reason}" for layer, reason in missing.items())
    return ConfinementError(f"the worker cannot be confined as required ({named})")


def confine(
    *,
    read_paths: Iterable[Path | str],
    write_paths: Iterable[Path | str],
    max_memory_bytes: int | None,
    strict: bool,
    max_file_bytes: int | None = DEFAULT_MAX_FILE_BYTES,
    handover: socket.socket | None = None,
) -> list[str]:
    """Confine this process for good; return the layers that could not be applied.

    With `strict`, a missing layer raises `ConfinementError` before anything is applied (the
    seccomp filter is built first for the same reason); a layer failing while applied still
    raises, with the layers before it in force. Paths that do not exist are skipped.

    It must run before any thread starts (numpy's import starts OpenBLAS's): no_new_privs, the
    capabilities, Landlock and seccomp bind only the calling thread and the threads it starts
    later, so a thread already running would stay free. That raises even without `strict`.

    With `handover`, the seccomp filter sends what it refuses to a listener that is handed to the
    host over that socket at once (`seccomp_notices`); where that cannot be, it answers EPERM itself.
    """
    if others := _other_threads():
        raise ConfinementError(f"confine() must run before any thread starts, and {others} already run")
    missing = missing_layers()
    seccomp_filter = None
    if "seccomp" not in missing:
        try:
            if handover is not None and not notify_supported():
                handover.close()
                handover = None
            seccomp_filter = build_filter(os.getpid(), notify=handover is not None)
        except OSError as exc:
            missing["seccomp"] = f"the seccomp filter could not be built: {exc}"
    if strict and missing:
        raise _refuse(missing)
    steps: dict[str, Callable[[], None]] = {
        "rlimits": lambda: _apply_rlimits(max_memory_bytes, max_file_bytes),
        "no_new_privs": _apply_no_new_privs,
        "landlock": lambda: _apply_landlock(map(Path, read_paths), map(Path, write_paths)),
        "seccomp": lambda: _load_seccomp(seccomp_filter, handover) if seccomp_filter is not None else None,
    }
    for layer, step in steps.items():
        if layer in missing:
            continue
        try:
            step()
        except (OSError, ValueError) as exc:
            if strict:
                raise _refuse({layer: f"applying it failed: {exc}"}) from exc
            missing[layer] = str(exc)
    return [layer for layer in LAYERS if layer in missing]
