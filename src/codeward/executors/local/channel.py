"""The wire between the host and its local worker: framed messages over one connected socket.

A message is a small header (a dict, through the codec) and a body (text that is
already encoded: variables, a value, a tool request), sent as-is so that a large
DataFrame is not escaped into a second JSON string. Each frame starts with the
two lengths, so a reader knows what is coming before it reads it: the host
refuses a frame larger than its limit instead of growing to hold it.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from codeward.executors import codec

__all__ = ["Channel", "ChannelClosed", "ChannelError", "ChannelTimeout"]

_LENGTHS = struct.Struct("!IQ")  # header bytes, body bytes
_CHUNK = 65536  # a read asks for this much, so that a small message arrives in one call


class ChannelError(Exception):
    """The other side sent something that is not a message of ours."""


class ChannelClosed(ChannelError):
    """The other side is gone: end of stream."""


class ChannelTimeout(ChannelError):
    """Nothing complete arrived before the deadline."""


class Channel:
    """One end of the wire. `limit` caps what one received frame may hold, in bytes."""

    def __init__(self, sock: socket.socket, *, limit: int | None = None) -> None:
        self.sock = sock
        self.limit = limit
        self._pending = bytearray()  # bytes read ahead of the message being taken

    def send(self, header: dict[str, Any], body: str = "") -> None:
        head = codec.dumps(header).encode()
        data = body.encode("utf-8", "surrogatepass")
        frame = _LENGTHS.pack(len(head), len(data)) + head
        if len(data) < 65536:  # one write for the small messages that make up a round trip
            self.sock.sendall(frame + data)
        else:
            self.sock.sendall(frame)
            self.sock.sendall(data)

    def receive(self, deadline: float | None = None) -> tuple[dict[str, Any], str]:
        """The next message; `deadline` is a `time.monotonic()` instant, None to wait as long as it takes."""
        head_size, body_size = _LENGTHS.unpack(self._take(_LENGTHS.size, deadline))
        if self.limit is not None and head_size + body_size > self.limit:
            raise ChannelError(f"a message of {head_size + body_size:,} bytes, over the limit of {self.limit:,}")
        try:
            header = codec.loads(self._take(head_size, deadline).decode())
            body = self._take(body_size, deadline).decode("utf-8", "surrogatepass")
        except (UnicodeDecodeError, codec.CodecError) as error:
            raise ChannelError(f"a message that does not decode: {error}") from None
        if not isinstance(header, dict):
            raise ChannelError(f"a message whose header is a {type(header).__name__}, not a dict")
        return header, body

    def _take(self, size: int, deadline: float | None) -> bytes:
        """`size` bytes: what an earlier read brought in first, then the socket's."""
        if len(self._pending) >= size:
            taken = bytes(self._pending[:size])
            del self._pending[:size]
            return taken
        buffer = bytearray(size)
        got = len(self._pending)
        buffer[:got] = self._pending
        self._pending.clear()
        view = memoryview(buffer)
        while got < size:
            got += self._recv(view[got:] if size - got >= _CHUNK else None, deadline, view, got)
        return bytes(buffer)

    def _recv(self, into: memoryview | None, deadline: float | None, view: memoryview, got: int) -> int:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelTimeout("no answer before the deadline")
            self.sock.settimeout(left)
        try:
            if into is not None:  # a large remainder goes straight where it belongs
                count = self.sock.recv_into(into)
            else:  # a small one: read ahead what may follow, in the same call
                chunk = self.sock.recv(_CHUNK)
                count = len(chunk)
                room = len(view) - got
                view[got : got + min(room, count)] = chunk[:room]
                if count > room:
                    self._pending += chunk[room:]
                    count = room
        except TimeoutError:
            raise ChannelTimeout("no answer before the deadline") from None
        except OSError as error:
            raise ChannelClosed(f"the connection broke: {error}") from None
        finally:
            if deadline is not None:
                self.sock.settimeout(None)
        if count == 0:
            raise ChannelClosed("the other side closed the connection")
        return count

    def close(self) -> None:
        self.sock.close()
