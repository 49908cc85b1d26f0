"""Blocking calls offloaded from async code run in threads of their own, each with its own loop for
jupyter_client's blocking API, whatever the caller's thread ran before."""

from __future__ import annotations

import asyncio
import threading

import pytest

from codeward.effects import offload


def test_blocking_jupyter_calls_offloaded_at_once_after_one_on_this_thread() -> None:
    utils = pytest.importorskip("jupyter_core.utils")

    async def pause() -> int:
        await asyncio.sleep(0.2)
        return threading.get_ident()

    blocking_pause = utils.run_sync(pause)
    blocking_pause()  # jupyter_core now keeps this thread's loop in the context the tasks below copy

    async def together() -> list[int]:
        return await asyncio.gather(*(offload(blocking_pause) for _ in range(4)))

    threads = asyncio.run(together())
    assert len(set(threads)) > 1  # they ran at once, on several threads, each on a loop of its own
