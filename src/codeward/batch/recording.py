"""What every batch backend shares: the options, the one writer of results and audit lines, the counts,
and Ctrl-C counted instead of obeyed. Its own module so that the backends and the runner that picks
one each import it, and none imports another."""

from __future__ import annotations

import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

from codeward.batch.jobs import Job
from codeward.batch.jsonl import JsonlAppender, repair_and_read
from codeward.batch.results import FAILED_STATUSES, STATUSES, latest_results
from codeward.batch.worker import unrecordable

__all__ = [
    "FAILED_STATUSES",
    "STATUSES",
    "Backend",
    "BatchOptions",
    "BatchOutcome",
    "Interrupts",
    "Recorder",
    "finished_ids",
    "timeout_error",
]


@dataclass
class BatchOptions:
    results: Path
    audit: Path | None
    concurrency: int
    grace_seconds: float = 5.0
    runs: Path | None = None
    #: Docker jobs: each worker starts its next job's container while a job runs.
    warm_pool: bool = True
    #: Run again the recorded jobs whose latest attempt this word selects (`results.retried`); None: none.
    retry: str | None = None


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
    #: Jobs already recorded that this run tried again (``--retry``).
    retried: int = 0

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


def finished_ids(results: Path) -> tuple[dict[str, dict[str, Any]], int]:
    """Jobs already in the results file (id -> the record of its latest attempt), after cutting a torn last line."""
    records, dropped = repair_and_read(results)
    return latest_results(records), dropped


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
        block.setdefault("events", None)  # what the walls refused: seen in the lost process, not known
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
