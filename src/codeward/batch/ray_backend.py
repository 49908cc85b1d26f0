"""Batch jobs as tasks on a Ray cluster (``codeward batch --ray``; ``pip install codeward[ray]``).

The driver (this process) stays the only writer of the results and audit files,
so resume and exactly-once work as with the process pool: a job's result is
written once, when its task returns. Each job is one Ray task that builds its
sandbox on the node it lands on; docker jobs ask for the ``codeward_docker``
resource, which only nodes with a Docker engine and the sandbox image advertise
(``ray start --resources='{"codeward_docker": 4}'``).

Retries are the driver's, not Ray's (tasks run with ``max_retries=0``): an
attempt lost with its node or worker process is run again in a fresh sandbox,
numbered, so the audit file says which attempt ran each block, and a job that
was lost mid-block gets that block's ``worker_lost`` line as with the pool.
What a task does while it runs (started, on which node; each code block) reaches
the driver through one small actor, `_Tracker`, which the driver drains. Docker
jobs take a warm sandbox from their node's actor (`ray_nodes`), which also checks
the node once and has it skipped when it cannot run them.
A job's timeout is kept on its node, by the task itself; Ctrl-C marks the running
attempts cancelled at the tracker, which each task asks twice a second. Either way
the task stops its job as a pool worker does (a signal that interrupts even a
blocking call, then its sandbox closes), and a task that has not ended a grace
period later is killed with its worker (``ray.cancel(force=True)``).
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray

from codeward.batch.jobs import Job
from codeward.batch.ray_nodes import DOCKER_RESOURCE, DockerNodes, NodePools, SentBack
from codeward.batch.recording import BatchOptions, Interrupts, Recorder, timeout_error
from codeward.batch.worker import MAX_WARM_SETTINGS, pool_settings, uses_egress
from codeward.handed_files import write_fresh
from codeward.platform.run_files import run_file
from codeward.redaction import mark_secret
from codeward.usage import UsageError
from codeward.wording import counted

__all__ = ["DOCKER_RESOURCE", "RayBackend"]

log = logging.getLogger(__name__)

#: How many times a job is tried when its node or worker is lost under it.
MAX_ATTEMPTS = 3
_LOCAL_OBJECT_STORE_BYTES = 200 * 1024 * 1024
_CANCEL_POLL_SECONDS = 0.5
#: An attempt's cancel reason when no node of the cluster can run docker jobs.
_NO_DOCKER_NODE = "no docker node"
#: A finished attempt's run file, as its task sends it back to the driver.
RUN_FILE_KEY = "run_file_text"
#: The resource only a Ray cluster's head node has.
_HEAD_RESOURCE = "node:__internal_head__"


@ray.remote(num_cpus=0)
class _Tracker:
    """Events from the running tasks, in the order each task sent them, kept until the driver drains them."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.cancelled: set[str] = set()

    def send(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def flush(self) -> None:
        """Called and waited for by a task before it returns: its earlier events are here by then."""

    def drain(self) -> list[dict[str, Any]]:
        events, self.events = self.events, []
        return events

    def cancel(self, key: str) -> None:
        self.cancelled.add(key)

    def is_cancelled(self, key: str) -> bool:
        return key in self.cancelled


class _AuditRelay:
    """The task's audit file: each line goes to the driver, marked with the attempt and the node."""

    def __init__(self, tracker: Any, attempt: int, node: str) -> None:
        self.tracker, self.attempt, self.node = tracker, attempt, node

    def append(self, record: dict[str, Any]) -> None:
        self.tracker.send.remote({"event": "audit", "record": {**record, "attempt": self.attempt, "node": self.node}})


def _watch(job: dict[str, Any], key: str, tracker: Any, done: threading.Event, timed_out: threading.Event) -> None:
    """Stop the job at its timeout, or when the driver cancels it (`ray.cancel` alone cannot wake a blocked call)."""
    from codeward.batch.worker import cancellation

    timeout = job.get("timeout_seconds")
    deadline = time.monotonic() + timeout if timeout else math.inf
    while not done.wait(min(_CANCEL_POLL_SECONDS, max(0.0, deadline - time.monotonic()))):
        if time.monotonic() >= deadline:
            timed_out.set()
            break
        if ray.get(tracker.is_cancelled.remote(key)):
            break
    else:
        return
    cancellation.request(job["id"])


def _run_on_node(
    job: dict[str, Any], attempt: int, tracker: Any, runs: str | None, run: str, warm: bool, secrets: list[Any]
) -> dict[str, Any]:
    """One attempt at one job, on whichever node Ray chose: a sandbox there (warm, for docker), the result back,
    and with `runs` (the driver's folder) its run file's text, for the driver to write there."""
    with _environment(ray.get(secrets[0]) if secrets else {}), tempfile.TemporaryDirectory() as here:
        kept_in = Path(runs) if runs is not None else None
        result = _attempt_job(job, attempt, tracker, (Path(here), kept_in) if kept_in else None, run, warm)
        if kept_in is not None and "sent_back" not in result:
            kept = run_file(Path(here), job["id"])
            result[RUN_FILE_KEY] = kept.read_text(encoding="utf-8") if kept.is_file() else None
        return result


@contextmanager
def _environment(secrets: dict[str, str]) -> Iterator[None]:
    """The driver's named keys in this worker's environment for one task, then taken out again: they never
    travel in Ray's runtime environment, which the cluster records and shows."""
    mark_secret(*secrets.values())  # what the node writes (the run file) holds none of them
    earlier = {name: os.environ.get(name) for name in secrets}
    os.environ.update(secrets)
    try:
        yield
    finally:
        for name, value in earlier.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _attempt_job(
    job: dict[str, Any], attempt: int, tracker: Any, runs: tuple[Path, Path] | None, run: str, warm: bool
) -> dict[str, Any]:
    from codeward.batch.recording import timeout_error
    from codeward.batch.worker import cancellation, run_job

    node = ray.get_runtime_context().get_node_id()
    tracker.send.remote({"event": "started", "id": job["id"], "attempt": attempt, "node": node})
    audit = _AuditRelay(tracker, attempt, node)
    pools = NodePools(run, node, _key(job["id"], attempt), warm)
    try:
        pools.check(job)
    except SentBack as error:
        return {"id": job["id"], "sent_back": str(error), "attempt": attempt, "node": node}

    def announce(block: dict[str, Any] | None) -> None:
        record = None if block is None else {**block, "attempt": attempt, "node": node}
        tracker.send.remote({"event": "block", "id": job["id"], "attempt": attempt, "record": record})

    if threading.current_thread() is threading.main_thread():  # Ray runs a task on its worker's main thread
        signal.signal(signal.SIGUSR1, cancellation.on_signal)
    done, timed_out = threading.Event(), threading.Event()
    cancellation.current = job["id"]
    threading.Thread(target=_watch, args=(job, _key(job["id"], attempt), tracker, done, timed_out), daemon=True).start()
    try:
        here, kept_in = runs or (None, None)
        result = run_job(job, audit, announce, here, pools, runs_kept_in=kept_in)
    finally:  # cancelled too: the closing line of the block it stopped reaches the driver first
        done.set()
        cancellation.current = None
        ray.get(tracker.flush.remote())
    if timed_out.is_set() and result["status"] == "cancelled":
        result["status"], result["error"] = "timeout", timeout_error(job["timeout_seconds"])
    result["attempt"], result["node"] = attempt, node
    return result


def _warmed_settings(docker_jobs: list[Job]) -> list[dict[str, Any]]:
    """The different sandbox settings of the docker jobs, the first few: what each node's pool starts warming."""
    settings: dict[str, dict[str, Any]] = {}
    for job in docker_jobs:
        if uses_egress(job.executor_kwargs or {}):
            continue  # its proxy would belong to the node's actor: the job starts its own sandbox
        key, each, _ = pool_settings(job.executor_kwargs or {})
        settings.setdefault(key, each)
    return list(settings.values())[:MAX_WARM_SETTINGS]


def _key(job_id: str, attempt: int) -> str:
    return json.dumps([job_id, attempt])


_run_task = ray.remote(max_retries=0)(_run_on_node)


@dataclass
class _Attempt:
    """One attempt at a job, handed to the cluster and not finished yet."""

    job: Job
    number: int
    ref: Any
    node: str | None = None
    started_at: float | None = None
    deadline: float | None = None
    cancel_reason: str | None = None
    kill_at: float | None = None
    killed: bool = False
    block: dict[str, Any] | None = None


class RayBackend:
    """Runs each job as a Ray task; see the module's docstring for how failures are handled.

    `address`: ``"auto"``, ``"ray://host:10001"``, a GCS address, or None to start a
    local cluster for the run. `env`: names of the driver's environment variables
    (model keys) the tasks get: held by the driver and fetched by each task, never put in
    Ray's runtime environment; nothing else of the driver's environment is sent. `num_cpus` and `memory` (bytes) are what each job
    asks Ray for.
    """

    def __init__(
        self,
        address: str | None = None,
        env: Iterable[str] = (),
        num_cpus: float = 1.0,
        memory: int | None = None,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> None:
        self.address = address
        self.env = list(env)
        self.num_cpus = num_cpus
        self.memory = memory
        self.max_attempts = max_attempts
        self.env_vars = self._env_vars()  # a name this shell does not set is refused before anything starts

    def _env_vars(self) -> dict[str, str]:
        missing = [name for name in self.env if name not in os.environ]
        if missing:
            raise UsageError(
                f"--env names {', '.join(missing)}, which this shell does not set: set it, or drop the --env"
            )
        values = {name: os.environ[name] for name in self.env}
        mark_secret(*values.values())  # a model key sent to the tasks is never written out
        return values

    def _connect(self, jobs: list[Job], options: BatchOptions) -> bool:
        """Join (or start) the cluster; False when the caller had already connected (then it is theirs to end)."""
        if ray.is_initialized():
            return False
        settings: dict[str, Any] = {
            "log_to_driver": False,  # the jobs' output is in their results, not the user's terminal
            "logging_level": logging.ERROR,
            "include_dashboard": False,
        }
        if self.address is None:
            cpus = options.concurrency or os.cpu_count() or 1
            docker = {DOCKER_RESOURCE: cpus} if any(job.executor == "docker" for job in jobs) else {}
            settings |= {"num_cpus": cpus, "resources": docker, "object_store_memory": _LOCAL_OBJECT_STORE_BYTES}
            settings["address"] = "local"  # a new cluster, never one that RAY_ADDRESS or an earlier `ray start` left
        else:
            settings["address"] = self.address
        try:
            ray.init(**settings)
        except ConnectionError as error:
            raise UsageError(f"could not reach the Ray cluster at {self.address}: {error}") from None
        return True

    def run(self, jobs: list[Job], options: BatchOptions, recorder: Recorder, interrupts: Interrupts) -> None:
        ours = self._connect(jobs, options)
        try:
            interrupts.reclaim()  # ray.init installs its own SIGTERM handler
            _check_docker_nodes(jobs)
            self._check_fits()
            _Driver(jobs, options, recorder, self).run(interrupts)
        finally:
            if ours:
                ray.shutdown()

    def _check_fits(self) -> None:
        """A job that asks more than any node has would wait for ever: refuse the run instead."""
        nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call]
        asked = {"CPU": self.num_cpus, "memory": self.memory or 0}
        for name, amount in asked.items():
            largest = max((node.get(name, 0) for node in nodes), default=0)
            if amount > largest:
                unit = "CPUs" if name == "CPU" else "bytes of memory"
                raise UsageError(
                    f"each job asks Ray for {amount:g} {unit}, but the largest node of the cluster has {largest:g}: "
                    "ask for less (--job-cpus, --job-memory), or add a larger node"
                )


def _cluster_resources() -> dict[str, float]:
    resources: dict[str, float] = ray.cluster_resources()  # type: ignore[no-untyped-call]
    return resources


def _check_docker_nodes(jobs: list[Job]) -> None:
    docker_jobs = sum(job.executor == "docker" for job in jobs)
    if docker_jobs and not _cluster_resources().get(DOCKER_RESOURCE):
        raise UsageError(
            f"{counted(docker_jobs, 'docker job')}, but no node of the Ray cluster advertises the {DOCKER_RESOURCE!r} "
            "resource: on each node with a Docker engine, run `codeward images build`, then start Ray there with "
            f"--resources='{{\"{DOCKER_RESOURCE}\": N}}' (N docker jobs at once)"
        )


class _Driver:
    """The state of one run: jobs waiting, attempts on the cluster, their events and clocks."""

    def __init__(self, jobs: list[Job], options: BatchOptions, recorder: Recorder, backend: RayBackend) -> None:
        # a job --retry runs again starts at its next attempt; one lost with its node is tried again, numbered on
        self.pending: deque[tuple[Job, int]] = deque((job, job.attempt) for job in jobs)
        self.options = options
        self.recorder = recorder
        self.backend = backend
        self.running: dict[Any, _Attempt] = {}
        # Jobs handed to the cluster at once. Left to the cluster (0), twice its CPUs: Ray's resources cap
        # how many run, and each freed CPU finds its next task already queued instead of waiting for the driver.
        self.window = options.concurrency or 2 * int(_cluster_resources().get("CPU", 1))
        # on the head node, which lives as long as the cluster: any other node may leave mid-run
        self.tracker = _Tracker.options(resources={_HEAD_RESOURCE: 0.001}).remote()  # type: ignore[attr-defined]
        # the named keys, held by this process (Ray keeps a small object with its owner) and fetched by each
        # task: inside a list, so the task's arguments name the object and never carry its value
        self.secrets = [ray.put(backend.env_vars)] if backend.env_vars else []
        docker_jobs = [job for job in jobs if job.executor == "docker"]
        warmed = _warmed_settings(docker_jobs) if options.warm_pool else []
        self.docker_nodes = DockerNodes(warmed, self._note) if docker_jobs else None
        if self.docker_nodes is not None:
            self.docker_nodes.scan()

    def _note(self, text: str) -> None:
        show = getattr(self.recorder.progress, "note", None)
        (show or log.warning)(text)

    # -- handing out ---------------------------------------------------------------

    def _submit(self, job: Job, number: int) -> None:
        resources = {DOCKER_RESOURCE: 1} if job.executor == "docker" else {}
        settings: dict[str, Any] = {"num_cpus": self.backend.num_cpus, "resources": resources}
        if self.backend.memory:
            settings["memory"] = self.backend.memory
        runs = str(self.options.runs.resolve()) if self.options.runs is not None else None
        run = self.docker_nodes.run if self.docker_nodes is not None else ""
        warm = self.options.warm_pool
        sent = {**job.to_dict(), "attempt": number}  # this attempt's number, in its audit lines from the start
        ref = _run_task.options(**settings).remote(sent, number, self.tracker, runs, run, warm, self.secrets)
        self.running[ref] = _Attempt(job, number, ref)

    def _hand_out(self) -> None:
        while self.pending and len(self.running) < self.window:
            self._submit(*self.pending.popleft())

    # -- events and results ------------------------------------------------------------

    def _attempt(self, job_id: str, number: int) -> _Attempt | None:
        for attempt in self.running.values():
            if attempt.job.id == job_id and attempt.number == number:
                return attempt
        return None

    def _drain(self) -> None:
        for event in ray.get(self.tracker.drain.remote()):
            if event["event"] == "audit":
                if self.recorder.audit is not None:
                    self.recorder.audit.append(event["record"])
                continue
            attempt = self._attempt(event["id"], event["attempt"])
            if attempt is None:
                continue
            if event["event"] == "started":
                attempt.node, attempt.started_at = event["node"], time.monotonic()
                timeout = attempt.job.timeout_seconds  # kept by the task; this is the backstop
                attempt.deadline = attempt.started_at + timeout + self.options.grace_seconds if timeout else None
            elif event["event"] == "block":
                attempt.block = event["record"]
        self._show_nodes()

    def _show_nodes(self) -> None:
        show = getattr(self.recorder.progress, "running_on", None)
        if show is not None:
            show({a.job.id: a.node for a in self.running.values() if a.node is not None})

    def _finish(self, attempt: _Attempt) -> None:
        del self.running[attempt.ref]
        try:
            result = ray.get(attempt.ref)
        except ray.exceptions.TaskCancelledError:
            self._stopped(attempt, "")
        except ray.exceptions.RayTaskError as error:  # the task itself raised: a fault in codeward, not the node
            self.recorder.record(self._failure(attempt, "error", f"the job's task failed: {error}"))
        except ray.exceptions.RayError as error:
            self._lost(attempt, f"{type(error).__name__}: {error}")
        else:
            attempt.node = result["node"]
            if "sent_back" in result:
                self._sent_back(attempt, result["sent_back"])
            else:
                self._keep_run(attempt.job.id, result.pop(RUN_FILE_KEY, None))
                self.recorder.record(result)
        if self.docker_nodes is not None and attempt.job.executor == "docker":
            self.docker_nodes.ended(attempt.node, _key(attempt.job.id, attempt.number))

    def _keep_run(self, job_id: str, text: str | None) -> None:
        """A node's run file, written where the driver keeps runs (the node's own folder is gone with its task)."""
        if self.options.runs is None or text is None:
            return
        write_fresh(run_file(self.options.runs, job_id), text.encode("utf-8"))

    def _sent_back(self, attempt: _Attempt, reason: str) -> None:
        """The attempt landed on a node that cannot run docker jobs: the job waits for another, same attempt."""
        assert self.docker_nodes is not None and attempt.node is not None
        self.docker_nodes.sent_back(attempt.node, reason)
        self.pending.appendleft((attempt.job, attempt.number))

    def _no_docker_node(self) -> str:
        reason = self.docker_nodes.none_usable() if self.docker_nodes is not None else None
        return f"no node of the Ray cluster can run docker jobs ({reason})"

    def _give_up_docker_jobs(self) -> None:
        """Every docker node was skipped: the docker jobs end as errors instead of waiting for ever."""
        if self.docker_nodes is None or self.docker_nodes.none_usable() is None:
            return
        error = self._no_docker_node()
        for job, number in [item for item in self.pending if item[0].executor == "docker"]:
            self.pending.remove((job, number))
            self.recorder.record(self._failure(_Attempt(job, number, None), "error", error))
        for attempt in self.running.values():
            if attempt.job.executor == "docker" and attempt.node is None:
                self._cancel(attempt, _NO_DOCKER_NODE)

    def _stopped(self, attempt: _Attempt, description: str) -> None:
        """The attempt ended because the driver cancelled it (a timeout or Ctrl-C)."""
        if attempt.block is not None:
            self.recorder.lost_block(attempt.block, description or "the task was killed with its block running")
        if attempt.cancel_reason == "timeout":
            error = timeout_error(attempt.job.timeout_seconds, stopped=False)
            self.recorder.record(self._failure(attempt, "timeout", error))
        elif attempt.cancel_reason == _NO_DOCKER_NODE:
            self.recorder.record(self._failure(attempt, "error", self._no_docker_node()))
        else:
            self.recorder.record(self._failure(attempt, "cancelled", "cancelled by Ctrl-C"))

    def _lost(self, attempt: _Attempt, description: str) -> None:
        """The node or worker process died under the attempt: try again elsewhere, in a fresh sandbox."""
        where = f" on node {attempt.node}" if attempt.node else ""
        if attempt.cancel_reason is not None:
            self._stopped(attempt, description)
            return
        if attempt.block is not None:
            self.recorder.lost_block(attempt.block, f"attempt {attempt.number} was lost{where}: {description}")
        lost = attempt.number - attempt.job.attempt + 1  # in this run
        if lost < self.backend.max_attempts and not self.recorder.outcome.interrupted:
            self.pending.appendleft((attempt.job, attempt.number + 1))
            return
        error = f"the job was lost {counted(lost, 'time')}, the last{where}: {description}"
        self.recorder.record(self._failure(attempt, "error", error))

    def _failure(self, attempt: _Attempt, status: str, error: str) -> dict[str, Any]:
        job = attempt.job
        started = attempt.started_at
        return {
            "id": job.id,
            "status": status,
            "output": None,
            "error": error,
            "model": job.model,
            "sandbox": {"executor": job.executor, "id": None},
            "attempt": attempt.number,
            "node": attempt.node,
            "duration_seconds": round(time.monotonic() - started, 4) if started else 0.0,
        }

    # -- clocks and cancelling -----------------------------------------------------------

    def _cancel(self, attempt: _Attempt, reason: str) -> None:
        """Ask the attempt to stop (Ctrl-C); it is killed if it has not within the grace period."""
        if attempt.cancel_reason is not None:
            return
        attempt.cancel_reason = reason
        attempt.kill_at = time.monotonic() + self.options.grace_seconds
        self.tracker.cancel.remote(_key(attempt.job.id, attempt.number))
        ray.cancel(attempt.ref, recursive=False)  # one not started yet never starts

    def _kill(self, attempt: _Attempt, reason: str) -> None:
        if attempt.killed:
            return
        attempt.cancel_reason = attempt.cancel_reason or reason
        attempt.killed = True
        ray.cancel(attempt.ref, force=True, recursive=False)

    def _check_clocks(self) -> None:
        now = time.monotonic()
        for attempt in list(self.running.values()):
            if attempt.deadline is not None and now >= attempt.deadline:  # its own timeout did not stop it
                self._kill(attempt, "timeout")
            if attempt.kill_at is not None and now >= attempt.kill_at:
                self._kill(attempt, "cancelled")

    def _stop_starting(self) -> None:
        outcome = self.recorder.outcome
        outcome.interrupted = True
        outcome.not_started = len(self.pending)
        self.pending.clear()
        for attempt in list(self.running.values()):
            self._cancel(attempt, "cancelled")

    def _wait(self) -> list[Any]:
        refs = list(self.running)
        if not refs:
            return []
        ready, rest = ray.wait(refs, num_returns=1, timeout=0.2)
        if ready and rest:
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        return list(ready)

    def run(self, interrupts: Interrupts) -> None:
        try:
            while self.pending or self.running:
                if interrupts.count and not self.recorder.outcome.interrupted:
                    self._stop_starting()
                if interrupts.count > 1:
                    for attempt in self.running.values():
                        self._kill(attempt, "cancelled")
                if self.docker_nodes is not None:
                    self.docker_nodes.poll()
                    self._give_up_docker_jobs()
                if not self.recorder.outcome.interrupted:
                    self._hand_out()
                ready = self._wait()
                self._drain()
                for ref in ready:
                    self._finish(self.running[ref])
                self._check_clocks()
        finally:
            for attempt in self.running.values():
                ray.cancel(attempt.ref, force=True, recursive=False)
            self._drain()
            if self.docker_nodes is not None:
                self.docker_nodes.close()
            ray.kill(self.tracker)
