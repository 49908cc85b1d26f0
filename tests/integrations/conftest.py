"""The sandboxes the interop tests run in: the local one always, Docker where an engine and the
current image are here (a skip that CODEWARD_REQUIRE_ALL=1 turns into a failure)."""

from __future__ import annotations

import pytest

from tests.executors.contract.conftest import PROFILES, _module_missing


@pytest.fixture(params=["local", "docker"])
def sandbox_name(request: pytest.FixtureRequest) -> str:
    """A codeward sandbox by name; the parameter is what tells the root conftest a test needs Docker."""
    name: str = request.param
    reason = (_module_missing(name) or PROFILES[name].unavailable()) if name == "docker" else None
    if reason:
        pytest.skip(reason)
    return name
