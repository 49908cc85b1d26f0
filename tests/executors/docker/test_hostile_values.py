"""A container's code that sends the host hostile values gets an error back quickly, and goes on.

The same attacks as against a jupyter kernel (tests/executors/test_codec_bounds.py): the sandbox's
code makes its codec send a Fraction of two 6-million-bit ints and a set of 60,000 ints with one
hash, as a host tool's argument and as its last value.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from codeward.executors.docker.executor import DockerExecutor
from tests.executors.test_codec_bounds import (
    REFUSALS,
    TIME_LIMIT,
    assert_a_hostile_last_value_fails_cleanly,
    assert_a_hostile_tool_argument_comes_back_as_an_error,
    prepare,
)
from tests.shared_sandbox import SharedSandbox

#: How long past the time limit a refused tool call may return, on a machine busy with other
#: suites: gVisor's kernel passes the interrupt and the kernel's reply more slowly (on a quiet
#: machine 4.06 s against runc's 3.90 s, for a 3 s limit; under load runc took 4.02 s).
SLACK = {None: 2.0, "runsc": 2.5}


@pytest.fixture(scope="module")
def _shared_container(sandbox_image: str, runtime: str | None) -> Iterator[SharedSandbox[DockerExecutor]]:
    with DockerExecutor(timeout_seconds=TIME_LIMIT, runtime=runtime) as executor:
        yield SharedSandbox(executor, prepare)


@pytest.fixture
def container(_shared_container: SharedSandbox[DockerExecutor]) -> DockerExecutor:
    """The module's container for this runtime, with `HOSTILE` defined (again, if a neighbour's test lost it)."""
    return _shared_container.ready()


@pytest.mark.parametrize("name", REFUSALS)
def test_a_container_calling_a_tool_with_a_hostile_argument_gets_an_error_back(
    container: DockerExecutor, name: str, runtime: str | None
) -> None:
    assert_a_hostile_tool_argument_comes_back_as_an_error(container, name, SLACK[runtime])


@pytest.mark.parametrize("name", REFUSALS)
def test_a_container_whose_last_value_is_hostile_fails_cleanly(container: DockerExecutor, name: str) -> None:
    assert_a_hostile_last_value_fails_cleanly(container, name)
