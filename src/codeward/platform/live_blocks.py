"""A step's block output as events: what `agent.run(..., stream=True)` yields while the code runs.

An executor hands a block's output to a callback on the thread that runs the block, and a
generator cannot yield from inside a callback; so while the consumer reads the events, the
block runs on a helper thread (in the caller's context, so its span stays the step's child)
and its pieces cross over a queue. A consumer that stops reading, or a Ctrl-C while it waits,
interrupts the block, which then ends as an interrupted block does.
"""

from __future__ import annotations

import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TypeVar

from codeward.executors.base import OutputCallback

__all__ = ["BlockOutputDelta", "streamed_block"]

T = TypeVar("T")


@dataclass
class BlockOutputDelta:
    """A piece of what a step's code printed ("stdout", "stderr") or showed ("display"), as it came.

    It is the sandbox's own text (a stranger's): make it visible before a terminal shows it.
    """

    stream: str
    text: str


def streamed_block(
    run: Callable[[OutputCallback], T], interrupt: Callable[[], None]
) -> Generator[BlockOutputDelta, None, T]:
    """Call `run(on_output)` on a helper thread, yield its output as it comes, return what it returned
    (or raise what it raised). `interrupt` stops the block when the consumer goes away."""
    pieces: queue.SimpleQueue[BlockOutputDelta | None] = queue.SimpleQueue()
    outcome: list[T] = []
    failure: list[BaseException] = []

    def work() -> None:
        try:
            outcome.append(run(lambda stream, text: pieces.put(BlockOutputDelta(stream, text))))
        except BaseException as error:  # raised again on the consumer's thread
            failure.append(error)
        finally:
            pieces.put(None)

    thread = threading.Thread(target=contextvars.copy_context().run, args=(work,), name="codeward-block", daemon=True)
    thread.start()
    try:
        while (piece := pieces.get()) is not None:
            yield piece
    finally:
        if thread.is_alive():  # the consumer stopped reading, or was interrupted: so is the block
            with contextlib.suppress(NotImplementedError):
                interrupt()
        thread.join()
    if failure:
        raise failure[0]
    return outcome[0]
