"""`codeward batch --retry`: recorded jobs that did not succeed run again as their next attempt; successes never do.

The jobs' models are script files; a job that fails the first time succeeds the second because
the test rewrites its script between the runs, as a user fixes what made a job fail.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from codeward.view.batches import read_batch
from tests.cli.conftest import SAMPLE_TOOLS, write_script
from tests.cli.test_batch import read_lines


def _setup(folder: Path) -> tuple[str, ...]:
    fine = write_script(folder / "fine.yaml", "touch('ran-fine')", "final_answer('fine')")
    write_script(folder / "flaky.yaml", "touch('ran-flaky')")  # no final answer, no response left: error
    write_script(folder / "slow.yaml", "touch('ran-slow')", "x = 1")  # out of steps at 1: max_steps_error
    jobs = [
        {"id": "fine", "task": "Fine.", "model": fine},
        {"id": "flaky", "task": "Flaky.", "model": "script:flaky.yaml"},
        {"id": "slow", "task": "Slow.", "model": "script:slow.yaml", "max_steps": 1},
    ]
    (folder / "jobs.jsonl").write_text("".join(json.dumps(job) + "\n" for job in jobs))
    return ("batch", "jobs.jsonl", "--tools", SAMPLE_TOOLS, "--runs", "runs")


def _latest(results: list[dict]) -> dict[str, dict]:
    return {record["id"]: record for record in results}  # lines are appended: a job's last is its latest


def test_retry_runs_again_exactly_the_jobs_its_word_selects_as_their_next_attempt(codeward, tmp_path) -> None:
    args = _setup(tmp_path)
    first = codeward(*args)
    assert first.returncode == 1, first.stdout + first.stderr
    results = read_lines(tmp_path / "runs" / "results.jsonl")
    assert {r["id"]: (r["status"], r["attempt"]) for r in results} == {
        "fine": ("success", 1),
        "flaky": ("error", 1),
        "slow": ("max_steps_error", 1),
    }
    # control: without --retry the same command runs nothing again
    again = codeward(*args)
    assert "3 jobs already in the results file, skipped: nothing left to run" in again.stderr, again.stderr
    assert len(read_lines(tmp_path / "runs" / "results.jsonl")) == 3

    write_script(tmp_path / "flaky.yaml", "touch('ran-flaky-again')", "final_answer('fixed')")
    write_script(tmp_path / "slow.yaml", "final_answer(touch('ran-slow-again'))")
    errors = codeward(*args, "--retry", "error")  # error only: the job out of steps waits
    assert errors.returncode == 1, errors.stdout + errors.stderr  # slow's max_steps_error still stands
    assert "2 jobs already in the results file, skipped: 1 job to run (1 retried)" in errors.stderr, errors.stderr
    assert "1 job (1 retried) in " in " ".join(errors.stdout.split())
    results = read_lines(tmp_path / "runs" / "results.jsonl")
    assert [(r["id"], r["status"], r["attempt"]) for r in results[3:]] == [("flaky", "success", 2)]
    assert [(r["status"], r["attempt"]) for r in results[:3] if r["id"] == "flaky"] == [("error", 1)]  # kept
    assert (tmp_path / "ran-flaky-again").exists() and not (tmp_path / "ran-slow-again").exists()

    failed = codeward(*args, "--retry", "failed")  # now the job out of steps; flaky succeeded, so it stays
    assert failed.returncode == 0, failed.stdout + failed.stderr  # every job's latest attempt succeeded
    results = read_lines(tmp_path / "runs" / "results.jsonl")
    assert [(r["id"], r["status"], r["attempt"]) for r in results[4:]] == [("slow", "success", 2)]
    assert Counter(r["id"] for r in results) == {"fine": 1, "flaky": 2, "slow": 2}  # the success never ran again
    assert {record["id"]: record["status"] for record in _latest(results).values()} == {
        "fine": "success",
        "flaky": "success",
        "slow": "success",
    }

    audit = read_lines(tmp_path / "runs" / "audit.jsonl")
    attempts = Counter((line["job_id"], line["attempt"]) for line in audit)
    assert attempts == {("fine", 1): 2, ("flaky", 1): 1, ("flaky", 2): 2, ("slow", 1): 1, ("slow", 2): 1}
    assert json.loads((tmp_path / "runs" / "flaky.json").read_text())["steps"]  # the run file is the latest

    everything = codeward(*args, "--retry", "all")  # nothing is left that did not succeed
    assert everything.returncode == 0 and "nothing left to run" in everything.stderr, everything.stderr
    assert len(read_lines(tmp_path / "runs" / "results.jsonl")) == 5


def test_the_page_of_a_retried_batch_shows_each_jobs_latest_attempt(codeward, tmp_path) -> None:
    args = _setup(tmp_path)
    assert codeward(*args).returncode == 1
    write_script(tmp_path / "flaky.yaml", "touch('ran-flaky-again')", "final_answer('fixed')")
    assert codeward(*args, "--retry", "error").returncode == 1
    page = codeward("view", "--runs", "runs", "-o", "page.html")
    assert page.returncode == 0, page.stderr
    html = (tmp_path / "page.html").read_text()
    assert html.count('<tr data-state="') == 3 and html.count('<tr data-state="error"') == 0
    assert "1 earlier attempt superseded by a retry, not shown" in html
    assert re.search(r'<a href="page_files/flaky.html">flaky</a>.*?<td class="num attempt">2</td>', html)
    assert "attempt 2" in (tmp_path / "page_files" / "flaky.html").read_text()
    flaky = next(job for job in read_batch(tmp_path / "runs").jobs if job.id == "flaky")
    assert (flaky.state, flaky.attempt, flaky.blocks) == ("success", 2, 2)  # not attempt 1's block too
