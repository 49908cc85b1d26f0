"""`executor="docker"`: the model's code runs in a hardened container's Jupyter kernel.

Everything above the kernel is shared with the Jupyter executor
(`KernelExecutor`): the kernel session, the value codec, the host tool bridge
over the kernel's stdin channel. What differs is who runs the kernel: a
container with no network, no capabilities, a read-only root, a non-root user
and memory, CPU and pids limits (`hardening`, `sandbox`), reached through ipc
sockets with no port published. A container that dies (out of memory, killed,
engine gone) raises `SandboxError` and is replaced on the next run; one that
ignores a timeout's interrupt is replaced at once. Containers whose owner died
are reaped when an executor starts. An executor may take its containers from a
`SandboxPool` (`pool`), which starts them ahead of need.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import docker

from codeward import tracing
from codeward.effects import Offloaded, Steps
from codeward.executors.base import (
    BlockEvent,
    BlockUsage,
    CodeOutput,
    ExecutionError,
    ExecutionTimeout,
    ExecutorError,
    SandboxError,
)
from codeward.executors.docker.hardening import PACKAGES_DIR, Hardening
from codeward.executors.docker.mounts import MountSpec, mount_modes
from codeward.executors.docker.sandbox import KernelContainer, sandbox_spec
from codeward.executors.docker.walls import CgroupCounts, cgroup_counts, counted_events
from codeward.executors.kernel.executor import KernelExecutor
from codeward.executors.kernel.owners import ConnectedKernel
from codeward.executors.live import OutputCallback
from codeward.executors.metering import CgroupMeter, Meter
from codeward.executors.settings import DEFAULT_OUTPUT_BUDGET, DEFAULT_PRINT_OUTPUTS_LENGTH, checked_packages
from codeward.wall_events import MAX_EVENTS

if TYPE_CHECKING:
    from codeward.egress.proxy import EgressBudget
    from codeward.executors.docker.pool import SandboxSource
    from codeward.executors.kernel.session import KernelSession

__all__ = ["DockerExecutor"]

#: A sandbox holding this share of its pids limit after a failure counts as fork-bombed.
_EXHAUSTED_SHARE = 0.95
#: Errors that a full process table causes (fork, thread start): only they, and timeouts, make
#: `run` count the sandbox's processes, which can cost a second when the engine is not local.
_RESOURCE_ERRORS = frozenset({"BlockingIOError", "OSError", "RuntimeError", "MemoryError"})
#: The requests of one block traced one by one; the rest are counted in one span.
_TRACED_REQUESTS = 100


class DockerExecutor(KernelExecutor):
    """Runs code in a hardened Docker container; see the module docstring.

    Every limit has a named argument, and its default is the strict one; a
    loosened setting is logged. `extra_run_kwargs` may add container settings
    that weaken nothing (`hardening.EXTRA_RUN_KWARGS`). `image` defaults to
    the current codeward sandbox image (`codeward images build` makes it).

    `egress` lists what the sandbox may reach through a proxy of its own on the host
    (`codeward.egress`), and `egress_headers` what the host adds to requests to a listed
    host (keys that so never enter the sandbox). None, the default: no way out at all.

    `mounts` shows host folders or files to the sandbox, by the path it sees them at:
    ``{"/data": "/srv/data"}`` is read-only, ``{"/out": Mount("/srv/out", mode="rw")}`` (or
    ``{"source": ..., "mode": "rw"}``) writable. Each is checked before any container starts
    (`mounts.checked_mounts`: no root, no /proc, no engine socket, no codeward folder).
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
        timeout_seconds: float = 30,
        tools_mode: str = "host",
        pool: SandboxSource | None = None,
        docker_client: docker.DockerClient | None = None,
        extra_run_kwargs: dict[str, Any] | None = None,
        *,
        egress: Sequence[str] | None = None,
        egress_headers: Mapping[str, Mapping[str, str]] | None = None,
        egress_budget: EgressBudget | None = None,
        mounts: Mapping[str, MountSpec] | None = None,
        allow_pickle: bool = False,
        max_output_bytes: int = DEFAULT_OUTPUT_BUDGET,
        max_print_outputs_length: int = DEFAULT_PRINT_OUTPUTS_LENGTH,
    ) -> None:
        hardening = Hardening(network, mem_limit, cpus, pids_limit, tmpfs_size, runtime)
        from codeward.egress.proxy import policy_from

        policy = policy_from(egress, egress_headers, None if pool is not None else egress_budget)
        if pool is not None:
            if image is not None or hardening.changes() or docker_client is not None or extra_run_kwargs or mounts:
                raise ValueError(
                    "an executor with a pool runs in the pool's sandboxes: give image, limits, docker_client, "
                    "extra_run_kwargs and mounts to SandboxPool(...), not to DockerExecutor(pool=...)"
                )
            if policy is not None or egress_budget is not None:
                raise ValueError(
                    "give egress, egress_headers and egress_budget to SandboxPool(...), not to the executor"
                )
            self.spec = pool.spec
        else:
            self.spec = sandbox_spec(image, hardening, docker_client, extra_run_kwargs, policy, egress_budget, mounts)
        self.pool = pool
        self._egress_policy = self.spec.egress
        # The record of sandboxes this executor has replaced; the running one's is read when asked.
        self._egress_past: list[dict[str, Any]] = []
        self._cgroup_meter: CgroupMeter | None = None  # the running container's, kept between blocks
        #: The requests the last block made (None without an egress list): its spans, and the batch audit's.
        self.last_block_egress: list[dict[str, Any]] | None = None
        self._sandbox: KernelContainer | None = None
        # Sandboxes whose removal failed while the engine was away; removed at the next chance.
        self._leftovers: list[KernelContainer] = []
        self._replaced_exhausted = False
        # The running sandbox's cgroup counts after its last block, and what removed sandboxes refused.
        self._wall_before: dict[str, CgroupCounts] = {}
        self._wall_pending: list[BlockEvent] = []
        super().__init__(
            timeout_seconds=timeout_seconds,
            tools_mode=tools_mode,
            allow_pickle=allow_pickle,
            max_output_bytes=max_output_bytes,
            max_print_outputs_length=max_print_outputs_length,
        )
        self._start()

    @property
    def hardening(self) -> Hardening:
        return self.spec.hardening

    @property
    def image(self) -> str:
        return self.spec.image

    @property
    def mount_modes(self) -> dict[str, str]:
        """Each mount's sandbox path and mode ("ro" or "rw"): what saved runs and traces record, never host paths."""
        return mount_modes(self.spec.mounts)

    @property
    def sandbox(self) -> KernelContainer | None:
        """The running sandbox (container, ipc folder), or None before the first start and after close."""
        return self._sandbox

    @property
    def sandbox_id(self) -> str | None:
        """The running container's id as ``docker ps`` shows it; None before the first start and after close."""
        return str(self._sandbox.container.short_id) if self._sandbox is not None else None

    # -- the container behind the kernel session ------------------------------------

    def _start_process(self) -> ConnectedKernel:
        sandbox = self._start_container()
        return ConnectedKernel(
            dict(sandbox.connection_info),
            is_alive=self._container_running,
            restart=self._replace_container,
            shutdown=self._remove_container,
            describe_death=self._describe_death,
        )

    def _start_container(self) -> KernelContainer:
        self._sandbox = self.pool.take() if self.pool is not None else self.spec.start()
        container_id = self._sandbox.container.id or ""
        self._wall_before = {container_id: counts} if (counts := cgroup_counts(container_id)) else {}
        self._leftovers = [sandbox for sandbox in self._leftovers if not sandbox.remove()]
        proxy = self._sandbox.egress
        if proxy is not None and self._egress_policy is not None and proxy.policy != self._egress_policy:
            proxy.set_policy(self._egress_policy)  # changed by set_egress since this sandbox started
        return self._sandbox

    def _ran_in_advance(self, bootstrap: str) -> bool:
        """A pooled sandbox ran codeward's side while it waited; once taken, the credit is spent."""
        sandbox = self._sandbox
        if sandbox is None or not sandbox.prepared:
            return False
        prepared, sandbox.prepared = sandbox.prepared, ""
        return prepared == bootstrap

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
            self._wall_pending += self._wall_counted(self._sandbox)  # its cgroup goes with it
            if self._sandbox.egress is not None:
                self._egress_past.extend(self._sandbox.egress.record())
            if not self._sandbox.remove():
                self._leftovers.append(self._sandbox)
            self._sandbox = None

    def _describe_death(self) -> str:
        if self._sandbox is None:
            return "the sandbox was removed"
        how = self._sandbox.describe_exit()
        killed = BlockEvent("memory", f"the sandbox killed out of memory (limit {self.hardening.mem_limit})")
        # Docker's record, read by describe_exit: the cgroup went with the container. Told once.
        if self._sandbox.container.attrs.get("State", {}).get("OOMKilled") and killed not in self._wall_pending:
            self._wall_pending.append(killed)
        return how

    def _processes_exhausted(self) -> bool:
        """Whether the sandbox is (nearly) full to its pids limit, as a fork bomb leaves it."""
        count = self._sandbox.task_count() if self._sandbox is not None else None
        return count is not None and count >= self.hardening.pids_limit * _EXHAUSTED_SHARE

    # -- the contract ------------------------------------------------------------

    def _running(self, code: str, on_output: OutputCallback | None) -> Steps[CodeOutput]:
        """Run `code`; what the container's limits refused meanwhile (`walls`) is in its events."""
        try:
            output = yield from self._running_checked(code, on_output)
        except ExecutorError as error:
            error.events = [*error.events, *(yield Offloaded(self._block_wall_events))]
            raise
        output.events = [*output.events, *(yield Offloaded(self._block_wall_events))]
        return output

    def _block_wall_events(self) -> list[BlockEvent]:
        """What the limits refused since the last block: read from the cgroup of the sandbox that
        ran it, and of any that was removed meanwhile (a replaced one's counts were read first)."""
        events, self._wall_pending = self._wall_pending, []
        if self._sandbox is not None:
            events += self._wall_counted(self._sandbox)
        if self._egress_policy is not None:
            refused = Counter(
                f"{request.get('method', '')} {request.get('host', '')}"
                for request in self.last_block_egress or ()
                if request.get("verdict") == "refused"
            )
            events += [BlockEvent("egress", what, count) for what, count in list(refused.items())[:MAX_EVENTS]]
        return events

    def _wall_counted(self, sandbox: KernelContainer) -> list[BlockEvent]:
        container_id = sandbox.container.id or ""
        after = cgroup_counts(container_id)
        before = self._wall_before.get(container_id)
        if after is not None:
            self._wall_before = {container_id: after}
        return counted_events(before, after, mem_limit=self.hardening.mem_limit, pids_limit=self.hardening.pids_limit)

    def _running_checked(self, code: str, on_output: OutputCallback | None) -> Steps[CodeOutput]:
        """Run `code`; a failure that left the sandbox full of processes replaces the sandbox."""
        self._replaced_exhausted = False
        try:
            return (yield from self._running_traced(code, on_output))
        except ExecutionError as error:
            if not self._replaced_exhausted:
                suspicious = isinstance(error, ExecutionTimeout) or error.error_type in _RESOURCE_ERRORS
                if not (suspicious and (yield Offloaded(self._processes_exhausted))):
                    raise
                yield Offloaded(self._discard_session)
            replaced = SandboxError(
                f"the code filled the sandbox's process limit ({self.hardening.pids_limit} processes and threads: "
                "a fork bomb?), so the sandbox was replaced. Variables and functions defined by earlier code are "
                f"lost; the next run sends variables and tools again. The code's own error: {error.message}",
                logs=error.logs,
            )
            replaced.usage, replaced.events = error.usage, error.events  # what the block cost and was refused
            raise replaced from error

    def close(self) -> None:
        super().close()
        self._leftovers = [sandbox for sandbox in self._leftovers if not sandbox.remove()]

    # -- egress --------------------------------------------------------------------

    def _running_traced(self, code: str, on_output: OutputCallback | None) -> Steps[CodeOutput]:
        """Run `code`; each request its sandbox made meanwhile becomes a span of the block's trace."""
        if self._egress_policy is None:
            return (yield from super()._running(code, on_output))
        seen = len(self.egress_log)
        try:
            output = yield from super()._running(code, on_output)
        except ExecutorError as error:
            self._block_egress(seen)
            error.usage = _with_egress(error.usage, self.last_block_egress)
            raise
        self._block_egress(seen)
        output.usage = _with_egress(output.usage, self.last_block_egress)
        return output

    def _block_egress(self, seen: int) -> None:
        self.last_block_egress = self.egress_log[seen:]
        _trace_requests(self.last_block_egress)

    def _egress_reason(self) -> str:
        if self.hardening.network == "none":
            return "the sandbox has no network"
        return f"the sandbox's traffic on network {self.hardening.network!r} is not counted (egress=[...] counts it)"

    def _meter(self, session: KernelSession) -> Meter:
        """The container's control group, read by the host (the engine's own stats take a second or two)."""
        sandbox = self._sandbox
        if sandbox is None or not sandbox.container.id:
            return Meter("the sandbox's container is not known")
        if self._cgroup_meter is None or self._cgroup_meter.container_id != sandbox.container.id:
            self._cgroup_meter = CgroupMeter(sandbox.container.id)  # found once a container
        return self._cgroup_meter

    @property
    def egress_log(self) -> list[dict[str, Any]]:
        """Every request the sandbox made through its proxy, allowed or refused, oldest first.

        Each is a dict: time, method, host, port, path (plain HTTP only), sent and received
        bytes, verdict ("allowed", "refused", "failed") and the reason for a refusal.
        """
        sandbox = self._sandbox
        current = sandbox.egress.record() if sandbox is not None and sandbox.egress is not None else []
        return [*self._egress_past, *current]

    def set_egress(self, egress: Sequence[str], egress_headers: Mapping[str, Mapping[str, str]] | None = None) -> None:
        """Change what the running sandbox may reach; `[]` closes it. Open connections are closed at once."""
        if self._egress_policy is None:
            raise ExecutorError(
                "this sandbox was made with no way out (egress=None); create it with egress=[...] "
                "(egress=[] starts it closed) to change its list while it runs"
            )
        from codeward.egress.proxy import policy_from

        policy = policy_from(egress, egress_headers)
        assert policy is not None  # a list, however short, makes a policy
        if self._sandbox is not None and self._sandbox.egress is not None:
            self._sandbox.egress.set_policy(policy)
        self._egress_policy = policy

    def install_packages(self, packages: list[str]) -> list[str]:
        """Install into the sandbox with pip; needs a network or an egress list that reaches an index.

        Packages go to a folder of the sandbox's own (`PACKAGES_DIR`, in memory), so they
        last as long as the sandbox; a sandbox that replaces it gets the same installs again.
        """
        packages = checked_packages(packages)
        if self.hardening.network == "none" and self._egress_policy is None:
            raise ExecutorError(
                "installing packages needs a way to an index, and this sandbox has none (the safe default); "
                "create DockerExecutor(egress=codeward.egress.PYPI) (or your own index's host), "
                "or bake them into your own image (image=...)"
            )
        return super().install_packages(packages)


def _trace_requests(requests: list[dict[str, Any]]) -> None:
    """A span per request (the first `_TRACED_REQUESTS` of a block), and one that counts the rest."""
    for request in requests[:_TRACED_REQUESTS]:
        attributes = {f"codeward.egress.{key}": value for key, value in request.items() if key != "time"}
        attributes["codeward.egress.at"] = float(request.get("time") or 0)
        with tracing.span(f"egress {request.get('method', '')} {request.get('host', '')}", attributes):
            pass
    if len(requests) > _TRACED_REQUESTS:
        with tracing.span("egress", {"codeward.egress.untraced": len(requests) - _TRACED_REQUESTS}):
            pass


def _with_egress(usage: BlockUsage | None, requests: list[dict[str, Any]] | None) -> BlockUsage | None:
    """A block's usage with the bytes its requests through the egress proxy carried, both ways."""
    if usage is None or requests is None:
        return usage
    carried = sum(int(entry.get("sent") or 0) + int(entry.get("received") or 0) for entry in requests)
    unmeasured = {name: why for name, why in usage.unmeasured.items() if name != "egress_bytes"}
    return dataclasses.replace(usage, egress_bytes=carried, unmeasured=unmeasured)
