"""`CodeOutput.usage` in a container, under runc and under gVisor: read by the host from the container's
control group (never from the engine's stats, which take a second or two, nor from the sandbox)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from codeward.executors.docker.executor import DockerExecutor
from tests.executors.usage_checks import check_cpu, check_memory, check_output_and_calls, usage_of


@pytest.fixture(scope="module")
def executor(runtime: str | None, sandbox_image: str) -> Iterator[DockerExecutor]:
    with DockerExecutor(image=sandbox_image, runtime=runtime, mem_limit="1g", timeout_seconds=60) as running:
        yield running


def test_peak_memory_is_the_blocks_own(executor: DockerExecutor) -> None:
    check_memory(executor)


def test_cpu_time_is_what_the_block_spent(executor: DockerExecutor) -> None:
    check_cpu(executor)


def test_output_and_tool_calls_are_counted(executor: DockerExecutor) -> None:
    check_output_and_calls(executor)


def test_a_sandbox_without_a_network_says_so_for_its_traffic(executor: DockerExecutor) -> None:
    usage = usage_of(executor, "1")
    assert usage.egress_bytes is None and usage.unmeasured["egress_bytes"] == "the sandbox has no network"
