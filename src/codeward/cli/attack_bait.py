"""What `codeward doctor --attack`'s probes aim at on the host, set up before the sandbox starts.

A fresh folder with a file holding a random secret and a folder to write into; a random secret in
this process's environment; a listener on the loopback address and one on an address a sandbox with
a network could reach (Docker's bridge gateway for docker, another address of this machine
otherwise; never an outside one); a process to signal; and, while the fork probe runs, a count of
the machine's processes. Each is what a probe's judge looks at afterwards, on the host.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import os
import resource
import secrets
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import TracebackType

__all__ = ["Bait", "Listener", "ProcessCount", "host_address", "interface_addresses", "own_peak_memory"]


class Listener:
    """A TCP listener on `host`: connections wait in its backlog, and `connected()` takes them."""

    def __init__(self, host: str) -> None:
        self.socket = socket.create_server((host, 0), backlog=64)
        self.socket.setblocking(False)
        self.host, self.port = host, self.socket.getsockname()[1]

    def connected(self) -> list[str]:
        """The addresses that connected since last asked (the kernel completes a connection before any accept)."""
        peers = []
        with contextlib.suppress(BlockingIOError):
            while True:
                connection, peer = self.socket.accept()
                peers.append(str(peer[0]))
                connection.close()
        return peers

    def close(self) -> None:
        self.socket.close()


def interface_addresses() -> list[str]:
    """The IPv4 addresses of this machine's interfaces, loopback left out."""
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            try:
                reply = fcntl.ioctl(probe.fileno(), 0x8915, request)  # SIOCGIFADDR
            except OSError:
                continue
            address = socket.inet_ntoa(reply[20:24])
            if not address.startswith("127."):
                found.append(address)
    return found


def host_address(executor_name: str) -> str | None:
    """An address of this machine that a sandbox could reach if its network were open, or None.

    For docker, the gateway of Docker's default bridge (where a container with a network finds the
    host); for the others, the first address of this machine's interfaces that is not loopback."""
    if executor_name == "docker":
        with contextlib.suppress(Exception):
            import docker

            configs = docker.from_env(timeout=5).networks.get("bridge").attrs["IPAM"]["Config"] or []
            gateways = [config["Gateway"] for config in configs if "." in config.get("Gateway", "")]
            if gateways:
                return str(gateways[0])
    if executor_name == "e2b":
        return None  # E2B's sandboxes run elsewhere: no listener here stands for their network
    addresses = interface_addresses()
    return addresses[0] if addresses else None


class ProcessCount:
    """How many more children one process had at once than at the start, sampled from /proc while open.

    Children of one parent, because the fork probe's processes share theirs (the sandbox's process, seen
    from the host under runc and on the local machine), while the rest of a busy machine's processes,
    starting and ending meanwhile, are spread over many parents and cancel out of no count."""

    def __init__(self) -> None:
        self.base = self._children()
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="codeward-doctor-processes", daemon=True)
        self._thread.start()

    @staticmethod
    def _children() -> collections.Counter[int]:
        """The number of live processes of each parent pid."""
        parents: collections.Counter[int] = collections.Counter()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError, IndexError, ValueError), open(f"/proc/{entry}/stat", "rb") as stat:
                    parents[int(stat.read().rsplit(b")", 1)[1].split()[1])] += 1
        return parents

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            now = self._children()
            self.most = max([self.most, *(count - self.base[parent] for parent, count in now.items())])

    def close(self) -> int:
        """Stop counting; the most children one process gained."""
        self._stop.set()
        self._thread.join()
        return self.most


class Bait:
    """What the probes aim at on the host; a context manager that sets it all up and takes it all down."""

    def __init__(self, executor_name: str) -> None:
        self.executor_name = executor_name
        self.pid = os.getpid()
        self.processes: ProcessCount | None = None
        self.extra_processes = 0
        self.memory_at_start = own_peak_memory()
        self._undo = contextlib.ExitStack()  # each piece is taken down again, also when a later one fails
        try:
            self._set_up()
        except BaseException:
            self._undo.close()
            raise

    def _set_up(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="codeward-doctor-"))
        self._undo.callback(shutil.rmtree, self.folder, ignore_errors=True)
        self.secret = secrets.token_hex(16)
        self.secret_file = self.folder / "secret.txt"
        self.secret_file.write_text(self.secret, encoding="utf-8")
        self.outside = self.folder / "outside"
        self.outside.mkdir()
        self.env_name = f"CODEWARD_DOCTOR_SECRET_{secrets.token_hex(4).upper()}"
        self.env_secret = secrets.token_hex(16)
        os.environ[self.env_name] = self.env_secret
        self._undo.callback(os.environ.pop, self.env_name, None)
        self.loopback = Listener("127.0.0.1")
        self._undo.callback(self.loopback.close)
        self.network = self._network_listener()
        # A process to signal, which holds the secret in the environment it started with, as /proc shows
        # it once it runs its own program (before, /proc shows this process's first environment).
        self.child = subprocess.Popen(
            [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(3600)"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        self._undo.callback(self._end_child)
        assert self.child.stdout is not None
        self.child.stdout.readline()

    def _network_listener(self) -> Listener | None:
        """A listener where a networked sandbox would find this machine; None where there is no such address."""
        address = host_address(self.executor_name)
        if address is None:
            return None
        try:
            listener = Listener(address)
        except OSError:  # an engine elsewhere (DOCKER_HOST) has its gateway on another machine
            return None
        self._undo.callback(listener.close)
        return listener

    def _end_child(self) -> None:
        if self.child.poll() is None:
            self.child.kill()
        self.child.wait()
        if self.child.stdout is not None:
            self.child.stdout.close()

    def written(self, probe: str) -> Path:
        """The host path a probe tries to write."""
        return self.outside / f"written-by-{probe}"

    def __enter__(self) -> Bait:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self.processes is not None:
            self.processes.close()
            self.processes = None
        self._undo.close()


def own_peak_memory() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
