"""Tools from an MCP server, run on the host like any other codeward tool.

`MCPTools` connects to one server, a command spoken to over stdio or a
streamable-HTTP URL, lists its tools and makes each one a `Tool` whose call asks
the server. The sandbox receives only the tool's stub: the server's process, its
environment and its network stay beside the host.

The SDK is async and codeward is sync, so each `MCPTools` runs its client session
on a private event loop in a thread of its own; calls from any thread are handed
to that loop and waited for with a time limit.

A stdio server that dies is not restarted behind the caller's back: the call
that finds it gone fails with `MCPToolError` (the tool may or may not have run
before the server died, so repeating it silently could run it twice), and the
next call starts the server again.
"""

from __future__ import annotations

import asyncio
import keyword
import os
import re
import shlex
import sys
import threading
import unicodedata
from collections.abc import AsyncIterator, Coroutine, Sequence
from concurrent.futures import CancelledError
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeGuard, TypeVar

import httpx2
import mcp_types
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

from codeward.executors.settings import checked_bytes, taken_name
from codeward.mcp.message_cap import DEFAULT_MESSAGE_BYTES, OVER_BUDGET, RELAY, CappedTransport, over_budget
from codeward.redaction import mark_secret, url_without_secrets
from codeward.tools import JSON_TYPES, Tool, ToolDefinitionError

__all__ = ["MCPTool", "MCPToolError", "MCPTools", "served_over_http"]

_T = TypeVar("_T")

#: Seconds a server may take to start and list its tools.
CONNECT_TIMEOUT = 30.0
#: Seconds a tool call may take by default.
CALL_TIMEOUT = 120.0
#: Seconds the server gets to stop when the tools are closed.
CLOSE_TIMEOUT = 10.0
#: Characters of the reason a server's message could not be read that an error shows: it quotes the message.
_SHOWN_REASON = 200


class MCPToolError(RuntimeError):
    """A call to an MCP tool failed: the server reported an error, was unreachable, or did not answer in time.

    The model's code receives it like any tool's exception and may catch it.
    """


@dataclass
class _Server:
    """Where the server is and how to reach it: a command (stdio) or a URL (streamable HTTP)."""

    command: list[str] | None = None
    url: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    message_bytes: int = DEFAULT_MESSAGE_BYTES
    #: The URL as messages and saved runs show it, its credentials hidden (and marked secret) once.
    shown_url: str = ""

    def __str__(self) -> str:
        """How the server is named in messages and saved runs: a URL's credentials never shown."""
        return self.shown_url if self.url is not None else shlex.join(self.command or [])

    def transport(self) -> AbstractAsyncContextManager[Any]:
        if self.url is not None:
            return _http_transport(self.url, self.headers, self.message_bytes)
        return stdio_client(_stdio_parameters(self.command or [], self.env, self.cwd, self.message_bytes))


def _stdio_parameters(command: list[str], env: dict[str, str], cwd: str | None, limit: int) -> StdioServerParameters:
    """The SDK passes the server a minimal environment (PATH, HOME...) plus `env`: the host's secrets stay here.

    On Linux the server runs under the relay (`message_cap.RELAY`): it dies with the host, and no
    message over the budget reaches the host."""
    if sys.platform.startswith("linux"):
        command = [sys.executable, "-c", RELAY, str(os.getpid()), str(limit), over_budget(limit), *command]
    return StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=cwd)


@asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str], limit: int) -> AsyncIterator[Any]:
    timeout = httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout, transport=CappedTransport(limit)) as client,
        streamable_http_client(url, http_client=client) as streams,
    ):
        yield streams


class _Session:
    """One live connection: a task on the loop that holds the transport and session open until told to stop."""

    def __init__(self, server: _Server) -> None:
        self.server = server
        self.stop = asyncio.Event()
        self.lost = False
        #: Why a message from the server could not be read, once one could not.
        self.unreadable: str | None = None
        self.calls: set[asyncio.Task[Any]] = set()
        self.ready: asyncio.Future[tuple[ClientSession, list[types.Tool]]] = asyncio.get_running_loop().create_future()
        self.task = asyncio.ensure_future(self._hold())

    async def answer(self, call: Coroutine[Any, Any, _T]) -> _T:
        """`call`'s result, or its cancellation when the server sends what cannot be read."""
        task = asyncio.ensure_future(call)
        self.calls.add(task)
        try:
            return await task
        finally:
            self.calls.discard(task)

    async def _heard(self, message: Any) -> None:
        """The SDK hands over a message it could not read (not JSON-RPC, a number too long for an
        int) as an exception, and goes on waiting for the answer that message may have been: each
        call would wait out its whole timeout. They end now, and the next call connects again."""
        if isinstance(message, ValueError):  # pydantic's ValidationError is one; a budget's StreamError is not
            self.unreadable = _unreadable(message)
            self.lost = True
            for call in list(self.calls):
                call.cancel()

    async def _hold(self) -> None:
        try:
            async with (
                self.server.transport() as (read, write),
                ClientSession(read, write, message_handler=self._heard) as session,
            ):
                await session.initialize()
                listed = await session.list_tools()
                self.ready.set_result((session, listed.tools))
                await self.stop.wait()
        except BaseException as error:
            if not self.ready.done():
                self.ready.set_exception(error)
        finally:
            self.lost = True

    async def close(self) -> None:
        self.stop.set()
        try:
            await asyncio.wait_for(self.task, CLOSE_TIMEOUT)
        except (TimeoutError, asyncio.CancelledError):
            pass


class MCPTools:
    """The tools of one MCP server, as codeward tools that call the server from the host.

    Give a command for a stdio server (a list, or a string split like a shell
    line) with the `env` it needs, or the URL of a streamable-HTTP server with
    the `headers` it needs. Use it as a context manager: the block gets the list
    of tools, and the server stops when the block ends (a stdio server also dies
    with the host process). `timeout` bounds each call, in seconds, and
    `max_message_bytes` each message the server sends (an answer over it fails the call).
    """

    def __init__(
        self,
        server: str | Sequence[str],
        *,
        env: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        cwd: str | None = None,
        timeout: float = CALL_TIMEOUT,
        max_message_bytes: int = DEFAULT_MESSAGE_BYTES,
    ) -> None:
        self.server = _server(server, env, headers, cwd)
        self.server.message_bytes = checked_bytes("max_message_bytes", max_message_bytes)
        self.timeout = timeout
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"mcp {self.server}", daemon=True)
        self._thread.start()
        self._lock = threading.Lock()
        self._session: _Session | None = None
        self._client: ClientSession | None = None
        self._closed = False
        try:
            listed = self._connect()
        except BaseException:
            self.close()
            raise
        self.tools: list[Tool] = _tools(self, listed)

    def __enter__(self) -> list[Tool]:
        return self.tools

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<MCPTools {self.server} ({len(getattr(self, 'tools', []))} tools)>"

    def close(self) -> None:
        """Stop the server (or end the HTTP session) and the loop; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._session is not None:
                self._wait(self._session.close(), CLOSE_TIMEOUT + 1)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(CLOSE_TIMEOUT)
        if not self._thread.is_alive():
            self._loop.close()

    def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call the server's tool `name`; a dead connection is reported now and made again at the next call."""
        session, held = self._live_session()
        try:
            called = session.call_tool(name, arguments, read_timeout_seconds=self.timeout)
            result = self._wait(held.answer(called), self.timeout + 5)
        except CancelledError:
            if held.unreadable is None:
                raise
            raise MCPToolError(
                f"the MCP server {self.server} sent a message codeward cannot read during the call to {name} "
                f"({held.unreadable}); the next call connects again"
            ) from None
        except MCPError as error:
            if error.code == OVER_BUDGET:
                raise MCPToolError(f"{error.error.message} (the call to {name})") from None
            if error.code != mcp_types.CONNECTION_CLOSED:
                raise MCPToolError(
                    f"the MCP server {self.server} refused the call to {name}: {error.error.message}"
                ) from None
            raise self._lost(name) from None
        except MCPToolError:
            raise
        except Exception:
            raise self._lost(name) from None
        return result

    def _lost(self, name: str) -> MCPToolError:
        """Forget the connection, so the next call makes it again; the error says so."""
        with self._lock:
            if self._session is not None:
                self._session.lost = True
        return MCPToolError(
            f"the connection to the MCP server {self.server} was lost during the call to {name} "
            "(it may or may not have run); the next call connects again"
        )

    def _live_session(self) -> tuple[ClientSession, _Session]:
        """The SDK's session and the connection that holds it, read together under the lock: another
        thread may connect again as soon as it is let go."""
        with self._lock:
            if self._closed:
                raise MCPToolError(f"the MCP server {self.server} was closed: its tools can no longer be called")
            if self._session is None or self._session.lost:
                self._connect()
            assert self._client is not None and self._session is not None
            return self._client, self._session

    def _connect(self) -> list[types.Tool]:
        """Start (or start again) the session; the caller holds the lock or is the constructor."""
        if self._session is not None:
            self._wait(self._session.close(), CLOSE_TIMEOUT + 1)
        self._session = self._wait(_opened(self.server), CONNECT_TIMEOUT)
        try:
            self._client, listed = self._wait(_ready(self._session), CONNECT_TIMEOUT)
        except Exception as error:
            self._session.lost = True
            raise MCPToolError(f"cannot connect to the MCP server {self.server}: {_reason(error)}") from error
        return listed

    def _wait(self, coroutine: Coroutine[Any, Any, _T], timeout: float) -> _T:
        """Run `coroutine` on the private loop and wait for it; past `timeout` it is cancelled."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise MCPToolError(f"the MCP server {self.server} did not answer within {timeout:g} seconds") from None


async def _opened(server: _Server) -> _Session:
    return _Session(server)


async def _ready(session: _Session) -> tuple[ClientSession, list[types.Tool]]:
    return await session.ready


def _reason(error: BaseException) -> str:
    """The innermost message of an error the SDK's task groups may have wrapped in groups."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, httpx2.HTTPStatusError):
        return f"HTTP {error.response.status_code}"
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _unreadable(error: ValueError) -> str:
    """What was wrong with a message that could not be read, in a line: pydantic's first complaint
    (``Invalid JSON: number out of range at line 1 column 4412``) without the message it quotes."""
    errors = getattr(error, "errors", None)
    try:
        said = str(errors()[0]["msg"]) if callable(errors) else str(error)
    except (IndexError, KeyError, TypeError):
        said = str(error)
    return (said.splitlines() or [type(error).__name__])[0][:_SHOWN_REASON]


def served_over_http(server: str | Sequence[str]) -> TypeGuard[str]:
    """Whether `server` is an http(s) URL (headers go with it) rather than a command (it takes env)."""
    return isinstance(server, str) and re.match(r"https?://", server) is not None


def _server(
    server: str | Sequence[str], env: dict[str, str] | None, headers: dict[str, str] | None, cwd: str | None
) -> _Server:
    if served_over_http(server):
        if env:
            raise ValueError("env is for a server started as a command; an HTTP server takes headers=")
        mark_secret(*(headers or {}).values())
        return _Server(url=server, headers=dict(headers or {}), shown_url=url_without_secrets(server))
    command = shlex.split(server) if isinstance(server, str) else list(server)
    if not command:
        raise ValueError("an MCP server is a command to run or an http(s) URL; got nothing")
    if headers:
        raise ValueError("headers are for an HTTP server; a server started as a command takes env=")
    mark_secret(*(env or {}).values())
    return _Server(command=command, env=dict(env or {}), cwd=cwd)


class MCPTool(Tool):
    """One tool of an MCP server; calling it asks the server, from the host."""

    #: Why it cannot be shipped into a sandbox as source (``tools_mode="inline"``), read there.
    host_only = "calls an MCP server, which runs on the host: the tool cannot run inside the sandbox"

    def __init__(self, tools: MCPTools, listed: types.Tool, name: str) -> None:
        self.name = name
        self.remote_name = listed.name
        self.description = (listed.description or listed.title or f"The tool {listed.name} of an MCP server.").strip()
        self.inputs, self._argument_names, self._required = _inputs(listed.input_schema, self.name)
        self._unwraps_result = _wraps_result(listed.output_schema)
        self.output_type = _output_type(listed.output_schema, self._unwraps_result)
        self._tools = tools
        super().__init__()

    @property
    def server_command(self) -> str:
        """The server's command line or URL, as ``--mcp`` takes it: what a saved run records as the
        tool's origin (never its environment or headers, which may hold keys)."""
        return str(self._tools.server)

    def forward(self, **arguments: Any) -> Any:
        sent = {
            self._argument_names[key]: value
            for key, value in arguments.items()
            if value is not None or key in self._required
        }
        result = self._tools.call(self.remote_name, sent)
        if result.is_error:
            raise MCPToolError(_text(result.content) or f"the MCP tool {self.remote_name} failed")
        if result.structured_content is not None:
            content = result.structured_content
            return content["result"] if self._unwraps_result and "result" in content else content
        return _text(result.content)


def _tools(tools: MCPTools, listed: list[types.Tool]) -> list[Tool]:
    """One codeward tool per server tool, under a Python name; two tools that would share one are refused."""
    made: dict[str, Tool] = {}
    for entry in listed:
        name = _tool_name(entry.name)
        if name in made:
            raise ToolDefinitionError(
                f"the MCP server {tools.server} has two tools named {name!r} once made Python names; "
                "codeward cannot tell them apart"
            )
        made[name] = MCPTool(tools, entry, name)
    return list(made.values())


def _tool_name(name: str) -> str:
    """The server's tool name as the sandbox knows it: a name the server chose never hides ours.

    A name that would hide a builtin, a name the sandbox uses, or the agent's own `final_answer`
    gets a trailing underscore, as a keyword does (`print` -> `print_`); the model sees the
    tool under that name.
    """
    python = _python_name(name)
    if python == "final_answer" or taken_name(python) is not None:
        python = f"{python}_"
    return python


def _python_name(name: str) -> str:
    """A name the model's code can call: other characters become underscores ("get-weather" -> get_weather)."""
    python = re.sub(r"\W", "_", unicodedata.normalize("NFKC", name)).lstrip("_")
    if not python.isidentifier():  # empty, or led by a digit ("3d-view", "²x")
        python = f"tool_{python}"
    if not python.isidentifier():
        python = re.sub(r"[^A-Za-z0-9_]", "_", python)
    return f"{python}_" if keyword.iskeyword(python) else python


def _inputs(schema: dict[str, Any], tool: str) -> tuple[dict[str, dict[str, Any]], dict[str, str], set[str]]:
    """codeward's `inputs` from a JSON schema, the server's name of each argument, and the required ones."""
    properties: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    inputs: dict[str, dict[str, Any]] = {}
    names: dict[str, str] = {}
    for remote, spec in properties.items():
        name = _python_name(remote)
        if name in inputs:
            raise ToolDefinitionError(f"MCP tool {tool!r}: two arguments are named {name!r} once made Python names")
        inputs[name] = _input(name, spec if isinstance(spec, dict) else {}, remote in required)
        names[name] = remote
    return inputs, names, {name for name, remote in names.items() if remote in required}


def _input(name: str, spec: dict[str, Any], required: bool) -> dict[str, Any]:
    kinds = _json_types(spec)
    nullable = "null" in kinds or (not required and "default" not in spec)
    kinds = [kind for kind in kinds if kind != "null"] or ["any"]
    made: dict[str, Any] = {
        "type": kinds[0] if len(kinds) == 1 else kinds,
        "description": spec.get("description") or spec.get("title") or name,
    }
    if "default" in spec:
        made["default"] = spec["default"]
    if nullable:
        made["nullable"] = True
    return made


def _json_types(spec: dict[str, Any]) -> list[str]:
    """The JSON types a schema admits, read through anyOf/oneOf; an unknown or missing type is "any"."""
    if "type" in spec:
        kinds = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
    else:
        kinds = [kind for member in spec.get("anyOf", spec.get("oneOf", [])) for kind in _json_types(member)]
    return list(dict.fromkeys(kind if kind in JSON_TYPES else "any" for kind in kinds)) or ["any"]


def _wraps_result(schema: dict[str, Any] | None) -> bool:
    """Whether the server wraps a plain return value as ``{"result": value}``, as the MCP SDK's servers do."""
    return bool(schema) and set((schema or {}).get("properties") or ()) == {"result"}


def _output_type(schema: dict[str, Any] | None, unwraps: bool) -> str:
    if not schema:
        return "string"
    if not unwraps:
        return "object"
    kinds = [kind for kind in _json_types(schema["properties"]["result"]) if kind != "null"]
    return kinds[0] if len(kinds) == 1 else "any"


def _text(content: list[types.ContentBlock]) -> str:
    """The text blocks of a result; other blocks (images, resources) are named by their type."""
    return "\n".join(block.text if isinstance(block, types.TextContent) else f"[{block.type}]" for block in content)
