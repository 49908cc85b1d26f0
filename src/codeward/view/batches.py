"""A batch folder read for its page: a row per result line, the audit's blocks per job, each job's run.

The folder is what ``codeward batch --runs DIR`` writes: ``results.jsonl`` (a line per finished
job), ``audit.jsonl`` (a line per code block, unless ``--no-audit``) and ``ID.json``, each job's
run. A results line that is not a JSON object is kept and shown as such; a job whose run is
missing or unreadable shows why in place of its run. Nothing in the folder is trusted beyond
being text to show.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codeward.platform.run_files import run_file
from codeward.usage import UsageError
from codeward.view.runs import RunView, read_run
from codeward.view.values import mapping, number, text, whole

__all__ = ["AUDIT_FILE", "RESULTS_FILE", "TIME_PARTS", "BadLine", "BatchView", "JobRow", "read_batch"]

RESULTS_FILE = "results.jsonl"
AUDIT_FILE = "audit.jsonl"
#: The parts of a job's time the results record, as the page names them.
TIME_PARTS = (("model", "model_seconds"), ("sandbox", "sandbox_seconds"), ("tools", "tools_seconds"))


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
    duration: float | None = None
    steps: int | None = None
    tokens: int | None = None
    #: Seconds in the model, the sandbox and tools, and the rest of the job's time (setup), where recorded.
    time: dict[str, float] = field(default_factory=dict)
    error: str = ""
    output: str = ""
    blocks: int = 0
    tool_calls: int = 0
    run: RunView | None = None
    run_problem: str = ""


@dataclass
class BatchView:
    folder: str
    jobs: list[JobRow] = field(default_factory=list)
    bad_lines: list[BadLine] = field(default_factory=list)
    states: Counter[str] = field(default_factory=Counter)
    audit_note: str = ""

    @property
    def time_totals(self) -> dict[str, float]:
        """Seconds in each part, over the jobs that recorded their split."""
        totals: Counter[str] = Counter()
        for job in self.jobs:
            totals.update(job.time)
        return dict(totals)


def _lines(path: Path, key: str) -> list[dict[str, Any] | BadLine]:
    """Each non-empty line of a JSON-lines file: a record with `key`, or a `BadLine` saying what is wrong."""
    parsed: list[dict[str, Any] | BadLine] = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line_number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, RecursionError) as error:
                parsed.append(BadLine(line_number, line.rstrip("\n"), f"not JSON: {error}"))
                continue
            if isinstance(record, dict) and key in record:
                parsed.append(record)
            else:
                parsed.append(BadLine(line_number, line.rstrip("\n"), f"not a record with {key!r}"))
    return parsed


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
    row = JobRow(f"job-{index}", text(record.get("id")), text(record.get("status")) or "unknown", duration)
    row.steps = whole(record.get("steps"))
    row.tokens = whole(mapping(record.get("token_usage")).get("total_tokens"))
    row.time = _time(record, duration)
    row.error = text(record.get("error"))
    row.output = text(record.get("output_description") or record.get("output"))
    return row


def _attach_run(row: JobRow, folder: Path, job_id: Any) -> None:
    if not isinstance(job_id, str):
        row.run_problem = "the job's id is not a string, so its run file cannot be named"
        return
    path = run_file(folder, job_id)
    if not path.is_file():
        row.run_problem = f"no run was saved for this job ({path.name}): its worker may have died mid-job"
        return
    try:
        row.run = read_run(path)
    except UsageError as error:
        row.run_problem = str(error)


def _count_audit(folder: Path, view: BatchView) -> None:
    """Blocks and tool calls per job, from the audit file if there is one."""
    path = folder / AUDIT_FILE
    if not path.is_file():
        view.audit_note = f"no {AUDIT_FILE} in this folder (the batch ran with --no-audit?): blocks are not counted"
        return
    blocks: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    unreadable = 0
    for record in _lines(path, "job_id"):
        if isinstance(record, BadLine):
            unreadable += 1
            continue
        job = text(record["job_id"])
        blocks[job] += 1
        calls[job] += len(record["tool_calls"]) if isinstance(record.get("tool_calls"), list) else 0
    for row in view.jobs:
        row.blocks, row.tool_calls = blocks[row.id], calls[row.id]
    if unreadable:
        view.audit_note = f"{unreadable} line(s) of {AUDIT_FILE} could not be read and are not counted"


def read_batch(folder: str | Path) -> BatchView:
    """Read a batch folder; one without a results file is a `UsageError` that says what was expected."""
    folder = Path(folder)
    results = folder / RESULTS_FILE
    if not results.is_file():
        raise UsageError(
            f"{folder} holds no {RESULTS_FILE}: expected the folder a codeward batch --runs DIR wrote "
            f"(its {RESULTS_FILE}, {AUDIT_FILE} and a run file per job)"
        )
    view = BatchView(folder.resolve().name or str(folder))
    for record in _lines(results, "id"):
        if isinstance(record, BadLine):
            view.bad_lines.append(record)
            continue
        row = _row(len(view.jobs) + 1, record)
        _attach_run(row, folder, record.get("id"))
        view.jobs.append(row)
        view.states[row.state] += 1
    _count_audit(folder, view)
    return view
