"""`codeward doctor --attack --executor docker`: every probe holds in the default sandbox, under runc and
under gVisor, and the probes of Docker's walls get through a container with those walls taken down.

One weakened container serves every control: the host's own network (its loopback listener and its
bridge gateway), memory and processes far past the probes' aims, the bait folder mounted read-write
where the host has it, and the host's secret variable passed in; each probe must report there what got
through.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import docker
import pytest

from codeward.cli.attack_bait import Bait
from codeward.cli.attack_probes import PROBES, Probe, run_probes
from codeward.executors.docker.executor import DockerExecutor
from tests.cli.conftest import command, command_env
from tests.cli.test_doctor_attack import EVERY_EXECUTOR, probe_lines

#: The probes a container with its walls taken down lets through; a host process stays out of reach of
#: the signals of any container codeward can start (that probe's control is in tests/cli).
WEAKENED = [probe for probe in PROBES if probe.name in EVERY_EXECUTOR and probe.name != "signal the host"]


def test_every_probe_holds_in_the_default_docker_sandbox(runtime: str | None, sandbox_image: str, tmp_path) -> None:
    args = ["doctor", "--attack", "--executor", "docker", *(["--runtime", runtime] if runtime else [])]
    done = subprocess.run(
        command(*args), capture_output=True, text=True, env=command_env(), cwd=tmp_path, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = probe_lines(done.stdout)
    assert set(lines) == set(EVERY_EXECUTOR), done.stdout
    assert all(verdict == "held" for verdict in lines.values()), done.stdout
    assert f"held in the docker sandbox{' under ' + runtime if runtime else ''} on this machine" in done.stdout


@pytest.fixture(scope="module")
def weakened(docker_client: docker.DockerClient, sandbox_image: str) -> Iterator[tuple[DockerExecutor, Bait]]:
    with Bait("docker") as bait:
        for path in (bait.folder, bait.outside):
            os.chmod(path, 0o777)  # the sandbox's user is not the host's
        os.chmod(bait.secret_file, 0o644)
        container = DockerExecutor(
            image=sandbox_image,
            network="host",
            mem_limit="4g",
            pids_limit=4096,
            mounts={str(bait.folder): {"source": str(bait.folder), "mode": "rw"}},
            extra_run_kwargs={"environment": {bait.env_name: bait.env_secret}},
            timeout_seconds=120,
        )
        with container:
            yield container, bait


@pytest.mark.parametrize("probe", WEAKENED, ids=[probe.name for probe in WEAKENED])
def test_each_probe_reports_what_got_through_a_weakened_container(weakened, probe: Probe) -> None:
    container, bait = weakened
    (verdict,) = run_probes(container, bait, 1 << 30, probes=(probe,))
    assert verdict.held is False, f"{probe.name}: {verdict}"
    assert verdict.detail, verdict
