"""`executor="docker"`: the model's code runs in a hardened container's Jupyter kernel.

Everything above the kernel is shared with the Jupyter executor
(`KernelExecutor`): the kernel session, the value codec, the host tool bridge
over the kernel's stdin channel. What differs is who runs the kernel: a container with no network, no capabilities, a
read-only root, a non-root user and memory, CPU and pids limits
(`docker_sandbox`), reached through ipc sockets with no port published. A
container that dies (out of memory, killed, engine gone) raises `SandboxError`
and is replaced on the next run; one that ignores a timeout's interrupt is
replaced at once. Containers whose owner died are reaped when an executor starts.

`SandboxPool` keeps sandboxes started ahead of need, so that an executor
built on it starts in milliseconds; a sandbox serves one executor and is then
removed, never handed to another.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import fields
from typing import Any

import docker

from codeward.executors.base import (
    CodeOutput,
    ExecutionError,
    ExecutionTimeout,
    ExecutorError,
    SandboxError,
)
from codeward.executors.bridge import bootstrap_code
from codeward.executors.docker_images import engine_client, require_image
from codeward.executors.docker_sandbox import (
    PACKAGES_DIR,
    Hardening,
    KernelContainer,
    SandboxSpec,
    checked_extra_run_kwargs,
    reap_orphans,
)
from codeward.executors.kernel import ConnectedKernel, KernelSession
from codeward.executors.kernel_executor import KernelExecutor

__all__ = ["DockerExecutor", "SandboxPool", "sandbox_spec"]

log = logging.getLogger(__name__)

#: A sandbox holding this share of its pids limit after a failure counts as fork-bombed.
_EXHAUSTED_SHARE = 0.95
#: Errors that a full process table causes (fork, thread start): only they, and timeouts, make
#: `run` count the sandbox's processes, which can cost a second when the engine is not local.
_RESOURCE_ERRORS = frozenset({"BlockingIOError", "OSError", "RuntimeError", "MemoryError"})
#: Seconds a pool waits before trying again after it could not start a sandbox.
_POOL_RETRY = 1.0


class DockerExecutor(KernelExecutor):
    """Runs code in a hardened Docker container; see the module docstring.

    Every limit has a named argument, and its default is the strict one; a
    loosened setting is logged. `extra_run_kwargs` may add container settings
    that weaken nothing (`docker_sandbox.EXTRA_RUN_KWARGS`). `image` defaults to
    the current codeward sandbox image (`codeward images build` makes it).
    """

    name = "docker"
    packages_prefix = PACKAGES_DIR

    def __init__(
        self,
        image: str | None = None,
        network: str = "none",
        mem_limit: str = "1g",
        cpus: float = 1.0,
        pids_limit: int = 256,
        tmpfs_size: str = "256m",
        runtime: str | None = None,
        timeout_seconds: float | None = 30,
        tools_mode: str = "host",
        pool: SandboxPool | None = None,
        docker_client: docker.DockerClient | None = None,
        extra_run_kwargs: dict[str, Any] | None = None,
        *,
        allow_pickle: bool = False,
    ) -> None:
        hardening = Hardening(network, mem_limit, cpus, pids_limit, tmpfs_size, runtime)
        if pool is not None:
            if image is not None or hardening.changes() or docker_client is not None or extra_run_kwargs:
                raise ValueError(
                    "an executor with a pool runs in the pool's sandboxes: give image, limits, docker_client "
                    "and extra_run_kwargs to SandboxPool(...), not to DockerExecutor(pool=...)"
                )
            self.spec = pool.spec
        else:
            self.spec = sandbox_spec(image, hardening, docker_client, extra_run_kwargs)
        self.pool = pool
        self._sandbox: KernelContainer | None = None
        # Sandboxes whose removal failed while the engine was away; removed at the next chance.
        self._leftovers: list[KernelContainer] = []
        self._replaced_exhausted = False
        super().__init__(timeout_seconds=timeout_seconds, tools_mode=tools_mode, allow_pickle=allow_pickle)
        self._ensure_ready()

    @property
    def hardening(self) -> Hardening:
        return self.spec.hardening

    @property
    def image(self) -> str:
        return self.spec.image

    @property
    def sandbox(self) -> KernelContainer | None:
        """The running sandbox (container, ipc folder), or None before the first start and after close."""
        return self._sandbox

    # -- the container behind the kernel session ------------------------------------

    def _start_session(self) -> KernelSession:
        sandbox = self._start_container()
        process = ConnectedKernel(
            dict(sandbox.connection_info),
            is_alive=self._container_running,
            restart=self._replace_container,
            shutdown=self._remove_container,
            describe_death=self._describe_death,
        )
        return KernelSession(process)

    def _start_container(self) -> KernelContainer:
        self._sandbox = self.pool.take() if self.pool is not None else self.spec.start()
        self._leftovers = [sandbox for sandbox in self._leftovers if not sandbox.remove()]
        return self._sandbox

    def _container_running(self) -> bool:
        return self._sandbox is not None and self._sandbox.is_running()

    def _replace_container(self) -> dict[str, Any]:
        # A timeout's interrupt cannot get through to a kernel whose sandbox is full of processes,
        # so this is where a fork bomb is seen: remember it for the error `run` raises.
        self._replaced_exhausted = self._processes_exhausted()
        self._remove_container()
        return dict(self._start_container().connection_info)

    def _remove_container(self) -> None:
        if self._sandbox is not None:
            if not self._sandbox.remove():
                self._leftovers.append(self._sandbox)
            self._sandbox = None

    def _describe_death(self) -> str:
        return self._sandbox.describe_exit() if self._sandbox is not None else "the sandbox was removed"

    def _processes_exhausted(self) -> bool:
        """Whether the sandbox is (nearly) full to its pids limit, as a fork bomb leaves it."""
        count = self._sandbox.task_count() if self._sandbox is not None else None
        return count is not None and count >= self.hardening.pids_limit * _EXHAUSTED_SHARE

    # -- the contract ------------------------------------------------------------

    def run(self, code: str) -> CodeOutput:
        """Run `code`; a failure that left the sandbox full of processes replaces the sandbox."""
        self._replaced_exhausted = False
        try:
            return super().run(code)
        except ExecutionError as error:
            if not self._replaced_exhausted:
                suspicious = isinstance(error, ExecutionTimeout) or error.error_type in _RESOURCE_ERRORS
                if not (suspicious and self._processes_exhausted()):
                    raise
                self._discard_session()
            raise SandboxError(
                f"the code filled the sandbox's process limit ({self.hardening.pids_limit} processes and threads: "
                "a fork bomb?), so the sandbox was replaced. Variables and functions defined by earlier code are "
                f"lost; the next run sends variables and tools again. The code's own error: {error.message}",
                logs=error.logs,
            ) from error

    def close(self) -> None:
        super().close()
        self._leftovers = [sandbox for sandbox in self._leftovers if not sandbox.remove()]

    def install_packages(self, packages: list[str]) -> list[str]:
        """Install into the sandbox with pip; needs a network, which the default sandbox does not have.

        Packages go to a folder of the sandbox's own (`PACKAGES_DIR`, in memory), so they
        last as long as the sandbox; a sandbox that replaces it gets the same installs again.
        """
        if self.hardening.network == "none":
            raise ExecutorError(
                "installing packages needs a network, and this sandbox has none (the safe default); "
                "bake them into your own image (image=...) or create DockerExecutor(network='bridge')"
            )
        return super().install_packages(packages)


def sandbox_spec(
    image: str | None,
    hardening: Hardening,
    docker_client: docker.DockerClient | None,
    extra_run_kwargs: dict[str, Any] | None,
) -> SandboxSpec:
    """Check and settle what sandboxes will be like; log any loosening, and reap orphans on the engine."""
    extra = checked_extra_run_kwargs(extra_run_kwargs)
    if hardening.changes():
        log.warning("docker sandbox settings changed from the strict defaults: %s", hardening.changes())
    client = docker_client or engine_client()
    reaped = reap_orphans(client)
    if reaped:
        log.info("removed %d sandbox(es) whose owner process is gone: %s", len(reaped), ", ".join(reaped))
    return SandboxSpec(client, image or str(require_image(client).id), hardening, extra)


class SandboxPool:
    """Keeps `size` sandboxes started and ready; each serves one executor, then is removed.

    A background thread starts a replacement whenever one is taken. The pool's
    sandboxes carry this process's owner labels, so the reaper removes them if
    the process dies; `close()` (or the context manager) removes the idle ones.
    """

    #: The DockerExecutor arguments that decide what the pool's sandboxes are like.
    SANDBOX_SETTINGS = ("image", "extra_run_kwargs", *(setting.name for setting in fields(Hardening)))

    def __init__(
        self,
        size: int = 2,
        *,
        image: str | None = None,
        docker_client: docker.DockerClient | None = None,
        extra_run_kwargs: dict[str, Any] | None = None,
        **limits: Any,
    ) -> None:
        """`limits` are DockerExecutor's: network, mem_limit, cpus, pids_limit, tmpfs_size, runtime."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be a whole number of sandboxes, at least 1, got {size!r}")
        self.size = size
        self.spec = sandbox_spec(image, Hardening(**limits), docker_client, extra_run_kwargs)
        self._ready: list[KernelContainer] = []
        self._starting = 0
        self._closed = False
        self._changed = threading.Condition()
        self._filler = threading.Thread(target=self._fill, name="codeward-sandbox-pool", daemon=True)
        self._filler.start()

    @property
    def idle(self) -> tuple[KernelContainer, ...]:
        """The sandboxes started and waiting to be taken."""
        with self._changed:
            return tuple(self._ready)

    def take(self) -> KernelContainer:
        """A started sandbox for the caller alone; started on the spot if none is ready."""
        while True:
            with self._changed:
                if self._closed:
                    raise ExecutorError("this SandboxPool is closed; create a new one")
                sandbox = self._ready.pop(0) if self._ready else None
                self._changed.notify_all()
            if sandbox is None:
                return self.spec.start()
            if sandbox.is_running():
                return sandbox
            sandbox.remove()  # died while it waited: never hand out a dead sandbox

    def wait_until_full(self, timeout: float = 60.0) -> bool:
        """Block until `size` sandboxes are ready (or `timeout` passes); True when they are."""
        with self._changed:
            return self._changed.wait_for(lambda: len(self._ready) >= self.size or self._closed, timeout)

    def close(self) -> None:
        """Remove the sandboxes still waiting; the executors holding one remove theirs. Idempotent."""
        with self._changed:
            self._closed = True
            idle, self._ready = self._ready, []
            self._changed.notify_all()
        for sandbox in idle:
            sandbox.remove()
        self._filler.join(timeout=120)

    def __enter__(self) -> SandboxPool:  # noqa: PYI034 (typing.Self needs Python 3.11)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _fill(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._closed or len(self._ready) + self._starting < self.size)
                if self._closed:
                    return
                self._starting += 1
            sandbox = self._start_one()
            with self._changed:
                self._starting -= 1
                late = self._closed
                if sandbox is not None and not late:
                    self._ready.append(sandbox)
                self._changed.notify_all()
            if sandbox is not None and late:
                sandbox.remove()

    def _start_one(self) -> KernelContainer | None:
        try:
            sandbox = self.spec.start()
        except ExecutorError as error:
            log.warning("the sandbox pool could not start a sandbox (retrying in %gs): %s", _POOL_RETRY, error)
            with self._changed:
                self._changed.wait_for(lambda: self._closed, _POOL_RETRY)
            return None
        _run_quietly(sandbox, bootstrap_code())  # codeward's sandbox side, ready before an executor comes
        return sandbox


def _run_quietly(sandbox: KernelContainer, code: str) -> None:
    """Run codeward's own cell in a sandbox that no executor holds yet; a failure only costs speed."""
    client = sandbox.client()
    try:
        client.execute_interactive(code, store_history=False, output_hook=lambda message: None, timeout=60)
    except (TimeoutError, RuntimeError) as error:
        log.warning("warming a pooled sandbox failed (it still serves, a little slower): %s", error)
    finally:
        sandbox.release(client)
