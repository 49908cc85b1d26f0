"""JSON parsed in pieces, so that a thread decoding a large payload lets other threads run.

CPython's JSON parser is C that holds the interpreter's lock for the whole text: a payload of
tens of megabytes held an event loop on another thread for seconds, whatever thread decoded it.
Here each container that may be large (its text does not fit in `PIECE` characters) is walked in
Python, and only what fits in a piece goes to the C parser: a list's items a piece at a time, up
to the last comma in the piece when that comma parts two items, else one by one. Between pieces
the interpreter can switch threads, so no piece holds the others for more than a few milliseconds.

What a container's text takes is only known once it is parsed, so each is first parsed from a
copy of `FIRST_TRY` and then of `PIECE` characters; a copy that ends inside the container fails,
and the hook's work for it is undone (`Journal`) before it is walked instead. Walked containers
nest in Python's own frames: a large text nested more than a few hundred containers deep fails
as a `RecursionError`, where the C parser takes a thousand or more.
"""

from __future__ import annotations

import json
import json.decoder
import json.scanner
import time
from collections.abc import Callable
from typing import Any

from .errors import CodecError

__all__ = ["PIECE", "Journal", "fits_one_piece", "parse"]

#: The most characters the C parser takes at once: about a millisecond of the slowest JSON
#: (empty lists) on a quiet machine.
PIECE = 1 << 14


def fits_one_piece(size: int) -> bool:
    """Whether a text of `size` characters (or bytes) is parsed whole where it is: it holds the
    loop no longer than one piece of a walk would, so walking it or sending it to a thread gains nothing."""
    return size <= PIECE


#: The first copy a container is parsed from: most containers are small, and copying a whole piece
#: for each of a million small ones would cost more than the parse.
FIRST_TRY = 1 << 9
_WHITESPACE: Any = json.decoder.WHITESPACE.match  # type: ignore[attr-defined]
_SCANSTRING: Any = json.decoder.scanstring  # type: ignore[attr-defined]
_BLANK = " \t\n\r"
_OPENINGS = ("[", "{")
_CLOCK_STRIDE = 0x3FF  # the walk looks at the clock once every this many elements, plus one
_TOO_SHORT = (StopIteration, ValueError)  # how the C parser says a copy ended inside a value


class Journal:
    """What the hook handed out (a binary part, a blob) since a mark, so that a failed try gives it back."""

    def __init__(self) -> None:
        self.taken: list[tuple[list[Any], int, Any]] = []

    def take(self, store: list[Any], index: int) -> Any:
        """`store[index]`, handed out once: later takes find None."""
        value = store[index]
        store[index] = None
        self.taken.append((store, index, value))
        return value

    def mark(self) -> int:
        return len(self.taken)

    def undo(self, mark: int) -> None:
        while len(self.taken) > mark:
            store, index, value = self.taken.pop()
            store[index] = value


def parse(
    text: str, decoder: json.JSONDecoder, journal: Journal, deadline: float | None, containers: int | None = None
) -> Any:
    """The value of `text`, as `decoder.decode(text)` gives it. Past `deadline` (a monotonic
    instant), `CodecError`: the walk looks at the clock between pieces, as the hook does within them.

    With `containers`, every list and dict is walked and counted, and a text of more is refused:
    for texts whose size is in their strings (a kernel's messages), where a megabyte of ``[],``
    would make 25 MB of lists."""
    return _Walk(text, decoder, journal, deadline, containers).whole()


class _Walk:
    """One walk of one text. A class rather than closures that call one another, whose cycle would
    hold the text until the collector ran (a flood of large messages held a hundred megabytes)."""

    def __init__(
        self, text: str, decoder: json.JSONDecoder, journal: Journal, deadline: float | None, containers: int | None
    ) -> None:
        self.text = text
        self.scan = json.scanner.c_make_scanner(decoder)  # type: ignore[attr-defined]
        self.strict = decoder.strict
        self.hook: Callable[[dict[str, Any]], Any] | None = decoder.object_hook
        self.journal = journal
        self.deadline = deadline
        self.containers = containers
        self.counted = 0
        self.memo: dict[str, str] = {}
        self.end_of_text = len(text)
        self.tries = (FIRST_TRY, PIECE) if containers is None else ()

    def whole(self) -> Any:
        found, end = self.value(self.blank(0))
        end = self.blank(end)
        if end != self.end_of_text:
            raise json.JSONDecodeError("Extra data", self.text, end)
        return found

    def blank(self, at: int) -> int:
        return _WHITESPACE(self.text, at).end()  # type: ignore[no-any-return]

    def on_time(self, count: int) -> None:
        if not count & _CLOCK_STRIDE and _past(self.deadline):
            raise CodecError("decoding the payload ran past the time limit of the code that sent it")

    def value(self, at: int) -> tuple[Any, int]:
        text, end_of_text = self.text, self.end_of_text
        opening = text[at : at + 1]
        if opening not in _OPENINGS or (end_of_text - at <= FIRST_TRY and self.containers is None):
            return _scanned(self.scan, text, at)
        self.on_time(0)
        for size in self.tries:
            if end_of_text - at <= size:
                return _scanned(self.scan, text, at)
            mark = self.journal.mark()
            try:
                found, end = self.scan(text[at : at + size], 0)
            except _TOO_SHORT:
                self.journal.undo(mark)
                continue
            return found, at + end  # a container ends with its bracket, inside the piece
        return self.walked(opening, at)

    def walked(self, opening: str, at: int) -> tuple[Any, int]:
        if self.containers is not None:
            self.counted += 1
            if self.counted > self.containers:
                raise CodecError(f"refused a text of more than {self.containers:,} lists and dicts")
        return self.walked_list(at + 1) if opening == "[" else self.walked_dict(at + 1)

    def walked_list(self, at: int) -> tuple[Any, int]:
        text, scan, blank, on_time = self.text, self.scan, self.blank, self.on_time
        items: list[Any] = []
        at = blank(at)
        if text[at : at + 1] == "]":
            return items, at + 1
        run_from = at if self.containers is None else self.end_of_text  # where a run of items may be tried again
        while True:
            on_time(len(items))
            if at >= run_from:
                on_time(0)  # a run takes a piece's time: the clock is looked at before each
                run = self.items_in_a_piece(at)
                if run is not None:
                    items += run[0]
                    at = blank(run[1])
                    continue
                run_from = at + PIECE  # a run failed here: the next is tried a piece further on
            if text[at : at + 1] in _OPENINGS:
                item, at = self.value(at)
            else:
                item, at = _scanned(scan, text, at)  # a scalar: no copy to try
            items.append(item)
            delimiter = text[at : at + 1]
            if delimiter in _BLANK:
                at = blank(at)
                delimiter = text[at : at + 1]
            if delimiter == ",":
                at += 1
                if text[at : at + 1] in _BLANK:
                    at = blank(at)
            elif delimiter == "]":
                return items, at + 1
            else:
                raise json.JSONDecodeError("Expecting ',' delimiter", text, at)

    def items_in_a_piece(self, at: int) -> tuple[list[Any], int] | None:
        """The items of a list from `at` to a comma within a piece, and where the next item begins;
        None when no comma tried parts two items (one in a string or a container leaves a piece
        that does not parse as items alone). The commas tried: the last, and the last after a
        closing bracket (where a list of containers parts its items)."""
        piece = self.text[at : at + PIECE]
        last = piece.rfind(",")
        closed = max(piece.rfind("},"), piece.rfind("],")) + 1
        for cut in (last, closed) if closed != last else (last,):
            if cut <= 0:
                continue
            wrapped = "[" + piece[:cut] + "]"
            mark = self.journal.mark()
            try:
                found, end = self.scan(wrapped, 0)
            except _TOO_SHORT:
                found, end = None, 0
            if end == len(wrapped):
                return found, at + cut + 1
            self.journal.undo(mark)
        return None

    def walked_dict(self, at: int) -> tuple[Any, int]:
        text, blank, hook = self.text, self.blank, self.hook
        members: dict[str, Any] = {}
        at = blank(at)
        if text[at : at + 1] == "}":
            return (hook(members) if hook else members), at + 1
        while True:
            if text[at : at + 1] != '"':
                raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, at)
            self.on_time(len(members))
            key, at = _SCANSTRING(text, at + 1, self.strict)
            key = self.memo.setdefault(key, key)
            at = blank(at)
            if text[at : at + 1] != ":":
                raise json.JSONDecodeError("Expecting ':' delimiter", text, at)
            members[key], at = self.value(blank(at + 1))
            at = blank(at)
            delimiter = text[at : at + 1]
            if delimiter == "}":
                return (hook(members) if hook else members), at + 1
            if delimiter != ",":
                raise json.JSONDecodeError("Expecting ',' delimiter", text, at)
            at = blank(at + 1)


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() > deadline


def _scanned(scan: Any, text: str, at: int) -> tuple[Any, int]:
    try:
        return scan(text, at)  # type: ignore[no-any-return]
    except StopIteration as stop:
        raise json.JSONDecodeError("Expecting value", text, stop.value) from None
