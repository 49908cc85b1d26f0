"""What a worker sends never holds the event loop that awaits its block: a large value or tool request
is decoded in pieces on a thread, a header is refused before its parse when it holds more than plain
fields, and a message with fields of no use to the host ends the worker at the first one. Each test
first shows the harm with its rule taken away inside the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from codeward.executors import LocalExecutor
from codeward.executors.base import SandboxError
from codeward.executors.codec import pieces
from codeward.executors.local import channel, process
from codeward.platform.tools import tool
from tests.executors.awaiting import Heartbeat
from tests.executors.local.test_host_polices_worker import CHANNEL
from tests.timing import busy_seconds

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="attacks a Linux worker"),
]

#: The most the loop may run a 10 ms sleep late while a block's answer is read and decoded, besides
#: the interpreter's own pauses (a million objects made on any thread bring full garbage collections,
#: which hold every thread, and are measured apart): 0.03 to 0.07 s for the payload below on a quiet
#: two-core machine, 0.21 s on one that three test suites share. The whole text parsed at once holds
#: it 0.8 to 1.1 s on the quiet machine.
LATENESS = busy_seconds(0.1)
#: Three million floats: 30 MB that the C parser reads with no call back into Python, so that a
#: thread parsing it whole holds the interpreter's lock throughout, and nothing the collector tracks.
FLOATS = "[i * 0.5 for i in range(3_000_000)]"


@tool
def measure(rows: list) -> int:
    """Count the rows.

    Args:
        rows: the rows to count
    """
    return len(rows)


def _executor(**options: Any) -> LocalExecutor:
    return LocalExecutor(**{"timeout_seconds": 30, "max_value_size": 5_000_000, **options})


async def _held(code: str, executor: LocalExecutor) -> tuple[float, Any]:
    """The worst lateness of a heartbeat while `code` runs, and what the block gave (or raised)."""
    await executor.arun("0")  # the worker started
    beat = Heartbeat()
    try:
        outcome: Any = await executor.arun(code)
    except SandboxError as error:
        outcome = error
    return await beat.stop(), outcome


@contextlib.contextmanager
def _collections() -> Iterator[list[float]]:
    """The longest pause of the garbage collector within, in seconds, as a one-item list."""
    longest = [0.0]
    started = [0.0]

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            longest[0] = max(longest[0], time.perf_counter() - started[0])

    gc.callbacks.append(timed)
    try:
        yield longest
    finally:
        gc.callbacks.remove(timed)


@pytest.mark.parametrize(
    ("code", "answer"),
    [
        (FLOATS, lambda output: len(output) == 3_000_000 and output[-1] == 1_499_999.5),
        (f"measure({FLOATS})", lambda output: output == 3_000_000),
    ],
    ids=["value", "tool-request"],
)
def test_a_large_payload_is_decoded_without_holding_the_loop(code, answer, monkeypatch):
    whole = pieces.parse
    with monkeypatch.context() as control:  # control: the whole text to the C parser, on the pool's thread
        control.setattr(pieces, "parse", lambda text, decoder, journal, deadline: decoder.decode(text))
        with _executor() as executor, _collections() as collection:
            executor.send_tools({"measure": measure})
            held, output = asyncio.run(_held(code, executor))
        assert answer(output.output), output
        assert held > LATENESS + collection[0], f"control: a whole parse held the loop only {held:.3f} s"
    assert pieces.parse is whole
    with _executor() as executor, _collections() as collection:
        executor.send_tools({"measure": measure})
        held, output = asyncio.run(_held(code, executor))
    assert answer(output.output), output
    assert held < LATENESS + collection[0], f"the loop was held {held:.3f} s, a collection {collection[0]:.3f} s"


def test_a_large_payload_decodes_in_place_when_nothing_awaits_it(monkeypatch):
    """Blocking, there is no loop to keep: the C parser reads the whole text, at its full speed."""
    walked: list[int] = []
    monkeypatch.setattr(pieces, "parse", lambda text, *rest: walked.append(len(text)))
    with _executor() as executor:
        assert len(executor.run(FLOATS).output) == 3_000_000
    assert walked == []


#: A forged answer whose header holds three million empty lists (12 MB, within the header limit of
#: logs of a million characters): parsed, it holds the loop 0.4 s (Python 3.12) to 0.9 s (3.11);
#: then the worker sleeps, as if it had more to say.
NESTED = (
    CHANNEL + "write_all(frame({'op': 'done', 'seq': request_number(), 'final': False, 'logs': '', "
    "'x': [[] for _ in range(3_000_000)]}))\nimport time\ntime.sleep(20)"
)
#: Logs long enough that the header limit holds the forgery.
LONG_LOGS = {"authorized_imports": ["*"], "max_print_outputs_length": 1_000_000, "max_value_size": 20_000_000}


def test_a_header_of_containers_is_refused_before_it_is_parsed(monkeypatch):
    flat = channel._parse
    with monkeypatch.context() as control:  # control: the header parsed before it is looked at
        control.setattr(
            channel, "_parse", lambda frame, head_size, flat_headers, deadline=None: flat(frame, head_size, False)
        )
        with _executor(**LONG_LOGS) as executor:
            held, outcome = asyncio.run(_held(NESTED, executor))
        assert isinstance(outcome, SandboxError), outcome
        assert held > 0.25, f"control: parsing the header held the loop only {held:.3f} s"
    with _executor(**LONG_LOGS) as executor:
        started = time.monotonic()
        held, outcome = asyncio.run(_held(NESTED, executor))
        assert isinstance(outcome, SandboxError) and "more than plain fields" in outcome.message, outcome
        assert time.monotonic() - started < busy_seconds(2), "the worker was not stopped at once"
        assert held < LATENESS, f"the loop was held {held:.3f} s"
        assert executor.run("1 + 1").output == 2


#: Twenty pieces of output of one character, each with two megabytes beside it in a field the host
#: has no use for: the output budget counts the character, and the junk would go by uncounted.
JUNK = (
    CHANNEL + "for _ in range(20):\n    write_all(frame({'op': 'output', 'seq': request_number(), "
    "'stream': 'stdout', 'text': 'x', 'junk': 'y' * 2_000_000}))\nimport time\ntime.sleep(1)\n'end'"
)
#: The same flood with its junk as blanks between the fields JSON allows, which the fields' check
#: cannot see: two megabytes of header for each character of output.
PADDED = (
    CHANNEL + "for _ in range(20):\n"
    "    head = b'{\"op\":\"output\",' + b' ' * 2_000_000 + "
    "json.dumps({'seq': request_number(), 'stream': 'stdout', 'text': 'x'}).encode()[1:]\n"
    "    write_all(struct.pack('!IQ', len(head), 0) + head)\n"
    "import time\ntime.sleep(1)\n'end'"
)


class _Anything:
    def issuperset(self, other: Any) -> bool:
        return True


@pytest.mark.parametrize(
    ("flood", "lifted", "refusal"),
    [
        # the size's bound would see these fields too: the control lifts both
        (JUNK, {"_FIELDS": {op: _Anything() for op in process._FIELDS}, "OUTPUT_HEADER_ROOM": 2**40}, "fields"),
        (PADDED, {"OUTPUT_HEADER_ROOM": 2**40}, "padded past what its text takes"),
    ],
    ids=["fields of no use", "blanks"],
)
def test_output_with_more_than_its_text_ends_the_worker_at_the_first(flood, lifted, refusal, monkeypatch):
    heard: list[str] = []
    with monkeypatch.context() as control:  # control: the rules lifted
        for name, value in lifted.items():
            control.setattr(process, name, value)
        with _executor(authorized_imports=["*"]) as executor:
            assert executor.run(flood, on_output=lambda stream, text: heard.append(text)).output == "end"
        assert len(heard) == 20, "control: the junk did not reach the host"
    heard.clear()
    with _executor(authorized_imports=["*"]) as executor:
        with pytest.raises(SandboxError, match=refusal):
            executor.run(flood, on_output=lambda stream, text: heard.append(text))
        assert heard == []
        assert executor.run("1 + 1").output == 2
