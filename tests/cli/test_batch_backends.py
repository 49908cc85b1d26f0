"""The batch backends' seams: Ray stays out of a base install, and misuse is refused with a clear error."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from codeward.batch.runner import BatchOptions, run_batch
from tests.cli.conftest import command_env, write_script


def test_a_base_import_of_the_batch_never_imports_ray() -> None:
    probe = "import sys, codeward.batch.runner, codeward.batch.display, codeward.cli; print('ray' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=command_env(), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_env_without_ray_is_refused(codeward, tmp_path) -> None:
    model = write_script(tmp_path / "m.yaml", "final_answer(1)")
    (tmp_path / "jobs.jsonl").write_text(json.dumps({"id": "a", "task": "t", "model": model}) + "\n")
    done = codeward("batch", "jobs.jsonl", "--env", "OPENAI_API_KEY")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "use it with --ray" in done.stdout + done.stderr
    assert not (tmp_path / "results.jsonl").exists()


def test_an_unknown_backend_is_named_in_the_error(tmp_path) -> None:
    with pytest.raises(ValueError, match=r"unknown batch backend 'spark'.*'ray'"):
        run_batch([], BatchOptions(tmp_path / "results.jsonl", None, 1), backend="spark")


def _ray_servers() -> set[int]:
    """Ray's node processes (raylet, GCS) running on this machine now."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            line = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
        except OSError:
            continue
        if b"/raylet" in line or b"/gcs_server" in line:
            found.add(int(entry.name))
    return found


def test_ray_without_an_address_starts_a_local_cluster_for_the_run_and_stops_it(codeward, tmp_path) -> None:
    before = _ray_servers()
    model = write_script(tmp_path / "m.yaml", "final_answer(6 * 7)")
    jobs = [{"id": f"j{n}", "task": "t", "model": model} for n in range(3)]
    (tmp_path / "jobs.jsonl").write_text("".join(json.dumps(job) + "\n" for job in jobs))
    done = codeward("batch", "jobs.jsonl", "--ray", "--concurrency", "1", timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    results = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in results) == ["j0", "j1", "j2"]
    assert all(r["output"] == 42 and r["node"] and r["attempt"] == 1 for r in results)
    assert "INFO" not in done.stdout + done.stderr  # Ray's own log lines stay out of the terminal
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _ray_servers() - before:
        time.sleep(0.2)
    assert not _ray_servers() - before, "the run's Ray cluster outlived it"


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--job-memory", "2g"], "use them with --ray"),
        (["--ray", "--job-memory", "lots"], "--job-memory must be a size such as 2g or 512m, got 'lots'"),
        (["--ray", "--job-memory", "0"], "--job-memory must be a size such as 2g or 512m, got '0'"),
        (["--ray", "--job-cpus", "0"], "--job-cpus must be a positive number of CPUs, got 0.0"),
    ],
)
def test_what_a_job_asks_of_ray_is_checked_before_anything_runs(codeward, tmp_path, options, said) -> None:
    model = write_script(tmp_path / "m.yaml", "final_answer(1)")
    (tmp_path / "jobs.jsonl").write_text(json.dumps({"id": "a", "task": "t", "model": model}) + "\n")
    done = codeward("batch", "jobs.jsonl", *options)
    assert done.returncode == 2, done.stdout + done.stderr
    assert said in done.stdout + done.stderr
    assert not (tmp_path / "results.jsonl").exists()
