"""Fixtures for tests that need a running Docker engine and the current sandbox image.

Without an engine (or without the image) these tests are skipped with the reason.
CI sets CODEWARD_REQUIRE_DOCKER=1, which turns every such skip into a failure: the
Docker tests must run there.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

docker = pytest.importorskip("docker", reason="the docker SDK is not installed (pip install 'codeward[docker]')")

from codeward.executors.base import SandboxError
from codeward.executors.docker.images import BUILD_COMMAND, engine_client, find_image
from codeward.executors.docker.sandbox import KernelContainer, start_kernel_container

REQUIRED = os.environ.get("CODEWARD_REQUIRE_DOCKER") == "1"
# Set before any sandbox starts, so a test can show that the host's environment stays outside.
HOST_SECRET = ("CODEWARD_TEST_HOST_SECRET", "host-only-value-5f2c")
os.environ[HOST_SECRET[0]] = HOST_SECRET[1]


def unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason} (CODEWARD_REQUIRE_DOCKER=1: the Docker tests must run here)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_client() -> docker.DockerClient:
    try:
        return engine_client()
    except SandboxError as error:
        unavailable(f"no Docker engine: {error.message}")
        raise


@pytest.fixture(scope="session")
def sandbox_image(docker_client: docker.DockerClient) -> str:
    image = find_image(docker_client)
    if image is None:
        unavailable(f"the current sandbox image is not built; run `{BUILD_COMMAND}`")
    return image.id


@pytest.fixture(scope="module")
def sandbox(docker_client: docker.DockerClient, sandbox_image: str) -> Iterator[KernelContainer]:
    """One default-hardened sandbox shared by a module's read-only probes."""
    started = start_kernel_container(docker_client, sandbox_image)
    yield started
    started.remove()
