"""The bytes an MCP server may send the host in one message, on both transports.

The SDK reads a server's message whole before anyone sees it (a stdio line, an HTTP body), so
a cap on the result it hands over would come after the host had paid for it. The budget is
enforced before the SDK: for a stdio server by a relay process between the server and the host
(the server's own stdout never reaches the host), for an HTTP server by the client's transport.
A message over the budget becomes an error for the call it answers, which the model's code
receives as `MCPToolError`, and the host keeps at most the budget of it.

Bytes alone do not bound what parsing makes of them: ``{}`` is two bytes and a few hundred once
the SDK has made it a Python dict and validated it. So a message may also open at most one
container (``{`` or ``[``, counted in strings too) per `BYTES_PER_CONTAINER` of the budget.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2

__all__ = ["BYTES_PER_CONTAINER", "DEFAULT_MESSAGE_BYTES", "OVER_BUDGET", "RELAY", "CappedTransport", "over_budget"]

#: Bytes one message from a server may hold: an answer with an image or a page fits, and the host's
#: memory for a call stays a small multiple of it (the SDK copies a message while it reads it).
DEFAULT_MESSAGE_BYTES = 16 * 2**20
#: Of the budget, the bytes that buy one container a message opens.
BYTES_PER_CONTAINER = 64
#: The JSON-RPC error code of an answer over the budget (in the range JSON-RPC leaves to implementations).
OVER_BUDGET = -32050


def over_budget(limit: int) -> str:
    return (
        f"the MCP server's answer was over {limit} bytes (or {limit // BYTES_PER_CONTAINER} lists and objects), "
        "codeward's budget for one message from a server; ask for less, or raise MCPTools(max_message_bytes=...)"
    )


#: Run before the server's own command, as `python -c RELAY HOST_PID LIMIT MESSAGE COMMAND...`. It dies
#: with the host (Linux's parent-death signal), starts the server to die with it in turn, and copies
#: the server's stdout to its own a line at a time: a line over LIMIT (or opening too many containers)
#: is read past and dropped, and the request it answered (its id read from the line's head) gets an
#: error with MESSAGE instead. It is not dumpable, so a server running as another user cannot reach
#: the host's pipe through /proc; one running as the same user as the host has the host's rights anyway.
RELAY = r"""
import ctypes, json, os, re, signal, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(1, signal.SIGKILL)
if os.getppid() != int(sys.argv[1]): os._exit(1)
libc.prctl(4, 0)
limit, message = int(sys.argv[2]), sys.argv[3]
containers = limit // %d
server = subprocess.Popen(sys.argv[4:], stdout=subprocess.PIPE, preexec_fn=lambda: libc.prctl(1, signal.SIGKILL))
source, out = server.stdout, sys.stdout.buffer
while line := source.readline(limit + 1):
    whole = len(line) <= limit or line.endswith(b"\n")
    if not whole or line.count(b"{") + line.count(b"[") > containers:
        found = re.search(rb'"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,200}")', line[:4096])
        while line and not line.endswith(b"\n"):
            line = source.readline(1 << 20)
        if found is None:
            continue
        line = b'{"jsonrpc":"2.0","id":%s,"error":{"code":-32050,"message":%s}}\n' % (
            found.group(1), json.dumps(message).encode())
    out.write(line)
    out.flush()
sys.exit(server.wait())
""".replace("%d", str(BYTES_PER_CONTAINER))


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(self, stream: httpx2.AsyncByteStream, limit: int) -> None:
        self._stream = stream
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        received = containers = 0
        async for chunk in self._stream:
            received += len(chunk)
            containers += chunk.count(b"{") + chunk.count(b"[")
            if received > self._limit or containers > self._limit // BYTES_PER_CONTAINER:
                raise httpx2.StreamError(over_budget(self._limit))
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


class CappedTransport(httpx2.AsyncBaseTransport):
    """An HTTP transport whose responses stop with an error once a body passes the budget."""

    def __init__(self, limit: int, inner: httpx2.AsyncBaseTransport | None = None) -> None:
        self._limit = limit
        self._inner = inner or httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_CappedStream(response.stream, self._limit),
            request=request,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()
