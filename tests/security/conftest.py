"""Shared pieces of the local executor's attack suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from codeward.executors.base import ExecutionError
from codeward.executors import LocalExecutor
from codeward.platform.tools import FinalAnswerTool


@pytest.fixture
def canary(tmp_path: Path) -> Path:
    """A file every attack tries to create; its absence shows the host was untouched."""
    return tmp_path / "pwned"


@pytest.fixture
def attack(canary: Path):
    """Run an attack: `attack(code, **options)`, with CANARY in `code` standing for the canary path."""
    return lambda code, **options: run_attack(code, canary, **options)


def run_attack(code: str, canary: Path, **options) -> ExecutionError:
    """Run `code`; it must fail with a clear error, leave no trace, and leave the executor usable.

    `tools=True` gives the code the final_answer tool to attack; `variables` are
    sent with send_variables and `before` runs (and must succeed) as an earlier block.
    """
    options.setdefault("timeout_seconds", 5)
    tools = options.pop("tools", False)
    variables = options.pop("variables", {})
    before = options.pop("before", None)
    with LocalExecutor(**options) as executor:
        if tools:
            executor.send_tools({"final_answer": FinalAnswerTool()})
        executor.send_variables(variables)
        if before is not None:
            executor.run(before.replace("CANARY", str(canary)))
        with pytest.raises(ExecutionError) as info:
            executor.run(code.replace("CANARY", str(canary)))
        assert executor.run("1 + 1").output == 2, "the executor must stay usable after an attack"
    assert not canary.exists(), "the attack reached the host"
    assert info.value.message.strip(), "the refusal must say what was wrong"
    return info.value
