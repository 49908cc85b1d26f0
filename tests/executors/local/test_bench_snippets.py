"""`bench/local_executor.py --snippets FILE`: anyone's snippets timed as the built-in ones are, run
as a user runs the bench (a fresh process)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)

BENCH = Path(__file__).resolve().parents[3] / "bench" / "local_executor.py"


def bench(*arguments: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(BENCH.parents[1] / "src")}
    return subprocess.run(
        [sys.executable, str(BENCH), *map(str, arguments)], capture_output=True, text=True, env=env, timeout=280
    )


def test_the_snippets_of_a_file_are_timed_beside_the_tiny_blocks_and_the_floor(tmp_path):
    snippets = tmp_path / "mine.py"
    snippets.write_text(
        "# before the first header: not a snippet\n"
        "### squares loops\ntotal = 0\nfor i in range(100):\n    total += i * i\ntotal\n"
        "### broken\n1 / 0\n"
    )
    done = bench("--only-snippets", "--snippets", snippets, "--repeat", "1")
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    assert rows["squares"].split()[1] == "yes", done.stdout
    assert "n/a broken (process): ExecutionError: ZeroDivisionError" in done.stdout, done.stdout
    assert "tiny: floor (its text to a bare child process and back)" in done.stdout, done.stdout
    assert "; a bare Python worker " in done.stdout and "x the bare worker" in done.stdout, done.stdout
    assert "loop_sum" not in rows and "construction to first result" not in done.stdout, done.stdout
    idle = next(line for line in done.stdout.splitlines() if line.startswith("after idle: "))
    assert "process / cpython" in idle, done.stdout
    assert ("process / monty" in idle) == (importlib.util.find_spec("pydantic_monty") is not None), idle


def test_a_file_without_headers_is_one_snippet_and_a_name_given_twice_is_refused(tmp_path):
    whole = tmp_path / "whole_file.py"
    whole.write_text("sum(range(10))\n")
    done = bench("--only-snippets", "--snippets", whole, "--repeat", "1")
    assert done.returncode == 0, done.stderr
    assert any(line.startswith("whole_file ") for line in done.stdout.splitlines()), done.stdout
    twice = tmp_path / "twice.py"
    twice.write_text("### same\n1\n### same\n2\n")
    refused = bench("--only-snippets", "--snippets", twice, "--repeat", "1")
    assert refused.returncode != 0
    assert "two snippets are named 'same'" in refused.stderr, refused.stderr
