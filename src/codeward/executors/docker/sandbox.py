"""A hardened container running an ipykernel that the host reaches through ipc sockets.

No port is published and the container has no network: the kernel's five
ZeroMQ sockets are unix sockets that it binds in a folder on the host,
bind-mounted into the container, and that end up in a private folder the
container cannot see. The host's `jupyter_client` connects to them directly.

Who owns the folders. The kernel, inside the container, *creates* the sockets, so
its user must be able to write the folder it sees; the host process *connects*, so
it must be able to write the sockets. Both hold when the two sides are one uid:
- a host user that is not root runs the kernel under its own uid and gid: the
  folders (0700) and the sockets belong to that user, and nobody else gets in;
- root never runs the kernel as root: the kernel gets a uid that no account on
  the host has (`sandbox_ids`), the shared folder is given to that uid (0700), and
  root reaches the sockets through its own override of file permissions. A uid of a
  real host account (such as the image's 1000) would let that person drive the
  sandbox's kernel.

What the sandbox can write. The shared folder is on the host's disk, beyond the
container's size-capped tmpfs, so it is shared only until the kernel answers. The
host never connects through it: anything in it may have been swapped by the
container for a link to a host-only socket, which the host's ZeroMQ would follow
(at its first connect and at every reconnect). Once the kernel has bound its
sockets the host moves them into the folder above (which the container never
sees; a bound socket follows its file, and a rename moves a link, never its
target), checks without following links that each is a socket of the sandbox's
uid, and only then connects; from there on only the host can change those paths,
so the check holds for every reconnect. When the kernel answers, the host deletes
`kernel.json` (read once, at start) and removes the shared folder. A removed folder
takes no new names, even through the container's mount of it; and where the host is
root it is first taken back from the sandbox's uid, so it takes no unnamed
`O_TMPFILE` files either.

Every container is labelled with its session and its owner (host, pid and the
process's start time), so `reap_orphans` can tell a live owner from a pid that
was reused, and remove what a killed process left behind. Anyone who can reach
the engine can write labels, so the reaper never takes a folder from a label: it
removes only the folder codeward makes for that session under this process's
temporary root, and only if it is a real folder of this user (`owners`). The reaper runs when codeward
next starts; until then each container's `watchdog` removes it as soon as its owner dies.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import stat
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty
from typing import TYPE_CHECKING, Any

import docker
import docker.errors
from docker.models.containers import Container
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.connect import KernelConnectionInfo

from codeward.executors.base import SandboxError
from codeward.executors.docker.gvisor import RuntimeUnusable, checked_runtime, mounts_problem
from codeward.executors.docker.hardening import (
    CONTAINER_HOME,
    Hardening,
    checked_extra_run_kwargs,
    container_log_config,
    sandbox_ids,
)
from codeward.executors.docker.images import ENGINE_ERRORS, SandboxImageError, engine_client, require_image
from codeward.executors.docker.mounts import Mount, MountSpec, checked_mounts
from codeward.executors.docker.owners import ipc_dir_path, owner_labels, reap_orphans
from codeward.executors.docker.watchdog import Watchdog, watch
from codeward.executors.kernel.folders import reap_dead_owners

if TYPE_CHECKING:
    from codeward.egress.policy import EgressPolicy
    from codeward.egress.proxy import EgressBudget, EgressProxy

__all__ = [
    "KernelContainer",
    "SandboxSpec",
    "sandbox_ids",
    "sandbox_spec",
    "start_kernel_container",
]

log = logging.getLogger(__name__)


#: Where the shared folder appears inside the container (removed once the kernel answers).
CONTAINER_IPC_DIR = "/run/codeward"
_SHARED_NAME = "shared"
_SOCKET_NAME = "kernel"
_SOCKET_NAMES = tuple(f"{_SOCKET_NAME}-{port}" for port in range(1, 6))
# No history database: nobody reads it, and it costs start time and tmpfs space. parent_handle=1
# stops the kernel printing its "how to connect" banner, so the container's output holds only
# what went wrong.
_KERNEL_COMMAND = (
    "python3",
    "-m",
    "ipykernel_launcher",
    "--HistoryManager.enabled=False",
    "--IPKernelApp.parent_handle=1",
    "-f",
)
_MAX_SOCKET_PATH = 107  # sun_path holds 108 bytes with the final NUL
_LIVENESS_INTERVAL = 0.1
_SOCKET_POLL = 0.005
#: How long a name the kernel made may take to become its socket (gVisor makes the file first).
_BINDING_GRACE = 1.0


def sandbox_spec(
    image: str | None,
    hardening: Hardening,
    docker_client: docker.DockerClient | None,
    extra_run_kwargs: dict[str, Any] | None,
    egress: EgressPolicy | None = None,
    egress_budget: EgressBudget | None = None,
    mounts: Mapping[str, MountSpec] | None = None,
) -> SandboxSpec:
    """Check and settle what sandboxes will be like; log any loosening, and reap orphans on the engine.

    A runtime the engine lacks, a gVisor that cannot run the kernel, or a mount that would give
    the host away (`mounts.checked_mounts`), fails here, before any container starts.
    """
    extra = checked_extra_run_kwargs(extra_run_kwargs)
    binds = checked_mounts(mounts, sandbox_ids())
    if binds:
        log.info("docker sandboxes get host mounts: %s", {target: m.mode for target, m in binds.items()})
    if loosened := hardening.loosened():
        log.warning("docker sandbox settings looser than the strict defaults: %s", loosened)
    if egress is not None and hardening.network != "none":
        raise ValueError(
            f"an egress list gives the sandbox one way out, through codeward's proxy; network={hardening.network!r} "
            "would give it another: leave network at 'none'"
        )
    client = docker_client or engine_client()
    if hardening.runtime:
        runtimes = _engine_runtimes(client)
        checked_runtime(runtimes, hardening.runtime, hardening.network, hardening.pids_limit, egress is not None)
        problem = mounts_problem(runtimes, hardening.runtime, {target: m.mode for target, m in binds.items()})
        if problem:
            raise RuntimeUnusable(str(problem))
    reaped = reap_orphans(client)
    if reaped:
        log.info("removed %d sandbox(es) whose owner process is gone: %s", len(reaped), ", ".join(reaped))
    reap_dead_owners()  # and the kernel folders of jupyter executors whose host was killed
    chosen = _image_here(client, image) if image else str(require_image(client).id)
    return SandboxSpec(client, chosen, hardening, extra, egress, egress_budget, binds)


def _image_here(client: docker.DockerClient, image: str) -> str:
    """The image the user named, which must be on this engine: a sandbox never pulls from a registry as
    it starts (an image fetched unasked is code no one chose to trust, and a wait no one expected)."""
    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        raise SandboxImageError(
            f"the image {image!r} is not on this Docker engine, and sandboxes never pull one: "
            f"`docker pull {image}` (or build it) first, or leave image= unset to use codeward's sandbox image"
        ) from None
    except ENGINE_ERRORS as error:
        raise SandboxError(f"could not look up the image {image!r}: {error}", state_lost=False) from error
    return image


def _engine_runtimes(client: docker.DockerClient) -> dict[str, Any]:
    """The container runtimes the engine has registered, as `docker info` reports them."""
    try:
        runtimes: dict[str, Any] = client.info().get("Runtimes") or {}
    except ENGINE_ERRORS as error:
        raise SandboxError(f"the Docker engine does not answer: {error}", state_lost=False) from error
    return runtimes


@dataclass
class SandboxSpec:
    """Everything that makes sandboxes alike: engine, image, limits and harmless extra settings."""

    client: docker.DockerClient
    image: str
    hardening: Hardening
    extra_run_kwargs: dict[str, Any]
    #: What the sandbox may reach through its own egress proxy; None: no way out at all.
    egress: EgressPolicy | None = None
    egress_budget: EgressBudget | None = None
    #: Host paths shown to the sandbox, by target, sources resolved and checked (`mounts`).
    mounts: dict[str, Mount] = field(default_factory=dict)

    def start(self) -> KernelContainer:
        """A new sandbox whose kernel answers; an engine that is away is a `SandboxError`."""
        try:
            self.client.ping()
        except ENGINE_ERRORS as error:
            raise SandboxError(f"the Docker engine does not answer: {error}") from error
        proxy = None
        if self.egress is not None:
            from codeward.egress.proxy import EgressProxy

            proxy = EgressProxy(self.egress, self.egress_budget, sandbox_ids())
        try:
            return start_kernel_container(
                self.client,
                self.image,
                self.hardening,
                extra_run_kwargs=self.extra_run_kwargs,
                egress=proxy,
                mounts=self.mounts,
            )
        except BaseException:
            if proxy is not None:
                proxy.close()
            raise


@dataclass
class KernelContainer:
    """A started sandbox: its container, its ipc folder and how the host connects to its kernel."""

    container: Container
    ipc_dir: Path
    connection_info: KernelConnectionInfo
    session: str
    #: The bootstrap cell its kernel ran before any executor took it (a pool's warm-up), or "".
    prepared: str = field(default="", repr=False)
    #: The process that removes the container if this one dies first (`watchdog`).
    watchdog: Watchdog | None = field(default=None, repr=False)
    #: The sandbox's egress proxy, closed with it; None for a sandbox with no way out.
    egress: EgressProxy | None = field(default=None, repr=False)
    _clients: list[BlockingKernelClient] = field(default_factory=list, repr=False)

    def client(self) -> BlockingKernelClient:
        """A kernel client with started channels whose output channel already hears; closed by `remove`."""
        kernel_client = BlockingKernelClient()
        kernel_client.load_connection_info(self.connection_info)
        kernel_client.start_channels()
        self._clients.append(kernel_client)
        _await_subscription(kernel_client)
        return kernel_client

    def release(self, kernel_client: BlockingKernelClient) -> None:
        """Close a client from `client()` before the sandbox is removed."""
        kernel_client.stop_channels()
        if kernel_client in self._clients:
            self._clients.remove(kernel_client)

    def is_running(self) -> bool:
        """Whether the container still runs; an engine that does not answer counts as no."""
        try:
            self.container.reload()
        except ENGINE_ERRORS:
            return False
        return bool(self.container.status == "running")

    def describe_exit(self) -> str:
        """Why the container stopped, in words, with the end of what the kernel wrote."""
        try:
            self.container.reload()
        except docker.errors.NotFound:
            return "the sandbox's container was removed from outside"
        except ENGINE_ERRORS as error:
            return f"the Docker engine stopped answering ({type(error).__name__})"
        state = self.container.attrs.get("State", {})
        if state.get("OOMKilled"):
            limit = self.container.attrs.get("HostConfig", {}).get("Memory") or 0
            how = f"the sandbox ran out of memory (limit {limit / 2**20:.0f} MiB) and was killed"
        elif state.get("Running"):
            how = "the sandbox's kernel stopped answering"
        elif state.get("ExitCode") == 137:
            how = "the sandbox was killed (SIGKILL), from outside or for lack of memory"
        else:
            how = f"the sandbox's kernel exited with code {state.get('ExitCode')}"
        tail = _logs(self.container).strip()
        return how + (f"; the end of its output:\n{tail[-2000:]}" if tail else "")

    def task_count(self) -> int | None:
        """How many processes and threads the container holds: what its pids limit counts.

        Read from the container's cgroup when the engine runs on this machine
        (microseconds), else asked of the engine (about a second); None if neither answers.
        """
        for path in _cgroup_pids_files(self.container.id or ""):
            try:
                return int(Path(path).read_text())
            except (OSError, ValueError):
                continue
        try:
            stats: dict[str, Any] = self.container.stats(stream=False)
            return int(stats["pids_stats"]["current"])
        except (*ENGINE_ERRORS, KeyError, TypeError, ValueError):
            return None

    def remove(self) -> bool:
        """Stop the kernel, remove the container and its folder; safe to call again.

        False when the engine did not answer, so the container may remain: call again later.
        """
        while self._clients:
            self._clients.pop().stop_channels()
        shutil.rmtree(self.ipc_dir, ignore_errors=True)
        try:
            self.container.remove(force=True)
        except docker.errors.NotFound:
            pass
        except ENGINE_ERRORS:
            return False  # the watchdog stays: the container may remain
        if self.watchdog is not None:
            self.watchdog.release()
        if self.egress is not None:
            self.egress.close()
        return True


def _cgroup_pids_files(container_id: str) -> list[str]:
    """Where a local engine keeps a container's task count: cgroup v1, v2 with systemd, v2 with cgroupfs."""
    return [
        f"/sys/fs/cgroup/pids/docker/{container_id}/pids.current",
        f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/pids.current",
        f"/sys/fs/cgroup/docker/{container_id}/pids.current",
    ]


def start_kernel_container(
    client: docker.DockerClient,
    image: str,
    hardening: Hardening | None = None,
    *,
    ready_timeout: float = 60.0,
    extra_labels: dict[str, str] | None = None,
    extra_run_kwargs: dict[str, Any] | None = None,
    egress: EgressProxy | None = None,
    mounts: Mapping[str, MountSpec] | None = None,
) -> KernelContainer:
    """Start a hardened container running an ipykernel, and wait until it answers.

    `extra_run_kwargs` may only add settings that do not weaken the sandbox
    (`checked_extra_run_kwargs`), and `mounts` are checked again here (a source may have
    changed since its spec was made). On any failure the container and folder are
    removed before the error is raised.
    """
    hardening = hardening or Hardening()
    extra = {"log_config": container_log_config(), **checked_extra_run_kwargs(extra_run_kwargs)}
    environment = {**extra.pop("environment", {}), "HOME": CONTAINER_HOME, "USER": "sandbox", "LOGNAME": "sandbox"}
    uid, gid = sandbox_ids()
    binds = [
        docker.types.Mount(target, bind.source, type="bind", read_only=bind.mode == "ro")
        for target, bind in checked_mounts(mounts, (uid, gid)).items()
    ]
    session = uuid.uuid4().hex
    ipc_dir = _private_ipc_dir(session)
    shared = _shared_dir(ipc_dir, uid, gid)
    key = secrets.token_hex(32)
    _write_private(shared / "kernel.json", _connection_info(CONTAINER_IPC_DIR, key), uid, gid)
    labels = {**(extra_labels or {}), **owner_labels(session, ipc_dir)}
    command = [*_KERNEL_COMMAND, f"{CONTAINER_IPC_DIR}/kernel.json"]
    volumes = {str(shared): {"bind": CONTAINER_IPC_DIR, "mode": "rw"}}
    if egress is not None:
        command = egress.command(command)
        environment.update(egress.environment())
        volumes.update(egress.volumes())
    try:
        container = client.containers.run(
            image,
            command,
            detach=True,
            labels=labels,
            environment=environment,
            volumes=volumes,
            mounts=binds,
            working_dir=CONTAINER_HOME,
            **extra,
            **hardening.run_options(uid, gid, packages=egress is not None),
        )
    except ENGINE_ERRORS as error:
        shutil.rmtree(ipc_dir, ignore_errors=True)
        raise SandboxError(f"could not start a sandbox from image {image!r}: {error}", state_lost=False) from error
    sandbox = KernelContainer(container, ipc_dir, _connection_info(str(ipc_dir), key), session, egress=egress)
    deadline = time.monotonic() + ready_timeout
    try:
        sandbox.watchdog = watch(container.id or "", str(ipc_dir))
        _take_sockets(sandbox, shared, uid, deadline)
        _wait_until_ready(sandbox, deadline)
        _end_sharing(shared)
    except BaseException:
        sandbox.remove()
        raise
    return sandbox


def _private_ipc_dir(session: str) -> Path:
    """The host's folder for a sandbox: the kernel's sockets end up here, where the container cannot reach.

    Its name is the session's, so the reaper can find it again without trusting a label.
    """
    folder = ipc_dir_path(session)
    if len(str(folder / _SOCKET_NAMES[-1]).encode()) > _MAX_SOCKET_PATH:
        raise SandboxError(
            f"the temporary folder {folder.parent} has too long a path for unix sockets "
            f"(at most {_MAX_SOCKET_PATH} bytes); point TMPDIR at a shorter one, such as /tmp",
            state_lost=False,
        )
    folder.mkdir(mode=0o700)  # fails if anything has the name: the session is fresh and random
    return folder


def _shared_dir(ipc_dir: Path, uid: int, gid: int) -> Path:
    """The folder the container sees until its kernel answers, where the kernel binds its sockets."""
    shared = ipc_dir / _SHARED_NAME
    shared.mkdir(mode=0o700)
    os.chown(shared, uid, gid)
    return shared


def _take_sockets(sandbox: KernelContainer, shared: Path, uid: int, deadline: float) -> None:
    """Move the kernel's sockets out of the container's reach, then check what was moved.

    Checked before the move, a socket could be swapped for a link in between; moved first,
    it sits where only the host can change it, so the check holds for every later connect.
    """
    _wait_for_sockets(sandbox, shared, deadline)
    _wait_until_bound(shared, uid, min(deadline, time.monotonic() + _BINDING_GRACE))
    try:
        for name in _SOCKET_NAMES:
            os.rename(shared / name, sandbox.ipc_dir / name)
    except OSError as error:
        raise SandboxError(f"could not take the kernel's sockets out of the sandbox's reach: {error}") from error
    for name in _SOCKET_NAMES:
        _check_socket(sandbox.ipc_dir / name, uid)


def _wait_for_sockets(sandbox: KernelContainer, shared: Path, deadline: float) -> None:
    """Wait until the kernel has bound all five sockets (the heartbeat's thread may be last); fail early if it stops."""
    next_check = time.monotonic() + _LIVENESS_INTERVAL
    while not all(os.path.lexists(shared / name) for name in _SOCKET_NAMES):
        now = time.monotonic()
        if now > deadline:
            raise SandboxError("the sandbox's kernel did not open its sockets in time", logs=_logs(sandbox.container))
        if now > next_check:
            _fail_if_stopped(sandbox)
            next_check = now + _LIVENESS_INTERVAL
        time.sleep(_SOCKET_POLL)


def _is_bound(path: Path, uid: int) -> bool:
    try:
        info = path.lstat()
    except OSError:
        return False
    return stat.S_ISSOCK(info.st_mode) and info.st_uid == uid


def _wait_until_bound(shared: Path, uid: int, until: float) -> None:
    """Give names that exist a moment to become the sandbox's sockets: under gVisor a socket's file
    appears on the host before it is wholly made. What is still not one is refused after the move."""
    while not all(_is_bound(shared / name, uid) for name in _SOCKET_NAMES) and time.monotonic() < until:
        time.sleep(_SOCKET_POLL)


def _check_socket(path: Path, uid: int) -> None:
    """Refuse anything but a socket the sandbox's uid bound: a link would lead the host's ZeroMQ elsewhere."""
    try:
        info = path.lstat()
    except OSError as error:
        raise SandboxError(f"the kernel's socket {path.name} is gone: {error}") from error
    if not stat.S_ISSOCK(info.st_mode) or info.st_uid != uid:
        raise SandboxError(
            f"the sandbox put something other than its kernel's socket at {path.name}; the host does not connect to it"
        )


def _end_sharing(shared: Path) -> None:
    """Delete `kernel.json` and remove `shared`, so the sandbox can write nothing there.

    Done once the kernel has answered, so it has read `kernel.json`. See the module's
    docstring for why this bounds the sandbox.
    """
    try:
        os.chown(shared, os.getuid(), os.getgid())
        (shared / "kernel.json").unlink()
        shared.rmdir()
    except OSError as error:
        raise SandboxError(f"could not take the sandbox's ipc folder back from it: {error}") from error


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


def _wait_until_ready(sandbox: KernelContainer, deadline: float) -> None:
    """Wait for the kernel's first kernel_info reply; fail early if the container stops.

    The client used here is closed before returning, so a sandbox started on one
    thread (a pool's) holds no sockets of that thread when another takes it.
    """
    kernel_client = BlockingKernelClient()
    kernel_client.load_connection_info(sandbox.connection_info)
    kernel_client.start_channels(iopub=False, stdin=False, hb=False, control=False)
    try:
        kernel_client.kernel_info()
        while True:
            try:
                reply = kernel_client.get_shell_msg(timeout=_LIVENESS_INTERVAL)
            except Empty:
                _fail_if_stopped(sandbox)
                if time.monotonic() > deadline:
                    raise SandboxError(
                        "the sandbox's kernel did not answer in time", logs=_logs(sandbox.container)
                    ) from None
                continue
            if reply["msg_type"] == "kernel_info_reply":
                return
    finally:
        kernel_client.stop_channels()


def _await_subscription(kernel_client: BlockingKernelClient, timeout: float = 30.0) -> None:
    """Ask for kernel_info until a message about it arrives on iopub: the subscription is then live.

    A ZeroMQ subscription takes effect a moment after its socket connects, and what the kernel
    publishes before then is lost. Under gVisor that moment is long enough to lose all the output
    of a first cell, or the status that ends it.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg_id = kernel_client.kernel_info()
        retry_at = min(deadline, time.monotonic() + _LIVENESS_INTERVAL)
        while (left := retry_at - time.monotonic()) > 0:
            try:
                message = kernel_client.get_iopub_msg(timeout=left)
            except Empty:
                break
            if message["parent_header"].get("msg_id") == msg_id:
                return
    raise SandboxError(f"the sandbox's kernel sent no output within {timeout:.0f} s of connecting")


def _fail_if_stopped(sandbox: KernelContainer) -> None:
    if not sandbox.is_running():
        raise SandboxError(
            f"the sandbox's kernel exited at start: {sandbox.describe_exit()}", logs=_logs(sandbox.container)
        )


def _logs(container: Container) -> str:
    try:
        text: str = container.logs(tail=50).decode(errors="replace")
        return text
    except ENGINE_ERRORS:
        return ""
