"""A sandbox that a module's tests share, with what they need established again whenever it was lost.

A kernel that runs past its time limit and ignores the interrupt is restarted, and a sandbox that
dies is replaced: the variables and tools the caller sent are sent again, but whatever code
defined is gone. A test that shares the sandbox would then fail for its neighbour's reason (a
`NameError` for state that `prepare` had set), so one failure became several. Each test asks
`SharedSandbox.ready()` for the sandbox instead: it checks, with one small cell, that the state is
still there, and prepares the sandbox again when it is not. The test that caused the restart fails
by itself; the others pass or fail for their own reasons.

The pattern, for a module's fixture:

    @pytest.fixture(scope="module")
    def _shared(...) -> Iterator[SharedSandbox[DockerExecutor]]:
        with DockerExecutor(...) as executor:
            yield SharedSandbox(executor, prepare)

    @pytest.fixture
    def container(_shared: SharedSandbox[DockerExecutor]) -> DockerExecutor:
        return _shared.ready()
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from codeward.executors.base import Executor, ExecutorError

E = TypeVar("E", bound=Executor)

#: Set in the sandbox after `prepare` ran there; gone when the sandbox's state was lost.
MARKER = "_codeward_tests_prepared"


class SharedSandbox(Generic[E]):
    """`executor`, prepared by `prepare` now and again each time a test finds its state lost."""

    def __init__(self, executor: E, prepare: Callable[[E], object]) -> None:
        self.executor = executor
        self._prepare = prepare
        #: How many times the state was found lost and prepared again.
        self.reestablished = 0
        self._establish()

    def _establish(self) -> None:
        self._prepare(self.executor)
        self.executor.run(f"{MARKER} = True")

    def prepared(self) -> bool:
        """Whether the state `prepare` set is still in the sandbox (a dead sandbox's is not)."""
        try:
            return self.executor.run(MARKER).output is True
        except ExecutorError:  # a NameError in the sandbox, or a sandbox that died
            return False

    def ready(self) -> E:
        """The sandbox with its prepared state, prepared again first if a restart lost it."""
        if not self.prepared():
            self.reestablished += 1
            self._establish()
        return self.executor
