"""What a page costs: ``codeward view`` on files made to blow it up (a million tiny steps, one huge
output, a results file of tiny lines) stays within a documented multiple of the files' size, measured
with tracemalloc in a fresh process; and each control lifts one budget to show the memory it saves.
Odd lines and names show as such and never stop the page."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from codeward.view import batches as batch_pages
from codeward.view import read_batch, read_jobs, render_batch, render_job, render_run
from codeward.view import runs as run_pages
from tests.cli.conftest import command_env

#: The documented bound (README, "Viewing runs"): the page holds at most about 30 times the size of the
#: files it reads, plus a few megabytes of its own.
MULTIPLE = 30
OWN = 8 * 2**20

_PROBE = """
import importlib, sys, tracemalloc
from pathlib import Path
kind, path = sys.argv[1], Path(sys.argv[2])
for override in sys.argv[3:]:
    name, value = override.split("=")
    module, attribute = name.rsplit(".", 1)
    setattr(importlib.import_module(module), attribute, int(value))
from codeward.view import render_batch, write_view
tracemalloc.start()
if kind == "index":  # the batch's index alone, held whole
    render_batch(path)
else:
    write_view(path, path.parent / "page.html" if kind == "run" else path / "page.html", batch=kind == "batch")
print(tracemalloc.get_traced_memory()[1])
"""


def _peak(kind: str, path: Path, *overrides: str) -> int:
    """The most memory `codeward view` held while writing the page of `path`, in a process of its own."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, kind, str(path), *overrides],
        capture_output=True,
        text=True,
        env=command_env(),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir()) if path.is_dir() else path.stat().st_size


def _steps(path: Path, record: object, count: int) -> Path:
    path.write_text(json.dumps({"steps": [record] * count}, separators=(",", ":")))
    return path


@pytest.mark.parametrize("record", [0, {}, {"type": "action"}], ids=["numbers", "objects", "actions"])
def test_a_million_tiny_steps_cost_a_bounded_multiple_of_the_file(tmp_path, record):
    path = _steps(tmp_path / "run.json", record, 1_000_000)
    peak = _peak("run", path)
    assert peak < MULTIPLE * _size(path) + OWN, (peak, _size(path))
    page = (tmp_path / "page.html").read_text()
    assert page.count("<article") == 500 and "999,500 more step(s) are in the run's file" in page


def test_control_without_the_step_budget_tiny_steps_cost_far_more(tmp_path):
    path = _steps(tmp_path / "run.json", 0, 30_000)
    peak = _peak("run", path, "codeward.view.runs.MOST_STEPS=1000000000")
    assert peak > MULTIPLE * _size(path) + OWN, (peak, _size(path))


def test_one_huge_output_is_cut_for_the_page(tmp_path):
    steps = [{"type": "action", "step_number": 1, "observations": "<" * 5_000_000}]
    (tmp_path / "run.json").write_text(json.dumps({"steps": steps}))
    peak = _peak("run", tmp_path / "run.json")
    assert peak < 3 * _size(tmp_path / "run.json") + OWN, peak
    page = (tmp_path / "page.html").read_text()
    assert "4,900,000 more characters are in the file, not on this page" in page
    assert page.count("&lt;") < 200_000


def test_control_without_the_text_budget_the_huge_output_is_copied_many_times(tmp_path):
    steps = [{"type": "action", "step_number": 1, "observations": "<" * 5_000_000}]
    (tmp_path / "run.json").write_text(json.dumps({"steps": steps}))
    peak = _peak("run", tmp_path / "run.json", "codeward.view.values.MOST_CHARACTERS=1000000000")
    assert peak > 10 * _size(tmp_path / "run.json"), peak


def _tiny_results(folder: Path, lines: int) -> Path:
    folder.mkdir()
    with open(folder / "results.jsonl", "w") as results:
        for index in range(lines):
            results.write(json.dumps({"id": f"j{index}"}) + "\n")
    return folder


def test_a_results_file_of_tiny_lines_is_read_a_line_at_a_time_into_one_pages_worth(tmp_path):
    folder = _tiny_results(tmp_path / "runs", 100_000)
    size = _size(folder)
    peak = _peak("batch", folder)
    assert peak < MULTIPLE * size + OWN, (peak, size)
    page = (folder / "page.html").read_text()
    assert page.count('<tr data-state="') == 10_000 and "90,000 more are in the file, not on this page" in page
    assert len(list((folder / "page_files").iterdir())) == 10_000  # a page for each job the index shows


def test_control_without_the_job_budget_every_line_becomes_a_row(tmp_path):
    folder = _tiny_results(tmp_path / "runs", 20_000)
    size = _size(folder)
    peak = _peak("index", folder, "codeward.view.batches.MOST_JOBS=1000000000")
    assert peak > MULTIPLE * size + OWN, (peak, size)


def test_each_jobs_page_shows_a_bounded_number_of_its_runs_steps(tmp_path, monkeypatch):
    monkeypatch.setattr(run_pages, "MOST_STEPS", 300)
    folder = _tiny_results(tmp_path / "runs", 3)
    for index, steps in enumerate((200, 400, 1000)):
        _steps(folder / f"j{index}.json", {"type": "action"}, steps)
    view = read_batch(folder)
    pages = list(read_jobs(folder, view))
    assert [len(page.run.steps) for page in pages if page.run] == [200, 300, 300]
    assert [page.run.steps_left_off for page in pages if page.run] == [0, 100, 700]
    shown = render_job(pages[2])
    assert shown.count("<article") == 300 and "700 more step(s) are in the run's file" in shown
    assert "<article" not in render_batch(view)  # the index holds no run


def test_odd_lines_and_names_show_as_such_and_never_stop_the_page(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    odd = [
        "[" * 100_000,  # too deep for the parser
        json.dumps({"id": "x" * 100_000, "status": "success"}),
        json.dumps({"id": "nul\0and/slash/../..", "status": {"not": "text"}}),
        json.dumps({"id": ["a", "list"], "status": "error"}),
        json.dumps({"id": ".", "status": "s" * 1000}),
        "\udcff not utf-8".encode("utf-8", "surrogateescape").decode("latin-1"),
        *(f"bad line {index}" for index in range(100)),
    ]
    (folder / "results.jsonl").write_text("\n".join(odd) + "\n", encoding="utf-8")
    (folder / "audit.jsonl").write_text(json.dumps({"job_id": "x" * 100_000}) + "\n{not json\n")
    view = read_batch(folder)
    assert len(view.jobs) == 4 and len(view.bad_lines) == batch_pages.MOST_BAD_LINES
    assert view.bad_lines_left_off == 102 - batch_pages.MOST_BAD_LINES
    assert view.jobs[0].blocks == 1  # the long id's block is counted by its whole id
    assert "the job's id is not a string" in list(read_jobs(folder, view))[2].run_problem
    page = render_batch(view)
    assert "52 more malformed line(s) are not shown" in page and "nul\\x00and/slash" in page
    assert len(page) < 400_000


def test_a_step_with_many_displays_shows_a_few_and_counts_the_rest(tmp_path):
    displays = [{"mime": "text/plain", "text": "hi"}] * 1000
    steps = [{"type": "action", "step_number": 1, "displays": displays}]
    (tmp_path / "run.json").write_text(json.dumps({"steps": steps}))
    page = render_run(tmp_path / "run.json")
    assert page.count("Displayed text/plain") == 20 and "Not shown: 980 more display(s)" in page
