"""A small local "internet" for the egress tests: origins a sandbox may or may not be allowed to reach.

Everything listens on 127.0.0.1 only, serves from daemon threads, bounds what it
reads, and stops at the end of the session:

- `Origin`: an HTTP/1.1 server (over TLS when given a context) with
  ``/echo`` (JSON: the method, path, headers and body length that arrived),
  ``/redirect?to=URL`` (302 there), ``/bytes?n=N`` (N bytes, at most 64 MiB)
  and ``/slow?seconds=S`` (answers after S seconds, at most 10). It records
  every request it received (`requests`), so a test can say "the header
  arrived" or "nothing arrived";
- `TestCA`: a certificate authority made at fixture time with `cryptography`,
  which issues the HTTPS origin's certificate for ``localhost``,
  ``origin.test`` and ``127.0.0.1``;
- `TcpEcho`: a raw TCP echo server, another protocol for an allowed port.

The fixtures (registered by this folder's conftest) are `http_origin`,
`other_origin` (a second origin on another port: "a port that is not
allowed"), `https_origin` and `tcp_echo`. The servers live for the session;
each test gets them with their records cleared.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import json
import socket
import socketserver
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

__all__ = [
    "MAX_BODY",
    "MAX_BYTES",
    "MAX_SLOW_SECONDS",
    "Origin",
    "Request",
    "TcpEcho",
    "TestCA",
    "egress_ca",
    "fetch_code",
    "http_origin",
    "https_origin",
    "other_origin",
    "require_mitmdump",
    "tcp_echo",
    "wait_for",
]

HOST = "127.0.0.1"
#: The most body bytes an origin reads from one request; a larger one gets 413 and the connection is closed.
MAX_BODY = 1 << 20
#: The most bytes ``/bytes?n=`` sends.
MAX_BYTES = 64 << 20
#: The longest ``/slow?seconds=`` waits.
MAX_SLOW_SECONDS = 10.0
#: The most bytes the TCP echo server echoes on one connection before it closes it.
MAX_ECHO = 1 << 20
#: Seconds a connection may sit idle (or a TLS handshake take) before the server drops it.
IDLE_SECONDS = 15.0
#: The names the HTTPS origin's certificate is valid for.
TLS_NAMES = ("localhost", "origin.test")
TLS_ADDRESSES = ("127.0.0.1",)
_CHUNK = 64 << 10


@dataclass(frozen=True)
class Request:
    """One request as it arrived at an origin."""

    method: str
    path: str
    headers: dict[str, str]
    body_length: int = 0

    def header(self, name: str) -> str | None:
        """A header's value by name, whatever its case on the wire (None when it did not arrive)."""
        for key, value in self.headers.items():
            if key.lower() == name.lower():
                return value
        return None


@dataclass
class _Record:
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: list[Request] = field(default_factory=list)

    def add(self, request: Request) -> None:
        with self.lock:
            self.requests.append(request)


class _OriginHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "codeward-test-origin"
    timeout = IDLE_SECONDS

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read what arrived from `Origin.requests`."""

    @property
    def origin(self) -> Origin:
        return self.server.origin  # type: ignore[attr-defined, no-any-return]

    def _handle(self) -> None:
        body_length = self._read_body()
        request = Request(self.command, self.path, dict(self.headers.items()), max(body_length, 0))
        self.origin.record.add(request)
        if body_length < 0:
            self.close_connection = True
            self._send_json(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"error": f"a body holds at most {MAX_BODY} bytes"})
            return
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if url.path == "/echo":
            self._send_json(HTTPStatus.OK, dataclasses.asdict(request))
        elif url.path == "/redirect":
            self._redirect(query.get("to", [""])[0])
        elif url.path == "/bytes":
            self._bytes(query.get("n", ["0"])[0])
        elif url.path == "/slow":
            self._slow(query.get("seconds", ["0"])[0])
        else:
            self._send_json(HTTPStatus.NOT_FOUND, {"error": f"no route {url.path}"})

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_HEAD = _handle

    def do_CONNECT(self) -> None:
        """An origin is no proxy: recorded, and refused."""
        self.origin.record.add(Request(self.command, self.path, dict(self.headers.items())))
        self.close_connection = True
        self._send_json(HTTPStatus.METHOD_NOT_ALLOWED, {"error": "this origin is not a proxy"})

    # -- endpoints ---------------------------------------------------------------

    def _redirect(self, target: str) -> None:
        if not target or any(ord(char) < 0x20 or ord(char) == 0x7F for char in target):
            self._send_json(HTTPStatus.BAD_REQUEST, {"error": "redirect needs ?to=URL (printable)"})
            return
        self.send_response(HTTPStatus.FOUND)
        self.send_header("Location", target)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _bytes(self, text: str) -> None:
        try:
            count = min(max(int(text), 0), MAX_BYTES)
        except ValueError:
            self._send_json(HTTPStatus.BAD_REQUEST, {"error": "n must be a whole number"})
            return
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(count))
        self.end_headers()
        if self.command == "HEAD":
            return
        block = bytes(range(256)) * (_CHUNK // 256)
        left = count
        try:
            while left:
                sent = min(left, _CHUNK)
                self.wfile.write(block[:sent])
                left -= sent
        except OSError:
            self.close_connection = True

    def _slow(self, text: str) -> None:
        try:
            seconds = min(max(float(text), 0.0), MAX_SLOW_SECONDS)
        except ValueError:
            self._send_json(HTTPStatus.BAD_REQUEST, {"error": "seconds must be a number"})
            return
        self.origin.closing.wait(seconds)
        self._send_json(HTTPStatus.OK, {"slept": seconds})

    # -- plumbing ---------------------------------------------------------------

    def _read_body(self) -> int:
        """Read and drop the body; its length, or -1 when it is longer than `MAX_BODY` (then unread)."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return self._read_chunked()
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            return -1
        if length < 0 or length > MAX_BODY:
            return -1
        return len(self.rfile.read(length))

    def _read_chunked(self) -> int:
        total = 0
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";")[0].strip(), 16)
            except ValueError:
                return -1
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):  # trailers
                    pass
                return total
            total += size
            if total > MAX_BODY:
                return -1
            self.rfile.read(size)
            self.rfile.readline(1024)

    def _send_json(self, status: HTTPStatus, value: Any) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, origin: Origin, tls: ssl.SSLContext | None) -> None:
        super().__init__((HOST, 0), _OriginHandler)
        self.origin = origin
        self.tls = tls

    def finish_request(self, request: Any, client_address: Any) -> None:
        """In the connection's own thread: the TLS handshake (bounded), then HTTP."""
        request.settimeout(IDLE_SECONDS)
        if self.tls is not None:
            try:
                request = self.tls.wrap_socket(request, server_side=True)
            except (OSError, ssl.SSLError):
                request.close()
                return
        try:
            super().finish_request(request, client_address)
        finally:
            if self.tls is not None:
                request.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet: a client that went away mid-answer is not the test's failure."""


class Origin:
    """An HTTP/1.1 origin on 127.0.0.1, serving from a daemon thread; over TLS when given a context."""

    def __init__(self, tls: ssl.SSLContext | None = None, *, ca: TestCA | None = None) -> None:
        self.record = _Record()
        self.closing = threading.Event()
        self.ca = ca
        self._httpd = _Server(self, tls)
        self.scheme = "https" if tls is not None else "http"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=f"origin-{self.port}", daemon=True
        )
        self._thread.start()

    host = HOST

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def entry(self) -> str:
        """The egress entry that lists it by address."""
        return f"{HOST}:{self.port}"

    def url(self, path: str = "/", host: str = HOST) -> str:
        """The URL of `path` here (`host` may be a name the certificate holds, e.g. ``localhost``)."""
        return f"{self.scheme}://{host}:{self.port}/{path.lstrip('/')}"

    @property
    def requests(self) -> list[Request]:
        """The requests received so far, oldest first (a copy)."""
        with self.record.lock:
            return list(self.record.requests)

    def clear(self) -> None:
        with self.record.lock:
            self.record.requests.clear()

    @property
    def ca_file(self) -> str:
        """The PEM file of the CA that signed this origin's certificate (HTTPS only)."""
        if self.ca is None:
            raise AttributeError("a plain HTTP origin has no CA")
        return str(self.ca.file)

    @property
    def ca_pem(self) -> str:
        if self.ca is None:
            raise AttributeError("a plain HTTP origin has no CA")
        return self.ca.pem

    def close(self) -> None:
        self.closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


class TestCA:
    """A certificate authority made now, for tests only: it signs server certificates."""

    __test__ = False  # not a test class, whatever pytest thinks of its name

    def __init__(self, folder: Path) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self.folder = folder
        self._key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "codeward test CA")])
        now = datetime.datetime.now(datetime.UTC)
        public = self._key.public_key()
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_key_usage(cert_sign=True), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self.pem = self.certificate.public_bytes(serialization.Encoding.PEM).decode()
        self.file = folder / "test-ca.pem"
        self.file.write_text(self.pem)

    def issue(
        self, names: tuple[str, ...] = TLS_NAMES, addresses: tuple[str, ...] = TLS_ADDRESSES
    ) -> tuple[Path, Path]:
        """A server certificate for `names` and `addresses`: the paths of its PEM chain and its key."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        alternatives: list[x509.GeneralName] = [x509.DNSName(name) for name in names]
        alternatives += [x509.IPAddress(ipaddress.ip_address(address)) for address in addresses]
        ca_public = self._key.public_key()
        certificate = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(alternatives), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(cert_sign=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_public), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        stem = self.folder / names[0]
        chain, key_file = stem.with_suffix(".crt"), stem.with_suffix(".key")
        chain.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        return chain, key_file

    def server_context(self) -> ssl.SSLContext:
        """A TLS server context holding a fresh certificate for the test names."""
        chain, key_file = self.issue()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(chain, key_file)
        return context

    def client_context(self) -> ssl.SSLContext:
        """A client context that trusts this CA only."""
        return ssl.create_default_context(cafile=str(self.file))


def _key_usage(*, cert_sign: bool) -> Any:
    from cryptography import x509

    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


class _EchoHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        connection: socket.socket = self.request
        connection.settimeout(IDLE_SECONDS)
        self.server.echo.connections.append(self.client_address)  # type: ignore[attr-defined]
        echoed = 0
        try:
            while echoed < MAX_ECHO:
                data = connection.recv(min(_CHUNK, MAX_ECHO - echoed))
                if not data:
                    return
                connection.sendall(data)
                echoed += len(data)
        except OSError:
            return


class _EchoServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet, as the origins."""


class TcpEcho:
    """A raw TCP echo server on 127.0.0.1: what arrives goes back, up to `MAX_ECHO` bytes a connection."""

    host = HOST

    def __init__(self) -> None:
        self.connections: list[tuple[str, int]] = []  # the peers that connected, oldest first
        self._server = _EchoServer((HOST, 0), _EchoHandler)
        self._server.echo = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="tcp-echo", daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def clear(self) -> None:
        self.connections.clear()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def wait_for(condition: Any, seconds: float = 5.0) -> bool:
    """Poll `condition()` until it holds or `seconds` pass; whether it held."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return bool(condition())


def require_mitmdump() -> str:
    """The mitmdump egress sandboxes run; skipped without one (a failure where CI requires docker)."""
    from codeward.egress.proxy import EgressUnavailable, mitmdump_path

    try:
        return mitmdump_path()
    except EgressUnavailable as error:
        pytest.skip(f"no egress proxy here: {error}")
        raise


def fetch_code(url: str) -> str:
    """Code for a sandbox: `_got` is the path an origin's ``/echo`` saw arrive (else the body), or the error."""
    return (
        "import json as _json, urllib.request\n"
        "try:\n"
        f"    _got = urllib.request.urlopen({url!r}, timeout=10).read().decode()\n"
        "    _got = _json.loads(_got)['path'] if _got.startswith('{') else _got\n"
        "except Exception as _error:\n"
        "    _got = 'failed: ' + type(_error).__name__\n"
        "_got"
    )


# -- fixtures: servers for the session, records cleared for each test ------------------


@pytest.fixture(scope="session")
def egress_ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("test-ca"))


@pytest.fixture(scope="session")
def _http_origin_server() -> Iterator[Origin]:
    origin = Origin()
    yield origin
    origin.close()


@pytest.fixture(scope="session")
def _other_origin_server() -> Iterator[Origin]:
    origin = Origin()
    yield origin
    origin.close()


@pytest.fixture(scope="session")
def _https_origin_server(egress_ca: TestCA) -> Iterator[Origin]:
    origin = Origin(egress_ca.server_context(), ca=egress_ca)
    yield origin
    origin.close()


@pytest.fixture(scope="session")
def _tcp_echo_server() -> Iterator[TcpEcho]:
    echo = TcpEcho()
    yield echo
    echo.close()


@pytest.fixture
def http_origin(_http_origin_server: Origin) -> Origin:
    """An HTTP origin on 127.0.0.1, its record of requests empty."""
    _http_origin_server.clear()
    return _http_origin_server


@pytest.fixture
def other_origin(_other_origin_server: Origin) -> Origin:
    """A second HTTP origin on another port (a port an allow-list does not name), its record empty."""
    _other_origin_server.clear()
    return _other_origin_server


@pytest.fixture
def https_origin(_https_origin_server: Origin) -> Origin:
    """An HTTPS origin for localhost, origin.test and 127.0.0.1, signed by the session's test CA."""
    _https_origin_server.clear()
    return _https_origin_server


@pytest.fixture
def tcp_echo(_tcp_echo_server: TcpEcho) -> TcpEcho:
    """A raw TCP echo server on 127.0.0.1, its record of connections empty."""
    _tcp_echo_server.clear()
    return _tcp_echo_server
