"""`codeward images build` and `codeward sandboxes ls|prune`, run as a user runs them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import docker

import codeward
from tests.executors.docker.containers import gone
from tests.executors.docker.test_lifecycle import OWNER

SRC = str(Path(codeward.__file__).parents[1])


def codeward_command(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codeward.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": SRC, "COLUMNS": "200", **env},
    )


def test_images_build_finds_the_current_image_and_does_not_rebuild_it(sandbox_image: str) -> None:
    done = codeward_command("images", "build")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(current, not rebuilt)" in done.stdout


def test_sandboxes_ls_shows_an_orphan_and_prune_removes_it(
    docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, sandbox_image],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
    )
    try:
        container_id, _ = owner.stdout.readline().split()  # type: ignore[union-attr]
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    name = docker_client.containers.get(container_id).name

    listed = codeward_command("sandboxes", "ls")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    row = next(line for line in listed.stdout.splitlines() if name in line)
    assert "gone" in row and str(owner.pid) in row

    pruned = codeward_command("sandboxes", "prune")
    assert pruned.returncode == 0 and name in pruned.stdout
    assert gone(docker_client, container_id)
    assert name not in codeward_command("sandboxes", "ls").stdout


def test_sandboxes_without_an_engine_say_how_to_start_one() -> None:
    done = codeward_command("sandboxes", "ls", DOCKER_HOST="unix:///nonexistent/docker.sock")
    assert done.returncode == 2
    assert "the Docker engine at unix:///nonexistent/docker.sock (DOCKER_HOST) does not answer" in done.stderr
    assert "dockerd" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
