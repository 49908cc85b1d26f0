"""The egress proxy of one sandbox: a mitmproxy addon, run by `mitmdump` in mitmproxy's own environment.

Why each part is here:
- The sandbox has no network. Its only way out is a unix socket in a folder mounted
  into it; this addon listens there and pipes each connection to mitmproxy's own
  listener on loopback, counting the bytes. mitmproxy serves only connections that came
  through that pipe, so no other local process can borrow the sandbox's policy or keys.
- Every request is checked against the policy (`policy.py`, loaded by path: this process
  cannot import codeward): a CONNECT's target, a plain request's host, the Host header and
  the TLS server name must agree with what the list allows; names are resolved here and
  the address connected to is one that was checked, so a name cannot lead to a private
  address and a second lookup cannot change where the connection goes.
- HTTPS to a host without added headers is tunnelled untouched (the sandbox verifies the
  server itself); to a host with added headers it is opened with this sandbox's own CA,
  the headers are added, and the server is verified here.
- Upgrades (websockets, h2c) are refused, and a tunnel that begins with neither TLS nor HTTP is
  cut; a message head over `MAX_HEAD_BYTES` ends its connection (mitmproxy reads any size).
- The host talks to the addon over a control socket in a private folder: the policy (with
  the header values, which so never touch a disk) arrives there, and a change closes every
  open connection before it is answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import Any

from mitmproxy import ctx, http, tcp, tls
from mitmproxy.proxy import commands, events, server_hooks
from mitmproxy.proxy.layers.http import _http1

_spec = importlib.util.spec_from_file_location("codeward_egress_policy", Path(__file__).with_name("policy.py"))
assert _spec is not None and _spec.loader is not None
policy_module = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = policy_module
_spec.loader.exec_module(policy_module)

_CHUNK = 65536
_MAX_LOG_ENTRIES = 100_000
_MAX_FIELD = 300
#: The largest request (or response) head mitmproxy reads, which it does not bound itself.
MAX_HEAD_BYTES = 64 << 10
_OWNER_POLL = 0.5


def _capped(read_headers: Any, whose: str) -> Any:
    """mitmproxy reads a message head of any size (its own FIXME): past `MAX_HEAD_BYTES` the connection ends."""

    def read_capped_headers(self: Any, event: Any) -> Any:
        if isinstance(event, events.DataReceived) and len(self.buf) > MAX_HEAD_BYTES:
            addons[0]._record("-", "", 0, "refused", f"{whose} head over {MAX_HEAD_BYTES} bytes")
            yield commands.CloseConnection(self.conn)
            self.state = self.done
            return
        yield from read_headers(self, event)

    return read_capped_headers


_http1.Http1Server.read_headers = _capped(_http1.Http1Server.read_headers, "a request")
_http1.Http1Client.read_headers = _capped(_http1.Http1Client.read_headers, "a response")


class Pumped:
    """One connection from the sandbox, as the pipe sees it (no dataclass: mitmproxy loads scripts unregistered)."""

    def __init__(self, writers: list[asyncio.StreamWriter]) -> None:
        self.writers = writers
        self.sent = 0
        self.received = 0
        self.target: tuple[str, int] | None = None  # a CONNECT's host and port
        self.tunnel_logged = False
        self.refused: str | None = None
        self.resolved: dict[tuple[str, int], str] = {}  # host and port to the checked address used


class Egress:
    def __init__(self) -> None:
        self.policy = policy_module.EgressPolicy()
        self.pumped: dict[int, Pumped] = {}
        self.budget = {"connections": 64, "bytes": 2 << 30, "requests_per_second": 50.0}
        self.total_bytes = 0
        self.tokens = 0.0
        self.tokens_at = time.monotonic()
        self.logged = 0
        self.log_file: Any = None
        self.proxy_port = 0

    def load(self, loader: Any) -> None:
        loader.add_option("codeward_socket", str, "", "Where the sandbox's connections arrive (a unix socket).")
        loader.add_option("codeward_control", str, "", "Where the host sends the policy (a unix socket).")
        loader.add_option("codeward_log", str, "", "The file every request is recorded in, as JSON lines.")
        loader.add_option("codeward_budget", str, "{}", "The sandbox's budget, as JSON.")
        loader.add_option("codeward_sandbox_ids", str, "", "uid:gid the sandbox's socket is given to.")
        loader.add_option("codeward_extra_ca", str, "", "A PEM file of CAs trusted beside the usual ones.")

    def configure(self, updated: set[str]) -> None:
        if "codeward_budget" in updated:
            self.budget.update(json.loads(ctx.options.codeward_budget or "{}"))
            self.tokens = float(self.budget["requests_per_second"])
        if "codeward_extra_ca" in updated and ctx.options.codeward_extra_ca:
            import certifi

            bundle = Path(ctx.options.confdir).expanduser() / "upstream-ca.pem"
            extra = Path(ctx.options.codeward_extra_ca).read_text()
            bundle.write_text(Path(certifi.where()).read_text() + "\n" + extra)
            ctx.options.ssl_verify_upstream_trusted_ca = str(bundle)

    async def running(self) -> None:
        self.log_file = open(ctx.options.codeward_log, "a", buffering=1)  # noqa: SIM115 (open for the process's life)
        self.proxy_port = await self._listen_port()
        await asyncio.start_unix_server(self._pump, path=ctx.options.codeward_socket)
        os.chmod(ctx.options.codeward_socket, 0o600)
        if ctx.options.codeward_sandbox_ids:
            uid, gid = (int(part) for part in ctx.options.codeward_sandbox_ids.split(":"))
            os.chown(ctx.options.codeward_socket, uid, gid)
        await asyncio.start_unix_server(self._control, path=ctx.options.codeward_control)
        os.chmod(ctx.options.codeward_control, 0o600)
        ready = Path(ctx.options.codeward_control).with_name("ready.json")
        ready.with_suffix(".tmp").write_text(json.dumps({"port": self.proxy_port}))
        ready.with_suffix(".tmp").rename(ready)
        asyncio.get_running_loop().create_task(self._watch_owner(os.getppid()))

    async def _listen_port(self) -> int:
        servers = ctx.master.addons.get("proxyserver").servers
        while True:
            for server in servers:
                for address in server.listen_addrs:
                    return int(address[1])
            await asyncio.sleep(0.01)

    async def _watch_owner(self, owner: int) -> None:
        """The proxy lives no longer than the process that started it."""
        while os.getppid() == owner:
            await asyncio.sleep(_OWNER_POLL)
        # The owner died without closing: take the folders (the CA's key among them) along.
        shutil.rmtree(Path(ctx.options.confdir).parent, ignore_errors=True)
        os._exit(0)

    # -- the host's control channel ---------------------------------------------

    async def _control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.closing(writer):
            while line := await reader.readline():
                try:
                    self.policy = policy_module.EgressPolicy.from_json(line.decode())
                except (ValueError, KeyError, TypeError) as error:
                    writer.write(json.dumps({"error": str(error)}).encode() + b"\n")
                else:
                    await self._close_all()
                    writer.write(b'{"ok": true}\n')
                await writer.drain()

    async def _close_all(self) -> None:
        for pumped in list(self.pumped.values()):
            for stream in pumped.writers:
                stream.close()
        await asyncio.sleep(0)

    # -- the pipe from the sandbox -----------------------------------------------

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self.pumped) >= self.budget["connections"] or self._spent():
            self._record("CONNECT", "", 0, "refused", "over the sandbox's egress budget")
            writer.close()
            return
        # Bound first, so the port is known (and the connection expected) before mitmproxy sees it.
        upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        upstream.bind(("127.0.0.1", 0))
        port = upstream.getsockname()[1]
        pumped = self.pumped[port] = Pumped([writer])
        try:
            upstream.setblocking(False)
            await asyncio.get_running_loop().sock_connect(upstream, ("127.0.0.1", self.proxy_port))
            upstream_reader, upstream_writer = await asyncio.open_connection(sock=upstream)
        except OSError:
            upstream.close()
            writer.close()
            self.pumped.pop(port, None)
            return
        pumped.writers.append(upstream_writer)
        try:
            await asyncio.gather(
                self._pipe(reader, upstream_writer, pumped, "sent"),
                self._pipe(upstream_reader, writer, pumped, "received"),
            )
        finally:
            for stream in pumped.writers:
                stream.close()
            self.pumped.pop(port, None)
            if pumped.target and not pumped.tunnel_logged and pumped.refused is None:
                host, target_port = pumped.target
                self._record("CONNECT", host, target_port, "allowed", "", sent=pumped.sent, received=pumped.received)

    async def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, pumped: Pumped, way: str) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while chunk := await source.read(_CHUNK):
                setattr(pumped, way, getattr(pumped, way) + len(chunk))
                self.total_bytes += len(chunk)
                if self._spent():
                    break
                sink.write(chunk)
                await sink.drain()
        with contextlib.suppress(OSError):
            sink.close()

    def _spent(self) -> bool:
        return self.total_bytes > self.budget["bytes"]

    def _pumped_for(self, client: Any) -> Pumped | None:
        peer = client.peername
        if not peer or peer[0] != "127.0.0.1":
            return None
        return self.pumped.get(peer[1])

    # -- mitmproxy's hooks ----------------------------------------------------------

    def client_connected(self, client: Any) -> None:
        if self._pumped_for(client) is None:
            client.error = "only the sandbox's own connections are served"

    async def http_connect(self, flow: http.HTTPFlow) -> None:
        pumped = self._pumped_for(flow.client_conn)
        host, port = flow.request.host, flow.request.port
        refusal = self._rate_refusal() or self.policy.refusal(host, port)
        if pumped is not None and not refusal:
            refusal = await self._resolve(pumped, host, port)
        if pumped is None or refusal:
            flow.response = _refusal_response(refusal or "unknown connection")
            self._record("CONNECT", host, port, "refused", refusal or "unknown connection")
            return
        pumped.target = (policy_module.normal_host(host), port)

    def tls_clienthello(self, data: tls.ClientHelloData) -> None:
        pumped = self._pumped_for(data.context.client)
        if pumped is None or pumped.target is None:
            return  # TLS to the proxy itself: the requests inside it are checked one by one
        host, port = pumped.target
        sni = data.client_hello.sni
        if sni and policy_module.normal_host(sni) != host:
            self._refuse_tunnel(pumped, data, f"the TLS server name {sni!r} is not the CONNECT target {host!r}")
            return
        data.ignore_connection = not self.policy.headers_for(host, port)

    def _refuse_tunnel(self, pumped: Pumped, data: tls.ClientHelloData, reason: str) -> None:
        pumped.refused = reason
        data.ignore_connection = True
        data.context.server.error = reason
        host, port = pumped.target or ("", 0)
        self._record("CONNECT", host, port, "refused", reason)

    async def server_connect(self, data: server_hooks.ServerConnectionHookData) -> None:
        pumped = self._pumped_for(data.client)
        if pumped is None:
            data.server.error = "unknown connection"
            return
        host, port = str(data.server.address[0]), int(data.server.address[1])
        refusal = self.policy.refusal(host, port) or await self._resolve(pumped, host, port)
        if refusal:
            data.server.error = pumped.refused = refusal
            self._record("CONNECT" if pumped.target else "-", host, port, "refused", refusal)
            return
        if data.server.sni is None and policy_module.as_address(host) is None:
            data.server.sni = host
        data.server.address = (pumped.resolved[(host, port)], port)

    async def _resolve(self, pumped: Pumped, host: str, port: int) -> str | None:
        """Resolve `host` here, keep the first address the policy allows for the connection; else why not.

        The address kept is the one connected to, so a second lookup cannot send it elsewhere.
        """
        if (host, port) in pumped.resolved:
            return None
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as error:
            return f"{host} did not resolve: {error}"
        reasons = []
        for info in infos:
            address = str(info[4][0])
            reason = self.policy.address_refusal(address, port)
            if reason is None:
                pumped.resolved[(host, port)] = address
                return None
            reasons.append(reason)
        return f"{host} resolves only to refused addresses: {reasons[0] if reasons else 'none'}"

    async def requestheaders(self, flow: http.HTTPFlow) -> None:
        if flow.request.method == "CONNECT":
            return
        pumped = self._pumped_for(flow.client_conn)
        request = flow.request
        refusal = self._rate_refusal()
        if pumped is not None and pumped.target is not None:
            # Inside a tunnel mitmproxy sends every request to the tunnel's target, whatever it names;
            # so the target decides the policy and the headers, and the Host header must name it.
            host, port = pumped.target
        else:
            host, port = policy_module.normal_host(request.host), request.port
        refusal = refusal or ("unknown connection" if pumped is None else self.policy.refusal(host, port))
        hosts = request.headers.get_all("host")
        if not refusal and len(hosts) > 1:
            refusal = "a request with more than one Host header"
        if not refusal and hosts and not _names(hosts[0], host, port, request.scheme):
            refusal = f"the Host header names {_cut(hosts[0])!r}, not {host}:{port}"
        if not refusal and ("upgrade" in request.headers or request.method == "PRI"):
            refusal = "protocol upgrades (websockets, h2c) are not carried by the egress proxy"
        if not refusal and pumped is not None:
            refusal = await self._resolve(pumped, host, port)
        path = "" if pumped is None or pumped.target else request.path
        if refusal:
            flow.response = _refusal_response(refusal)
            self._record(request.method, host, port, "refused", refusal, path=path)
            return
        for name, value in self.policy.headers_for(host, port).items():
            request.headers[name] = value
        entry = {"method": request.method, "host": host, "port": port, "path": path, "sent": 0, "received": 0}
        flow.metadata["codeward"] = entry
        request.stream = _counter(entry, "sent")
        if pumped is not None:
            pumped.tunnel_logged = True  # its requests are recorded one by one

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        entry = flow.metadata.get("codeward")
        if entry is not None and flow.response is not None:
            flow.response.stream = _counter(entry, "received")

    def response(self, flow: http.HTTPFlow) -> None:
        entry = flow.metadata.pop("codeward", None)
        if entry is not None:
            self._record(
                **entry, verdict="allowed", reason="", status=flow.response.status_code if flow.response else 0
            )

    def error(self, flow: http.HTTPFlow) -> None:
        entry = flow.metadata.pop("codeward", None)
        if entry is not None:
            self._record(**entry, verdict="failed", reason=str(flow.error))

    def tcp_start(self, flow: tcp.TCPFlow) -> None:
        pumped = self._pumped_for(flow.client_conn)
        host, port = pumped.target if pumped and pumped.target else ("", 0)
        if pumped is not None:
            pumped.refused = "only HTTP and TLS are carried"
        flow.server_conn.error = "only HTTP and TLS are carried"  # the connection is then never opened
        self._record("CONNECT", host, port, "refused", "only HTTP and TLS are carried, not raw TCP")

    def websocket_start(self, flow: http.HTTPFlow) -> None:
        flow.kill()

    # -- budgets and the record ------------------------------------------------------

    def _rate_refusal(self) -> str | None:
        now = time.monotonic()
        rate = float(self.budget["requests_per_second"])
        self.tokens = min(rate, self.tokens + (now - self.tokens_at) * rate)
        self.tokens_at = now
        if self.tokens < 1:
            return f"over the sandbox's egress budget of {rate:g} requests a second"
        self.tokens -= 1
        return None

    def _record(self, method: str, host: str, port: int, verdict: str, reason: str, **more: Any) -> None:
        """One line of the record; what the sandbox chose (method, host, path) is cut to a few hundred bytes."""
        if self.log_file is None or self.logged > _MAX_LOG_ENTRIES:
            return
        self.logged += 1
        entry = {"time": time.time(), "method": _cut(method), "host": _cut(host), "port": port, "verdict": verdict}
        entry.update({"path": "", "sent": 0, "received": 0}, **more, reason=_cut(reason))
        entry["path"] = _cut(str(entry["path"]))
        if self.logged > _MAX_LOG_ENTRIES:
            entry = {"time": time.time(), "verdict": "log full", "reason": f"{_MAX_LOG_ENTRIES} entries recorded"}
        self.log_file.write(json.dumps(entry) + "\n")


def _cut(text: str, most: int = _MAX_FIELD) -> str:
    return text if len(text) <= most else text[:most] + f"... ({len(text) - most} more characters)"


def _names(authority: str, host: str, port: int, scheme: str) -> bool:
    """Whether a Host header or :authority names exactly `host:port` (the scheme's port when it gives none)."""
    try:
        name, given = policy_module.split_host_port(authority.strip())
    except ValueError:
        return False
    named_port = given if given is not None else (443 if scheme == "https" else 80)
    return policy_module.normal_host(name) == policy_module.normal_host(host) and named_port == port


def _counter(entry: dict[str, Any], way: str) -> Any:
    def count(chunk: bytes) -> bytes:
        entry[way] += len(chunk)
        return chunk

    return count


def _refusal_response(reason: str) -> http.Response:
    return http.Response.make(403, f"codeward egress: {reason}\n", {"Content-Type": "text/plain; charset=utf-8"})


addons = [Egress()]
