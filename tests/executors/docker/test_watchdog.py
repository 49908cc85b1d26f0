"""A sandbox ends with its owner: when the owner is killed, its watchdog removes the container at once.

The owner is a real process that starts a `DockerExecutor` and runs code in it; the attack kills
its whole process group with SIGKILL, which runs no cleanup of the owner's. The control kills an
owner whose sandbox has no watchdog: the container runs on (until the reaper's next pass).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import docker

import codeward
from codeward.executors.docker.owners import IPC_DIR_LABEL, OWNER_PID_LABEL, list_sandboxes
from codeward.executors.docker.sandbox import start_kernel_container
from tests.executors.docker.containers import ADOPTED_BY_THE_TEST, STARTED_BY_LABEL, UNWATCHED, gone

OWNER = textwrap.dedent(
    """
    import sys, time
    from codeward.executors.docker.executor import DockerExecutor
    executor = DockerExecutor(image=sys.argv[1])
    executor.run("x = 1")
    print("ready", flush=True)
    time.sleep(600)
    """
)


def killed_owners_container(client: docker.DockerClient, image: str, script: str) -> tuple[str, str]:
    """Start an owner running `script`, kill its process group with SIGKILL; its container's id and folder."""
    env = {**os.environ, "PYTHONPATH": str(Path(codeward.__file__).parents[1])}
    owner = subprocess.Popen(
        [sys.executable, "-c", script, image], stdout=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "ready"
        [container] = [
            c
            for c in list_sandboxes(client)
            if str(owner.pid) in (c.labels.get(OWNER_PID_LABEL), c.labels.get(STARTED_BY_LABEL))
        ]
    finally:
        os.killpg(owner.pid, signal.SIGKILL)
        owner.wait()
    return container.id or "", container.labels[IPC_DIR_LABEL]


def gone_within(client: docker.DockerClient, container_id: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not gone(client, container_id):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_a_killed_owners_container_is_removed_by_its_watchdog(
    docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    container_id, ipc_dir = killed_owners_container(docker_client, sandbox_image, OWNER)
    assert gone_within(docker_client, container_id, 10)
    assert not Path(ipc_dir).exists()


def test_control_without_a_watchdog_the_container_outlives_its_owner(
    docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    # Adopted by the test process, so that no reaper on the engine (another suite's) removes it meanwhile.
    script = UNWATCHED + ADOPTED_BY_THE_TEST + OWNER
    container_id, _ = killed_owners_container(docker_client, sandbox_image, script)
    try:
        assert not gone_within(docker_client, container_id, 5)
        assert docker_client.containers.get(container_id).status == "running"
    finally:
        docker_client.containers.get(container_id).remove(force=True)


def test_a_sandbox_removed_by_its_owner_lets_its_watchdog_go(
    docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    started = start_kernel_container(docker_client, sandbox_image)
    assert started.watchdog is not None
    process = started.watchdog.process
    assert process.poll() is None and os.getsid(process.pid) == process.pid  # a session of its own
    assert started.remove()
    assert process.poll() == 0 and gone(docker_client, started.container.id or "")
