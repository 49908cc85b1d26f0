"""Stops a running block from outside: the time limit and the memory allowance.

A thread watches the block and, when its deadline passes or the process grows
past the allowance, raises a signal *inside* the thread that runs the block
(`PyThreadState_SetAsyncExc`). CPython delivers it at the next bytecode, so a
loop stops while it runs, in the model's code or in Python code it called.
It keeps raising every `interval` seconds until the block ends, so a
``finally`` that loops forever is stopped too.

A long single C call (a regular expression that backtracks) never reaches the
next bytecode and keeps the GIL, so no thread can act. When the block runs in
the main thread and nobody else uses SIGVTALRM, a CPU-time timer
(`setitimer(ITIMER_VIRTUAL)`) also runs: the kernel delivers its signal without
the GIL, and C code that checks for signals (the regex engine does) lets our
handler raise the time signal. Other long C calls are bounded by the size caps
(see `limits`).

The signal can also land in host code that the interpreter runs in that thread
on its own: a garbage-collector callback, a weakref callback, a ``__del__``.
There it becomes an "unraisable" exception; `_drop_stray_signals` keeps those out
of ``sys.unraisablehook`` (the next signal, an interval later, stops the block).
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass

from codeward.executors.local.limits import (
    BlockInterrupted,
    MemoryLimitReached,
    SandboxSignal,
    TimeLimitReached,
)

__all__ = ["WATCHDOG", "AlarmWatchdog", "Watchdog", "resident_bytes"]

_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
_set_async_exc.argtypes = (ctypes.c_ulong, ctypes.py_object)
#: `signal`'s C functions, without the enum wrapping of its Python ones (see `_can_use_cpu_timer`).
_c_signal = importlib.import_module("_signal")
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes() -> int | None:
    """This process's resident memory, where the platform says it cheaply (Linux)."""
    try:
        return int(os.pread(_statm(os.getpid()), 128, 0).split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return None


@functools.lru_cache(maxsize=1)
def _statm(pid: int) -> int:
    """The process's statm, kept open and read from its start each time: every block
    reads it, and opening costs more than reading. A forked child opens its own."""
    return os.open(f"/proc/{pid}/statm", os.O_RDONLY | os.O_CLOEXEC)


@dataclass(eq=False)
class _Watch:
    thread_id: int
    deadline: float
    memory_ceiling: int | None
    fired: type[SandboxSignal] | None = None
    previous_handler: object = None
    done: bool = False
    #: Set when the block is being stopped from outside: a sleep in it wakes at once. Made by the
    #: block's first sleep (most blocks never sleep, and an Event costs a tiny block a tenth of its time).
    stopping: threading.Event | None = None

    def sleep(self, seconds: float) -> None:
        """Sleep up to `seconds`, or until the block is stopped from outside (`wake`)."""
        with _STOPPING:
            if self.stopping is None:
                self.stopping = threading.Event()
                if self.fired is not None:  # stopped before its first sleep
                    self.stopping.set()
        self.stopping.wait(seconds)

    def wake(self) -> None:
        with _STOPPING:
            if self.stopping is not None:
                self.stopping.set()


#: Orders a watch's first sleep with its `wake`: one of them sees what the other did.
_STOPPING = threading.Lock()


class Watchdog:
    """One watching thread for the whole process, shared by every executor.

    It polls every `interval` seconds while blocks run, and for `linger`
    seconds after the last one ended, so that back-to-back blocks do not wake
    it (a wake-up costs a GIL hand-over on a busy machine); then it sleeps
    until the next block.
    """

    def __init__(self, interval: float = 0.02, linger: float = 2.0) -> None:
        self.interval = interval
        self.linger = linger
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._watches: set[_Watch] = set()
        self._thread: threading.Thread | None = None
        self._idle = True
        self._last_active = 0.0

    def arm(self, seconds: float, memory_allowance: int | None) -> _Watch:
        """Start watching the calling thread for `seconds` and `memory_allowance` bytes of growth."""
        ceiling = None
        if memory_allowance is not None:
            current = resident_bytes()
            ceiling = None if current is None else current + memory_allowance
        watch = _Watch(threading.get_ident(), time.monotonic() + seconds, ceiling)
        _drop_stray_signals()
        if _can_use_cpu_timer():
            watch.previous_handler = _c_signal.signal(signal.SIGVTALRM, functools.partial(_on_cpu_timer, watch))
            signal.setitimer(signal.ITIMER_VIRTUAL, seconds, self.interval)
        with self._wake:
            self._watches.add(watch)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="codeward-local-watchdog", daemon=True)
                self._idle = False  # it starts polling: no need to wake it
                self._thread.start()
            elif self._idle:
                self._wake.notify()
        return watch

    def disarm(self, watch: _Watch) -> type[SandboxSignal] | None:
        """Stop watching; cancel a signal raised but not yet delivered. Returns what fired.

        A signal can land while this runs; it is caught and the disarming retried,
        so none escapes into the host after the block.
        """
        while True:
            try:
                with self._lock:
                    watch.done = True
                    self._watches.discard(watch)
                    self._last_active = time.monotonic()
                if watch.previous_handler is not None:
                    signal.setitimer(signal.ITIMER_VIRTUAL, 0)
                    _c_signal.signal(signal.SIGVTALRM, watch.previous_handler)
                    watch.previous_handler = None
                if watch.fired is not None:
                    _set_async_exc(watch.thread_id, ctypes.py_object())  # clears a pending one
                return watch.fired
            except SandboxSignal:
                continue

    def interrupt(self, watch: _Watch) -> None:
        """Stop the watched block from another thread: `BlockInterrupted` is raised in it at its next
        bytecode, and a sleep in it wakes. A block that has ended is left alone."""
        with self._lock:
            if watch.done:
                return
            watch.fired = watch.fired or BlockInterrupted
            _set_async_exc(watch.thread_id, ctypes.py_object(watch.fired))
            watch.wake()

    def _loop(self) -> None:
        with self._wake:
            while True:
                if not self._watches and time.monotonic() - self._last_active > self.linger:
                    self._idle = True
                    self._wake.wait()
                    self._idle = False
                    continue
                for watch in list(self._watches):
                    reached = _check(watch)
                    if reached is not None:
                        watch.fired = watch.fired or reached
                        _set_async_exc(watch.thread_id, ctypes.py_object(watch.fired))
                self._wake.wait(self.interval)


#: The process's watchdog.
WATCHDOG = Watchdog()


#: The `stopping` of every alarm's watch, which nothing sets: such a block is stopped by signals alone
#: (the alarm's, the host's SIGINT), which wake a sleep by themselves; one shared saves a block making one.
_SIGNALLED_ONLY = threading.Event()


class AlarmWatchdog:
    """The time limit for a process whose main thread runs every block: the local worker.

    The kernel's real-time timer (SIGALRM) alone does what the watching thread does: its
    handler raises the time signal at the next bytecode, or inside C code that checks for
    signals (the regex engine), and again every `interval` seconds until the block ends.
    No thread polls, so no thread competes with the block for the interpreter between
    blocks; memory needs no polling where the operating system caps the whole process.
    """

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self._current: _Watch | None = None
        self._installed = False

    def arm(self, seconds: float, memory_allowance: int | None) -> _Watch:
        if not self._installed:
            signal.signal(signal.SIGALRM, self._on_alarm)
            _drop_stray_signals()
            self._installed = True
        watch = _Watch(threading.get_ident(), time.monotonic() + seconds, None, stopping=_SIGNALLED_ONLY)
        self._current = watch
        signal.setitimer(signal.ITIMER_REAL, seconds, self.interval)
        return watch

    def disarm(self, watch: _Watch) -> type[SandboxSignal] | None:
        while True:  # a signal may land anywhere here; the disarming is retried until done
            try:
                watch.done = True
                signal.setitimer(signal.ITIMER_REAL, 0)
                self._current = None
                return watch.fired
            except SandboxSignal:
                continue

    def _on_alarm(self, signum: int, frame: object) -> None:
        watch = self._current
        if watch is not None and not watch.done and time.monotonic() >= watch.deadline:
            watch.fired = watch.fired or TimeLimitReached
            raise TimeLimitReached


def _check(watch: _Watch) -> type[SandboxSignal] | None:
    if time.monotonic() >= watch.deadline:
        return TimeLimitReached
    if watch.memory_ceiling is not None:
        current = resident_bytes()
        if current is not None and current > watch.memory_ceiling:
            return MemoryLimitReached
    return None


def _drop_stray_signals() -> None:
    """Put a filter in front of ``sys.unraisablehook`` that drops our signals.

    A signal that landed in a finalizer is not lost work: the watchdog raises it
    again into the block. Reporting it would print noise to the user's stderr, or
    fail a test run whose hook collects unraisable exceptions. Re-wrapped when
    someone replaced the hook since.
    """
    current = sys.unraisablehook
    if getattr(current, "drops_sandbox_signals", False):
        return

    def hook(unraisable: object) -> None:
        if isinstance(getattr(unraisable, "exc_value", None), SandboxSignal):
            return
        current(unraisable)  # type: ignore[arg-type]

    hook.drops_sandbox_signals = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook


def _on_cpu_timer(watch: _Watch, signum: int, frame: object) -> None:
    """SIGVTALRM handler: raise the time signal if the watched block is past its deadline."""
    if not watch.done and time.monotonic() >= watch.deadline:
        watch.fired = watch.fired or TimeLimitReached
        raise TimeLimitReached


def _can_use_cpu_timer() -> bool:
    """Signals can be handled only in the main thread; and SIGVTALRM must be nobody else's.

    `_c_signal`'s functions, not `signal`'s: those look each handler up among an enum's members
    first, and for one that is none of them (ours) build, then drop, an error holding its repr."""
    return (
        hasattr(signal, "SIGVTALRM")
        and threading.get_ident() == threading.main_thread().ident
        and _c_signal.getsignal(signal.SIGVTALRM) == signal.SIG_DFL
    )
