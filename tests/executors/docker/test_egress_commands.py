"""--egress on the command line, with real sandboxes: run, batch (and its audit) and the jobs' own lists."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import codeward
from tests.egress.internet import Origin, fetch_code, require_mitmdump

SRC = str(Path(codeward.__file__).parents[1])
HEADER_KEY = ("CW_TEST_EGRESS_KEY", "sk-egress-from-env-93d0")


@pytest.fixture
def server(sandbox_image: str, http_origin: Origin) -> Origin:
    require_mitmdump()
    return http_origin


def _codeward(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": "200", HEADER_KEY[0]: HEADER_KEY[1]}
    return subprocess.run(
        [sys.executable, "-m", "codeward.cli", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def _model(tmp_path: Path, *bodies: str) -> str:
    (tmp_path / "model.yaml").write_text(yaml.safe_dump([f"<code>\n{body}\n</code>" for body in bodies]))
    return "script:model.yaml"


def test_run_reaches_a_listed_host_with_a_header_read_from_the_environment(tmp_path: Path, server: Origin) -> None:
    name = f"localhost:{server.port}"
    model = _model(tmp_path, fetch_code(server.url("/echo?at=run", "localhost")) + "\nfinal_answer(_got)")
    done = _codeward(
        tmp_path,
        *("run", "Fetch.", "--json", "--model", model, "--executor", "docker"),
        *("--egress", name, "--egress", server.entry),
        *("--egress-header", f"{name}:Authorization=Bearer env:{HEADER_KEY[0]}"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["output"] == "/echo?at=run"
    assert server.requests[0].header("Authorization") == f"Bearer {HEADER_KEY[1]}"
    assert HEADER_KEY[1] not in done.stdout + done.stderr


def test_run_without_egress_reaches_nothing(tmp_path: Path, server: Origin) -> None:
    model = _model(tmp_path, fetch_code(server.url("/echo?at=nothing")) + "\nfinal_answer(_got)")
    done = _codeward(tmp_path, "run", "Fetch.", "--json", "--model", model, "--executor", "docker")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["output"].startswith("failed")
    assert server.requests == []


def test_batch_jobs_reach_the_command_lines_list_and_the_audit_records_each_request(
    tmp_path: Path, server: Origin
) -> None:
    body = fetch_code(server.url("/echo?at=listed")) + "\n_first = _got\n" + fetch_code("http://127.0.0.1:9/unlisted")
    model = _model(tmp_path, body + "\nfinal_answer([_first, _got])")
    jobs = [
        {"id": "open", "task": "Fetch."},
        {"id": "narrowed", "task": "Fetch.", "egress": []},
    ]
    (tmp_path / "jobs.jsonl").write_text("".join(json.dumps(job) + "\n" for job in jobs))
    done = _codeward(
        tmp_path,
        *("batch", "jobs.jsonl", "--model", model, "--executor", "docker", "--egress", server.entry),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    results = {record["id"]: record for record in map(json.loads, (tmp_path / "results.jsonl").open())}
    assert results["open"]["output"][0] == "/echo?at=listed"
    assert results["open"]["output"][1].startswith("failed")
    assert results["narrowed"]["output"][0].startswith("failed")
    audit = {record["job_id"]: record for record in map(json.loads, (tmp_path / "audit.jsonl").open())}
    opened = audit["open"]["egress"]
    assert (opened["allowed"], opened["refused"]) == (1, 1)
    assert opened["hosts"] == [server.entry]
    assert (
        opened["not_allowed"][0]["port"] == 9
        and "not on the sandbox's egress list" in opened["not_allowed"][0]["reason"]
    )
    narrowed = audit["narrowed"]["egress"]
    assert (narrowed["allowed"], narrowed["refused"]) == (0, 2)
    assert [request.path for request in server.requests] == ["/echo?at=listed"]


def test_a_jobs_file_cannot_widen_the_list_but_the_command_line_can_consent(tmp_path: Path, server: Origin) -> None:
    model = _model(tmp_path, fetch_code(server.url("/echo?at=job")) + "\nfinal_answer(_got)")
    (tmp_path / "jobs.jsonl").write_text(json.dumps({"id": "a", "task": "Fetch.", "egress": [server.entry]}) + "\n")
    args = ("batch", "jobs.jsonl", "--model", model, "--executor", "docker")
    refused = _codeward(tmp_path, *args)
    assert refused.returncode == 2 and "--allow-job-egress" in " ".join(refused.stderr.split())
    assert not (tmp_path / "results.jsonl").exists()
    done = _codeward(tmp_path, *args, "--allow-job-egress")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((tmp_path / "results.jsonl").read_text())["output"] == "/echo?at=job"


def test_each_mcp_session_sandbox_gets_the_serves_egress_list(server: Origin) -> None:
    mcp_server = pytest.importorskip("codeward.mcp.server")
    options = mcp_server.ServeOptions("docker", executor_kwargs={"egress": [server.entry]})
    session = mcp_server.SessionSandbox(options)

    async def call():
        try:
            return await session.run(fetch_code(server.url("/echo?at=mcp")) + "\nprint(_got)")
        finally:
            await session.close()

    answer = asyncio.run(call())
    assert "/echo?at=mcp" in answer.content[0].text
