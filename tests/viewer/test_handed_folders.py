"""A batch folder or a saved run a user was handed, with links planted in it: ``codeward view`` reads
nothing through them and writes nothing through them, and what it writes is its owner's only. Each
attack runs the real command; each control turns the one guard off and shows the harm it stops."""

from __future__ import annotations

import json
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path

import pytest
import yaml

from codeward import handed_files
from codeward.view import pages, read_batch, read_jobs, render_batch, render_job, write_view
from tests.cli.conftest import SAMPLE_TOOLS, code
from tests.viewer.conftest import JOBS, _codeward

KEY = "ssh-ed25519 AAAA-the-users-own-key"
SECRET = "API_KEY=sk-live-not-for-the-page"


@pytest.fixture
def copy(batch_folder: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "handed"
    shutil.copytree(batch_folder, folder)
    return folder


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The user's own files, outside the handed folder."""
    folder = tmp_path / "home"
    folder.mkdir()
    (folder / "authorized_keys").write_text(KEY + "\n")
    (folder / "secrets.env").write_text(SECRET + "\n")
    steps = [{"type": "task", "task": SECRET}, {"type": "action", "step_number": 1, "observations": SECRET}]
    (folder / "other_run.json").write_text(json.dumps({"steps": steps}))
    return folder


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_the_page_replaces_a_planted_link_instead_of_writing_through_it(copy, home, saved_run, tmp_path):
    (copy / "index.html").symlink_to(home / "authorized_keys")
    done = _codeward(copy, "view", "--runs", str(copy))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (home / "authorized_keys").read_text() == KEY + "\n"
    page = copy / "index.html"
    assert not page.is_symlink() and "<table" in page.read_text() and _mode(page) == 0o600
    run = tmp_path / "run" / "run.json"
    run.parent.mkdir()
    shutil.copy(saved_run, run)
    (run.parent / "run.html").symlink_to(home / "authorized_keys")
    done = _codeward(run.parent, "view", "run.json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (home / "authorized_keys").read_text() == KEY + "\n" and _mode(run.parent / "run.html") == 0o600


def _plain_write(path: Path, data: bytes | Iterable[bytes], folder: int | None = None) -> None:
    """A write that follows a link at its name, as ``open(path, "w")`` does."""
    target = Path(path) if folder is None else Path(f"/proc/self/fd/{folder}") / path
    target.write_bytes(data if isinstance(data, bytes) else b"".join(data))


def test_control_a_plain_write_puts_the_page_into_the_users_file(copy, home, monkeypatch):
    monkeypatch.setattr(pages, "write_fresh", _plain_write)
    (copy / "index.html").symlink_to(home / "authorized_keys")
    write_view(copy, batch=True)
    assert "<table" in (home / "authorized_keys").read_text()


def test_a_job_page_planted_as_a_link_is_replaced_and_the_folder_of_pages_must_be_a_folder(copy, home):
    (copy / "index_files").mkdir()
    (copy / "index_files" / "job-04.html").symlink_to(home / "authorized_keys")
    done = _codeward(copy, "view", "--runs", str(copy))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (home / "authorized_keys").read_text() == KEY + "\n"
    page = copy / "index_files" / "job-04.html"
    assert not page.is_symlink() and "&lt;script&gt;window.__pwned=1" in page.read_text() and _mode(page) == 0o600
    shutil.rmtree(copy / "index_files")
    (copy / "index_files").symlink_to(home)
    done = _codeward(copy, "view", "--runs", str(copy))
    assert done.returncode == 2 and "index_files is a symbolic link" in " ".join(done.stderr.split()), done.stderr
    assert sorted(path.name for path in home.iterdir()) == ["authorized_keys", "other_run.json", "secrets.env"]


def test_control_following_a_link_at_the_folder_of_pages_writes_them_outside(copy, home, monkeypatch):
    monkeypatch.setattr(handed_files, "_NO_FOLLOW", 0)
    (copy / "index_files").symlink_to(home)
    write_view(copy, batch=True)
    assert (home / "job-04.html").is_file()


def test_a_job_page_left_as_a_link_is_written_through_by_a_plain_write(copy, home, monkeypatch):
    """The control of the job page's link: a plain write follows it into the user's file."""
    monkeypatch.setattr(pages, "write_fresh", _plain_write)
    (copy / "index_files").mkdir()
    (copy / "index_files" / "job-04.html").symlink_to(home / "authorized_keys")
    write_view(copy, batch=True)
    assert "&lt;script&gt;window.__pwned=1" in (home / "authorized_keys").read_text()


def test_a_results_file_that_is_a_link_is_refused_by_name(copy, home):
    (copy / "results.jsonl").unlink()
    (copy / "results.jsonl").symlink_to(home / "secrets.env")
    done = _codeward(copy, "view", "--runs", str(copy))
    assert done.returncode == 2 and "results.jsonl is a symbolic link" in " ".join(done.stderr.split()), done.stderr
    assert SECRET not in done.stdout + done.stderr and not (copy / "index.html").exists()


def test_control_following_the_link_shows_the_outside_file_on_the_page(copy, home, monkeypatch):
    monkeypatch.setattr(handed_files, "_NO_FOLLOW", 0)
    (copy / "results.jsonl").unlink()
    (copy / "results.jsonl").symlink_to(home / "secrets.env")
    assert SECRET in render_batch(copy)


def test_a_jobs_run_that_is_a_link_shows_as_refused_and_the_page_goes_on(copy, home):
    (copy / "job-00.json").unlink()
    (copy / "job-00.json").symlink_to(home / "other_run.json")
    (copy / "audit.jsonl").rename(copy / "audit.real")
    (copy / "audit.jsonl").symlink_to(home / "secrets.env")
    done = _codeward(copy, "view", "--runs", str(copy))
    assert done.returncode == 0, done.stdout + done.stderr
    page = (copy / "index.html").read_text()
    assert "audit.jsonl is a symbolic link" in page and page.count('<tr data-state="') == JOBS
    job_pages = sorted((copy / "index_files").iterdir())
    assert len(job_pages) == JOBS and not any(SECRET in path.read_text() for path in [copy / "index.html", *job_pages])
    assert "job-00.json is a symbolic link" in (copy / "index_files" / "job-00.html").read_text()
    assert sum(page.run is not None for page in read_jobs(copy, read_batch(copy))) == JOBS - 1


def test_control_following_a_runs_link_shows_the_outside_run(copy, home, monkeypatch):
    monkeypatch.setattr(handed_files, "_NO_FOLLOW", 0)
    (copy / "job-00.json").unlink()
    (copy / "job-00.json").symlink_to(home / "other_run.json")
    (job,) = [page for page in read_jobs(copy, read_batch(copy)) if page.row.id == "job-00"]
    assert SECRET in render_job(job)


def test_a_saved_run_named_through_a_link_is_refused(saved_run, home, tmp_path):
    (tmp_path / "run.json").symlink_to(home / "other_run.json")
    done = _codeward(tmp_path, "view", "run.json")
    assert done.returncode == 2 and "run.json is a symbolic link" in " ".join(done.stderr.split()), done.stderr


def test_what_the_commands_write_is_the_owners_only(saved_run, batch_folder):
    """A saved run, a batch's results, audit and runs, and a page: each may hold a secret value."""
    written = [saved_run, *batch_folder.iterdir()]
    assert {path.name for path in written} >= {"run.json", "results.jsonl", "audit.jsonl", "job-00.json"}
    assert {path.name: _mode(path) for path in written if path.suffix != ".html"} == {
        path.name: 0o600 for path in written if path.suffix != ".html"
    }


def test_long_and_odd_job_ids_get_their_runs_saved_and_shown(tmp_path):
    """Ids that cannot be file names as they are: each job's run is saved under a short, safe name inside
    the runs folder, and the page finds it."""
    ids = ["x" * 300, "../../outside", ".hidden", "a b/c", "ü" * 200]
    (tmp_path / "model.yaml").write_text(yaml.safe_dump([code("final_answer(double(2))")]))
    with open(tmp_path / "jobs.jsonl", "w") as jobs:
        for job_id in ids:
            jobs.write(json.dumps({"id": job_id, "task": "Double."}) + "\n")
    done = _codeward(
        tmp_path, "batch", "jobs.jsonl", "--model", "script:model.yaml", "--tools", SAMPLE_TOOLS, "--runs", "runs"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    saved = [path for path in (tmp_path / "runs").iterdir() if path.name not in ("results.jsonl", "audit.jsonl")]
    assert len(saved) == len(ids) and not (tmp_path / "outside.json").exists()
    assert all(len(path.name) <= 140 and not path.name.startswith(".") for path in saved)
    done = _codeward(tmp_path, "view", "--runs", "runs")
    assert done.returncode == 0, done.stdout + done.stderr
    view = read_batch(tmp_path / "runs")
    shown = list(read_jobs(tmp_path / "runs", view))
    assert [page.run is not None for page in shown] == [True] * len(ids), [page.run_problem for page in shown]
    (long,) = [job.id for job in view.jobs if job.id.startswith("x")]
    assert long.startswith("x" * 200) and "100 more characters" in long and len(long) < 300  # shown cut


def test_control_without_the_length_rule_a_long_ids_run_is_lost(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "results.jsonl").write_text(json.dumps({"id": "x" * 300, "status": "success"}) + "\n")
    monkeypatch.setattr(handed_files, "MOST_NAME_CHARACTERS", 10**6)
    (job,) = read_jobs(runs, read_batch(runs))
    assert job.run is None and "no run was saved" in job.run_problem
