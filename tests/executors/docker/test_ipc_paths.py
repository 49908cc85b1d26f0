"""The host connects only to kernel sockets that the sandbox cannot swap for a link.

A link in place of a socket would lead the host's ZeroMQ, at its first connect or at any
reconnect, to a unix socket only the host can reach (a daemon's, as root). Each attack
aims at such a socket, made by the test, and counts who connects to it.
"""

from __future__ import annotations

import errno
import shlex
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
import zmq

from codeward.executors.base import ExecutionTimeout, SandboxError
from codeward.executors.docker import sandbox as sandbox_module
from codeward.executors.docker.executor import DockerExecutor
from codeward.executors.docker.hardening import Hardening
from codeward.executors.docker.sandbox import CONTAINER_IPC_DIR, start_kernel_container

_CHANNELS = {1: "shell", 2: "iopub", 3: "stdin", 4: "control", 5: "hb"}


class HostListener:
    """A unix socket of the host's user, outside any ipc folder, that counts the connections it accepts."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.connections = 0
        self._server = socket.socket(socket.AF_UNIX)
        self._server.bind(str(path))
        self._server.listen(16)
        self._server.settimeout(0.1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._server.accept()
            except TimeoutError:
                continue
            connection.close()
            self.connections += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._server.close()


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[HostListener]:
    started = HostListener(tmp_path / "host-only.sock")
    yield started
    started.close()


def _swap_attempts(target: Path) -> str:
    """Sandbox code that tries to put a link to `target` in place of each kernel socket, and says how each try ended."""
    return f"""
import errno, os
outcomes = []
for number in range(1, 6):
    path = "{CONTAINER_IPC_DIR}/kernel-" + str(number)
    for swap in (lambda: os.symlink({str(target)!r}, path),
                 lambda: (os.symlink({str(target)!r}, "/tmp/link"), os.rename("/tmp/link", path))):
        try:
            swap()
            outcomes.append("swapped")
        except OSError as error:
            outcomes.append(errno.errorcode[error.errno])
        if os.path.lexists("/tmp/link"):
            os.unlink("/tmp/link")
"""


def test_code_in_the_sandbox_cannot_swap_a_socket_the_host_reconnects_to(
    sandbox_image: str, listener: HostListener, runtime: str | None
) -> None:
    """The swap is tried, then the host is made to reconnect: by a restart and by a kernel that dies."""
    ignore_interrupts = (
        "import time\nwhile True:\n    try:\n        time.sleep(10)\n    except KeyboardInterrupt:\n        pass"
    )
    with DockerExecutor(timeout_seconds=2, runtime=runtime) as executor:
        outcomes = executor.run(_swap_attempts(listener.path) + "outcomes").output
        refused = {errno.errorcode[errno.EACCES], errno.errorcode[errno.ENOENT]}
        # gVisor checks a rename's mounts before its permissions: from /tmp that is EXDEV, still no swap.
        assert set(outcomes[::2]) <= refused and set(outcomes[1::2]) <= refused | {errno.errorcode[errno.EXDEV]}, (
            outcomes
        )
        with pytest.raises(ExecutionTimeout, match="restarted"):
            executor.run(_swap_attempts(listener.path) + ignore_interrupts)
        with pytest.raises(SandboxError):
            executor.run(_swap_attempts(listener.path) + "os._exit(1)")
        assert executor.run("6 * 7").output == 42
    assert listener.connections == 0


def test_a_link_to_the_host_socket_is_followed_by_a_connect_by_path(tmp_path: Path, listener: HostListener) -> None:
    """The control: had a swap worked, the host's ZeroMQ would reach the listener through the link."""
    link = tmp_path / "kernel-1"
    link.symlink_to(listener.path)
    context = zmq.Context()
    try:
        dealer = context.socket(zmq.DEALER)
        dealer.connect(f"ipc://{link}")
        dealer.send(b"", zmq.NOBLOCK)
        assert _connected_within(listener, 5)
    finally:
        context.destroy(linger=0)


def _hostile_kernel(monkeypatch: pytest.MonkeyPatch, target: Path, number: int) -> None:
    """Stand in for an image whose code, run as the container starts, puts a link to `target` at
    `kernel-<number>` and has the kernel bind that channel elsewhere in the shared folder."""
    rewrite = (
        "import json, sys; info = json.load(open(sys.argv[1])); "
        f"info[{_CHANNELS[number] + '_port'!r}] = 6; json.dump(info, open('/tmp/kernel.json', 'w'))"
    )
    link = f"ln -s {shlex.quote(str(target))} {CONTAINER_IPC_DIR}/kernel-{number}"
    kernel = "exec python3 -m ipykernel_launcher --IPKernelApp.parent_handle=1 -f /tmp/kernel.json"
    script = f'{link} && python3 -c {shlex.quote(rewrite)} "$0" && {kernel}'
    monkeypatch.setattr(sandbox_module, "_KERNEL_COMMAND", ("sh", "-c", script))


@pytest.mark.parametrize("number", sorted(_CHANNELS))
def test_a_socket_swapped_before_the_kernel_answers_is_refused(
    docker_client: docker.DockerClient,
    sandbox_image: str,
    listener: HostListener,
    monkeypatch: pytest.MonkeyPatch,
    number: int,
    runtime: str | None,
) -> None:
    _hostile_kernel(monkeypatch, listener.path, number)
    with pytest.raises(SandboxError, match=f"something other than its kernel's socket at kernel-{number}"):
        start_kernel_container(docker_client, sandbox_image, Hardening(runtime=runtime), ready_timeout=30)
    assert listener.connections == 0


def test_without_the_check_a_socket_swapped_at_start_leads_the_host_to_its_target(
    docker_client: docker.DockerClient, sandbox_image: str, listener: HostListener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: the same hostile start, with the host's check of what it moved turned off."""
    _hostile_kernel(monkeypatch, listener.path, 1)
    monkeypatch.setattr(sandbox_module, "_check_socket", lambda path, uid: None)
    with pytest.raises(SandboxError, match="did not answer"):
        start_kernel_container(docker_client, sandbox_image, ready_timeout=3)
    assert listener.connections > 0


def _connected_within(listener: HostListener, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not listener.connections and time.monotonic() < deadline:
        time.sleep(0.05)
    return listener.connections > 0
