"""What the tests of executors' async API measure on the event loop: how late it runs a task that
only sleeps (a loop held by a blocking call runs it late), how long one step of a task holds it,
and how long a cancel takes to end."""

from __future__ import annotations

import asyncio
import collections.abc
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest


class Heartbeat:
    """A task on the running loop that sleeps 10 ms at a time and keeps the worst lateness it saw."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._beat())

    async def _beat(self) -> None:
        while not self._stop.is_set():
            asked = time.monotonic()
            await asyncio.sleep(0.01)
            self.worst = max(self.worst, time.monotonic() - asked - 0.01)

    async def stop(self) -> float:
        """End the heartbeat; return the worst lateness, in seconds."""
        self._stop.set()
        await self._task
        return self.worst


class _TimedSteps(collections.abc.Coroutine):  # type: ignore[type-arg]
    """A task's coroutine with each of its steps (one `send` or `throw`: the time the task holds
    the loop) timed into `steps`."""

    def __init__(self, coroutine: Any, steps: list[float]) -> None:
        self._coroutine, self._steps = coroutine, steps

    def _timed(self, step: Callable[..., Any], *args: Any) -> Any:
        started = time.monotonic()
        try:
            return step(*args)
        finally:
            self._steps.append(time.monotonic() - started)

    def send(self, value: Any) -> Any:
        return self._timed(self._coroutine.send, value)

    def throw(self, *args: Any) -> Any:
        return self._timed(self._coroutine.throw, *args)

    def close(self) -> None:
        self._coroutine.close()

    def __await__(self) -> Any:
        return self._coroutine.__await__()


class StepClock:
    """Times each step of each task started on the running loop from now on: how long one task
    holds the loop. Where many sandboxes answer at once, a `Heartbeat` measures all their work
    done in one turn of the loop, which a busy machine stretches though none of them blocked it;
    this measures each. (A single large message parsed on the loop is the heartbeat's to catch.)"""

    def __init__(self) -> None:
        self.steps: list[float] = []
        self._loop = asyncio.get_running_loop()
        self._loop.set_task_factory(self._task)

    def _task(self, loop: asyncio.AbstractEventLoop, coroutine: Any, **options: Any) -> asyncio.Task[Any]:
        return asyncio.Task(_TimedSteps(coroutine, self.steps), loop=loop, **options)

    def stop(self) -> float:
        """Stop timing; return the longest step, in seconds."""
        self._loop.set_task_factory(None)
        assert self.steps, "no task was started on the loop while the clock ran"
        return max(self.steps)


async def cancelled_after(
    seconds: float, running: Coroutine[Any, Any, Any], ready: asyncio.Event | None = None
) -> float:
    """Run `running` as a task, cancel it after `seconds`, and return how long it took to end
    with `CancelledError` (which it must). With `ready`, the `seconds` count from when it is set
    (the block said it had begun): a sandbox's start and a model's step on a busy machine can
    outlast any fixed wait, and a cancel that lands before the block tries nothing of it."""
    task = asyncio.create_task(running)
    if ready is not None:
        began = asyncio.create_task(ready.wait())
        await asyncio.wait([began, task], timeout=120, return_when=asyncio.FIRST_COMPLETED)
        if not began.done():
            began.cancel()
            if task.done():
                task.result()  # what ended it before it was ready
            task.cancel()
            raise AssertionError("the block did not begin within 120 s")
    await asyncio.sleep(seconds)
    asked = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return time.monotonic() - asked


def process_runs(pid: int) -> bool:
    """Whether the process lives (a zombie waiting to be reaped does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
