"""The system calls the worker's seccomp filter refuses, answered by the host and shown as events.

The code here has every import (`ctypes`, `os`): the policy is out of the way and it makes each
refused system call itself. Every one must still fail as before (EPERM), and be an event named by
the system call, counted by the host. And where the host does not answer at all, each is refused
still (ENOSYS) and nothing waits: the listener is the host's to answer, never to let a call through.
"""

from __future__ import annotations

import sys

import pytest

from codeward.executors import LocalExecutor
from codeward.executors.base import BlockEvent
from codeward.executors.local import seccomp_notices
from codeward.executors.local.confinement import missing_layers
from codeward.executors.local.seccomp_filter import REFUSED
from codeward.wall_events import MAX_EVENTS

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux worker"),
    pytest.mark.skipif("seccomp" in missing_layers(), reason="this machine has no seccomp filters"),
]

#: Every refused call by name, but the two that would make a process where the filter failed.
CALLED = [name for names in REFUSED.values() for name in names if name not in ("fork", "vfork")]

CALL_EACH = f"""
import ctypes, pyseccomp
libc = ctypes.CDLL(None, use_errno=True)
outcomes = {{}}
for name in {CALLED!r}:
    number = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)
    if number < 0:
        continue
    ctypes.set_errno(0)
    result = libc.syscall(number, 0, 0, 0, 0, 0, 0)
    outcomes[name] = (result, ctypes.get_errno())
outcomes
"""


def _strict() -> LocalExecutor:
    return LocalExecutor(authorized_imports=["*"], confinement="strict", timeout_seconds=60)


def test_each_refused_call_fails_as_before_and_is_an_event_the_host_counted():
    with _strict() as sandbox:
        result = sandbox.run(CALL_EACH)
        assert result.output, "no refused call is known here"
        assert {name: outcome for name, outcome in result.output.items() if outcome != (-1, 1)} == {}  # EPERM
        seccomp = [event for event in result.events if event.wall == "seccomp"]
        named = {event.detail: event.count for event in seccomp[:MAX_EVENTS]}
        assert set(named) <= set(result.output) and set(named.values()) == {1}
        assert sum(event.count for event in seccomp) == len(result.output)  # the rest: "and N more"
        assert len(seccomp) == min(len(result.output), MAX_EVENTS + 1)
        assert sandbox.run("1").events == [], "each block counts its own"


def test_a_refused_fork_is_an_event_and_the_code_goes_on():
    with _strict() as sandbox:
        result = sandbox.run("import os\ntry:\n    os.fork()\nexcept OSError as e:\n    n = e.errno\nn")
        assert result.output == 1
        assert BlockEvent("seccomp", "clone", 1) in result.events


def test_where_the_host_does_not_answer_each_call_is_refused_still_and_nothing_waits(monkeypatch):
    """The host's thread is replaced by one that drops the listener: the kernel answers ENOSYS."""

    def drop(self: seccomp_notices.SeccompNotices) -> None:
        listener = self._receive_listener()
        if listener is not None:
            seccomp_notices.os.close(listener)

    monkeypatch.setattr(seccomp_notices.SeccompNotices, "_serve", drop)
    with _strict() as sandbox:
        result = sandbox.run(CALL_EACH)
        assert {name: outcome for name, outcome in result.output.items() if outcome[0] != -1} == {}
        assert {errno for _, errno in result.output.values()} == {38}  # ENOSYS
        assert [event for event in result.events if event.wall == "seccomp"] == []


def test_a_flood_of_refused_calls_is_answered_at_a_bounded_rate_and_counted_as_one_event(monkeypatch):
    flood = "import socket, time\nn = 0\nend = time.monotonic() + 2\nwhile time.monotonic() < end:\n"
    flood += "    try:\n        socket.socket()\n    except OSError:\n        n += 1\nn"
    monkeypatch.setattr(seccomp_notices, "MOST_PER_SECOND", 10**9)  # control: no bound on the rate
    with _strict() as sandbox:
        assert sandbox.run(flood).output > 4 * 500, "control: the host answered no faster than the bound"
    monkeypatch.setattr(seccomp_notices, "MOST_PER_SECOND", 500)
    with _strict() as sandbox:
        result = sandbox.run(flood)
        (event,) = [event for event in result.events if event.wall == "seccomp"]
        assert event.detail == "socket" and event.count == result.output
        assert result.output <= 4 * 500, f"{result.output} answers in 2 s, past the rate of 500 a second"
