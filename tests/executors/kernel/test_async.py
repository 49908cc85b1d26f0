"""A kernel executor's native async API, on real kernels: `arun` gives what `run` gives while the
event loop waits on the kernel's sockets; output and async tools are handled on the loop; a cancel
stops the block and leaves the executor usable; `aclose` leaves no kernel behind."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from codeward.executors.base import ExecutionError, ExecutionTimeout, acreate_executor
from codeward.executors.jupyter import JupyterExecutor
from codeward.tools import tool
from tests.executors.awaiting import StepClock, cancelled_after, process_runs
from tests.timing import busy_seconds

T = TypeVar("T")

SLEEPS = "import time; print('asleep', flush=True); time.sleep(30)"
#: A block that catches the interrupt and sleeps on: only a restart stops it.
STUBBORN = "import time\nwhile True:\n    try:\n        time.sleep(30)\n    except KeyboardInterrupt:\n        pass"


def on_a_loop(make: Callable[[JupyterExecutor], Awaitable[T]], **options: Any) -> T:
    """Run `make(executor)` on a fresh event loop, with an executor started by `acreate` and closed by `aclose`."""

    async def main() -> T:
        async with await JupyterExecutor.acreate(timeout_seconds=options.pop("timeout_seconds", 5), **options) as ex:
            assert isinstance(ex, JupyterExecutor)
            return await make(ex)

    return asyncio.run(main())


def failure(call: Callable[[], object]) -> tuple[type[BaseException], str, str | None, str]:
    with pytest.raises(ExecutionError) as raised:
        call()
    error = raised.value
    return type(error), error.message, error.error_type, error.logs


def test_arun_gives_what_run_gives() -> None:
    blocks = ["print('hi'); 6 * 7", "x = [1, 2]\nx"]
    failing = ["print('before'); 1 / 0", "import time; print('slow'); time.sleep(10)"]

    async def both(ex: JupyterExecutor) -> None:
        for code in blocks:
            ran, awaited = ex.run(code), await ex.arun(code)
            assert (awaited.output, awaited.logs, awaited.is_final_answer) == (
                ran.output,
                ran.logs,
                ran.is_final_answer,
            )
        for code in failing:
            expected = failure(lambda code=code: ex.run(code))
            with pytest.raises(ExecutionError) as raised:
                await ex.arun(code)
            error = raised.value
            assert (type(error), error.message, error.error_type, error.logs) == expected
        assert expected[0] is ExecutionTimeout
        assert (await ex.arun("x")).output == [1, 2]  # the interrupted block kept the kernel's state

    on_a_loop(both, timeout_seconds=2)


def test_on_output_is_called_on_the_loops_thread_as_the_block_prints() -> None:
    heard: list[tuple[str, str, int, float]] = []

    async def watch(ex: JupyterExecutor) -> float:
        started = time.monotonic()
        output = await ex.arun(
            "import sys, time\nprint('one', flush=True)\ntime.sleep(1)\nprint('two', file=sys.stderr)\n3",
            on_output=lambda stream, text: heard.append((stream, text, threading.get_ident(), time.monotonic())),
        )
        assert output.output == 3
        return started

    loop_thread = threading.get_ident()  # asyncio.run runs the loop on this thread
    started = on_a_loop(watch)
    assert [(stream, text) for stream, text, _, _ in heard] == [("stdout", "one\n"), ("stderr", "two\n")]
    assert {thread for _, _, thread, _ in heard} == {loop_thread}
    assert heard[0][3] - started < 1.0 <= heard[1][3] - started  # the first piece came while the block ran


def test_an_async_tool_runs_on_the_loop_and_a_sync_tool_in_the_pool() -> None:
    threads: dict[str, str] = {}

    @tool
    async def fetch(key: str) -> str:
        """Fetch a value.

        Args:
            key: What to fetch.
        """
        await asyncio.sleep(0.01)
        threads["fetch"] = threading.current_thread().name
        return key.upper()

    @tool
    def double(n: int) -> int:
        """Double a number.

        Args:
            n: The number.
        """
        threads["double"] = threading.current_thread().name
        return n * 2

    async def call(ex: JupyterExecutor) -> Any:
        await ex.asend_tools({"fetch": fetch, "double": double})
        await ex.asend_variables({"base": 21})
        return (await ex.arun("(fetch('abc'), double(base))")).output

    assert on_a_loop(call) == ("ABC", 42)
    assert threads["fetch"] == threading.current_thread().name  # the loop's thread
    assert threads["double"].startswith("codeward-offload")


def test_cancelling_arun_during_an_async_tool_cancels_the_tool_and_stops_the_block() -> None:
    events: list[str] = []
    started = asyncio.Event()

    @tool
    async def wait_long() -> str:
        """Wait a long time."""
        events.append("started")
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            events.append("cancelled")
            raise
        return "done"

    async def cancel(ex: JupyterExecutor) -> float:
        await ex.asend_tools({"wait_long": wait_long})
        took = await cancelled_after(0.5, ex.arun("wait_long()"), ready=started)
        assert (await ex.arun("6 * 7")).output == 42
        return took

    took = on_a_loop(cancel)
    assert events == ["started", "cancelled"]
    assert took < busy_seconds(1.0)


def test_cancelling_arun_stops_the_block_keeps_the_state_and_aclose_leaves_no_kernel() -> None:
    async def cancel(ex: JupyterExecutor) -> tuple[int, float]:
        await ex.arun("kept = 'yes'")
        pid = (await ex.arun("import os; os.getpid()")).output
        printed = asyncio.Event()  # the cancel lands in the sleep, not before the kernel has the block
        took = await cancelled_after(0.5, ex.arun(SLEEPS, on_output=lambda stream, text: printed.set()), ready=printed)
        assert (await ex.arun("kept")).output == "yes"  # interrupted, not restarted
        assert process_runs(pid)
        return pid, took

    pid, took = on_a_loop(cancel)
    assert took < busy_seconds(1.0)
    assert not process_runs(pid)


def test_a_block_that_ignores_the_cancel_gets_a_fresh_kernel() -> None:
    async def cancel(ex: JupyterExecutor) -> tuple[int, int, float]:
        await ex.arun("kept = 'yes'")
        await ex.asend_variables({"given": 7})
        pid = (await ex.arun("import os; os.getpid()")).output
        took = await cancelled_after(0.5, ex.arun(STUBBORN))
        assert not process_runs(pid)  # the kernel that would not stop was replaced
        assert (await ex.arun("('kept' in globals(), given)")).output == (False, 7)
        return pid, (await ex.arun("import os; os.getpid()")).output, took

    old, new, took = on_a_loop(cancel)
    assert old != new and not process_runs(new)
    assert took < busy_seconds(3.0 + 2.0)  # the interrupt's grace, then a restart


def test_kernels_started_together_by_acreate_executor_each_answer() -> None:
    async def start() -> list[Any]:
        executors = await asyncio.gather(*(acreate_executor("jupyter", timeout_seconds=5) for _ in range(4)))
        try:
            assert all(isinstance(ex, JupyterExecutor) for ex in executors)
            return list(await asyncio.gather(*(ex.arun(f"{n} * 10") for n, ex in enumerate(executors))))
        finally:
            await asyncio.gather(*(ex.aclose() for ex in executors))

    outputs = asyncio.run(start())
    assert [output.output for output in outputs] == [0, 10, 20, 30]


def test_the_loop_is_never_held_while_kernels_run_blocks() -> None:
    async def measure() -> tuple[float, list[Any]]:
        clock = StepClock()
        executors = await asyncio.gather(*(JupyterExecutor.acreate(timeout_seconds=10) for _ in range(3)))
        try:
            outputs = await asyncio.gather(
                *(ex.arun(f"import time; time.sleep(1); {n}") for n, ex in enumerate(executors))
            )
        finally:
            await asyncio.gather(*(ex.aclose() for ex in executors))
        return clock.stop(), [output.output for output in outputs]

    late, outputs = asyncio.run(measure())
    assert outputs == [0, 1, 2]
    assert late < busy_seconds(0.2), f"the loop was held {late:.3f} s"
