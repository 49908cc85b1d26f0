"""The settings every executor takes, each judged by one rule, so that a value means the same
thing on every sandbox and bad input gets the same clear error wherever it is passed."""

from __future__ import annotations

import keyword
import math
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["RESERVED_NAMES", "checked_packages", "checked_seconds", "checked_tool_names", "checked_variable_names"]


#: The bytes one cell may bring back to the host from a kernel sandbox (jupyter, docker, e2b):
#: printed text, displays, its value and codeward's reports together. Past it, output is
#: dropped with a note in the logs, so what the sandbox sends cannot fill the host's memory.
DEFAULT_OUTPUT_BUDGET = 64 * 2**20
#: The characters of printed output every executor keeps per block (its head and tail), unless told otherwise.
DEFAULT_PRINT_OUTPUTS_LENGTH = 50_000


def checked_bytes(name: str, value: Any) -> int:
    """A size limit: a positive whole number of bytes."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive number of bytes, such as {DEFAULT_OUTPUT_BUDGET}, got {value!r}")
    return value


def checked_seconds(name: str, value: Any) -> float:
    """A time limit: a positive, finite number of seconds (not a bool, not None: every sandbox has a limit)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ValueError(f"{name} must be a positive number of seconds, such as 30, got {value!r}")
    return float(value)


#: Names no variable may take on any sandbox: the local executor's guarded `range`, and what an
#: IPython kernel's namespace needs for itself.
RESERVED_NAMES = ("range", "get_ipython", "In", "Out", "exit", "quit")


def checked_variable_names(variables: Any, tools: Iterable[str] = ()) -> None:
    """Variables must be a dict whose keys the code can read as names, none of them a tool's or reserved."""
    if not isinstance(variables, Mapping):
        raise TypeError(f"variables must be a dict of names to values, got {type(variables).__name__}")
    taken = {*tools, *RESERVED_NAMES}
    for name in variables:
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(f"variable name {name!r} is not a Python identifier")
        if name.startswith("_"):
            raise ValueError(f"variable {name!r} starts with '_', which the code cannot read; rename it")
        if name in taken:
            raise ValueError(f"variable {name!r} has the name of a tool or of something the sandbox needs; rename it")


def checked_tool_names(tools: Any) -> None:
    """Tools must be a dict of public identifiers to callables."""
    if not isinstance(tools, Mapping):
        raise TypeError(f"tools must be a dict of names to tools, got {type(tools).__name__}")
    for name, tool in tools.items():
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
            raise ValueError(f"tool name {name!r} must be a public Python identifier")
        if not callable(tool):
            raise TypeError(f"tool {name!r} is not callable: {type(tool).__name__}")


def checked_packages(packages: Any) -> list[str]:
    """A list of pip requirement strings (a lone string would be split into letters)."""
    if (
        isinstance(packages, str)
        or not isinstance(packages, (list, tuple))
        or not all(isinstance(package, str) and package.strip() for package in packages)
    ):
        raise TypeError(f"packages must be a list of requirement strings, e.g. ['requests>=2'], got {packages!r}")
    return list(packages)
