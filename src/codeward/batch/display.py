"""What a batch shows: a live progress bar with counts by status, and the closing summary."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from codeward.batch.recording import STATUSES, BatchOutcome
from codeward.terminal_text import visible, visible_text
from codeward.wording import counted

__all__ = ["BatchProgress", "summary_table"]

_STYLES = {"success": "green", "max_steps_error": "yellow", "error": "red", "timeout": "magenta", "cancelled": "dim"}


def _counts_text(counts: Counter[str]) -> str:
    parts = [f"[{_STYLES[s]}]{s} {counts[s]}[/]" for s in STATUSES if counts[s]]
    return " · ".join(parts) or "[dim]waiting for the first result[/]"


def _nodes_text(nodes: dict[str, str], shown: int = 3) -> str:
    """Running jobs by node: ``node 1a2b3c4d: job-1, job-7`` (a node's first few jobs, then a count)."""
    by_node: dict[str, list[str]] = {}
    for job_id, node in sorted(nodes.items()):
        by_node.setdefault(node, []).append(job_id)
    parts = []
    for node, ids in sorted(by_node.items()):
        more = f" +{len(ids) - shown}" if len(ids) > shown else ""
        parts.append(f"node {node[:8]}: {', '.join(visible(i) for i in ids[:shown])}{more}")
    return "[dim]" + escape(" · ".join(parts)) + "[/]" if parts else ""


class BatchProgress:
    """The live bar (on a terminal; none on a pipe); the runner calls `start` once and `advance` per finished job."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.counts: Counter[str] = Counter()
        self._progress = Progress(
            TextColumn("[bold]jobs"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[counts]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[nodes]}"),
            console=console,
            transient=False,
            disable=not console.is_terminal,  # a bar on a pipe is lines of noise: the summary says it all
        )
        self._task: Any = None

    def start(self, total: int, skipped: int = 0, retried: int = 0) -> None:
        left = "nothing left to run" if not total else f"{counted(total, 'job')} to run"
        left += f" ({retried} retried)" if retried else ""
        if skipped:
            self.console.print(f"{counted(skipped, 'job')} already in the results file, skipped: {left}")
        elif retried:
            self.console.print(left)
        self._task = self._progress.add_task("jobs", total=total, counts=_counts_text(self.counts), nodes="")
        if total:  # a bar of 0/0 says nothing the line above does not
            self._progress.start()

    def advance(self, status: str) -> None:
        self.counts[status] += 1
        self._progress.update(self._task, advance=1, counts=_counts_text(self.counts))

    def note(self, text: str) -> None:
        """A line for the user above the bar: something about the run, not one job (a node skipped)."""
        self._progress.console.print(escape(visible(text)))

    def running_on(self, nodes: dict[str, str]) -> None:
        """Where the running jobs are (job id -> node id), for backends that spread them over machines."""
        if self._task is not None:
            self._progress.update(self._task, nodes=_nodes_text(nodes))

    def __enter__(self) -> BatchProgress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._progress.stop()


def _first_line(error: str, width: int = 200) -> str:
    """The start of a job's error, one line of it: its text came from the job's sandbox or model."""
    lines = visible(error).strip().splitlines()
    return lines[0][:width] if lines else ""


def summary_table(outcome: BatchOutcome, shown_failures: int = 20) -> list[Any]:
    """The summary: counts by status (this run and earlier runs), then the failed jobs."""
    counts = Table(title="codeward batch", show_edge=False)
    counts.add_column("status")
    counts.add_column("this run", justify="right")
    counts.add_column("earlier runs", justify="right")
    for status in STATUSES:
        if outcome.counts[status] or outcome.earlier[status]:
            counts.add_row(f"[{_STYLES[status]}]{status}[/]", str(outcome.counts[status]), str(outcome.earlier[status]))
    if outcome.not_started:
        counts.add_row("[dim]not started[/]", str(outcome.not_started), "")
    ran = sum(outcome.counts.values())
    rate = ran / outcome.duration_seconds if outcome.duration_seconds else 0.0
    retried = f" ({outcome.retried} retried)" if outcome.retried else ""
    counts.caption = f"{counted(ran, 'job')}{retried} in {outcome.duration_seconds:.1f} s ({rate:.2f} jobs/s)"
    shown: list[Any] = [counts]
    if outcome.failures:
        failures = Table(title="jobs that did not succeed", show_edge=False)
        for column in ("id", "status", "steps", "error"):
            failures.add_column(column, overflow="fold")
        for result in outcome.failures[:shown_failures]:
            failures.add_row(
                visible_text(str(result["id"])),
                visible_text(str(result.get("status", "error"))),
                visible_text(str(result.get("steps", ""))),
                visible_text(_first_line(str(result.get("error") or ""))),
            )
        if len(outcome.failures) > shown_failures:
            failures.caption = f"... and {len(outcome.failures) - shown_failures} more in the results file"
        shown.append(failures)
    return shown
