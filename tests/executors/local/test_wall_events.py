"""What the local sandbox's policy refused while a block ran: `result.events`, on a real worker.

A refusal is an event even when the code catches it (that is what a reader of the run wants to
see: the code tried); the same refusal counts up, and a block refusing in a loop reports a short
list. The worker is the code's own process: what it reports is held to the same bound by the host.
"""

from __future__ import annotations

import sys

import pytest

from codeward import wall_events
from codeward.executors import LocalExecutor
from codeward.executors.base import BlockEvent, ExecutionError
from codeward.executors.local import process
from codeward.terminal_text import visible
from codeward.wall_events import DETAIL_LIMIT, MAX_EVENTS, events_from_text
from tests.executors.local.test_host_polices_worker import ALARM_OFF, CHANNEL

pytestmark = pytest.mark.timeout(120)

CAUGHT = """
try:
    import socket
except Exception:
    pass
for _ in range(3):
    try:
        getattr(1, "__subclasses__")
    except Exception:
        pass
'still ran'
"""


@pytest.mark.parametrize("isolation", ["process", "in_process"])
def test_a_refused_import_the_code_catches_is_still_an_event(isolation):
    with LocalExecutor(isolation=isolation) as sandbox:
        result = sandbox.run(CAUGHT)
        assert result.output == "still ran"
        assert result.events == [
            BlockEvent("policy", "import of socket", 1),
            BlockEvent("policy", "attribute __subclasses__", 3),
        ]
        assert sandbox.run("1 + 1").events == [], "each block has its own events"


def test_a_refusal_that_ends_the_block_is_on_its_error():
    with LocalExecutor() as sandbox:
        with pytest.raises(ExecutionError) as failed:
            sandbox.run("import os")
        assert failed.value.events == [BlockEvent("policy", "import of os", 1)]
        with pytest.raises(ExecutionError) as refused:  # refused before it ran: each breach an event
            sandbox.run("x = (1).__class__")
        assert [event.wall for event in refused.value.events] == ["policy"]
        assert "__class__" in refused.value.events[0].detail


def test_a_block_refusing_in_a_loop_reports_a_bounded_list():
    code = "for i in range(500):\n    try:\n        getattr(1, '_x' + str(i))\n    except Exception:\n        pass\n"
    with LocalExecutor() as sandbox:
        events = sandbox.run(code).events
    assert len(events) == MAX_EVENTS + 1
    assert events[0] == BlockEvent("policy", "attribute _x0", 1)
    assert events[-1] == BlockEvent("policy", f"and {500 - MAX_EVENTS} more", 500 - MAX_EVENTS)


#: Code that forges the worker's answer to its block, with many events, and ends its worker: with
#: every import allowed, the code owns the worker process and writes on its channel as it likes.
FLOOD = (
    CHANNEL
    + ALARM_OFF
    + """
lines = ["policy\\t7\\tforged " + str(i) for i in range(5000)]
lines.append("rootkit\\t1\\tan unknown wall")
lines.append("policy\\t1\\tcolour \\x1b[31m and a " + "long " * 200 + "detail")
header = {"op": "done", "seq": request_number(), "final": False, "logs": "", "events": "\\n".join(lines)}
write_all(frame(header, b"null"))
time.sleep(60)  # its own answer never comes: the executor is closed with the worker in this block
"""
)


def _forged_events() -> list[BlockEvent]:
    with LocalExecutor(authorized_imports=["*"], timeout_seconds=30) as sandbox:
        return sandbox.run(FLOOD).events


def test_a_worker_that_floods_the_host_with_events_is_held_to_the_bound(monkeypatch):
    with monkeypatch.context() as control:  # control: the host takes every line the worker sends
        control.setattr(wall_events, "EVENTS_TEXT_LIMIT", 10**9)
        control.setattr(process, "events_from_text", lambda text, **kept: events_from_text(text, most=10**9, **kept))
        assert len(_forged_events()) > 5000, "control: the flood did not reach the host"
    events = _forged_events()
    assert len(events) <= MAX_EVENTS + 1
    assert all(event.wall == "policy" for event in events)


#: Code past the policy writes into its own block's ledger: a seccomp refusal that never happened, and
#: an egress one for a sandbox with no network, each counted high; then one real refused system call.
FORGES = """
import gc, socket, codeward.wall_events as w
ledger = [o for o in gc.get_objects() if isinstance(o, w.EventLedger)][-1]
ledger.record("seccomp", "ptrace", 10**12)
ledger.record("egress", "connect 10.0.0.1:443", 10**12)
try:
    socket.socket()
except OSError:
    pass
'forged'
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux worker")
def test_a_worker_cannot_report_what_only_the_host_knows(monkeypatch):
    with monkeypatch.context() as control:  # control: the host takes any known wall from the worker
        control.setattr(process, "WORKER_WALLS", wall_events.WALLS)
        with LocalExecutor(authorized_imports=["*"]) as sandbox:
            forged = sandbox.run(FORGES).events
        assert BlockEvent("seccomp", "ptrace", 10**12) in forged, "control: the forged event did not reach the host"
    with LocalExecutor(authorized_imports=["*"]) as sandbox:
        events = sandbox.run(FORGES).events
    assert {event.wall for event in events} <= {"policy", "seccomp"}
    assert [event for event in events if event.wall == "seccomp"] == [BlockEvent("seccomp", "socket", 1)]


def test_events_from_a_stranger_keep_known_walls_and_plain_bounded_text():
    text = "\n".join(
        [
            "policy\t3\timport of socket",
            "rootkit\t1\tan unknown wall",
            "seccomp\tmany\ta count that is not a number",
            "memory\t99999999999999999999\ta count past any bound",
            "pids\t2\tcolour \x1b[31m, a bidi \u202e and " + "x" * 5000,
        ]
    )
    events = events_from_text(text)
    assert [event.wall for event in events] == ["policy", "pids"]
    assert events[0] == BlockEvent("policy", "import of socket", 3)
    assert "\x1b" not in events[1].detail and "\u202e" not in events[1].detail
    (hidden,) = events_from_text("policy\t1\tsock\u2060e\ufefft\xad")
    assert hidden.detail == "sock\\u2060e\\ufefft\\xad", "an invisible character would make a twin of a real name"
    assert len(events[1].detail) <= DETAIL_LIMIT


@pytest.mark.parametrize(
    "acting",
    ["\u061c", "\u180e", "\u200e", "\u206a", "\ufff9", "\U000e0041", "\ud800", "\x85", "\u2029"],
    ids=[
        "arabic-letter-mark",
        "mongolian-separator",
        "lrm",
        "inhibit-swapping",
        "annotation",
        "tag",
        "surrogate",
        "next-line",
        "paragraph",
    ],
)
def test_a_strangers_event_detail_holds_no_character_a_terminal_acts_on(acting):
    """Every format, control and separator character of a detail is shown as its escape, as
    `terminal_text` shows them, and so is everything else outside printable ASCII."""
    (event,) = events_from_text(f"policy\t1\timport of s{acting}ocket")
    shown = acting.encode("ascii", "backslashreplace").decode("ascii").replace("\x85", "\\x85")
    assert event.detail == f"import of s{shown}ocket" and event.detail.isascii()
    assert visible(event.detail) == event.detail


@pytest.mark.parametrize(
    "lookalike",
    [
        "import \u200bof os",  # a zero-width space, which blanking to a space would make a double space
        "import of \u043es",  # a Cyrillic o
        "import\u00a0of os",  # a no-break space
        "import of os\u3000",  # an ideographic space, which strip() keeps
        "import of os\u2800",  # a braille blank
        "import of o\u034fs",  # a combining grapheme joiner, which draws nothing
        "import of os\ufe0f",  # a variation selector
        "import of o\u0335s",  # a combining stroke
        "import of \u05d0 1 2",  # right to left: drawn reordered beside the numbers
    ],
)
def test_a_detail_that_would_draw_as_a_real_one_shows_what_it_is(lookalike):
    """Whether two texts draw alike depends on fonts, spacing, direction and Unicode's version: no
    list of characters settles it. A detail is a label, so all of it outside printable ASCII is
    shown as its escape, and a forged twin of a real refusal reads as the forgery it is."""
    (event,) = events_from_text(f"policy\t1\t{lookalike}")
    assert event.detail.isascii() and "\\" in event.detail, event.detail  # an escape: \\u.... or \\x..
    assert event.detail != "import of os"
    assert visible(event.detail) == event.detail


def test_a_strangers_events_of_one_detail_count_as_one():
    """The worker is the code's own process and a file is anyone's: what they send was never counted
    by our ledger, so the host merges what reads alike, as the ledger would have."""
    text = "policy\t1\timport of os\npolicy\t7\timport  of   os \nseccomp\t2\tsocket\npolicy\t2\timport of os"
    assert events_from_text(text) == [BlockEvent("policy", "import of os", 10), BlockEvent("seccomp", "socket", 2)]
    read = wall_events.checked_events(
        [{"wall": "memory", "detail": "oom", "count": 10**12}, {"wall": "memory", "detail": " oom", "count": 5}]
    )
    assert read == [BlockEvent("memory", "oom", wall_events.MAX_COUNT)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux worker")
def test_the_worker_answers_within_its_frame_limit_with_a_full_list_of_events():
    """The largest list a worker makes (every detail at its length) fits the header the host allows."""
    long_name = "y" * 300
    code = f"for i in range(200):\n    try:\n        getattr(1, '_' + str(i) + '{long_name}')\n    except Exception:\n        pass\n"
    with LocalExecutor() as sandbox:
        events = sandbox.run(code).events
    assert len(events) == MAX_EVENTS + 1 and all(len(event.detail) <= DETAIL_LIMIT for event in events)


def test_a_files_event_detail_that_is_not_text_is_never_made_text_whole():
    import tracemalloc

    numbers = list(range(1_000_000))  # a saved run's detail: ten megabytes of numbers in its JSON
    tracemalloc.start()
    try:
        events = wall_events.checked_events([{"wall": "policy", "detail": numbers}])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert events == [BlockEvent("policy", "(list)", 1)]
    assert peak < 1_000_000, peak  # str() of the list first would build about seven megabytes
    scalars = [{"wall": "memory", "detail": value} for value in (7, 2.5, None, True, 10**30)]
    assert [event.detail for event in wall_events.checked_events(scalars)] == ["7", "2.5", "None", "True", "(int)"]
