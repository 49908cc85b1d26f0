"""The default batch backend: worker processes on this machine.

The process pool is one loop over the workers' event pipes (no threads): it hands
jobs to idle workers, starts each job's timeout when the worker says the job
started, writes each result line the moment it arrives (through the `Recorder`,
the only writer of the results file), and on Ctrl-C stops handing out jobs and
cancels the running ones. A second Ctrl-C kills the workers at once.
"""

from __future__ import annotations

import logging
import selectors
import time
from collections import deque
from typing import Any

from codeward.batch.jobs import Job
from codeward.batch.pool import Worker
from codeward.batch.recording import BatchOptions, BatchOutcome, Interrupts, Recorder, timeout_error

__all__ = ["ProcessPool"]

log = logging.getLogger(__name__)


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
                "attempt": job.attempt,
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
            elif event["event"] == "log":
                self._tell(f"job {event['id']}: {event['message']}" if event.get("id") else str(event["message"]))
        if closed:
            self._retire(worker)
            worker.process.wait()
            if worker.job is not None:
                self._lost(worker, worker.exit_description())
            worker.release()

    def _tell(self, line: str) -> None:
        """A worker's warning, above the progress bar (or on the log where no progress is shown)."""
        note = getattr(self.recorder.progress, "note", None)
        if note is not None:
            note(line)
        else:
            log.warning("%s", line)

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

    def __init__(self, address: str | None = None) -> None:
        if address is not None:
            raise ValueError(
                f"the process pool runs on this machine and takes no address (got {address!r}); use the 'ray' backend for a cluster"
            )

    def run(self, jobs: list[Job], options: BatchOptions, recorder: Recorder, interrupts: Interrupts) -> None:
        _Batch(jobs, options, recorder).run(interrupts)
