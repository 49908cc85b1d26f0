"""A batch folder read for its page: a row per result line, the audit's blocks per job, each job's run.

The folder is what ``codeward batch --runs DIR`` writes: ``results.jsonl`` (a line per finished
job), ``audit.jsonl`` (a line per code block, unless ``--no-audit``) and ``ID.json``, each job's
run. A job run again (``codeward batch --retry``) has a line per attempt: the page shows each job's
latest (`codeward.batch.results`), its blocks from that attempt's audit lines, and counts the
earlier ones. A results line that is not a JSON object is kept and shown as such; a job whose run is
missing or unreadable shows why in place of its run. Nothing in the folder is trusted beyond
being text to show, and no file in it is read through a link (`codeward.handed_files`): a link
planted there could show a file from outside it on the page.

The files are read a line at a time, and a page shows at most `MOST_JOBS` jobs and
`MOST_BAD_LINES` malformed lines, counting the rest, so a results file of a million tiny lines
costs the page no more than one of a thousand.
"""

from __future__ import annotations

import io
import json
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codeward.batch.results import attempt_of
from codeward.handed_files import open_handed
from codeward.platform.run_files import run_file
from codeward.usage import UsageError
from codeward.view.runs import RunView, read_run
from codeward.view.values import MOST_NAME_CHARACTERS, mapping, number, text, whole

__all__ = [
    "AUDIT_FILE",
    "MOST_BAD_LINES",
    "MOST_JOBS",
    "MOST_PAGE_STEPS",
    "RESULTS_FILE",
    "TIME_PARTS",
    "BadLine",
    "BatchView",
    "JobRow",
    "read_batch",
]

RESULTS_FILE = "results.jsonl"
AUDIT_FILE = "audit.jsonl"
#: The parts of a job's time the results record, as the page names them.
TIME_PARTS = (("model", "model_seconds"), ("sandbox", "sandbox_seconds"), ("tools", "tools_seconds"))
#: The most jobs a batch's page shows (the first in the results file); the rest are counted.
MOST_JOBS = 1000
#: The most steps a batch's page shows, over all its jobs' runs; later runs show only how many they hold.
MOST_PAGE_STEPS = 5000
#: The most malformed results lines a page shows; the rest are counted.
MOST_BAD_LINES = 50
#: The most characters of a malformed line a page shows.
_BAD_LINE_CHARACTERS = 2000


@dataclass
class BadLine:
    """A line of the results file that is not a job's record."""

    number: int
    text: str
    reason: str


@dataclass
class JobRow:
    anchor: str
    id: str
    state: str
    #: The attempt the row shows: the job's latest (1 unless ``--retry`` ran it again).
    attempt: int = 1
    duration: float | None = None
    steps: int | None = None
    tokens: int | None = None
    #: Seconds in the model, the sandbox and tools, and the rest of the job's time (setup), where recorded.
    time: dict[str, float] = field(default_factory=dict)
    error: str = ""
    output: str = ""
    blocks: int = 0
    tool_calls: int = 0
    #: Requests the job's sandbox made through its egress proxy, by verdict (none without a list).
    egress: Counter[str] = field(default_factory=Counter)
    run: RunView | None = None
    run_problem: str = ""


@dataclass
class BatchView:
    folder: str
    jobs: list[JobRow] = field(default_factory=list)
    bad_lines: list[BadLine] = field(default_factory=list)
    states: Counter[str] = field(default_factory=Counter)
    audit_note: str = ""
    #: Jobs and malformed lines past `MOST_JOBS` and `MOST_BAD_LINES`, counted, not shown.
    jobs_left_off: int = 0
    bad_lines_left_off: int = 0
    #: Results lines of shown jobs' earlier attempts, superseded by a later one (``--retry``).
    earlier_attempts: int = 0

    @property
    def steps_shown(self) -> int:
        return sum(len(job.run.steps) for job in self.jobs if job.run is not None)

    @property
    def time_totals(self) -> dict[str, float]:
        """Seconds in each part, over the jobs that recorded their split."""
        totals: Counter[str] = Counter()
        for job in self.jobs:
            totals.update(job.time)
        return dict(totals)


def _bad(number: int, line: str, reason: str) -> BadLine:
    return BadLine(number, text(line.rstrip("\n"), _BAD_LINE_CHARACTERS), reason)


def _lines(path: Path, key: str) -> Iterator[tuple[int, dict[str, Any] | BadLine]]:
    """Each non-empty line of a JSON-lines file, read one at a time (never through a link), with its number:
    a record with `key`, or a `BadLine` saying what is wrong."""
    with open_handed(path) as stream, io.TextIOWrapper(stream, encoding="utf-8", errors="replace") as handle:
        for line_number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, RecursionError) as error:
                yield line_number, _bad(line_number, line, f"not JSON: {error}")
                continue
            if isinstance(record, dict) and key in record:
                yield line_number, record
            else:
                yield line_number, _bad(line_number, line, f"not a record with {key!r}")


def _time(record: dict[str, Any], duration: float | None) -> dict[str, float]:
    recorded = mapping(record.get("time"))
    parts = {name: seconds for name, key in TIME_PARTS if (seconds := number(recorded.get(key))) is not None}
    if len(parts) < len(TIME_PARTS):  # a job that never ran a step, or a batch from before the split was recorded
        return {}
    if duration is not None:
        parts["setup"] = max(0.0, duration - sum(parts.values()))
    return parts


def _row(index: int, record: dict[str, Any]) -> JobRow:
    duration = number(record.get("duration_seconds"))
    job_id, state = text(record.get("id"), MOST_NAME_CHARACTERS), text(record.get("status"), MOST_NAME_CHARACTERS)
    row = JobRow(f"job-{index}", job_id, state or "unknown", attempt_of(record), duration)
    row.steps = whole(record.get("steps"))
    row.tokens = whole(mapping(record.get("token_usage")).get("total_tokens"))
    row.time = _time(record, duration)
    row.error = text(record.get("error"))
    row.output = text(record.get("output_description") or record.get("output"))
    return row


def _attach_run(row: JobRow, folder: Path, job_id: Any, most_steps: int) -> None:
    if not isinstance(job_id, str):
        row.run_problem = "the job's id is not a string, so its run file cannot be named"
        return
    path = run_file(folder, job_id)
    try:
        row.run = read_run(path, most_steps)
    except UsageError as error:
        row.run_problem = str(error)
        if not os.path.lexists(path):
            row.run_problem = f"no run was saved for this job ({path.name}): its worker may have died mid-job"


def _count_audit(folder: Path, view: BatchView, rows: dict[str, JobRow]) -> None:
    """Blocks and tool calls of each shown job (`rows`, by id), from the audit file if there is one."""
    path = folder / AUDIT_FILE
    if not os.path.lexists(path):
        view.audit_note = f"no {AUDIT_FILE} in this folder (the batch ran with --no-audit?): blocks are not counted"
        return
    unreadable = 0
    try:
        for _, record in _lines(path, "job_id"):
            if isinstance(record, BadLine):
                unreadable += 1
            elif (row := rows.get(text(record["job_id"]))) is not None and attempt_of(record) == row.attempt:
                row.blocks += 1
                row.tool_calls += len(record["tool_calls"]) if isinstance(record.get("tool_calls"), list) else 0
                _count_egress(row, record.get("egress"))
    except UsageError as error:
        view.audit_note = f"{error}; blocks are not counted"
        return
    if unreadable:
        lines = "line" if unreadable == 1 else "lines"
        view.audit_note = f"{unreadable} {lines} of {AUDIT_FILE} could not be read and are not counted"


def _count_egress(row: JobRow, summary: object) -> None:
    """A block's egress counts, as the audit wrote them; anything else in a handed file is not counted."""
    if isinstance(summary, dict):
        for verdict in ("allowed", "refused", "failed"):
            count = summary.get(verdict)
            if isinstance(count, int) and not isinstance(count, bool) and 0 <= count < 1 << 31:
                row.egress[verdict] += count


def _add(view: BatchView, record: dict[str, Any] | BadLine, folder: Path, rows: dict[str, JobRow]) -> None:
    """One line of the results file on the page, or counted as left off once the page is full."""
    if isinstance(record, BadLine):
        if len(view.bad_lines) < MOST_BAD_LINES:
            view.bad_lines.append(record)
        else:
            view.bad_lines_left_off += 1
    elif len(view.jobs) < MOST_JOBS:
        row = _row(len(view.jobs) + 1, record)
        _attach_run(row, folder, record.get("id"), MOST_PAGE_STEPS - view.steps_shown)
        view.jobs.append(row)
        view.states[row.state] += 1
        rows.setdefault(text(record.get("id")), row)
    else:
        view.jobs_left_off += 1


def read_batch(folder: str | Path) -> BatchView:
    """Read a batch folder; one without a results file is a `UsageError` that says what was expected."""
    folder = Path(folder)
    results = folder / RESULTS_FILE
    if not os.path.lexists(results):
        raise UsageError(
            f"{folder} holds no {RESULTS_FILE}: expected the folder a codeward batch --runs DIR wrote "
            f"(its {RESULTS_FILE}, {AUDIT_FILE} and a run file per job)"
        )
    view = BatchView(text(folder.resolve().name or str(folder), MOST_NAME_CHARACTERS))
    rows: dict[str, JobRow] = {}
    latest = _latest_lines(results)
    for line, record in _lines(results, "id"):
        if isinstance(record, dict) and latest.get(_key(record), line) != line:
            view.earlier_attempts += 1
            continue
        _add(view, record, folder, rows)
    _count_audit(folder, view, rows)
    return view


def _key(record: dict[str, Any]) -> str:
    return json.dumps(record["id"], default=str)


def _latest_lines(results: Path) -> dict[str, int]:
    """The line of each job's latest attempt, for the first `MOST_JOBS` jobs (the page shows no more): the
    highest attempt, and of equal ones the later line, as `codeward.batch.results.latest_results` takes it."""
    latest: dict[str, tuple[int, int]] = {}
    for line, record in _lines(results, "id"):
        if isinstance(record, BadLine):
            continue
        key = _key(record)
        if (key not in latest and len(latest) < MOST_JOBS) or (key in latest and attempt_of(record) >= latest[key][0]):
            latest[key] = (attempt_of(record), line)
    return {key: line for key, (_, line) in latest.items()}
