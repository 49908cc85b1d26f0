"""The sandboxes the interop tests run in: the local one always, Docker where an engine and the
current image are here (a skip that CODEWARD_REQUIRE_DOCKER=1 turns into a failure)."""

from __future__ import annotations

import functools

import pytest


@functools.cache
def _docker_unavailable() -> str | None:
    try:
        from codeward.executors.base import ExecutorError
        from codeward.executors.docker.images import BUILD_COMMAND, engine_client, find_image
    except ImportError as missing:
        return f"the docker extra is not installed ({missing})"
    try:
        if find_image(engine_client()) is None:
            return f"the current docker sandbox image is not built; run `{BUILD_COMMAND}`"
    except ExecutorError as error:
        return f"no Docker engine here: {error.message}"
    return None


@pytest.fixture(params=["local", "docker"])
def sandbox_name(request: pytest.FixtureRequest) -> str:
    """A codeward sandbox by name; the parameter is what tells the root conftest a test needs Docker."""
    name: str = request.param
    reason = _docker_unavailable() if name == "docker" else None
    if reason:
        pytest.skip(reason)
    return name
