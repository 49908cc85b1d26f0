"""`Executor.arun` for an executor with no native way to wait: its blocking `run` in the shared pool.

The block's output crosses to the event loop's thread, where `on_output` is called, as a native
`arun` calls it; a callback that raises stops the block (`interrupt()`), and its exception is
raised once the block has ended, as `run` does. Cancelling the awaiting task interrupts the block
and waits for it to end, so the executor is left between blocks, usable, and never mid-block.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from codeward.effects import offload
from codeward.executors.live import OutputCallback

if TYPE_CHECKING:
    from codeward.executors.base import CodeOutput, Executor

__all__ = ["offloaded_run", "stop_on_cancel"]

#: After a cancel, how long the block may take to stop by `interrupt()` before the executor is closed.
CANCEL_GRACE_SECONDS = 5.0


async def offloaded_run(executor: Executor, code: str, on_output: OutputCallback | None) -> CodeOutput:
    loop = asyncio.get_running_loop()
    failure: list[Exception] = []
    heard = None
    if on_output is not None:
        callback = on_output

        def on_loop(stream: str, text: str) -> None:
            if failure:
                return
            try:
                callback(stream, text)
            except Exception as error:  # stops the block; raised once it has ended
                failure.append(error)
                with contextlib.suppress(NotImplementedError):
                    executor.interrupt()

        def heard(stream: str, text: str) -> None:
            loop.call_soon_threadsafe(on_loop, stream, text)

    output = await stop_on_cancel(executor, offload(executor.run, code, heard))
    await asyncio.sleep(0)  # the pieces the block's last prints queued on the loop are heard first
    if failure:
        raise failure[0]
    return output


async def stop_on_cancel(executor: Executor, running: asyncio.Future[CodeOutput]) -> CodeOutput:
    """Await a block running elsewhere; on cancel, interrupt it and wait for its end (closing the
    executor if it does not stop within `CANCEL_GRACE_SECONDS`), then raise `CancelledError`."""
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        with contextlib.suppress(NotImplementedError):
            executor.interrupt()
        done, _ = await asyncio.wait([running], timeout=CANCEL_GRACE_SECONDS)
        if done:
            running.exception()  # the interrupted block's error is the cancel's, taken so none is left unheard
        else:
            await offload(executor.close)
        raise
