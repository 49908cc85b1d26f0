"""`SingleProcessMeter`, the local worker's meter, on a real child process the test steers: its CPU
time read from the process's CPU-time clock agrees with /proc, and its lazily reset peak is still
each block's own after a block that let memory go, whether or not that block faulted."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from codeward.executors.metering import ProcessMeter, SingleProcessMeter

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and Linux's CPU clocks")

#: A child that does what it reads, one line at a time, and says when it is done: `spin` a third of a
#: second of CPU, `grow` 100 MB of anonymous memory touched page by page, `free` it (an munmap: no page
#: fault), `small` 5 MB it keeps.
_CHILD = """
import mmap, sys, time
held, kept = None, []
for line in sys.stdin:
    command = line.strip()
    if command == "spin":
        started = time.process_time()
        while time.process_time() - started < 0.3:
            pass
    elif command == "grow":
        held = mmap.mmap(-1, 100 * 2**20)
        for at in range(0, len(held), 4096):
            held[at] = 1
    elif command == "free":
        held.close()
    elif command == "small":
        kept.append(b"x" * (5 * 2**20))
    print("done", flush=True)
"""


class _Child:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def do(self, command: str) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline() == "done\n"


@pytest.fixture
def child() -> Iterator[_Child]:
    made = _Child()
    made.do("nothing")  # started and answering
    yield made
    made.process.kill()
    made.process.wait()


def test_its_cpu_time_is_the_one_proc_gives(child: _Child) -> None:
    clocked, from_proc = SingleProcessMeter(child.process.pid), ProcessMeter(child.process.pid, children=False)
    try:
        clocked.begin()
        child.do("spin")
        measured = clocked.end()
        assert measured.cpu_seconds is not None and 0.25 <= measured.cpu_seconds <= 0.6, measured
        now, proc = clocked.cpu_seconds(), from_proc.cpu_seconds()
        assert now is not None and proc is not None and abs(now - proc) <= 0.05, (now, proc)  # /proc's ticks are 10 ms
    finally:
        clocked.close()
        from_proc.close()


def _block(meter: SingleProcessMeter, child: _Child, command: str) -> int:
    meter.begin()
    child.do(command)
    peak = meter.end().peak_memory_bytes
    assert peak is not None
    return peak


def test_a_block_after_one_that_let_memory_go_has_a_peak_of_its_own(child: _Child) -> None:
    """`free` takes no page fault, so its block is measured from the stat line; the kernel's peak
    still holds the 100 MB, and the next block, which faults, must not be given them."""
    meter = SingleProcessMeter(child.process.pid)
    try:
        _block(meter, child, "nothing")
        assert _block(meter, child, "grow") >= 100 * 2**20
        assert _block(meter, child, "nothing") >= 100 * 2**20  # still held
        assert _block(meter, child, "free") >= 100 * 2**20  # held when the block began
        assert _block(meter, child, "small") < 80 * 2**20
    finally:
        meter.close()


def test_a_block_that_took_no_fault_gets_the_size_it_had(child: _Child) -> None:
    meter = SingleProcessMeter(child.process.pid)
    try:
        quiet = [_block(meter, child, "nothing") for _ in range(5)]
        with open(f"/proc/{child.process.pid}/status") as status:
            high = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
        assert all(abs(peak - high) <= 2**20 for peak in quiet), (quiet, high)
    finally:
        meter.close()


def test_a_process_that_ended_is_unmeasured_not_zero() -> None:
    ended = _Child()
    meter = SingleProcessMeter(ended.process.pid)
    try:
        meter.begin()
        ended.process.kill()
        ended.process.wait()
        measured = meter.end()
    finally:
        meter.close()
    assert measured.cpu_seconds is None and measured.peak_memory_bytes is None
    assert set(measured.unmeasured) == {"cpu_seconds", "peak_memory_bytes"}
