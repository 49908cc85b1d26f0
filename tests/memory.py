"""The host's memory as the tests measure it: how far its resident size rose while a body ran.

A test of a memory bound checks the harm in a control (the host grew by the payload) and then the
bound (it did not). Both read resident memory, which a heap grown by an earlier test in the same
process can hide: freed pages it still holds are lent to a new allocation without any growth. The
heap hands them back to the system first (glibc's ``malloc_trim``), so a growth measured is new memory.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from codeward.executors.local.watchdog import resident_bytes

__all__ = ["peak_growth"]


def _return_free_memory() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


@contextmanager
def peak_growth() -> Iterator[Callable[[], int]]:
    """How far the host's resident memory rose above its start while the body ran, sampled every 5 ms."""
    _return_free_memory()
    start = resident_bytes() or 0
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], (resident_bytes() or start) - start)
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield lambda: peak[0]
    finally:
        done.set()
        sampler.join()
