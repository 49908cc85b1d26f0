"""Questions the tests ask the engine about containers."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import docker
import pytest
from docker.models.containers import Container

from codeward.executors.docker.owners import IPC_DIR_LABEL, list_sandboxes


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

# Prepended to an owner script (after UNWATCHED, for a control): its sandboxes name the test process
# (the owner's parent, alive while the test runs) as their owner, so that no reaper, this run's or
# another suite's on the same engine, removes them once the real owner is killed. The real owner's
# pid is kept in STARTED_BY_LABEL, to find them by.
STARTED_BY_LABEL = "codeward.tests.started_by"
ADOPTED_BY_THE_TEST = (
    "import os\nimport codeward.executors.docker.sandbox as _sandbox\nfrom codeward.executors.docker import owners\n"
    "def _adopted(session, ipc_dir, _labels=_sandbox.owner_labels):\n"
    "    labels = _labels(session, ipc_dir)\n"
    f"    labels[{STARTED_BY_LABEL!r}] = labels[owners.OWNER_PID_LABEL]\n"
    "    labels[owners.OWNER_PID_LABEL] = str(os.getppid())\n"
    "    labels[owners.OWNER_STARTED_LABEL] = owners.process_started(os.getppid()) or ''\n"
    "    return labels\n"
    "_sandbox.owner_labels = _adopted\n"
)


class Creations:
    """The engine's container-create events from now on, read live by a thread, and in `seen()`
    also replayed from the engine's history since then. The history keeps only the engine's last
    256 events, which another suite on the same engine overruns, so a replay alone can miss a test's
    own containers; the live stream alone can lag the newest by a moment. The two together miss none."""

    def __init__(self, client: docker.DockerClient) -> None:
        self.client, self.since = client, datetime.now(UTC) - timedelta(seconds=1)
        self._live: list[dict[str, Any]] = []
        self._stream = client.events(decode=True, filters={"type": "container", "event": "create"})
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        with contextlib.suppress(Exception):  # the stream closed under the read
            for event in self._stream:
                self._live.append(event)

    def seen(self) -> list[dict[str, Any]]:
        """Every create event since this began: those read live, and those the history still has."""
        until = datetime.now(UTC) + timedelta(seconds=1)
        replayed = self.client.events(
            since=self.since, until=until, decode=True, filters={"type": "container", "event": "create"}
        )
        events = {event["Actor"]["ID"]: event for event in [*self._live, *replayed]}
        return list(events.values())

    def close(self) -> None:
        self._stream.close()
        self._reader.join(timeout=5)


class MadeHere:
    """The sandboxes that processes a test starts make, told apart from any other suite's on the same
    engine: the processes get `env`, a temporary folder of the test's own (short, as the sockets in
    it need), and every sandbox they make is labelled with its ipc folder there. Used with `with`,
    which removes the folder after."""

    def __init__(self, client: docker.DockerClient) -> None:
        self.client, self.folder = client, Path(tempfile.mkdtemp(prefix="cw-"))
        self.creations = Creations(client)
        self.env = {"TMPDIR": str(self.folder)}

    def __enter__(self) -> MadeHere:
        return self

    def __exit__(self, *exc: object) -> None:
        self.creations.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _ours(self, labels: dict[str, str]) -> bool:
        return Path(labels.get(IPC_DIR_LABEL, "/")).parent == self.folder

    def created(self) -> set[str]:
        """The ids of every sandbox these processes created, removed since or not (the engine's events)."""
        return {
            event["Actor"]["ID"]
            for event in self.creations.seen()
            if self._ours(event["Actor"].get("Attributes") or {})
        }

    def left(self) -> set[str]:
        """The ids of the sandboxes these processes made that the engine still has."""
        return {container.id or "" for container in list_sandboxes(self.client) if self._ours(container.labels)}
