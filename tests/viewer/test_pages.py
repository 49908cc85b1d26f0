"""The viewer's pages as HTML: what a saved run and a batch folder show, escaped, and what is refused."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

from codeward.executors.displays import Display
from codeward.platform.memory import AgentMemory
from codeward.view import SHOWN_CHARACTERS, SHOWN_LINES, read_batch, read_jobs, render_batch, render_job, render_run
from codeward.view.pages import cut
from tests.cli.conftest import command, command_env
from tests.viewer.conftest import HOSTILE_IMAGE, HOSTILE_PRINT, JOBS, LONG_LINES, _codeward, expected_state

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


class _Tags(HTMLParser):
    """The page's elements as a browser's parser sees them: (tag, attributes)."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def all(self, tag: str) -> list[dict[str, str | None]]:
        return [attrs for name, attrs in self.tags if name == tag]


def _run_file(path: Path, action: dict) -> Path:
    """A run file as a stranger could hand one over: one task and one action step."""
    steps = [{"type": "task", "task": "t"}, {"type": "action", "step_number": 1, **action}]
    path.write_text(json.dumps({"steps": steps}), encoding="utf-8")
    return path


def test_a_saved_run_shows_its_steps_code_image_and_error_with_every_text_escaped(saved_run):
    page = render_run(saved_run)
    tags = _Tags(page)
    scripts = tags.all("script")
    assert scripts == [], "a run page needs no script of its own, and none of the run's may appear"
    assert [attrs["class"] for attrs in tags.all("article")] == ["step"] * 2 + ["step failed"] + ["step"]
    images = tags.all("img")
    assert len(images) == 1 and (images[0]["src"] or "").startswith("data:image/png;base64,iVBORw0KGgo")
    assert "onerror" not in json.dumps(tags.tags)  # the model's <img> is text, never an element
    assert HOSTILE_PRINT not in page and HOSTILE_IMAGE not in page
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page
    assert "ZeroDivisionError" in page and "&lt;b&gt;done&lt;/b&gt;" in page
    assert '<span class="nb">print</span>' in page  # the code is highlighted
    nonce = re.search(r"style-src 'nonce-([^']+)'", page)
    assert nonce and f'<style nonce="{nonce.group(1)}">' in page and "img-src data:;" in page


def test_a_long_output_shows_its_first_lines_and_the_rest_one_click_away(saved_run):
    page = render_run(saved_run)
    assert "show the other" in page and "<details" in page
    shown, rest = cut("".join(f"line {i}\n" for i in range(LONG_LINES)))
    assert shown.count("\n") == SHOWN_LINES and rest.startswith(f"line {SHOWN_LINES}\n")
    shown, rest = cut("x" * (SHOWN_CHARACTERS + 5))
    assert len(shown) == SHOWN_CHARACTERS and rest == "xxxxx"
    assert cut("short") == ("short", "")


def test_only_raster_images_whose_bytes_match_their_type_are_embedded(tmp_path):
    svg = b'<svg xmlns="http://www.w3.org/2000/svg" onload="window.__pwned=1"/>'
    displays = [
        {"mime": "image/png", "base64": base64.b64encode(PNG).decode()},
        {"mime": "image/svg+xml", "base64": base64.b64encode(svg).decode()},
        {"mime": "image/png", "base64": base64.b64encode(b"<html><script>x()</script>").decode()},
        {"mime": "text/html", "text": "<script>window.__pwned=1</script>"},
        {"mime": "image/png", "base64": "not base64 at all!"},
        "a display that is not a record",
    ]
    page = render_run(_run_file(tmp_path / "run.json", {"code_action": "1", "displays": displays}))
    images = _Tags(page).all("img")
    assert [attrs["src"] for attrs in images] == [f"data:image/png;base64,{base64.b64encode(PNG).decode()}"]
    assert "image/svg+xml display of" in page and "only PNG, JPEG, GIF and WebP images are shown" in page
    assert "Displayed text/html (shown as text)" in page and "&lt;script&gt;window.__pwned=1" in page
    assert page.count("a display that is not a record of a MIME type and its data") == 2
    assert "<svg" not in page  # a run page draws no SVG, and the display's is not one


def test_a_run_file_of_odd_values_renders_them_as_text(tmp_path):
    weird = {
        "step_number": "one",
        "code_action": ["not", "text"],
        "observations": "bidi \u202e override, a lone \ud800 surrogate, an escape \x1b[31m",
        "timing": {"duration": "slow"},
        "token_usage": {"input_tokens": True},
        "error": "not a record",
    }
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"steps": [{"type": "action", **weird}, 7, {"type": "mystery"}]}), encoding="utf-8")
    page = render_run(path)
    page.encode("utf-8")  # a lone surrogate would fail here
    assert "\\u202e override" in page and "\\ud800 surrogate" in page and "\\x1b[31m" in page
    assert "Step ?" in page and page.count("A malformed step") == 2
    # The list shows as its JSON text, highlighted (Pygments 2.21 stopped escaping quotes in text).
    assert re.search(r"(&quot;|\")not(&quot;|\")</span>", page)


def test_the_batch_folder_table_counts_and_time_split(batch_folder):
    view = read_batch(batch_folder)
    assert len(view.jobs) == JOBS and not view.bad_lines and not view.audit_note
    for job in view.jobs:
        assert job.state == expected_state(job.id), job
    pages = list(read_jobs(batch_folder, view))
    assert [page.row for page in pages] == view.jobs
    for page in pages:
        assert page.run is not None and page.run.steps, page.run_problem
    waited = [job for job in view.jobs if job.tool_calls == 2]  # stubborn_wait and double
    assert len(waited) == JOBS // 5
    for job in waited:
        assert job.time["tools"] >= 0.1 and job.time["sandbox"] >= 0.05, job.time
        assert abs(sum(job.time.values()) - (job.duration or 0)) < 0.01, job.time
    totals = view.time_totals
    assert set(totals) == {"model", "sandbox", "tools", "setup"} and totals["tools"] >= 0.1 * len(waited)
    page = render_batch(view)
    assert page.count('<tr data-state="') == JOBS and "<article" not in page  # the runs are on their own pages
    links = [attrs["href"] for attrs in _Tags(page).all("a")]
    assert {f"index_files/{job.id}.html" for job in view.jobs} <= set(links), links
    scripts = _Tags(page).all("script")
    nonce = re.search(r"script-src 'nonce-([^']+)'", page)
    assert nonce and scripts == [{"nonce": nonce.group(1)}]
    hostile = render_job(next(page for page in pages if page.row.id == "job-04"))
    assert HOSTILE_PRINT not in hostile and "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in hostile
    assert (
        _Tags(hostile).all("script") == [] and ("a", {"id": "all-jobs", "href": "../index.html"}) in _Tags(hostile).tags
    )


def test_malformed_results_lines_and_missing_runs_are_shown_as_such(batch_folder, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(batch_folder, folder)
    (folder / "job-00.json").unlink()
    (folder / "job-01.json").write_text("{ torn", encoding="utf-8")
    with open(folder / "results.jsonl", "a", encoding="utf-8") as results:
        results.write('{"id": "job-99", "status": "succ\n[1, 2]\n{"no id": 1}\n')
    with open(folder / "audit.jsonl", "a", encoding="utf-8") as audit:
        audit.write("not json\n")
    view = read_batch(folder)
    assert [line.number for line in view.bad_lines] == [JOBS + 1, JOBS + 2, JOBS + 3]
    assert view.bad_lines[0].reason.startswith("not JSON") and view.bad_lines[1].reason == "not a record with 'id'"
    assert "1 line of audit.jsonl could not be read" in view.audit_note
    assert "the run ended during it, as when the model's call fails" in render_run(folder / "job-03.json")
    by_id = {page.row.id: page for page in read_jobs(folder, view)}
    assert "no run was saved for this job (job-00.json)" in by_id["job-00"].run_problem
    assert "job-01.json is not JSON" in by_id["job-01"].run_problem
    page = render_batch(view)
    assert "Lines of the results file that are not job records" in page and "Line 52: not a record" in page


def test_saved_runs_keep_what_the_code_displayed(saved_run):
    memory = AgentMemory.load(saved_run)
    displays = [shown for step in memory.action_steps() for shown in step.displays]
    assert (
        len(displays) == 1 and displays[0].mime == "image/png" and displays[0].describe() == "[image/png image, 40x30]"
    )
    assert Display.from_dict(displays[0].to_dict()) == displays[0]
    assert Display.from_dict({"mime": "text/plain", "text": "hi"}) == Display("text/plain", "hi")
    assert Display.from_dict({"mime": "image/png", "base64": "%%%"}) is None and Display.from_dict([]) is None


def test_the_command_writes_each_page_where_asked_and_says_what_it_expected(saved_run, batch_folder, tmp_path):
    folder = saved_run.parent
    done = _codeward(folder, "view", "run.json")
    assert done.returncode == 0 and (folder / "run.html").is_file(), done.stdout + done.stderr
    done = _codeward(folder, "view", "--runs", str(batch_folder), "-o", str(tmp_path / "batch.html"))
    assert done.returncode == 0 and "<table" in (tmp_path / "batch.html").read_text(), done.stdout + done.stderr
    assert 'href="batch_files/job-00.html"' in (tmp_path / "batch.html").read_text()
    assert len(list((tmp_path / "batch_files").glob("job-*.html"))) == JOBS
    (tmp_path / "memo.json").write_text('{"not": "a run"}', encoding="utf-8")
    for args, expected in [
        (["view", "missing.json"], "missing.json is not a file: expected a run saved by codeward run --save"),
        (["view", "memo.json"], "memo.json is not a run saved by codeward run --save"),
        (["view", str(tmp_path)], "use codeward view --runs"),
        (["view", "--runs", str(tmp_path)], "holds no results.jsonl: expected the folder a codeward batch --runs DIR"),
        (["view"], "takes a saved run (codeward view RUN.json) or a batch's folder"),
    ]:
        done = _codeward(tmp_path, *args)
        assert done.returncode == 2 and expected in " ".join(done.stderr.split()), (args, done.stderr)


def test_open_hands_the_written_page_to_the_users_browser(saved_run, tmp_path):
    browser = f"{sys.executable} -c 'import pathlib, sys; pathlib.Path(\"opened.txt\").write_text(sys.argv[1])' %s"
    done = subprocess.run(
        command("view", str(saved_run), "-o", "page.html", "--open"),
        capture_output=True,
        text=True,
        env=command_env(BROWSER=browser),
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "opened.txt").read_text() == (tmp_path / "page.html").resolve().as_uri()


def test_a_jobs_egress_counts_are_shown_and_odd_ones_not_counted(batch_folder, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(batch_folder, folder)
    with open(folder / "audit.jsonl", "a", encoding="utf-8") as audit:
        for summary in (
            {"allowed": 3, "refused": 1, "failed": 0},
            {"allowed": 2, "refused": "many", "failed": True},  # not numbers: not counted
            {"allowed": 10**40},
            ["allowed", 5],
        ):
            audit.write(json.dumps({"job_id": "job-02", "tool_calls": [], "egress": summary}) + "\n")
    view = read_batch(folder)
    job = {job.id: job for job in view.jobs}["job-02"]
    assert dict(job.egress) == {"allowed": 5, "refused": 1, "failed": 0}
    (page,) = [page for page in read_jobs(folder, view) if page.row is job]
    assert "egress: 5 allowed, 1 refused, 0 failed" in render_job(page)
