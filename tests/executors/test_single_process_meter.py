"""`SingleProcessMeter`, the local worker's meter, on a real child process the test steers: its CPU
time read from the process's CPU-time clock agrees with /proc, and its peak is each block's own,
after a block that let memory go and in a block whose memory grew without a page fault."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from codeward.executors.metering import ProcessMeter, SingleProcessMeter

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and Linux's CPU clocks")

#: A child that does what it reads, one line at a time, and says when it is done: `spin` a third of a
#: second of CPU, `grow` 100 MB of anonymous memory touched page by page, `free` it (an munmap: no page
#: fault), `small` 5 MB it keeps; `arm` 256 MB with one small page touched in each 2 MiB, and
#: `collapse` them into huge pages (``MADV_COLLAPSE``: 256 MB resident, no page fault) and let them go.
_CHILD = """
import ctypes, mmap, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
SIZE, HUGE = 256 << 20, 2 << 20
held, kept, armed = None, [], None
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
    elif command == "arm":
        raw = libc.mmap(None, SIZE + HUGE, 3, 0x22, -1, 0)
        start = (raw + HUGE - 1) & ~(HUGE - 1)
        libc.madvise(start, SIZE, 15)  # MADV_NOHUGEPAGE while one small page in each 2 MiB is touched
        pages = (ctypes.c_char * SIZE).from_address(start)
        for at in range(0, SIZE, HUGE):
            pages[at] = b"x"
        libc.madvise(start, SIZE, 14)  # MADV_HUGEPAGE
        armed = raw, start
    elif command == "collapse":
        raw, start = armed
        collapsed = libc.madvise(start, SIZE, 25) == 0  # MADV_COLLAPSE
        libc.munmap(raw, SIZE + HUGE)
        print("collapsed" if collapsed else "refused", flush=True)
    print("done", flush=True)
"""


class _Child:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def do(self, command: str) -> list[str]:
        """What the child said before it was done."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        said = []
        while (line := self.process.stdout.readline()) != "done\n":
            assert line, "the child ended"
            said.append(line.strip())
        return said


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


def _faults_and_resident(pid: int) -> tuple[int, int]:
    with open(f"/proc/{pid}/stat", "rb") as stat:
        fields = stat.read().rpartition(b")")[2].split()
    return int(fields[7]) + int(fields[9]), int(fields[21]) * 4096


def test_memory_grown_without_a_page_fault_counts_in_the_blocks_peak(child: _Child) -> None:
    """The control is what a count of page faults would have given: none taken, and the size at the
    block's end no larger than at its start."""
    meter = SingleProcessMeter(child.process.pid)
    try:
        child.do("arm")
        meter.begin()
        faults, resident = _faults_and_resident(child.process.pid)
        if child.do("collapse") != ["collapsed"]:
            pytest.skip("this kernel does not collapse memory into huge pages (MADV_COLLAPSE, Linux 6.1)")
        after_faults, after_resident = _faults_and_resident(child.process.pid)
        peak = meter.end().peak_memory_bytes
    finally:
        meter.close()
    assert after_faults == faults and max(resident, after_resident) < 100 * 2**20, "control"
    assert peak is not None and peak >= 200 * 2**20, peak


def test_a_quiet_blocks_peak_is_the_status_files(child: _Child) -> None:
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
