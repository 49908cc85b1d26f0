"""`ex.files`' shared half, without a sandbox: paths, the budget, and the walk that follows no link."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codeward.executors.files import FileBudget, FileBudgetExceeded, FilesError, FolderFiles, beneath


@pytest.mark.parametrize("path", ["..", "a/../b", "../x", "a/.."])
def test_a_path_that_could_lead_out_is_refused(path: str) -> None:
    with pytest.raises(beneath.Refused, match=r"'\.\.'"):
        beneath.split(path)


@pytest.mark.parametrize("path", ["", "x\0y"])
def test_what_is_no_path_is_refused(path: str) -> None:
    with pytest.raises(ValueError, match="not a path"):
        beneath.split(path)


def test_a_path_keeps_its_names_and_says_whether_it_is_absolute() -> None:
    assert beneath.split("./a//b/") == (False, ["a", "b"])
    assert beneath.split("/tmp/x") == (True, ["tmp", "x"])
    assert beneath.split(Path("a") / "b") == (False, ["a", "b"])


def test_the_budget_names_what_was_passed() -> None:
    budget = FileBudget(per_call=10, per_sandbox=25)
    budget.draw(10, "a")
    with pytest.raises(FileBudgetExceeded, match="10 bytes a call"):
        budget.draw(11, "b")
    budget.draw(10, "c")
    assert budget.call_limit() == 5
    with pytest.raises(FileBudgetExceeded, match="25 bytes a sandbox"):
        budget.draw(6, "d")
    assert budget.used == 20


def test_a_folder_takes_absolute_paths_inside_it_only(tmp_path: Path) -> None:
    files = FolderFiles(str(tmp_path))
    files.write(str(tmp_path / "a.txt"), "x")
    assert files.read("a.txt") == b"x"
    with pytest.raises(FilesError, match="outside this sandbox's working folder"):
        files.read("/etc/hostname")


def test_a_write_replaces_a_link_and_leaves_its_target(tmp_path: Path) -> None:
    target = tmp_path / "target.txt"
    target.write_text("kept")
    folder = tmp_path / "folder"
    folder.mkdir()
    os.symlink(target, folder / "name")
    FolderFiles(str(folder)).write("name", b"new")
    assert not (folder / "name").is_symlink() and (folder / "name").read_bytes() == b"new"
    assert target.read_text() == "kept"


def test_a_fifo_is_refused_rather_than_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(FilesError, match="not a plain file"):
        FolderFiles(str(tmp_path)).read("pipe")


def test_a_listing_past_its_budget_is_refused(tmp_path: Path) -> None:
    for index in range(20):
        (tmp_path / f"file-{index:02}").write_bytes(b"")
    files = FolderFiles(str(tmp_path))
    files.budget = FileBudget(per_call=100)
    with pytest.raises(FileBudgetExceeded, match="listing"):
        files.list()


def test_a_closed_executors_folder_name_reaches_nothing_made_there_later(tmp_path: Path) -> None:
    """Closing removes the folder and frees its name in the temporary root, where anyone may make a
    link or a folder of their own: the closed executor's files refuse, and never follow a link there."""
    from codeward.executors import LocalExecutor

    target = tmp_path / "elsewhere"
    target.mkdir()
    executor = LocalExecutor()
    executor.files.write("before.txt", "kept")  # control: open, the files reach the folder
    assert executor.files.read("before.txt") == b"kept"
    folder = executor.working_folder
    executor.close()
    os.symlink(target, folder)  # someone else takes the name
    try:
        for call in (lambda: executor.files.write("x.txt", "leak"), lambda: executor.files.list()):
            with pytest.raises(FilesError, match="closed"):
                call()
    finally:
        os.unlink(folder)
    assert list(target.iterdir()) == []


def test_a_link_where_the_folder_was_is_refused_not_followed(tmp_path: Path) -> None:
    target, folder = tmp_path / "elsewhere", tmp_path / "folder"
    target.mkdir()
    folder.mkdir()
    files = FolderFiles(str(folder))
    files.write("a.txt", "in")  # control: the folder itself is reached
    folder.rename(tmp_path / "moved")
    folder.symlink_to(target)
    with pytest.raises(FilesError, match="symbolic link"):
        files.write("b.txt", "out")
    assert list(target.iterdir()) == []


def test_a_long_name_of_wide_characters_is_written(tmp_path: Path) -> None:
    """A name may take 255 bytes; the temporary file beside it must not take more."""
    name = "あ" * 85  # 255 bytes
    files = FolderFiles(str(tmp_path))
    files.write(name, "wide")
    assert (tmp_path / name).read_text() == "wide" and os.listdir(tmp_path) == [name]
