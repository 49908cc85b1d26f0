"""Each tool where it can run (``tools_mode="auto"``, e2b's default): inline where it can be
shipped, on the host where it must run (an MCP server's tool, an object with state).

Against the local E2B-protocol server and a real MCP server (tests/mcp_server): the plain
tool shows it ran in the sandbox by the process id it reads there, the MCP tool goes through
the host's bridge, which logs each call it runs. The attacks: the sandbox asks the host to run
a tool placed inline, and a stranger's tool is named as a name our inline tool's module uses.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator
from os import getpid as pid
from pathlib import Path
from typing import Any

import pytest

from codeward import CodeAgent, ScriptedModel, tool
from codeward.executors.e2b import E2BExecutor
from codeward.executors.kernel.bridge import ToolBridge
from codeward.mcp import MCPTools
from codeward.platform.tools import Tool
from tests.e2b_server import E2BServer
from tests.executors import test_e2b
from tests.executors.test_e2b import Counter
from tests.mcp_server import SECRET_VARIABLE

# The E2B tests' fixtures, with E2B's defaults but for the time limit.
E2B_SETTINGS: dict[str, Any] = {"timeout_seconds": 20.0}
server = test_e2b.server
make = test_e2b.make
ROOT = Path(__file__).resolve().parents[2]
SECRET = "mcp-secret-that-stays-with-the-server"
BRIDGE_LOG = "codeward.executors.kernel.bridge"


@tool
def sandbox_pid() -> int:
    """The id of the process the tool runs in."""
    return os.getpid()


@tool
def own_pid() -> int:
    """The id of the process the tool runs in, by the name its module imported `getpid` as."""
    return pid()


@pytest.fixture
def mcp_tools() -> Iterator[dict[str, Tool]]:
    with MCPTools([sys.executable, "-m", "tests.mcp_server"], env={SECRET_VARIABLE: SECRET}, cwd=str(ROOT)) as tools:
        yield {tool.name: tool for tool in tools}


def ran_on_the_host(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The tools the host's bridge ran for the sandbox, from its log."""
    return [record.args[0] for record in caplog.records if record.msg == "tool %s ran for the sandbox in %.3f s"]  # type: ignore[index]


def test_by_default_a_plain_tool_runs_inline_and_an_mcp_tool_on_the_host(
    make: Callable[..., E2BExecutor], mcp_tools: dict[str, Tool], caplog: pytest.LogCaptureFixture
) -> None:
    executor = make()
    assert executor.tools_mode == "auto"
    executor.send_tools(
        {"sandbox_pid": sandbox_pid, "add": mcp_tools["add"], "secret_length": mcp_tools["secret_length"]}
    )
    with caplog.at_level(logging.INFO, logger=BRIDGE_LOG):
        ran_at, kernel, total, length, environment = executor.run(
            "import os\n[sandbox_pid(), os.getpid(), add(2, 3), secret_length(), str(dict(os.environ))]"
        ).output
    assert ran_at == kernel != os.getpid()  # the plain tool ran in the sandbox's own process
    assert (total, length) == (5, len(SECRET))  # the MCP tools answered, through the host
    assert ran_on_the_host(caplog) == ["add", "secret_length"]
    assert SECRET not in environment


def test_a_code_agent_on_e2b_with_default_settings_uses_both(
    server: E2BServer, mcp_tools: dict[str, Tool], caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel(
        ["Thought: ask both.\n<code>\nimport os\nfinal_answer([sandbox_pid(), os.getpid(), add(20, 22)])\n</code>"]
    )
    agent = CodeAgent(
        tools=[sandbox_pid, mcp_tools["add"]],
        model=model,
        executor="e2b",
        executor_kwargs={"connection": server.connection},
        verbosity_level=-1,
    )
    with agent, caplog.at_level(logging.INFO, logger=BRIDGE_LOG):
        ran_at, kernel, total = agent.run("Where do the tools run?")
    assert ran_at == kernel != os.getpid()
    assert total == 42 and ran_on_the_host(caplog) == ["add"]


def test_a_tool_with_state_goes_to_the_host_and_keeps_it_there(make: Callable[..., E2BExecutor]) -> None:
    counter = Counter()
    executor = make()
    executor.send_tools({"counter": counter, "sandbox_pid": sandbox_pid})
    assert executor.run("counter(), counter(), sandbox_pid() == __import__('os').getpid()").output == (1, 2, True)
    assert counter.calls == 2


def test_forcing_a_mode_places_every_tool_there(make: Callable[..., E2BExecutor], mcp_tools: dict[str, Tool]) -> None:
    host = make(tools_mode="host")
    host.send_tools({"sandbox_pid": sandbox_pid, "add": mcp_tools["add"]})
    assert host.run("sandbox_pid(), add(1, 1)").output == (os.getpid(), 2)
    inline = make(tools_mode="inline")
    with pytest.raises(Exception, match="calls an MCP server, which runs on the host") as refused:
        inline.send_tools({"sandbox_pid": sandbox_pid, "add": mcp_tools["add"]})
    assert "tools_mode='auto'" in str(refused.value) and "tools_mode='host'" in str(refused.value)


FORGE = (
    "import sys\n"
    "try:\n"
    "    result = sys.modules['_codeward']._call_host('sandbox_pid', {})\n"
    "except Exception as error:\n"
    "    result = [type(error).__name__, str(error)]\n"
    "result"
)


def test_the_host_never_runs_a_tool_placed_in_the_sandbox(
    make: Callable[..., E2BExecutor], mcp_tools: dict[str, Tool], caplog: pytest.LogCaptureFixture
) -> None:
    """Code that asks the host, past its stub, to run a tool placed inline is refused: run there,
    the tool would act on the host (here: read its process, which could be its files, its keys)."""
    control = make(tools_mode="host")  # where the tool is the host's, the same request runs it there
    control.send_tools({"sandbox_pid": sandbox_pid})
    assert control.run(FORGE).output == os.getpid()
    executor = make()
    executor.send_tools({"sandbox_pid": sandbox_pid, "add": mcp_tools["add"]})  # a host tool: the channel is open
    with caplog.at_level(logging.INFO, logger=BRIDGE_LOG):
        kind, message = executor.run(FORGE).output
    assert kind == "ToolCallError" and "no host tool named 'sandbox_pid'; the tools are: add" in message
    assert ran_on_the_host(caplog) == []


def test_a_strangers_tool_never_takes_the_place_of_a_name_our_tool_uses(
    make: Callable[..., E2BExecutor], mcp_tools: dict[str, Tool]
) -> None:
    """The MCP server has a tool `pid`; our inline tool's module imports `getpid` as `pid`. The
    inline tool calls what its module means, as on the host, never the stranger's tool."""
    server_pid = mcp_tools["pid"]()
    bridge = ToolBridge({"own_pid": own_pid, "pid": mcp_tools["pid"]}, mode="auto")
    assert bridge.placement == {"own_pid": "inline", "pid": "host"}
    executor = make()
    executor.send_tools({"own_pid": own_pid, "pid": mcp_tools["pid"]})
    ours, theirs, kernel = executor.run("own_pid(), pid(), __import__('os').getpid()").output
    assert theirs == server_pid != kernel
    assert ours == kernel


def test_async_and_nameless_tools_go_to_the_host() -> None:
    @tool
    async def later(x: int) -> int:
        """Doubles, later.

        Args:
            x: the number
        """
        return 2 * x

    renamed = ToolBridge({"renamed": sandbox_pid}, mode="auto")
    assert renamed.placement == {"renamed": "host"}
    assert ToolBridge({"later": later, "sandbox_pid": sandbox_pid}, mode="auto").placement == {
        "later": "host",
        "sandbox_pid": "inline",
    }
