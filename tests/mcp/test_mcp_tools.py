"""MCP servers' tools run on the host, called from the model's code in every sandbox that has a way back.

The server is a real one (tests/mcp_server, made with the official SDK), started
over stdio or streamable HTTP; nothing of MCP is mocked.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from codeward.executors.base import Executor
from codeward.mcp import MCPToolError, MCPTools
from codeward.platform.tools import Tool, ToolDefinitionError
from tests.cli.conftest import children, command, command_env, write_script
from tests.executors.contract.conftest import PROFILES, process_gone
from tests.mcp_server import SECRET_VARIABLE, TOKEN_VARIABLE

ROOT = Path(__file__).resolve().parents[2]
SERVER = [sys.executable, "-m", "tests.mcp_server"]
SECRET = "correct-horse-battery-staple"
TOKEN = "test-token-0123456789"


def server_processes() -> list[int]:
    """The test MCP servers still running under this test process."""
    found = []
    for pid in children(os.getpid()):
        try:
            command_line = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"tests.mcp_server" in command_line:
            found.append(pid)
    return found


@pytest.fixture(autouse=True)
def no_server_left() -> Iterator[None]:
    yield
    deadline = time.monotonic() + 5
    while server_processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server_processes() == [], "an MCP server outlived its MCPTools"


@pytest.fixture
def mcp_tools() -> Iterator[dict[str, Tool]]:
    with MCPTools(SERVER, env={SECRET_VARIABLE: SECRET}, cwd=str(ROOT)) as tools:
        yield {tool.name: tool for tool in tools}


def test_the_servers_tools_are_described_to_the_model(mcp_tools: dict[str, Tool]) -> None:
    assert set(mcp_tools) == {"add", "secret_length", "fail", "pid", "shout_text", "blob", "empties"}
    assert mcp_tools["add"].python_signature() == "add(a: int, b: int) -> int"
    assert mcp_tools["add"].description == "Add two integers."
    assert mcp_tools["shout_text"].python_signature() == "shout_text(text: str, times: int | None = None) -> str"
    described = " ".join(tool.to_code_prompt() + json.dumps(tool.to_json_schema()) for tool in mcp_tools.values())
    assert SECRET not in described


def test_tools_are_called_on_the_host(mcp_tools: dict[str, Tool]) -> None:
    assert mcp_tools["add"](2, b=3) == 5
    assert mcp_tools["secret_length"]() == len(SECRET)
    assert mcp_tools["shout_text"]("ab", times=2) == "ABAB"
    assert mcp_tools["shout_text"]("ab") == "AB"


def test_a_failing_tool_raises_the_servers_message(mcp_tools: dict[str, Tool]) -> None:
    with pytest.raises(MCPToolError, match="no luck"):
        mcp_tools["fail"]("no luck")


def test_a_killed_server_is_reported_then_started_again(mcp_tools: dict[str, Tool]) -> None:
    """The call that finds the server dead fails (it may have run: it is not repeated); the next one restarts it."""
    first = mcp_tools["pid"]()
    os.kill(first, signal.SIGKILL)
    with pytest.raises(MCPToolError, match=r"lost during the call to add.*the next call connects again"):
        mcp_tools["add"](1, 1)
    assert mcp_tools["add"](1, 2) == 3
    assert mcp_tools["pid"]() != first
    assert process_gone(first)


def test_calls_after_close_are_refused() -> None:
    tools = MCPTools(SERVER, cwd=str(ROOT))
    add = next(tool for tool in tools.tools if tool.name == "add")
    tools.close()
    tools.close()
    with pytest.raises(MCPToolError, match="closed"):
        add(1, 2)


def test_a_server_that_cannot_start_is_named() -> None:
    with pytest.raises(MCPToolError, match=r"cannot connect to the MCP server .*no_such_module"):
        MCPTools([sys.executable, "-m", "no_such_module"], cwd=str(ROOT))


HOST_THAT_WAITS = """
import sys
from codeward.mcp import MCPTools
tools = MCPTools([sys.executable, "-m", "tests.mcp_server"])
print(next(tool for tool in tools.tools if tool.name == "pid")(), flush=True)
sys.stdin.read()
"""


def test_the_server_dies_with_the_host() -> None:
    """A host killed outright cannot stop its servers: the parent-death signal does."""
    host = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HOST_THAT_WAITS,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert host.stdout is not None
    server = int(host.stdout.readline())
    host.kill()
    host.wait()
    deadline = time.monotonic() + 5
    while not process_gone(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process_gone(server)


@pytest.fixture
def http_server() -> Iterator[str]:
    """The test server on streamable HTTP, on a free loopback port; it wants a bearer token."""
    process = subprocess.Popen(
        [*SERVER, "--http"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, TOKEN_VARIABLE: TOKEN, SECRET_VARIABLE: SECRET},
    )
    assert process.stdout is not None
    try:
        url = process.stdout.readline().strip()
        _wait_until_listening(url)
        yield url
    finally:
        process.terminate()
        process.wait(10)


def _wait_until_listening(url: str, seconds: float = 30) -> None:
    """The server prints its address before its socket accepts: wait for the socket, not the line."""
    address = urllib.parse.urlsplit(url)
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection((address.hostname, address.port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_a_streamable_http_server_with_headers(http_server: str) -> None:
    with MCPTools(http_server, headers={"Authorization": f"Bearer {TOKEN}"}) as tools:
        found = {tool.name: tool for tool in tools}
        assert found["add"](20, 22) == 42
        with pytest.raises(MCPToolError, match="nope"):
            found["fail"]("nope")


def test_a_streamable_http_server_refuses_a_missing_header(http_server: str) -> None:
    with pytest.raises(MCPToolError, match="cannot connect"):
        MCPTools(http_server)


def test_arguments_that_do_not_fit_a_server_are_refused() -> None:
    with pytest.raises(ValueError, match="headers are for an HTTP server"):
        MCPTools(SERVER, headers={"a": "b"})
    with pytest.raises(ValueError, match="env is for a server started as a command"):
        MCPTools("http://127.0.0.1:1/mcp", env={"a": "b"})


SANDBOX_CODE = """
import os
environment = str(dict(os.environ))
try:
    fail("the server said no")
    caught = None
except Exception as error:
    caught = str(error)
[add(2, 3), secret_length(), caught, environment]
"""


@pytest.fixture(params=["local", "jupyter", "docker", "e2b-host"])
def executor(request: pytest.FixtureRequest) -> Iterator[Executor]:
    profile = PROFILES[request.param]
    reason = profile.unavailable()
    if reason:
        pytest.skip(reason)
    settings = {"timeout_seconds": 30.0}
    with profile.make(**settings) as made:
        yield made


def test_model_code_calls_mcp_tools_in_every_sandbox(executor: Executor, mcp_tools: dict[str, Tool]) -> None:
    """The server runs on the host: its secret is used there and never enters the sandbox."""
    executor.send_tools(mcp_tools)
    result = executor.run(SANDBOX_CODE)
    total, length, caught, environment = result.output
    assert (total, length) == (5, len(SECRET))
    assert caught is not None and "the server said no" in caught
    assert SECRET not in environment


@pytest.mark.parametrize("sandbox", ["jupyter", "e2b"])
def test_inline_tools_mode_refuses_mcp_tools_naming_the_host_mode(sandbox: str, mcp_tools: dict[str, Tool]) -> None:
    """An MCP tool cannot be shipped into a sandbox as source: the refusal offers tools_mode='host'."""
    with PROFILES[sandbox].make(tools_mode="inline") as inline, pytest.raises(ToolDefinitionError) as refused:
        inline.send_tools({"add": mcp_tools["add"]})
    assert "calls an MCP server, which runs on the host" in str(refused.value)
    assert "tools_mode='host'" in str(refused.value) and "@tool" not in str(refused.value)


def test_a_streamable_http_servers_tools_from_e2b_code(http_server: str) -> None:
    """Over HTTP too: the server's secret stays with the server, and the bearer token with the host."""
    with (
        MCPTools(http_server, headers={"Authorization": f"Bearer {TOKEN}"}) as tools,
        PROFILES["e2b-host"].make(timeout_seconds=30.0) as e2b,
    ):
        e2b.send_tools({tool.name: tool for tool in tools})
        total, length, caught, environment = e2b.run(SANDBOX_CODE).output
    assert (total, length) == (5, len(SECRET))
    assert caught is not None and "the server said no" in caught
    assert SECRET not in environment and TOKEN not in environment


def test_codeward_run_with_an_mcp_server(tmp_path: Path) -> None:
    """The server's command is a shell line; it gets a minimal environment, so it names its PYTHONPATH itself."""
    model = write_script(tmp_path / "script.yaml", "final_answer(add(2, 3) * 10)")
    server = f"env PYTHONPATH={ROOT} {sys.executable} -m tests.mcp_server"
    done = subprocess.run(
        command("run", "add two numbers", "--mcp", server, "--model", model, "--json"),
        capture_output=True,
        text=True,
        env=command_env(),
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == 50


def test_codeward_run_on_e2b_calls_its_mcp_servers_tools_on_the_host(tmp_path: Path) -> None:
    from tests.e2b_server import shared_server

    model = write_script(tmp_path / "script.yaml", "final_answer(add(2, 3) * 10)")
    server = f"env PYTHONPATH={ROOT} {sys.executable} -m tests.mcp_server"
    e2b = {"E2B_DEBUG": "true", "E2B_SANDBOX_URL": str(shared_server().connection["sandbox_url"])}
    done = subprocess.run(
        command("run", "add two numbers", "--executor", "e2b", "--mcp", server, "--model", model, "--json"),
        capture_output=True,
        text=True,
        env=command_env(**e2b),
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == 50


def test_codeward_run_passes_the_named_variables_to_its_mcp_servers(tmp_path: Path) -> None:
    """`--mcp-env NAME` hands the server that one variable of the host's environment; a name that is
    not set is refused before anything starts."""
    model = write_script(tmp_path / "script.yaml", "final_answer(secret_length())")
    server = f"env PYTHONPATH={ROOT} {sys.executable} -m tests.mcp_server"
    run = command("run", "measure the secret", "--mcp", server, "--model", model, "--json")
    done = subprocess.run(
        [*run, "--mcp-env", SECRET_VARIABLE],
        capture_output=True,
        text=True,
        env=command_env(**{SECRET_VARIABLE: SECRET}),
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == len(SECRET)
    refused = subprocess.run(
        [*run, "--mcp-env", "CODEWARD_NO_SUCH_VARIABLE"],
        capture_output=True,
        text=True,
        env=command_env(),
        cwd=tmp_path,
        timeout=120,
    )
    assert refused.returncode == 2
    assert "--mcp-env CODEWARD_NO_SUCH_VARIABLE: not set in this environment" in refused.stderr
