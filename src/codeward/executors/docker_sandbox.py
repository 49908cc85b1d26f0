"""A hardened container running an ipykernel that the host reaches through ipc sockets.

No port is published and the container has no network: the kernel's five
ZeroMQ sockets are unix sockets in a private folder on the host, bind-mounted
into the container. The host's `jupyter_client` connects to them directly.

Who owns the folder. The kernel, inside the container, *creates* the sockets, so
its user must be able to write the folder; the host process *connects*, so it
must be able to write the sockets. Both hold when the two sides are one uid:
- a host user that is not root runs the kernel under its own uid and gid: the
  folder (0700) and the sockets belong to that user, and nobody else gets in;
- root never runs the kernel as root: the kernel gets a uid that no account on
  the host has (`sandbox_ids`), the folder is given to that uid (0700), and root
  reaches the sockets through its own override of file permissions. A uid of a
  real host account (such as the image's 1000) would let that person drive the
  sandbox's kernel.

Every container is labelled with its session and its owner (host, pid and the
process's start time), so `reap_orphans` can tell a live owner from a pid that
was reused, and remove what a killed process left behind.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty
from typing import Any

import docker
import docker.errors
from docker.models.containers import Container
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.connect import KernelConnectionInfo

from codeward.executors.base import SandboxError

__all__ = [
    "IPC_DIR_LABEL",
    "OWNER_HOST_LABEL",
    "OWNER_PID_LABEL",
    "OWNER_STARTED_LABEL",
    "SESSION_LABEL",
    "Hardening",
    "KernelContainer",
    "list_sandboxes",
    "owner_alive",
    "process_started",
    "reap_orphans",
    "sandbox_ids",
    "start_kernel_container",
]

SESSION_LABEL = "codeward.session"
OWNER_PID_LABEL = "codeward.owner.pid"
OWNER_STARTED_LABEL = "codeward.owner.started"
OWNER_HOST_LABEL = "codeward.owner.host"
IPC_DIR_LABEL = "codeward.ipc_dir"

#: Where the ipc folder appears inside the container, and the home the image's user has.
CONTAINER_IPC_DIR = "/run/codeward"
CONTAINER_HOME = "/home/sandbox"
IPC_DIR_PREFIX = "codeward-ipc-"
_SOCKET_NAME = "kernel"
_MAX_SOCKET_PATH = 107  # sun_path holds 108 bytes with the final NUL
# The first uid tried for root's sandboxes: inside Debian's range for
# project-allocated ids, below systemd's dynamic users, normally free.
_UNUSED_UID_START = 61000


@dataclass(frozen=True)
class Hardening:
    """The limits a sandbox runs under; every default is the strict one."""

    network: str = "none"
    mem_limit: str = "1g"
    cpus: float = 1.0
    pids_limit: int = 256
    tmpfs_size: str = "256m"
    runtime: str | None = None

    def run_options(self, uid: int, gid: int) -> dict[str, Any]:
        """The Docker SDK arguments that enforce these limits for a kernel run as `uid:gid`."""
        options: dict[str, Any] = {
            "network_mode": self.network,
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "read_only": True,
            "tmpfs": {
                "/tmp": f"rw,nosuid,nodev,noexec,size={self.tmpfs_size},mode=1777",
                CONTAINER_HOME: f"rw,nosuid,nodev,noexec,size={self.tmpfs_size},uid={uid},gid={gid},mode=0700",
            },
            "user": f"{uid}:{gid}",
            "mem_limit": self.mem_limit,
            "memswap_limit": self.mem_limit,
            "nano_cpus": int(self.cpus * 1e9),
            "pids_limit": self.pids_limit,
            "init": True,
        }
        if self.runtime:
            options["runtime"] = self.runtime
        return options


@dataclass
class KernelContainer:
    """A started sandbox: its container, its ipc folder and how the host connects to its kernel."""

    container: Container
    ipc_dir: Path
    connection_info: KernelConnectionInfo
    session: str
    _clients: list[BlockingKernelClient] = field(default_factory=list, repr=False)

    def client(self) -> BlockingKernelClient:
        """A kernel client with started channels; closed by `remove`."""
        kernel_client = BlockingKernelClient()
        kernel_client.load_connection_info(self.connection_info)
        kernel_client.start_channels()
        self._clients.append(kernel_client)
        return kernel_client

    def remove(self) -> None:
        """Stop the kernel, remove the container and its folder; safe to call again."""
        while self._clients:
            self._clients.pop().stop_channels()
        try:
            self.container.remove(force=True)
        except docker.errors.NotFound:
            pass
        shutil.rmtree(self.ipc_dir, ignore_errors=True)


def start_kernel_container(
    client: docker.DockerClient,
    image: str,
    hardening: Hardening | None = None,
    *,
    ready_timeout: float = 60.0,
    extra_labels: dict[str, str] | None = None,
) -> KernelContainer:
    """Start a hardened container running an ipykernel, and wait until it answers.

    On any failure the container and folder are removed before the error is raised.
    """
    hardening = hardening or Hardening()
    uid, gid = sandbox_ids()
    session = uuid.uuid4().hex
    ipc_dir = _private_ipc_dir(uid, gid)
    key = secrets.token_hex(32)
    _write_private(ipc_dir / "kernel.json", _connection_info(CONTAINER_IPC_DIR, key), uid, gid)
    labels = {**(extra_labels or {}), **_owner_labels(session, ipc_dir)}
    try:
        container = client.containers.run(
            image,
            ["python3", "-m", "ipykernel_launcher", "-f", f"{CONTAINER_IPC_DIR}/kernel.json"],
            detach=True,
            labels=labels,
            environment={"HOME": CONTAINER_HOME, "USER": "sandbox", "LOGNAME": "sandbox"},
            volumes={str(ipc_dir): {"bind": CONTAINER_IPC_DIR, "mode": "rw"}},
            working_dir=CONTAINER_HOME,
            **hardening.run_options(uid, gid),
        )
    except docker.errors.DockerException as error:
        shutil.rmtree(ipc_dir, ignore_errors=True)
        raise SandboxError(f"could not start a sandbox from image {image!r}: {error}", state_lost=False) from error
    sandbox = KernelContainer(container, ipc_dir, _connection_info(str(ipc_dir), key), session)
    try:
        _wait_until_ready(sandbox, ready_timeout)
    except BaseException:
        sandbox.remove()
        raise
    return sandbox


def sandbox_ids() -> tuple[int, int]:
    """The uid and gid the kernel runs as (see the module's docstring for why)."""
    if os.getuid() != 0:
        return os.getuid(), os.getgid()
    uid = _UNUSED_UID_START
    while _account_exists(uid):
        uid += 1
    return uid, uid


def _account_exists(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def _private_ipc_dir(uid: int, gid: int) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=IPC_DIR_PREFIX))  # mode 0700
    if len(str(folder / f"{_SOCKET_NAME}-5").encode()) > _MAX_SOCKET_PATH:
        folder.rmdir()
        raise SandboxError(
            f"the temporary folder {folder.parent} has too long a path for unix sockets "
            f"(at most {_MAX_SOCKET_PATH} bytes); point TMPDIR at a shorter one, such as /tmp",
            state_lost=False,
        )
    os.chown(folder, uid, gid)
    return folder


def _write_private(path: Path, content: Mapping[str, Any], uid: int, gid: int) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as stream:
        json.dump(content, stream)
    os.chown(path, uid, gid)


def _connection_info(folder: str, key: str) -> KernelConnectionInfo:
    """Connection info whose sockets are `<folder>/kernel-1` .. `-5`: the same numbers on both sides."""
    return {
        "transport": "ipc",
        "ip": f"{folder}/{_SOCKET_NAME}",
        "key": key,
        "signature_scheme": "hmac-sha256",
        "shell_port": 1,
        "iopub_port": 2,
        "stdin_port": 3,
        "control_port": 4,
        "hb_port": 5,
    }


def _wait_until_ready(sandbox: KernelContainer, timeout: float) -> None:
    """Wait for the kernel's first kernel_info reply, failing early if the container stops."""
    kernel_client = sandbox.client()
    kernel_client.kernel_info()  # queued by ZeroMQ until the kernel has bound its socket
    deadline = time.monotonic() + timeout
    while True:
        try:
            reply = kernel_client.get_shell_msg(timeout=0.1)
        except Empty:
            _fail_if_stopped(sandbox.container)
            if time.monotonic() > deadline:
                raise SandboxError(
                    f"the sandbox's kernel did not answer within {timeout:g}s", logs=_logs(sandbox.container)
                ) from None
            continue
        if reply["msg_type"] == "kernel_info_reply":
            return


def _fail_if_stopped(container: Container) -> None:
    container.reload()
    if container.status in {"exited", "dead"}:
        code = container.attrs.get("State", {}).get("ExitCode")
        raise SandboxError(f"the sandbox's kernel exited at start (exit code {code})", logs=_logs(container))


def _logs(container: Container) -> str:
    try:
        return container.logs(tail=50).decode(errors="replace")
    except docker.errors.DockerException:
        return ""


# --- owners and the reaper ------------------------------------------------------------


def process_started(pid: int) -> str | None:
    """When process `pid` started, as ``"<boot id>:<clock ticks>"``; None if it does not exist.

    A pid alone can be reused by an unrelated process; its start time cannot.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ")".
    fields = stat.rsplit(")", 1)[1].split()
    return f"{boot}:{fields[19]}"  # field 22 of proc(5), counted from field 3


def _owner_labels(session: str, ipc_dir: Path) -> dict[str, str]:
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
    started = process_started(pid)
    if started is not None:
        return started == labels.get(OWNER_STARTED_LABEL)
    if Path("/proc").is_dir():
        return False  # Linux, and no such process
    return _pid_exists(pid)  # no /proc to read start times from: the pid alone must do


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def list_sandboxes(client: docker.DockerClient) -> list[Container]:
    """Every codeward sandbox on this engine, running or not (what `codeward sandboxes ls` shows)."""
    return list(client.containers.list(all=True, filters={"label": SESSION_LABEL}))


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
        _remove_ipc_dir(container.labels.get(IPC_DIR_LABEL, ""))
        removed.append(container.name or container.id or "")
    return removed


def _remove_ipc_dir(path: str) -> None:
    """Remove a dead sandbox's folder, but only one that has the shape of ours."""
    folder = Path(path)
    if folder.is_absolute() and folder.name.startswith(IPC_DIR_PREFIX) and folder.is_dir():
        shutil.rmtree(folder, ignore_errors=True)
