"""Time bounds that hold on a busy machine, derived from the limit under test.

A test of a time limit checks the outcome first (the refusal, the error, the sandbox still usable)
and then the time, against an allowance: the limit itself, which the clock keeps whatever the load,
plus what happens after it (the interrupt, a reply, decoding), which a busy machine slows. How fast
it is on a quiet machine is for `bench/`, not for the tests.
"""

from __future__ import annotations

#: How many times longer work takes on a two-core machine whose cores two other CPU-bound processes
#: keep busy: with the test and its sandbox's kernel, four want the two cores, so each gets about
#: half of one (twice as long), and the engine, gVisor's kernel and the reaper take their turns too.
BUSY = 3.0


def busy_allowance(limit: float, after: float) -> float:
    """How long a call bounded by `limit` seconds may take on a busy machine, where `after` is what
    it takes past the limit on a quiet one."""
    return limit + BUSY * after


def busy_seconds(quiet: float) -> float:
    """How long work that takes `quiet` seconds on a quiet machine may take on a busy one."""
    return BUSY * quiet
