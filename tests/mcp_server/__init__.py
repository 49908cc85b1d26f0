"""A small MCP server for codeward's tests, made with the official SDK.

`python -m tests.mcp_server` serves it on stdio; `python -m tests.mcp_server --http`
serves streamable HTTP on a free loopback port, prints its URL on the first line
of stdout, and answers only requests that carry ``Authorization: Bearer
$MCP_TEST_TOKEN``. `secret_length()` reads ``MCP_TEST_SECRET`` from the server's
own environment, so tests can show that a secret given to the server never
reaches the sandbox.
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

__all__ = ["SECRET_VARIABLE", "TOKEN_VARIABLE", "server"]

SECRET_VARIABLE = "MCP_TEST_SECRET"
TOKEN_VARIABLE = "MCP_TEST_TOKEN"

server = MCPServer("codeward-test-server", log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def secret_length() -> int:
    """The length of the secret this server was given."""
    return len(os.environ[SECRET_VARIABLE])


@server.tool()
def fail(reason: str = "the test server failed on purpose") -> str:
    """Always fail, with the reason given."""
    raise ToolError(reason)


@server.tool()
def pid() -> int:
    """The server's process id, so a test can kill it midway."""
    return os.getpid()


@server.tool()
def blob(size: int) -> str:
    """A text of `size` characters: an answer as large as a test needs."""
    return "x" * size


@server.tool()
def empties(count: int) -> list[dict[str, int]]:
    """`count` empty objects: few bytes on the wire, many objects once parsed."""
    return [{} for _ in range(count)]


@server.tool(name="shout-text")
def shout(text: str, times: int | None = None) -> str:
    """Upper-case a text, repeated `times` times: a name that is not a Python identifier, an optional argument."""
    return text.upper() * (times or 1)
