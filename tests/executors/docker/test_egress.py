"""A docker sandbox with an egress list reaches the listed hosts and nothing else, on runc and gVisor.

The "internet" is origins on the host's loopback (`tests.egress.internet`); the HTTPS one
has a test CA that the proxy (and the sandbox) trust through CODEWARD_EGRESS_TRUSTED_CA.
Each attack that works at the network's level has a control: the same code in a sandbox on
`network="bridge"` does the harm (reaches a listener on the host's bridge address). Each
attack on the proxy's checks has the allowed twin beside it, which must get through.
"""

from __future__ import annotations

import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

from codeward.egress import EgressBudget
from codeward.executors.base import ExecutorError
from codeward.executors.docker.executor import DockerExecutor
from tests.egress.internet import Origin, TcpEcho, require_mitmdump
from tests.package_index import package_index, tiny_wheel
from tests.shared_sandbox import SharedSandbox

SECRET = "egress-key-" + secrets.token_hex(12)
#: The key for the plain HTTP origin's port: another service on the same name.
PLAIN_SECRET = "egress-plain-key-" + secrets.token_hex(12)

#: What the sandbox's code uses to probe: urllib as users write it, and a raw CONNECT to its proxy.
PROBES = r"""
import os, socket, ssl, urllib.error, urllib.request

def fetch(url, headers=None, timeout=15):
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")
    except Exception as error:
        return "error", repr(error)

def tunnel(target, timeout=15):
    conn = socket.create_connection(("127.0.0.1", 3128), timeout=timeout)
    head = b""
    try:
        conn.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(4096)
            if not chunk:
                break
            head += chunk
    except OSError as error:
        return conn, repr(error)
    return conn, head.split(b"\r\n", 1)[0].decode(errors="replace")

def read_all(conn):
    data = b""
    try:
        while chunk := conn.recv(65536):
            data += chunk
    except OSError as error:
        data += repr(error).encode()
    return data.decode(errors="replace")

def raw_request(target, head, context=None, server_hostname=None):
    conn, status = tunnel(target)
    if not status.endswith("200 Connection established") and " 200 " not in status:
        return status
    if context is not None:
        try:
            conn = context.wrap_socket(conn, server_hostname=server_hostname)
        except (OSError, ssl.SSLError) as error:
            return "tls refused: " + repr(error)
    conn.sendall(head.encode())
    return read_all(conn).split("\r\n", 1)[0]

def plain_request(head):
    conn = socket.create_connection(("127.0.0.1", 3128), timeout=15)
    conn.sendall(head.encode())
    return read_all(conn).split("\r\n", 1)[0]

def reach(host, port, udp_port):
    out = {}
    started = __import__("time").monotonic()
    try:
        socket.create_connection((host, port), timeout=5).close()
        out["tcp"] = "connected"
    except OSError as error:
        out["tcp"] = repr(error)
    try:
        sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sender.sendto(b"dns-tunnel", (host, udp_port))
        out["udp"] = "sent"
    except OSError as error:
        out["udp"] = repr(error)
    try:
        socket.getaddrinfo("pypi.org", 443)
        out["dns"] = "resolved"
    except OSError as error:
        out["dns"] = repr(error)
    out["seconds"] = __import__("time").monotonic() - started
    return out
"""


@pytest.fixture(scope="module")
def trusted_ca(_https_origin_server: Origin) -> Iterator[str]:
    """The documented setting that makes the proxy (and sandbox) trust the test origin's CA."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CODEWARD_EGRESS_TRUSTED_CA", _https_origin_server.ca_file)
        yield _https_origin_server.ca_file


@pytest.fixture(scope="module")
def _shared_listed(
    runtime: str | None,
    sandbox_image: str,
    trusted_ca: str,
    _http_origin_server: Origin,
    _https_origin_server: Origin,
    _tcp_echo_server: TcpEcho,
) -> Iterator[SharedSandbox[DockerExecutor]]:
    """A sandbox that may reach the HTTP and HTTPS origins and the echo port, with a key for the origins."""
    require_mitmdump()
    http_port, https_port = _http_origin_server.port, _https_origin_server.port
    egress = [f"{host}:{port}" for host in ("localhost", "127.0.0.1") for port in (http_port, https_port)]
    egress.append(f"127.0.0.1:{_tcp_echo_server.port}")
    headers = {f"localhost:{http_port}": {"X-Api-Key": PLAIN_SECRET}, f"localhost:{https_port}": {"X-Api-Key": SECRET}}
    executor = DockerExecutor(image=sandbox_image, runtime=runtime, egress=egress, egress_headers=headers)
    try:
        yield SharedSandbox(executor, lambda sandbox: sandbox.run(PROBES))
    finally:
        executor.close()


@pytest.fixture
def listed(_shared_listed: SharedSandbox[DockerExecutor]) -> DockerExecutor:
    """The module's sandbox with an egress list, its probes defined (again, if a neighbour's test lost them)."""
    return _shared_listed.ready()


@pytest.fixture
def make(runtime: str | None, sandbox_image: str, trusted_ca: str) -> Iterator[Callable[..., DockerExecutor]]:
    require_mitmdump()
    made: list[DockerExecutor] = []

    def build(**kwargs: Any) -> DockerExecutor:
        executor = DockerExecutor(image=sandbox_image, runtime=kwargs.pop("runtime", runtime), **kwargs)
        made.append(executor)
        executor.run(PROBES)
        return executor

    yield build
    for executor in made:
        executor.close()


def run(executor: DockerExecutor, code: str) -> Any:
    return executor.run(code).output


# -- what is listed is reached, and the key stays on the host ----------------------------------


def test_a_listed_host_is_reached_and_its_key_arrives_only_at_the_server(
    listed: DockerExecutor, http_origin: Origin, https_origin: Origin
) -> None:
    for origin, key in ((http_origin, PLAIN_SECRET), (https_origin, SECRET)):
        status, body = run(listed, f"fetch({origin.url('/bytes?n=5', 'localhost')!r})")
        assert status == 200 and len(body) == 5, (status, body)
        assert origin.requests[-1].header("X-Api-Key") == key
    # Reached by address, the same origin gets no key: keys go to the names they were given for.
    assert run(listed, f"fetch({http_origin.url('/bytes?n=1', '127.0.0.1')!r})")[0] == 200
    assert http_origin.requests[-1].header("X-Api-Key") is None
    # The key is nowhere in the sandbox: no process's environment, no file it can read.
    needles = [SECRET[::-1], PLAIN_SECRET[::-1]]  # reversed, so the probe itself does not carry them
    found = run(
        listed,
        f"""
needles = [needle[::-1].encode() for needle in {needles!r}]
def holds(path, size=-1):
    try:
        data = open(path, "rb").read(size)
    except OSError:
        return False
    return any(needle in data for needle in needles)
hits = [f"/proc/{{pid}}/{{part}}" for pid in os.listdir("/proc") if pid.isdigit()
        for part in ("environ", "cmdline") if holds(f"/proc/{{pid}}/{{part}}")]
for root in ("/run", "/tmp", "/home", "/etc", "/opt"):
    for folder, _, files in os.walk(root):
        hits += [os.path.join(folder, name) for name in files if holds(os.path.join(folder, name), 1 << 22)]
hits
""",
    )
    assert found == []
    # What the sandbox sees of its proxy: a socket, the CAs it trusts and the relay; no key, no proxy process.
    seen = run(
        listed,
        "names = sorted(os.listdir('/run/codeward-egress'))\n"
        "bundle = open('/run/codeward-egress/ca-bundle.pem').read()\n"
        "commands = [open(f'/proc/{p}/cmdline', 'rb').read() for p in os.listdir('/proc') if p.isdigit()]\n"
        "names, 'PRIVATE KEY' in bundle, any(b'mitm' in c for c in commands)",
    )
    assert seen == (["ca-bundle.pem", "egress.sock", "relay.py"], False, False)
    assert any(e["verdict"] == "allowed" and e["host"] == "localhost" for e in listed.egress_log)


def test_a_blocks_usage_counts_the_bytes_its_requests_carried(listed: DockerExecutor, http_origin: Origin) -> None:
    fetched = listed.run(f"fetch({http_origin.url('/bytes?n=200000', 'localhost')!r})[0]")
    assert fetched.output == 200
    assert fetched.usage is not None and fetched.usage.egress_bytes is not None
    assert fetched.usage.egress_bytes >= 200_000 and "egress_bytes" not in fetched.usage.unmeasured
    quiet = listed.run("1 + 1").usage  # the control: a block that asks nothing of the proxy
    assert quiet is not None and quiet.egress_bytes == 0


def test_what_is_not_listed_is_refused_and_recorded(
    listed: DockerExecutor, http_origin: Origin, other_origin: Origin
) -> None:
    for url in (
        other_origin.url("/x"),  # a port not listed
        other_origin.url("/x", "localhost"),
        f"http://10.255.255.1:{http_origin.port}/x",  # an address not listed
        f"http://origin.test:{http_origin.port}/x",  # a name not listed
        "http://169.254.169.254/latest/meta-data/",  # the cloud's metadata
    ):
        status, body = run(listed, f"fetch({url!r})")
        assert status == 403 and "egress list" in body, (url, status, body)
        assert SECRET not in body
    assert other_origin.requests == []
    refused = [e for e in listed.egress_log if e["verdict"] == "refused"]
    assert {e["host"] for e in refused} >= {"127.0.0.1", "10.255.255.1", "origin.test", "169.254.169.254"}


def test_a_refused_request_is_an_event_of_its_block(listed: DockerExecutor, other_origin: Origin) -> None:
    refused = listed.run(f"fetch({other_origin.url('/x')!r})[0]\nfetch({other_origin.url('/y')!r})[0]")
    assert refused.output == 403
    assert [(event.wall, event.count) for event in refused.events] == [("egress", 2)]
    assert "127.0.0.1" in refused.events[0].detail
    assert listed.run("1").events == [], "a block that asked nothing has no egress events"


def test_connect_to_addresses_not_listed_is_refused(
    listed: DockerExecutor, http_origin: Origin, other_origin: Origin, gateway: str
) -> None:
    targets = [
        "169.254.169.254:80",
        "127.0.0.1:22",
        f"{gateway}:{http_origin.port}",  # the host's bridge address
        f"[::1]:{http_origin.port}",
        f"[::ffff:127.0.0.1]:{other_origin.port}",
        "10.0.0.1:443",
        f"localhost:{other_origin.port}",
    ]
    statuses = run(listed, f"[tunnel(target)[1] for target in {targets!r}]")
    assert all(" 403 " in status for status in statuses), dict(zip(targets, statuses, strict=True))
    assert " 200 " in run(listed, f"tunnel('127.0.0.1:{http_origin.port}')[1]")  # the listed twin
    assert other_origin.requests == []


def test_a_name_that_resolves_to_a_private_address_is_refused_unless_the_address_is_listed(
    make: Callable[..., DockerExecutor], http_origin: Origin
) -> None:
    executor = make(egress=[f"localhost:{http_origin.port}"])
    status, body = run(executor, f"fetch({http_origin.url('/x', 'localhost')!r})")
    assert status == 403 and "resolves only to refused addresses" in body
    assert http_origin.requests == []
    executor.set_egress([f"localhost:{http_origin.port}", f"127.0.0.1:{http_origin.port}"])
    assert run(executor, f"fetch({http_origin.url('/bytes?n=1', 'localhost')!r})")[0] == 200


# -- the network itself: nothing but the proxy -----------------------------------------------


@pytest.fixture
def udp_listener(gateway: str) -> Iterator[tuple[int, list[bytes]]]:
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind((gateway, 0))
    server.settimeout(0.2)
    received: list[bytes] = []
    stop = threading.Event()

    def listen() -> None:
        while not stop.is_set():
            try:
                received.append(server.recv(512))
            except TimeoutError:
                continue

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    yield server.getsockname()[1], received
    stop.set()
    thread.join(5)
    server.close()


def test_raw_sockets_udp_and_dns_get_nowhere_even_to_a_listed_address(
    make: Callable[..., DockerExecutor],
    gateway_listener: tuple[str, int],
    udp_listener: tuple[int, list[bytes]],
) -> None:
    gateway, tcp_port = gateway_listener
    udp_port, received = udp_listener
    probe = f"reach({gateway!r}, {tcp_port}, {udp_port})"
    control = make(network="bridge", runtime=None)  # gVisor's registration has no network
    harm = run(control, probe)
    assert harm["tcp"] == "connected" and harm["udp"] == "sent"
    deadline = time.monotonic() + 5
    while not received and time.monotonic() < deadline:
        time.sleep(0.05)
    assert received == [b"dns-tunnel"]
    received.clear()
    executor = make(egress=[f"{gateway}:{tcp_port}", f"{gateway}:{udp_port}"])
    held = run(executor, probe)
    assert held["tcp"] != "connected" and held["udp"] != "sent" and held["dns"] != "resolved", held
    assert held["seconds"] < 5, "refusals must be fast, not timeouts"
    time.sleep(0.5)
    assert received == []


# -- the proxy's checks: fronting, redirects, upgrades, other protocols -----------------------


def test_a_server_name_or_host_header_other_than_the_target_is_refused(
    listed: DockerExecutor, http_origin: Origin, https_origin: Origin, egress_ca: Any
) -> None:
    run(listed, f"test_ca = ssl.create_default_context(cadata={egress_ca.pem!r}); test_ca.check_hostname = False")
    tunnel_target = f"127.0.0.1:{https_origin.port}"  # listed, no headers: tunnelled untouched
    head = f"GET /bytes?n=1 HTTP/1.1\r\nHost: 127.0.0.1:{https_origin.port}\r\nConnection: close\r\n\r\n"
    fronted = run(listed, f"raw_request({tunnel_target!r}, {head!r}, test_ca, 'origin.test')")
    assert "200" not in fronted
    assert https_origin.requests == []
    assert run(listed, f"raw_request({tunnel_target!r}, {head!r}, test_ca, None)") == "HTTP/1.0 200 OK" or (
        "200" in run(listed, f"raw_request({tunnel_target!r}, {head!r}, test_ca, None)")
    )
    assert len(https_origin.requests) >= 1
    # Plain HTTP: the URL names a listed host, the Host header another.
    url = http_origin.url("/bytes?n=1", "localhost")
    fronted = run(
        listed, f"plain_request('GET {url} HTTP/1.1\\r\\nHost: evil.test\\r\\nConnection: close\\r\\n\\r\\n')"
    )
    assert " 403 " in fronted
    allowed = run(
        listed,
        f"plain_request('GET {url} HTTP/1.1\\r\\nHost: localhost:{http_origin.port}\\r\\nConnection: close\\r\\n\\r\\n')",
    )
    assert " 200 " in allowed
    # Inside TLS the proxy opened (the host with a key): the Host header must still be the target.
    https_origin.clear()
    target = f"localhost:{https_origin.port}"
    inner = "GET /bytes?n=1 HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    fronted = run(
        listed,
        f"raw_request({target!r}, {inner.format(host='evil.test')!r}, ssl.create_default_context(), 'localhost')",
    )
    assert " 403 " in fronted and https_origin.requests == []
    allowed = run(
        listed, f"raw_request({target!r}, {inner.format(host=target)!r}, ssl.create_default_context(), 'localhost')"
    )
    assert " 200 " in allowed and https_origin.requests[-1].header("X-Api-Key") == SECRET
    # A request inside that tunnel that names the same host's other port goes to the tunnel's server,
    # with that server's key: never to the other port, never with the other port's key.
    http_origin.clear()
    other_port = f"localhost:{http_origin.port}"
    elsewhere = f"GET http://{other_port}/bytes?n=1 HTTP/1.1\r\nHost: {other_port}\r\nConnection: close\r\n\r\n"
    run(listed, f"raw_request({target!r}, {elsewhere!r}, ssl.create_default_context(), 'localhost')")
    assert http_origin.requests == []
    assert all(request.header("X-Api-Key") == SECRET for request in https_origin.requests)


def test_a_redirect_to_a_host_not_listed_fails(
    listed: DockerExecutor, http_origin: Origin, other_origin: Origin
) -> None:
    away = http_origin.url(f"/redirect?to={quote(other_origin.url('/x'))}", "localhost")
    assert run(listed, f"fetch({away!r})")[0] == 403
    assert other_origin.requests == []
    home = http_origin.url(f"/redirect?to={quote(http_origin.url('/bytes?n=2'))}", "localhost")
    assert run(listed, f"fetch({home!r})") == (200, "xx") or run(listed, f"fetch({home!r})")[0] == 200


def test_an_upgrade_is_refused(listed: DockerExecutor, http_origin: Origin) -> None:
    url = http_origin.url("/echo", "localhost")
    upgraded = run(listed, f"fetch({url!r}, {{'Upgrade': 'websocket', 'Connection': 'Upgrade'}})")
    assert upgraded[0] == 403 and http_origin.requests == []
    assert run(listed, f"fetch({url!r})")[0] == 200


def test_another_protocol_on_an_allowed_port_is_cut(listed: DockerExecutor, tcp_echo: TcpEcho) -> None:
    code = f"""
conn, status = tunnel('127.0.0.1:{tcp_echo.port}')
conn.sendall(b'SSH-2.0-raw bytes\\r\\n')
status, read_all(conn)
"""
    status, echoed = run(listed, code)
    assert " 200 " in status  # the CONNECT is to a listed port
    assert "SSH-2.0" not in echoed
    assert any("raw TCP" in e["reason"] for e in listed.egress_log)


# -- changes, budgets, neighbours --------------------------------------------------------------


def test_set_egress_closes_the_sandbox_at_once(make: Callable[..., DockerExecutor], http_origin: Origin) -> None:
    executor = make(egress=[f"127.0.0.1:{http_origin.port}"])
    slow = http_origin.url("/slow?seconds=8")
    run(
        executor,
        f"import threading, time\nheld = []\nstarted = time.monotonic()\n"
        f"worker = threading.Thread(target=lambda: held.append((fetch({slow!r}), time.monotonic() - started)))\n"
        "worker.start()",
    )
    assert _wait(lambda: any(r.path.startswith("/slow") for r in http_origin.requests))
    executor.set_egress([])
    (result, seconds) = run(executor, "worker.join(20); held[0]")
    assert result[0] != 200 and seconds < 6, (result, seconds)
    assert run(executor, f"fetch({http_origin.url('/x')!r})")[0] != 200
    executor.set_egress([f"127.0.0.1:{http_origin.port}"])
    assert run(executor, f"fetch({http_origin.url('/bytes?n=1')!r})")[0] == 200


def test_set_egress_needs_a_sandbox_made_with_a_list(make: Callable[..., DockerExecutor]) -> None:
    executor = make()
    with pytest.raises(ExecutorError, match="egress=None"):
        executor.set_egress(["pypi.org"])


def test_a_flood_meets_the_sandbox_budget(make: Callable[..., DockerExecutor], http_origin: Origin) -> None:
    target = f"127.0.0.1:{http_origin.port}"
    few = make(egress=[target], egress_budget=EgressBudget(connections=3))
    statuses = run(few, f"held = [tunnel({target!r}) for _ in range(6)]\n[status for _, status in held]")
    assert sum(" 200 " in status for status in statuses) == 3, statuses
    slow = make(egress=[target], egress_budget=EgressBudget(requests_per_second=3))
    codes = run(slow, f"[fetch({http_origin.url('/bytes?n=1')!r})[0] for _ in range(12)]")
    assert codes.count(403) >= 6 and codes.count(200) >= 3, codes
    small = make(egress=[target], egress_budget=EgressBudget(bytes=2_000_000))
    big = run(small, f"fetch({http_origin.url('/bytes?n=8000000')!r})")
    assert big[0] == "error" or len(big[1]) < 8_000_000
    assert run(small, f"fetch({http_origin.url('/bytes?n=1')!r})")[0] != 200  # spent


def test_nothing_else_on_the_host_can_use_a_sandbox_proxy(
    listed: DockerExecutor, make: Callable[..., DockerExecutor], http_origin: Origin
) -> None:
    proxy = listed.sandbox.egress if listed.sandbox else None
    assert proxy is not None and proxy.proxy_port
    with socket.create_connection(("127.0.0.1", proxy.proxy_port), timeout=5) as conn:
        url = http_origin.url("/bytes?n=1", "localhost")
        conn.sendall(f"GET {url} HTTP/1.1\r\nHost: localhost:{http_origin.port}\r\n\r\n".encode())
        try:
            answer = conn.recv(4096)
        except ConnectionResetError:
            answer = b""
        assert answer == b""
    assert http_origin.requests == []
    other = make(egress=[])
    assert other.sandbox is not None and other.sandbox.egress is not None
    ours = (proxy.shared / "ca-bundle.pem").read_text().split("-----END CERTIFICATE-----")[0]
    theirs = (other.sandbox.egress.shared / "ca-bundle.pem").read_text().split("-----END CERTIFICATE-----")[0]
    assert ours != theirs  # each sandbox has its own CA


def test_egress_with_a_network_is_refused(sandbox_image: str) -> None:
    with pytest.raises(ValueError, match="leave network at 'none'"):
        DockerExecutor(image=sandbox_image, network="bridge", egress=["pypi.org"])
    with pytest.raises(ValueError, match="go with a list of hosts"):
        DockerExecutor(image=sandbox_image, egress_budget=EgressBudget(connections=3))


def _wait(condition: Callable[[], bool], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_install_packages_reaches_an_index_on_the_list(make: Callable[..., DockerExecutor], tmp_path: Path) -> None:
    """pip in the sandbox goes through the proxy unchanged: the index is listed, nothing else is."""
    executor = make(egress=[])
    tiny_wheel(tmp_path)
    with package_index(tmp_path, "127.0.0.1") as url:
        with pytest.raises(ExecutorError, match="failed"):
            executor.install_packages(["--index-url", url, "--retries", "0", "--timeout", "5", "codeward-tinypkg"])
        executor.set_egress([urlsplit(url).netloc])
        installed = executor.install_packages(["--index-url", url, "codeward-tinypkg"])
    assert installed == ["codeward_tinypkg"]
    assert executor.run("import codeward_tinypkg; codeward_tinypkg.ANSWER").output == 42
    assert any(e["path"].startswith("/simple/codeward-tinypkg") for e in executor.egress_log)


def test_each_request_is_a_span_of_the_block_that_made_it(
    make: Callable[..., DockerExecutor], http_origin: Origin, other_origin: Origin
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from codeward import telemetry

    executor = make(egress=[f"127.0.0.1:{http_origin.port}"])
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.instrument(tracer_provider=provider)
    try:
        run(executor, f"fetch({http_origin.url('/bytes?n=3')!r}), fetch({other_origin.url('/x')!r})")
    finally:
        telemetry.uninstrument()
        provider.shutdown()
    spans = [span for span in exporter.get_finished_spans() if span.name.startswith("egress")]
    verdicts = {(s.attributes["codeward.egress.port"], s.attributes["codeward.egress.verdict"]) for s in spans}
    assert verdicts == {(http_origin.port, "allowed"), (other_origin.port, "refused")}


# -- what a red team found: the bytes sent must be the bytes checked -------------------------------


def test_a_second_host_header_is_refused(listed: DockerExecutor, http_origin: Origin) -> None:
    url = http_origin.url("/bytes?n=1", "localhost")
    twice = f"GET {url} HTTP/1.1\r\nHost: localhost:{http_origin.port}\r\nHost: attacker.example\r\nConnection: close\r\n\r\n"
    assert " 403 " in run(listed, f"plain_request({twice!r})")
    other_port = f"GET {url} HTTP/1.1\r\nHost: localhost:{http_origin.port + 1}\r\nConnection: close\r\n\r\n"
    assert " 403 " in run(listed, f"plain_request({other_port!r})")
    assert http_origin.requests == []


def test_a_kept_alive_tunnel_with_a_key_serves_request_after_request(
    listed: DockerExecutor, https_origin: Origin
) -> None:
    code = f"""
import http.client
conn = http.client.HTTPSConnection("127.0.0.1", 3128, timeout=15, context=ssl.create_default_context())
conn.set_tunnel("localhost", {https_origin.port})
statuses = []
for _ in range(3):
    conn.request("GET", "/bytes?n=2")
    response = conn.getresponse()
    response.read()
    statuses.append(response.status)
statuses
"""
    assert run(listed, code) == [200, 200, 200]
    assert [r.header("X-Api-Key") for r in https_origin.requests] == [SECRET] * 3


def test_a_request_head_without_end_neither_grows_the_proxy_nor_stalls_a_change(
    make: Callable[..., DockerExecutor], http_origin: Origin
) -> None:
    executor = make(egress=[f"127.0.0.1:{http_origin.port}"])
    assert executor.sandbox is not None and executor.sandbox.egress is not None
    proxy_pid = executor.sandbox.egress._process.pid  # type: ignore[union-attr]
    flood = f"""
import threading
def flood():
    conn = socket.create_connection(("127.0.0.1", 3128), timeout=30)
    try:
        conn.sendall(b"GET http://127.0.0.1:{http_origin.port}/ HTTP/1.1\\r\\n")
        for _ in range(64):
            conn.sendall(b"X-P: a\\r\\n" * (1 << 17))
    except OSError:
        pass
floods = [threading.Thread(target=flood) for _ in range(8)]
for thread in floods:
    thread.start()
"""
    run(executor, flood)
    time.sleep(3)
    started = time.monotonic()
    executor.set_egress([])
    assert time.monotonic() - started < 2
    assert _peak_memory_mib(proxy_pid) < 400
    run(executor, "for thread in floods: thread.join(30)")
    assert http_origin.requests == []


def _peak_memory_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_the_record_keeps_what_the_sandbox_chose_short(listed: DockerExecutor, other_origin: Origin) -> None:
    before = len(listed.egress_log)
    assert run(listed, f"fetch({other_origin.url('/' + 'A' * 30000)!r})")[0] == 403
    entries = listed.egress_log[before:]
    assert entries and all(len(str(entry)) < 2000 for entry in entries)
    # A head larger than the proxy reads ends the connection, and that too is recorded.
    assert run(listed, f"fetch({other_origin.url('/' + 'A' * (1 << 20))!r})")[0] == "error"
    assert any("head over" in entry["reason"] for entry in listed.egress_log[before:])
    assert other_origin.requests == []


def test_a_tunnel_is_recorded_however_it_ends(listed: DockerExecutor, https_origin: Origin, egress_ca: Any) -> None:
    before = len(listed.egress_log)
    code = f"""
context = ssl.create_default_context(cadata={egress_ca.pem!r})
conn, status = tunnel("127.0.0.1:{https_origin.port}")
secure = context.wrap_socket(conn, server_hostname="127.0.0.1")
secure.sendall(b"GET /bytes?n=100000 HTTP/1.1\\r\\nHost: 127.0.0.1:{https_origin.port}\\r\\n\\r\\n")
secure.recv(64)
secure.close()
status
"""
    assert " 200 " in run(listed, code)
    assert _wait(lambda: any(e["method"] == "CONNECT" and e["sent"] > 0 for e in listed.egress_log[before:]))


def test_the_proxy_and_its_ca_go_with_an_owner_that_dies_unclosed(sandbox_image: str, tmp_path: Path) -> None:
    script = tmp_path / "owner.py"
    script.write_text(
        "import sys, time\n"
        "from codeward.executors.docker.executor import DockerExecutor\n"
        f"ex = DockerExecutor(image={sandbox_image!r}, egress=[])\n"
        "ex.run('1')\n"
        "print(ex.sandbox.egress._root, ex.sandbox.egress._process.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    owner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        folder, pid = owner.stdout.readline().split()
        assert (Path(folder) / "proxy" / "mitmproxy-ca.pem").exists()
    finally:
        owner.kill()
        owner.wait()
    assert _wait(lambda: not Path(folder).exists() and not Path(f"/proc/{pid}").exists(), 10)
