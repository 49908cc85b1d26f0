"""Who owns a docker sandbox, and the reaper that removes those whose owner died.

Every container is labelled with its session and its owner (host, pid and the
process's start time), so `reap_orphans` can tell a live owner from a pid that
was reused, and remove what a killed process left behind. Anyone who can reach
the engine can write labels, so the reaper never takes a folder from a label: it
removes only the folder codeward makes for that session under this process's
temporary root, and only if it is a real folder of this user.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import stat
import tempfile
from pathlib import Path

import docker
import docker.errors
from docker.models.containers import Container

from codeward.executors.kernel.processes import process_started, started_at

__all__ = [
    "IPC_DIR_LABEL",
    "IPC_DIR_PREFIX",
    "OWNER_HOST_LABEL",
    "OWNER_PID_LABEL",
    "OWNER_STARTED_LABEL",
    "SESSION_LABEL",
    "ipc_dir_path",
    "list_sandboxes",
    "owner_alive",
    "owner_labels",
    "process_started",
    "reap_orphans",
]

SESSION_LABEL = "codeward.session"
OWNER_PID_LABEL = "codeward.owner.pid"
OWNER_STARTED_LABEL = "codeward.owner.started"
OWNER_HOST_LABEL = "codeward.owner.host"
#: Where the sandbox's folder is, for people to read: the reaper never trusts it.
IPC_DIR_LABEL = "codeward.ipc_dir"
IPC_DIR_PREFIX = "codeward-ipc-"
_SESSION_PATTERN = re.compile(r"[0-9a-f]{32}")  # uuid4().hex: one folder name, no separators


def ipc_dir_path(session: str) -> Path:
    """Where this process makes (and its reaper looks for) the folder of a session."""
    return Path(tempfile.gettempdir()) / f"{IPC_DIR_PREFIX}{session}"


def owner_labels(session: str, ipc_dir: Path) -> dict[str, str]:
    pid = os.getpid()
    return {
        SESSION_LABEL: session,
        OWNER_HOST_LABEL: socket.gethostname(),
        OWNER_PID_LABEL: str(pid),
        OWNER_STARTED_LABEL: process_started(pid) or "",
        IPC_DIR_LABEL: str(ipc_dir),
    }


def owner_alive(labels: dict[str, str]) -> bool:
    """Whether the process that started a container still runs (unknowable owners count as alive)."""
    if labels.get(OWNER_HOST_LABEL) != socket.gethostname():
        return True  # another machine's process: not ours to judge
    try:
        pid = int(labels[OWNER_PID_LABEL])
    except (KeyError, ValueError):
        return True
    return started_at(pid, labels.get(OWNER_STARTED_LABEL))


def list_sandboxes(client: docker.DockerClient) -> list[Container]:
    """Every codeward sandbox on this engine, running or not (what `codeward sandboxes ls` shows)."""
    # ignore_removed: a container removed between the listing and its inspection is simply gone
    return list(client.containers.list(all=True, filters={"label": SESSION_LABEL}, ignore_removed=True))


def reap_orphans(client: docker.DockerClient) -> list[str]:
    """Remove codeward containers (and their ipc folders) whose owner process is gone.

    Returns the names of the containers removed. Safe to run from many processes at once.
    """
    removed = []
    for container in list_sandboxes(client):
        if owner_alive(container.labels):
            continue
        try:
            container.remove(force=True)
        except docker.errors.NotFound:
            continue
        except docker.errors.APIError as error:
            if error.status_code == 409:  # another process is removing it already ("removal ... in progress")
                continue
            raise
        _remove_ipc_dir(container.labels.get(SESSION_LABEL, ""))
        removed.append(container.name or container.id or "")
    return removed


def _remove_ipc_dir(session: str) -> None:
    """Remove the folder this process would have made for a dead sandbox's session, if that is what it is.

    Labels are written by whoever made the container, so the folder is found from the session
    alone, under this process's temporary root, and removed only if it is a folder (not a link)
    owned by this user. `rmtree` follows no link inside it.
    """
    if not _SESSION_PATTERN.fullmatch(session):
        return
    folder = ipc_dir_path(session)
    try:
        info = folder.lstat()
    except OSError:
        return
    if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid():
        shutil.rmtree(folder, ignore_errors=True)
