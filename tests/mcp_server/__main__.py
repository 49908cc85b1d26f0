"""Serve the test MCP server: on stdio, or with --http on a free loopback port."""

from __future__ import annotations

import os
import socket
import sys

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.mcp_server import TOKEN_VARIABLE, server


def serve_http() -> None:
    """Bind port 0 first, so the URL printed is the one served, whatever port was free."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    app = _require_token(server.streamable_http_app(), f"Bearer {os.environ[TOKEN_VARIABLE]}")
    config = uvicorn.Config(app, log_level="warning")
    print(f"http://127.0.0.1:{port}/mcp", flush=True)
    uvicorn.Server(config).run(sockets=[listener])


def _require_token(app: ASGIApp, expected: str) -> ASGIApp:
    """Refuse HTTP requests without the bearer token, as a server behind authentication would."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers", []))
        if scope["type"] == "http" and headers.get(b"authorization", b"").decode() != expected:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)

    return guarded


if "--http" in sys.argv[1:]:
    serve_http()
else:
    server.run()
