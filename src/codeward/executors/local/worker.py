"""The worker process's side: confine this process, then run the host's blocks with the policy interpreter.

The host starts it as ``python -I -S -c BOOT`` with one connected socket (and, where it
is confined, a second one that takes its seccomp filter's listener to the host, see
`seccomp_notices`) and nothing of its own environment. The first message carries the settings; the
worker confines itself (see `confinement`) before it builds the interpreter, so
not a line of the model's code runs unconfined. Then it answers one request at a
time. A tool call goes back to the host over the same socket, in the middle of
a block, and the host's answer resumes it.

What leaves the worker is data the host decodes without pickle; what the host
sends is trusted (it is the host's own variables and settings).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from codeward.executors import codec
from codeward.executors.base import ExecutionError, ExecutionTimeout, FinalAnswerSignal
from codeward.executors.kernel import prelude
from codeward.executors.live import LiveOutput
from codeward.executors.local.channel import TEXT_LIMIT, Channel, ChannelClosed
from codeward.executors.local.crossing import SHOWN_LIMIT, final_answer_refused
from codeward.executors.local.interpreter import Interpreter, ToolHandle
from codeward.executors.local.output import keep_routed
from codeward.executors.local.watchdog import WATCHDOG, AlarmWatchdog
from codeward.wall_events import events_text

__all__ = ["main"]

_PR_SET_PDEATHSIG = 1

#: A message: its header, its body text, and the binary parts beside it.
_Message = tuple[dict[str, Any], str, Sequence[Any]]


def main(fd: int, handover_fd: int | None = None) -> None:
    channel = Channel(socket.socket(fileno=fd))
    handover = socket.socket(fileno=handover_fd) if handover_fd is not None else None
    settings, _, _ = channel.receive()
    _die_with_host(settings["host_pid"])
    missing = _confine(settings, handover)
    interpreter = _interpreter(settings)
    keep_routed()
    interrupts = _HostInterrupts()
    host = _HostLine(channel, settings.get("seq"), interrupts)
    prelude._Sandbox.codec = codec
    codec.restore_loaded_classes()
    prelude._Sandbox.ask = host.ask
    host.answer({"op": "ready", "missing": ",".join(missing)})
    while True:
        try:
            request, body, parts = channel.receive()
        except ChannelClosed:
            return
        op = request.get("op")
        if op == "reply":  # the reply to a tool call whose block gave up waiting (its time ran out)
            continue
        if op == "close":
            interpreter.close()
            return
        host.seq = request.get("seq")
        live = LiveOutput(host.output, interpreter.max_print_outputs_length) if request.get("live") else None
        host.answer(*_answer(interpreter, interrupts, op, body, parts, live))


def _die_with_host(host_pid: int) -> None:
    """A worker whose host is gone must not run on: stuck in a C call, it would never read the
    closed socket. Linux kills it with its parent (the host's spawning thread, which lives as
    long as the host); elsewhere the closed socket ends it at the next block. The model's code
    could clear this setting if nothing stopped it: the seccomp filter refuses that (see
    `confinement`), and the host's reaper (see `process`) kills the worker whatever it did."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != host_pid:  # the host died before the line above
        os._exit(1)


def _confine(settings: dict[str, Any], handover: socket.socket | None) -> list[str]:
    """Confine this process; `handover` takes the seccomp filter's listener to the host (see
    `seccomp_notices`), and is closed either way before any of the code runs."""
    if settings["confinement"] == "none":
        if handover is not None:
            handover.close()
        return []
    from codeward.executors.local.confinement import confine, interpreter_read_paths

    try:
        return confine(
            read_paths=interpreter_read_paths(),
            write_paths=[Path(p) for p in [*(settings["allowed_paths"] or ()), settings["working_folder"]]],
            max_memory_bytes=settings["max_memory_bytes"],
            strict=settings["confinement"] == "strict",
            handover=handover,
        )
    finally:
        if handover is not None:
            handover.close()


def _interpreter(settings: dict[str, Any]) -> Interpreter:
    capped = settings["confinement"] != "none" and settings["max_memory_bytes"] is not None
    # Where the operating system caps memory, no thread needs to poll it: the timer alone suffices.
    watchdog = AlarmWatchdog() if capped or settings["max_memory_bytes"] is None else WATCHDOG
    return Interpreter(
        tuple(settings["authorized_imports"]),
        settings["timeout_seconds"],
        settings["max_operations"],
        settings["max_print_outputs_length"],
        settings["allowed_paths"],
        settings["max_value_size"],
        settings["max_int_bits"],
        settings["max_memory_bytes"],
        memory_capped=capped,
        watchdog=watchdog,
        working_folder=settings["working_folder"],
    )


class _HostLine:
    """The worker's side of the numbered conversation: every answer carries the number of the
    host's request it answers (a block's tool calls carry the block's), and a tool call takes only
    the reply to itself. A block whose time ran out while a host tool ran has stopped waiting; that
    tool's reply comes later and is dropped, never taken for the answer to a later call."""

    def __init__(self, channel: Channel, seq: Any, interrupts: _HostInterrupts) -> None:
        self.channel = channel
        self.seq = seq
        self._calls = 0
        self._interrupts = interrupts

    def answer(self, header: dict[str, Any], body: str = "", parts: Sequence[Any] = ()) -> None:
        self.channel.send({**header, "seq": self.seq}, body, parts)

    def output(self, stream: str, text: str) -> None:
        """A piece of the block's output, sent as it is printed (the host asked for it live)."""
        with self._interrupts.held():
            self.channel.send({"op": "output", "seq": self.seq, "stream": stream, "text": text})

    def ask(self, kind: str, body: str) -> str:
        self._calls += 1
        call = self._calls
        with self._interrupts.held():
            self.channel.send({"op": kind, "seq": self.seq, "call": call}, body)
        while True:  # a stop lands while the host's tool runs, never part-way through its reply
            reply, answer, _ = self.channel.receive(whole=self._interrupts.held)
            if reply.get("call") == call:
                return answer


class _HostInterrupts:
    """The host's SIGINT (its user pressed Ctrl-C) stops the running block, which then answers with
    what it printed, as a block past its time limit does. Between blocks there is nothing to stop,
    and the answer already on its way carries the logs, so the signal is let go."""

    def __init__(self) -> None:
        self.block_running = False
        self._holding = False  # the block talks to the host: a stop waits until the message is whole
        self._held_back = False
        self._armed = _Armed(self)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: object) -> None:
        if self.block_running and self._holding:
            self._held_back = True
        elif self.block_running:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """A SIGINT while the block sends or reads a message waits until the message is whole: raised
        mid-read, it would leave the channel part-way through a frame, and the next block's answer lost."""
        outer = self._holding
        self._holding = True
        try:
            yield
        finally:
            self._holding = outer
        if not outer and self._held_back:
            self._held_back = False
            if self.block_running:
                raise KeyboardInterrupt

    def armed(self) -> _Armed:
        """While the block runs (``with interrupts.armed():``), a SIGINT raises KeyboardInterrupt in it."""
        return self._armed


class _Armed:
    """`_HostInterrupts.armed`'s context manager, one for the worker's life: every block enters it."""

    def __init__(self, interrupts: _HostInterrupts) -> None:
        self._interrupts = interrupts

    def __enter__(self) -> None:
        self._interrupts.block_running, self._interrupts._held_back = True, False

    def __exit__(self, *exc_info: object) -> None:
        self._interrupts.block_running = False


def _answer(
    interpreter: Interpreter,
    interrupts: _HostInterrupts,
    op: Any,
    body: str,
    parts: list[bytes],
    live: LiveOutput | None = None,
) -> _Message:
    if op == "variables":
        interpreter.send_variables(codec.decode_variables(body, parts=parts))
        return {"op": "loaded"}, "", ()
    if op == "tools":
        specs = codec.loads(body)
        handles = {
            spec["name"]: ToolHandle(spec["name"], spec["doc"], prelude.make_tool(spec, FinalAnswerSignal), False)
            for spec in specs
        }
        interpreter.send_tools(handles)
        return {"op": "loaded"}, "", ()
    if op == "run":
        return _run(interpreter, interrupts, body, live)
    return {"op": "unknown", "what": str(op)}, "", ()


def _run(interpreter: Interpreter, interrupts: _HostInterrupts, code: str, live: LiveOutput | None) -> _Message:
    try:
        with interrupts.armed():
            output = interpreter.run(code, live)
    except KeyboardInterrupt as interrupt:  # the interpreter gives it the block's logs as its cause
        cause = interrupt.__cause__
        logs, events = (cause.logs, cause.events) if isinstance(cause, ExecutionError) else ("", [])
        return {"op": "interrupted", "logs": logs, "events": events_text(events)}, "", ()
    except ExecutionError as error:
        failed = {
            "op": "error",
            "events": events_text(error.events),
            "timeout": isinstance(error, ExecutionTimeout),
            "message": _clipped(error.message),
            "logs": error.logs,
            "traceback": _clipped(error.traceback),
            "error_type": error.error_type,
        }
        return failed, "", ()
    header: dict[str, Any] = {
        "op": "done",
        "final": output.is_final_answer,
        "logs": output.logs,
        "events": events_text(output.events),
    }
    literal = codec.literal_text(output.output)
    if literal is not None:
        return header, literal, ()
    parts: list[Any] = []
    if _plain_and_small(output.output):  # no code of the sandbox runs, and it is quick: no watch needed
        return header, codec.dumps(output.output, parts=parts), parts
    encoded: list[str] = []
    failure = interpreter.watched(lambda: encoded.append(codec.dumps(output.output, parts=parts)))
    if encoded:
        return header, encoded[0], parts
    if output.is_final_answer:  # the codec's refusal, or the value's own code failing while encoded
        return (
            {
                **header,
                "op": "error",
                "timeout": False,
                "message": _clipped(final_answer_refused(output.output, failure)),
                "traceback": "",
                "error_type": "CodecError",
            },
            "",
            (),
        )
    return {**header, "shown": True}, codec.dumps(interpreter.shown(output.output)[:SHOWN_LIMIT]), ()


#: How long a str or bytes `_plain_and_small` lets encode without the block's limits.
_QUICK_TEXT = 1 << 16


def _plain_and_small(value: Any) -> bool:
    """Whether encoding `value`, which is not one of `codec.literal_text`'s values (None, a bool, an
    int under 2**64: written already), runs none of the code's methods and takes microseconds: a
    float, a str or bytes under 64 KiB (exactly those types, not a subclass of the code's). The
    watch around encoding costs as much as running a tiny block."""
    kind = type(value)
    return kind is float or ((kind is str or kind is bytes) and len(value) < _QUICK_TEXT)


def _clipped(text: str) -> str:
    """An error's message or traceback, cut to what a header may carry (see `channel.TEXT_LIMIT`):
    an exception built around a huge string is still reported, its head and tail kept."""
    if len(text) <= TEXT_LIMIT:
        return text
    half = TEXT_LIMIT // 2
    return f"{text[:half]}\n[... {len(text) - TEXT_LIMIT:,} characters cut ...]\n{text[-half:]}"


if __name__ == "__main__":
    main(*map(int, sys.argv[1:]))
