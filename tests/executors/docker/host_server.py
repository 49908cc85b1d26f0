"""A small HTTP server on the host's loopback, for sandboxes that reach it through their egress proxy."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest


@dataclass
class HostServer:
    """Where it listens, and the path and headers of every request it answered."""

    port: int
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def entry(self) -> str:
        """The egress entry that lists it."""
        return f"127.0.0.1:{self.port}"


@contextmanager
def host_server(host: str = "127.0.0.1") -> Iterator[HostServer]:
    """Answers every GET with ``ok <path>``, and notes what it was sent."""
    served = HostServer(0)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.requests.append((self.path, dict(self.headers.items())))
            body = f"ok {self.path}".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer((host, 0), Handler)
    served.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def require_mitmdump() -> str:
    """The mitmdump egress sandboxes run; skipped without one (a failure where CI requires docker)."""
    from codeward.egress.proxy import EgressUnavailable, mitmdump_path

    try:
        return mitmdump_path()
    except EgressUnavailable as error:
        pytest.skip(f"no egress proxy here: {error}")
        raise


def fetch_code(url: str) -> str:
    """Code for the sandbox: the body at `url`, or the name of the error that stopped it."""
    return (
        "import urllib.request\n"
        "try:\n"
        f"    _got = urllib.request.urlopen({url!r}, timeout=10).read().decode()\n"
        "except Exception as _error:\n"
        "    _got = 'failed: ' + type(_error).__name__\n"
        "_got"
    )
