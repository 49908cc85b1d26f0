"""`ex.files`, the same on every executor: what the host writes the code reads, and back; and the
attacks a sandbox can make on it (a link it planted, a path with ``..``, a file too large).

Each attack has its control: where the sandbox's folder is a folder of this machine, the same
path opened with plain `open()` does reach the outside file, so the refusal is `ex.files`' own.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from codeward.executors.base import Executor
from codeward.executors.files import DEFAULT_CALL_BYTES, FileBudget, FileBudgetExceeded, FilesError

SECRET = "the host's own secret, never the sandbox's"


@pytest.fixture
def name() -> str:
    """A name no other test (nor another executor on the shared E2B server) uses."""
    return f"f-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[Path]:
    """A file of the host's, outside every sandbox's folder."""
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    yield secret
    assert secret.read_text() == SECRET, "the host's file outside the sandbox was changed"


def host_folder(executor: Executor) -> Path | None:
    """The sandbox's working folder as a folder of this machine, where it is one (not in docker)."""
    if executor.name == "local":
        return Path(executor.working_folder)  # type: ignore[attr-defined]
    if executor.name == "jupyter":
        return Path(executor.cwd)  # type: ignore[attr-defined]
    if executor.name == "e2b":
        from tests.e2b_server import shared_server

        sandbox = shared_server().sandbox
        return None if sandbox is None else Path(sandbox.cwd)
    return None


def plant_link(executor: Executor, name: str, target: str | Path) -> None:
    """A symbolic link the sandbox makes in its folder (the local executor's code may not import
    os, so there the link is made in its folder from outside, as another process of its could)."""
    if executor.name == "local":
        os.symlink(target, Path(executor.working_folder) / name)  # type: ignore[attr-defined]
    else:
        executor.run(f"import os\nos.symlink({str(target)!r}, {name!r})")


# -- what works -----------------------------------------------------------------------------


def test_a_file_the_host_writes_is_read_by_the_code(executor: Executor, name: str) -> None:
    executor.files.write(f"{name}/in.txt", "héllo\n")
    output = executor.run(f"with open('{name}/in.txt', encoding='utf-8') as f:\n    text = f.read()\ntext")
    assert output.output == "héllo\n"


def test_a_file_the_code_writes_is_read_listed_and_removed_by_the_host(executor: Executor, name: str) -> None:
    executor.run(f"with open('{name}.bin', 'wb') as f:\n    f.write(bytes(range(256)))")
    assert executor.files.read(f"{name}.bin") == bytes(range(256))
    assert f"{name}.bin" in executor.files.list()
    assert executor.files.exists(f"{name}.bin")
    executor.files.remove(f"{name}.bin")
    assert not executor.files.exists(f"{name}.bin")
    assert f"{name}.bin" not in executor.files.list(".")


def test_folders_are_made_and_listed_with_a_slash(executor: Executor, name: str) -> None:
    executor.files.write(f"{name}/a/b.txt", b"x")
    assert executor.files.list(name) == ["a/"]
    assert executor.files.list(f"{name}/a") == ["b.txt"]
    assert executor.files.exists(f"{name}/a") and not executor.files.exists(f"{name}/nothing/here")


def test_a_missing_file_is_a_files_error_that_says_so(executor: Executor, name: str) -> None:
    with pytest.raises(FilesError) as raised:
        executor.files.read(f"{name}.missing")
    assert raised.value.error_type == "FileNotFoundError"


# -- attacks, with their controls ---------------------------------------------------------


@pytest.mark.parametrize("target", ["/etc/passwd", "outside"])
def test_a_link_the_sandbox_planted_is_never_followed(
    executor: Executor, name: str, outside: Path, target: str
) -> None:
    aim = outside if target == "outside" else Path(target)
    plant_link(executor, name, aim)
    folder = host_folder(executor)
    if folder is not None:  # the control: opened plainly on the host, the link leads out
        assert (folder / name).read_bytes() == aim.read_bytes()
    with pytest.raises(FilesError, match="symbolic link"):
        executor.files.read(name)


def test_a_write_replaces_a_planted_link_and_never_writes_through_it(
    executor: Executor, name: str, outside: Path
) -> None:
    """Aimed only at a file of the test's own: were the rule broken, nothing of the machine's is hit."""
    plant_link(executor, name, outside)
    folder = host_folder(executor)
    if folder is not None:  # the control: the link leads to the host's file
        assert (folder / name).read_text() == SECRET
    executor.files.write(name, b"written by the host")
    assert executor.files.read(name) == b"written by the host"
    assert outside.read_text() == SECRET


def test_a_planted_folder_link_is_never_walked_through(executor: Executor, name: str, outside: Path) -> None:
    plant_link(executor, name, outside.parent)
    folder = host_folder(executor)
    if folder is not None:
        assert (folder / name / outside.name).read_text() == SECRET
    with pytest.raises(FilesError, match="symbolic link"):
        executor.files.read(f"{name}/{outside.name}")
    with pytest.raises(FilesError, match="symbolic link"):
        executor.files.write(f"{name}/{outside.name}", b"over")
    with pytest.raises(FilesError, match="symbolic link"):
        executor.files.list(name)
    with pytest.raises(FilesError, match="symbolic link"):
        executor.files.remove(f"{name}/{outside.name}")
    assert outside.exists()


@pytest.mark.parametrize("path", ["../{secret}", "{name}/../../{secret}", "./../{secret}"])
def test_a_path_with_dot_dot_is_refused_before_it_reaches_the_sandbox(executor: Executor, name: str, path: str) -> None:
    executor.files.write(f"{name}/inside.txt", b"")
    folder = host_folder(executor)
    secret = f"secret-{name}.txt"
    text = path.format(secret=secret, name=name)
    if folder is not None:  # the control: beside the sandbox's folder, where `..` leads
        (folder.parent / secret).write_text(SECRET)
        assert (folder / text).read_text() == SECRET
    try:
        for call in (executor.files.read, executor.files.exists, executor.files.remove, executor.files.list):
            with pytest.raises(FilesError, match=r"'\.\.'"):
                call(text)
        with pytest.raises(FilesError, match=r"'\.\.'"):
            executor.files.write(text, b"over")
    finally:
        if folder is not None:
            assert (folder.parent / secret).read_text() == SECRET
            (folder.parent / secret).unlink()


def test_a_file_past_the_call_budget_is_refused_with_the_budget_named(executor: Executor, name: str) -> None:
    with pytest.raises(FileBudgetExceeded, match=f"{DEFAULT_CALL_BYTES:,} bytes a call"):
        executor.files.write(f"{name}.big", bytes(DEFAULT_CALL_BYTES + 1))
    megabyte = 2**20
    chunks = DEFAULT_CALL_BYTES // megabyte + 1
    executor.run(
        f"chunk = b'x' * {megabyte}\nwith open('{name}.big', 'wb') as f:\n    for _ in range({chunks}):\n        f.write(chunk)"
    )
    with pytest.raises(FileBudgetExceeded, match=f"{DEFAULT_CALL_BYTES:,} bytes a call"):
        executor.files.read(f"{name}.big")
    executor.files.remove(f"{name}.big")


def test_the_sandbox_budget_counts_every_call(executor: Executor, name: str) -> None:
    executor.files.budget = FileBudget(per_call=1000, per_sandbox=2500)
    executor.files.write(f"{name}.a", bytes(1000))
    assert len(executor.files.read(f"{name}.a")) == 1000
    with pytest.raises(FileBudgetExceeded, match="2,500 bytes a sandbox"):
        executor.files.read(f"{name}.a")
    assert executor.files.budget.used == 2000
