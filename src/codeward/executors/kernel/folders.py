"""The folders a kernel sandbox keeps on the host, and the reaper that removes those whose owner died.

A local kernel's folder holds its connection file (with the key that signs its messages), its
ipc sockets and its stderr log; a jupyter executor's own working folder holds what the model's
code wrote. The executor removes both when it closes, but a host killed with SIGKILL (the OOM
killer, a crash) never does, and they would pile up in the temporary folder. So each is made by
`owned_folder`, whose name carries its owner: the process's id and start time (clock ticks since
boot, which a reused pid does not share). `reap_dead_owners`, run when a jupyter or docker
executor starts, removes the folders whose owner no longer runs, judged as the container reaper
judges (`processes.started_at`).

A name is anyone's to choose, so the reaper removes only what codeward would have made: an entry
of the temporary root whose whole name has the pattern, that is a folder itself (not a link to
one), and that this user owns; `rmtree` follows no link inside it, so a link planted there is
removed, never what it points to.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
import tempfile

from codeward.executors.kernel.processes import pid_exists, process_started, started_at

__all__ = ["KERNEL_PREFIX", "WORKING_PREFIX", "owned_folder", "reap_dead_owners"]

logger = logging.getLogger(__name__)

#: A local kernel's folder (connection file, sockets, stderr) and a jupyter executor's working folder.
KERNEL_PREFIX = "codeward-kernel-"
WORKING_PREFIX = "codeward-jupyter-"
#: The whole name: prefix, owner pid, its start (empty where there is no /proc), mkdtemp's 8 random characters.
_NAME = re.compile(r"codeward-(?:kernel|jupyter)-(?P<pid>[1-9][0-9]{0,9})\.(?P<started>[0-9]{0,20})-[a-z0-9_]{8}")


def owned_folder(prefix: str) -> str:
    """A fresh 0700 folder under the temporary root whose name says this process owns it."""
    pid = os.getpid()
    started = process_started(pid)
    ticks = started.rsplit(":", 1)[1] if started else ""
    return tempfile.mkdtemp(prefix=f"{prefix}{pid}.{ticks}-")


def reap_dead_owners(root: str | None = None) -> list[str]:
    """Remove the kernel and working folders under `root` (the temporary root) whose owner
    process is gone; return their paths. Safe to run from many processes at once."""
    if os.name != "posix":
        return []  # no owner by uid to check, and os.kill(pid, 0) would end the process there
    folder = root or tempfile.gettempdir()
    uid = os.getuid()
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    for entry in entries:
        found = _NAME.fullmatch(entry.name)
        if found is None or _alive(int(found["pid"]), found["started"]):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue  # removed already, by another process's reaper
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)  # never through a link: it removes the link itself
        removed.append(entry.path)
    if removed:
        logger.info("removed %d kernel folder(s) whose owner process is gone: %s", len(removed), ", ".join(removed))
    return removed


def _alive(pid: int, started: str) -> bool:
    """Whether the owner runs; an owner that could not read its start time is judged by its pid."""
    return started_at(pid, started) if started else pid_exists(pid)
