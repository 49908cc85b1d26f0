"""What in-process sandbox code writes to stdout or stderr, caught into its logs.

Libraries the code calls print by themselves (`DataFrame.info()`, a warning) and
the code may write to `sys.stderr` when `sys` is allowed: all of it belongs in
the block's logs, not on the host's terminal. The standard streams are swapped,
while any block runs, for a stand-in that routes each write by thread, so other
host threads keep writing where they did. Each write says which stream it was
written to, so that live output (see `BlockOutput`) tells stdout from stderr.
"""

from __future__ import annotations

import sys
import threading
from contextlib import AbstractContextManager
from typing import Any, Protocol

from codeward.executors.kernel.cells import BoundedText
from codeward.executors.live import LiveOutput
from codeward.executors.local.limits import BlockInterrupted

__all__ = ["BlockOutput", "capture_output", "keep_routed"]


class _Sink(Protocol):
    def write(self, text: str, stream: str = "stdout") -> Any: ...


_target = threading.local()
_lock = threading.Lock()
_active = 0


class _RoutedStream:
    """A standard stream that sends a capturing thread's writes to its sink."""

    def __init__(self, original: Any, name: str) -> None:
        self.original = original
        self.name = name

    def write(self, text: str) -> int:
        sink = getattr(_target, "sink", None)
        if sink is None:
            return int(self.original.write(text) or 0)
        sink.write(text, self.name)
        return len(text)

    def flush(self) -> None:
        if getattr(_target, "sink", None) is None:
            self.original.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.original, name)


def _swap(install: bool) -> None:
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if install and not isinstance(stream, _RoutedStream):
            setattr(sys, name, _RoutedStream(stream, name))
        elif not install and isinstance(stream, _RoutedStream):
            setattr(sys, name, stream.original)


class BlockOutput:
    """One block's printed text: its logs keep head and tail within `limit` characters, and `live`
    is handed each piece as it is written. The callback writes where it would without the block
    (the host's own terminal), and one that failed stops the block where it printed."""

    def __init__(self, limit: int, live: LiveOutput | None = None) -> None:
        self._logs = BoundedText(limit)
        self._live = live

    def write(self, text: str, stream: str = "stdout") -> None:
        self._logs.add(text)
        live = self._live
        if live is not None and live.wanted:
            sink, _target.sink = getattr(_target, "sink", None), None
            try:
                live(stream, text)
            finally:
                _target.sink = sink
            if live.failure is not None:
                raise BlockInterrupted

    def text(self) -> str:
        return self._logs.text()


def keep_routed() -> None:
    """Keep the standard streams swapped for the rest of this process: a worker, whose every block
    captures its output, need not put them back after each block and swap them in at the next."""
    global _active
    with _lock:
        _active += 1
        _swap(install=True)


def capture_output(sink: _Sink) -> AbstractContextManager[None]:
    """Send this thread's stdout and stderr writes to `sink` until the block ends."""
    return _Capture(sink)


class _Capture:
    """`capture_output`'s context manager: a class, not a generator's, as every block enters one."""

    def __init__(self, sink: _Sink) -> None:
        self.sink = sink

    def __enter__(self) -> None:
        global _active
        with _lock:
            _active += 1
            _swap(install=True)
        _target.sink = self.sink

    def __exit__(self, *exc_info: object) -> None:
        global _active
        _target.sink = None
        with _lock:
            _active -= 1
            if not _active:
                _swap(install=False)
