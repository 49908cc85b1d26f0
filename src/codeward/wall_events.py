"""What a sandbox's walls refused while a block ran, counted and bounded (`BlockEvent`).

Each sandbox notes its refusals in an `EventLedger` (one a block): the same refusal twice
is one event counted twice, and past `MAX_EVENTS` distinct refusals the rest are counted in
one ``"and N more"`` event, so that a block refusing in a loop reports a short list.

What a sandbox reports is a stranger's: the local worker is the code's own process. The host
takes events only through `events_from_text` (the worker's wire form) or `checked_events`
(a saved run, a batch record), which keep at most `MAX_EVENTS` + 1 of them, known wall names
only, each detail plain text of at most `DETAIL_LIMIT` characters and each count bounded.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Any

from codeward.executors.base import BlockEvent

__all__ = [
    "DETAIL_LIMIT",
    "EVENTS_TEXT_LIMIT",
    "MAX_COUNT",
    "MAX_EVENTS",
    "WALLS",
    "EventLedger",
    "checked_events",
    "events_from_text",
    "events_text",
    "note",
    "plain_detail",
    "recording",
]

#: The walls a sandbox may name.
WALLS = ("policy", "seccomp", "landlock", "memory", "pids", "egress")
#: The distinct events a block keeps; the rest are counted in one more ("and N more").
MAX_EVENTS = 50
#: ASCII's controls, written as the escapes that name them.
_CONTROL_ESCAPES = {code: f"\\x{code:02x}" for code in (*range(32), 127)}
#: The characters of one event's detail.
DETAIL_LIMIT = 200
#: The highest count an event may carry.
MAX_COUNT = 10**12
#: The characters of a block's events in the worker's wire form: each line a wall, a count and a detail.
EVENTS_TEXT_LIMIT = (MAX_EVENTS + 1) * (DETAIL_LIMIT + 32)

_COUNT = re.compile(r"[0-9]{1,13}")
# The running block's ledger, by thread: a block runs on one thread, in a context of its own
# where it shares the host's process (so not a context variable).
_CURRENT = threading.local()


def plain_detail(text: object) -> str:
    """`text` as an event's detail, at most `DETAIL_LIMIT`: a label that a reader compares by eye and
    the ledger counts by, so each character outside printable ASCII is shown as its escape
    (``\\x1b``, ``\\u200b``, ``\\u043e``) and a run of spaces as one. Two details that look alike
    are then alike, whatever the font, the script's direction or the Unicode version of the Python
    that reads them, and nothing in one acts on a terminal or a page."""
    kept = (text if isinstance(text, str) else _scalar_text(text))[: DETAIL_LIMIT * 2]
    escaped = kept.encode("ascii", "backslashreplace").decode("ascii").translate(_CONTROL_ESCAPES)
    plain = " ".join(word for word in escaped.split(" ") if word)
    return plain if len(plain) <= DETAIL_LIMIT else plain[: DETAIL_LIMIT - 1] + "…"


def _scalar_text(value: object) -> str:
    """A detail that is not text (a file's, a caller's): a scalar as its text, anything else as its
    type's name, since the text of a file's 10 MB list would be made whole before it is cut."""
    kind = type(value)
    if value is None or kind in (bool, float) or (kind is int and value.bit_length() <= 64):  # type: ignore[attr-defined]
        return repr(value)
    return f"({kind.__name__})"


class EventLedger:
    """One block's refusals: distinct (wall, detail) pairs counted, at most `most` of them."""

    def __init__(self, most: int = MAX_EVENTS) -> None:
        self.most = most
        self._counts: dict[tuple[str, str], int] = {}
        self._more_kinds: set[tuple[str, str]] = set()
        self._more_count = 0
        self._more_wall = ""

    def record(self, wall: str, detail: object, count: int = 1) -> None:
        if count <= 0:
            return
        key = (wall, plain_detail(detail))
        if key in self._counts or len(self._counts) < self.most:
            self._counts[key] = min(MAX_COUNT, self._counts.get(key, 0) + count)
            return
        if len(self._more_kinds) < 10 * self.most:  # kinds told apart up to a bound, then counted alone
            self._more_kinds.add(key)
        self._more_wall = self._more_wall or wall
        self._more_count = min(MAX_COUNT, self._more_count + count)

    def events(self) -> list[BlockEvent]:
        found = [BlockEvent(wall, detail, count) for (wall, detail), count in self._counts.items()]
        if self._more_count:
            kinds = len(self._more_kinds)
            more = f"and {kinds}{'+' if kinds >= 10 * self.most else ''} more"
            found.append(BlockEvent(self._more_wall, more, self._more_count))
        return found

    def __bool__(self) -> bool:
        return bool(self._counts or self._more_count)


def recording(ledger: EventLedger) -> AbstractContextManager[EventLedger]:
    """While inside, `note` records into `ledger` (on this thread only)."""
    return _Recording(ledger)


class _Recording:
    """`recording`'s context manager: a class, not a generator's, as every block enters one."""

    def __init__(self, ledger: EventLedger) -> None:
        self.ledger = ledger
        self.outer: EventLedger | None = None

    def __enter__(self) -> EventLedger:
        self.outer = getattr(_CURRENT, "ledger", None)
        _CURRENT.ledger = self.ledger
        return self.ledger

    def __exit__(self, *exc_info: object) -> None:
        _CURRENT.ledger = self.outer


def note(wall: str, detail: object) -> None:
    """A refusal, recorded in the running block's ledger if a block is running here."""
    ledger: EventLedger | None = getattr(_CURRENT, "ledger", None)
    if ledger is not None:
        ledger.record(wall, detail)


def events_text(events: Iterable[BlockEvent]) -> str:
    """Events in the worker's wire form: one a line, ``wall<TAB>count<TAB>detail``."""
    return "\n".join(f"{e.wall}\t{e.count}\t{plain_detail(e.detail)}" for e in events)[:EVENTS_TEXT_LIMIT]


def events_from_text(text: object, most: int = MAX_EVENTS + 1, walls: Iterable[str] = WALLS) -> list[BlockEvent]:
    """The events in a worker's wire form, as the host keeps them: see the module's docstring.
    A line past `most`, naming a wall not among `walls` or out of shape, is left out."""
    if not isinstance(text, str) or not text:  # the usual block: nothing refused
        return []
    walls = frozenset(walls)
    found: list[BlockEvent] = []
    for line in text[:EVENTS_TEXT_LIMIT].split("\n", most)[:most]:
        wall, _, rest = line.partition("\t")
        count, _, detail = rest.partition("\t")
        if wall in walls and _COUNT.fullmatch(count):
            found.append(BlockEvent(wall, plain_detail(detail), min(MAX_COUNT, max(1, int(count)))))
    return _merged(found)


def checked_events(items: Any, most: int = MAX_EVENTS + 1) -> list[BlockEvent]:
    """Events read back from a file (a saved run, a batch record): a list of ``{"wall", "detail",
    "count"}`` objects, kept as `events_from_text` keeps a worker's."""
    if not isinstance(items, list):
        return []
    found: list[BlockEvent] = []
    for item in items[:most]:
        if not isinstance(item, dict) or item.get("wall") not in WALLS:
            continue
        count = item.get("count", 1)
        if type(count) is not int:
            count = 1
        found.append(BlockEvent(str(item["wall"]), plain_detail(item.get("detail", "")), min(MAX_COUNT, max(1, count))))
    return _merged(found)


def _merged(events: list[BlockEvent]) -> list[BlockEvent]:
    """`events` with those of one wall and detail counted as one, where first met: what a stranger
    sends (a worker is the code's own process, a file anyone's) was never counted by our ledger."""
    counts: dict[tuple[str, str], int] = {}
    for event in events:
        key = (event.wall, event.detail)
        counts[key] = min(MAX_COUNT, counts.get(key, 0) + event.count)
    if len(counts) == len(events):
        return events
    return [BlockEvent(wall, detail, count) for (wall, detail), count in counts.items()]
