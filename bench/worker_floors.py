"""What a block's round trip to another process costs before any sandbox does anything: the two
floors `local_executor.py` sets the worker's tiny block against.

- `pipe_runner`: the block's text to a bare child process over a socket pair, and echoed back. No
  worker's round trip can beat it: it is the two wake-ups and the copies alone.
- `bare_worker_runner`: the least a worker written in Python can do. A length-prefixed JSON header
  and the code go in; the code is compiled once per source, and run in one namespace with its
  printing kept; a JSON header with the request's number and the logs comes back, and the host
  checks the number. It has no policy, limits, measurement or checks, so it is no sandbox. It is
  what the worker's own Python, on both sides, is measured against.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import struct
import subprocess
import sys
from collections.abc import Callable

__all__ = ["bare_worker_runner", "pipe_runner"]

Runner = Callable[[str], object]

#: A child that echoes what it reads.
ECHO = "import socket, sys\ns = socket.socket(fileno=int(sys.argv[1]))\nwhile data := s.recv(1 << 16):\n    s.sendall(data)"
#: A frame's two lengths: its JSON header's and its body's.
LENGTHS = struct.Struct("!II")
#: The bare worker: a small block's frame comes in one read, and its answer goes in one write.
BARE_WORKER = """
import io, json, socket, struct, sys
lengths = struct.Struct("!II")
s = socket.socket(fileno=int(sys.argv[1]))
namespace, compiled = {"final_answer": lambda value: value}, {}
while data := s.recv(1 << 16):
    head_size, body_size = lengths.unpack_from(data)
    header = json.loads(data[8 : 8 + head_size])
    code = data[8 + head_size : 8 + head_size + body_size].decode()
    if code not in compiled:
        compiled[code] = compile(code, "<block>", "exec")
    logs = io.StringIO()
    namespace["print"] = lambda *args: logs.write(" ".join(map(str, args)) + "\\n")
    exec(compiled[code], namespace)
    answer = json.dumps({"seq": header["seq"], "logs": logs.getvalue()}).encode()
    s.sendall(lengths.pack(len(answer), 0) + answer)
"""


def _child(stack: contextlib.ExitStack, source: str, *flags: str) -> socket.socket:
    """Our end of a socket pair whose other end a child running `source` holds, closed with the stack."""
    ours, theirs = socket.socketpair()
    child = subprocess.Popen([sys.executable, *flags, "-c", source, str(theirs.fileno())], pass_fds=[theirs.fileno()])
    theirs.close()
    stack.callback(child.wait)
    stack.callback(ours.close)
    return ours


def pipe_runner(stack: contextlib.ExitStack) -> Runner:
    ours = _child(stack, ECHO)

    def run(code: str) -> object:
        data = code.encode()
        ours.sendall(data)
        got = 0
        while got < len(data):
            got += len(ours.recv(1 << 16))
        return got

    return run


def bare_worker_runner(stack: contextlib.ExitStack) -> Runner:
    ours = _child(stack, BARE_WORKER, "-I", "-S")  # started as the local worker is
    numbers = itertools.count()

    def run(code: str) -> object:
        number = next(numbers)
        header, body = json.dumps({"op": "run", "seq": number}).encode(), code.encode()
        ours.sendall(LENGTHS.pack(len(header), len(body)) + header + body)
        data = ours.recv(1 << 16)
        head_size, _ = LENGTHS.unpack_from(data)
        answer = json.loads(data[LENGTHS.size : LENGTHS.size + head_size])
        if answer["seq"] != number:
            raise RuntimeError(f"the bare worker answered {answer['seq']}, not {number}")
        return answer["logs"]

    return run
