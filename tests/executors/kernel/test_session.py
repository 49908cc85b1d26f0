"""The kernel session on its own: transports, kernels owned by someone else, bounded output."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from typing import Any

import pytest

from codeward.executors.base import ExecutionTimeout, SandboxError
from codeward.executors.jupyter import clean_environment
from codeward.executors.kernel.owners import ConnectedKernel, LocalKernel
from codeward.executors.kernel.session import KernelSession


@pytest.fixture
def owner() -> Iterator[LocalKernel]:
    """A kernel started by someone else, as a container runtime would; the session only gets its address."""
    kernel = LocalKernel(env=clean_environment(), transport="ipc")
    yield kernel
    kernel.shutdown()


def test_ipc_sockets_live_in_a_private_folder_that_shutdown_removes() -> None:
    kernel = LocalKernel(env=clean_environment(), transport="ipc")
    session = KernelSession(kernel)
    folder = os.path.dirname(kernel.connection_info()["ip"])
    assert stat.S_IMODE(os.stat(folder).st_mode) & 0o777 == 0o700
    assert any(name.startswith("kernel-") for name in os.listdir(folder))
    assert session.execute("21 * 2").result == {"text/plain": "42"}
    session.close()
    assert not os.path.exists(folder)


def test_tcp_listens_on_loopback_only() -> None:
    session = KernelSession(LocalKernel(env=clean_environment(), transport="tcp"))
    try:
        info = session.process.connection_info()
        assert info["transport"] == "tcp" and info["ip"] == "127.0.0.1"
        assert session.execute("print('over tcp')").logs == "over tcp\n"
    finally:
        session.close()
    with pytest.raises(ValueError, match="transport must be 'tcp' or 'ipc'"):
        LocalKernel(env=clean_environment(), transport="udp")


def test_a_connected_kernel_is_interrupted_by_message_and_keeps_its_state(owner: LocalKernel) -> None:
    connection_file = os.path.join(os.path.dirname(owner.connection_info()["ip"]), "connection.json")
    session = KernelSession(ConnectedKernel.from_file(connection_file, is_alive=owner.is_alive))
    try:
        session.execute("kept = 'still here'")
        started = time.monotonic()
        with pytest.raises(ExecutionTimeout, match="was interrupted"):
            session.execute("while True:\n    pass", timeout=1)
        assert time.monotonic() - started < 1 + session.interrupt_grace
        assert session.execute("kept").result == {"text/plain": "'still here'"}
        assert session.generation == 1
    finally:
        session.close()
    assert owner.is_alive()  # closing the session leaves the owner's kernel to its owner


def test_a_connected_kernel_that_dies_is_restarted_through_its_owner(owner: LocalKernel) -> None:
    restarts: list[dict[str, Any]] = []

    def restart() -> dict[str, Any]:
        owner.restart()
        restarts.append(owner.connection_info())
        return restarts[-1]

    session = KernelSession(ConnectedKernel(owner.connection_info(), is_alive=owner.is_alive, restart=restart))
    try:
        with pytest.raises(SandboxError, match="died"):
            session.execute("import os\nos._exit(3)")
        session.restart()
        assert len(restarts) == 1 and session.generation == 2
        assert session.execute("'fresh'").result == {"text/plain": "'fresh'"}
    finally:
        session.close()


def test_without_a_restart_callback_a_restart_says_what_is_missing(owner: LocalKernel) -> None:
    session = KernelSession(ConnectedKernel(owner.connection_info()))
    try:
        with pytest.raises(SandboxError, match="gave no way to restart it"):
            session.restart()
    finally:
        session.close()


def test_runaway_output_is_cut_in_the_middle_not_hoarded() -> None:
    session = KernelSession(LocalKernel(env=clean_environment()), max_log_chars=1000)
    try:
        logs = session.execute(
            "print('first line')\nfor i in range(20000):\n    print('x' * 50)\nprint('last line')"
        ).logs
    finally:
        session.close()
    assert logs.startswith("first line") and logs.rstrip().endswith("last line")
    assert "characters of output cut" in logs and len(logs) < 1100


def test_the_death_of_a_kernel_names_the_signal() -> None:
    session = KernelSession(LocalKernel(env=clean_environment()))
    try:
        with pytest.raises(SandboxError, match="killed by SIGKILL \\(out of memory\\?\\)") as caught:
            session.execute(
                "import os, signal, time\nprint('going', flush=True)\ntime.sleep(0.5)\nos.kill(os.getpid(), signal.SIGKILL)"
            )
        assert "going" in caught.value.logs  # output that left the kernel before its death is kept
        with pytest.raises(SandboxError, match="closed"):
            session.execute("1")
    finally:
        session.close()


#: Cell code that makes its kernel drop the cell's idle status, as a full iopub queue does in a flood.
DROP_THE_IDLE_STATUS = """
kernel = get_ipython().kernel
publish = kernel._publish_status
def drop_idle_once(status, *args, **kwargs):
    if status == "idle":
        kernel._publish_status = publish
        return None
    return publish(status, *args, **kwargs)
kernel._publish_status = drop_idle_once
print("sent")
"""


def test_a_cell_whose_idle_status_was_dropped_ends_at_its_reply_with_a_note() -> None:
    session = KernelSession(LocalKernel(env=clean_environment()))
    try:
        started = time.monotonic()
        result = session.execute(DROP_THE_IDLE_STATUS, timeout=30)
        took = time.monotonic() - started
        assert result.status == "ok" and result.logs.startswith("sent\n")
        assert "its kernel dropped some of it" in result.logs
        assert took < 10, f"the cell waited {took:.1f} s for a status that will not come"
        assert session.execute("1 + 1", timeout=30).result == {"text/plain": "2"}
    finally:
        session.close()
