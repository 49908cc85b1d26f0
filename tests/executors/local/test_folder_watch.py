"""The host measures the local worker's working folder itself: code that got past the policy (here
`authorized_imports=["*"]`, so `os` writes without the worker's own count) still cannot fill the
host's disk or its inodes. Each attack shows the harm with the host's limit lifted in the test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codeward.executors import LocalExecutor
from codeward.executors.base import ExecutionError, SandboxError
from codeward.executors.local import folder_watch, worker_process

WRITE_BYTES = """
import os
fd = os.open(os.path.join(folder, 'big.bin'), os.O_WRONLY | os.O_CREAT, 0o600)
for _ in range(40):
    os.write(fd, b'x' * 2**20)
os.fsync(fd)
os.close(fd)
import time
time.sleep(1.5)
'written'
"""
MAKE_FILES = """
import os, time
for n in range(3000):
    os.close(os.open(os.path.join(folder, f'f{n}'), os.O_WRONLY | os.O_CREAT, 0o600))
time.sleep(1.5)
'made'
"""


@pytest.fixture
def small_folder_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 4 MiB budget, no slack, and 1,000 names: what the attacks pass."""
    monkeypatch.setattr(worker_process, "DEFAULT_FOLDER_BYTES", 4 * 2**20)
    monkeypatch.setattr(folder_watch, "SLACK_BYTES", 0)
    monkeypatch.setattr(folder_watch, "MOST_ENTRIES", 1000)


def escaped() -> LocalExecutor:
    executor = LocalExecutor(authorized_imports=["*"], timeout_seconds=20)
    executor.send_variables({"folder": executor.working_folder})
    return executor


@pytest.mark.parametrize(("code", "said"), [(WRITE_BYTES, "bytes on disk"), (MAKE_FILES, "files and folders")])
def test_a_worker_that_writes_past_its_folders_budget_is_stopped_by_the_host(
    small_folder_budget: None, code: str, said: str
) -> None:
    with escaped() as executor:
        with pytest.raises(SandboxError, match=f"{said}.*what the folder held is removed"):
            executor.run(code)
        assert executor.files.list() == []  # left full, the folder would stop every new worker in turn
        assert executor.run("import time\ntime.sleep(1)\n1 + 1").output == 2  # a fresh worker goes on, past a look


@pytest.mark.parametrize("code", [WRITE_BYTES, MAKE_FILES])
def test_control_with_the_hosts_limit_lifted_the_same_code_fills_the_folder(
    small_folder_budget: None, monkeypatch: pytest.MonkeyPatch, code: str
) -> None:
    monkeypatch.setattr(folder_watch, "MOST_ENTRIES", 10**9)
    monkeypatch.setattr(worker_process, "DEFAULT_FOLDER_BYTES", 2**40)
    with escaped() as executor:
        assert executor.run(code).output in ("written", "made")
        used, entries = folder_watch.folder_usage(executor.working_folder)
        assert used >= 40 * 2**20 or entries >= 3000


@pytest.mark.parametrize("isolation", ["process", "in_process"])
def test_a_file_made_longer_without_writing_draws_from_the_budget(tmp_path: Path, isolation: str) -> None:
    """`truncate` past the end, or a write after a seek past it, makes a file that reads back that long:
    it counts as written (control: within the budget the same calls work)."""
    with LocalExecutor(isolation=isolation) as executor:
        executor.run("f = open('sparse.bin', 'wb')\nf.truncate(2**20)\nf.seek(2**21)\nf.write(b'x')\nf.close()")
        assert os.path.getsize(Path(executor.working_folder) / "sparse.bin") == 2**21 + 1
        for grow in ("f.truncate(2**31)", "f.seek(2**31)\nf.write(b'x')\nf.flush()"):
            with pytest.raises(ExecutionError, match="budget"):
                executor.run(f"f = open('more.bin', 'wb')\n{grow}")
