"""Questions the tests ask the engine about containers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import docker
import pytest
from docker.models.containers import Container


def gone(client: docker.DockerClient, container_id: str) -> bool:
    """Whether the engine no longer has this container, running or not."""
    try:
        client.containers.get(container_id)
    except docker.errors.NotFound:
        return True
    return False


def log_bytes(container: Container) -> int:
    """What Docker keeps of a container's output on the host's disk: its log file and any rotated ones.

    Skips where the engine's files cannot be read (by a host user that is not root).
    """
    container.reload()
    if not container.attrs.get("LogPath"):
        return 0  # a log driver that keeps no file
    path = Path(container.attrs["LogPath"])
    try:
        return sum(file.stat().st_size for file in [path, *path.parent.glob(f"{path.name}.*")])
    except PermissionError:
        pytest.skip(f"the engine's log files are not readable here ({path.parent})")


FORK_BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
LAUNCH_FORK_BOMB = f"import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', {FORK_BOMB!r}])\nprint('launched')"


def host_runs_a_process() -> bool:
    """Whether the host still starts a process (a fork bomb in a sandbox must leave it able to)."""
    host = subprocess.run(
        [sys.executable, "-c", "print('host fine')"], check=False, capture_output=True, text=True, timeout=30
    )
    return host.stdout == "host fine\n"


# Prepended to an owner script: its sandboxes get no watchdog, as when the watchdog died with its
# owner (killed together), so what the owner leaves is the reaper's to remove.
UNWATCHED = "import codeward.executors.docker.sandbox as _sandbox\n_sandbox.watch = lambda *args: None\n"
