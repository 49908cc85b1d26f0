"""What a block cost, measured by the host from outside the sandbox.

A sandbox's own reports are a stranger's: code that runs there could lie about them. So the CPU
time and the peak memory of a block are read by the host from what the operating system keeps
about the sandbox, never from what the sandbox says:

- `ProcessMeter`: a process and its children on this machine (a jupyter kernel), from
  ``/proc/<pid>/stat`` (user and system time, the reaped children's included) and
  ``/proc/<pid>/status`` (``VmHWM``, the resident high-water mark, reset at the block's start by
  writing ``5`` to ``/proc/<pid>/clear_refs``).
- `SingleProcessMeter`: a process that starts no other (the local worker), the same way, but its
  CPU time read from its CPU-time clock.
- `CgroupMeter`: a container, from its control group: cgroup v2's ``cpu.stat`` and
  ``memory.peak`` (reset for the block where the kernel allows it, 6.12 on), or cgroup v1's
  ``cpuacct.usage`` and ``memory.max_usage_in_bytes`` (reset by writing 0). Under gVisor the
  group holds the sandbox's own processes, which hold everything the code does.

Each is started with `begin()` before the block and read with `end()` after it: a few small
reads of files the kernel writes, once a block.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from codeward.executors.base import BlockUsage

__all__ = [
    "CgroupMeter",
    "Measured",
    "Meter",
    "ProcessMeter",
    "SingleProcessMeter",
    "block_usage",
    "cgroup_field",
    "cgroup_folders",
]

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_HAS_PROC = os.path.isdir("/proc/self")
#: Children of children are followed this deep at most (a kernel's tree is shallow), and this many
#: processes read at most a block, whatever the code started.
_TREE_DEPTH = 4
_MOST_PROCESSES = 256
#: The memory peak is reset for one open file from this kernel version on (cgroup v2).
_PEAK_RESET_KERNEL = (6, 12)


@dataclass
class Measured:
    """What a meter read over one block: None where it could not, with the reason in `unmeasured`."""

    cpu_seconds: float | None = None
    peak_memory_bytes: int | None = None
    peak_memory_scope: str = "block"
    unmeasured: dict[str, str] = field(default_factory=dict)


class Meter:
    """Measures nothing, and says why: a sandbox whose host cannot see its processes."""

    def __init__(self, reason: str = "this sandbox does not report it") -> None:
        self.reason = reason

    def begin(self, cpu: float | None = None) -> None:
        """Mark the block's start (and reset the memory peak where that can be done); `cpu`, the CPU
        seconds the caller has just read by the same means, saves a reading."""

    def end(self, cpu: float | None = None) -> Measured:
        """What the block cost since `begin()`."""
        return Measured(unmeasured={"cpu_seconds": self.reason, "peak_memory_bytes": self.reason})

    def close(self) -> None:
        """Let go of what the meter holds open."""


def block_usage(
    wall_seconds: float,
    measured: Measured,
    *,
    output_bytes: int,
    tool_calls: int,
    egress_bytes: int | None = None,
    egress_reason: str = "this sandbox has no network",
) -> BlockUsage:
    """The contract's `BlockUsage` from what the host measured and counted."""
    unmeasured = dict(measured.unmeasured)
    if egress_bytes is None:
        unmeasured["egress_bytes"] = egress_reason
    return BlockUsage(
        wall_seconds=max(0.0, wall_seconds),
        cpu_seconds=measured.cpu_seconds,
        peak_memory_bytes=measured.peak_memory_bytes,
        output_bytes=output_bytes,
        tool_calls=tool_calls,
        egress_bytes=egress_bytes,
        peak_memory_scope=measured.peak_memory_scope,
        unmeasured=unmeasured,
    )


class ProcessMeter(Meter):
    """A process on this machine and the children it runs, read from /proc by the host.

    The process's own files stay open between blocks (a read is then a few microseconds, not the
    tens an open takes), and they name that process for good: once it has ended they read nothing,
    even if its pid is given to another. `close()` lets them go.
    """

    def __init__(self, pid: int, *, children: bool = True) -> None:
        super().__init__("there is no /proc to read it from on this machine")
        self.pid = pid
        self.children = children
        self._cpu: float | None = None
        self._reset = False
        self._files: dict[str, int] = {}

    def begin(self, cpu: float | None = None) -> None:
        self._cpu = self.cpu_seconds() if cpu is None else cpu
        self._reset = self._clear_peaks()

    def end(self, cpu: float | None = None) -> Measured:
        cpu = self.cpu_seconds() if cpu is None else cpu
        peak = self._peak()
        measured = Measured()
        if cpu is None or self._cpu is None:
            measured.unmeasured["cpu_seconds"] = self._gone()
        else:
            measured.cpu_seconds = round(max(0.0, cpu - self._cpu), 3)
        if peak is None:
            measured.unmeasured["peak_memory_bytes"] = self._gone()
        else:
            measured.peak_memory_bytes = peak
            measured.peak_memory_scope = "block" if self._reset else "sandbox"
        return measured

    def cpu_seconds(self) -> float | None:
        """User and system time of the process and its children so far (those reaped included)."""
        fields = _stat_fields(self._read("stat"))
        if fields is None:
            return None
        ticks = sum(map(int, fields[11:15]))  # utime, stime, cutime, cstime: fields 14 to 17
        for child in self._children():
            child_fields = _stat_fields(_read_path(f"/proc/{child}/stat"))
            ticks += sum(map(int, child_fields[11:15])) if child_fields else 0
        return ticks / _CLOCK_TICKS

    def _gone(self) -> str:
        """Why a figure is missing: the process ended, or this machine has no /proc to read."""
        return "the process ended before it was read" if _HAS_PROC else self.reason

    def close(self) -> None:
        for descriptor in self._files.values():
            with contextlib.suppress(OSError):
                os.close(descriptor)
        self._files.clear()

    def _clear_peaks(self) -> bool:
        """Reset the resident high-water marks (VmHWM); False where that is not allowed."""
        descriptor = self._opened("clear_refs", os.O_WRONLY)
        try:
            if descriptor is None:
                return False
            os.write(descriptor, b"5")
            for child in self._children():
                with open(f"/proc/{child}/clear_refs", "wb", buffering=0) as refs:
                    refs.write(b"5")
        except OSError:
            return False
        return True

    def _peak(self) -> int | None:
        """The high-water marks of the process and its children, added (each reached its own at its time)."""
        peak = _resident_peak(self._read("status", 4096))
        if peak is None:
            return None
        for child in self._children():
            peak += _resident_peak(_read_path(f"/proc/{child}/status")) or 0
        return peak

    def _children(self) -> list[int]:
        return _descendants(self.pid)[1:] if self.children else []

    def _opened(self, name: str, flags: int = os.O_RDONLY) -> int | None:
        descriptor = self._files.get(name)
        if descriptor is None:
            try:
                descriptor = self._files[name] = os.open(f"/proc/{self.pid}/{name}", flags | os.O_CLOEXEC)
            except OSError:
                return None
        return descriptor

    def _read(self, name: str, size: int = 1024) -> bytes:
        descriptor = self._opened(name)
        try:
            return b"" if descriptor is None else os.pread(descriptor, size, 0)
        except OSError:  # the process has ended
            return b""


class SingleProcessMeter(ProcessMeter):
    """A process that starts no other (the local worker, whose seccomp filter refuses fork): its CPU
    time read from its CPU-time clock, one system call on every block's path instead of /proc's stat
    line read and split. Its peak is read from /proc/<pid>/status after every block, reset before
    each: resident memory can grow without a page fault (``MADV_COLLAPSE``, or the kernel's own
    khugepaged making huge pages), so no count of faults can stand in for it."""

    def __init__(self, pid: int) -> None:
        super().__init__(pid, children=False)
        self._clock = _cpu_clock(pid)

    def cpu_seconds(self) -> float | None:
        if self._clock is None:
            return super().cpu_seconds()
        try:
            return time.clock_gettime(self._clock)
        except OSError:  # gone (and reaped)
            return None


def _cpu_clock(pid: int) -> int | None:
    """The id of process `pid`'s CPU-time clock (Linux's ``clock_getcpuclockid``, which Python lacks:
    ``(~pid << 3) | CPUCLOCK_SCHED``); None where it cannot be read."""
    if not sys.platform.startswith("linux"):
        return None
    clock = (~pid << 3) | 2
    try:
        time.clock_gettime(clock)
    except OSError:
        return None
    return clock


def _read_path(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def _stat_fields(stat: bytes) -> list[bytes] | None:
    """A /proc stat line's fields from the third on (the command, field 2, may hold spaces and parentheses)."""
    fields = stat.rpartition(b")")[2].split(maxsplit=15)  # cstime (field 17) the last read
    return fields if len(fields) > 14 else None


def _resident_peak(status: bytes) -> int | None:
    at = status.find(b"VmHWM:")
    if at < 0:
        return None
    try:
        return int(status[at + 6 : status.index(b"kB", at)]) * 1024
    except ValueError:
        return None


def _descendants(root: int) -> list[int]:
    """`root` and its children, theirs and so on (from the kernel's per-task children lists)."""
    found, layer = [root], [root]
    for _ in range(_TREE_DEPTH):
        following: list[int] = []
        for pid in layer:
            following.extend(int(child) for child in _read_path(f"/proc/{pid}/task/{pid}/children").split())
        if not following:
            break
        found.extend(following)
        layer = following
        if len(found) >= _MOST_PROCESSES:
            break
    return found[:_MOST_PROCESSES]


def cgroup_folders(container_id: str) -> list[Path]:
    """Where a local engine keeps a container's control group: cgroup v2 under systemd or cgroupfs,
    then v1's memory, CPU and pids hierarchies (CPU's may be joined as ``cpu,cpuacct``)."""
    root = Path("/sys/fs/cgroup")
    return [
        root / "system.slice" / f"docker-{container_id}.scope",
        root / "docker" / container_id,
        root / "memory" / "docker" / container_id,
        root / "cpuacct" / "docker" / container_id,
        root / "cpu,cpuacct" / "docker" / container_id,
        root / "pids" / "docker" / container_id,
    ]


class CgroupMeter(Meter):
    """A container's control group on this machine, read by the host."""

    def __init__(self, container_id: str, folders: Sequence[Path] | None = None) -> None:
        super().__init__("the container's control group is not on this machine (a remote engine?)")
        self.container_id = container_id
        #: Where its control group may be: `cgroup_folders`, unless the caller knows.
        self.folders = list(folders) if folders is not None else cgroup_folders(container_id)
        self._cpu: float | None = None
        self._peak_file: int | None = None
        self._reset = False
        self._v2, self._memory_v1, self._cpu_v1 = self._find()

    def _find(self) -> tuple[Path | None, Path | None, Path | None]:
        v2 = memory = cpu = None
        for folder in self.folders:
            if _exists(folder / "cgroup.controllers") and v2 is None:
                v2 = folder
            elif _exists(folder / "memory.max_usage_in_bytes") and memory is None:
                memory = folder
            elif _exists(folder / "cpuacct.usage") and cpu is None:
                cpu = folder
        return v2, memory, cpu

    def begin(self, cpu: float | None = None) -> None:
        if self._v2 is None and self._memory_v1 is None and self._cpu_v1 is None:
            self._v2, self._memory_v1, self._cpu_v1 = self._find()  # a container started since
        self._cpu = self._cpu_seconds()
        self._close_peak()
        self._reset = False
        if self._v2 is not None:
            if _kernel_at_least(_PEAK_RESET_KERNEL):
                with contextlib.suppress(OSError):
                    self._peak_file = os.open(self._v2 / "memory.peak", os.O_RDWR)
                    os.write(self._peak_file, b"reset\n")
                    self._reset = True
        elif self._memory_v1 is not None:
            with contextlib.suppress(OSError):
                (self._memory_v1 / "memory.max_usage_in_bytes").write_text("0")
                self._reset = True

    def end(self, cpu: float | None = None) -> Measured:
        measured = Measured()
        cpu = self._cpu_seconds()
        if cpu is None or self._cpu is None:
            measured.unmeasured["cpu_seconds"] = self.reason
        else:
            measured.cpu_seconds = round(max(0.0, cpu - self._cpu), 3)
        peak = self._peak()
        if peak is None:
            found = self._v2 is not None or self._cpu_v1 is not None
            measured.unmeasured["peak_memory_bytes"] = (
                "the container's control group keeps no memory peak (no memory controller, or Linux before 5.19)"
                if found
                else self.reason
            )
        else:
            measured.peak_memory_bytes = peak
            measured.peak_memory_scope = "block" if self._reset else "sandbox"
        return measured

    def _cpu_seconds(self) -> float | None:
        with contextlib.suppress(OSError, ValueError):
            if self._v2 is not None and (usec := cgroup_field(self._v2 / "cpu.stat", "usage_usec")) is not None:
                return usec / 1e6
            if self._cpu_v1 is not None:
                return int((self._cpu_v1 / "cpuacct.usage").read_text()) / 1e9
        return None

    def _peak(self) -> int | None:
        try:
            if self._peak_file is not None:
                os.lseek(self._peak_file, 0, os.SEEK_SET)
                return int(os.read(self._peak_file, 64))
            if self._v2 is not None:
                return int((self._v2 / "memory.peak").read_text())
            if self._memory_v1 is not None:
                return int((self._memory_v1 / "memory.max_usage_in_bytes").read_text())
        except (OSError, ValueError):
            return None
        finally:
            self._close_peak()
        return None

    def _close_peak(self) -> None:
        if self._peak_file is not None:
            with contextlib.suppress(OSError):
                os.close(self._peak_file)
            self._peak_file = None


def cgroup_field(path: Path, name: str) -> int | None:
    """The number after `name` in a flat-keyed cgroup file (``cpu.stat``, ``memory.events``), or None
    where the file or the key is not there."""
    try:
        text = path.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == name and value.strip().isdigit():
            return int(value)
    return None


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # a folder this user may not look in
        return False


def _kernel_at_least(version: tuple[int, int]) -> bool:
    release = os.uname().release.split("-")[0].split(".")
    try:
        return (int(release[0]), int(release[1])) >= version
    except (ValueError, IndexError):
        return False
