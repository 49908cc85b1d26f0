"""The wire between the host and its local worker: framed messages over one connected socket.

A message is a small header (a JSON object of plain fields: an operation, flags, texts),
a body (text that is already encoded by the codec: variables, a value, a tool request),
sent as-is so that a large DataFrame is not escaped into a second JSON string, and the
codec's large binary parts (array buffers) as raw bytes after it, their sizes listed in
the header, so that they are neither base64-encoded nor scanned. Each frame starts with the two lengths, so a reader knows what is coming
before it reads it: the host refuses a frame larger than its limit instead of
growing to hold it. A small message arrives in one read, and one read may bring
the start of the next.
"""

from __future__ import annotations

import codecs
import json
import socket
import struct
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from codeward.effects import Readable, Steps, Writable, blocking

__all__ = ["TEXT_LIMIT", "Channel", "ChannelClosed", "ChannelError", "ChannelTimeout"]

#: The most characters of an error's message, and of its traceback, that a worker puts in a header:
#: with the logs (capped by `max_print_outputs_length`) they bound what a header may hold.
TEXT_LIMIT = 100_000

_LENGTHS = struct.Struct("!IQ")  # header bytes, body bytes
_CHUNK = 65536  # what one read asks for: a whole small message, and maybe the next
_HEADER = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":"))
_HEADER_DECODER = json.JSONDecoder()
#: What a flat header's fields hold (besides the parts' sizes): JSON's scalars.
FLAT = (str, int, float, bool, type(None))
_FLAT_TYPES = frozenset(FLAT)  # checked against a header's values' types in C, twice a message
#: What a large frame is read in: the buffer grows by what comes, not by what was announced.
_LARGE_READ = 1 << 20
#: What a body with lone surrogates is decoded in, the deadline checked between pieces: CPython's
#: ``surrogatepass`` handler runs once per surrogate, about fifty times slower than plain UTF-8.
_DECODED_PIECE = 1 << 20


class ChannelError(Exception):
    """The other side sent something that is not a message of ours."""


class ChannelClosed(ChannelError):
    """The other side is gone: end of stream."""


class ChannelTimeout(ChannelError):
    """Nothing complete arrived before the deadline."""


class Channel:
    """One end of the wire. `limit` caps what one received frame may hold, in bytes, and
    `header_limit` its header, which is parsed whole as JSON and so must stay small. With
    `flat_headers`, a received header whose fields hold more than scalars (and the parts' sizes) is
    refused before it is parsed: the C parser holds the interpreter's lock for a whole header, and a
    header of nested containers takes a hundred times longer to parse than one of text."""

    def __init__(
        self,
        sock: socket.socket,
        *,
        limit: int | None = None,
        header_limit: int | None = None,
        flat_headers: bool = False,
    ) -> None:
        self.sock = sock
        self._spin = 0.0  # see `spin_next`
        self.limit = limit
        self.header_limit = header_limit
        self.flat_headers = flat_headers
        self._pending = bytearray()  # bytes read ahead of the message being taken
        #: Whether a message was stopped after part of it was sent (the other side's next read is garbled).
        self.cut = False
        #: The bytes of the last header received: what its fields took, escapes and blanks included.
        self.header_size = 0

    def spin_next(self, seconds: float) -> None:
        """Let the next blocking wait for a message look for `seconds` before it sleeps (see
        `effects.Readable`): once, so that what the other side sends (a trickle of messages, each
        just past the last wait) cannot keep this side looking, a core's worth of CPU time."""
        self._spin = seconds

    def _spin_now(self) -> float:
        """The look `spin_next` allowed, taken: the waits after it sleep at once."""
        spin, self._spin = self._spin, 0.0
        return spin

    def send(
        self, header: dict[str, Any], body: str = "", parts: Sequence[Any] = (), deadline: float | None = None
    ) -> None:
        """Send one message; with a `deadline`, a reader that stops taking it cannot hold the sender
        past that instant (`ChannelTimeout`; the frame may then be cut, so the channel is done)."""
        pieces, total = _framed(header, body, parts)
        sent = [0]
        if len(pieces) == 1 and self._sent_at_once(pieces[0], deadline, sent):
            return
        blocking(self._writing_all(pieces, total, deadline, sent))

    def sending(
        self, header: dict[str, Any], body: str = "", parts: Sequence[Any] = (), deadline: float | None = None
    ) -> Steps[None]:
        """`send`, as steps that yield each wait for the socket (`effects`)."""
        pieces, total = _framed(header, body, parts)
        sent = [0]
        if len(pieces) == 1 and self._sent_at_once(pieces[0], deadline, sent):
            return
        yield from self._writing_all(pieces, total, deadline, sent)

    def _sent_at_once(self, frame: bytes, deadline: float | None, sent: list[int]) -> bool:
        """Write a small frame before any wait, as a socket almost always has room for it: whether
        it all went. What did not is then written after a wait for room, from `sent` on."""
        sent[0] = self._attempt(self.sock.send, frame, deadline) or 0
        return sent[0] == len(frame)

    def _writing_all(self, pieces: list[Any], total: int, deadline: float | None, sent: list[int]) -> Steps[None]:
        """Write `pieces` from byte `sent` on, each wait for room yielded; stopped midway, the frame is
        cut, and the channel says so (`cut`): the reader's next frame would be garbled."""
        skip = sent[0]
        try:
            for piece in pieces:
                left = memoryview(piece).cast("B")[skip:]
                skip = 0
                while left:
                    count = self._attempt(self.sock.send, left, deadline)
                    if count is None:
                        if not (yield Writable(self.sock, deadline)):
                            raise ChannelTimeout("the message was not taken before the deadline")
                        continue
                    sent[0] += count
                    left = left[count:]
        except BaseException:
            self.cut = self.cut or 0 < sent[0] < total
            raise

    def receive(
        self, deadline: float | None = None, whole: Callable[[], AbstractContextManager[None]] | None = None
    ) -> tuple[dict[str, Any], str, list[bytes]]:
        """The next message; `deadline` is a `time.monotonic()` instant, None to wait as long as it takes.
        With `whole`, the frame is read inside it once its first bytes are there (a signal that would
        stop the reader mid-frame is held back until the frame is whole).

        A deadline already past ends it even when whole messages wait in the buffer: a sender that
        queued many ahead does not buy time."""
        if deadline is not None or whole is not None:
            return blocking(self.receiving(deadline, whole))
        while wanted := self._wanted():  # as long as it takes (the worker's wait for the host): blocking reads
            self._pending += self._read(wanted)
        return self._taken()

    def receiving(
        self, deadline: float | None = None, whole: Callable[[], AbstractContextManager[None]] | None = None
    ) -> Steps[tuple[dict[str, Any], str, list[bytes]]]:
        """`receive`, as steps that yield each wait for the socket (`effects`). Stopped at a wait (a
        cancelled task), the channel keeps what it read, and the next receive goes on from there."""
        if deadline is not None and time.monotonic() > deadline:
            raise ChannelTimeout("no answer before the deadline")
        if whole is None:
            return (yield from self._message(deadline))
        if not self._pending and not (yield Readable(self.sock, deadline)):
            raise ChannelTimeout("no answer before the deadline")  # nothing of a frame has come: nothing lost
        with whole():
            return (yield from self._message(deadline))

    def _message(self, deadline: float | None) -> Steps[tuple[dict[str, Any], str, list[bytes]]]:
        while wanted := self._wanted():
            if not (yield Readable(self.sock, deadline, self._spin_now())):
                raise ChannelTimeout("no answer before the deadline")
            got = self._attempt(self.sock.recv, wanted, deadline)
            if got is not None:
                self._pending += got
        return self._taken(deadline)

    def _wanted(self) -> int:
        """How much to read next for the frame being taken; 0 once it is whole. A small frame is read in
        chunks that may bring the start of the next; a large one only as far as its end, the buffer
        grown by what arrives (the length it announced is a claim)."""
        have = len(self._pending)
        if have < _LENGTHS.size:
            return _CHUNK
        head_size, body_size = _LENGTHS.unpack_from(self._pending)
        self._check_sizes(head_size, body_size)
        missing = _LENGTHS.size + head_size + body_size - have
        if missing <= 0:
            return 0
        return _CHUNK if missing <= _CHUNK else min(missing, _LARGE_READ)

    def _taken(self, deadline: float | None = None) -> tuple[dict[str, Any], str, list[bytes]]:
        """The whole frame at the buffer's start, parsed by `deadline`, and taken out of it."""
        head_size, body_size = _LENGTHS.unpack_from(self._pending)
        self.header_size = head_size
        size = _LENGTHS.size + head_size + body_size
        if size == len(self._pending):  # the usual case: the buffer holds this frame alone
            frame = bytes(self._pending)
            self._pending.clear()
        else:
            with memoryview(self._pending) as pending:
                frame = bytes(pending[:size])  # one copy, however large the frame
            del self._pending[:size]
        return _parse(frame, head_size, self.flat_headers, deadline)

    def _check_sizes(self, head_size: int, body_size: int) -> None:
        if self.header_limit is not None and head_size > self.header_limit:
            raise ChannelError(f"a message header of {head_size:,} bytes, over the limit of {self.header_limit:,}")
        if self.limit is not None and head_size + body_size > self.limit:
            raise ChannelError(f"a message of {head_size + body_size:,} bytes, over the limit of {self.limit:,}")

    def _read(self, most: int) -> bytes:
        """A blocking read of up to `most` bytes."""
        got: bytes = self._attempt(self.sock.recv, most, None, flags=0)
        return got

    def _attempt(self, move: Any, argument: Any, deadline: float | None, flags: int = socket.MSG_DONTWAIT) -> Any:
        """``move(argument)`` (the socket's send or recv) without blocking (unless `flags` say
        otherwise): what it gives, or None when the socket is not ready. A deadline past ends it even
        when the socket is ready."""
        if deadline is not None and deadline <= time.monotonic():
            raise ChannelTimeout("no answer before the deadline")
        try:
            got = move(argument, flags)
        except BlockingIOError:
            return None
        except OSError as error:
            raise ChannelClosed(f"the connection broke: {error}") from None
        if not got:
            raise ChannelClosed("the other side closed the connection")
        return got

    def close(self) -> None:
        self.sock.close()


def _framed(header: dict[str, Any], body: str, parts: Sequence[Any]) -> tuple[list[Any], int]:
    """A message's frame as the pieces to write, and their bytes in all: a small one in one piece, for
    one write; a large one in its parts, which are written from where they are, not copied."""
    sizes = [memoryview(part).nbytes for part in parts]
    head = _header_text(header, sizes).encode("ascii")
    data = body.encode("utf-8", "surrogatepass")
    size = len(data) + sum(sizes)
    frame = _LENGTHS.pack(len(head), size) + head
    if size < _CHUNK:
        return [b"".join([frame, data, *parts])], len(frame) + size
    return [frame, data, *parts], len(frame) + size


def _json_encoder() -> Callable[[Any], str]:
    """`_HEADER.encode`, or where the C encoder is there (CPython's) one made once and kept: `encode`
    makes a new one for every call, which is two thirds of the time a small header takes."""
    make = getattr(json.encoder, "c_make_encoder", None)
    try:
        encoder = make(  # type: ignore[misc]
            None, _HEADER.default, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, False
        )  # no markers: a header is a dict of ours, never circular
    except TypeError:  # no C encoder, or one that takes other arguments
        return _HEADER.encode
    return lambda value: "".join(encoder(value, 0))


_to_json = _json_encoder()


def _header_text(header: dict[str, Any], sizes: list[int]) -> str:
    text = _to_json(header)
    if _FLAT_TYPES.issuperset(map(type, header.values())):
        # In a flat header every opening bracket but the object's own and the parts' list is inside a string:
        # written as an escape there, so that a reader can count a header's containers before it parses it.
        # Two replaces, not a `str.translate`, which looks each character up in a dict: ten times slower.
        text = "{" + text[1:].replace("{", "\\u007b").replace("[", "\\u005b")
    if sizes:
        text = text[:-1] + ("," if header else "") + '"parts":' + _to_json(sizes) + "}"
    return text


def _parts_fit(sizes: list[Any], room: int) -> bool:
    """Whether the parts' sizes a header lists are sizes, and fit in the `room` after it."""
    return all(type(n) is int and n >= 0 for n in sizes) and sum(sizes) <= room


def _parse(
    frame: bytes, head_size: int, flat: bool, deadline: float | None = None
) -> tuple[dict[str, Any], str, list[bytes]]:
    start = _LENGTHS.size
    head = frame[start : start + head_size]
    if flat and head.count(b"{") + head.count(b"[") > 2:
        raise ChannelError("a message header that holds more than plain fields")
    try:
        text = head.decode("utf-8")
        header, end = _HEADER_DECODER.raw_decode(text)  # `json.loads` less its steps for bytes of any encoding
    except (ValueError, RecursionError) as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ChannelError(f"a message that does not decode: {error}") from None
    if end != len(text):
        raise ChannelError("a message that does not decode: more after its header's end")
    if not isinstance(header, dict):
        raise ChannelError(f"a message whose header is a {type(header).__name__}, not a dict")
    sizes = header.pop("parts", [])
    if flat and not _FLAT_TYPES.issuperset(map(type, header.values())):
        raise ChannelError("a message header that holds more than plain fields")
    rest = len(frame) - start - head_size
    if not isinstance(sizes, list) or (sizes and not _parts_fit(sizes, rest)):
        raise ChannelError("a message whose parts do not fit in it")
    at = len(frame) - sum(sizes)
    try:
        body = _text(memoryview(frame)[start + head_size : at], deadline)
    except UnicodeDecodeError as error:
        raise ChannelError(f"a message that does not decode: {error}") from None
    parts = []
    for size in sizes:
        parts.append(frame[at : at + size])
        at += size
    return header, body, parts


def _text(data: memoryview, deadline: float | None) -> str:
    """A body's text, decoded where it lies (no copy of it first). Text with lone surrogates (which
    `send` writes with ``surrogatepass``) is decoded in pieces, the deadline checked between them: a
    frame of them holds the interpreter's lock for seconds if decoded whole."""
    try:
        return str(data, "utf-8")
    except UnicodeDecodeError:
        pass
    decoder = codecs.getincrementaldecoder("utf-8")("surrogatepass")
    pieces = []
    for at in range(0, len(data), _DECODED_PIECE):
        if deadline is not None and time.monotonic() > deadline:
            raise ChannelTimeout("no answer before the deadline")
        pieces.append(decoder.decode(data[at : at + _DECODED_PIECE]))
    pieces.append(decoder.decode(b"", final=True))
    return "".join(pieces)
