"""An HTTP server that speaks E2B's code-interpreter protocol, for the unmodified SDK.

The SDK in debug mode (``E2B_DEBUG=true``) creates no cloud sandbox and sends
its requests straight to the sandbox's ports; with ``E2B_SANDBOX_URL`` pointing
here, both the code-interpreter requests and envd's health check arrive at this
one server. What it serves, as E2B's own server does:

- ``GET /health``;
- ``POST /execute`` ``{code, context_id, language, env_vars}``: the execution's
  lines, streamed as they happen (chunked), a keepalive line after each second
  of silence, then ``end_of_execution``; 400 when both ``context_id`` and
  ``language`` are given, 404 for an unknown context; a client that disconnects
  has its execution interrupted;
- ``/contexts``: create (POST), list (GET), delete (DELETE ``/contexts/{id}``),
  restart (POST ``/contexts/{id}/restart``);
- envd's file upload, ``POST /files?path=...`` with an ``application/octet-stream``
  body: the file is created or replaced whole, its folders made as needed, a
  relative path taken from the sandbox's home, never through a link (see `files`);
  the answer lists what was written. It is served while an
  execution streams, as envd serves it beside the code interpreter;
- the rest of envd's files that the SDK's `sandbox.files` uses: download
  (``GET /files``) and the ``filesystem.Filesystem`` RPCs ``ListDir``, ``Stat``
  and ``Remove`` (see `files`).

It plays the cloud's part too: `expire()` makes the sandbox vanish (every
request then gets the 502 that E2B's edge answers for a sandbox it does not
know, and a running execution is cut off), and `replace()` brings a fresh one,
as creating a new sandbox would. With `cloud_connection` instead of
`connection` the SDK leaves debug mode and asks this server's API for the
sandbox as it asks E2B's: ``POST /v2/sandboxes`` (its JSON body kept in
`created`, network rules included), ``DELETE /sandboxes/{id}`` (the sandbox
expires) and ``POST /sandboxes/{id}/timeout``. It listens on the loopback
interface only.
"""

from __future__ import annotations

import json
import os
import select
import socket
import tempfile
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.e2b_server import files
from tests.e2b_server.contexts import Context

SANDBOX_ID = "debug_sandbox_id"  # the id the SDK gives every sandbox in debug mode
ENVD_VERSION = "99.99.99"  # the envd version the SDK assumes in debug mode (`ENVD_DEBUG_FALLBACK`)


class Sandbox:
    """The contexts of one sandbox: a default Python context made at start, and those asked for."""

    def __init__(self) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="e2b-sandbox-")
        self.cwd = self._folder.name
        self.contexts: dict[str, Context] = {}
        self.lock = threading.Lock()
        self.default = self.create()

    def create(self, cwd: str | None = None) -> Context:
        context = Context(cwd or self.cwd)
        with self.lock:
            self.contexts[context.id] = context
        return context

    def remove(self, context_id: str) -> bool:
        with self.lock:
            context = self.contexts.pop(context_id, None)
        if context is None:
            return False
        context.shutdown()
        return True

    def close(self) -> None:
        with self.lock:
            contexts, self.contexts = list(self.contexts.values()), {}
        for context in contexts:
            context.shutdown()
        self._folder.cleanup()


class E2BServer:
    """The protocol server on a loopback port, serving from a background thread.

    ``port=0`` picks a free port; `url` is what ``E2B_SANDBOX_URL`` should hold.
    """

    def __init__(self, port: int = 0, *, keepalive: float = 1.0) -> None:
        self.keepalive = keepalive
        self.sandbox: Sandbox | None = Sandbox()
        self.created: list[dict[str, Any]] = []  # the bodies of the API's create requests, in order
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.e2b = self  # type: ignore[attr-defined]
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def connection(self) -> dict[str, object]:
        """The SDK options (`ApiParams`) that send a sandbox's requests here, without environment variables."""
        return {"debug": True, "sandbox_url": self.url}

    @property
    def cloud_connection(self) -> dict[str, object]:
        """The SDK options that ask this server's API for sandboxes, as the SDK asks E2B's (with a dummy key)."""
        return {"api_key": "e2b_" + "0" * 40, "api_url": self.url, "sandbox_url": self.url}

    def start(self) -> E2BServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="e2b-server", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._httpd.serve_forever()

    def expire(self) -> None:
        """The sandbox is gone, as when its lifetime ends: its kernels die with it."""
        sandbox, self.sandbox = self.sandbox, None
        if sandbox is not None:
            sandbox.close()

    def replace(self) -> None:
        """A fresh sandbox in place of the current one (or of none), as `Sandbox.create` would give."""
        self.expire()
        self.sandbox = Sandbox()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self.expire()

    def __enter__(self) -> E2BServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "e2b-protocol-server"
    disable_nagle_algorithm = True  # small lines go out at once, not after the client's delayed ACK

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read failures from responses, not from the server's log."""

    @property
    def e2b(self) -> E2BServer:
        return self.server.e2b  # type: ignore[attr-defined]

    def do_GET(self) -> None:
        sandbox = self._sandbox()
        if sandbox is None:
            return
        if self.path == "/health":
            self._send_json(HTTPStatus.OK, "OK")
        elif urlsplit(self.path).path == "/files":
            path = parse_qs(urlsplit(self.path).query).get("path", [""])[0]
            self._send(*files.download(sandbox.cwd, path))
        elif self.path == "/contexts":
            with sandbox.lock:
                contexts = [context.describe() for context in sandbox.contexts.values()]
            self._send_json(HTTPStatus.OK, contexts)
        else:
            self._send_text(HTTPStatus.NOT_FOUND, f"no route for GET {self.path}")

    def do_POST(self) -> None:
        if urlsplit(self.path).path == "/files":
            self._upload()
            return
        if self.path.startswith(("/v2/sandboxes", "/sandboxes/")):
            self._control("POST")
            return
        if self.path.startswith("/filesystem.Filesystem/"):
            self._filesystem()
            return
        body = self._read_json()
        sandbox = self._sandbox()
        if sandbox is None or body is None:
            return
        parts = self.path.strip("/").split("/")
        if parts == ["execute"]:
            self._execute(sandbox, body)
        elif parts == ["contexts"]:
            language = (body.get("language") or "python").lower()
            if language != "python":
                self._send_text(HTTPStatus.INTERNAL_SERVER_ERROR, f"this server runs Python only, not {language!r}")
                return
            self._send_json(HTTPStatus.OK, sandbox.create(body.get("cwd")).describe())
        elif len(parts) == 3 and parts[0] == "contexts" and parts[2] == "restart":
            context = sandbox.contexts.get(parts[1])
            if context is None:
                self._send_text(HTTPStatus.NOT_FOUND, f"Context {parts[1]} not found")
                return
            context.restart()
            self._send_json(HTTPStatus.OK, None)
        else:
            self._send_text(HTTPStatus.NOT_FOUND, f"no route for POST {self.path}")

    def do_DELETE(self) -> None:
        if self.path.startswith("/sandboxes/"):
            self._control("DELETE")
            return
        sandbox = self._sandbox()
        if sandbox is None:
            return
        parts = self.path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == "contexts":
            if sandbox.remove(parts[1]):
                self._send_json(HTTPStatus.OK, None)
            else:
                self._send_text(HTTPStatus.NOT_FOUND, f"Context {parts[1]} not found")
        else:
            self._send_text(HTTPStatus.NOT_FOUND, f"no route for DELETE {self.path}")

    # -- the cloud's API -----------------------------------------------------------

    def _control(self, method: str) -> None:
        """Create, kill, or renew the sandbox, as E2B's API does for the SDK outside debug mode."""
        body = self._read_json()
        if body is None:
            return
        parts = urlsplit(self.path).path.strip("/").split("/")
        if method == "POST" and parts == ["v2", "sandboxes"]:
            self.e2b.created.append(body)
            if self.e2b.sandbox is None:
                self.e2b.replace()
            created = {
                "templateID": body.get("templateID") or "code-interpreter-v1",
                "sandboxID": SANDBOX_ID,
                "clientID": "local",
                "envdVersion": ENVD_VERSION,
            }
            self._send_json(HTTPStatus.CREATED, created)
        elif method == "DELETE" and parts == ["sandboxes", SANDBOX_ID]:
            self.e2b.expire()
            self._send(HTTPStatus.NO_CONTENT, b"", "application/json")
        elif method == "POST" and parts == ["sandboxes", SANDBOX_ID, "timeout"]:
            self._send(HTTPStatus.NO_CONTENT, b"", "application/json")
        else:
            self._send_json(HTTPStatus.NOT_FOUND, {"code": 404, "message": f"no sandbox route {method} {self.path}"})

    # -- execute ----------------------------------------------------------------

    def _execute(self, sandbox: Sandbox, body: dict[str, Any]) -> None:
        context_id, language = body.get("context_id"), body.get("language")
        if context_id and language:
            self._send_text(HTTPStatus.BAD_REQUEST, "Only one of context_id or language can be provided")
            return
        if language and language.lower() != "python":
            self._send_text(HTTPStatus.INTERNAL_SERVER_ERROR, f"this server runs Python only, not {language!r}")
            return
        context = sandbox.contexts.get(context_id) if context_id else sandbox.default
        if context is None:
            self._send_text(HTTPStatus.NOT_FOUND, f"Context {context_id} not found")
            return
        code = body.get("code")
        if not isinstance(code, str):
            self._send_text(HTTPStatus.UNPROCESSABLE_ENTITY, "'code' must be a string")
            return
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with context.lock:
            context.execute(code, body.get("env_vars"), self._emit, self._client_gone, self.e2b.keepalive)
        if not (self._emit({"type": "end_of_execution"}) and self._write_chunk(b"")):
            self.close_connection = True

    def _emit(self, line: dict[str, Any]) -> bool:
        """Send one line; False once the client or the sandbox is gone."""
        if self.e2b.sandbox is None:
            self._cut()
            return False
        return self._write_chunk(json.dumps(line).encode() + b"\n")

    def _write_chunk(self, data: bytes) -> bool:
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        except OSError:
            return False
        return True

    def _client_gone(self) -> bool:
        """True once the client closed its end: with HTTP/1.1 it sends nothing while a response streams."""
        if self.e2b.sandbox is None:
            return True
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _cut(self) -> None:
        """Drop the connection mid-response, as a sandbox that vanishes does."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # -- envd's files ---------------------------------------------------------------

    def _upload(self) -> None:
        """Write the body to the file `path` names, as envd's octet-stream upload does."""
        data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        sandbox = self._sandbox()
        if sandbox is None:
            return
        if self.headers.get_content_type() != "application/octet-stream":
            self._send_envd_error(HTTPStatus.BAD_REQUEST, "this server takes application/octet-stream uploads only")
            return
        paths = parse_qs(urlsplit(self.path).query).get("path", [])
        if len(paths) != 1 or not paths[0]:
            self._send_envd_error(HTTPStatus.BAD_REQUEST, "the upload names no path")
            return
        path = os.path.join(sandbox.cwd, paths[0])  # an absolute path stays as it is
        try:
            files.upload(sandbox.cwd, paths[0], data)
        except (OSError, ValueError) as error:
            self._send_envd_error(HTTPStatus.BAD_REQUEST, f"cannot write {path}: {error}")
            return
        self._send_json(HTTPStatus.OK, [{"name": os.path.basename(path), "type": "file", "path": path}])

    def _filesystem(self) -> None:
        """One of envd's file system RPCs (Connect, JSON)."""
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        sandbox = self._sandbox()
        if sandbox is None:
            return
        status, answer = files.rpc(sandbox.cwd, self.path.rsplit("/", 1)[1], body)
        self._send(status, answer, "application/json")

    def _send_envd_error(self, status: HTTPStatus, message: str) -> None:
        self._send_json(status, {"code": int(status), "message": message})

    # -- plumbing ---------------------------------------------------------------

    def _sandbox(self) -> Sandbox | None:
        sandbox = self.e2b.sandbox
        if sandbox is None:
            message = {"sandboxId": SANDBOX_ID, "message": "The sandbox was not found", "code": 502}
            self._send_json(HTTPStatus.BAD_GATEWAY, message)
        return sandbox

    def _read_json(self) -> dict[str, Any] | None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw or b"{}")
        except ValueError as error:
            self._send_text(HTTPStatus.UNPROCESSABLE_ENTITY, f"the body is not JSON: {error}")
            return None
        if not isinstance(body, dict):
            self._send_text(HTTPStatus.UNPROCESSABLE_ENTITY, "the body must be a JSON object")
            return None
        return body

    def _send_json(self, status: HTTPStatus, value: Any) -> None:
        self._send(status, json.dumps(value).encode(), "application/json")

    def _send_text(self, status: HTTPStatus, text: str) -> None:
        self._send(status, text.encode(), "text/plain; charset=utf-8")

    def _send(self, status: HTTPStatus, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
