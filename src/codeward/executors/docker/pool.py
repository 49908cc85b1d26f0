"""Sandboxes started ahead of need, so that an executor built on them starts in milliseconds.

A sandbox serves one executor and is then removed, never handed to another.
The Docker SDK loads when a pool is made, not when this module is imported, so
`from codeward.executors import SandboxPool` works on any install and a missing
extra is named when the pool is used.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any, Protocol

from codeward.executors.base import ExecutorError, import_with_extra
from codeward.executors.docker.hardening import Hardening
from codeward.executors.kernel.bridge import bootstrap_code

if TYPE_CHECKING:
    import docker

    from codeward.egress.proxy import EgressBudget
    from codeward.executors.docker.mounts import MountSpec
    from codeward.executors.docker.sandbox import KernelContainer, SandboxSpec

__all__ = ["SandboxPool", "SandboxSource"]

log = logging.getLogger(__name__)

#: Seconds a pool waits before trying again after it could not start a sandbox.
_POOL_RETRY = 1.0


class SandboxSource(Protocol):
    """What a DockerExecutor needs of a pool: `SandboxPool`, or a batch's per-node pool on a Ray cluster."""

    spec: SandboxSpec

    def take(self) -> KernelContainer: ...


class SandboxPool:
    """Keeps `size` sandboxes started and ready; each serves one executor, then is removed.

    A background thread starts a replacement whenever one is taken. The pool's
    sandboxes carry this process's owner labels, so the reaper removes them if
    the process dies; `close()` (or the context manager) removes the idle ones.

    `egress`, `egress_headers` and `egress_budget` are DockerExecutor's: each pooled
    sandbox gets a proxy of its own with that list, started with it and closed with it.
    An executor that takes one may change its list (`set_egress`) without touching the
    pool's, and reads its record (`egress_log`) from that sandbox alone.

    From async code, ``await DockerExecutor.acreate(pool=pool)`` (or ``acreate_executor("docker",
    pool=pool)``) takes a sandbox without holding the event loop: the take, and a start on the spot
    when none is ready, run in the bounded pool of threads, and the kernel's answer is awaited.
    """

    #: The DockerExecutor arguments that decide what the pool's sandboxes are like.
    SANDBOX_SETTINGS = (
        "image",
        "extra_run_kwargs",
        *(setting.name for setting in fields(Hardening)),
        "egress",
        "egress_headers",
        "egress_budget",
        "mounts",
    )

    def __init__(
        self,
        size: int = 2,
        *,
        image: str | None = None,
        docker_client: docker.DockerClient | None = None,
        extra_run_kwargs: dict[str, Any] | None = None,
        egress: Sequence[str] | None = None,
        egress_headers: Mapping[str, Mapping[str, str]] | None = None,
        egress_budget: EgressBudget | None = None,
        mounts: Mapping[str, MountSpec] | None = None,
        **limits: Any,
    ) -> None:
        """`limits` are DockerExecutor's: network, mem_limit, cpus, pids_limit, tmpfs_size, runtime;
        `mounts` too: every sandbox of the pool shows the same host paths."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be a whole number of sandboxes, at least 1, got {size!r}")
        hardening = Hardening(**limits)
        sandbox = import_with_extra("codeward.executors.docker.sandbox", needed_by="SandboxPool", extra="docker")
        from codeward.egress.proxy import policy_from

        policy = policy_from(egress, egress_headers, egress_budget)
        self.size = size
        self.spec: SandboxSpec = sandbox.sandbox_spec(
            image, hardening, docker_client, extra_run_kwargs, policy, egress_budget, mounts
        )
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

    def __enter__(self) -> SandboxPool:
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
        from codeward.egress.proxy import EgressUnavailable

        try:
            sandbox = self.spec.start()
        except (ExecutorError, EgressUnavailable, ValueError) as error:  # ValueError: a mount changed since
            log.warning("the sandbox pool could not start a sandbox (retrying in %gs): %s", _POOL_RETRY, error)
            with self._changed:
                self._changed.wait_for(lambda: self._closed, _POOL_RETRY)
            return None
        bootstrap = bootstrap_code()
        if _run_quietly(sandbox, bootstrap):  # codeward's sandbox side, ready before an executor comes
            sandbox.prepared = bootstrap
        return sandbox


def _run_quietly(sandbox: KernelContainer, code: str) -> bool:
    """Run codeward's own cell in a sandbox that no executor holds yet; a failure only costs speed."""
    client = sandbox.client()
    try:
        reply = client.execute_interactive(code, store_history=False, output_hook=lambda message: None, timeout=60)
    except (TimeoutError, RuntimeError) as error:
        log.warning("warming a pooled sandbox failed (it still serves, a little slower): %s", error)
        return False
    finally:
        sandbox.release(client)
    return bool(reply["content"].get("status") == "ok")
