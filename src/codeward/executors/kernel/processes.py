"""Whether the process that owns something (a container, a kernel's folder) still runs.

A pid alone can be reused by an unrelated process; its start time cannot. So an owner is
recorded as its pid and its start time, and judged alive only while that pid's process started
at that time. The docker reaper (`docker.owners`) and the kernel-folder reaper (`folders`)
judge their owners here, the same way.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["pid_exists", "process_started", "started_at"]


def process_started(pid: int) -> str | None:
    """When process `pid` started, as ``"<boot id>:<clock ticks>"``; None if it does not exist
    (or where there is no /proc to read it from)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ")".
    fields = stat.rsplit(")", 1)[1].split()
    return f"{boot}:{fields[19]}"  # field 22 of proc(5), counted from field 3


def started_at(pid: int, started: str | None) -> bool:
    """Whether process `pid` runs and is the one that started at `started` (`process_started`'s
    text, or its clock ticks alone); without /proc, whether `pid` runs at all."""
    now = process_started(pid)
    if now is not None:
        return bool(started) and (now == started or now.rsplit(":", 1)[1] == started)
    if Path("/proc").is_dir():
        return False  # Linux, and no such process
    return pid_exists(pid)  # no /proc to read start times from: the pid alone must do


def pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
