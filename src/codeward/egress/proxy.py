"""The host side of a sandbox's egress: its proxy process, the folder the sandbox sees, and the record.

The proxy is mitmproxy (`mitmdump` with codeward's addon), run as a process of its own in
an environment of its own: mitmproxy pins exact versions of libraries codeward's other
extras need newer, and a process apart keeps the keys it adds out of the user's process.
`codeward egress install` makes that environment; `CODEWARD_MITMDUMP` names another.

Two folders per sandbox, in a private one (0700) of the host's:
- `sandbox/`, mounted read-only into the container: the unix socket its connections go
  to, the CA bundle it trusts and the relay script. Nothing secret.
- `proxy/`: mitmproxy's own folder (the sandbox's CA and its private key), the control
  socket the policy arrives on, and the record of requests. The container never sees it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import venv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codeward.egress.policy import EgressPolicy, parse_policy
from codeward.redaction import mark_secret

__all__ = [
    "CONTAINER_EGRESS_DIR",
    "MITMPROXY_REQUIREMENT",
    "EgressBudget",
    "EgressProxy",
    "EgressUnavailable",
    "install_proxy",
    "mitmdump_path",
]

#: Where the sandbox sees its egress folder (read-only).
CONTAINER_EGRESS_DIR = "/run/codeward-egress"
#: The proxy address programs in the sandbox are given.
SANDBOX_PROXY_PORT = 3128
MITMPROXY_REQUIREMENT = "mitmproxy>=11.0,<13"  # the addon reaches into its HTTP/1 reader (see addon.py)
_SOCKET = "egress.sock"
_START_TIMEOUT = 60.0
_ADDON = Path(__file__).with_name("addon.py")
_RELAY = Path(__file__).with_name("relay.py")
_MAX_RECORD = 100_000


class EgressUnavailable(RuntimeError):
    """The egress proxy cannot run here: mitmproxy is missing, or its process did not start."""


@dataclass(frozen=True)
class EgressBudget:
    """What one sandbox may take of the proxy: open connections, bytes both ways in its life, requests a second."""

    connections: int = 64
    bytes: int = 2 << 30
    requests_per_second: float = 50.0

    def __post_init__(self) -> None:
        for name in ("connections", "bytes", "requests_per_second"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"EgressBudget.{name} must be a positive number, got {value!r}")


def default_proxy_home() -> Path:
    """Where `codeward egress install` puts mitmproxy's environment."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "codeward" / "egress-proxy"


def mitmdump_path() -> str:
    """The `mitmdump` to run: `CODEWARD_MITMDUMP`, codeward's own install, or one on PATH."""
    named = os.environ.get("CODEWARD_MITMDUMP")
    if named:
        if not os.access(named, os.X_OK):
            raise EgressUnavailable(f"CODEWARD_MITMDUMP={named!r} is not an executable mitmdump")
        return named
    own = default_proxy_home() / "bin" / "mitmdump"
    if os.access(own, os.X_OK):
        return str(own)
    found = shutil.which("mitmdump")
    if found:
        return found
    raise EgressUnavailable(
        "an egress list needs mitmproxy, which runs the proxy beside the sandbox: run `codeward egress install` "
        "(it makes an environment of its own for mitmproxy), or point CODEWARD_MITMDUMP at a mitmdump"
    )


def install_proxy(home: Path | None = None) -> Path:
    """Make an environment of its own for mitmproxy (its pins clash with other extras); return its mitmdump."""
    home = home or default_proxy_home()
    venv.EnvBuilder(with_pip=True, clear=True).create(home)
    subprocess.run([str(home / "bin" / "python"), "-m", "pip", "install", "--quiet", MITMPROXY_REQUIREMENT], check=True)
    return home / "bin" / "mitmdump"


class EgressProxy:
    """One sandbox's proxy: started with a policy, changed while it runs, closed with the sandbox."""

    def __init__(
        self,
        policy: EgressPolicy,
        budget: EgressBudget | None = None,
        sandbox_ids: tuple[int, int] | None = None,
    ) -> None:
        self.policy = policy
        self.budget = budget or EgressBudget()
        self._root = Path(tempfile.mkdtemp(prefix="codeward-egress-"))
        self.shared = self._root / "sandbox"
        self._private = self._root / "proxy"
        self._record: list[dict[str, Any]] = []
        self._read_at = 0
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        #: mitmproxy's own listener on loopback; it serves only what came through the sandbox's socket.
        self.proxy_port = 0
        try:
            self._start(mitmdump_path(), sandbox_ids)
        except BaseException:
            self.close()
            raise

    # -- what the container needs ---------------------------------------------------

    def environment(self) -> dict[str, str]:
        """The variables that send the sandbox's programs through the proxy and make them trust its CA."""
        proxy = f"http://127.0.0.1:{SANDBOX_PROXY_PORT}"
        bundle = f"{CONTAINER_EGRESS_DIR}/ca-bundle.pem"
        names = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
        cas = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")
        return {**dict.fromkeys(names, proxy), **dict.fromkeys(cas, bundle)}

    def command(self, kernel_command: Sequence[str]) -> list[str]:
        """The container's command: the relay, which hands over to the kernel."""
        relay = f"{CONTAINER_EGRESS_DIR}/relay.py"
        socket_path = f"{CONTAINER_EGRESS_DIR}/{_SOCKET}"
        return ["python3", relay, str(SANDBOX_PROXY_PORT), socket_path, "--", *kernel_command]

    def volumes(self) -> dict[str, dict[str, str]]:
        return {str(self.shared): {"bind": CONTAINER_EGRESS_DIR, "mode": "ro"}}

    # -- while it runs ----------------------------------------------------------------

    def set_policy(self, policy: EgressPolicy) -> None:
        """Send a new policy; every open connection is closed before this returns."""
        _mark_header_values(policy)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as control:
            control.settimeout(_START_TIMEOUT)
            try:
                control.connect(str(self._private / "control.sock"))
                control.sendall(policy.to_json().encode() + b"\n")
                answer = json.loads(control.makefile("rb").readline() or b"{}")
            except (OSError, ValueError) as error:
                raise EgressUnavailable(f"the sandbox's egress proxy does not answer: {error}") from error
        if not answer.get("ok"):
            raise EgressUnavailable(f"the egress proxy refused the policy: {answer.get('error', 'no answer')}")
        self.policy = policy

    def record(self) -> list[dict[str, Any]]:
        """Every request so far, allowed or refused, oldest first (at most 100,000)."""
        with self._lock:
            try:
                with open(self._private / "log.jsonl", "rb") as stream:
                    stream.seek(self._read_at)
                    for line in stream:
                        if not line.endswith(b"\n"):
                            break  # the proxy is still writing it
                        self._read_at += len(line)
                        if len(self._record) < _MAX_RECORD:
                            self._record.append(json.loads(line))
            except (OSError, ValueError):
                pass
            return list(self._record)

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        shutil.rmtree(self._root, ignore_errors=True)

    # -- start --------------------------------------------------------------------------

    def _start(self, mitmdump: str, sandbox_ids: tuple[int, int] | None) -> None:
        self.shared.mkdir(mode=0o700)
        self._private.mkdir(mode=0o700)
        shutil.copyfile(_RELAY, self.shared / "relay.py")
        options = {
            "confdir": str(self._private),
            "listen_host": "127.0.0.1",
            "listen_port": "0",
            "connection_strategy": "lazy",
            "stream_large_bodies": "64k",
            "onboarding": "false",
            "termlog_verbosity": "error",
            "flow_detail": "0",
            "codeward_socket": str(self.shared / _SOCKET),
            "codeward_control": str(self._private / "control.sock"),
            "codeward_log": str(self._private / "log.jsonl"),
            "codeward_budget": json.dumps(self.budget.__dict__),
            "codeward_sandbox_ids": f"{sandbox_ids[0]}:{sandbox_ids[1]}" if sandbox_ids and os.getuid() == 0 else "",
            "codeward_extra_ca": os.environ.get("CODEWARD_EGRESS_TRUSTED_CA", ""),
        }
        command = [mitmdump, "--quiet", "-s", str(_ADDON)]
        for name, value in options.items():
            command += ["--set", f"{name}={value}"]
        # Its errors go to a file, never a pipe nobody drains (a full pipe would stop the proxy).
        with open(self._private / "errors.log", "wb") as errors:
            self._process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors
            )
        self._wait_until_listening()
        self._write_ca_bundle()
        if sandbox_ids and os.getuid() == 0:
            os.chown(self.shared, *sandbox_ids)
            self.shared.chmod(0o500)
        self.set_policy(self.policy)

    def _wait_until_listening(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT
        ready = self._private / "ready.json"
        while not ready.exists():
            assert self._process is not None
            if self._process.poll() is not None:
                error = (self._private / "errors.log").read_bytes()[-2000:].decode(errors="replace")
                raise EgressUnavailable(f"the egress proxy exited at start: {error.strip()}")
            if time.monotonic() > deadline:
                raise EgressUnavailable(f"the egress proxy did not start within {_START_TIMEOUT:.0f} s")
            time.sleep(0.02)
        self.proxy_port = int(json.loads(ready.read_text())["port"])

    def _write_ca_bundle(self) -> None:
        """What the sandbox trusts: the public CAs its image has, this sandbox's CA and the user's extra CA."""
        parts = [(self._private / "mitmproxy-ca-cert.pem").read_text()]
        extra = os.environ.get("CODEWARD_EGRESS_TRUSTED_CA")
        if extra:
            parts.append(Path(extra).read_text())
        public = Path("/etc/ssl/certs/ca-certificates.crt")
        if public.exists():
            parts.append(public.read_text())
        (self.shared / "ca-bundle.pem").write_text("\n".join(parts))
        (self.shared / "ca-bundle.pem").chmod(0o444)
        (self.shared / "relay.py").chmod(0o444)


def policy_from(
    egress: Sequence[str] | None,
    headers: Mapping[str, Mapping[str, str]] | None,
    budget: EgressBudget | None = None,
) -> EgressPolicy | None:
    """The user's egress arguments as a policy, or None for no way out at all.

    Header values are marked secret before anything can show them, and a missing mitmproxy
    is told now, where the sandbox is asked for, not when its first proxy would start.
    """
    if egress is None:
        if headers or budget is not None:
            raise ValueError("egress_headers and egress_budget go with a list of hosts: give egress=[...] as well")
        return None
    policy = parse_policy(egress, headers)
    _mark_header_values(policy)
    mitmdump_path()
    return policy


def _mark_header_values(policy: EgressPolicy) -> None:
    """The values only, never the names: "Authorization" must stay readable wherever codeward writes."""
    for values in policy.headers.values():
        mark_secret(*values.values())
