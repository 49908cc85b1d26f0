"""The settings every executor takes, each judged by one rule, so that a value means the same
thing on every sandbox and bad input gets the same clear error wherever it is passed."""

from __future__ import annotations

import builtins
import keyword
import math
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "RESERVED_NAMES",
    "checked_names",
    "checked_packages",
    "checked_seconds",
    "checked_tool_names",
    "checked_variable_names",
    "taken_name",
]


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


#: Names no variable or tool may take on any sandbox: the local executor's guarded `range`, and
#: what an IPython kernel's namespace needs for itself (its builtins beyond Python's among them).
RESERVED_NAMES = ("range", "get_ipython", "In", "Out", "exit", "quit", "display", "execfile", "runfile")

#: Python's builtins as the code sees them: a tool or variable under one of these names would
#: receive what the code meant for `print`, `len` or `str` (secrets included).
_BUILTIN_NAMES = frozenset(name for name in dir(builtins) if not name.startswith("_"))


def taken_name(name: str) -> str | None:
    """Why `name` cannot enter a sandbox's namespace from outside, or None if it can.

    The one rule for every name a user, an MCP server or a tool module puts beside the code:
    it is a public identifier, and it hides neither a builtin nor a name the sandbox uses.
    (`final_answer` is the agent's to judge: only the agent knows which one is its own.)
    """
    if not name.isidentifier() or keyword.iskeyword(name):
        return "is not a Python identifier"
    if unicodedata.normalize("NFKC", name) != name:  # the code's `ｐｒｉｎｔ` is Python's `print`
        return f"is read by Python as {unicodedata.normalize('NFKC', name)!r}, so the code could never reach it"
    if name.startswith("_"):
        return "starts with '_', which the code cannot read"
    if name in RESERVED_NAMES:
        return "is a name the sandbox needs for itself"
    if name in _BUILTIN_NAMES:
        return f"would hide Python's builtin {name}"
    return None


def checked_variable_names(variables: Any, tools: Iterable[str] = ()) -> None:
    """Variables must be a dict whose keys the code can read as names, none of them a tool's or taken."""
    if not isinstance(variables, Mapping):
        raise TypeError(f"variables must be a dict of names to values, got {type(variables).__name__}")
    tool_names = set(tools)
    for name in variables:
        if not isinstance(name, str):
            raise ValueError(f"variable name {name!r} is not a Python identifier")
        reason = taken_name(name) or ("is the name of a tool" if name in tool_names else None)
        if reason is not None:
            raise ValueError(f"variable {name!r} {reason}; rename it")


def checked_tool_names(tools: Any) -> None:
    """Tools must be a dict of names the code can call, none of them taken, to callables."""
    if not isinstance(tools, Mapping):
        raise TypeError(f"tools must be a dict of names to tools, got {type(tools).__name__}")
    for name, tool in tools.items():
        if not isinstance(name, str):
            raise ValueError(f"tool name {name!r} must be a public Python identifier")
        reason = taken_name(name)
        if reason is not None:
            raise ValueError(f"tool name {name!r} {reason}; rename the tool")
        if not callable(tool):
            raise TypeError(f"tool {name!r} is not callable: {type(tool).__name__}")


def checked_names(argument: str, value: Any, what: str = "names", example: str = "['numpy']") -> list[str]:
    """A list of non-blank strings (modules, requirements, files). A lone string is refused, not
    read letter by letter: 'numpy' would otherwise mean 'n', 'u', 'm', 'p' and 'y'."""
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{argument} must be a list of {what}, not a lone string: pass [{value!r}], not {value!r}")
    items = list(value) if isinstance(value, Iterable) and not isinstance(value, Mapping) else None
    if items is None or not all(isinstance(item, str) and item.strip() for item in items):
        raise TypeError(f"{argument} must be a list of {what}, e.g. {example}, got {value!r}")
    return items


def checked_packages(packages: Any) -> list[str]:
    """A list of pip requirement strings."""
    return checked_names("packages", packages, "requirement strings", "['requests>=2']")
