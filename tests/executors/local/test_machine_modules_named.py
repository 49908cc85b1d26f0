"""Naming a module of the machine in `authorized_imports` gives the code all of it: the executor says so.

`builtins` named gives `eval` and `exec`, which run code the policy never compiled, and `globals()`,
which shows the guards themselves; `os` gives `os.system`. The user may mean it, so it is a warning,
not a refusal; the control shows what the warning is about.
"""

from __future__ import annotations

import warnings

import pytest

from codeward.executors import LocalExecutor
from codeward.executors.base import ExecutionError


@pytest.mark.parametrize("entry", ["builtins", "os", "sys", "subprocess", "ctypes", "os.*"])
def test_a_machine_module_named_is_warned_of(entry: str) -> None:
    with pytest.warns(UserWarning, match=rf"names '{entry}'.*only the worker's confinement"):
        LocalExecutor(authorized_imports=[entry]).close()


def test_in_process_the_warning_says_nothing_is_left() -> None:
    with pytest.warns(UserWarning, match=r"nothing \(isolation='in_process'\)"):
        LocalExecutor(authorized_imports=["builtins"], isolation="in_process").close()


def test_builtins_named_runs_code_the_policy_never_saw() -> None:
    """What the warning is about: the policy refuses a dunder read in the code it compiles, while
    the same text handed to builtins.exec is compiled by CPython itself and reads it freely."""
    read = "(1).__class__.__name__"
    with pytest.warns(UserWarning), LocalExecutor(authorized_imports=["builtins"], isolation="in_process") as executor:
        with pytest.raises(ExecutionError, match="not allowed"):
            executor.run(read)
        escaped = executor.run(f"import builtins\nns = {{}}\nbuiltins.exec('r = {read}', ns)\nns['r']")
    assert escaped.output == "int"


def test_ordinary_modules_are_not_warned_of() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        LocalExecutor(authorized_imports=["numpy", "pandas.*", "json", "*"]).close()


def test_the_warning_names_the_users_line_however_the_executor_is_made() -> None:
    """Made directly, by name, or by an agent: the warning points at the caller's line, not codeward's."""
    from codeward import CodeAgent
    from codeward.executors import create_executor
    from codeward.platform.models import ScriptedModel

    makers = {
        "directly": lambda: LocalExecutor(authorized_imports=["builtins"]),
        "by name": lambda: create_executor("local", authorized_imports=["builtins"]),
        "by an agent": lambda: CodeAgent(tools=[], model=ScriptedModel([]), additional_authorized_imports=["os"]),
    }
    for how, make in makers.items():
        with pytest.warns(UserWarning, match="a module of the machine") as caught:
            made = make()
        made.close()
        assert [warning.filename for warning in caught] == [__file__], how
