"""Skips that CI must not allow: with CODEWARD_REQUIRE_ALL=1 a test of an optional part that skips is
reported as a failure instead, so a machine that should run them cannot pass without them. A Docker
test that skips, for whatever reason and wherever the skip is written (a missing SDK at import, no
engine, no image, no gVisor, no egress proxy, a contract case), fails; so do the viewer's browser
tests without chromium and the codec's cross-interpreter test without a second Python (`missing`).
The flag's old name, CODEWARD_REQUIRE_DOCKER=1, is still honoured."""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

#: The local internet's origins (HTTP, HTTPS with a test CA, raw TCP) for every egress test; how the tests
#: are shared out among workers.
pytest_plugins = ["tests.egress.internet", "tests.lanes"]

#: The flag, and its old name from when it required only the Docker tests.
REQUIRE_ALL_FLAG, OLD_FLAG = "CODEWARD_REQUIRE_ALL", "CODEWARD_REQUIRE_DOCKER"
REQUIRE_ALL = "1" in (os.environ.get(REQUIRE_ALL_FLAG), os.environ.get(OLD_FLAG))
DOCKER_TESTS = "tests/executors/docker/"


def _needs_docker(nodeid: str, params: dict[str, Any]) -> bool:
    """A test of the docker folder, or one run for a docker profile ("docker", "docker-runsc")."""
    named = (value for value in params.values() if isinstance(value, str))
    return nodeid.startswith(DOCKER_TESTS) or any(value.split("-")[0] == "docker" for value in named)


def missing(reason: str) -> None:
    """Skip a test for a missing optional part (`reason` says what to run); a failure under the flag."""
    if REQUIRE_ALL:
        pytest.fail(f"{reason}, but {REQUIRE_ALL_FLAG}=1: every optional part must run here")
    pytest.skip(reason)


def _fail_instead(report: Any, what: str) -> None:
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = f"{what} skipped ({reason}), but {REQUIRE_ALL_FLAG}=1: the Docker tests must run here"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_ALL and report.skipped and _needs_docker(report.nodeid + "/", {}):
        _fail_instead(report, f"collecting {report.nodeid}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    params = getattr(getattr(item, "callspec", None), "params", {})
    if REQUIRE_ALL and report.skipped and _needs_docker(item.nodeid, params):
        _fail_instead(report, item.nodeid)
