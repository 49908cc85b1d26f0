"""The kernel and working folders a killed host left behind are reaped when an executor next starts.

The host is a real process that opens a jupyter executor and is killed with SIGKILL, so it
never cleans up; a new executor's start then removes its folders, by its pid and start time. A
live host's folders stay, and work on. The attacks plant links where the reaper looks: one in the
temporary root under a dead owner's name, one inside a dead owner's folder; the control is a real
folder under the same name, which the reaper does remove.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from codeward.executors.jupyter import JupyterExecutor
from codeward.executors.kernel.folders import KERNEL_PREFIX, owned_folder, reap_dead_owners
from codeward.executors.kernel.processes import process_started

ROOT = Path(__file__).resolve().parents[3]
#: A host: opens a jupyter executor, says where its folders are, then runs a cell per line it reads.
HOST = """
import os, sys
from codeward.executors.jupyter import JupyterExecutor
executor = JupyterExecutor(timeout_seconds=30)
kernel = executor.run("import os; os.getpid()").output
print(os.getpid(), kernel, flush=True)
for line in sys.stdin:
    print(executor.run(line).output, flush=True)
"""


@pytest.fixture
def temporary_root(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temporary root of this test's own (short, for the kernel's ipc sockets), for the hosts and this
    process. Tests that use it take no `tmp_path`, which would be made under it and removed with it."""
    root = Path(tempfile.mkdtemp(prefix="cw-", dir="/tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    yield root
    subprocess.run(["rm", "-rf", str(root)], check=False)


def start_host(root: Path) -> tuple[subprocess.Popen[str], int, int]:
    """A host process with a jupyter executor open; its pid and its kernel's."""
    env = {**os.environ, "TMPDIR": str(root), "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    host = subprocess.Popen(
        [sys.executable, "-c", HOST], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT
    )
    assert host.stdout is not None
    pid, kernel = map(int, host.stdout.readline().split())
    assert pid == host.pid
    return host, pid, kernel


def folders_of(root: Path, pid: int) -> list[str]:
    return sorted(entry.name for entry in root.iterdir() if f"-{pid}." in entry.name)


def dead_pid() -> int:
    """The pid of a process that has ended."""
    probe = subprocess.Popen(["true"])
    probe.wait()
    return probe.pid


def wait_gone(pid: int, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while process_started(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.1)


def test_a_killed_hosts_folders_are_reaped_when_an_executor_next_starts(temporary_root: Path) -> None:
    host, pid, kernel = start_host(temporary_root)
    left = folders_of(temporary_root, pid)
    assert [name.split("-")[1] for name in left] == ["jupyter", "kernel"]
    host.send_signal(signal.SIGKILL)
    host.wait()
    wait_gone(kernel)  # the kernel ends with its host (ipykernel watches its parent)
    assert folders_of(temporary_root, pid) == left  # a killed host cleans nothing up
    assert (temporary_root / left[1] / "connection.json").exists()
    with JupyterExecutor(timeout_seconds=30) as executor:
        assert folders_of(temporary_root, pid) == []
        assert executor.run("6 * 7").output == 42
        mine = folders_of(temporary_root, os.getpid())
        assert len(mine) == 2  # its own folders, named for this process
        assert reap_dead_owners() == []  # and never reaped while it runs
    assert folders_of(temporary_root, os.getpid()) == []


def test_a_live_hosts_folders_are_never_reaped(temporary_root: Path) -> None:
    host, pid, _ = start_host(temporary_root)
    try:
        left = folders_of(temporary_root, pid)
        with JupyterExecutor(timeout_seconds=30):
            assert reap_dead_owners() == []
        assert folders_of(temporary_root, pid) == left
        assert host.stdin is not None and host.stdout is not None
        host.stdin.write("sum(range(10))\n")
        host.stdin.flush()
        assert host.stdout.readline().strip() == "45"  # its kernel still answers
    finally:
        host.kill()
        host.wait()


def test_a_reused_pid_does_not_keep_a_dead_owners_folder(temporary_root: Path) -> None:
    """A folder named for this very pid but another start time was made by a process that ended."""
    stale = temporary_root / f"{KERNEL_PREFIX}{os.getpid()}.1-abcdefgh"
    stale.mkdir()
    own = Path(owned_folder(KERNEL_PREFIX))
    assert reap_dead_owners() == [str(stale)]
    assert own.is_dir() and not stale.exists()


def test_links_where_the_reaper_looks_are_never_followed(temporary_root: Path) -> None:
    victim = temporary_root / "victim"  # no name codeward makes: not the reaper's
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me")
    dead = dead_pid()
    # a link in the temporary root, named as a dead owner's folder, to a folder that is not codeward's
    planted = temporary_root / f"{KERNEL_PREFIX}{dead}.12345-linkedaa"
    planted.symlink_to(victim, target_is_directory=True)
    # a dead owner's real folder, with a link inside it to the same folder
    real = temporary_root / f"{KERNEL_PREFIX}{dead}.12345-realfold"
    real.mkdir()
    (real / "connection.json").write_text("{}")
    (real / "inside").symlink_to(victim, target_is_directory=True)
    assert reap_dead_owners() == [str(real)]  # the control: the same name on a real folder is reaped
    assert not real.exists()
    assert planted.is_symlink()  # the link is left as it is, and what it points to untouched
    assert (victim / "precious.txt").read_text() == "keep me"


def test_only_names_codeward_makes_are_reaped(temporary_root: Path) -> None:
    dead = dead_pid()
    others = [f"codeward-kernel-{dead}.1", f"codeward-kernel-{dead}.1-abcdefgh-more", f"other-{dead}.1-abcdefgh"]
    for name in others:
        (temporary_root / name).mkdir()
    reaped = temporary_root / f"codeward-jupyter-{dead}.1-abcdefgh"
    reaped.mkdir()
    assert reap_dead_owners() == [str(reaped)]
    assert sorted(entry.name for entry in temporary_root.iterdir()) == sorted(others)
