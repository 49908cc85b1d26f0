"""A batch's pages: an index of its jobs that stays small, and a page per job beside it.

A job's id is a stranger's text: it names the job's page only made safe, inside the folder of
job pages, never the index, and it is escaped wherever it shows. Ten thousand jobs are written
within the issue's bounds (30 s, 500 MB), measured on a real ``codeward view --runs`` in a process
of its own; the index opening in a browser is in ``test_browser.py``.
"""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

from codeward.view import batches, write_view
from tests.viewer.conftest import SCALE_JOBS, _codeward

#: The issue's bounds for writing the pages of ten thousand jobs.
MOST_SECONDS = 30.0
MOST_BYTES = 500 * 2**20
#: What the index may hold a job at most, in bytes: a row, and its bar in the chart.
ROW_BYTES = 700
HOSTILE_ID = "<script>window.__pwned=3</script>"
IDS = ["../../outside", "../index", "index", ".hidden", "a/b", HOSTILE_ID, "Job", "job", "x" * 300, "..", "."]
_SAFE = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*\.html$")


def _results(folder: Path, ids: list[str]) -> Path:
    folder.mkdir(parents=True)
    with open(folder / "results.jsonl", "w", encoding="utf-8") as results:
        for job_id in ids:
            results.write(json.dumps({"id": job_id, "status": "error", "error": f"{job_id} failed\nat length"}) + "\n")
    return folder


def test_ids_name_pages_only_inside_their_folder_never_the_index_and_show_escaped(tmp_path):
    runs = _results(tmp_path / "handed" / "runs", IDS)
    done = _codeward(tmp_path, "view", "--runs", str(runs))
    assert done.returncode == 0, done.stdout + done.stderr
    written = {path for path in tmp_path.rglob("*") if path.is_file()}
    pages = {path.relative_to(runs) for path in written if path.parent == runs / "index_files"}
    assert written == {runs / "results.jsonl", runs / "index.html", *(runs / page for page in pages)}
    assert len(pages) == len(IDS)
    assert all(_SAFE.match(page.name) for page in pages) and len({p.name.lower() for p in pages}) == len(IDS)
    assert stat.S_IMODE((runs / "index_files").stat().st_mode) == 0o700
    index = (runs / "index.html").read_text()
    assert index.count('<tr data-state="error">') == len(IDS) and "<script>window" not in index
    assert "&lt;script&gt;window.__pwned=3&lt;/script&gt;" in index
    links = re.findall(r'<td><a href="index_files/([^"]+)">', index)
    assert {Path("index_files", link) for link in links} == pages
    shown = {}
    for page in pages:
        html = (runs / page).read_text()
        (job,) = re.findall(r'<h1 data-job="([^"]*)">', html)
        shown[job] = html
        assert 'href="../index.html"' in html and "<script" not in html
    hostile = "&lt;script&gt;window.__pwned=3&lt;/script&gt;"
    assert hostile in shown and "at length" in shown[hostile]  # the whole error, on the job's own page
    assert "index" in shown and "../../outside" in shown


def test_control_without_safe_names_an_id_writes_a_page_outside_the_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(batches, "file_name", lambda name, suffix: name + suffix)
    runs = _results(tmp_path / "handed" / "runs", ["../../outside"])
    write_view(runs, batch=True)
    assert (tmp_path / "handed" / "outside.html").is_file()


def test_ten_thousand_jobs_are_written_within_the_bounds_and_the_index_stays_small(many_jobs):
    folder, seconds, peak = many_jobs
    print(f"\n{SCALE_JOBS:,} jobs: {seconds:.1f} s, peak {peak / 2**20:.0f} MiB")
    assert seconds < MOST_SECONDS and peak < MOST_BYTES, (seconds, peak)
    index = (folder / "index.html").read_text()
    print(f"index: {len(index.encode()) / 2**20:.1f} MiB")
    assert index.count('<tr data-state="') == SCALE_JOBS and "more are in the file" not in index
    assert len(index.encode()) < SCALE_JOBS * ROW_BYTES + 100_000 and "<article" not in index
    pages = sorted((folder / "index_files").iterdir())
    assert len(pages) == SCALE_JOBS and pages[0].name == "job-00000.html"
    assert pages[-1].read_text().count("<article") >= 1  # each job's run, on its own page
