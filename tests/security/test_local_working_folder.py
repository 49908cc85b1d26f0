"""Attacks on the local executor's `open()`, which reaches its working folder and nothing else.

Each has its control: the same move in plain Python, on a plain file object, does reach out.
Each test first asks for the executor's working folder, so with the sandbox switched off
(`Unsandboxed`, which has none) each fails before any code runs, as the harness requires.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from codeward.executors import LocalExecutor
from codeward.executors.base import ExecutionError
from codeward.executors.local.working_folder import MOST_OPEN_FILES
from tests.security.conftest import sandbox

SECRET = "the host's own secret"


@pytest.fixture
def executor(isolation: str) -> Iterator[LocalExecutor]:
    with sandbox(isolation=isolation, timeout_seconds=10) as made:
        yield made  # type: ignore[misc]


def folder_of(executor: LocalExecutor) -> Path:
    return Path(executor.working_folder)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    return secret


def refused(executor: LocalExecutor, code: str) -> ExecutionError:
    with pytest.raises(ExecutionError) as raised:
        executor.run(code)
    return raised.value


def test_the_file_class_inside_is_out_of_reach(executor: LocalExecutor, outside: Path) -> None:
    """A plain file's raw layer is `io.FileIO`, whose call opens any path: the code never holds one."""
    folder_of(executor)
    with open(os.devnull, "rb") as plain:  # the control
        assert type(plain.raw)(str(outside)).read() == SECRET.encode()
    executor.run("f = open('mine.txt', 'w')")
    for route in ("f.raw", "f.buffer", "f.buffer.raw", "getattr(f, '_file')"):
        refused(executor, route)
    assert SECRET not in refused(executor, f"type(f)({str(outside)!r}).read()").message


@pytest.mark.parametrize("path", ["{outside}", "../{name}", "sub/../../{name}", "/etc/passwd"])
def test_open_reaches_no_path_outside_the_folder(executor: LocalExecutor, outside: Path, path: str) -> None:
    beside = folder_of(executor).parent / f"beside-{os.getpid()}.txt"
    beside.write_text(SECRET)
    try:
        text = path.format(outside=outside, name=beside.name)
        if not text.startswith("/"):  # the control: from the folder, plain open() leads out
            os.makedirs(folder_of(executor) / "sub", exist_ok=True)
            assert (folder_of(executor) / text).read_text() == SECRET
        for mode in ("r", "w", "a"):
            assert refused(executor, f"open({text!r}, {mode!r})").error_type == "SandboxViolation"
        assert beside.read_text() == SECRET and outside.read_text() == SECRET
    finally:
        beside.unlink()


def test_open_follows_no_link(executor: LocalExecutor, outside: Path) -> None:
    link = folder_of(executor) / "link"
    os.symlink(outside, link)
    assert link.read_text() == SECRET  # the control
    for mode in ("r", "w", "a"):
        error = refused(executor, f"open('link', {mode!r})")
        assert error.error_type == "SandboxViolation" and "symbolic link" in error.message
    assert outside.read_text() == SECRET


def test_writes_draw_from_the_folders_budget(executor: LocalExecutor) -> None:
    from codeward.executors.local import working_folder

    folder = folder_of(executor)
    assert working_folder.DEFAULT_FOLDER_BYTES == 2**30
    executor.files.write("held.bin", bytes(2**20))
    error = refused(
        executor,
        "chunk = b'x' * 2**20\nwith open('big.bin', 'wb') as f:\n    for _ in range(1100):\n        f.write(chunk)",
    )
    assert "1,073,741,824 bytes" in error.message
    assert os.path.getsize(folder / "big.bin") <= 2**30


def test_the_code_holds_few_files_open_at_once(executor: LocalExecutor) -> None:
    folder_of(executor)
    error = refused(executor, f"held = [open('f' + str(i), 'w') for i in range({MOST_OPEN_FILES + 1})]")
    assert f"{MOST_OPEN_FILES} files open" in error.message
    executor.run("for i in range(200):\n    with open('again', 'w') as f:\n        f.write('x')")  # closed ones go


SLY_STR = """
class Sly(str):
    def split(self, sep=None, maxsplit=-1):
        return [{way!r}]
    def startswith(self, *prefixes):
        return False
"""
SLY_BYTES = """
class Sly(bytes):
    calls = [0]
    def decode(self, *args, **kwargs):
        Sly.calls[0] += 1
        return 'harmless.txt' if Sly.calls[0] == 1 else {way!r}
"""


@pytest.mark.parametrize("kind", [SLY_STR, SLY_BYTES])
def test_a_path_of_the_codes_own_class_cannot_answer_the_check_and_the_walk_differently(
    executor: LocalExecutor, outside: Path, kind: str
) -> None:
    """`open()` takes one plain copy of the path's text and checks and walks that: a str subclass whose
    `split` hides '..', or a bytes subclass that decodes to one name for the check and another for the
    walk, reaches nothing outside. (Control: the class's answer is the way out, as plain Python shows.)"""
    folder = folder_of(executor)
    way = os.path.relpath(outside, folder)
    assert way.startswith("..") and Path(folder, way).read_text() == SECRET  # the control
    executor.run(SLY_STR.format(way=way) if kind is SLY_STR else SLY_BYTES.format(way=str(outside)))
    written = outside.with_name("written-by-the-sandbox.txt")
    argument = "Sly('x')" if kind is SLY_STR else "Sly(b'x')"
    assert SECRET not in (refused(executor, f"open({argument}).read()").message)
    if kind is SLY_STR:  # a write goes to the plain text's file, in the folder
        executor.run(SLY_STR.format(way=os.path.relpath(written, folder)))
        executor.run("open(Sly('x'), 'w').write('kept in')")
        assert (folder / "x").read_text() == "kept in"
    assert not written.exists()


def test_a_data_librarys_path_is_the_text_that_was_checked(isolation: str, tmp_path: Path) -> None:
    """numpy's file functions get the very text `allowed_paths` checked, not the code's object, whose
    `__str__` could show the check an allowed path while numpy opens another."""
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "ok.txt").write_text("1\n2\n")
    (tmp_path / "outside.txt").write_text("7\n7\n")
    code = f"""
import numpy as np
class Sly(str):
    def __str__(self):
        return {str(allowed / "ok.txt")!r}
np.loadtxt(Sly({str(tmp_path / "outside.txt")!r})).sum()
"""
    options = {"isolation": isolation, "authorized_imports": ["numpy"], "allowed_paths": [str(allowed)]}
    with sandbox(**options) as executor:
        assert executor.run(f"import numpy as np\nnp.loadtxt({str(allowed / 'ok.txt')!r}).sum()").output == 3
        with pytest.raises(ExecutionError, match="only paths inside"):
            executor.run(code)
        with pytest.raises(ExecutionError, match="only paths inside"):
            executor.run(code.replace("np.loadtxt(Sly(", "np.savetxt(Sly(").replace(")).sum()", "), [4, 2])"))
    assert (tmp_path / "outside.txt").read_text() == "7\n7\n"
