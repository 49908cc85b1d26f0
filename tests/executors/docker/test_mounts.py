"""Host folders and files mounted into real sandboxes, on runc and gVisor; attacks refused before any container.

Folders a test mounts are its own temporary ones, opened to the sandbox's uid by the test itself
(codeward never changes a mount's mode): read for a read-only mount, write for a writable one.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
import yaml

import codeward
from codeward.executors import DockerExecutor, Mount, SandboxPool
from codeward.executors.base import ExecutionError
from codeward.executors.docker.sandbox import sandbox_ids

SRC = str(Path(codeward.__file__).parents[1])


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """A host folder the sandbox may read: a file in it, and the folder opened to every uid for reading."""
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "input.txt").write_text("from the host")
    folder.chmod(0o755)
    tmp_path.chmod(0o755)
    return folder


@pytest.fixture
def writable(tmp_path: Path) -> Path:
    """A host folder the sandbox's uid owns, as a user who lets the sandbox write would make it."""
    folder = tmp_path / "out"
    folder.mkdir()
    uid, gid = sandbox_ids()
    if os.getuid() == 0:
        os.chown(folder, uid, gid)
    return folder


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every container this process asks the engine to create (`run` creates too; other users of the engine aside)."""
    from docker.models.containers import ContainerCollection

    calls: list[Any] = []
    original = ContainerCollection.create

    def recorded(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ContainerCollection, "create", recorded)
    return calls


def mounting(client: docker.DockerClient, folder: Path) -> list[str]:
    """The containers on the engine that mount anything inside `folder` (a test's own folder)."""
    found = []
    for container in client.containers.list(all=True, ignore_removed=True):
        sources = [mount.get("Source", "") for mount in container.attrs.get("Mounts", [])]
        if any(source == str(folder) or source.startswith(f"{folder}/") for source in sources):
            found.append(container.id)
    return found


def test_a_read_only_mount_is_read_and_cannot_be_written(runtime: str | None, sandbox_image: str, shared: Path) -> None:
    single = shared / "input.txt"
    shared.chmod(0o777)  # anyone may write it: only the mount's mode stops the sandbox
    single.chmod(0o666)
    with DockerExecutor(
        image=sandbox_image, runtime=runtime, mounts={"/data": str(shared), "/home/sandbox/one.txt": str(single)}
    ) as executor:
        assert executor.run("open('/data/input.txt').read()").output == "from the host"
        assert executor.run("open('/home/sandbox/one.txt').read()").output == "from the host"
        for code in (
            "open('/data/new.txt', 'w').write('x')",
            "open('/data/input.txt', 'a').write('x')",
            "import os; os.remove('/data/input.txt')",
            "open('/home/sandbox/one.txt', 'w').write('x')",
        ):
            with pytest.raises(ExecutionError) as refused:
                executor.run(code)
            assert "Errno 30" in refused.value.message  # EROFS: the mount, not the file's mode
        assert executor.mount_modes == {"/data": "ro", "/home/sandbox/one.txt": "ro"}
    assert sorted(os.listdir(shared)) == ["input.txt"]
    assert single.read_text() == "from the host"


def test_a_writable_mount_is_written_and_the_host_sees_it(
    runtime: str | None, sandbox_image: str, writable: Path
) -> None:
    """The control of the read-only test: the same writes with mode="rw" reach the host's folder."""
    with DockerExecutor(image=sandbox_image, runtime=runtime, mounts={"/out": Mount(str(writable), "rw")}) as executor:
        executor.run("open('/out/result.txt', 'w').write('from the sandbox')")
        assert (writable / "result.txt").read_text() == "from the sandbox"
        # Changes the host makes while the sandbox runs are seen inside it, on gVisor too
        # (runsc shares bind mounts with the host by default: --file-access-mounts=shared).
        assert executor.run("open('/out/result.txt').read()").output == "from the sandbox"
        (writable / "result.txt").write_text("changed on the host")
        (writable / "later.txt").write_text("made on the host")
        assert executor.run("open('/out/result.txt').read()").output == "changed on the host"
        assert executor.run("sorted(__import__('os').listdir('/out'))").output == ["later.txt", "result.txt"]
        assert executor.mount_modes == {"/out": "rw"}
    assert (writable / "result.txt").stat().st_uid == sandbox_ids()[0]


def test_a_writable_mount_its_uid_cannot_write_is_refused_before_a_container(
    sandbox_image: str, shared: Path, started: list[Any]
) -> None:
    if os.getuid() != 0:
        pytest.skip("a host user who is not root runs the sandbox as itself, which may write its own folder")
    with pytest.raises(ValueError, match=f"runs as uid {sandbox_ids()[0]}, which cannot write"):
        DockerExecutor(image=sandbox_image, mounts={"/out": Mount(str(shared), "rw")})
    assert started == []


def _engine_socket() -> str:
    return next(path for path in ("/var/run/docker.sock", "/run/docker.sock") if os.path.exists(path))


@pytest.fixture
def attacks(tmp_path: Path) -> Iterator[dict[str, tuple[dict[str, Any], str]]]:
    """Mounts that would give the host away, with the reason each is refused."""
    (tmp_path / "to-proc").symlink_to("/proc")
    (tmp_path / "to-engine").symlink_to(_engine_socket())
    (tmp_path / "to-run").symlink_to("/run")
    other = tmp_path / "other.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(other))
    own = tmp_path / "own"
    own.mkdir()
    yield {
        "engine socket": ({"/data": _engine_socket()}, "neither a folder nor a regular file"),
        "root": ({"/data": "/"}, "host's root"),
        "proc": ({"/data": "/proc"}, "under the host's /proc"),
        "run (holds the socket)": ({"/data": "/run"}, "holds the Docker engine's socket"),
        "var/run": ({"/data": "/var/run"}, "holds the Docker engine's socket"),
        "link to proc": ({"/data": str(tmp_path / "to-proc")}, "under the host's /proc"),
        "link to the socket": ({"/data": str(tmp_path / "to-engine")}, "neither a folder nor a regular file"),
        "link to run": ({"/data": str(tmp_path / "to-run")}, "holds the Docker engine's socket"),
        "another socket": ({"/data": str(other)}, "neither a folder nor a regular file"),
        "target proc": ({"/proc": str(own)}, "would cover the sandbox's own /proc"),
        "target root": ({"/": str(own)}, "would hide every folder"),
        "target relative": ({"data": str(own)}, "must be absolute"),
        "target dot-dot": ({"/data/../proc": str(own)}, "may not hold"),
        "target ipc folder": ({"/run/codeward": str(own)}, "would cover"),
        "mode": ({"/data": {"source": str(own), "mode": "rwx"}}, "mode must be"),
    }
    server.close()


def test_mounts_that_give_the_host_away_are_refused_before_any_container_starts(
    sandbox_image: str, attacks: dict[str, tuple[dict[str, Any], str]], started: list[Any]
) -> None:
    for name, (mounts, reason) in attacks.items():
        with pytest.raises(ValueError, match=reason):
            DockerExecutor(image=sandbox_image, mounts=mounts)
        with pytest.raises(ValueError, match=reason):
            SandboxPool(size=1, image=sandbox_image, mounts=mounts)
        assert started == [], name


def test_the_control_of_the_attacks_starts_and_reads(sandbox_image: str, tmp_path: Path, started: list[Any]) -> None:
    own = tmp_path / "own"
    own.mkdir()
    (own / "x").write_text("mine")
    own.chmod(0o755)
    tmp_path.chmod(0o755)
    (tmp_path / "link").symlink_to(own)
    with DockerExecutor(image=sandbox_image, mounts={"/data": str(tmp_path / "link")}) as executor:
        assert executor.run("open('/data/x').read()").output == "mine"
    assert len(started) == 1  # the recording sees a container that does start


def test_a_source_swapped_for_a_link_after_the_check_is_refused_at_start(
    docker_client: docker.DockerClient, sandbox_image: str, shared: Path, started: list[Any]
) -> None:
    """A pool starts sandboxes long after its settings were checked: each start checks the mounts again."""
    from codeward.executors.docker.hardening import Hardening
    from codeward.executors.docker.sandbox import sandbox_spec

    spec = sandbox_spec(sandbox_image, Hardening(), docker_client, None, mounts={"/data": str(shared)})
    moved = shared.with_name("moved")
    shared.rename(moved)
    shared.symlink_to("/proc")
    try:
        with pytest.raises(ValueError, match="under the host's /proc"):
            spec.start()
    finally:
        shared.unlink()
        moved.rename(shared)
    assert started == []
    spec.start().remove()  # control: the folder back, the start goes through
    assert len(started) == 1


def test_extra_run_kwargs_cannot_mount(sandbox_image: str, shared: Path) -> None:
    for key in ("volumes", "mounts"):
        with pytest.raises(ValueError, match="use the named argument mounts="):
            DockerExecutor(image=sandbox_image, extra_run_kwargs={key: {str(shared): {"bind": "/x"}}})


def test_a_pools_sandboxes_have_its_mounts(sandbox_image: str, shared: Path) -> None:
    with SandboxPool(size=1, image=sandbox_image, mounts={"/data": str(shared)}) as pool:
        assert pool.wait_until_full(timeout=120)
        for _ in range(2):  # the waiting one, then one started on the spot or refilled
            with DockerExecutor(pool=pool) as executor:
                assert executor.run("open('/data/input.txt').read()").output == "from the host"
                assert executor.mount_modes == {"/data": "ro"}
        with pytest.raises(ValueError, match="give image, limits, docker_client, extra_run_kwargs and mounts"):
            DockerExecutor(pool=pool, mounts={"/data": str(shared)})


# -- the command line -------------------------------------------------------------------------------


def codeward(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codeward.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": SRC, "COLUMNS": "200"},
    )


def _script(folder: Path, code: str) -> None:
    (folder / "model.yaml").write_text(yaml.safe_dump([f"<code>\n{code}\n</code>"]))


def test_run_mounts_and_saves_the_mounts_without_their_host_paths(
    docker_client: docker.DockerClient, sandbox_image: str, shared: Path, tmp_path: Path
) -> None:
    _script(tmp_path, "final_answer(open('/data/input.txt').read())")
    done = codeward(
        "run", "Read it.", "--executor", "docker", "--model", "script:model.yaml", "--mount", f"/data={shared}",
        "--json", "--save", "run.json", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["output"] == "from the host"
    saved = (tmp_path / "run.json").read_text()
    assert json.loads(saved)["codeward_run"]["executor_settings"]["mounts"] == {"/data": "ro"}
    assert str(shared) not in saved


def test_run_refuses_a_mount_for_other_sandboxes_and_a_bad_mount(shared: Path, tmp_path: Path) -> None:
    _script(tmp_path, "final_answer(1)")
    base = ("run", "x", "--model", "script:model.yaml")
    local = codeward(*base, "--mount", f"/data={shared}", cwd=tmp_path)
    assert local.returncode == 2 and "use --executor docker" in local.stderr + local.stdout
    proc = codeward(*base, "--executor", "docker", "--mount", "/data=/proc", cwd=tmp_path)
    assert proc.returncode == 2 and "under the host's /proc" in proc.stderr + proc.stdout


def _jobs(folder: Path, mounts: dict[str, Any] | None) -> None:
    job: dict[str, Any] = {"id": "reader", "task": "Read it.", "model": "script:model.yaml", "executor": "docker"}
    if mounts is not None:
        job["executor_kwargs"] = {"mounts": mounts}
    (folder / "jobs.jsonl").write_text(json.dumps(job) + "\n")
    _script(folder, "final_answer(open('/data/input.txt').read())")


def test_a_jobs_files_mounts_need_the_command_lines_consent(
    docker_client: docker.DockerClient, sandbox_image: str, shared: Path, tmp_path: Path
) -> None:
    batch = tmp_path / "batch"
    batch.mkdir()
    _jobs(batch, {"/data": "../shared"})  # relative: to the jobs file's folder

    refused = codeward("batch", "jobs.jsonl", cwd=batch)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "--allow-job-mounts" in refused.stdout + refused.stderr
    assert not (batch / "results.jsonl").exists()
    executors_only = codeward("batch", "jobs.jsonl", "--allow-job-executors", cwd=batch)
    assert executors_only.returncode == 2 and not (batch / "results.jsonl").exists()
    assert mounting(docker_client, shared) == []

    honoured = codeward("batch", "jobs.jsonl", "--allow-job-mounts", cwd=batch)
    assert honoured.returncode == 0, honoured.stdout + honoured.stderr
    (result,) = [json.loads(line) for line in (batch / "results.jsonl").read_text().splitlines()]
    assert result["status"] == "success" and result["output"] == "from the host"


def test_a_jobs_files_mount_is_checked_even_with_consent(
    docker_client: docker.DockerClient, sandbox_image: str, tmp_path: Path
) -> None:
    _jobs(tmp_path, {"/data": "/run"})
    done = codeward("batch", "jobs.jsonl", "--allow-job-mounts", cwd=tmp_path)
    assert done.returncode == 2 and "holds the Docker engine's socket" in done.stdout + done.stderr
    assert not (tmp_path / "results.jsonl").exists()


def test_batch_mount_reaches_every_docker_job(sandbox_image: str, shared: Path, tmp_path: Path) -> None:
    batch = tmp_path / "batch"
    batch.mkdir()
    _jobs(batch, None)
    done = codeward("batch", "jobs.jsonl", "--executor", "docker", "--mount", f"/data={shared}", cwd=batch)
    assert done.returncode == 0, done.stdout + done.stderr
    (result,) = [json.loads(line) for line in (batch / "results.jsonl").read_text().splitlines()]
    assert result["output"] == "from the host"
    local = codeward("batch", "jobs.jsonl", "--mount", f"/data={shared}", cwd=batch)
    assert local.returncode == 2 and "use --executor docker" in local.stdout + local.stderr


def test_a_gvisor_that_would_keep_writes_from_the_host_is_refused_before_a_container(
    sandbox_image: str, writable: Path, started: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from codeward.executors.docker import sandbox
    from codeward.executors.docker.gvisor import RUNSC_ARGS, RuntimeUnusable

    overlaid = {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": [*RUNSC_ARGS, "--overlay2=all:memory"]}}
    monkeypatch.setattr(sandbox, "_engine_runtimes", lambda client: overlaid)
    with pytest.raises(RuntimeUnusable, match="never reach the host"):
        DockerExecutor(image=sandbox_image, runtime="runsc", mounts={"/out": Mount(str(writable), "rw")})
    assert started == []
