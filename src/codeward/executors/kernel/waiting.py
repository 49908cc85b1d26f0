"""The effects a kernel session waits on (`codeward.effects`): its ZeroMQ sockets, and the start of
something that must be released if the waiter goes away.

Blocking, a session waits with `zmq.Poller.poll`, as it always did; awaiting, the event loop watches
each socket's `zmq.FD`, so no thread waits for a block. That descriptor is edge-triggered (it says
that zmq's state changed, not that a message waits), so `zmq.EVENTS` is read before each wait and
again after each wake-up: a message already queued is never waited for, and a wake-up with nothing
to read waits again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import zmq

from codeward.effects import Effect, offload

__all__ = ["Owned", "SocketsReady"]


class SocketsReady(Effect):
    """Wait up to `seconds` until one of the poller's sockets has a message; the result lists the
    sockets that have one (none: the time passed)."""

    def __init__(self, poller: zmq.Poller, seconds: float) -> None:
        self.poller = poller
        self.seconds = max(seconds, 0.0)

    def call(self) -> list[zmq.Socket[Any]]:
        return [socket for socket, _ in self.poller.poll(int(self.seconds * 1000))]

    async def acall(self) -> list[zmq.Socket[Any]]:
        sockets = [socket for socket, _ in self.poller.sockets]
        deadline = time.monotonic() + self.seconds
        loop = asyncio.get_running_loop()
        while True:
            ready = [socket for socket in sockets if socket.get(zmq.EVENTS) & zmq.POLLIN]
            left = deadline - time.monotonic()
            if ready or left <= 0:
                return ready
            woken = loop.create_future()

            def wake(woken: asyncio.Future[None] = woken) -> None:
                if not woken.done():
                    woken.set_result(None)

            descriptors = [socket.get(zmq.FD) for socket in sockets]
            for descriptor in descriptors:
                loop.add_reader(descriptor, wake)
            try:
                await asyncio.wait([woken], timeout=left)
            finally:
                for descriptor in descriptors:
                    loop.remove_reader(descriptor)


class Owned(Effect):
    """A blocking call that makes something to release (a kernel, a container): made in place when
    blocking, in `offload`'s pool when awaited. A waiter cancelled meanwhile cannot stop the call, so
    it waits for it and releases what it made, then lets the cancel go on: nothing is left running."""

    def __init__(self, make: Callable[[], Any], release: Callable[[Any], object]) -> None:
        self.make = make
        self.release = release

    def call(self) -> Any:
        return self.make()

    async def acall(self) -> Any:
        making = offload(self.make)
        try:
            return await asyncio.shield(making)
        except asyncio.CancelledError:
            await asyncio.wait([making])
            if making.exception() is None:
                await offload(self.release, making.result())
            raise
