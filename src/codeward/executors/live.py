"""Live output: what a block prints and shows, handed to the caller's callback while it runs;
and `BlockStops`, how a block is stopped from another thread.

Every executor reads its sandbox's output on one host thread (a kernel's iopub socket,
the worker's socket, E2B's stream) and hands each piece to a `LiveOutput` there, so the
rules live here once: the text is the sandbox's own (a stranger's), delivered as the
block's logs hold it; no more than `limit` characters in all reach the callback, the
length the logs keep, whatever the sandbox sends; and a callback that raises gets nothing
more, while the executor stops the block and raises that exception from `run` once the
block has ended, so the sandbox stays usable.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["STREAMS", "BlockStops", "LiveOutput", "OutputCallback", "display_text", "heard_by_all"]

#: Seconds between two stops sent to the same block, while it runs.
STOP_AGAIN_SECONDS = 0.5

#: `on_output(stream, text)`: stream is "stdout", "stderr" or "display" (the plain text of a display).
OutputCallback = Callable[[str, str], object]

STREAMS = ("stdout", "stderr", "display")


class LiveOutput:
    """One block's deliveries to `callback` (None: nothing is delivered), within `limit` characters."""

    def __init__(self, callback: OutputCallback | None, limit: int) -> None:
        self._callback = callback
        self._left = limit
        #: The exception the callback raised; the executor stops the block and raises it.
        self.failure: Exception | None = None

    @property
    def wanted(self) -> bool:
        """Whether anything more would reach the callback: a sandbox need not send what would not."""
        return self._callback is not None and self.failure is None and self._left > 0

    def __call__(self, stream: str, text: str) -> None:
        """Deliver `text`, or the part of it that is left of the limit; past it, or after the
        callback failed, nothing is delivered."""
        if not isinstance(text, str) or not self.wanted:
            return
        text = "".join((text,))  # a str subclass of the code's own becomes plain text: none of its methods run here
        if not text:
            return
        piece = text[: self._left]
        self._left -= len(piece)
        assert self._callback is not None
        try:
            self._callback(stream, piece)
        except Exception as error:  # the caller's own: it ends the block, and is raised once the block ends
            self.failure = error

    def raise_failure(self) -> None:
        """Raise what the callback raised, if it did: called once the block it stopped has ended."""
        if self.failure is not None:
            raise self.failure


def heard_by_all(*listeners: OutputCallback | None) -> OutputCallback | None:
    """One callback that hands each piece to every listener given, in order; None when none is."""
    given = [listener for listener in listeners if listener is not None]
    if len(given) < 2:
        return given[0] if given else None

    def heard(stream: str, text: str) -> None:
        for listener in given:
            listener(stream, text)

    return heard


def display_text(bundle: dict[str, str]) -> str:
    """What a display shows as text: its plain text, or the kind of thing it is (an image)."""
    plain = bundle.get("text/plain")
    if plain:
        return plain if plain.endswith("\n") else plain + "\n"
    return f"[{next(iter(bundle), 'display')}]\n"


class BlockStops:
    """`interrupt()` for a sandbox that is stopped by a signal: the stop is sent at once, and again
    every `again` seconds while the same block runs, since a sandbox ignores one that comes before
    its block began (the block cannot tell it from a late one). Between blocks nothing is sent, and
    a stop is sent only while its block is marked running, so none lands in the next block."""

    def __init__(self, again: float = STOP_AGAIN_SECONDS) -> None:
        self.again = again
        self._lock = threading.Lock()
        self._block = 0
        self._stop: Callable[[], None] | None = None

    def running(self, stop: Callable[[], None]) -> BlockStops:
        """While the block runs (``with stops.running(stop):``), `interrupt()` calls `stop`. The stops
        are their own context manager, not a generator's: this is on every block's path."""
        with self._lock:
            self._block += 1
            self._stop = stop
        return self

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self._stop = None

    def interrupt(self) -> None:
        with self._lock:
            block = self._block
        self._send(block)

    def _send(self, block: int) -> None:
        with self._lock:
            if self._stop is None or self._block != block:
                return
            self._stop()
        again = threading.Timer(self.again, self._send, (block,))
        again.daemon = True
        again.start()
