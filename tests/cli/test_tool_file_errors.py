"""A tools file's mistakes are the user's to fix: exit 2, one line naming the file, its line and the fix,
never "please report" (which is for codeward's own faults), in `run`, `batch` and `mcp serve` alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import write_script

BROKEN = {
    "docstring": (
        (
            "from codeward import tool\n\n\n@tool\ndef rate(city: str, day: int) -> float:\n"
            '    """A rate.\n\n    Args:\n        city: The city.\n    """\n    return 1.0\n'
        ),
        ["line 4", "'day'", "add a line 'day: what it is'"],
    ),
    "raises": ("x = 1\nraise RuntimeError('the config file is missing')\n", ["line 2", "the config file is missing"]),
    "missing_library": ("import codeward_no_such_library\n", ["'codeward_no_such_library'", "not installed"]),
}


def _command(subcommand: str, tmp_path: Path) -> list[str]:
    model = write_script(tmp_path / "model.yaml", "final_answer(1)")
    if subcommand == "run":
        return ["run", "Anything.", "--model", model]
    if subcommand == "batch":  # told before any job runs, though no job selects a tool
        (tmp_path / "jobs.jsonl").write_text('{"id": "a", "task": "Anything."}\n')
        return ["batch", "jobs.jsonl", "--model", model]
    return ["mcp", "serve"]


@pytest.mark.parametrize("subcommand", ["run", "batch", "mcp serve"])
@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_a_broken_tools_file_is_a_usage_error_that_names_it(codeward, tmp_path: Path, subcommand, kind) -> None:
    source, said = BROKEN[kind]
    (tmp_path / "my_tools.py").write_text(source)
    done = codeward(*_command(subcommand, tmp_path), "--tools", "my_tools.py", timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("error: --tools ") and "my_tools.py" in line, line
    for part in said:
        assert part in line, line
    assert "please report" not in line and "Traceback" not in done.stderr and done.stdout == ""
    assert not (tmp_path / "results.jsonl").exists()


def test_a_tools_package_that_imports_a_missing_library_names_the_package_and_the_library(codeward, tmp_path) -> None:
    (tmp_path / "my_tools").mkdir()
    (tmp_path / "my_tools" / "__init__.py").write_text("import codeward_no_such_library\n")
    model = write_script(tmp_path / "model.yaml", "final_answer(1)")
    done = codeward("run", "Anything.", "--model", model, "--tools", "my_tools", PYTHONPATH=f"{tmp_path}:{_src()}")
    assert done.returncode == 2, done.stderr
    assert "--tools my_tools: it imports 'codeward_no_such_library', which is not installed" in done.stderr
    assert "__init__.py, line 1" in done.stderr


def test_a_variable_named_as_a_tool_is_a_usage_error_that_names_the_flag(codeward, tmp_path: Path) -> None:
    (tmp_path / "my_tools.py").write_text(
        "from codeward import tool\n\n\n@tool\ndef rate(city: str) -> float:\n"
        '    """A rate.\n\n    Args:\n        city: The city.\n    """\n    return 1.0\n'
    )
    (tmp_path / "rates.json").write_text('{"Oslo": 1}')
    model = write_script(tmp_path / "model.yaml", "final_answer(1)")
    done = codeward("run", "Anything.", "--model", model, "--tools", "my_tools.py", "--var", "rate=@rates.json")
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert "--var 'rate=@rates.json'" in line and "name of a tool" in line and "another name" in line, line
    assert "please report" not in line


def _src() -> str:
    from tests.cli.conftest import SRC

    return SRC
