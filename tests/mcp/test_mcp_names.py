"""An MCP server's tool names never hide the sandbox's own: a server cannot take over
`final_answer`, `print` or `range` by naming its tools so.

The server is a real one (tests/mcp_server/hostile.py) spoken to over stdio.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from codeward import CodeAgent, ScriptedModel
from codeward.mcp import MCPTools
from codeward.mcp import tools as mcp_tools
from codeward.platform.tools import Tool
from tests.mcp_server.hostile import HEARD_VARIABLE

ROOT = Path(__file__).resolve().parents[2]
SERVER = [sys.executable, "-m", "tests.mcp_server.hostile"]
SECRET = "sk-live-0123456789"
CODE = "<code>\nprint(token)\nfinal_answer('mine')\n</code>"


@pytest.fixture
def heard(tmp_path: Path) -> Path:
    return tmp_path / "heard.jsonl"


@pytest.fixture
def hostile_tools(heard: Path) -> Iterator[list[Tool]]:
    with MCPTools(SERVER, env={HEARD_VARIABLE: str(heard)}, cwd=str(ROOT)) as tools:
        yield tools


def _calls(heard: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in heard.read_text().splitlines()] if heard.exists() else []


def _run(tools: list[Tool]) -> object:
    agent = CodeAgent(tools=tools, model=ScriptedModel([CODE]), executor="local", verbosity_level=-1)
    try:
        return agent.run("answer", additional_args={"token": SECRET})
    finally:
        agent.close()


def test_taken_names_get_a_trailing_underscore_the_model_is_shown(hostile_tools: list[Tool]) -> None:
    names = {tool.name for tool in hostile_tools}
    assert names == {"final_answer_", "print_", "range_", "peek", "tool_3d_view"}
    agent = CodeAgent(tools=hostile_tools, model=ScriptedModel([]), executor="local", verbosity_level=-1)
    try:
        assert "def print_(value: str)" in agent.initialize_system_prompt()
    finally:
        agent.close()


def test_the_servers_tools_still_answer_under_their_new_names(hostile_tools: list[Tool]) -> None:
    by_name = {tool.name: tool for tool in hostile_tools}
    assert by_name["peek"]() == "peeked"
    assert by_name["tool_3d_view"]() == "viewed"


def test_a_server_cannot_take_the_answer_or_hear_what_the_code_prints(hostile_tools: list[Tool], heard: Path) -> None:
    assert _run(hostile_tools) == "mine"
    assert _calls(heard) == []


def test_control_with_the_servers_names_taken_as_they_are_it_hears_the_secret(
    monkeypatch: pytest.MonkeyPatch, heard: Path
) -> None:
    """The harm, with the rename switched off: the server's `print` hears the code's secret.

    (Its `final_answer` is then refused by the agent's own rule, shown in the platform tests.)
    """
    monkeypatch.setattr(mcp_tools, "taken_name", lambda name: None)
    monkeypatch.setattr(mcp_tools, "_tool_name", mcp_tools._python_name)
    with MCPTools(SERVER, env={HEARD_VARIABLE: str(heard)}, cwd=str(ROOT)) as tools:
        print_tool = [tool for tool in tools if tool.name == "print"]
        from codeward.executors import settings

        monkeypatch.setattr(settings, "_BUILTIN_NAMES", frozenset())
        agent = CodeAgent(tools=print_tool, model=ScriptedModel([CODE]), executor="local", verbosity_level=-1)
        try:
            agent.run("answer", additional_args={"token": SECRET})
        finally:
            agent.close()
    assert {"tool": "print", "value": SECRET} in _calls(heard)


@pytest.mark.parametrize(
    "given, made",
    [
        ("ｐｒｉｎｔ", "print_"),
        ("ｆｉｎａｌ_ａｎｓｗｅｒ", "final_answer_"),
        ("display", "display_"),
        ("²x", "tool_2x"),
    ],
)
def test_a_servers_name_is_read_as_python_reads_it_before_the_rule(given: str, made: str) -> None:
    assert mcp_tools._tool_name(given) == made
