"""`blocking`, the driver every sync `run` of a local worker goes through: it does plain effects
itself and hands the rest to `events`, and either way the generator sees the same values and errors; and
its waits on a socket, which hold for any descriptor a busy program's socket gets, and which look
without sleeping for a moment first where asked."""

from __future__ import annotations

import os
import resource
import select
import socket
import threading
import time
from collections.abc import Generator
from types import SimpleNamespace
from typing import Any

import pytest

from codeward import effects
from codeward.effects import Effect, Readable, StreamingEffect, Writable, blocking, events
from tests.timing import busy_seconds


class Value(Effect):
    def __init__(self, value: Any) -> None:
        self.value = value

    def call(self) -> Any:
        if isinstance(self.value, BaseException):
            raise self.value
        return self.value


class Pieces(StreamingEffect):
    """Streams `pieces` as events, then returns their number."""

    def __init__(self, *pieces: str) -> None:
        self.pieces = pieces

    def stream(self) -> Generator[Any, None, Any]:
        yield from self.pieces
        return len(self.pieces)


def steps(log: list[str]) -> Generator[Any, Any, str]:
    try:
        first = yield Value(1)
        try:
            yield Value(ValueError("the effect failed"))
        except ValueError as error:
            log.append(f"caught {error}")
        counted = yield Pieces()
        second = yield Value(2)
        return f"{first}+{second}, {counted} pieces"
    finally:
        log.append("closed")


def test_plain_effects_values_and_errors_reach_the_generator_as_events_gives_them():
    for drive in (blocking, lambda s: _returned(events(s))):
        log: list[str] = []
        assert drive(steps(log)) == "1+2, 0 pieces"
        assert log == ["caught the effect failed", "closed"]


def test_a_streaming_effect_after_plain_ones_is_driven_and_its_result_sent():
    def streaming() -> Generator[Any, Any, Any]:
        got = yield Value("a")
        counted = yield Pieces()
        return got, counted, (yield Value("b"))

    assert blocking(streaming()) == ("a", 0, "b")


@pytest.mark.parametrize("event", ["an event", Pieces("printed")])
def test_an_event_is_refused_and_the_generator_closed(event):
    log: list[str] = []

    def yielding() -> Generator[Any, Any, None]:
        try:
            yield Value(1)
            yield event
            log.append("went on")
        finally:
            log.append("closed")

    with pytest.raises(TypeError, match="effect-only generator yielded the event"):
        blocking(yielding())
    assert log == ["closed"]


def _returned(driver: Generator[Any, Any, Any]) -> Any:
    try:
        item = next(driver)
    except StopIteration as stop:
        return stop.value
    raise AssertionError(f"an event: {item!r}")


@pytest.fixture
def many_files_open() -> Generator[None, None, None]:
    """More than a thousand files open, so the next socket's descriptor is past what ``select`` takes."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"this machine lets a process open {hard} files, too few to pass descriptor 1023")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200) if hard == resource.RLIM_INFINITY else hard, hard))
    opened = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        yield
    finally:
        for fd in opened:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_socket_past_descriptor_1023_is_waited_for(many_files_open: None) -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        assert ours.fileno() > 1023
        assert blocking(_ready(Readable(ours, time.monotonic() + 0.05))) is False  # nothing came by the deadline
        assert blocking(_ready(Writable(ours, time.monotonic() + 5))) is True
        theirs.send(b"x")
        assert blocking(_ready(Readable(ours, time.monotonic() + 5))) is True


def _ready(effect: Effect) -> Generator[Any, Any, bool]:
    ready: bool = yield effect
    return ready


def test_a_local_executor_runs_in_a_program_with_many_files_open(many_files_open: None) -> None:
    from codeward.executors import LocalExecutor

    with LocalExecutor() as executor:
        assert executor.run("sum(range(10))").output == 45
        assert executor.run("'again'").output == "again"


@pytest.fixture
def poll_timeouts(monkeypatch: pytest.MonkeyPatch) -> list[float | None]:
    """The timeout of every ``poll`` the effects make: 0 is a look, anything else a sleep."""
    timeouts: list[float | None] = []

    class Recorded:
        def __init__(self) -> None:
            self.poller = select.poll()

        def register(self, fd: int, mask: int) -> None:
            self.poller.register(fd, mask)

        def poll(self, timeout: float | None = None) -> list[tuple[int, int]]:
            timeouts.append(timeout)
            return self.poller.poll(timeout)

    monkeypatch.setattr(effects, "select", SimpleNamespace(poll=Recorded, POLLIN=select.POLLIN, POLLOUT=select.POLLOUT))
    return timeouts


def test_a_socket_ready_within_the_spin_is_found_without_sleeping(poll_timeouts: list[float | None]) -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        threading.Timer(0.01, theirs.send, [b"x"]).start()
        assert blocking(_ready(Readable(ours, time.monotonic() + 5, spin=busy_seconds(1)))) is True
        assert poll_timeouts and set(poll_timeouts) == {0}, poll_timeouts
        ours.recv(1)
        poll_timeouts.clear()
        threading.Timer(0.01, theirs.send, [b"x"]).start()
        assert blocking(_ready(Readable(ours, time.monotonic() + 5))) is True  # control: no spin
        assert any(timeout != 0 for timeout in poll_timeouts), poll_timeouts


def test_a_spin_ends_at_the_deadline_and_a_short_one_then_sleeps(poll_timeouts: list[float | None]) -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        started = time.monotonic()
        assert blocking(_ready(Readable(ours, started + 0.05, spin=60.0))) is False
        assert time.monotonic() - started < busy_seconds(1), "the spin outlived the deadline"
        poll_timeouts.clear()
        started = time.monotonic()
        assert blocking(_ready(Readable(ours, started + 0.3, spin=0.01))) is False
        assert time.monotonic() - started >= 0.3
        assert poll_timeouts[-1] != 0, "the wait past the spin should sleep, not look"
