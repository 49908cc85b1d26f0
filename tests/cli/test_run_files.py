"""`codeward run --file PATH[=NAME]`: a file handed to the code, in the sandbox's working folder,
on local and docker; a path that is not a readable regular file stops before any sandbox starts."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import write_script
from tests.cli.test_terminal_text import docker_engine

READ_BOTH = "final_answer(open('sales.csv').read() + '|' + open('notes/n.txt').read())"


@pytest.fixture
def engine(executor: str) -> Any:
    return docker_engine()[0] if executor == "docker" else None


@pytest.mark.parametrize("executor", ["local", "docker"])
def test_handed_files_are_opened_by_the_code(codeward, tmp_path: Path, executor: str, engine: Any) -> None:
    (tmp_path / "sales.csv").write_text("region,total\nnorth,3\n")
    (tmp_path / "n.txt").write_text("kept")
    model = write_script(tmp_path / "model.yaml", READ_BOTH)
    args = ("run", "Read the files.", "--model", model, "--executor", executor)
    done = codeward(*args, "--json", "--file", "sales.csv", "--file", "n.txt=notes/n.txt")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["output"] == "region,total\nnorth,3\n|kept"
    # control: without --file the code finds nothing there
    missing = codeward(*args, "--max-steps", "1")
    assert "FileNotFoundError" in missing.stdout, missing.stdout + missing.stderr


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda folder: None, "cannot be read"),
        (lambda folder: (folder / "given").mkdir(), "not a regular file"),
        (lambda folder: os.mkfifo(folder / "given"), "not a regular file"),
    ],
)
def test_a_path_that_is_not_a_readable_file_is_refused_before_the_run(codeward, tmp_path: Path, make, said) -> None:
    make(tmp_path)
    model = write_script(tmp_path / "model.yaml", "final_answer(1)")
    done = codeward("run", "Go.", "--model", model, "--file", "given", "--save", "run.json")
    assert done.returncode == 2 and said in done.stdout + done.stderr, done.stdout + done.stderr
    assert not (tmp_path / "run.json").exists()  # nothing ran


def test_a_name_leading_out_of_the_working_folder_is_refused(codeward, tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("x")
    model = write_script(tmp_path / "model.yaml", "final_answer(1)")
    done = codeward("run", "Go.", "--model", model, "--file", "data.txt=../escaped.txt")
    assert done.returncode == 2 and "could not be written into the sandbox" in done.stdout + done.stderr, (
        done.stdout + done.stderr
    )
    assert not (tmp_path.parent / "escaped.txt").exists()
