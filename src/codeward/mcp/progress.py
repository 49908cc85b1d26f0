"""A `run_python` call's output as it comes, sent to an MCP client as progress notifications.

A client asks for them the protocol's way, with a progress token on its call. The block's
output is what the sandbox's live output gives (within the executor's output budget); the
thread that runs the block only adds it to a buffer, and the event loop sends what has
gathered every tenth of a second, so a slow client never holds the block and a block that
prints a character at a time sends a few messages, not thousands.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
from mcp.server.context import ServerRequestContext

from codeward.executors.live import OutputCallback

__all__ = ["with_progress"]

T = TypeVar("T")
SEND_EVERY_SECONDS = 0.1
#: How long the last notification may wait for a client that stopped reading (a shutdown waits no longer).
LAST_SEND_SECONDS = 1.0
_log = logging.getLogger(__name__)


class _Progress:
    """The output heard since the last notification, and how much was sent before it."""

    def __init__(self, ctx: ServerRequestContext[Any]) -> None:
        self._ctx = ctx
        self._lock = threading.Lock()
        self._pieces: list[str] = []
        self._sent = 0
        self._deaf = False  # the client stopped taking notifications: the call goes on without them

    def heard(self, stream: str, text: str) -> None:
        with self._lock:
            self._pieces.append(text)

    async def send(self) -> None:
        with self._lock:
            text, self._pieces = "".join(self._pieces), []
        if not text or self._deaf:
            return
        self._sent += len(text)
        try:
            await self._ctx.session.report_progress(self._sent, message=text)
        except Exception as error:  # a closed stream, a client gone: its answer cannot arrive either
            self._deaf = True
            _log.debug("progress notifications stopped: %s", error)

    async def send_forever(self) -> None:
        while True:
            await anyio.sleep(SEND_EVERY_SECONDS)
            await self.send()


async def with_progress(ctx: ServerRequestContext[Any], run: Callable[[OutputCallback | None], Awaitable[T]]) -> T:
    """`run(on_output)`, its output sent to the client while it runs if the call asked for progress."""
    if not (ctx.meta or {}).get("progress_token"):
        return await run(None)
    progress = _Progress(ctx)
    async with anyio.create_task_group() as sending:
        sending.start_soon(progress.send_forever)
        try:
            result = await run(progress.heard)
        finally:
            sending.cancel_scope.cancel()
            with anyio.move_on_after(LAST_SEND_SECONDS, shield=True):
                await progress.send()  # what came after the last tick arrives before the answer
    return result
