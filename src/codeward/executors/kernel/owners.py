"""Who owns a kernel: `LocalKernel` starts a subprocess through jupyter_client's `KernelManager`;
`ConnectedKernel` talks to a kernel that someone else runs (a container) and leaves its
lifecycle to that owner. Either is a session's `KernelProcess`.
"""

from __future__ import annotations

import contextvars
import json
import os
import shutil
import signal
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

from codeward.executors.base import SandboxError
from codeward.executors.kernel.folders import KERNEL_PREFIX, owned_folder

__all__ = ["ConnectedKernel", "LocalKernel"]

T = TypeVar("T")
_thread_contexts = threading.local()


def _on_this_threads_loop(call: Callable[[], T]) -> T:
    """`call()` (a blocking jupyter_client call) in a context this thread keeps for them. jupyter_core
    runs such a call's coroutine on the event loop it keeps in a context variable; called from a pool
    thread (`arun`'s starts and stops) with a copy of its caller's context, it would take the caller's
    loop, which another thread may be running. A context per thread gives each thread a loop of its own."""
    context = getattr(_thread_contexts, "context", None)
    if context is None:
        context = _thread_contexts.context = contextvars.Context()
    return context.run(call)


class LocalKernel:
    """A kernel subprocess on this machine, in its own process group.

    Its connection file, ipc sockets and stderr log live in a private 0700
    folder that is removed at shutdown (or, if this process is killed, by the
    next executor start: see `folders`). The environment is exactly `env`: the
    caller decides what the kernel may see.
    """

    def __init__(
        self,
        *,
        argv: list[str] | None = None,
        kernel_name: str = "python3",
        env: dict[str, str],
        cwd: str | None = None,
        transport: str = "tcp",
        extra_arguments: list[str] | None = None,
    ) -> None:
        if transport not in ("tcp", "ipc"):
            raise ValueError(f"transport must be 'tcp' or 'ipc', got {transport!r}")
        self._folder = owned_folder(KERNEL_PREFIX)  # 0700, and reaped if this process is killed
        specs = {} if argv is None else {"kernel_spec_manager": _spec_manager(self._folder, argv)}
        self._manager = KernelManager(
            kernel_name=kernel_name if argv is None else "codeward",
            transport=transport,
            **specs,
            ip=os.path.join(self._folder, "kernel") if transport == "ipc" else "127.0.0.1",
            connection_file=os.path.join(self._folder, "connection.json"),
        )
        self._stderr_path = os.path.join(self._folder, "stderr.log")
        # Kept open for restarts, which launch the kernel again with the same arguments.
        self._stderr = open(self._stderr_path, "ab")  # noqa: SIM115
        try:
            _on_this_threads_loop(
                lambda: self._manager.start_kernel(
                    env=dict(env),
                    cwd=cwd,
                    extra_arguments=extra_arguments or [],
                    stdout=self._stderr,
                    stderr=self._stderr,
                )
            )
        except BaseException:
            self.shutdown()
            raise

    def connection_info(self) -> dict[str, Any]:
        return dict(self._manager.get_connection_info(session=False))

    @property
    def pid(self) -> int | None:
        """The kernel's process id, while it runs."""
        process = getattr(self._manager.provisioner, "process", None)
        return getattr(process, "pid", None)

    def is_alive(self) -> bool:
        return self._manager.has_kernel and _on_this_threads_loop(self._manager.is_alive)

    def interrupt(self, client: BlockingKernelClient) -> None:
        if self.is_alive():
            _on_this_threads_loop(self._manager.interrupt_kernel)

    def restart(self) -> None:
        self._kill_group()
        _on_this_threads_loop(lambda: self._manager.restart_kernel(now=True))

    def shutdown(self) -> None:
        if self._stderr.closed:
            return
        if self._manager.has_kernel:
            self._kill_group()
            _on_this_threads_loop(lambda: self._manager.shutdown_kernel(now=True))
        else:
            _on_this_threads_loop(self._manager.cleanup_resources)
        self._stderr.close()
        shutil.rmtree(self._folder, ignore_errors=True)

    def describe_death(self) -> str:
        provisioner = self._manager.provisioner
        process = getattr(provisioner, "process", None)
        code = process.poll() if process is not None else None
        if code is None:
            how = "the kernel stopped answering"
        elif code < 0:
            name = signal.Signals(-code).name
            how = f"the kernel was killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else "")
        else:
            how = f"the kernel exited with code {code}"
        tail = _tail(self._stderr_path)
        return how + (f"; the end of its stderr:\n{tail}" if tail else "")

    def _kill_group(self) -> None:
        """Kill the kernel's process group, so children it started go with it."""
        pgid = getattr(self._manager.provisioner, "pgid", None)
        if pgid:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except OSError:
                pass


class ConnectedKernel:
    """A kernel that another party runs (a container); we only hold its address.

    Interrupts go as `interrupt_request` messages on the control channel, so no
    signal has to cross into the sandbox. Restarting and liveness belong to the
    owner, through the callbacks it passes.
    """

    def __init__(
        self,
        connection_info: dict[str, Any],
        *,
        is_alive: Callable[[], bool] | None = None,
        restart: Callable[[], dict[str, Any]] | None = None,
        shutdown: Callable[[], None] | None = None,
        describe_death: Callable[[], str] | None = None,
    ) -> None:
        self._info = dict(connection_info)
        self._is_alive = is_alive
        self._restart = restart
        self._shutdown = shutdown
        self._describe = describe_death

    @classmethod
    def from_file(cls, connection_file: str, **owner: Any) -> ConnectedKernel:
        """The kernel described by a connection file (as written by the kernel or its launcher)."""
        with open(connection_file, encoding="utf-8") as handle:
            return cls(json.load(handle), **owner)

    def connection_info(self) -> dict[str, Any]:
        return self._info

    def is_alive(self) -> bool:
        return self._is_alive() if self._is_alive else True

    def interrupt(self, client: BlockingKernelClient) -> None:
        client.control_channel.send(client.session.msg("interrupt_request", {}))

    def restart(self) -> None:
        if self._restart is None:
            raise SandboxError("the kernel must be restarted, but its owner gave no way to restart it")
        self._info = dict(self._restart())

    def shutdown(self) -> None:
        if self._shutdown is not None:
            self._shutdown()
            self._shutdown = None

    def describe_death(self) -> str:
        return self._describe() if self._describe else "the kernel is gone"


def _spec_manager(folder: str, argv: list[str]) -> KernelSpecManager:
    """A spec manager that knows only our own kernel spec, whose `argv` names the interpreter."""
    spec_dir = os.path.join(folder, "kernels", "codeward")
    os.makedirs(spec_dir)
    with open(os.path.join(spec_dir, "kernel.json"), "w") as handle:
        json.dump({"argv": argv, "display_name": "codeward", "language": "python", "interrupt_mode": "signal"}, handle)
    return KernelSpecManager(kernel_dirs=[os.path.join(folder, "kernels")], ensure_native_kernel=False)


def _tail(path: str, limit: int = 2000) -> str:
    """The end of a kernel's stderr, without the kernel application's own log lines."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(handle.tell() - limit, 0))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(line for line in text.splitlines() if not line.startswith("[IPKernelApp]")).strip()
