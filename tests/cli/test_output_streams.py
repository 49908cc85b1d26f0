"""One rule for every subcommand, run as a user runs it, piped: results on stdout; errors, warnings and
progress on stderr, each error one line however long; tables at their own width, never cut at 80 columns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import write_script

#: A name long enough that any wrapping at 80 (or 160) columns would break the line holding it.
LONG = "a-file-whose-name-is-long-enough-to-pass-any-terminal-width-" * 3

# COLUMNS="" is a pipe with no width said: rich would wrap and cut at 80 columns.
PIPED = {"COLUMNS": ""}


@pytest.mark.parametrize(
    "args",
    [
        ["run", "a task", "--model", f"script:{LONG}.yaml"],
        ["replay", f"{LONG}.json"],
        ["batch", f"{LONG}.jsonl"],
        ["view", f"{LONG}.json"],
    ],
    ids=lambda args: args[0],
)
def test_a_usage_error_is_one_line_on_stderr_and_nothing_on_stdout(codeward, args) -> None:
    done = codeward(*args, **PIPED)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("error:") and LONG in line, line
    assert "Traceback" not in done.stderr


def test_a_run_shows_its_result_on_stdout_and_its_notes_on_stderr(codeward, tmp_path: Path) -> None:
    (tmp_path / "outputs").mkdir()
    model = write_script(tmp_path / "model.yaml", "final_answer(6 * 7)")
    done = codeward("run", "Answer.", "--model", model, "--outputs-dir", "out", **PIPED)
    assert done.returncode == 0, done.stderr
    assert "Final answer: 42" in done.stdout and "success · 1 step" in done.stdout
    assert "file(s) from outputs/ written to out" in done.stderr and "written to" not in done.stdout


def test_a_batch_prints_its_summary_on_stdout_at_its_own_width_and_no_bar_on_a_pipe(codeward, tmp_path: Path) -> None:
    model = write_script(tmp_path / "model.yaml", "x = 1")
    job_id = "job-" + "x" * 120
    (tmp_path / "jobs.jsonl").write_text(json.dumps({"id": job_id, "task": "Go.", "model": model}) + "\n")
    done = codeward("batch", "jobs.jsonl", "--max-steps", "1", **PIPED)
    assert done.returncode == 1, done.stdout + done.stderr
    # the job's row whole on one line: its id, and its error to the end (the model had no closing reply)
    rows = [line for line in done.stdout.splitlines() if job_id in line]
    assert len(rows) == 1 and rows[0].rstrip().endswith("add responses or lower max_steps"), done.stdout
    assert "ETA" not in done.stdout + done.stderr  # the live bar is for a terminal
    again = codeward("batch", "jobs.jsonl", "--max-steps", "1", **PIPED)
    assert "1 job already in the results file, skipped: nothing left to run" in again.stderr
    assert "already in the results file" not in again.stdout and "codeward batch" in again.stdout


def test_the_command_without_a_subcommand_shows_its_help_on_stderr(codeward) -> None:
    done = codeward()
    assert done.returncode == 2 and done.stdout == "" and "usage: codeward" in done.stderr
