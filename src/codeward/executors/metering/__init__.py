"""What a block cost, measured by the host from outside the sandbox.

A sandbox's own reports are a stranger's: code that runs there could lie about them. So the CPU
time and the peak memory of a block are read by the host from what the operating system keeps
about the sandbox, never from what the sandbox says:

- `ProcessMeter`: a process and its children on this machine (the local worker, a jupyter
  kernel), from ``/proc/<pid>/stat`` (user and system time, the reaped children's included) and
  ``/proc/<pid>/status`` (``VmHWM``, the resident high-water mark, reset at the block's start by
  writing ``5`` to ``/proc/<pid>/clear_refs``).
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
from dataclasses import dataclass, field
from pathlib import Path

from codeward.executors.base import BlockUsage

__all__ = ["CgroupMeter", "Measured", "Meter", "ProcessMeter", "block_usage", "cgroup_folders"]

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
#: Children of children are followed this deep at most (a kernel's tree is shallow).
_TREE_DEPTH = 4
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

    def begin(self) -> None:
        """Mark the block's start (and reset the memory peak where that can be done)."""

    def end(self) -> Measured:
        """What the block cost since `begin()`."""
        return Measured(unmeasured={"cpu_seconds": self.reason, "peak_memory_bytes": self.reason})


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
    """A process on this machine and the children it runs, read from /proc by the host."""

    def __init__(self, pid: int, *, children: bool = True) -> None:
        super().__init__("there is no /proc to read it from on this machine")
        self.pid = pid
        self.children = children
        self._cpu: float | None = None
        self._reset = False

    def begin(self) -> None:
        pids = self._tree()
        self._cpu = _tree_cpu(pids)
        self._reset = bool(pids) and all(_clear_peak(pid) for pid in pids)

    def end(self) -> Measured:
        pids = self._tree()
        cpu = _tree_cpu(pids)
        peaks = [peak for peak in map(_peak_resident, pids) if peak is not None]
        measured = Measured()
        if cpu is None or self._cpu is None:
            measured.unmeasured["cpu_seconds"] = self.reason if not pids else "the process ended before it was read"
        else:
            measured.cpu_seconds = round(max(0.0, cpu - self._cpu), 3)
        if peaks:
            measured.peak_memory_bytes = sum(peaks)
            measured.peak_memory_scope = "block" if self._reset else "sandbox"
        else:
            measured.unmeasured["peak_memory_bytes"] = (
                self.reason if not pids else "the process ended before it was read"
            )
        return measured

    def _tree(self) -> list[int]:
        if not os.path.exists(f"/proc/{self.pid}/stat"):
            return []
        return _descendants(self.pid) if self.children else [self.pid]


def _descendants(root: int) -> list[int]:
    """`root` and its children, theirs and so on (from the kernel's per-task children lists)."""
    found, layer = [root], [root]
    for _ in range(_TREE_DEPTH):
        following: list[int] = []
        for pid in layer:
            try:
                text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
            except OSError:
                continue
            following.extend(int(child) for child in text.split())
        if not following:
            break
        found.extend(following)
        layer = following
    return found


def _tree_cpu(pids: list[int]) -> float | None:
    """User and system time of `pids`, with that of their children reaped so far; None if none is readable."""
    total, read = 0, False
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime: fields 14 to 17
        read = True
    return total / _CLOCK_TICKS if read else None


def _clear_peak(pid: int) -> bool:
    """Reset the process's resident high-water mark (VmHWM); False where that is not allowed."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        return False
    return True


def _peak_resident(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def cgroup_folders(container_id: str) -> list[Path]:
    """Where a local engine keeps a container's control group: cgroup v2 under systemd or cgroupfs,
    then v1's memory and CPU hierarchies (either may be joined as ``cpu,cpuacct``)."""
    root = Path("/sys/fs/cgroup")
    return [
        root / "system.slice" / f"docker-{container_id}.scope",
        root / "docker" / container_id,
        root / "memory" / "docker" / container_id,
        root / "cpuacct" / "docker" / container_id,
        root / "cpu,cpuacct" / "docker" / container_id,
    ]


class CgroupMeter(Meter):
    """A container's control group on this machine, read by the host."""

    def __init__(self, container_id: str) -> None:
        super().__init__("the container's control group is not on this machine (a remote engine?)")
        self.container_id = container_id
        self._cpu: float | None = None
        self._peak_file: int | None = None
        self._reset = False
        self._v2, self._memory_v1, self._cpu_v1 = self._find()

    def _find(self) -> tuple[Path | None, Path | None, Path | None]:
        v2 = memory = cpu = None
        for folder in cgroup_folders(self.container_id):
            if (folder / "cgroup.controllers").exists() and v2 is None:
                v2 = folder
            elif (folder / "memory.max_usage_in_bytes").exists() and memory is None:
                memory = folder
            elif (folder / "cpuacct.usage").exists() and cpu is None:
                cpu = folder
        return v2, memory, cpu

    def begin(self) -> None:
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

    def end(self) -> Measured:
        measured = Measured()
        cpu = self._cpu_seconds()
        if cpu is None or self._cpu is None:
            measured.unmeasured["cpu_seconds"] = self.reason
        else:
            measured.cpu_seconds = round(max(0.0, cpu - self._cpu), 3)
        peak = self._peak()
        if peak is None:
            measured.unmeasured["peak_memory_bytes"] = self.reason
        else:
            measured.peak_memory_bytes = peak
            measured.peak_memory_scope = "block" if self._reset else "sandbox"
        return measured

    def _cpu_seconds(self) -> float | None:
        with contextlib.suppress(OSError, ValueError):
            if self._v2 is not None:
                for line in (self._v2 / "cpu.stat").read_text().splitlines():
                    if line.startswith("usage_usec "):
                        return int(line.split()[1]) / 1e6
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


def _kernel_at_least(version: tuple[int, int]) -> bool:
    release = os.uname().release.split("-")[0].split(".")
    try:
        return (int(release[0]), int(release[1])) >= version
    except (ValueError, IndexError):
        return False
