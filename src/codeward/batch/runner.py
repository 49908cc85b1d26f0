"""Running a batch: the jobs not yet done handed to a backend, with the results file held for one writer.

`run_batch` owns what every backend shares: the results file held for one
writer, the jobs already finished skipped (resume) or, with `BatchOptions.retry`,
the failed ones among them run again as their next attempt (`results`), and
each result and audit line written by this process alone (`Recorder`). Where
the jobs run is the backend's, found by name in `BACKENDS` and imported only when asked for: worker
processes on this machine (``"processes"``, the default) or tasks on a Ray
cluster (``"ray"``); adding one is a module and a line.
"""

from __future__ import annotations

import dataclasses
import importlib
import time
from collections import Counter
from typing import Any

from codeward.batch.jobs import Job
from codeward.batch.jsonl import exclusive_writer, repair_and_read
from codeward.batch.recording import (
    FAILED_STATUSES,
    STATUSES,
    Backend,
    BatchOptions,
    BatchOutcome,
    Interrupts,
    Recorder,
    finished_ids,
)
from codeward.batch.results import RETRY_CHOICES, attempt_of, retried

__all__ = [
    "BACKENDS",
    "FAILED_STATUSES",
    "STATUSES",
    "Backend",
    "BatchOptions",
    "BatchOutcome",
    "Recorder",
    "backend_named",
    "run_batch",
]

#: Backends by name: the module and class, each built with the cluster's address (None on this machine).
BACKENDS: dict[str, tuple[str, str]] = {
    "processes": ("codeward.batch.process_pool", "ProcessPool"),
    "pool": ("codeward.batch.process_pool", "ProcessPool"),
    "ray": ("codeward.batch.ray_backend", "RayBackend"),
}


class _Silent:
    """Progress for callers that show none."""

    def start(self, total: int, skipped: int = 0, retried: int = 0) -> None:
        pass

    def advance(self, status: str) -> None:
        pass


def backend_named(name: str, address: str | None = None) -> Backend:
    """The backend registered as `name`, imported now; its extra missing gives the pip line to install it."""
    if name not in BACKENDS:
        raise ValueError(f"unknown batch backend {name!r}: use 'processes' (the default) or 'ray'")
    module_name, class_name = BACKENDS[name]
    backend: Backend = getattr(importlib.import_module(module_name), class_name)(address)
    return backend


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
    With `options.retry`, recorded jobs whose latest attempt that word selects run again
    (`codeward.batch.results`); a job that succeeded never does.
    """
    runner = backend_named(backend, address) if isinstance(backend, str) else backend
    if options.retry is not None and options.retry not in RETRY_CHOICES:  # before the results file is touched
        raise ValueError(f"retry takes {', '.join(map(repr, RETRY_CHOICES))} or None, not {options.retry!r}")
    progress = progress if progress is not None else _Silent()
    if options.runs is not None:
        options.runs.mkdir(parents=True, exist_ok=True)
    with exclusive_writer(options.results):
        done, dropped = finished_ids(options.results)
        if options.audit is not None:
            _, audit_dropped = repair_and_read(options.audit)
            dropped += audit_dropped
        todo, again, earlier = _todo(jobs, done, options.retry)
        told = {"retried": again} if again else {}  # a progress of the caller's from before --retry takes none
        progress.start(len(todo), skipped=len(jobs) - len(todo), **told)
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
    outcome.retried = again
    return outcome


def _todo(jobs: list[Job], done: dict[str, dict[str, Any]], retry: str | None) -> tuple[list[Job], int, Counter[str]]:
    """The jobs to run, in the file's order (those not recorded, and the recorded ones `retry` selects as their
    next attempt), how many of them are retried, and the statuses of the recorded jobs left as they are."""
    todo: list[Job] = []
    again = 0
    earlier: Counter[str] = Counter()
    for job in jobs:
        record = done.get(job.id)
        if record is None:
            todo.append(job)
        elif retried(record.get("status"), retry):
            todo.append(dataclasses.replace(job, attempt=attempt_of(record) + 1))
            again += 1
        else:
            earlier[str(record.get("status"))] += 1
    return todo, again, earlier
