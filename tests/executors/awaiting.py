"""What the tests of executors' async API measure on the event loop: how late it runs a task that
only sleeps (a loop held by a blocking call runs it late), and how long a cancel takes to end."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
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


async def cancelled_after(seconds: float, running: Coroutine[Any, Any, Any]) -> float:
    """Run `running` as a task, cancel it after `seconds`, and return how long it took to end
    with `CancelledError` (which it must)."""
    task = asyncio.create_task(running)
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
