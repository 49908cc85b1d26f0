"""Stops a running block from outside: the time limit and the memory allowance.

A thread watches the block and, when its deadline passes or the process grows
past the allowance, raises a signal *inside* the thread that runs the block
(`PyThreadState_SetAsyncExc`). CPython delivers it at the next bytecode, so a
loop stops while it runs, in the model's code or in Python code it called.
It keeps raising every `interval` seconds until the block ends, so a
``finally`` that loops forever is stopped too. Long single C calls are bounded
by the size caps instead (see `local_limits`).
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from dataclasses import dataclass

from codeward.executors.local_limits import (
    MemoryLimitReached,
    SandboxSignal,
    TimeLimitReached,
)

__all__ = ["Watchdog"]

_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
_set_async_exc.argtypes = (ctypes.c_ulong, ctypes.py_object)
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes() -> int | None:
    """This process's resident memory, where the platform says it cheaply (Linux)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return None


@dataclass
class _Watch:
    thread_id: int
    deadline: float
    memory_ceiling: int | None
    fired: type[SandboxSignal] | None = None


class Watchdog:
    """One watching thread per executor, started on first use."""

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._watch: _Watch | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    def arm(self, seconds: float, memory_allowance: int | None) -> None:
        """Start watching the calling thread for `seconds` and `memory_allowance` bytes of growth."""
        ceiling = None
        if memory_allowance is not None:
            current = resident_bytes()
            ceiling = None if current is None else current + memory_allowance
        with self._wake:
            self._watch = _Watch(threading.get_ident(), time.monotonic() + seconds, ceiling)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="codeward-local-watchdog", daemon=True)
                self._thread.start()
            self._wake.notify()

    def disarm(self) -> type[SandboxSignal] | None:
        """Stop watching; cancel a signal raised but not yet delivered. Returns what fired.

        A signal can land while this runs; it is caught and the disarming retried,
        so none escapes into the host after the block.
        """
        while True:
            try:
                with self._lock:
                    watch, self._watch = self._watch, None
                if watch is not None and watch.fired is not None:
                    _set_async_exc(watch.thread_id, ctypes.py_object())  # clears a pending one
                return None if watch is None else watch.fired
            except SandboxSignal:
                continue

    @property
    def deadline(self) -> float | None:
        watch = self._watch
        return None if watch is None else watch.deadline

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()

    def _loop(self) -> None:
        with self._wake:
            while not self._closed:
                watch = self._watch
                if watch is None:
                    self._wake.wait()
                    continue
                signal = self._check(watch)
                if signal is not None:
                    watch.fired = watch.fired or signal
                    _set_async_exc(watch.thread_id, ctypes.py_object(watch.fired))
                self._wake.wait(self.interval)

    @staticmethod
    def _check(watch: _Watch) -> type[SandboxSignal] | None:
        if time.monotonic() >= watch.deadline:
            return TimeLimitReached
        if watch.memory_ceiling is not None:
            current = resident_bytes()
            if current is not None and current > watch.memory_ceiling:
                return MemoryLimitReached
        return None
