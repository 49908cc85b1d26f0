"""Starting, labelling and removing sandboxes, and reaping those whose owner died."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import uuid
from pathlib import Path

import docker
import pytest

import codeward
from codeward.executors.base import SandboxError
from codeward.executors.docker.executor import DockerExecutor
from codeward.executors.docker.images import BASE_REPOSITORY
from codeward.executors.docker.owners import (
    IPC_DIR_LABEL,
    IPC_DIR_PREFIX,
    OWNER_HOST_LABEL,
    OWNER_PID_LABEL,
    OWNER_STARTED_LABEL,
    SESSION_LABEL,
    list_sandboxes,
    owner_alive,
    process_started,
    reap_orphans,
)
from codeward.executors.docker.sandbox import KernelContainer, start_kernel_container
from tests.executors.docker.containers import UNWATCHED, gone
from tests.executors.docker.kernel_calls import run_code


def test_a_sandbox_is_labelled_with_its_session_and_owner(sandbox: KernelContainer) -> None:
    labels = sandbox.container.labels
    assert labels[SESSION_LABEL] == sandbox.session
    assert labels[OWNER_PID_LABEL] == str(os.getpid())
    assert labels[OWNER_STARTED_LABEL] == process_started(os.getpid())
    assert labels[OWNER_HOST_LABEL] == socket.gethostname()
    assert labels[IPC_DIR_LABEL] == str(sandbox.ipc_dir)
    assert owner_alive(labels)


def test_live_sandboxes_are_listed(docker_client: docker.DockerClient, sandbox: KernelContainer) -> None:
    assert sandbox.container.id in {container.id for container in list_sandboxes(docker_client)}


def test_a_temporary_folder_too_deep_for_unix_sockets_is_a_clear_error(
    docker_client: docker.DockerClient, sandbox_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    monkeypatch.setenv("TMPDIR", str(deep))
    monkeypatch.setattr("tempfile.tempdir", None)  # make tempfile read TMPDIR again
    with pytest.raises(SandboxError, match="point TMPDIR at a shorter one"):
        start_kernel_container(docker_client, sandbox_image)
    assert list(deep.iterdir()) == []


def test_state_persists_between_cells(sandbox: KernelContainer) -> None:
    client = sandbox.client()
    run_code(client, "counter = 41")
    assert run_code(client, "counter += 1\nprint(counter)") == "42\n"


def test_remove_takes_the_container_and_its_folder_and_can_be_repeated(
    docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    started = start_kernel_container(docker_client, sandbox_image)
    assert started.ipc_dir.is_dir() and not gone(docker_client, started.container.id)
    started.remove()
    assert not started.ipc_dir.exists()
    assert gone(docker_client, started.container.id)
    started.remove()


def test_a_kernel_that_cannot_start_fails_fast_and_leaves_nothing(docker_client: docker.DockerClient) -> None:
    base = docker_client.images.list(name=BASE_REPOSITORY)
    if not base:
        pytest.skip("no debootstrap base image here (the sandbox image was built on another base)")
    before = ours(docker_client)
    with pytest.raises(SandboxError, match="exited at start") as raised:
        start_kernel_container(docker_client, base[0].id, ready_timeout=30)  # Python without ipykernel
    assert "No module named ipykernel_launcher" in raised.value.logs
    assert ours(docker_client) <= before


def ours(client: docker.DockerClient) -> set[str]:
    """This process's sandboxes: another suite on the same engine may start and remove its own meanwhile."""
    return {c.id or "" for c in list_sandboxes(client) if c.labels.get(OWNER_PID_LABEL) == str(os.getpid())}


def test_a_missing_image_is_a_clear_error(docker_client: docker.DockerClient) -> None:
    with pytest.raises(SandboxError, match="could not start a sandbox from image 'codeward-no-such-image:0'"):
        start_kernel_container(docker_client, "codeward-no-such-image:0")


OWNER = UNWATCHED + textwrap.dedent(
    """
    import sys, time
    from codeward.executors.docker.images import engine_client
    from codeward.executors.docker.sandbox import start_kernel_container
    started = start_kernel_container(engine_client(), sys.argv[1])
    print(started.container.id, started.ipc_dir, flush=True)
    time.sleep(600)
    """
)


def test_the_reaper_removes_what_a_killed_owner_left_and_spares_live_owners(
    docker_client: docker.DockerClient, sandbox_image: str, sandbox: KernelContainer
) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(codeward.__file__).parents[1])}
    owner = subprocess.Popen([sys.executable, "-c", OWNER, sandbox_image], stdout=subprocess.PIPE, text=True, env=env)
    try:
        container_id, ipc_dir = owner.stdout.readline().split()  # type: ignore[union-attr]
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    assert not gone(docker_client, container_id) and Path(ipc_dir).is_dir()  # SIGKILL ran no cleanup

    removed = reap_orphans(docker_client)

    assert docker_client.containers.get(sandbox.container.id).status == "running"  # ours: owner alive
    assert gone(docker_client, container_id)
    assert not Path(ipc_dir).exists()
    assert len(removed) >= 1


def test_a_reused_pid_does_not_keep_a_container_alive(docker_client: docker.DockerClient, sandbox_image: str) -> None:
    """Labelled with our live pid but another start time: the owner is a different, dead process."""
    labels = {
        SESSION_LABEL: "reused-pid",
        OWNER_HOST_LABEL: socket.gethostname(),
        OWNER_PID_LABEL: str(os.getpid()),
        OWNER_STARTED_LABEL: "another-boot:1",
    }
    elsewhere = {**labels, SESSION_LABEL: "other-host", OWNER_HOST_LABEL: "another-machine", OWNER_PID_LABEL: "1"}
    stale = docker_client.containers.create(sandbox_image, ["true"], labels=labels, network_mode="none")
    foreign = docker_client.containers.create(sandbox_image, ["true"], labels=elsewhere, network_mode="none")
    try:
        removed = reap_orphans(docker_client)
        assert stale.name in removed and gone(docker_client, stale.id)
        assert not gone(docker_client, foreign.id)  # another machine's owner is not ours to judge
    finally:
        for container in (stale, foreign):
            try:
                container.remove(force=True)
            except docker.errors.NotFound:
                pass


def test_reapers_running_at_once_each_finish(docker_client: docker.DockerClient, sandbox_image: str) -> None:
    """Sandboxes start while others reap: two reapers removing the same orphan at once get a 409
    ("removal already in progress") from the engine, which is the other's work, not a failure."""
    labels = {
        OWNER_HOST_LABEL: socket.gethostname(),
        OWNER_PID_LABEL: str(os.getpid()),
        OWNER_STARTED_LABEL: "another-boot:1",
    }
    stale = [
        docker_client.containers.run(
            sandbox_image,
            ["sleep", "60"],
            labels={**labels, SESSION_LABEL: f"racing-{n}"},
            network_mode="none",
            detach=True,
        )
        for n in range(4)
    ]
    failures: list[BaseException] = []

    def reap() -> None:
        try:
            reap_orphans(docker_client)
        except BaseException as error:
            failures.append(error)

    try:
        for _ in range(3):  # the race is narrow: several rounds of eight reapers
            reapers = [threading.Thread(target=reap) for _ in range(8)]
            for reaper in reapers:
                reaper.start()
            for reaper in reapers:
                reaper.join()
        assert not failures, failures
        assert all(gone(docker_client, container.id) for container in stale)
    finally:
        for container in stale:
            try:
                container.remove(force=True)
            except docker.errors.APIError:
                pass


def _dead_owner_labels(session: str, ipc_dir: Path) -> dict[str, str]:
    """Labels that say: a sandbox of this host whose owner (our pid, another start time) is dead."""
    return {
        SESSION_LABEL: session,
        OWNER_HOST_LABEL: socket.gethostname(),
        OWNER_PID_LABEL: str(os.getpid()),
        OWNER_STARTED_LABEL: "another-boot:1",
        IPC_DIR_LABEL: str(ipc_dir),
    }


def _fake_sandbox_folder(how: str, decoy: Path, ours: Path) -> tuple[str, Path, Path]:
    """A session label, the folder a label names, and a file that must survive the reaper.

    `ours` is where codeward would make the folder of a session, `decoy` a folder of its shape elsewhere.
    """
    session = ours.name.removeprefix(IPC_DIR_PREFIX)
    if how == "a folder elsewhere":
        return session, decoy, decoy / "kept"
    if how == "a session that climbs out":
        ours.mkdir()
        climb = "/".join([".."] * len(ours.parent.parts))
        return f"{session}/{climb}{decoy}", decoy, decoy / "kept"
    if how == "a link where its folder would be":
        ours.symlink_to(decoy)
        return session, ours, decoy / "kept"
    ours.mkdir()  # where its folder would be, but another user's
    os.chown(ours, 65534, 65534)
    return session, ours, ours / "kept"


@pytest.mark.parametrize(
    "how", ["a folder elsewhere", "a session that climbs out", "a link where its folder would be", "another user's"]
)
def test_the_reaper_removes_no_folder_that_a_label_names(
    docker_client: docker.DockerClient, sandbox_image: str, tmp_path: Path, how: str
) -> None:
    """Anyone who can reach the engine can label a container as a dead sandbox of ours; the reaper removes
    the container, but only ever a folder it made itself (a real dead sandbox's: the test above)."""
    if how == "another user's" and os.getuid() != 0:
        pytest.skip("needs root to make a folder of another user")
    decoy, ours = (
        tmp_path / f"{IPC_DIR_PREFIX}decoy",
        Path(tempfile.gettempdir()) / f"{IPC_DIR_PREFIX}{uuid.uuid4().hex}",
    )
    decoy.mkdir()
    session, named, kept = _fake_sandbox_folder(how, decoy, ours)
    kept.write_text("not the reaper's")
    bogus = docker_client.containers.create(
        sandbox_image, ["true"], labels=_dead_owner_labels(session, named), network_mode="none"
    )
    try:
        with DockerExecutor(image=sandbox_image) as executor:  # an executor reaps as it starts
            assert executor.run("6 * 7").output == 42
        assert gone(docker_client, bogus.id)
        assert kept.read_text() == "not the reaper's"
    finally:
        if not gone(docker_client, bogus.id):
            bogus.remove(force=True)
        if ours.is_symlink():
            ours.unlink()
        shutil.rmtree(ours, ignore_errors=True)


def test_reaping_while_other_sandboxes_come_and_go_does_not_fail(
    docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    """Workers reap at every start while other workers remove their own containers: a race to survive."""
    import threading

    errors: list[BaseException] = []
    done = threading.Event()

    def churn() -> None:
        try:
            for _ in range(3):
                start_kernel_container(docker_client, sandbox_image).remove()
        except BaseException as error:
            errors.append(error)
        finally:
            done.set()

    thread = threading.Thread(target=churn)
    thread.start()
    rounds = 0
    while not done.is_set():
        reap_orphans(docker_client)
        list_sandboxes(docker_client)
        rounds += 1
    thread.join()
    assert not errors and rounds > 0
