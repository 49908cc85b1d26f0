"""MCP servers given to `codeward batch` and `codeward replay` with --mcp: the command line starts them,
never a file, and none outlives the command.

The server is the test suite's real one (tests/mcp_server), started on stdio by the command under test.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import children, command, command_env, write_script

ROOT = Path(__file__).resolve().parents[2]
#: The server gets a minimal environment, so it names the folder it is imported from itself.
SERVER = f"env PYTHONPATH={ROOT} {sys.executable} -m tests.mcp_server"


def codeward(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command(*args), capture_output=True, text=True, env=command_env(), cwd=folder, timeout=180)


def said(done: subprocess.CompletedProcess[str]) -> str:
    """What the command printed, unwrapped: the terminal breaks long lines."""
    return " ".join((done.stdout + done.stderr).split())


def server_processes() -> list[int]:
    """The test MCP servers still running under this test process."""
    found = []
    for pid in children(os.getpid()):
        try:
            if b"tests.mcp_server" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


def write_jobs(folder: Path, *jobs: dict) -> None:
    (folder / "jobs.jsonl").write_text("".join(json.dumps(job) + "\n" for job in jobs))


def test_batch_jobs_call_an_mcp_servers_tools_from_workers_that_each_keep_one_server(tmp_path: Path) -> None:
    model = write_script(tmp_path / "model.yaml", "final_answer([add(n, 10), pid()])")
    write_jobs(tmp_path, *({"id": f"job-{n}", "task": "Add ten.", "additional_args": {"n": n}} for n in range(3)))
    done = codeward(tmp_path, "batch", "jobs.jsonl", "--model", model, "--mcp", SERVER, "--concurrency", "2")
    assert done.returncode == 0, said(done)
    results = {r["id"]: r for r in map(json.loads, (tmp_path / "results.jsonl").read_text().splitlines())}
    assert {job_id: result["output"][0] for job_id, result in results.items()} == {
        "job-0": 10,
        "job-1": 11,
        "job-2": 12,
    }
    assert len({result["output"][1] for result in results.values()}) <= 2  # one server per worker, not per job
    assert server_processes() == []


def test_a_job_selects_mcp_tools_by_name_and_an_unknown_name_is_refused_before_anything_runs(tmp_path: Path) -> None:
    model = write_script(tmp_path / "model.yaml", "final_answer(add(1, 2))")
    write_jobs(tmp_path, {"id": "a", "task": "T", "tools": ["add"]}, {"id": "b", "task": "T", "tools": ["multiply"]})
    done = codeward(tmp_path, "batch", "jobs.jsonl", "--model", model, "--mcp", SERVER)
    assert done.returncode == 2 and "no tool named 'multiply' among those --tools loads or --mcp serves" in said(done)
    assert not (tmp_path / "results.jsonl").exists() or not (tmp_path / "results.jsonl").read_text()
    write_jobs(tmp_path, {"id": "a", "task": "T", "tools": ["add"]})
    done = codeward(tmp_path, "batch", "jobs.jsonl", "--model", model, "--mcp", SERVER)
    assert done.returncode == 0, said(done)
    assert json.loads((tmp_path / "results.jsonl").read_text())["output"] == 3
    assert server_processes() == []


def test_a_jobs_file_cannot_start_an_mcp_server(tmp_path: Path) -> None:
    marker = tmp_path / "started.marker"
    model = write_script(tmp_path / "model.yaml", "final_answer(1)")
    write_jobs(tmp_path, {"id": "a", "task": "T", "mcp": [f"touch {marker}"]})
    done = codeward(tmp_path, "batch", "jobs.jsonl", "--model", model)
    assert done.returncode == 2, said(done)
    assert "field 'mcp': a jobs file cannot start an MCP server: pass --mcp COMMAND" in said(done)
    assert not marker.exists()


def test_a_server_that_cannot_start_stops_the_batch_before_any_job(tmp_path: Path) -> None:
    model = write_script(tmp_path / "model.yaml", "final_answer(1)")
    write_jobs(tmp_path, {"id": "a", "task": "T"})
    done = codeward(tmp_path, "batch", "jobs.jsonl", "--model", model, "--mcp", f"{sys.executable} -m no_such_module")
    assert done.returncode == 2 and "--mcp" in said(done) and "cannot connect" in said(done)


def test_a_run_saved_with_an_mcp_server_names_its_flag_and_replays_with_it(tmp_path: Path) -> None:
    model = write_script(tmp_path / "model.yaml", "total = add(2, 3)\nprint(total)", "final_answer(total * 10)")
    done = codeward(tmp_path, "run", "Add.", "--mcp", SERVER, "--model", model, "--save", "run.json")
    assert done.returncode == 0, said(done)
    sources = json.loads((tmp_path / "run.json").read_text())["codeward_run"]["tool_sources"]
    assert {"name": "add", "server": SERVER} in sources
    for as_recorded in ([], ["--as-recorded"]):  # a server is a process: never started from the file
        done = codeward(tmp_path, "replay", "run.json", *as_recorded)
        assert done.returncode == 2 and "--mcp '" + SERVER + "': for the tool(s) add" in said(done)
    done = codeward(tmp_path, "replay", "run.json", "--mcp", SERVER)
    assert done.returncode == 0 and "replay passed" in said(done), said(done)
    assert server_processes() == []


def test_a_run_file_naming_a_server_starts_nothing_even_as_recorded(tmp_path: Path) -> None:
    model = write_script(tmp_path / "model.yaml", "final_answer(add(2, 3))")
    assert codeward(tmp_path, "run", "Add.", "--mcp", SERVER, "--model", model, "--save", "run.json").returncode == 0
    marker = tmp_path / "started.marker"
    run = json.loads((tmp_path / "run.json").read_text())
    run["codeward_run"]["tool_sources"] = [{"name": "add", "server": f"touch {marker}", "spec": "os:system"}]
    (tmp_path / "run.json").write_text(json.dumps(run))
    done = codeward(tmp_path, "replay", "run.json", "--as-recorded")
    assert done.returncode == 2 and "--mcp 'touch " in said(done)
    assert not marker.exists()


def test_batch_runs_record_the_server_of_each_mcp_tool(tmp_path: Path) -> None:
    model = write_script(tmp_path / "model.yaml", "final_answer(add(1, 1))")
    write_jobs(tmp_path, {"id": "a", "task": "T"})
    done = codeward(tmp_path, "batch", "jobs.jsonl", "--model", model, "--mcp", SERVER, "--runs", "runs")
    assert done.returncode == 0, said(done)
    done = codeward(tmp_path, "replay", "runs/a.json", "--mcp", SERVER)
    assert done.returncode == 0 and "replay passed" in said(done), said(done)
    assert server_processes() == []


def test_the_readmes_mcp_example_runs_from_the_checkout_and_leaves_nothing_in_it() -> None:
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("On the command line, `--mcp` starts a server") :]
    script = re.findall(r"```bash\n(.*?)```", section, re.S)[0]
    script = re.sub(r"(?m)^pip install .*\n", "", script)  # installed already
    script = "set -e\n" + re.sub(r"(?m)^codeward ", f"{sys.executable} -m codeward.cli ", script)
    before = _untracked(root)
    env = command_env()
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])  # as an active venv
    done = subprocess.run(["bash", "-c", script], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Final answer: 5" in done.stdout, done.stdout
    assert _untracked(root) == before


def _untracked(root: Path) -> set[str]:
    listed = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=root, capture_output=True, text=True
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout: nothing to compare the folder with")
    return {line for line in listed.stdout.splitlines() if line.startswith("??")}
