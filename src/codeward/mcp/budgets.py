"""What the clients of `codeward mcp serve --http` may hold at once: sessions, calls waiting and running.

A client is the address its connections come from. Each session holds a sandbox (a worker
process, a container), so sessions are counted in total and per client, and a session's opening
request beyond either budget is answered with an MCP error before the SDK makes anything of it.
A call's code holds its sandbox while it runs (the call waits on the event loop, with no thread):
a session runs one call and lets a few wait, and each client has a limiter of its own before the
shared one, so one client's slow calls cannot take every turn to run.

The count is kept where both ends are seen: the opening request here, in front of the SDK (the
session's id is in its answer's headers), and the session's end on the SDK's per-connection
``exit_stack``, reached by a server middleware that sees every session's first message. A
request without a session (the stateless protocol) is counted while it is served.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from codeward.wording import counted

__all__ = ["Budgets", "CallQueue"]

_SESSION_HEADER = b"mcp-session-id"
_ENDED_KEY = "codeward.session-end-counted"


@dataclass
class _Client:
    """One address's sessions (and opening requests in flight), and the threads its calls may hold."""

    sessions: int
    limiter: anyio.CapacityLimiter


@dataclass
class CallQueue:
    """One session's calls in flight: one runs, a few wait their turn without holding a thread."""

    turn: anyio.Lock = field(default_factory=anyio.Lock)
    in_flight: int = 0


class Budgets:
    """The sessions each client holds, and the threads its calls may take; shared by the HTTP app and the server."""

    def __init__(self, max_sessions: int, sessions_per_client: int, threads: int, threads_per_client: int) -> None:
        self.max_sessions = max_sessions
        self.sessions_per_client = sessions_per_client
        self.threads_per_client = threads_per_client
        self.threads = anyio.CapacityLimiter(threads)
        self._clients: dict[str, _Client] = {}
        self._owners: dict[str, str] = {}  # session id -> client

    def _refusal(self, client: str) -> str | None:
        held = self._clients.get(client)
        if held is not None and held.sessions >= self.sessions_per_client:
            return (
                f"codeward: this client already holds {counted(held.sessions, 'session')}, the most one client may "
                "(--sessions-per-client); end one, or wait for an idle one to time out"
            )
        if sum(c.sessions for c in self._clients.values()) >= self.max_sessions:
            return (
                f"codeward: this server already holds {counted(self.max_sessions, 'session')}, the most it may "
                "(--max-sessions); try again when one has ended"
            )
        return None

    def _take(self, client: str) -> None:
        held = self._clients.setdefault(client, _Client(0, anyio.CapacityLimiter(self.threads_per_client)))
        held.sessions += 1

    def _give_back(self, client: str) -> None:
        held = self._clients.get(client)
        if held is None:
            return
        held.sessions -= 1
        if held.sessions <= 0:
            del self._clients[client]

    def limiter(self, client: str) -> anyio.CapacityLimiter | None:
        """The threads `client`'s calls may hold at once (None: a client this count does not know, as on stdio)."""
        held = self._clients.get(client)
        return held.limiter if held is not None else None

    def owner(self, session_id: str | None) -> str | None:
        """The client that opened the session: its calls count against that client, whoever sends them."""
        return self._owners.get(session_id) if session_id is not None else None

    def session_ended(self, session_id: str) -> None:
        client = self._owners.pop(session_id, None)
        if client is not None:
            self._give_back(client)

    def admit(self, app: ASGIApp) -> ASGIApp:
        """`app`, refusing an opening request beyond the budgets and counting the session it opens."""

        async def counted(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            session_id = next((v.decode("latin-1") for n, v in scope["headers"] if n == _SESSION_HEADER), None)
            if session_id is not None:
                status = await _served(app, scope, receive, send)
                if scope["method"] == "DELETE" and status is not None and status < 400:
                    self.session_ended(session_id)  # the client ended it: its room is free now, not at its teardown
                return
            client = client_of(scope)
            refusal = self._refusal(client)
            if refusal is not None:
                await _refuse(send, refusal)
                return
            self._take(client)
            opened: list[str] = []

            async def watched(message: Message) -> None:
                if message["type"] == "http.response.start" and message["status"] < 400:
                    opened.extend(v.decode("latin-1") for n, v in message.get("headers", []) if n == _SESSION_HEADER)
                    for session_id in opened:
                        self._owners[session_id] = client  # the session now holds what the request took
                await send(message)

            try:
                await app(scope, receive, watched)
            finally:
                if not opened:
                    self._give_back(client)

        return counted

    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Tie the count's release to the session's end, on the session's first message."""
        connection = getattr(ctx.session, "_connection", None)
        if isinstance(connection, Connection) and connection.session_id and _ENDED_KEY not in connection.state:
            connection.state[_ENDED_KEY] = True
            connection.exit_stack.callback(self.session_ended, connection.session_id)
        return await call_next(ctx)


def client_of(scope: Scope) -> str:
    """The address a request came from: what the budgets count as one client."""
    peer = scope.get("client")
    return str(peer[0]) if peer else "unknown"


async def _served(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> int | None:
    """Serve one request; the HTTP status it was answered with (None if none was sent)."""
    status: list[int] = []

    async def watched(message: Message) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])
        await send(message)

    await app(scope, receive, watched)
    return status[0] if status else None


async def _refuse(send: Callable[[Message], Awaitable[None]], text: str) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": text}}).encode()
    await send({"type": "http.response.start", "status": 503, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})
