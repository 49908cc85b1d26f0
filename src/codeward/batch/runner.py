"""Running a batch: the jobs not yet done handed to a backend, with the results file held for one writer.

`run_batch` owns what every backend shares: the results file held for one
writer, the jobs already finished skipped (resume), and each result and audit
line written by this process alone (`Recorder`). Where the jobs run is the
backend's, found by name in `BACKENDS` and imported only when asked for: worker
processes on this machine (``"processes"``, the default) or tasks on a Ray
cluster (``"ray"``); adding one is a module and a line.
"""

from __future__ import annotations

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

    def start(self, total: int, skipped: int = 0) -> None:
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
    """
    runner = backend_named(backend, address) if isinstance(backend, str) else backend
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
