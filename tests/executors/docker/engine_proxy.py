"""A stand-in for the Docker engine's socket that can be cut and restored: the engine "going away"
for one client, while the real engine (and every other test) carries on."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path


class EngineProxy:
    """Forwards a unix socket to the real engine's until `cut()`; `restore()` listens again."""

    def __init__(self, path: Path, target: str) -> None:
        self.path = path
        self.target = target
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()
        self._server: socket.socket | None = None
        self.restore()

    @property
    def url(self) -> str:
        return f"unix://{self.path}"

    def restore(self) -> None:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(self.path))
        server.listen(16)
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def cut(self) -> None:
        """Close the listening socket and every open connection, as a stopped engine would."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        os.unlink(self.path)
        with self._lock:
            for connection in self._connections:
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                connection.close()
            self._connections.clear()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(self.target)
            with self._lock:
                self._connections += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
