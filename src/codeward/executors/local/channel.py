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
        head_size, body_size = _LENGTHS.unpack(self._read(_LENGTHS.size, deadline))
        if self.limit is not None and head_size + body_size > self.limit:
            raise ChannelError(f"a message of {head_size + body_size:,} bytes, over the limit of {self.limit:,}")
        try:
            header = codec.loads(self._read(head_size, deadline).decode())
            body = self._read(body_size, deadline).decode("utf-8", "surrogatepass")
        except (UnicodeDecodeError, codec.CodecError) as error:
            raise ChannelError(f"a message that does not decode: {error}") from None
        if not isinstance(header, dict):
            raise ChannelError(f"a message whose header is a {type(header).__name__}, not a dict")
        return header, body

    def _read(self, size: int, deadline: float | None) -> bytes:
        view = memoryview(bytearray(size))
        got = 0
        while got < size:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ChannelTimeout("no answer before the deadline")
                self.sock.settimeout(left)
            try:
                count = self.sock.recv_into(view[got:])
            except TimeoutError:
                raise ChannelTimeout("no answer before the deadline") from None
            except OSError as error:
                raise ChannelClosed(f"the connection broke: {error}") from None
            finally:
                if deadline is not None:
                    self.sock.settimeout(None)
            if count == 0:
                raise ChannelClosed("the other side closed the connection")
            got += count
        return bytes(view)

    def close(self) -> None:
        self.sock.close()
