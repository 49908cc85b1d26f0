"""A Jupyter kernel driven over its ZeroMQ channels, shared by every kernel-backed sandbox.

`KernelSession` runs code and gathers what the kernel sent back (printed text,
results, rich displays, errors, payloads); it enforces time limits by
interrupting the kernel and, failing that, restarting it; it notices a dead
kernel. *How* the kernel process starts, stops, is interrupted or restarted is
a `KernelProcess` (`owners`: a local subprocess, or a container's kernel). The session itself polls the
shell, iopub and stdin sockets directly, so a round trip costs little more than
the protocol's own floor.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from typing import Any, Protocol, TypedDict, Unpack

import zmq
from jupyter_client.blocking.client import BlockingKernelClient

from codeward.effects import Offloaded, Steps, blocking
from codeward.executors.base import ExecutionError, ExecutionTimeout, SandboxError
from codeward.executors.codec.pieces import PIECE
from codeward.executors.kernel.cells import CellCollector, CellResult, InputHandler, InputSteps
from codeward.executors.kernel.messages import bound, reading, unpacking
from codeward.executors.kernel.waiting import SocketsReady
from codeward.executors.live import LiveOutput, OutputCallback
from codeward.executors.settings import DEFAULT_OUTPUT_BUDGET

__all__ = [
    "CellOptions",
    "KernelProcess",
    "KernelSession",
    "answered",
]


_LIVENESS_INTERVAL = 0.25
_READY_RETRY = 0.1
_STDIN_RETRY = 1.0
_LAST_WORDS_WAIT = 0.05
_IOPUB_QUEUE = 4
_READ_BATCH = 64  # messages read from one socket before the deadline is looked at again
#: The bytes a kernel's message may take besides twice the cell's output budget (its largest value
#: or display, escaped in a JSON string): its header, metadata and the rest of its content.
MESSAGE_ROOM = 1 << 20
#: After the reply, how long iopub may stay silent before the cell's idle status is taken as dropped.
_QUIET_AFTER_REPLY = 0.5


class CellOptions(TypedDict, total=False):
    """`KernelSession.executing`'s options, as `execute` passes them on."""

    timeout: float | None
    silent: bool
    live: LiveOutput | None


class KernelProcess(Protocol):
    """Who owns the kernel: starts it, says whether it lives, interrupts, restarts, stops it."""

    def connection_info(self) -> dict[str, Any]:
        """Ports (or ipc paths), transport, signing key of the running kernel."""

    def is_alive(self) -> bool: ...

    def interrupt(self, client: BlockingKernelClient) -> None: ...

    def restart(self) -> None:
        """Leave a fresh kernel running; `connection_info()` then describes it."""

    def shutdown(self) -> None:
        """Stop the kernel and everything it started. Idempotent."""

    def describe_death(self) -> str:
        """A short account of why the kernel is gone, for the error the caller sees."""


class KernelSession:
    """Runs code in one kernel and gathers the replies.

    `generation` grows by one each time a fresh kernel replaces the old one, so
    the owner knows when state it set up (variables, tools) must be sent again.

    Each wait is written once, as steps that yield an effect (`codeward.effects`, `waiting`):
    `execute`, `run_block` and `restart` drive them by blocking; an awaiting caller drives
    `executing`, `running_block` and `restarting` itself, and the event loop watches the sockets.
    Built with `connect=False`, the session connects when `starting()` is driven.
    """

    def __init__(
        self,
        process: KernelProcess,
        *,
        ready_timeout: float = 60.0,
        interrupt_grace: float = 3.0,
        max_log_chars: int = 100_000,
        max_output_bytes: int = DEFAULT_OUTPUT_BUDGET,
        connect: bool = True,
    ) -> None:
        self.process = process
        self.max_output_bytes = max_output_bytes
        self.ready_timeout = ready_timeout
        self.interrupt_grace = interrupt_grace
        self.max_log_chars = max_log_chars
        self.generation = 0
        self._client: BlockingKernelClient | None = None
        self._block_lock = threading.Lock()
        self._block_running = False  # a block of the caller's runs: `interrupt()` may stop it
        self._interrupt_asked = False
        self._poller = zmq.Poller()
        if connect:
            blocking(self.starting())

    # -- lifecycle -------------------------------------------------------------

    def starting(self) -> Steps[None]:
        """Connect to the kernel just started; one that does not answer is stopped, and the error raised."""
        try:
            yield from self._connecting()
        except BaseException:
            yield Offloaded(self.close)  # an unclosed client left to the garbage collector can hang it in zmq's term()
            raise

    def _connecting(self) -> Steps[None]:
        """Open channels to the current kernel and wait until shell and iopub both answer."""
        self._disconnect()
        client = BlockingKernelClient(context=zmq.Context())
        client.load_connection_info(self.process.connection_info())  # type: ignore[arg-type]
        unpacking(client.session)
        bound(client.context, MESSAGE_ROOM + 2 * self.max_output_bytes)  # a value's text, escaped in a string
        _queue_little_output(client)
        client.start_channels(hb=False)
        self._client = client
        self._poller = zmq.Poller()
        for channel in (client.shell_channel, client.iopub_channel, client.stdin_channel):
            self._poller.register(channel.socket, zmq.POLLIN)
        yield from self._waiting_ready()
        yield from self._waiting_stdin()
        self.generation += 1

    def _waiting_ready(self) -> Steps[None]:
        """Ask for kernel_info until its reply *and* an iopub message about it arrive.

        The iopub message proves the subscription is live, so no output of the
        first real cell can be lost.
        """
        client = self._require_client()
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            msg_id = client.kernel_info()
            replied = heard = False
            retry_at = time.monotonic() + _READY_RETRY
            while time.monotonic() < retry_at and not (replied and heard):
                for channel, msg in (yield from self._polling(retry_at - time.monotonic())):
                    if msg["parent_header"].get("msg_id") != msg_id:
                        continue
                    replied = replied or channel == "shell"
                    heard = heard or channel == "iopub"
            if replied and heard:
                return
            if not (yield Offloaded(self.process.is_alive)):
                why = yield Offloaded(self.process.describe_death)
                raise SandboxError(f"the kernel did not start: {why}")
        raise SandboxError(f"the kernel did not answer within {self.ready_timeout:.0f} s of starting")

    def _waiting_stdin(self) -> Steps[None]:
        """Make sure the kernel can reach us on stdin before anything relies on it.

        A kernel's stdin socket drops a request addressed to a client whose
        connection is not yet complete, and then waits for the answer forever;
        so ask for one `input()`, and if the request is lost, interrupt and ask again.
        """
        for _ in range(int(self.ready_timeout / _STDIN_RETRY)):
            try:
                yield from self.executing("input()", timeout=_STDIN_RETRY, on_input=answered(str), silent=True)
                return
            except ExecutionTimeout:
                continue
        raise SandboxError(f"the kernel's stdin channel did not answer within {self.ready_timeout:.0f} s")

    def restart(self) -> None:
        """Replace the kernel with a fresh one (state is lost) and reconnect."""
        blocking(self.restarting())

    def restarting(self) -> Steps[None]:
        """`restart`, as steps."""
        self._disconnect()
        yield Offloaded(self.process.restart)
        yield from self._connecting()

    def close(self) -> None:
        """Stop the kernel and release the sockets. Idempotent."""
        self._disconnect()
        self.process.shutdown()

    def _disconnect(self) -> None:
        if self._client is not None:
            self._client.stop_channels()
            self._client.context.destroy(linger=0)
            self._client = None

    def _require_client(self) -> BlockingKernelClient:
        if self._client is None:
            raise SandboxError("the kernel session is closed")
        return self._client

    # -- execution -------------------------------------------------------------

    def interrupt(self) -> None:
        """Stop the caller's running block (from any thread): the thread that runs it sends the
        kernel its interrupt within `_LIVENESS_INTERVAL`. Between blocks, and during codeward's
        own cells, nothing happens."""
        with self._block_lock:
            if self._block_running:
                self._interrupt_asked = True

    def run_block(
        self, code: str, *, timeout: float, on_input: InputHandler, on_output: OutputCallback | None = None
    ) -> CellResult:
        """Run the caller's block: `execute`, which `interrupt()` may stop, with `on_output` called
        as its output arrives. What that callback raises is raised once the block has stopped."""
        return blocking(self.running_block(code, timeout=timeout, on_input=answered(on_input), on_output=on_output))

    def running_block(
        self, code: str, *, timeout: float, on_input: InputSteps, on_output: OutputCallback | None = None
    ) -> Steps[CellResult]:
        """`run_block`, as steps; `on_input` answers the block's requests as steps too (the tool bridge's)."""
        live = LiveOutput(on_output, self.max_log_chars)
        with self._block_lock:
            self._block_running, self._interrupt_asked = True, False
        try:
            result = yield from self.executing(code, timeout=timeout, on_input=on_input, live=live)
        finally:
            with self._block_lock:
                self._block_running = self._interrupt_asked = False
        live.raise_failure()
        return result

    def _stop_wanted(self, live: LiveOutput | None) -> bool:
        return self._interrupt_asked or (live is not None and live.failure is not None)

    def execute(self, code: str, *, on_input: InputHandler | None = None, **options: Unpack[CellOptions]) -> CellResult:
        """`executing`, driven by blocking; `on_input` answers the code's requests at once."""
        steps = None if on_input is None else answered(on_input)
        return blocking(self.executing(code, on_input=steps, **options))

    def executing(
        self,
        code: str,
        *,
        timeout: float | None = None,
        on_input: InputSteps | None = None,
        silent: bool = False,
        live: LiveOutput | None = None,
    ) -> Steps[CellResult]:
        """Run `code`; return once the reply and all output for it have arrived.

        Raises `ExecutionTimeout` past `timeout` seconds (after stopping the
        code) and `SandboxError` if the kernel dies meanwhile. A `silent` cell
        leaves no trace in the kernel's history and publishes no result. With
        `live`, output is handed to it as it arrives, and the cell is stopped
        (interrupted, as Ctrl-C does) when `interrupt()` asks or its callback fails. A cancelled
        awaiting task stops it the same way, and restarts a kernel that does not stop.
        """
        client = self._require_client()
        msg_id = client.execute(
            code, silent=silent, store_history=not silent, allow_stdin=on_input is not None, stop_on_error=False
        )
        cell = CellCollector(self.max_log_chars, self.max_output_bytes, live)
        deadline = None if timeout is None else time.monotonic() + timeout
        stopping = _Stopping(deadline, self.interrupt_grace)
        last_heard = time.monotonic()
        next_check = last_heard + _LIVENESS_INTERVAL
        try:
            while not cell.done:
                now = time.monotonic()
                if cell.replied and now >= last_heard + _QUIET_AFTER_REPLY:
                    cell.give_up_waiting_for_idle()
                    break
                if cell.stopped_unanswered and now >= last_heard + _QUIET_AFTER_REPLY:
                    break  # no reply will come: waiting for one would hold the cell to its limit
                if stopping.due(now, asked=self._stop_wanted(live)):
                    yield Offloaded(self.process.interrupt, client)  # a signal sent by jupyter_client, which may block
                    cell.interrupted = True
                if stopping.overdue(now):
                    yield from self._restarting_after_timeout(timeout, cell.logs())
                if now >= next_check:
                    yield from self._checking_alive(cell, msg_id)
                    next_check = now + _LIVENESS_INTERVAL
                wait = next_check - now
                if deadline is not None and stopping.timed_out_at is None:
                    wait = min(wait, deadline - now)
                if cell.replied or cell.stopped_unanswered:
                    wait = min(wait, last_heard + _QUIET_AFTER_REPLY - now)
                for channel, msg in (yield from self._polling(wait)):
                    cell.count(msg)
                    if channel != "stdin" and msg["parent_header"].get("msg_id") != msg_id:
                        continue
                    last_heard = time.monotonic()
                    if channel == "stdin":
                        # Past the time limit the code is being stopped: its requests are not served.
                        reply = ""
                        if on_input is not None and not cell.interrupted:
                            reply = yield from cell.answering(msg["content"].get("prompt", ""), on_input)
                        client.input(reply)
                    else:
                        cell.take(channel, msg)
        except KeyboardInterrupt as interrupt:  # Ctrl-C on the host: the run ends, with what the cell printed
            raise interrupt from (yield from self._interrupting(client, cell, msg_id))
        except asyncio.CancelledError:  # the awaiting task was cancelled: nothing of the cell runs on
            yield from self._interrupting(client, cell, msg_id)
            if not cell.done:
                yield from self.restarting()
            raise
        if stopping.timed_out_at is not None and (cell.reply_status != "ok" or cell.interrupted_as_it_reported):
            raise ExecutionTimeout(
                f"the code ran past its time limit of {timeout:g} s and was interrupted",
                logs=cell.logs(),
                traceback=cell.traceback(),
                error_type="TimeoutError",
            )
        if not cell.replied:
            raise ExecutionError(
                "the code was interrupted as it began or ended, so the kernel sent no reply for it; its state is kept",
                logs=cell.logs(),
                error_type="KeyboardInterrupt",
            )
        return cell.result()

    def _interrupting(self, client: BlockingKernelClient, cell: CellCollector, msg_id: str) -> Steps[ExecutionError]:
        """Interrupt the kernel and gather, for up to `interrupt_grace`, what the cell still sends, so
        that what it printed reaches the user; a kernel that will not stop runs on until it is closed."""
        yield Offloaded(self.process.interrupt, client)
        until = time.monotonic() + self.interrupt_grace
        while not cell.done and time.monotonic() < until:
            for channel, msg in (yield from self._polling(until - time.monotonic())):
                if channel == "stdin":
                    client.input("")  # the code is being stopped: its requests are not served
                elif msg["parent_header"].get("msg_id") == msg_id:
                    cell.take(channel, msg)
        return ExecutionError(
            "the code was interrupted (Ctrl-C) while it ran",
            logs=cell.logs(),
            traceback=cell.traceback(),
            error_type="KeyboardInterrupt",
        )

    def _polling(self, seconds: float) -> Steps[list[tuple[str, dict[str, Any]]]]:
        """Wait up to `seconds` for any message; return the ready ones by channel."""
        ready = yield SocketsReady(self._poller, seconds)
        return (yield from self._reading(ready))

    def _reading(self, ready: list[zmq.Socket[Any]]) -> Steps[list[tuple[str, dict[str, Any]]]]:
        """The messages of the `ready` sockets by channel: at most `_READ_BATCH` a socket, so the
        caller's deadline is checked between, and none after a large one, so a flood of large ones
        holds one on the host at a time. One that does not parse ends the session."""
        client = self._require_client()
        channels = {
            client.shell_channel.socket: "shell",
            client.iopub_channel.socket: "iopub",
            client.stdin_channel.socket: "stdin",
        }
        messages = []
        # iopub first: output sent before a reply must be gathered before the reply ends the cell.
        for socket in sorted(ready, key=lambda s: channels[s] != "iopub"):
            for _ in range(_READ_BATCH):
                try:
                    read = yield from reading(client.session, socket)
                except (ValueError, TypeError, KeyError, IndexError) as error:  # CodecError is a TypeError
                    self._disconnect()
                    raise SandboxError(
                        f"the sandbox sent a message codeward refuses ({type(error).__name__}: {error}); what "
                        "the code defined is lost, and a fresh kernel takes the next block"
                    ) from None
                if read is None:
                    break
                message, size = read
                messages.append((channels[socket], message))
                if size > PIECE:
                    return messages
        return messages

    def _checking_alive(self, cell: CellCollector, msg_id: str) -> Steps[None]:
        if (yield Offloaded(self.process.is_alive)):  # an engine's container is asked over HTTP
            return
        for channel, msg in (yield from self._polling(_LAST_WORDS_WAIT)):  # what left the kernel before it died
            if channel == "iopub" and msg["parent_header"].get("msg_id") == msg_id:
                cell.take(channel, msg)
        why = yield Offloaded(self.process.describe_death)
        self._disconnect()
        raise SandboxError(
            "the sandbox died while running the code. Variables and functions defined by earlier "
            "code are lost; the next run starts a fresh kernel and sends variables and tools "
            f"again. Cause: {why}",
            logs=cell.logs(),
        )

    def _restarting_after_timeout(self, timeout: float | None, logs: str) -> Steps[None]:
        yield from self.restarting()
        raise ExecutionTimeout(
            f"the code ran past its time limit of {timeout:g} s and did not stop when interrupted, "
            "so the kernel was restarted: variables and functions defined by earlier code are lost "
            "(variables and tools given by the caller are sent again)",
            logs=logs,
            error_type="TimeoutError",
        )


class _Stopping:
    """When a running cell is interrupted: at its `deadline`, after which it has `grace` seconds to
    stop before its kernel is restarted; and when the caller asks, again every `grace` seconds while
    it runs (the first may have come before the cell began, when the kernel ignores it), so that a
    stop the caller asked for never costs the kernel's state: only the time limit does."""

    def __init__(self, deadline: float | None, grace: float) -> None:
        self.deadline = deadline
        self.grace = grace
        self.timed_out_at: float | None = None
        self._asked_at = -math.inf

    def due(self, now: float, *, asked: bool) -> bool:
        """Whether to send the kernel an interrupt now."""
        if self.timed_out_at is not None:
            return False
        if self.deadline is not None and now >= self.deadline:
            self.timed_out_at = now
            return True
        if asked and now >= self._asked_at + self.grace:
            self._asked_at = now
            return True
        return False

    def overdue(self, now: float) -> bool:
        """Past its time limit and its grace: only a restart stops it."""
        return self.timed_out_at is not None and now >= self.timed_out_at + self.grace


def answered(handler: InputHandler) -> InputSteps:
    """`handler`, which answers at once, as steps that `executing` drives."""

    def answering(prompt: str) -> Steps[str]:
        yield from ()
        return handler(prompt)

    return answering


def _queue_little_output(client: BlockingKernelClient) -> None:
    """Open the iopub socket with a short receive queue, so a flood waits in the sandbox, not the host.

    zmq reads ahead into a queue of up to a thousand messages; past `_IOPUB_QUEUE` the kernel's own
    queue fills instead, within the sandbox's memory, and it drops what its queue cannot hold.
    """
    context = client.context
    context.setsockopt(zmq.RCVHWM, _IOPUB_QUEUE)
    try:
        client.iopub_channel  # noqa: B018 - made now, while the option is the context's default
    finally:
        del context.sockopts[zmq.RCVHWM]
