"""A blocking socket wait that looks before it sleeps (`effects.Readable`'s `spin`): the local
worker's two ends use it, so that a message due at once is taken without waking a sleeping reader.
It must never outlast its deadline, must still sleep once the spin is over, and an awaiting caller
must never spin (the event loop has other tasks to run)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from codeward import effects
from codeward.effects import Readable
from codeward.executors.local import LocalExecutor
from codeward.executors.local.channel import SPIN_SECONDS, Channel


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair()
    yield ours, theirs
    ours.close()
    theirs.close()


def send_later(sock: socket.socket, seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, sock.send, (b"x",))
    timer.start()
    return timer


def test_a_message_that_comes_while_it_spins_is_taken_without_a_sleeping_wait(pair, monkeypatch):
    ours, theirs = pair
    timeouts: list[float | None] = []
    real_select = effects.select.select

    def watched_select(readers, writers, errors, timeout=None):  # type: ignore[no-untyped-def]
        timeouts.append(timeout)
        return real_select(readers, writers, errors, timeout)

    monkeypatch.setattr(effects.select, "select", watched_select)
    send_later(theirs, 0.01).join()  # there before the spin ends, which is long
    assert Readable(ours, time.monotonic() + 30, spin=5.0).call() is True
    assert timeouts and all(timeout == 0 for timeout in timeouts), timeouts  # it looked; it never slept


def test_the_spin_never_outlasts_the_deadline(pair):
    ours, _ = pair
    started = time.monotonic()
    assert Readable(ours, started + 0.05, spin=5.0).call() is False
    assert time.monotonic() - started < 2.5  # the deadline ended it, not the five seconds of spin


def test_after_the_spin_it_sleeps_until_the_message_comes(pair):
    ours, theirs = pair
    timer = send_later(theirs, 0.3)
    started = time.monotonic()
    assert Readable(ours, started + 30, spin=0.01).call() is True
    assert time.monotonic() - started >= 0.25  # the message, not the end of the spin, ended it
    timer.join()


def test_an_awaiting_wait_never_spins(pair):
    ours, theirs = pair

    async def main() -> int:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.02)
                ticks += 1

        ticking = asyncio.create_task(ticker())
        timer = send_later(theirs, 0.3)
        assert await Readable(ours, time.monotonic() + 30, spin=5.0).acall() is True
        ticking.cancel()
        timer.join()
        return ticks

    assert asyncio.run(main()) >= 5  # the loop ran other tasks all the while


def test_a_channel_that_spins_takes_a_message_due_at_once_without_sleeping(pair, monkeypatch):
    ours, theirs = pair
    timeouts: list[float | None] = []
    real_select = effects.select.select

    def watched_select(readers, writers, errors, timeout=None):  # type: ignore[no-untyped-def]
        timeouts.append(timeout)
        return real_select(readers, writers, errors, timeout)

    monkeypatch.setattr(effects.select, "select", watched_select)
    sender = Channel(theirs)
    threading.Timer(0.01, sender.send, ({"op": "done"}, "42")).start()
    header, body, _ = Channel(ours, spin=5.0).receive(time.monotonic() + 30)
    assert (header, body) == ({"op": "done"}, "42")
    assert timeouts and all(timeout == 0 for timeout in timeouts), timeouts


def test_the_host_end_of_a_local_worker_spins():
    with LocalExecutor() as executor:
        assert executor.run("1 + 1").output == 2
        assert executor._worker._worker.channel.spin == SPIN_SECONDS  # type: ignore[union-attr]
    assert 0 < SPIN_SECONDS <= 0.001  # a look, not a busy wait: its CPU is paid on every message
