"""Inside a sandbox with an egress list: the proxy address its programs are given, relayed to the host.

The sandbox has no network, only loopback, and `HTTP(S)_PROXY` point at 127.0.0.1 here.
Each connection is piped to the host's proxy through a unix socket in a read-only folder.
Run as the container's first command: it listens, then the kernel takes its place (exec)
while a forked child relays. It is no wall: code that kills it or talks to the socket
itself meets the same proxy, which checks everything. Standard library only.

Usage: python3 relay.py PORT SOCKET -- KERNEL COMMAND...
"""

from __future__ import annotations

import os
import socket
import sys
import threading

_CHUNK = 65536


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(_CHUNK):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        for end in (sink, source):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _serve(connection: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        connection.close()
        upstream.close()
        return
    threading.Thread(target=_pipe, args=(upstream, connection), daemon=True).start()
    _pipe(connection, upstream)


def _relay(listener: socket.socket, path: str) -> None:
    while True:
        connection, _ = listener.accept()
        threading.Thread(target=_serve, args=(connection, path), daemon=True).start()


def main(argv: list[str]) -> None:
    port, path, separator, *command = argv
    if separator != "--" or not command:
        raise SystemExit(__doc__)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(port)))
    listener.listen(64)
    if os.fork() == 0:
        os.setsid()
        _relay(listener, path)
        os._exit(0)
    listener.close()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
