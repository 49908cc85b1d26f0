"""`executor="docker"`: the model's code runs in a hardened container's Jupyter kernel.

Everything above the kernel is the Jupyter executor's: the kernel session, the
value codec, the host tool bridge over the kernel's stdin channel. What differs
is who runs the kernel: a container with no network, no capabilities, a
read-only root, a non-root user and memory, CPU and pids limits
(`docker_sandbox`), reached through ipc sockets with no port published. A
container that dies (out of memory, killed, engine gone) raises `SandboxError`
and is replaced on the next run; one that ignores a timeout's interrupt is
replaced at once. Containers whose owner died are reaped when an executor starts.
"""

from __future__ import annotations

import logging
from typing import Any

import docker

from codeward.executors.base import CodeOutput, ExecutionError, ExecutorError, SandboxError
from codeward.executors.docker_images import ENGINE_ERRORS, engine_client, require_image
from codeward.executors.docker_sandbox import (
    Hardening,
    KernelContainer,
    checked_extra_run_kwargs,
    reap_orphans,
    start_kernel_container,
)
from codeward.executors.jupyter import JupyterExecutor
from codeward.executors.kernel import ConnectedKernel, KernelSession

__all__ = ["DockerExecutor"]

log = logging.getLogger(__name__)

#: A sandbox holding this share of its pids limit after a failure counts as fork-bombed.
_EXHAUSTED_SHARE = 0.95


class DockerExecutor(JupyterExecutor):
    """Runs code in a hardened Docker container; see the module docstring.

    Every limit has a named argument, and its default is the strict one; a
    loosened setting is logged. `extra_run_kwargs` may add container settings
    that weaken nothing (`docker_sandbox.EXTRA_RUN_KWARGS`). `image` defaults to
    the current codeward sandbox image (`codeward images build` makes it).
    """

    name = "docker"

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
        docker_client: docker.DockerClient | None = None,
        extra_run_kwargs: dict[str, Any] | None = None,
        *,
        allow_pickle: bool = False,
    ) -> None:
        self.hardening = Hardening(network, mem_limit, cpus, pids_limit, tmpfs_size, runtime)
        self._extra_run_kwargs = checked_extra_run_kwargs(extra_run_kwargs)
        if self.hardening.changes():
            log.warning("docker sandbox settings changed from the strict defaults: %s", self.hardening.changes())
        self._docker = docker_client or engine_client()
        reaped = reap_orphans(self._docker)
        if reaped:
            log.info("removed %d sandbox(es) whose owner process is gone: %s", len(reaped), ", ".join(reaped))
        self.image: str = image or str(require_image(self._docker).id)
        self._sandbox: KernelContainer | None = None
        # Sandboxes whose removal failed while the engine was away; removed at the next chance.
        self._leftovers: list[KernelContainer] = []
        self._replaced_exhausted = False
        super().__init__(timeout_seconds=timeout_seconds, tools_mode=tools_mode, allow_pickle=allow_pickle)

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
        try:
            self._docker.ping()
        except ENGINE_ERRORS as error:
            raise SandboxError(f"the Docker engine does not answer: {error}", state_lost=True) from error
        self._leftovers = [sandbox for sandbox in self._leftovers if not sandbox.remove()]
        self._sandbox = start_kernel_container(
            self._docker, self.image, self.hardening, extra_run_kwargs=self._extra_run_kwargs
        )
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
                if not self._processes_exhausted():
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
        """Install into the sandbox with pip; needs a network, which the default sandbox does not have."""
        if self.hardening.network == "none":
            raise ExecutorError(
                "installing packages needs a network, and this sandbox has none (the safe default); "
                "bake them into your own image (image=...) or create DockerExecutor(network='bridge')"
            )
        return super().install_packages(packages)
