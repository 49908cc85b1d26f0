"""The executor contract suite, and E2B's own behaviours, against E2B's cloud.

Runs only where ``E2B_API_KEY`` is set (each test creates and kills real
sandboxes, which E2B bills); skipped with that reason everywhere else.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
from e2b import NotFoundException
from e2b_code_interpreter import Sandbox

from codeward.executors.base import ExecutionTimeout, Executor, create_executor
from codeward.executors.e2b import E2BExecutor
from tests.executors.contract.conftest import TIMEOUT, Profile
from tests.executors.contract.test_contract import *  # noqa: F403 (the whole contract suite, run live)

pytestmark = pytest.mark.skipif(
    not os.environ.get("E2B_API_KEY"),
    reason="E2B_API_KEY is not set: the live tests need a key for E2B's cloud",
)

#: Always the cloud, whatever E2B_DEBUG says in the environment.
LIVE = {"debug": False}


@pytest.fixture
def profile() -> Profile:
    return Profile(make=lambda: create_executor("e2b", timeout_seconds=TIMEOUT, connection=LIVE), host_pids=False)


@pytest.fixture
def executor(profile: Profile) -> Iterator[Executor]:
    with profile.make() as made:
        yield made


def test_live_a_run_stops_at_its_limit_not_at_twice_it(executor: Executor) -> None:
    started = time.monotonic()
    with pytest.raises(ExecutionTimeout):
        executor.run("import time\ntime.sleep(60)")
    assert time.monotonic() - started < 2 * TIMEOUT  # the SDK alone would take 2 * (TIMEOUT + grace)


def test_live_close_kills_the_sandbox_it_created_and_only_that() -> None:
    owner = E2BExecutor(timeout_seconds=TIMEOUT, connection=LIVE)
    sandbox_id = owner.sandbox_id
    assert sandbox_id is not None
    guest = E2BExecutor(sandbox_id=sandbox_id, timeout_seconds=TIMEOUT, connection=LIVE)
    assert guest.run("6 * 7").output == 42
    guest.close()
    assert owner.run("'alive'").output == "alive"
    owner.close()
    with pytest.raises(NotFoundException):
        Sandbox.connect(sandbox_id, **LIVE)


def test_live_the_sandbox_outlives_its_timeout_while_in_use() -> None:
    with E2BExecutor(timeout_seconds=TIMEOUT, sandbox_timeout=15, connection=LIVE) as executor:
        executor.run("born = 1")
        for _ in range(8):  # 24 s of use: past the 15 s the sandbox was created with
            time.sleep(3)
            assert executor.run("born").output == 1
