"""The results file read as jobs: each job's latest attempt, and the jobs ``--retry`` runs again.

The results file is append-only: a job run again (``codeward batch --retry``, or the Ray backend
trying a job lost with its node) adds a line with the next ``attempt`` number, and the earlier line
stays. Whoever reads the file as a set of jobs (resuming, the summary, ``codeward view``) takes the
latest attempt of each: the highest ``attempt``, and of equal ones the later line. A line written
before attempts were numbered counts as attempt 1.

What ``--retry WORD`` selects among the jobs already recorded, by the status of their latest attempt:

- ``failed``: every status that makes the batch fail (`FAILED_STATUSES`): ``max_steps_error``,
  ``timeout`` and ``error`` (a cancelled job is never recorded: every run does it again);
- ``error``: ``error`` only: the job's run broke (its model failed or could not be called, its
  sandbox could not start, its worker died), not the agent's work;
- ``all``: every status but ``success``: ``failed``'s, and any this version does not know (a line
  written by hand or by a later version).

A job whose latest attempt succeeded is never run again, whatever the word: exactly once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["FAILED_STATUSES", "RETRY_CHOICES", "STATUSES", "attempt_of", "latest_results", "retried"]

STATUSES = ("success", "max_steps_error", "error", "timeout", "cancelled")
#: Statuses that make the command's exit code non-zero.
FAILED_STATUSES = frozenset(STATUSES) - {"success"}
#: The words ``--retry`` takes, each with what it selects (the module's docstring says it in full).
RETRY_CHOICES = {
    "failed": "max_steps_error, timeout and error",
    "error": "error only",
    "all": "every status but success",
}


def attempt_of(record: dict[str, Any]) -> int:
    """The record's attempt number: 1 for a line from before attempts were numbered (or a malformed one)."""
    number = record.get("attempt")
    return number if isinstance(number, int) and not isinstance(number, bool) and number > 0 else 1


def latest_results(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each job's latest record (id -> record), in the order the jobs first appear."""
    latest: dict[str, dict[str, Any]] = {}
    for record in records:
        if "id" not in record:
            continue
        job_id = str(record["id"])
        if job_id not in latest or attempt_of(record) >= attempt_of(latest[job_id]):
            latest[job_id] = record
    return latest


def retried(status: Any, word: str | None) -> bool:
    """Whether ``--retry WORD`` runs again a job whose latest attempt ended with `status`."""
    if word is None or status == "success":
        return False
    if word == "error":
        return bool(status == "error")
    if word == "failed":
        return bool(status in FAILED_STATUSES)
    if word == "all":
        return True
    raise ValueError(f"--retry takes {', '.join(RETRY_CHOICES)}, not {word!r}")
