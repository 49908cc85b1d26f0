"""What an inline tool carries into the sandbox from its module, and what makes it refused when sent.

The kernel executors and E2B run inline tools from their source: these check what the host ships
and refuses, and run such tools in a jupyter kernel (test_e2b.py runs them on E2B).
"""

from __future__ import annotations

import os.path
from os import environ
from random import randint
from typing import Any
from xml.etree import ElementTree as ET

import pytest

from codeward import tool
from codeward.executors import codec
from codeward.executors.jupyter import JupyterExecutor
from codeward.executors.kernel.bridge import ToolBridge
from codeward.platform.tools import ToolDefinitionError
from tests.executors import inline_tool_module

TOKEN = "tok-0123456789"


@tool
def roll(sides: int) -> int:
    """Rolls a die, with a name imported from a module that makes it a bound method.

    Args:
        sides: how many sides
    """
    return randint(1, sides)


@tool
def root_tag(xml: str) -> str:
    """The root's tag, through a submodule imported under another name, and a dotted module path.

    Args:
        xml: the document
    """
    return ET.fromstring(xml).tag + os.path.sep


@tool
def greeting(name: str) -> str:
    """Greets with the greeting of the environment it runs in.

    Args:
        name: whom to greet
    """
    return environ.get("GREETING", "hello ") + name


@tool
def countdown(n: int) -> list[int]:
    """Counts down by calling itself, with a class whose body reads its own names.

    Args:
        n: where to start
    """

    class Step:
        size = 1
        twice = size * 2

    return [] if n <= 0 else [n, *countdown(n - Step.size)]


@tool
def call_service(query: str) -> str:
    """Calls a service with a token read when the module loaded.

    Args:
        query: what to ask
    """
    return f"{TOKEN}:{query}"


@tool
def misspelled(x: int) -> int:
    """Uses a name nothing defines.

    Args:
        x: a number
    """
    return x + UNDEFINED_NAME  # type: ignore[name-defined]  # noqa: F821


def context(tools: dict[str, Any], name: str) -> dict[str, Any]:
    specs = codec.loads(ToolBridge(tools, mode="inline").specs_text)
    found: dict[str, Any] = next(spec["context"] for spec in specs if spec["name"] == name)
    return found


def test_only_what_the_code_reads_is_shipped() -> None:
    shipped = context({"quote": inline_tool_module.quote}, "quote")
    assert shipped["imports"] == [["Decimal", "decimal", ["Decimal"]], ["math", "math", []]]
    assert {name: codec.loads(text) for name, text in shipped["constants"].items()} == {
        "PRICES": {"apple": "0.35", "pear": "0.50"},
        "VAT": 0.25,
    }
    assert shipped["tools"] == []  # nor the module's lock, helper or other tools, which it does not read


def test_names_are_shipped_as_imports_by_where_they_can_be_imported_from() -> None:
    assert context({"roll": roll}, "roll")["imports"] == [["randint", "random", ["randint"]]]
    assert context({"root_tag": root_tag}, "root_tag")["imports"] == [
        ["ET", "xml.etree.ElementTree", []],
        ["os", "os", []],
    ]
    assert context({"greeting": greeting}, "greeting") == {  # the sandbox's environment, not the host's
        "imports": [["environ", "os", ["environ"]]],
        "constants": {},
        "tools": [],
    }
    assert context({"countdown": countdown}, "countdown") == {"imports": [], "constants": {}, "tools": []}
    tools = {"quote": inline_tool_module.quote, "quote_one": inline_tool_module.quote_one}
    assert context(tools, "quote_one")["tools"] == ["quote"]


def test_a_constant_holding_a_host_environment_variable_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    assert codec.loads(context({"call_service": call_service}, "call_service")["constants"]["TOKEN"]) == TOKEN
    monkeypatch.setenv("SERVICE_TOKEN", TOKEN)
    with pytest.raises(
        ToolDefinitionError,
        match=r"'TOKEN', which holds the value of the host's environment variable SERVICE_TOKEN.*envs=",
    ):
        ToolBridge({"call_service": call_service}, mode="inline")


def test_a_name_the_module_does_not_define_is_refused() -> None:
    with pytest.raises(ToolDefinitionError, match="tool 'misspelled' uses 'UNDEFINED_NAME', which its module"):
        ToolBridge({"misspelled": misspelled}, mode="inline")


def test_a_kernel_runs_inline_tools_with_their_module_constants_and_imports() -> None:
    with JupyterExecutor(tools_mode="inline") as executor:
        executor.send_tools({"quote": inline_tool_module.quote, "quote_one": inline_tool_module.quote_one})
        assert executor.run("quote('apple', 12), quote_one('pear')").output == ("5.25 in 2 boxes", "0.62 in 1 boxes")
        with pytest.raises(
            ToolDefinitionError, match=r"'round_to_cents', a function defined beside it.*tools_mode='host'"
        ):
            executor.send_tools({"rounded_quote": inline_tool_module.rounded_quote})


def test_shipped_imports_and_calls_of_itself_work_in_a_kernel() -> None:
    with JupyterExecutor(tools_mode="inline", env={"GREETING": "hey "}) as executor:
        executor.send_tools({"roll": roll, "root_tag": root_tag, "countdown": countdown, "greeting": greeting})
        assert executor.run("roll(1), root_tag('<a/>'), countdown(3), greeting('you')").output == (
            1,
            "a" + os.path.sep,
            [3, 2, 1],
            "hey you",
        )
