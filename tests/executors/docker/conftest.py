"""Fixtures for tests that need a running Docker engine and the current sandbox image.

Without the docker SDK, an engine or the image these tests are skipped with the reason
(a module that needs the SDK is skipped whole, unimported). CI sets
CODEWARD_REQUIRE_ALL=1, under which `tests/conftest.py` turns every such skip into a
failure: the Docker tests must run there.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from codeward.executors.base import SandboxError, install_line

try:
    import docker
    import jupyter_client  # noqa: F401 (the sandbox's kernel client)
except ImportError as missing:
    docker = None
    SDK_MISSING: str | None = f"the docker extra is not installed ({missing}; {install_line('docker')})"
else:
    SDK_MISSING = None

if TYPE_CHECKING:
    from codeward.executors.docker.sandbox import KernelContainer

# Set before any sandbox starts, so a test can show that the host's environment stays outside.
HOST_SECRET = ("CODEWARD_TEST_HOST_SECRET", "host-only-value-5f2c")
os.environ[HOST_SECRET[0]] = HOST_SECRET[1]


class _NeedsTheSDK(pytest.Module):
    """A test module that needs the docker SDK, where it is missing: skipped without importing it."""

    def collect(self) -> list[pytest.Item]:
        pytest.skip(SDK_MISSING or "")


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    if SDK_MISSING is None:
        return None
    return _NeedsTheSDK.from_parent(parent, path=module_path)


def unavailable(reason: str) -> None:
    """Skip for a missing engine or image (a failure under CODEWARD_REQUIRE_ALL=1)."""
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_client() -> docker.DockerClient:
    from codeward.executors.docker.images import engine_client

    try:
        return engine_client()
    except SandboxError as error:
        unavailable(f"no Docker engine: {error.message}")
        raise


@pytest.fixture(scope="session")
def sandbox_image(docker_client: docker.DockerClient) -> str:
    from codeward.executors.docker.images import BUILD_COMMAND, find_image

    image = find_image(docker_client)
    if image is None:
        unavailable(f"the current sandbox image is not built; run `{BUILD_COMMAND}`")
    return image.id


def gvisor_unavailable(client: docker.DockerClient) -> str | None:
    """Why `runtime="runsc"` cannot run here, or None when it can (`.ci/docker-engine.sh` registers it)."""
    from codeward.executors.docker.gvisor import GVISOR, runtime_problem

    problem = runtime_problem(client.info().get("Runtimes") or {}, GVISOR)
    return f"gVisor cannot run codeward's sandboxes here: {problem}" if problem else None


@pytest.fixture(scope="module", params=[pytest.param(None, id="runc"), pytest.param("runsc", id="runsc")])
def runtime(request: pytest.FixtureRequest, docker_client: docker.DockerClient) -> str | None:
    """The container runtime of a module's sandboxes: Docker's default (runc), then gVisor (runsc)."""
    chosen: str | None = request.param
    reason = gvisor_unavailable(docker_client) if chosen else None
    if reason:
        unavailable(reason)
    return chosen


@pytest.fixture(scope="module")
def sandbox(docker_client: docker.DockerClient, sandbox_image: str) -> Iterator[KernelContainer]:
    """One default-hardened sandbox shared by a module's read-only probes."""
    from codeward.executors.docker.sandbox import start_kernel_container

    started = start_kernel_container(docker_client, sandbox_image)
    yield started
    started.remove()


@pytest.fixture
def gateway(docker_client: docker.DockerClient) -> str:
    """The host's address on the bridge network, where a container with a network can reach it.

    Some engines report only the subnet; the gateway is then its first address, as Docker assigns it."""
    config = docker_client.networks.get("bridge").attrs["IPAM"]["Config"][0]
    return str(config.get("Gateway") or next(ipaddress.ip_network(config["Subnet"]).hosts()))


@pytest.fixture
def gateway_listener(gateway: str) -> Iterator[tuple[str, int]]:
    """A TCP port on the host's bridge address that accepts (and drops) every connection."""
    server = socket.create_server((gateway, 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                server.accept()[0].close()
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield gateway, server.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        server.close()
