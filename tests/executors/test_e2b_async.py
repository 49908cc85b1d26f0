"""The E2B executor's native async API, against the local server that speaks E2B's protocol.

`arun`, `asend_*`, `aclose` and `acreate` await E2B's async SDK on the event loop: what a block
gives is what `run` gives, callbacks and async host tools run on the loop's thread, a cancelled
block stops, and many executors wait together without holding the loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from http.server import HTTPServer
from typing import Any, TypeVar

import pytest

from codeward import tool
from codeward.executors.base import CodeOutput, ExecutionError, ExecutionTimeout, SandboxError, acreate_executor
from codeward.executors.e2b import E2BExecutor
from tests.e2b_server import E2BServer
from tests.executors import test_e2b
from tests.executors.awaiting import StepClock, cancelled_after
from tests.timing import busy_seconds

LIMIT = 2.0
T = TypeVar("T")
# The E2B tests' fixtures: one protocol server for the module, and sync executors built on it.
server = test_e2b.server
make = test_e2b.make
E2B_SETTINGS: dict[str, Any] = {"timeout_seconds": LIMIT}


@pytest.fixture
def acreate(server: E2BServer) -> Iterator[Callable[..., Awaitable[E2BExecutor]]]:
    """`E2BExecutor.acreate` on the module's server; what it made is closed after the test."""
    made: list[E2BExecutor] = []

    async def build(**kwargs: Any) -> E2BExecutor:
        executor = await E2BExecutor.acreate(connection=server.connection, **{"timeout_seconds": LIMIT, **kwargs})
        made.append(executor)
        return executor

    yield build
    for executor in made:
        executor.close()


def run_async(coroutine: Awaitable[T]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coroutine, 120)

    return asyncio.run(bounded())


def outcome(result: CodeOutput | ExecutionError) -> tuple[Any, ...]:
    """What a block gave, in a form two runs compare by."""
    if isinstance(result, ExecutionError):
        return (type(result).__name__, result.error_type, str(result).splitlines()[0], result.logs)
    return ("ok", result.output, result.logs, result.is_final_answer)


def blocking_outcome(executor: E2BExecutor, code: str) -> tuple[Any, ...]:
    try:
        return outcome(executor.run(code))
    except ExecutionError as error:
        return outcome(error)


async def awaited_outcome(executor: E2BExecutor, code: str) -> tuple[Any, ...]:
    try:
        return outcome(await executor.arun(code))
    except ExecutionError as error:
        return outcome(error)


BLOCKS = [
    "print('hello')\nprint('world')\n6 * 7",
    "values = [n * n for n in range(4)]\nprint(values)\nvalues",
    "print('before')\n1 / 0",
    "import sys\nprint('to stderr', file=sys.stderr)\nNone",
    "print('napping')\nimport time\ntime.sleep(60)",
]


def test_arun_gives_what_run_gives(make: Callable[..., E2BExecutor]) -> None:
    """Results, logs, errors and time limits: the same from both, on an executor made by the constructor."""
    executor = make()
    blocking = [blocking_outcome(executor, block) for block in BLOCKS]

    async def awaiting() -> list[tuple[Any, ...]]:
        return [await awaited_outcome(executor, block) for block in BLOCKS]

    assert run_async(awaiting()) == blocking
    assert blocking[0] == ("ok", 42, "hello\nworld\n", False)
    assert blocking[2][:2] == ("ExecutionError", "ZeroDivisionError")
    assert blocking[4][:2] == ("ExecutionTimeout", "TimeoutError") and "napping" in blocking[4][3]


def test_an_executor_made_by_acreate_serves_both_and_keeps_its_state(
    acreate: Callable[..., Awaitable[E2BExecutor]],
) -> None:
    async def scenario() -> E2BExecutor:
        executor = await acreate()
        await executor.asend_variables({"given": 6})
        assert (await executor.arun("kept = given * 7\nkept")).output == 42
        with pytest.raises(ExecutionTimeout, match="was stopped"):
            await executor.arun("import time\ntime.sleep(60)")
        return executor

    executor = run_async(scenario())
    assert executor.run("kept + given").output == 48  # the sync SDK reaches the same sandbox and context


def test_acreate_executor_uses_the_native_acreate(server: E2BServer) -> None:
    async def scenario() -> tuple[str, Any]:
        async with await acreate_executor("e2b", connection=server.connection, timeout_seconds=LIMIT) as executor:
            return type(executor).__name__, (await executor.arun("'made'")).output

    assert run_async(scenario()) == ("E2BExecutor", "made")


def test_on_output_is_called_on_the_event_loops_thread(acreate: Callable[..., Awaitable[E2BExecutor]]) -> None:
    heard: list[tuple[str, str, int]] = []

    async def scenario() -> tuple[CodeOutput, int]:
        executor = await acreate()
        output = await executor.arun(
            "import sys, time\nprint('one')\ntime.sleep(0.3)\nprint('two', file=sys.stderr)\n'done'",
            on_output=lambda stream, text: heard.append((stream, text, threading.get_ident())),
        )
        return output, threading.get_ident()

    output, loop_thread = run_async(scenario())
    assert output.output == "done" and output.logs == "one\ntwo\n"
    assert [(stream, text) for stream, text, _ in heard] == [("stdout", "one\n"), ("stderr", "two\n")]
    assert {thread for _, _, thread in heard} == {loop_thread}


def test_a_failing_on_output_stops_the_block_and_is_raised(acreate: Callable[..., Awaitable[E2BExecutor]]) -> None:
    class Enough(Exception):
        pass

    def stop(stream: str, text: str) -> None:
        raise Enough(text)

    async def scenario() -> Any:
        executor = await acreate(timeout_seconds=30.0)
        started = time.monotonic()
        with pytest.raises(Enough):
            await executor.arun("import time\nprint('go')\ntime.sleep(20)", on_output=stop)
        assert time.monotonic() - started < 10
        return (await executor.arun("'still here'")).output

    assert run_async(scenario()) == "still here"


def test_interrupt_from_another_thread_stops_an_awaited_block(acreate: Callable[..., Awaitable[E2BExecutor]]) -> None:
    async def scenario() -> tuple[ExecutionError, float, Any]:
        executor = await acreate(timeout_seconds=30.0)
        stoppers: list[threading.Thread] = []

        def stop_once_waiting(stream: str, text: str) -> None:
            """Interrupt from another thread once the block is in its sleep: a fixed delay could
            end before a busy machine's request reached the sandbox, and try nothing."""
            if "waiting" in text and not stoppers:
                stoppers.append(threading.Thread(target=executor.interrupt))
                stoppers[0].start()

        started = time.monotonic()
        with pytest.raises(ExecutionError) as caught:
            await executor.arun("import time\nprint('waiting')\ntime.sleep(20)", on_output=stop_once_waiting)
        took = time.monotonic() - started
        for stopper in stoppers:
            stopper.join()
        return caught.value, took, (await executor.arun("'after'")).output

    error, took, after = run_async(scenario())
    assert error.error_type == "KeyboardInterrupt" and "waiting" in error.logs
    assert took < 10 and after == "after"


def test_acreate_retries_an_unreachable_api_with_one_idempotency_key_then_fails_clearly() -> None:
    api = HTTPServer(("127.0.0.1", 0), test_e2b._DroppingAPI)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    test_e2b._DroppingAPI.keys = []
    try:
        connection = {"debug": False, "api_url": f"http://127.0.0.1:{api.server_address[1]}"}
        with pytest.raises(SandboxError, match="could not reach E2B"):
            run_async(E2BExecutor.acreate(api_key="e2b_0000", connection=connection))
    finally:
        api.shutdown()
        api.server_close()
    keys = test_e2b._DroppingAPI.keys
    assert len(keys) >= 2 and len(set(keys)) == 1 and keys[0]


# -- host tools ---------------------------------------------------------------------------------

THREADS: dict[str, int] = {}


@tool
async def where_async(label: str) -> str:
    """Notes the thread it ran on, after awaiting.

    Args:
        label: a name for the call
    """
    await asyncio.sleep(0.01)
    THREADS["async"] = threading.get_ident()
    return label.upper()


@tool
def where_sync(label: str) -> str:
    """Notes the thread it ran on.

    Args:
        label: a name for the call
    """
    THREADS["sync"] = threading.get_ident()
    return label * 2


def test_host_tools_under_arun_run_async_ones_on_the_loop_and_sync_ones_off_it(
    acreate: Callable[..., Awaitable[E2BExecutor]],
) -> None:
    THREADS.clear()

    async def scenario() -> tuple[Any, int]:
        executor = await acreate(tools_mode="host")
        await executor.asend_tools({"where_async": where_async, "where_sync": where_sync})
        output = await executor.arun("print('asking')\n[where_async(label='a'), where_sync(label='b')]")
        assert output.logs == "asking\n"
        return output.output, threading.get_ident()

    output, loop_thread = run_async(scenario())
    assert output == ["A", "bb"]
    assert THREADS["async"] == loop_thread
    assert THREADS["sync"] != loop_thread  # in the bounded pool: a sync tool never holds the loop


# -- cancelling ---------------------------------------------------------------------------------


def test_a_cancelled_block_stops_and_the_sandbox_is_killed_at_aclose() -> None:
    """Its own server, since the sandbox is created (and killed) through E2B's API."""
    with E2BServer() as own:

        async def scenario() -> tuple[float, Any, float]:
            executor = await E2BExecutor.acreate(connection=own.cloud_connection, timeout_seconds=60.0)
            printed = asyncio.Event()  # the cancel lands in the sleep, not before the sandbox has the block
            try:
                cancel_took = await cancelled_after(
                    0.5,
                    executor.arun(
                        "import time\nprint('sleeping')\ntime.sleep(30)", on_output=lambda stream, text: printed.set()
                    ),
                    ready=printed,
                )
                again = time.monotonic()
                after = (await executor.arun("'usable'")).output
                return cancel_took, after, time.monotonic() - again
            finally:
                await executor.aclose()

        cancel_took, after, next_took = run_async(scenario())
        assert cancel_took < busy_seconds(2.0), f"the cancel took {cancel_took:.2f} s"
        assert after == "usable"
        assert next_took < 10, f"the next block waited {next_took:.2f} s: the sleep went on"
        assert own.sandbox is None  # killed through E2B's API: nothing is left on the server
        assert own.created and len(own.created) == 1


# -- many at once ---------------------------------------------------------------------------------


def test_executors_created_together_overlap_their_starts(acreate: Callable[..., Awaitable[E2BExecutor]]) -> None:
    """Each start is under way before any ends: a start that held the loop would end before the next began.
    (The loop's lateness is measured in the next test: here the server, in this process, starts kernels
    in threads that hold the interpreter's lock while the starts are timed.)"""
    spans: list[tuple[float, float]] = []

    async def timed() -> None:
        began = time.monotonic()
        await acreate()
        spans.append((began, time.monotonic()))

    async def scenario() -> None:
        await asyncio.gather(*(timed() for _ in range(4)))

    run_async(scenario())
    last_began, first_ended = max(began for began, _ in spans), min(ended for _, ended in spans)
    assert last_began < first_ended, f"a start began {last_began - first_ended:.2f} s after another had ended"


def test_ten_blocks_sleeping_at_once_never_hold_the_loop(acreate: Callable[..., Awaitable[E2BExecutor]]) -> None:
    count = 10

    async def scenario() -> tuple[list[CodeOutput], float, float]:
        executors = await asyncio.gather(*(acreate(timeout_seconds=10.0) for _ in range(count)))
        clock = StepClock()
        started = time.monotonic()
        blocks = (executor.arun(f"import time\ntime.sleep(1)\n{n}") for n, executor in enumerate(executors))
        outputs = await asyncio.gather(*blocks)
        return outputs, time.monotonic() - started, clock.stop()

    outputs, took, late = run_async(scenario())
    assert [output.output for output in outputs] == list(range(count))
    assert took < count * 0.5, f"{count} one-second blocks took {took:.2f} s together"
    assert late < busy_seconds(0.2), f"the loop was held for {late:.3f} s"
