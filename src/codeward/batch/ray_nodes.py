"""Warm docker sandboxes on each node of a Ray cluster, kept by one actor per node.

A docker job's task takes its container from the actor of the node it landed on,
instead of starting one (about half a second, more under gVisor). The actor is
also where a node is checked once: its Docker engine answers and it has the
sandbox image, which it builds (once, on that node) when missing. A node that
cannot run docker jobs is skipped: its actor then holds all of the node's
``codeward_docker`` resource, so Ray places no more docker jobs there, and the
jobs that had landed there go back to the queue, not counted as attempts.

The driver owns the actors, so they end with it: a driver killed with SIGKILL
leaves the pool's containers to the reaper (their owner, the actor, is gone).
A container handed to a task carries the actor's owner labels; the actor
removes any that an attempt left behind (its worker killed, its node's task
cancelled) when the driver says the attempt ended, and all of them at the end.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from codeward.batch.worker import WarmPools, pool_settings, uses_egress

__all__ = ["DOCKER_RESOURCE", "DockerNodes", "NodePools", "SentBack"]

#: The custom resource a node advertises when it can run docker jobs (engine up, sandbox image built).
DOCKER_RESOURCE = "codeward_docker"
_NAMESPACE = "codeward"
#: How long a task waits for the actor of a node that joined after the run began.
_ACTOR_WAIT_SECONDS = 10.0
#: How often the driver looks for nodes that joined.
_NODE_SCAN_SECONDS = 2.0


class SentBack(Exception):
    """The job landed on a node that cannot run docker jobs: it goes back to the queue."""


def actor_name(run: str, node: str) -> str:
    return f"codeward-sandboxes-{run}-{node}"


@ray.remote(num_cpus=0, max_concurrency=4)  # type: ignore[call-overload]
class _NodeSandboxes:
    """One node's warm sandboxes, a `SandboxPool` per set of sandbox settings, `size` each.

    The node is checked as the actor starts: Ray runs no call of a task's before then.
    """

    def __init__(self, size: int, settings: list[dict[str, Any]]) -> None:
        from codeward.executors.docker.images import engine_client, ensure_image

        self.pools = WarmPools(enabled=True, size=size)
        self.lock = threading.Lock()  # calls run on up to four threads at once
        self.handed: dict[str, list[Any]] = {}  # attempt -> the containers it took
        self.unready: str | None = None
        try:
            ensure_image(engine_client())
            for each in settings:
                self.pools.pool(each)
        except Exception as error:  # whatever the reason, the node is skipped with it in the log
            self.unready = f"{type(error).__name__}: {error}"

    def check(self) -> str | None:
        """Why this node cannot run docker jobs, or None."""
        return self.unready

    def take(self, settings: dict[str, Any], attempt: str) -> dict[str, Any]:
        """A started sandbox for one attempt, as what the task needs to connect to it."""
        try:
            pool, sandbox = self._take(settings)
        except Exception as error:  # the job's own failure (bad settings, engine gone), told to its task
            return {"error": f"{type(error).__name__}: {error}"}
        with self.lock:
            self.handed.setdefault(attempt, []).append(sandbox)
        spec = pool.spec
        return {
            "container": sandbox.container.attrs,  # as the engine told it just now: the task asks it no more
            "ipc_dir": str(sandbox.ipc_dir),
            "connection_info": dict(sandbox.connection_info),
            "session": sandbox.session,
            "prepared": sandbox.prepared,
            "spec": (spec.image, spec.hardening, spec.extra_run_kwargs),
        }

    def _take(self, settings: dict[str, Any]) -> tuple[Any, Any]:
        from codeward.executors.base import ExecutorError

        try:
            pool = self.pools.pool(settings)
            return pool, pool.take()
        except ExecutorError:  # closed under this call, as the least recently used: once more, a pool anew
            pool = self.pools.pool(settings)
            return pool, pool.take()

    def ended(self, attempt: str) -> None:
        """The attempt is over: remove what of its containers is left (nothing, when its executor closed)."""
        with self.lock:
            left = self.handed.pop(attempt, [])
        for sandbox in left:
            sandbox.remove()

    def close(self) -> None:
        for attempt in list(self.handed):
            self.ended(attempt)
        self.pools.close()


@ray.remote(num_cpus=0)
class _Holder:
    """Holds a skipped node's docker resource, so no docker job is placed there again."""


class _NodePool:
    """What DockerExecutor needs of a pool (`spec`, `take`), served by the node's actor."""

    def __init__(self, actor: Any, settings: dict[str, Any], attempt: str) -> None:
        self.actor, self.settings, self.attempt = actor, settings, attempt
        self.spec: Any = None
        self._first: Any = self._take()

    def _take(self) -> Any:
        from codeward.executors.base import SandboxError
        from codeward.executors.docker.sandbox import KernelContainer, SandboxSpec

        handed = ray.get(self.actor.take.remote(self.settings, self.attempt))
        if "error" in handed:
            raise SandboxError(f"the node's sandbox pool could not start a sandbox: {handed['error']}")
        client = _engine()
        if self.spec is None:
            self.spec = SandboxSpec(client, *handed["spec"])
        return KernelContainer(
            container=client.containers.prepare_model(handed["container"]),
            ipc_dir=Path(handed["ipc_dir"]),
            connection_info=handed["connection_info"],
            session=handed["session"],
            prepared=handed["prepared"],
        )

    def take(self) -> Any:
        """The sandbox taken when the job began, then (a sandbox replaced mid-job) a new one each time."""
        sandbox, self._first = self._first, None
        return sandbox if sandbox is not None else self._take()


_engine_client: Any = None


def _engine() -> Any:
    """One Docker client per worker process: Ray runs many tasks in one worker."""
    global _engine_client
    if _engine_client is None:
        from codeward.executors.docker.images import engine_client

        _engine_client = engine_client()
    return _engine_client


class NodePools:
    """A task's way to its node's warm sandboxes: `run_job`'s `pools` on a Ray node."""

    def __init__(self, run: str, node: str, attempt: str, warm: bool = True) -> None:
        self.run, self.node, self.attempt, self.warm = run, node, attempt, warm
        self._actor: Any = None

    def check(self, job: dict[str, Any]) -> None:
        """Before a docker job starts: `SentBack` when this node cannot run it."""
        if job["executor"] != "docker":
            return
        self._actor = self._find_actor()
        if self._actor is None:
            return  # a node the driver has not seen yet: the job starts a sandbox of its own
        try:
            reason = ray.get(self._actor.check.remote())
        except ray.exceptions.RayActorError:
            self._actor = None  # gone with its node, or ended: the same
            return
        if reason is not None:
            raise SentBack(reason)

    def executor_kwargs(self, executor: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        if self._actor is None or not self.warm or executor != "docker" or "pool" in kwargs or uses_egress(kwargs):
            # a sandbox of the job's own, started when it starts; one with egress, so that its proxy
            # (and the record the audit reads) is the task's, not the node actor's
            return kwargs
        _, settings, rest = pool_settings(kwargs)
        return {**rest, "pool": _NodePool(self._actor, settings, self.attempt)}

    def _find_actor(self) -> Any:
        deadline = time.monotonic() + _ACTOR_WAIT_SECONDS
        while True:
            try:
                return ray.get_actor(actor_name(self.run, self.node), namespace=_NAMESPACE)
            except ValueError:
                if time.monotonic() >= deadline:
                    return None
                time.sleep(0.2)


@dataclass
class _Node:
    actor: Any
    check: Any  # the actor's answer to whether the node can run docker jobs, until it came
    docker_slots: float
    skipped: str | None = None
    holder: Any = None


@dataclass
class DockerNodes:
    """The driver's side: an actor on each node that advertises the docker resource, and which are skipped."""

    settings: list[dict[str, Any]]
    note: Any  # how a line reaches the user (the progress display, or the log)
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    nodes: dict[str, _Node] = field(default_factory=dict)
    _scanned: float = 0.0
    #: Calls whose answers do not matter; read anyway, as Ray prints the error of a call never read.
    _unread: list[Any] = field(default_factory=list)

    def scan(self) -> None:
        """Start an actor on each docker node not seen yet; forget nodes that left."""
        self._scanned = time.monotonic()
        alive = {n["NodeID"]: n for n in ray.nodes() if n.get("Alive")}  # type: ignore[no-untyped-call]
        for node_id in [node_id for node_id in self.nodes if node_id not in alive]:
            del self.nodes[node_id]
        for node_id, node in alive.items():
            slots = node.get("Resources", {}).get(DOCKER_RESOURCE, 0)
            if slots and node_id not in self.nodes:
                actor = _NodeSandboxes.options(  # type: ignore[attr-defined]
                    name=actor_name(self.run, node_id),
                    namespace=_NAMESPACE,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                ).remote(max(1, int(slots)), self.settings)
                self.nodes[node_id] = _Node(actor, actor.check.remote(), slots)

    def poll(self) -> None:
        """Note nodes whose check answered unready (and hold their resource); look for new nodes now and then."""
        for node_id, node in self.nodes.items():
            if node.check is None:
                continue
            ready, _ = ray.wait([node.check], timeout=0)
            if not ready:
                continue
            try:
                reason = ray.get(node.check)
            except ray.exceptions.RayError as error:
                reason = f"{type(error).__name__}: {error}"
            node.check = None
            if reason is not None:
                self._skip(node_id, node, reason)
        if time.monotonic() - self._scanned >= _NODE_SCAN_SECONDS:
            self.scan()
        self._read_answers(timeout=0)

    def _read_answers(self, timeout: float) -> None:
        """Read what the calls whose answers do not matter returned: an actor gone with its node, for one."""
        if not self._unread:
            return
        ready, self._unread = ray.wait(self._unread, num_returns=len(self._unread), timeout=timeout)
        for ref in ready:
            try:
                ray.get(ref)
            except ray.exceptions.RayError:
                pass

    def sent_back(self, node_id: str, reason: str) -> None:
        node = self.nodes.get(node_id)
        if node is not None and node.skipped is None:
            self._skip(node_id, node, reason)

    def _skip(self, node_id: str, node: _Node, reason: str) -> None:
        node.skipped = reason
        self.note(f"node {node_id[:8]} skipped for docker jobs: {reason}")
        node.holder = _Holder.options(  # type: ignore[attr-defined]
            resources={DOCKER_RESOURCE: node.docker_slots},
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        ).remote()

    def none_usable(self) -> str | None:
        """Why no node can run docker jobs, once every docker node has answered and was skipped; else None."""
        if not self.nodes or any(node.skipped is None for node in self.nodes.values()):
            return None
        return "; ".join(f"node {node_id[:8]}: {node.skipped}" for node_id, node in self.nodes.items())

    def ended(self, node_id: str | None, attempt: str) -> None:
        """An attempt on the node ended: its actor removes the attempt's containers still there."""
        node = self.nodes.get(node_id) if node_id is not None else None
        if node is not None and node.skipped is None:
            self._unread.append(node.actor.ended.remote(attempt))

    def close(self) -> None:
        self._unread += [node.actor.close.remote() for node in self.nodes.values()]
        self._read_answers(timeout=60)
        for node in self.nodes.values():
            ray.kill(node.actor)
            if node.holder is not None:
                ray.kill(node.holder)
        self.nodes.clear()
