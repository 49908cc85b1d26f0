"""An MCP server's answer that cannot be read (not JSON-RPC, or a number too long for Python's int):
the call fails at once with an error that says so, and the next call connects again. The SDK drops
such a message and goes on waiting for the answer it may have been, so without codeward's handler
each call would wait out its whole timeout (the control)."""

from __future__ import annotations

import sys
import time

import pytest

from codeward.mcp import MCPToolError, MCPTools
from codeward.mcp import tools as mcp_tools
from tests.mcp.test_mcp_tools import ROOT
from tests.timing import busy_seconds

GARBLED = [sys.executable, "-m", "tests.mcp_server.garbled"]
#: What failing "at once" may take on a busy machine: the answer's read and the error, not a timeout.
AT_ONCE = busy_seconds(1.0)


def _tool(tools: list, name: str):
    return next(tool for tool in tools if tool.name == name)


@pytest.mark.parametrize(("tool", "reason"), [("long_number", "number out of range"), ("garbage", "Invalid JSON")])
def test_an_unreadable_answer_fails_its_call_at_once_and_the_next_call_connects_again(tool, reason):
    with MCPTools(GARBLED, cwd=str(ROOT), timeout=60) as tools:
        started = time.monotonic()
        with pytest.raises(MCPToolError) as failed:
            _tool(tools, tool)()
        took = time.monotonic() - started
        said = str(failed.value)
        assert "sent a message codeward cannot read during the call to" in said and reason in said, said
        assert "777777" not in said  # the reason, not the stranger's message
        assert took < AT_ONCE, took
        assert _tool(tools, "answer")() == "answered"


def test_control_without_the_handler_the_call_waits_out_its_timeout(monkeypatch):
    async def deaf(self, message) -> None:
        return None

    monkeypatch.setattr(mcp_tools._Session, "_heard", deaf)
    with MCPTools(GARBLED, cwd=str(ROOT), timeout=2) as tools:
        started = time.monotonic()
        with pytest.raises(MCPToolError, match="timed out"):
            _tool(tools, "long_number")()
        assert time.monotonic() - started >= 2
