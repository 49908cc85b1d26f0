"""Who may reach `codeward mcp serve --http`: a bearer token, and the Host and Origin a request names.

Anyone who can open a connection to the port could otherwise run code with the operator's tools:
another account on the same machine (loopback is shared by every user), or a web page the
operator visits, whose script posts to the port under a name it controls (DNS rebinding). So
every request carries the token (compared in constant time), names the server's own address in
its Host header, and comes from no foreign Origin. The Host and Origin checks are the SDK's own
(`TransportSecuritySettings`); the token is a small ASGI wrapper, because the SDK's bearer
support is built for OAuth (issuers, scopes, token metadata) rather than one shared secret.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
import socket

from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["TOKEN_VARIABLE", "is_loopback", "require_token", "server_token", "transport_security"]

TOKEN_VARIABLE = "CODEWARD_MCP_TOKEN"
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def is_loopback(host: str) -> bool:
    """Whether an address to bind reaches only this machine (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def server_token() -> tuple[str, bool]:
    """The token clients must send, and whether it was generated (then the operator must be shown it).

    A token from the environment is taken out of it, so no program the server starts (a tool's
    subprocess, a sandbox that would inherit the environment) finds it there.
    """
    given = os.environ.pop(TOKEN_VARIABLE, "")
    if given:
        return given, False
    return secrets.token_urlsafe(32), True


def require_token(app: ASGIApp, token: str) -> ASGIApp:
    """`app`, answering 401 to every HTTP request whose Authorization is not ``Bearer <token>``."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = next((value for name, value in scope["headers"] if name == b"authorization"), b"")
            if not hmac.compare_digest(given, expected):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"www-authenticate", b"Bearer"), (b"content-type", b"text/plain")],
                    }
                )
                await send({"type": "http.response.body", "body": b"codeward: this server needs its bearer token"})
                return
        await app(scope, receive, send)

    return guarded


def _address(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _with_port(host: str, port: int) -> str:
    has_port = "]:" in host if host.startswith("[") else ":" in host
    return host if has_port else f"{host}:{port}"


def transport_security(
    host: str, port: int, allow_hosts: list[str], allow_origins: list[str]
) -> TransportSecuritySettings:
    """The Host headers and Origins a request may carry: the bound address and port, and what the operator adds.

    A loopback address also answers to its other loopback names; a wildcard address (0.0.0.0, ::)
    answers to loopback and to this machine's name, and any other name clients use is added with
    ``--allow-host``. An extra host given without a port gets the served port. A browser sends
    the Origin of the page that made the request, so only the server's own origins pass.
    """
    wildcard = host in ("0.0.0.0", "::")
    names = {_address(host)}
    if wildcard or is_loopback(host):
        names.update(_LOOPBACK_NAMES)
    if wildcard:
        names.add(socket.gethostname())
    hosts = {f"{name}:{port}" for name in names} | {_with_port(extra, port) for extra in allow_hosts}
    origins = {f"http://{allowed}" for allowed in hosts} | set(allow_origins)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=sorted(hosts), allowed_origins=sorted(origins)
    )
