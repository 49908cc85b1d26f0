"""A kernel's messages as the host reads them: bounded in size and shape, and parsed off the event
loop when large.

The kernel runs the sandbox's code, so what it sends is a stranger's: code that reaches the kernel's
own session can send any message. jupyter_client would take a message of any size and shape and
parse it where it is read: a message of nested lists held an awaiting event loop for seconds in the
C parser, and grew the host by 25 bytes for each byte of it. Here a socket refuses a message past
its size (`bound`); a large one is walked by `codec.pieces`, which counts its lists and dicts (a
real message's size is in its strings: text, a value's codec text, an image), as an `Offloaded`
call: on a thread of the offload pool when awaited.
"""

from __future__ import annotations

import json
from typing import Any

import zmq
from jupyter_client.session import Session

from codeward.effects import Offloaded, Steps
from codeward.executors.codec import pieces

__all__ = ["MAX_CONTAINERS", "bound", "reading", "unpacking"]

#: The most lists and dicts one large message may hold: a display's JSON (a plot's spec) has
#: thousands; a hundred thousand is a hundred times more than seen, and 6 MB of objects at most.
MAX_CONTAINERS = 100_000


def bound(context: zmq.Context[Any], most: int) -> None:
    """Sockets made from `context` from now on disconnect a peer that sends a message of more than
    `most` bytes, before the message is held: the kernel's replies then stop, and the session sees
    a kernel that died."""
    context.setsockopt(zmq.MAXMSGSIZE, most)


def unpacking(session: Session) -> None:
    """Have `session` parse each part of a message with `_unpack`."""
    session.unpack = _unpack


def reading(session: Session, socket: zmq.Socket[Any]) -> Steps[tuple[dict[str, Any], int] | None]:
    """The next message on `socket` and its size in bytes, None when none waits; one larger than a
    piece is parsed as an `Offloaded` call. One that does not parse raises ValueError, or
    `CodecError` past a bound."""
    try:
        frames = socket.recv_multipart(zmq.NOBLOCK)
    except zmq.Again:
        return None
    size = sum(map(len, frames))
    if pieces.fits_one_piece(size):
        return _deserialized(session, frames), size
    return (yield Offloaded(_deserialized, session, frames)), size


def _deserialized(session: Session, frames: list[bytes]) -> dict[str, Any]:
    _, parts = session.feed_identities(frames)
    return session.deserialize(parts)


def _unpack(data: str | bytes) -> Any:
    """jupyter_client's JSON unpacker, with a large text walked and its containers counted."""
    text = data.decode("utf8", "replace") if isinstance(data, bytes) else data
    try:
        if not pieces.fits_one_piece(len(text)):
            return pieces.parse(text, json.JSONDecoder(), pieces.Journal(), None, containers=MAX_CONTAINERS)
        return json.loads(text)
    except RecursionError:
        raise ValueError("a message nested too deeply to parse") from None
