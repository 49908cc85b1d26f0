"""Ctrl-C in the host while a block runs: the run stops, and what the block printed before is kept."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from codeward import CodeAgent, ScriptedModel
from codeward.executors import LocalExecutor
from codeward.executors.base import ExecutionError
from codeward.executors.local.limits import BlockInterrupted
from codeward.executors.local.watchdog import _Watch
from codeward.platform.live_blocks import BlockOutputDelta
from codeward.platform.memory import ActionStep
from codeward.platform.tools import tool
from tests.executors.contract.conftest import process_gone

pytestmark = pytest.mark.timeout(60)

SLOW_BLOCK = "print('halfway there')\nimport time\ntime.sleep(20)"


@pytest.fixture(params=["process", "in_process"])
def executor(request: pytest.FixtureRequest) -> Iterator[LocalExecutor]:
    with LocalExecutor(authorized_imports=["os"], timeout_seconds=30, isolation=request.param) as local:
        yield local


def ctrl_c_in(seconds: float) -> None:
    """Press Ctrl-C in this process a moment from now, as a user at the terminal would: a real signal
    to the main thread, which wakes it from a blocking wait."""
    main = threading.main_thread().ident
    assert main is not None
    threading.Timer(seconds, signal.pthread_kill, (main, signal.SIGINT)).start()


def interrupted_logs(executor: LocalExecutor, code: str) -> str:
    ctrl_c_in(0.5)
    with pytest.raises(KeyboardInterrupt) as raised:
        executor.run(code)
    cause = raised.value.__cause__
    assert isinstance(cause, ExecutionError) and cause.error_type == "KeyboardInterrupt"
    return cause.logs


def test_the_interrupt_carries_what_the_block_printed_and_the_executor_goes_on(executor):
    executor.send_variables({"given": 3})
    assert interrupted_logs(executor, SLOW_BLOCK) == "halfway there\n"
    assert executor.run("given * 2").output == 6


def test_the_worker_of_an_interrupted_block_is_stopped_at_once():
    with LocalExecutor(authorized_imports=["os"], timeout_seconds=30) as executor:
        worker_pid = executor.run("import os\nos.getpid()").output
        started = time.monotonic()
        interrupted_logs(executor, SLOW_BLOCK)
        assert time.monotonic() - started < 2
        assert process_gone(worker_pid)


def test_a_block_waiting_for_a_host_tool_still_hands_over_its_logs():
    @tool
    def slow_lookup(city: str) -> str:
        """Looks a city up, slowly.

        Args:
            city: the city
        """
        time.sleep(20)
        return city

    with LocalExecutor(timeout_seconds=30) as executor:
        executor.send_tools({"slow_lookup": slow_lookup})
        assert interrupted_logs(executor, "print('asking')\nslow_lookup('Oslo')") == "asking\n"


def test_a_worker_stuck_in_c_code_is_stopped_after_a_moment_with_nothing_to_show():
    with LocalExecutor(authorized_imports=["os"], timeout_seconds=30) as executor:
        worker_pid = executor.run("import os\nos.getpid()").output
        started = time.monotonic()
        assert interrupted_logs(executor, "print('spinning')\nany(iter(int, 1))") == ""
        assert time.monotonic() - started < 4
        assert process_gone(worker_pid)


def test_an_agent_keeps_the_interrupted_step_with_what_its_code_printed():
    model = ScriptedModel([f"<code>\n{SLOW_BLOCK}\n</code>"])
    pressed: list[bool] = []

    def press_once_printed(delta: BlockOutputDelta) -> None:
        """Ctrl-C a moment after the block printed: a fixed delay from the start could end
        before a busy machine had started the worker and the block printed anything."""
        if not pressed:
            pressed.append(True)
            ctrl_c_in(0.2)

    callbacks = {BlockOutputDelta: [press_once_printed]}
    with (
        CodeAgent(tools=[], model=model, verbosity_level=-1, step_callbacks=callbacks) as agent,
        pytest.raises(KeyboardInterrupt),
    ):
        agent.run("Work slowly.")
    step = agent.memory.steps[-1]
    assert isinstance(step, ActionStep) and step.error is not None
    assert "interrupted" in step.error.message
    assert step.observations == "Execution logs:\nhalfway there\n"


def test_an_interrupt_while_a_large_tool_reply_crosses_leaves_the_worker_in_step() -> None:
    """A stop that comes while the worker reads a host tool's reply waits until the message is whole:
    raised mid-read, it left the channel part-way through a frame, and the next block hung to its
    time limit and lost the state. Each round interrupts at another moment of the crossing."""
    from codeward.tools import tool

    @tool
    def big(n: int) -> str:
        """Returns n characters.

        Args:
            n: how many
        """
        return "x" * n

    with LocalExecutor(timeout_seconds=10) as executor:
        executor.send_tools({"big": big})
        executor.run("keep = 'state'")
        for delay in [0.02 * n for n in range(12)]:
            timer = threading.Timer(delay, executor.interrupt)
            timer.start()
            with contextlib.suppress(ExecutionError):
                executor.run("for i in range(4):\n    s = big(20_000_000)\nlen(s)")
            timer.join()
            started = time.monotonic()
            assert executor.run("keep").output == "state", f"state lost after an interrupt at {delay:.2f} s"
            assert time.monotonic() - started < 5


def test_a_watch_stopped_before_its_first_sleep_does_not_sleep() -> None:
    """A block's sleep waits on an Event made at its first sleep: a stop that came before must still
    wake it (in the host's process the stop's own exception may reach the block only after it sleeps)."""
    watch = _Watch(threading.get_ident(), time.monotonic() + 60, None)
    watch.fired = BlockInterrupted
    started = time.monotonic()
    watch.sleep(5)
    assert time.monotonic() - started < 1


def test_a_sleeping_watch_wakes_when_stopped() -> None:
    watch = _Watch(threading.get_ident(), time.monotonic() + 60, None)
    threading.Timer(0.2, watch.wake).start()
    started = time.monotonic()
    watch.sleep(5)
    assert 0.1 < time.monotonic() - started < 2
