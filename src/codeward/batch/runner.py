"""Running a batch: jobs onto workers, results onto disk, Ctrl-C and timeouts handled.

`run_batch` owns what every backend shares: the results file held for one
writer, the jobs already finished skipped (resume), and each result and audit
line written by this process alone (`Recorder`). Where the jobs run is the
backend's: worker processes on this machine (`ProcessPool`, the default), or
tasks on a Ray cluster (`codeward.batch.ray_backend`, imported only when asked for).

The process pool is one loop over the workers' event pipes (no threads): it hands
jobs to idle workers, starts each job's timeout when the worker says the job
started, writes each result line the moment it arrives (the only writer of the
results file), and on Ctrl-C stops handing out jobs and cancels the running
ones. A second Ctrl-C kills the workers at once.
"""

from __future__ import annotations

import selectors
import signal
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

from codeward.batch.jobs import Job
from codeward.batch.jsonl import JsonlAppender, exclusive_writer, repair_and_read
from codeward.batch.pool import Worker
from codeward.batch.worker import unrecordable

__all__ = [
    "FAILED_STATUSES",
    "STATUSES",
    "Backend",
    "BatchOptions",
    "BatchOutcome",
    "Interrupts",
    "ProcessPool",
    "Recorder",
    "run_batch",
]

STATUSES = ("success", "max_steps_error", "error", "timeout", "cancelled")
#: Statuses that make the command's exit code non-zero.
FAILED_STATUSES = frozenset(STATUSES) - {"success"}


@dataclass
class BatchOptions:
    results: Path
    audit: Path | None
    concurrency: int
    grace_seconds: float = 5.0
    runs: Path | None = None
    #: Docker jobs: each worker starts its next job's container while a job runs.
    warm_pool: bool = True


@dataclass
class BatchOutcome:
    """What happened: this run's counts, the counts already on disk, the failures, whether Ctrl-C stopped it."""

    counts: Counter[str] = field(default_factory=Counter)
    earlier: Counter[str] = field(default_factory=Counter)
    failures: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False
    not_started: int = 0
    duration_seconds: float = 0.0
    dropped_bytes: int = 0

    @property
    def failed(self) -> bool:
        return any(self.counts[s] or self.earlier[s] for s in FAILED_STATUSES)


class Interrupts:
    """Counts Ctrl-C presses (and SIGTERMs, as a CI runner's timeout sends) instead of dying of them."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.count = 0
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1

    def __enter__(self) -> Interrupts:
        self._previous = {signum: signal.signal(signum, self._handle) for signum in self.SIGNALS}
        return self

    def reclaim(self) -> None:
        """Count the signals again after a library (Ray's init) installed handlers of its own."""
        for signum in self.SIGNALS:
            signal.signal(signum, self._handle)

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def finished_ids(results: Path) -> tuple[dict[str, str], int]:
    """Ids already in the results file (id -> status), after cutting a torn last line."""
    records, dropped = repair_and_read(results)
    return {str(r["id"]): str(r.get("status")) for r in records if "id" in r}, dropped


class Recorder:
    """The one writer of a run's results and audit lines, and the counts and progress that follow them.

    Every backend records through it, so a result line means the same thing
    whatever ran the job: a cancelled job is not written (the next run does it
    again), and a result JSON cannot hold becomes that job's error.
    """

    def __init__(self, options: BatchOptions, progress: Any) -> None:
        self.progress = progress
        self.outcome = BatchOutcome()
        self.results = JsonlAppender(options.results)
        self.audit = JsonlAppender(options.audit, shared=True) if options.audit else None

    def record(self, result: dict[str, Any]) -> None:
        if result.get("status") != "cancelled":  # a cancelled job did not finish: the next run does it again
            result = self._write_result(result)
        status = result.get("status", "error")
        self.outcome.counts[status] += 1
        if status != "success":
            self.outcome.failures.append(result)
        self.progress.advance(status)

    def _write_result(self, result: dict[str, Any]) -> dict[str, Any]:
        """Write the result line; one that cannot be written becomes that job's error, and the batch goes on."""
        try:
            self.results.append(result)
        except (TypeError, ValueError, RecursionError) as error:
            result = unrecordable(result, error)
            self.results.append(result)
        return result

    def lost_block(self, block: dict[str, Any], description: str) -> None:
        """The audit line of a code block whose process died under it, as far as the driver knows it."""
        if self.audit is None:
            return
        block["outcome"], block["error"] = "worker_lost", description
        block["duration_seconds"] = round(time.time() - _epoch(block["start"]), 6)
        block.setdefault("tool_calls", None)  # made in the lost process: not known
        self.audit.append(block)

    def close(self) -> None:
        self.results.close()
        if self.audit is not None:
            self.audit.close()


class Backend(Protocol):
    """Where a batch's jobs run. It records every job it was given through `recorder`, unless interrupted."""

    def run(self, jobs: list[Job], options: BatchOptions, recorder: Recorder, interrupts: Interrupts) -> None: ...


def timeout_error(timeout_seconds: float | None, stopped: bool = True) -> str:
    """The error of a job stopped at its timeout (or killed, when asking it to stop was not enough)."""
    if stopped:
        return f"the job ran past its timeout of {timeout_seconds} s and was stopped"
    return f"the job ran past its timeout of {timeout_seconds} s and did not stop when asked"


class _Batch:
    """The state of one run of the process pool's loop."""

    def __init__(self, jobs: list[Job], options: BatchOptions, recorder: Recorder) -> None:
        self.pending = deque(jobs)
        self.options = options
        self.recorder = recorder
        self.workers: list[Worker] = []
        self.selector = selectors.DefaultSelector()
        self.outcome = recorder.outcome

    # -- workers -------------------------------------------------------------------

    def _spawn(self) -> Worker:
        worker = Worker(self.options.audit, self.options.runs, self.options.warm_pool)
        self.workers.append(worker)
        self.selector.register(worker.channel, selectors.EVENT_READ, worker)
        return worker

    def _retire(self, worker: Worker) -> None:
        self.selector.unregister(worker.channel)
        self.workers.remove(worker)

    def _hand_out(self) -> None:
        for worker in self.workers:
            if worker.idle and self.pending:
                worker.assign(self.pending.popleft())
        while self.pending and len(self.workers) < self.options.concurrency:
            self._spawn().assign(self.pending.popleft())

    # -- results -------------------------------------------------------------------

    def _record(self, worker: Worker, result: dict[str, Any]) -> None:
        if worker.cancel_reason == "timeout" and result.get("status") == "cancelled":
            result["status"] = "timeout"
            result["error"] = timeout_error(worker.job.timeout_seconds)
        self.recorder.record(result)
        worker.finish_job()

    def _lost(self, worker: Worker, description: str) -> None:
        """The worker died or was killed with a job on it: record what the parent knows."""
        job = worker.job
        status = {"timeout": "timeout", "cancelled": "cancelled"}.get(worker.cancel_reason or "", "error")
        error = description
        if status == "timeout":
            error = f"{timeout_error(job.timeout_seconds, stopped=False)}; {description}"
        if worker.block is not None:
            self.recorder.lost_block(worker.block, description)
        started = worker.started_at
        self._record(
            worker,
            {
                "id": job.id,
                "status": status,
                "output": None,
                "error": error,
                "model": job.model,
                "sandbox": {"executor": job.executor, "id": None, "worker_pid": worker.pid},
                "duration_seconds": round(time.monotonic() - started, 4) if started else 0.0,
            },
        )

    # -- the loop --------------------------------------------------------------------

    def _on_events(self, worker: Worker) -> None:
        events, closed = worker.read_events()
        for event in events:
            if event["event"] == "started":
                worker.job_started(time.monotonic())
            elif event["event"] == "block":
                worker.block = event["record"]
            elif event["event"] == "done" and worker.job is not None:
                self._record(worker, event["result"])
        if closed:
            self._retire(worker)
            worker.process.wait()
            if worker.job is not None:
                self._lost(worker, worker.exit_description())
            worker.release()

    def _check_clocks(self) -> None:
        now = time.monotonic()
        for worker in list(self.workers):
            if worker.deadline is not None and now >= worker.deadline:
                worker.cancel("timeout", self.options.grace_seconds)
            if worker.kill_at is not None and now >= worker.kill_at and worker.job is not None:
                self._kill(worker, "the worker was killed after the grace period")

    def _kill(self, worker: Worker, description: str) -> None:
        self._retire(worker)
        worker.kill()
        self._lost(worker, description)
        worker.release()

    def _next_wakeup(self) -> float:
        clocks = [t for w in self.workers for t in (w.deadline, w.kill_at) if t is not None]
        return max(0.0, min([0.2, *(t - time.monotonic() for t in clocks)]))

    def run(self, interrupts: Interrupts) -> BatchOutcome:
        try:
            while self.pending or any(not w.idle for w in self.workers):
                if interrupts.count and not self.outcome.interrupted:
                    self._stop_starting()
                if interrupts.count > 1:
                    for worker in [w for w in self.workers if w.job is not None]:
                        self._kill(worker, "cancelled by a second Ctrl-C: the worker was killed")
                if not self.outcome.interrupted:
                    self._hand_out()
                for key, _ in self.selector.select(self._next_wakeup()):
                    self._on_events(key.data)
                self._check_clocks()
        finally:
            for worker in list(self.workers):
                self._retire(worker)
                worker.stop(self.options.grace_seconds)
            self.selector.close()
        return self.outcome

    def _stop_starting(self) -> None:
        self.outcome.interrupted = True
        self.outcome.not_started = len(self.pending)
        self.pending.clear()
        for worker in self.workers:
            worker.cancel("cancelled", self.options.grace_seconds)


class ProcessPool:
    """The default backend: worker processes on this machine, `options.concurrency` of them."""

    def run(self, jobs: list[Job], options: BatchOptions, recorder: Recorder, interrupts: Interrupts) -> None:
        _Batch(jobs, options, recorder).run(interrupts)


class _Silent:
    """Progress for callers that show none."""

    def start(self, total: int, skipped: int = 0) -> None:
        pass

    def advance(self, status: str) -> None:
        pass


def _backend(backend: Backend | str, address: str | None) -> Backend:
    if not isinstance(backend, str):
        return backend
    if backend == "ray":
        from codeward.batch.ray_backend import RayBackend

        return RayBackend(address)
    if backend in ("processes", "pool"):
        return ProcessPool()
    raise ValueError(f"unknown batch backend {backend!r}: use 'processes' (the default) or 'ray'")


def run_batch(
    jobs: list[Job],
    options: BatchOptions,
    progress: Any = None,
    *,
    backend: Backend | str = "processes",
    address: str | None = None,
) -> BatchOutcome:
    """Run the jobs not already finished in `options.results`; `progress` hears of each result.

    `backend` is where they run: ``"processes"`` (worker processes here) or ``"ray"``
    (tasks on the Ray cluster at `address`: ``"auto"``, ``"ray://host:10001"``, or
    None for a local cluster started for this run), or a `Backend` of your own.
    """
    runner = _backend(backend, address)
    progress = progress if progress is not None else _Silent()
    if options.runs is not None:
        options.runs.mkdir(parents=True, exist_ok=True)
    with exclusive_writer(options.results):
        done, dropped = finished_ids(options.results)
        if options.audit is not None:
            _, audit_dropped = repair_and_read(options.audit)
            dropped += audit_dropped
        todo = [job for job in jobs if job.id not in done]
        ids = {job.id for job in jobs}
        earlier = Counter(status for job_id, status in done.items() if job_id in ids)
        progress.start(len(todo), skipped=len(jobs) - len(todo))
        started = time.monotonic()
        recorder = Recorder(options, progress)
        try:
            with Interrupts() as interrupts:
                runner.run(todo, options, recorder, interrupts)
        finally:
            recorder.close()
    outcome = recorder.outcome
    outcome.duration_seconds = time.monotonic() - started
    outcome.earlier = earlier
    outcome.dropped_bytes = dropped
    return outcome
