"""`CgroupMeter` on real control groups this machine has, beside the containers' own (which the docker
tests read): a fresh cgroup v2 group, where the machine mounts the unified hierarchy, holding a process
that spins. It needs root (making a group); without it, or without cgroup v2, it is skipped."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from codeward.executors.metering import CgroupMeter

SPIN = "import sys, time\nsys.stdin.readline()\nstarted = time.process_time()\nwhile time.process_time() - started < 1:\n    pass"


def _unified() -> Path | None:
    for root in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
        if (root / "cgroup.controllers").exists() and os.access(root, os.W_OK):
            return root
    return None


@pytest.fixture
def group() -> Iterator[Path]:
    root = _unified()
    if root is None:
        pytest.skip("no cgroup v2 hierarchy this user may make a group in")
    folder = root / f"codeward-test-{secrets.token_hex(4)}"
    try:
        folder.mkdir()
    except OSError as error:
        pytest.skip(f"cannot make a cgroup v2 group here: {error}")
    try:
        yield folder
    finally:
        for _ in range(50):
            try:
                folder.rmdir()
                break
            except OSError:  # its process is still being reaped
                time.sleep(0.1)


def test_a_v2_group_gives_the_cpu_its_processes_spent_and_says_why_it_has_no_peak(group: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.PIPE)
    try:
        (group / "cgroup.procs").write_text(str(child.pid))
        meter = CgroupMeter("none", folders=[group])
        meter.begin()
        assert child.stdin is not None
        child.stdin.write(b"go\n")
        child.stdin.flush()
        child.wait(timeout=60)
        measured = meter.end()
    finally:
        child.kill()
        child.wait()
    assert measured.cpu_seconds is not None and measured.cpu_seconds >= 0.7, measured
    if (group / "memory.peak").exists():
        assert measured.peak_memory_bytes is not None
    else:  # the memory controller is bound elsewhere (a hybrid hierarchy): the reason says so
        assert measured.peak_memory_bytes is None and "memory" in measured.unmeasured["peak_memory_bytes"]


def test_a_group_that_is_not_there_is_named_as_such() -> None:
    measured = CgroupMeter("0" * 64).end()
    assert measured.cpu_seconds is None and "not on this machine" in measured.unmeasured["cpu_seconds"]
    assert "not on this machine" in measured.unmeasured["peak_memory_bytes"]
