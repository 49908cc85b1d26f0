"""What every executor's `CodeOutput.usage` must show, checked against real blocks: a block that holds
200 MB, one that spins a second of CPU, one that sleeps a second, and one that prints and calls tools.

The figures are the host's measure of a real sandbox on a shared, busy machine: bounds are wide where
load can move them (CPU against wall time), and each is set against a control in the same sandbox."""

from __future__ import annotations

import time

from codeward import tool
from codeward.executors.base import BlockUsage, Executor

MB = 2**20
#: Bytes written into, so that every page is resident (a zero-filled allocation may not be).
HOLD = "held = b'x' * (200 * 2**20)\nlen(held)"
RELEASE = "del held"
SPIN = "import time\nstarted = time.process_time()\nwhile time.process_time() - started < 1:\n    pass"
SLEEP = "import time\ntime.sleep(1)"
#: How long released memory may take to leave the sandbox's charge.
RELEASE_SECONDS = 10.0
CALLS = "print('x' * 5000)\nfirst = double(2)\nsecond = double(first)\nsecond"


@tool
def double(number: int) -> int:
    """Doubles a number.

    Args:
        number: what to double
    """
    return 2 * number


def usage_of(executor: Executor, code: str) -> BlockUsage:
    usage = executor.run(code).usage
    assert usage is not None, f"no usage for {code!r}"
    return usage


def check_memory(executor: Executor) -> None:
    """200 MB held shows in the block's peak; a later block, with it released, does not carry it on.

    A sandbox may give freed memory back to the machine a moment after the block that freed it
    (gVisor's kernel does, later on a busy machine), and a block's peak starts from what is charged
    when it starts: so the later blocks are given a few seconds to show it gone. A peak that is never
    reset for the block stays at 200 MB however long they are given."""
    held = usage_of(executor, HOLD)
    assert held.peak_memory_bytes is not None, held.unmeasured
    assert held.peak_memory_bytes >= 200 * MB, held
    assert held.peak_memory_scope == "block"
    usage_of(executor, RELEASE)
    deadline = time.monotonic() + RELEASE_SECONDS
    after = usage_of(executor, "x = 1")
    while not (after.peak_memory_bytes is not None and after.peak_memory_bytes < 150 * MB):
        assert time.monotonic() < deadline, after
        time.sleep(0.2)
        after = usage_of(executor, "x = 1")


def check_cpu(executor: Executor) -> None:
    """A second of spinning shows about a second of CPU, no more than its wall time allows; a second of
    sleep, the control, shows little."""
    spun = usage_of(executor, SPIN)
    assert spun.cpu_seconds is not None, spun.unmeasured
    assert spun.cpu_seconds >= 0.7, spun
    assert spun.cpu_seconds <= 1.2 * spun.wall_seconds + 0.1, spun
    slept = usage_of(executor, SLEEP)
    assert slept.wall_seconds >= 0.95, slept
    assert slept.cpu_seconds is not None and slept.cpu_seconds < 0.3, slept


def check_output_and_calls(executor: Executor) -> None:
    """What the block printed and the host tools it called are counted; a quiet block, the control, shows none."""
    executor.send_tools({"double": double})
    busy = usage_of(executor, CALLS)
    assert busy.output_bytes >= 5000 and busy.tool_calls == 2, busy
    quiet = usage_of(executor, "y = 2")
    assert quiet.output_bytes < 100 and quiet.tool_calls == 0, quiet
