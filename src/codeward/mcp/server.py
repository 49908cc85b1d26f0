"""codeward as an MCP server: `codeward mcp serve` lends an MCP client's model a Python sandbox.

The client's model plays the part a `CodeAgent`'s model plays: it writes code, `run_python`
runs it in a sandbox, and the answer is the observation the agent would have shown its own
model (what the code printed, the last value or the final answer, the sandbox's traceback).
Each client session has a sandbox of its own, started on its first `run_python` and closed
when the session ends, so a client that goes away leaves no container behind.

The session's end is the SDK's per-connection ``exit_stack``, unwound when a stdio stream
closes or a streamable-HTTP session is deleted or times out; an idle timeout of our own, and
the server's shutdown, close whatever that hook missed. A client on the stateless 2026-07-28
protocol has no session: each of its calls gets a fresh sandbox, closed when the call ends.

Over HTTP, who may call is `guard`'s business and what each client may hold is `budgets`'s;
a session's calls take turns here, and its agent forgets all but its last steps.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from starlette.requests import Request

from codeward import __version__
from codeward.effects import offload
from codeward.executors.base import ExecutorError
from codeward.executors.live import OutputCallback
from codeward.mcp.budgets import Budgets, CallQueue, client_of
from codeward.mcp.guard import require_token, transport_security
from codeward.mcp.progress import with_progress
from codeward.platform.code_agent import CodeAgent
from codeward.platform.display import AgentLogger, LogLevel
from codeward.platform.memory import ActionStep
from codeward.platform.models import Model
from codeward.tools import Tool

__all__ = ["HttpAccess", "ServeOptions", "serve_http", "serve_stdio"]

T = TypeVar("T")
_SANDBOX_KEY = "codeward.sandbox"
_RUN_PYTHON = types.Tool(
    name="run_python",
    description=(
        "Run Python code in a sandbox that keeps its state (variables, functions, imports) between calls "
        "of this session. Returns what the code printed and the value of its last expression; an error "
        "returns the sandbox's traceback. Call final_answer(x) to hand back a result."
    ),
    input_schema={
        "type": "object",
        "properties": {"code": {"type": "string", "description": "The Python code to run."}},
        "required": ["code"],
    },
)
_RESET = types.Tool(
    name="reset",
    description="Forget everything this session's code defined: the next run_python starts in a fresh sandbox.",
    input_schema={"type": "object", "properties": {}},
)


@dataclass(frozen=True)
class ServeOptions:
    """What every session's sandbox is made of: `codeward mcp serve`'s flags."""

    executor: str
    tools: list[Tool] = field(default_factory=list)
    imports: list[str] = field(default_factory=list)
    idle_timeout: float = 1800.0
    max_sessions: int = 16  # over HTTP, in total ...
    sessions_per_client: int = 4  # ... and from one address
    waiting_calls: int = 2  # a session's calls beyond the one running; more are refused at once
    threads: int = 8  # worker threads for calls, shared by every client ...
    threads_per_client: int = 2  # ... of which one address's calls may hold this many
    steps_kept: int = 50  # the past calls a session's agent remembers
    #: More settings for each session's sandbox (`--egress`: each session's docker sandbox has a proxy of its own).
    executor_kwargs: dict[str, Any] = field(default_factory=dict)


class SessionSandbox:
    """One client session's sandbox, held by a `CodeAgent` whose model is the client's.

    The agent is made on the first `run` (a client that only lists tools starts nothing) and
    runs each call as one of its steps (`CodeAgent.arun_code`), so the sandbox gets tools and
    imports, and the client gets its observations, exactly as `codeward run` would give them.
    Calls of one session take turns: a sandbox runs one block at a time. A call waits on the
    event loop (the executor's `arun`), holding no thread while its code runs.
    """

    def __init__(self, options: ServeOptions) -> None:
        self._options = options
        self.agent: CodeAgent | None = None
        self._lock = anyio.Lock()
        self.calls = CallQueue()
        self._idle_note = ""
        self.last_used = time.monotonic()

    async def run(self, code: str, on_output: OutputCallback | None = None) -> types.CallToolResult:
        """Run `code` and say what happened as the model should see it.

        `on_output` hears the block's output as it comes (the client's progress notifications)."""
        async with self._lock:
            self.last_used = time.monotonic()
            try:
                agent = await self._started()
            except (ValueError, ExecutorError) as error:
                return _text_result(f"The {self._options.executor!r} sandbox could not start: {error}", failed=True)
            try:
                step = await agent.arun_code(code, on_output)
            finally:
                self.last_used = time.monotonic()
                del agent.memory.steps[: -self._options.steps_kept]  # a long session's memory stays bounded
            if step.error is not None:
                return _text_result(_joined(self._take_idle_note(), step.observations, step.error.message), failed=True)
            answer = f"Final answer: {step.action_output}" if step.is_final_answer else ""
            _forget_value(step)
            return _text_result(_joined(self._take_idle_note(), step.observations, answer))

    async def _started(self) -> CodeAgent:
        """The session's agent, made on the first call; a sandbox that starts when made (a container)
        starts in the shared pool of threads, so the loop serves other sessions meanwhile."""
        if self.agent is None:
            self.agent = await offload(
                lambda: CodeAgent(
                    tools=self._options.tools,
                    model=Model(),  # never asked: the MCP client's model writes the code
                    executor=self._options.executor,
                    executor_kwargs=self._options.executor_kwargs or None,
                    additional_authorized_imports=self._options.imports or None,
                    logger=AgentLogger(LogLevel.OFF),
                )
            )
        return self.agent

    def _take_idle_note(self) -> str:
        note, self._idle_note = self._idle_note, ""
        return note

    async def close_if_idle(self, now: float) -> None:
        """Close a sandbox unused for the idle timeout; the session's next call starts afresh, and is told."""
        async with self._lock:
            if self.agent is not None and now - self.last_used >= self._options.idle_timeout:
                await self._close_agent()
                self._idle_note = (
                    f"The sandbox was idle for {self._options.idle_timeout:g} s and was closed; "
                    "this is a fresh one, and what earlier code defined is gone."
                )

    async def reset(self) -> None:
        """Close the sandbox now; the next `run` starts a fresh one."""
        async with self._lock:
            await self._close_agent()

    close = reset

    async def _close_agent(self) -> None:
        agent, self.agent = self.agent, None
        if agent is not None:
            await agent.aclose()


def _forget_value(step: ActionStep) -> None:
    """The client has the call's value as text: the value itself (of any size) is not kept for the session's life."""
    step.action_output = None


def _joined(*parts: str | None) -> str:
    return "\n".join(part for part in parts if part) or "The code ran, printed nothing and gave no value."


def _text_result(text: str, *, failed: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=failed)


class Sandboxes:
    """Every session's sandbox, so the idle timeout and the server's shutdown can reach them all."""

    def __init__(self, options: ServeOptions, budgets: Budgets) -> None:
        self.options = options
        self.budgets = budgets
        self._open: set[SessionSandbox] = set()

    def of(self, connection: Connection) -> SessionSandbox:
        """The connection's sandbox; the first call makes it and ties its closing to the connection's end."""
        sandbox = connection.state.get(_SANDBOX_KEY)
        if isinstance(sandbox, SessionSandbox):
            return sandbox
        sandbox = SessionSandbox(self.options)
        connection.state[_SANDBOX_KEY] = sandbox
        self._open.add(sandbox)
        connection.exit_stack.push_async_callback(self._close, sandbox)
        return sandbox

    async def _close(self, sandbox: SessionSandbox) -> None:
        self._open.discard(sandbox)
        await sandbox.close()

    async def close_idle_forever(self) -> None:
        """Every so often, close the sandboxes whose session has not called for the idle timeout."""
        period = min(self.options.idle_timeout / 4, 30.0)
        while True:
            await anyio.sleep(period)
            now = time.monotonic()
            for sandbox in list(self._open):
                await sandbox.close_if_idle(now)

    async def in_turn(
        self, ctx: ServerRequestContext[Sandboxes], sandbox: SessionSandbox, call: Callable[[], Awaitable[T]]
    ) -> T | types.CallToolResult:
        """Await `call` when the session's turn comes, within the calls its client and the server may
        run at once (`--threads-per-client`, `--threads`); past the few that may wait, a call is
        refused at once."""
        queue = sandbox.calls
        if queue.in_flight > self.options.waiting_calls:
            return _text_result(
                f"This session already has a call running and {queue.in_flight - 1} waiting, the most it may "
                "(--waiting-calls); wait for an answer before sending more.",
                failed=True,
            )
        queue.in_flight += 1
        try:
            async with queue.turn:
                # a session's calls count against the client that opened it, from whatever address they come
                client = self.budgets.owner(_connection_of(ctx).session_id) or _client_of(ctx)
                limiter = self.budgets.limiter(client)
                async with limiter or contextlib.nullcontext(), self.budgets.threads:
                    return await call()
        finally:
            queue.in_flight -= 1

    async def close_all(self) -> None:
        for sandbox in list(self._open):
            await self._close(sandbox)


def _client_of(ctx: ServerRequestContext[Sandboxes]) -> str:
    """The address the request came from (the HTTP transport attaches its request); stdio's one client has none."""
    request = ctx.request
    return client_of(request.scope) if isinstance(request, Request) else "stdio"


def _connection_of(ctx: ServerRequestContext[Sandboxes]) -> Connection:
    """The request's connection, whose end is the session's end.

    The SDK keeps per-connection state and teardown on `Connection`, but this version's
    request context reaches it only through its session (the SDK's own TODO, "L54").
    """
    connection = getattr(ctx.session, "_connection", None)
    if not isinstance(connection, Connection):
        raise RuntimeError("this version of the mcp SDK does not say which connection a request came on")
    return connection


async def _list_tools(
    ctx: ServerRequestContext[Sandboxes], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[_RUN_PYTHON, _RESET])


async def _call_tool(ctx: ServerRequestContext[Sandboxes], params: types.CallToolRequestParams) -> types.CallToolResult:
    sandboxes = ctx.lifespan_context
    sandbox = sandboxes.of(_connection_of(ctx))
    arguments = params.arguments or {}
    if params.name == "run_python":
        code = arguments.get("code")
        if not isinstance(code, str):
            return _text_result("run_python needs its argument 'code', a string of Python.", failed=True)
        return await with_progress(
            ctx, lambda on_output: sandboxes.in_turn(ctx, sandbox, lambda: sandbox.run(code, on_output))
        )
    if params.name == "reset":
        refused = await sandboxes.in_turn(ctx, sandbox, sandbox.reset)
        return refused or _text_result("The sandbox was reset: the next run_python starts in a fresh one.")
    return _text_result(f"There is no tool named {params.name!r}; the tools are run_python and reset.", failed=True)


def _server(options: ServeOptions, budgets: Budgets) -> Server[Sandboxes]:
    """The MCP server; its lifespan holds the sandboxes, closes idle ones, and closes the rest when it stops."""

    @asynccontextmanager
    async def lifespan(_: Server[Sandboxes]) -> AsyncIterator[Sandboxes]:
        sandboxes = Sandboxes(options, budgets)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(sandboxes.close_idle_forever)
            try:
                yield sandboxes
            finally:
                tasks.cancel_scope.cancel()
                with anyio.CancelScope(shield=True):
                    await sandboxes.close_all()

    server = Server(
        "codeward",
        version=__version__,
        instructions="run_python runs Python in a sandbox of this session's own; reset starts it afresh.",
        lifespan=lifespan,
        on_list_tools=_list_tools,
        on_call_tool=_call_tool,
    )
    server.middleware.append(budgets.middleware)
    return server


def _budgets(options: ServeOptions) -> Budgets:
    return Budgets(options.max_sessions, options.sessions_per_client, options.threads, options.threads_per_client)


async def _until_terminated(scope: anyio.CancelScope) -> None:
    """SIGTERM (how an MCP client ends a server that outstays its grace) stops serving, so sandboxes close."""
    import signal

    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
        async for _ in signals:
            scope.cancel()
            return


async def _serve_stdio(options: ServeOptions) -> None:
    server = _server(options, _budgets(options))
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_until_terminated, tasks.cancel_scope)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        tasks.cancel_scope.cancel()


def serve_stdio(options: ServeOptions) -> None:
    """Serve one client over stdin and stdout until it closes them."""
    anyio.run(_serve_stdio, options)


@dataclass(frozen=True)
class HttpAccess:
    """Who may reach the HTTP server: the token every request carries (None: anyone on loopback) and extra names."""

    token: str | None
    show_token: bool = False
    allow_hosts: list[str] = field(default_factory=list)
    allow_origins: list[str] = field(default_factory=list)


async def _serve_http(options: ServeOptions, listening: socket.socket, host: str, access: HttpAccess) -> None:
    import uvicorn

    port = listening.getsockname()[1]
    budgets = _budgets(options)
    app = _server(options, budgets).streamable_http_app(
        host=host,
        session_idle_timeout=options.idle_timeout,
        max_sessions=options.max_sessions,
        transport_security=transport_security(host, port, access.allow_hosts, access.allow_origins),
    )
    counted = budgets.admit(app)
    served = counted if access.token is None else require_token(counted, access.token)
    web = uvicorn.Server(uvicorn.Config(served, log_level="warning", lifespan="on"))
    await web.serve(sockets=[listening])  # uvicorn stops on SIGTERM and SIGINT itself, closing the lifespan


def serve_http(options: ServeOptions, host: str, port: int, access: HttpAccess) -> None:
    """Serve clients over streamable HTTP at http://HOST:PORT/mcp; port 0 picks a free one, printed on stderr.

    A generated token is printed once, beside the URL: it is the only place the operator sees it.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as listening:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((host, port))
        listening.listen(128)  # a client that reads the URL below may connect at once: it queues, not refused
        shown_host = f"[{host}]" if family == socket.AF_INET6 else host
        print(
            f"codeward MCP server at http://{shown_host}:{listening.getsockname()[1]}/mcp", file=sys.stderr, flush=True
        )
        if access.token is not None and access.show_token:
            print(f"codeward MCP token (clients send Authorization: Bearer TOKEN): {access.token}", file=sys.stderr)
        elif access.token is None:
            print("codeward MCP server without a token (--no-auth): every local account can call it", file=sys.stderr)
        sys.stderr.flush()
        anyio.run(_serve_http, options, listening, host, access)
