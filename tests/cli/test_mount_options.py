"""--mount on the command line, and a jobs file's mounts: what they become, what they refuse, and consent."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from codeward.batch.jobs import JobDefaults, JobFileError, load_jobs
from codeward.cli.options import mount_settings
from codeward.usage import UsageError
from tests.cli.test_mcp_serve import run_python, stdio_session
from tests.cli.test_terminal_text import docker_engine


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    made = tmp_path / "data"
    made.mkdir()
    (made / "input.txt").write_text("from the host")
    for each in (tmp_path, made):
        os.chmod(each, 0o755)
    return made


def test_mount_options_become_the_docker_executors_checked_mounts(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(folder.parent)
    folder.chmod(0o777)  # the sandbox's uid may write it
    settings = mount_settings("docker", ["/data=data", f"/out={folder}:rw"])
    assert settings == {
        "mounts": {
            "/data": {"source": str(folder.resolve()), "mode": "ro"},
            "/out": {"source": str(folder.resolve()), "mode": "rw"},
        }
    }
    assert mount_settings("local", []) == {}


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["/data=/proc"], "under the host's /proc"),
        (["/proc=."], "would cover the sandbox's own /proc"),
        (["/data"], "write TARGET=SOURCE"),
        (["/data=.", "/data=."], "mounted twice"),
        (["/data=./missing"], "cannot be read"),
    ],
)
def test_a_bad_mount_option_is_a_usage_error(options: list[str], said: str, folder: Path) -> None:
    with pytest.raises(UsageError, match=said):
        mount_settings("docker", options)


@pytest.mark.parametrize("executor", ["local", "jupyter", "e2b"])
def test_mounts_on_another_sandbox_are_refused(executor: str, folder: Path) -> None:
    with pytest.raises(UsageError, match="use --executor docker"):
        mount_settings(executor, [f"/data={folder}"])


def _load(tmp_path: Path, job: dict[str, Any], **defaults: Any) -> list[Any]:
    (tmp_path / "model.yaml").write_text(yaml.safe_dump(["<code>\nfinal_answer(1)\n</code>"]))
    (tmp_path / "jobs.yaml").write_text(yaml.safe_dump([{"id": "a", "task": "T", "model": "script:model.yaml", **job}]))
    return load_jobs(tmp_path / "jobs.yaml", JobDefaults(**defaults))


def test_docker_jobs_get_the_command_lines_mounts_and_others_none(tmp_path: Path, folder: Path) -> None:
    mounts = {"/data": {"source": str(folder), "mode": "ro"}}
    (job,) = _load(tmp_path, {"executor": "docker"}, mounts=mounts)
    assert job.executor_kwargs == {"mounts": mounts}
    (local,) = _load(tmp_path, {}, mounts=mounts)
    assert "mounts" not in local.executor_kwargs


def test_a_jobs_own_mounts_need_consent_and_not_only_executors_consent(tmp_path: Path, folder: Path) -> None:
    job = {"executor": "docker", "executor_kwargs": {"mounts": {"/data": "data"}}}
    for defaults in ({}, {"allow_executors": True}):
        with pytest.raises(JobFileError, match="--allow-job-mounts"):
            _load(tmp_path, job, **defaults)
    (allowed,) = _load(tmp_path, job, allow_mounts=True)
    assert allowed.executor_kwargs == {"mounts": {"/data": {"source": str(folder.resolve()), "mode": "ro"}}}


def test_a_jobs_relative_source_is_taken_from_the_jobs_files_folder(
    tmp_path: Path, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # not the folder a relative source is read from
    folder.chmod(0o777)  # the sandbox's uid may write it
    job = {"executor": "docker", "executor_kwargs": {"mounts": {"/out": {"source": "data", "mode": "rw"}}}}
    (allowed,) = _load(tmp_path, job, allow_mounts=True)
    assert allowed.executor_kwargs["mounts"]["/out"] == {"source": str(folder.resolve()), "mode": "rw"}


@pytest.mark.parametrize(
    ("job", "said"),
    [
        ({"executor": "docker", "executor_kwargs": {"mounts": {"/data": "/run"}}}, "holds the Docker engine's socket"),
        ({"executor": "docker", "executor_kwargs": {"mounts": {"/": "data"}}}, "would hide"),
        ({"executor": "docker", "executor_kwargs": {"mounts": ["/data"]}}, "must map sandbox paths"),
        ({"executor": "local", "executor_kwargs": {"mounts": {"/data": "data"}}}, "only docker sandboxes take mounts"),
    ],
)
def test_a_jobs_mounts_are_checked_even_with_consent(
    tmp_path: Path, folder: Path, job: dict[str, Any], said: str
) -> None:
    with pytest.raises(JobFileError, match=said):
        _load(tmp_path, job, allow_mounts=True, allow_executors=True)


def test_mcp_serve_gives_each_sessions_sandbox_the_mounts(tmp_path: Path, folder: Path) -> None:
    docker_engine()

    async def scenario() -> None:
        async with stdio_session(tmp_path, "--executor", "docker", "--mount", f"/data={folder}") as session:
            text, failed = await run_python(session, "print(open('/data/input.txt').read())")
            assert not failed and "from the host" in text

    anyio.run(scenario)


def test_mcp_serve_refuses_a_mount_for_the_local_sandbox(codeward: Any, folder: Path) -> None:
    done = codeward("mcp", "serve", "--mount", f"/data={folder}")
    assert done.returncode == 2 and "use --executor docker" in " ".join((done.stdout + done.stderr).split())


def test_a_writable_mount_the_sandbox_cannot_write_is_refused_before_anything_runs(
    tmp_path: Path, folder: Path
) -> None:
    from codeward.executors.docker.hardening import sandbox_ids

    if os.getuid() != 0:
        pytest.skip("a host user who is not root runs the sandbox as itself, which may write its own folder")
    uid = sandbox_ids()[0]
    with pytest.raises(UsageError, match=f"runs as uid {uid}, which cannot write"):
        mount_settings("docker", [f"/out={folder}:rw"])
    job = {"executor": "docker", "executor_kwargs": {"mounts": {"/out": {"source": "data", "mode": "rw"}}}}
    with pytest.raises(JobFileError, match=f"runs as uid {uid}, which cannot write"):
        _load(tmp_path, job, allow_mounts=True)
    os.chown(folder, uid, uid)  # control: given to the sandbox's uid, as the message says
    assert mount_settings("docker", [f"/out={folder}:rw"])["mounts"]["/out"]["mode"] == "rw"
    (allowed,) = _load(tmp_path, job, allow_mounts=True)
    assert allowed.executor_kwargs["mounts"]["/out"]["mode"] == "rw"
