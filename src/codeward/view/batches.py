"""A batch folder read for its pages: an index row per job, the audit's blocks per job, then each job's page.

The folder is what ``codeward batch --runs DIR`` writes: ``results.jsonl`` (a line per finished
job), ``audit.jsonl`` (a line per code block, unless ``--no-audit``) and ``ID.json``, each job's
run. A job run again (``codeward batch --retry``) has a line per attempt: the page shows each job's
latest (`codeward.batch.results`), its blocks from that attempt's audit lines, and counts the
earlier ones. A results line that is not a JSON object is kept and shown as such; a job whose run is
missing or unreadable shows why in place of its run. Nothing in the folder is trusted beyond
being text to show, and no file in it is read through a link (`codeward.handed_files`): a link
planted there could show a file from outside it on the page.

The index keeps a small row per job (`JobRow`: no run, an error's first line), so thousands of
jobs make a small page; each job's run is read for its own page one job at a time (`read_jobs`), so
writing them holds one run at once. A job's page is named from its id (`codeward.handed_files.file_name`:
safe characters, no leading dot, short) and made unique among the batch's pages, ignoring case.

The files are read a line at a time, and the index shows at most `MOST_JOBS` jobs and
`MOST_BAD_LINES` malformed lines, counting the rest, so a results file of a million tiny lines
costs the pages no more than one of `MOST_JOBS`.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codeward.batch.results import attempt_of
from codeward.handed_files import file_name, handed_lines, most_handed_bytes
from codeward.json_values import read_json
from codeward.platform.run_files import run_file
from codeward.usage import UsageError
from codeward.view.runs import RunView, read_run
from codeward.view.values import MOST_NAME_CHARACTERS, mapping, number, text, whole

__all__ = [
    "AUDIT_FILE",
    "ERROR_LINE_CHARACTERS",
    "MOST_BAD_LINES",
    "MOST_JOBS",
    "RESULTS_FILE",
    "TIME_PARTS",
    "BadLine",
    "BatchView",
    "JobPage",
    "JobRow",
    "read_batch",
    "read_jobs",
]

RESULTS_FILE = "results.jsonl"
AUDIT_FILE = "audit.jsonl"
#: The parts of a job's time the results record, as the page names them.
TIME_PARTS = (("model", "model_seconds"), ("sandbox", "sandbox_seconds"), ("tools", "tools_seconds"))
#: The most jobs a batch's index shows, each with a page of its own (the first in the results file); the rest
#: are counted.
MOST_JOBS = 10_000
#: The most characters of a job's error the index shows (its first line); the job's page shows the whole.
ERROR_LINE_CHARACTERS = 200
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


@dataclass(slots=True)
class JobRow:
    """A job as the index shows it: small, so that thousands fit."""

    #: The file name of the job's page, in the index's folder of job pages.
    page: str
    id: str
    state: str
    #: The results line the row was read from, where its page finds the rest.
    line: int = 0
    #: The attempt the row shows: the job's latest (1 unless ``--retry`` ran it again).
    attempt: int = 1
    duration: float | None = None
    steps: int | None = None
    tokens: int | None = None
    #: Seconds in the model, the sandbox and tools, and the rest of the job's time (setup), where recorded.
    time: dict[str, float] = field(default_factory=dict)
    #: The first line of the job's error, at most `ERROR_LINE_CHARACTERS`.
    error_line: str = ""
    blocks: int = 0
    tool_calls: int = 0
    #: Requests the job's sandbox made through its egress proxy, by verdict (none without a list).
    egress: Counter[str] = field(default_factory=Counter)


@dataclass
class JobPage:
    """A job as its own page shows it: its row, its whole error and output, and its run or why there is none."""

    row: JobRow
    error: str = ""
    output: str = ""
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
    def time_totals(self) -> dict[str, float]:
        """Seconds in each part, over the jobs that recorded their split."""
        totals: Counter[str] = Counter()
        for job in self.jobs:
            totals.update(job.time)
        return dict(totals)


def _bad(number: int, line: str, reason: str) -> BadLine:
    return BadLine(number, text(line.rstrip("\n"), _BAD_LINE_CHARACTERS), reason)


def _lines(path: Path, key: str) -> Iterator[tuple[int, dict[str, Any] | BadLine]]:
    """Each non-empty line of a JSON-lines file, read one at a time (never through a link, each within the
    bytes a handed file may hold), with its number: a record with `key`, or a `BadLine` saying what is wrong."""
    for line_number, data in handed_lines(path):
        if data is None:
            yield line_number, BadLine(line_number, "", f"over the {most_handed_bytes():,} bytes a line may hold")
            continue
        line = data.decode("utf-8", "replace")
        if not line.strip():
            continue
        try:
            record = read_json(line)
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


def _first_line(value: Any) -> str:
    shown = text(value, ERROR_LINE_CHARACTERS)
    line, newline, _ = shown.partition("\n")
    return f"{line} …" if newline else line


def _page_name(job_id: Any, used: set[str]) -> str:
    """The file name of a job's page: its id made safe (`file_name`), with a number added where another
    job's page has the name already (ids that differ in case only, or a list and its JSON text)."""
    base = file_name(job_id if isinstance(job_id, str) else json.dumps(job_id, default=str), "")
    name, number = base, 1
    while name.lower() in used:
        number += 1
        name = f"{base}-{number}"
    used.add(name.lower())
    return f"{name}.html"


def _row(record: dict[str, Any], line: int, used: set[str]) -> JobRow:
    duration = number(record.get("duration_seconds"))
    job_id, state = text(record.get("id"), MOST_NAME_CHARACTERS), text(record.get("status"), MOST_NAME_CHARACTERS)
    row = JobRow(_page_name(record.get("id"), used), job_id, state or "unknown", line, attempt_of(record), duration)
    row.steps = whole(record.get("steps"))
    row.tokens = whole(mapping(record.get("token_usage")).get("total_tokens"))
    row.time = _time(record, duration)
    row.error_line = _first_line(record.get("error"))
    return row


def _job_page(row: JobRow, record: dict[str, Any], folder: Path) -> JobPage:
    """The job's page: its whole error and output, and its run (read now, never through a link)."""
    page = JobPage(row, text(record.get("error")), text(record.get("output_description") or record.get("output")))
    job_id = record.get("id")
    if not isinstance(job_id, str):
        page.run_problem = "the job's id is not a string, so its run file cannot be named"
        return page
    path = run_file(folder, job_id)
    try:
        page.run = read_run(path)
    except UsageError as error:
        page.run_problem = str(error)
        if not os.path.lexists(path):
            page.run_problem = f"no run was saved for this job ({path.name}): its worker may have died mid-job"
    return page


def read_jobs(folder: str | Path, view: BatchView) -> Iterator[JobPage]:
    """Each shown job's page, in the index's order, one at a time: the results file is read again for the
    jobs' whole texts, and each run only as its page is made, so only one run is held at once."""
    folder = Path(folder)
    rows = {row.line: row for row in view.jobs}
    for line, record in _lines(folder / RESULTS_FILE, "id"):
        row = rows.get(line)
        if row is not None and isinstance(record, dict) and text(record.get("id"), MOST_NAME_CHARACTERS) == row.id:
            del rows[line]
            yield _job_page(row, record, folder)
            if not rows:
                return
    for row in rows.values():  # the file changed since the index was read
        yield JobPage(row, run_problem=f"{RESULTS_FILE} changed while the pages were written: view the folder again")


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


def _add(view: BatchView, line: int, record: dict[str, Any] | BadLine, rows: dict[str, JobRow], used: set[str]) -> None:
    """One line of the results file on the page, or counted as left off once the page is full."""
    if isinstance(record, BadLine):
        if len(view.bad_lines) < MOST_BAD_LINES:
            view.bad_lines.append(record)
        else:
            view.bad_lines_left_off += 1
    elif len(view.jobs) < MOST_JOBS:
        row = _row(record, line, used)
        view.jobs.append(row)
        view.states[row.state] += 1
        rows.setdefault(text(record.get("id")), row)
    else:
        view.jobs_left_off += 1


def read_batch(folder: str | Path) -> BatchView:
    """Read a batch folder for its index (each job's run is read by `read_jobs`); one without a results file
    is a `UsageError` that says what was expected."""
    folder = Path(folder)
    results = folder / RESULTS_FILE
    if not os.path.lexists(results):
        raise UsageError(
            f"{folder} holds no {RESULTS_FILE}: expected the folder a codeward batch --runs DIR wrote "
            f"(its {RESULTS_FILE}, {AUDIT_FILE} and a run file per job)"
        )
    view = BatchView(text(folder.resolve().name or str(folder), MOST_NAME_CHARACTERS))
    rows: dict[str, JobRow] = {}
    used: set[str] = set()
    latest = _latest_lines(results)
    for line, record in _lines(results, "id"):
        if isinstance(record, dict) and latest.get(_key(record), line) != line:
            view.earlier_attempts += 1
            continue
        _add(view, line, record, rows, used)
    _count_audit(folder, view, rows)
    return view


def _key(record: dict[str, Any]) -> str:
    return json.dumps(record["id"], default=str)


def _latest_lines(results: Path) -> dict[str, int]:
    """The line of each job's latest attempt, for the first `MOST_JOBS` jobs (the index shows no more): the
    highest attempt, and of equal ones the later line, as `codeward.batch.results.latest_results` takes it."""
    latest: dict[str, tuple[int, int]] = {}
    for line, record in _lines(results, "id"):
        if isinstance(record, BadLine):
            continue
        key = _key(record)
        if (key not in latest and len(latest) < MOST_JOBS) or (key in latest and attempt_of(record) >= latest[key][0]):
            latest[key] = (attempt_of(record), line)
    return {key: line for key, (_, line) in latest.items()}
