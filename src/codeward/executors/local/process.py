"""The host's side of the local worker: start it, talk to it, and replace it when it dies.

The worker is a fresh process of this interpreter (``-I -S``: no user site, no
``PYTHON*`` variables, no ``.pth`` code) with an environment of our making; it
confines itself before the model's code runs (see `worker`). Whatever the policy
cannot stop ends with the worker: a C call that outlives the time limit is
killed, a crash or an out-of-memory kill is reported in words, and the next block
starts a new worker with the variables and tools sent again. Nothing the model's
code allocates lives in the host.

The host trusts nothing the worker does once the model's code has run in it, and
polices it from outside:

- time: each block has a deadline the host keeps, its limit plus `GRACE_SECONDS`,
  whatever the worker does to its own alarm; the host tools the block calls run
  within it, and so does what the host sends (a worker that stops reading cannot
  hold the host in a send). A tool on the host cannot be stopped mid-call: one
  still running at the deadline has its worker killed when it returns.
- order: every request the host sends has a number (random, so none can be
  guessed ahead), and an answer must carry the number of the request it answers
  (a block's tool calls carry the block's), or the worker is stopped; a tool
  call's reply carries the number of that call, so a reply that comes after its
  block gave up waiting is dropped by the worker, never taken for the next
  block's result.
- size: a frame from the worker may hold no more than the block may send (see
  `frame_limits`), is taken as its bytes arrive, and what it holds is decoded
  within the block's deadline.
- life: a reaper process the model's code never runs in kills the worker when the
  host ends (see `reaper`).
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from codeward.effects import Steps, awaited, blocking, is_cancellation
from codeward.executors import codec
from codeward.executors.base import (
    BlockEvent,
    BlockUsage,
    CodeOutput,
    ExecutionError,
    ExecutionTimeout,
    ExecutorError,
    SandboxError,
)
from codeward.executors.kernel.bridge import ToolBridge
from codeward.executors.kernel.cells import decoding, request_error
from codeward.executors.kernel.remembering import RememberingExecutor
from codeward.executors.live import STREAMS, BlockStops, LiveOutput, OutputCallback
from codeward.executors.local.channel import ChannelClosed, ChannelError, ChannelTimeout
from codeward.executors.local.interpreter import interrupted
from codeward.executors.local.worker_process import WorkerProcess, worker_environment
from codeward.executors.metering import Measured, block_usage
from codeward.executors.settings import checked_tool_names, checked_variable_names
from codeward.wall_events import events_from_text

if TYPE_CHECKING:
    from codeward.tools import Tool

__all__ = ["WorkerExecutor"]

#: The walls whose refusals the worker itself may report: its policy's, which only it sees. Every other
#: wall's are the host's own knowledge (seccomp's from the kernel's listener), never the worker's word.
WORKER_WALLS = ("policy",)

#: What a cancelled block's tool call answers, the tool not run.
_CANCELLED_CALL = request_error("call", "ToolCallError", "the call was cancelled, with the block that made it")

#: Beyond the time limit, how long a block may take to stop by itself before its worker is killed.
GRACE_SECONDS = 1.0
#: After Ctrl-C (or a cancelled `arun`), how long the host waits for the block to stop and answer.
INTERRUPT_GRACE_SECONDS = 1.0
#: How long a new worker may take to import and confine itself.
START_SECONDS = 60.0
#: How fast a worker is expected to at least take in what is sent to it: loading variables or tools
#: may take the block's time limit, plus the grace, plus a second for each this many bytes.
LOADING_BYTES_PER_SECOND = 50 * 2**20
#: CPU seconds a worker may spend between two of its requests: a thread the code left running
#: after its block burns CPU while the host waits for no answer, and is stopped at the next request.
IDLE_CPU_SECONDS = 0.5


#: The bytes an output message's header may take besides its text's (12 a character at most, as JSON's
#: escapes): its other fields. Blanks past them would be parsed without drawing on the output budget.
OUTPUT_HEADER_ROOM = 200

#: The fields of each message a worker sends: one with others (junk that the host would parse and
#: ignore, such as megabytes beside one character of output) stops it.
_FIELDS = {
    op: frozenset({"op", "seq", *fields})
    for op, fields in {
        "ready": {"missing"},
        "output": {"stream", "text"},
        "tool": {"call"},
        "done": {"final", "logs", "shown", "events"},
        "error": {"final", "logs", "timeout", "message", "traceback", "error_type", "events"},
        "interrupted": {"logs", "events"},
        "loaded": set(),
        "unknown": {"what"},
    }.items()
}


class WorkerExecutor(RememberingExecutor):
    """The policy interpreter in a worker process; `LocalExecutor(isolation="process")` is this."""

    name = "local"

    def __init__(self, settings: dict[str, Any], env: Mapping[str, str] | None) -> None:
        super().__init__(timeout_seconds=settings["timeout_seconds"], tools_mode="host", allow_pickle=False)
        self._settings = settings
        self._env = worker_environment(env)
        # started now, waited for at first use
        self._worker: WorkerProcess | None = WorkerProcess(settings, self._env)
        self.missing_layers: list[str] = []
        self._stops = BlockStops()

    @property
    def sandbox_id(self) -> str | None:
        """The worker process the code runs in, as traces and batch results name it; None between workers."""
        return self._worker.sandbox_id if self._worker is not None else None

    # -- the contract ------------------------------------------------------------

    def run(self, code: str, on_output: OutputCallback | None = None) -> CodeOutput:
        """Run one block. Its time limit is wall-clock time kept by the host, and covers the host
        tools the block calls: the worker is killed `GRACE_SECONDS` past it whatever it does.
        What the block prints reaches `on_output` as the worker sends it."""
        return blocking(self._running(code, on_output))

    async def arun(self, code: str, on_output: OutputCallback | None = None) -> CodeOutput:
        """`run`, awaited: the event loop watches the worker's socket while the block runs, and runs
        the block's async tools. Cancelling the task stops the block as `interrupt()` does, and the
        worker, with what the code defined, stays (one that does not stop in time is replaced)."""
        return await awaited(self._running(code, on_output))

    def _running(self, code: str, on_output: OutputCallback | None) -> Steps[CodeOutput]:
        self._check_open()
        worker = yield from self._live_worker()
        live = LiveOutput(on_output, self._settings["max_print_outputs_length"])
        refused = worker.notices.take if worker.notices is not None else list
        refused()  # what a thread the code left running had refused between blocks is not this block's
        tally = _Tally(worker)
        try:
            with self._stops.running(worker.interrupt):
                header, body, parts, deadline, cancelled = yield from self._converse(worker, code, live, tally)
        except SandboxError as error:
            error.usage = tally.usage()
            raise
        except KeyboardInterrupt as interrupt:  # Ctrl-C: the run ends, and what the block printed goes with it
            printed = yield from self._interrupted(worker)
            raise interrupt from printed
        except BaseException:  # stopped mid-block otherwise: the worker's next answer would be this block's
            self._lost(worker, "interrupted")
            raise
        if cancelled is not None:  # the block stopped and the worker answered: it stays, the cancel goes on
            raise cancelled
        usage = tally.usage(header, body, parts)
        try:
            output = yield from self._outcome(header, body, parts, deadline, refused)
        except ExecutorError as error:
            error.usage = usage
            raise
        finally:
            live.raise_failure()  # the callback's failure stopped the block: it is what the caller sees
        output.usage = usage
        return output

    def interrupt(self) -> None:
        """Stop the running block as Ctrl-C does (SIGINT): it answers with what it printed, and the
        worker, with what the code defined, stays. Between blocks nothing happens."""
        self._stops.interrupt()

    def _interrupted(self, worker: WorkerProcess) -> Steps[ExecutionError]:
        """Stop the block and keep what it printed, which lives only in the worker; the worker is
        stopped after, whether or not it answered (a second Ctrl-C stops it at once)."""
        try:
            logs = yield from self._last_logs(worker)
        finally:
            self._lost(worker, "interrupted")
        return interrupted(logs)

    @staticmethod
    def _last_logs(worker: WorkerProcess) -> Steps[str]:
        """Ask the worker to stop its block (SIGINT) and take the logs of its answer, if it comes in time."""
        deadline = time.monotonic() + INTERRUPT_GRACE_SECONDS
        try:
            worker.process.send_signal(signal.SIGINT)
            while True:
                header, _, _ = yield from worker.channel.receiving(deadline)
                if header.get("op") not in ("tool", "output"):  # a tool asked for before the interrupt is not run
                    return str(header.get("logs", ""))
        except (OSError, ChannelError):  # gone, silent or garbled: nothing printed can be trusted to come
            return ""

    def send_variables(self, variables: dict[str, Any]) -> None:
        blocking(self._sending_variables(variables))

    async def asend_variables(self, variables: dict[str, Any]) -> None:
        await awaited(self._sending_variables(variables))

    async def asend_tools(self, tools: dict[str, Tool]) -> None:
        checked_tool_names(tools)
        self._bridge = ToolBridge(tools, mode=self.tools_mode, allow_pickle=self.allow_pickle)
        await awaited(self._loading("tools", self._bridge.specs_text))

    def _sending_variables(self, variables: dict[str, Any]) -> Steps[None]:
        checked_variable_names(variables, tools=self._bridge.tools)
        parts: list[Any] = []
        text = codec.encode_variables(variables, parts=parts)  # fails before anything is sent
        self._variables.update(variables)
        yield from self._loading("variables", text, parts)

    def _converse(
        self, worker: WorkerProcess, code: str, live: LiveOutput, tally: _Tally
    ) -> Steps[tuple[dict[str, Any], str, list[bytes], float, BaseException | None]]:
        """Send the block, hand its output to `live` and answer its tool calls until it ends, all
        before one deadline (which is returned, for decoding the answer within it too), with the
        cancellation that stopped it, if one did.

        Cancelled while it waits for the worker or a tool (an awaiting task), the block is stopped
        as `interrupt()` stops it and its answer awaited for `INTERRUPT_GRACE_SECONDS`: the worker
        that answers stays, with what the code defined; then the cancellation goes on up."""
        deadline = time.monotonic() + self.timeout_seconds + GRACE_SECONDS
        now = self._check_idle(worker)
        # what the code's threads spent since the last answer, under the idle allowance, counts in this block
        tally.begin(now if worker.cpu_at_answer is None else worker.cpu_at_answer)
        seq = yield from self._transmit(
            worker, {"op": "run", "live": live.wanted}, code, deadline=deadline, checked=True
        )
        heard = 0
        cancelled: BaseException | None = None
        while True:
            try:
                header, body, parts = yield from self._receive(worker, seq, deadline, code_running=True)
                if header.get("op") == "output":
                    heard += self._deliver(worker, header, live, heard)
                    continue
                if header.get("op") != "tool":
                    tally.end(worker.cpu_at_answer)  # read as the answer came
                    return header, body, parts, deadline, cancelled
                tally.tool_calls += 1
                # no tool runs for a cancelled block, however it asks: the caller has gone
                reply = _CANCELLED_CALL if cancelled else (yield from self._answer_tool(worker, body, deadline))
                yield from self._transmit(worker, {"op": "reply", "call": header.get("call")}, reply, deadline=deadline)
            except BaseException as error:
                if cancelled is not None and error is not cancelled:
                    raise cancelled from None  # the worker did not stop in time and was replaced
                if error is cancelled or not is_cancellation(error) or worker.channel.cut:
                    raise  # a reply cut midway: the worker is stopped
                cancelled = error
                deadline = min(deadline, time.monotonic() + INTERRUPT_GRACE_SECONDS)
                self._stops.interrupt()  # a block waiting for its tool's reply stops waiting too

    def _deliver(self, worker: WorkerProcess, header: dict[str, Any], live: LiveOutput, heard: int) -> int:
        """Hand a piece of the block's output to `live`; return its length. A worker sends no more
        than the logs' length in all, and no empty piece, so the pieces are bounded too: one that
        does is stopped. A callback that fails stops the block, as `interrupt()` does."""
        stream, text = header.get("stream"), header.get("text")
        if stream not in STREAMS or not isinstance(text, str) or not text:
            raise self._lost(worker, "the worker process sent output codeward cannot read, and was stopped")
        if worker.channel.header_size > OUTPUT_HEADER_ROOM + 12 * len(text):
            raise self._lost(worker, "the worker process sent output padded past what its text takes, and was stopped")
        if heard + len(text) > self._settings["max_print_outputs_length"]:
            raise self._lost(worker, "the worker process sent more output than its logs may hold, and was stopped")
        failed = live.failure is not None
        live(str(stream), text)
        if live.failure is not None and not failed:
            self._stops.interrupt()
        return len(text)

    def _answer_tool(self, worker: WorkerProcess, body: str, deadline: float) -> Steps[str]:
        """Run the tool the block asked for; its request is decoded within the block's deadline.
        The host cannot stop a tool mid-call: past the deadline when it returns, the worker is
        stopped (its block has already given up waiting), and the block ends as a timeout."""
        with self._decoding(deadline):
            reply = yield from self._bridge.answering_tool(body, by=deadline)
        if time.monotonic() > deadline:
            raise self._lost(
                worker,
                f"the code ran past its {self.timeout_seconds:g}-second time limit in a host tool it called "
                "(the limit covers the tools a block calls, and a tool on the host cannot be stopped mid-call), "
                "so its worker process was stopped when the tool returned",
            )
        return reply

    def close(self) -> None:
        blocking(self._closing())

    async def aclose(self) -> None:
        await awaited(self._closing())

    def _closing(self) -> Steps[None]:
        if self._closed:
            return
        self._closed = True
        worker, self._worker = self._worker, None
        if worker is not None:
            yield from worker.stopping()

    # -- the worker --------------------------------------------------------------

    def _load(self, what: str, text: str, parts: Sequence[Any] = ()) -> None:
        blocking(self._loading(what, text, parts))

    def _loading(self, what: str, text: str, parts: Sequence[Any] = ()) -> Steps[None]:
        if self._worker is None or not self._worker.ready:
            yield from self._live_worker()  # a new worker is sent everything remembered, this included
            return
        yield from self._send(self._worker, what, text, parts)

    def _send(self, worker: WorkerProcess, what: str, text: str, parts: Sequence[Any] = ()) -> Steps[None]:
        """Load variables or tools into a running worker, by a deadline the host sets from what it sends:
        a worker that stops answering (a thread of the code's holding it) holds the host no longer.
        Stopped midway (a cancelled task), the worker is replaced: the host still has what it sent."""
        size = len(text) + sum(map(len, parts))
        deadline = time.monotonic() + self.timeout_seconds + GRACE_SECONDS + size / LOADING_BYTES_PER_SECOND
        try:
            seq = yield from self._transmit(worker, {"op": what}, text, parts, deadline=deadline)
            header, _, _ = yield from self._receive(worker, seq, deadline, code_running=False)
        except SandboxError:
            raise
        except BaseException:
            self._lost(worker, f"stopped while loading {what}")
            raise
        if header.get("op") != "loaded":
            raise self._lost(worker, f"the worker answered {header.get('op')!r} to loading {what}")

    def _live_worker(self) -> Steps[WorkerProcess]:
        """The running worker, or a new one with the variables and tools sent again."""
        if self._worker is not None and self._worker.ready:
            return self._worker
        if self._worker is None:
            self._worker = WorkerProcess(self._settings, self._env)
        worker = self._worker
        try:
            yield from worker.started()
        except Exception as error:
            raise self._lost(
                worker, f"the worker process could not be started ({type(error).__name__}: {error})"
            ) from None
        deadline = time.monotonic() + START_SECONDS
        header, _, _ = yield from self._receive(worker, worker.start_seq, deadline, code_running=False)
        if header.get("op") != "ready":
            raise self._lost(worker, f"the worker did not start: {header.get('message', header)}")
        worker.ready = True
        self.missing_layers = [layer for layer in str(header.get("missing") or "").split(",") if layer]
        if self._variables:
            parts: list[Any] = []
            yield from self._send(worker, "variables", codec.encode_variables(self._variables, parts=parts), parts)
        if self._bridge.tools:
            yield from self._send(worker, "tools", self._bridge.specs_text)
        return worker

    def _transmit(
        self,
        worker: WorkerProcess,
        header: dict[str, Any],
        body: str,
        parts: Sequence[Any] = (),
        *,
        deadline: float,
        checked: bool = False,
    ) -> Steps[int]:
        """Send a request by `deadline` (a worker that stops reading cannot hold the host); return
        its number, which the worker's answer must carry. A worker that ran code since its last
        answer (a thread the code left behind) is stopped first, unless the caller `checked`; a
        tool's reply is part of its block, whose deadline bounds whatever runs meanwhile."""
        if header["op"] != "reply" and not checked:
            self._check_idle(worker)
        try:
            return (yield from worker.sending(header, body, parts, deadline))
        except (OSError, ChannelClosed):  # a worker that died while idle (killed from outside) shows it here first
            raise self._lost(worker, (yield from worker.dying())) from None
        except ChannelTimeout:
            raise self._lost(worker, "the worker process stopped taking what the host sent, and was stopped") from None

    def _check_idle(self, worker: WorkerProcess) -> float | None:
        """Stop a worker that ran code since its last answer; return its CPU seconds so far, as read."""
        if worker.busy_while_idle() > IDLE_CPU_SECONDS:
            raise self._lost(
                worker,
                f"the worker process kept running code between blocks (more than {IDLE_CPU_SECONDS:g} CPU seconds "
                "while no block ran: a thread the code started and left running), and was stopped",
            )
        return worker.cpu_read

    def _receive(
        self, worker: WorkerProcess, seq: int, deadline: float, *, code_running: bool
    ) -> Steps[tuple[dict[str, Any], str, list[bytes]]]:
        """The worker's answer to request `seq`; anything else, or nothing by `deadline`, stops it."""
        header, body, parts = yield from self._next_message(worker, deadline, code_running=code_running)
        if header.get("seq") != seq:
            raise self._lost(
                worker,
                f"the worker process answered out of turn (to {header.get('seq')!r:.30}, not {seq}), and was stopped",
            )
        return header, body, parts

    def _next_message(
        self, worker: WorkerProcess, deadline: float, *, code_running: bool
    ) -> Steps[tuple[dict[str, Any], str, list[bytes]]]:
        try:
            message = yield from worker.channel.receiving(deadline)
            if not _FIELDS.get(str(message[0].get("op")), frozenset()).issuperset(message[0]):
                raise self._lost(worker, "the worker process sent a message with fields codeward does not know")
            if message[0].get("op") not in ("tool", "output"):  # the block goes on: a tool's reply is not checked
                worker.answered()
            return message
        except ChannelTimeout:
            if code_running:
                raise self._lost(
                    worker,
                    f"the code ran past its {self.timeout_seconds:g}-second time limit and did not stop (a call "
                    "that cannot be interrupted, such as C code), so its worker process was stopped",
                ) from None
            raise self._lost(worker, "the worker process did not answer in time and was stopped") from None
        except ChannelClosed:
            raise self._lost(worker, (yield from worker.dying())) from None
        except ChannelError as error:
            raise self._lost(worker, f"the worker process sent {error}, and was stopped") from None

    @contextlib.contextmanager
    def _decoding(self, deadline: float) -> Iterator[None]:
        """What the host decodes from the worker: by the block's deadline, and within its memory allowance."""
        with codec.decoding_deadline(deadline), codec.decoding_memory(self._settings["max_memory_bytes"]):
            yield

    def _lost(self, worker: WorkerProcess, what: str) -> SandboxError:
        """Stop `worker` for good; the next block starts a new one."""
        worker.stop(graceful=False)
        if self._worker is worker:
            self._worker = None
        return SandboxError(f"{what}; what the code defined is lost, and a new worker takes the next block")

    def _decoded(
        self, body: str, parts: list[bytes], deadline: float, logs: str, events: list[BlockEvent]
    ) -> Steps[Any]:
        """The block's value, decoded by the codec within the block's deadline and memory allowance."""
        try:
            with self._decoding(deadline):
                return (yield from decoding(body, parts=parts))
        except codec.CodecError as error:
            refused = ExecutionError(
                f"the sandbox sent a value codeward refuses: {error}", logs=logs, error_type="CodecError"
            )
            refused.events = events
            raise refused from None

    def _outcome(
        self,
        header: dict[str, Any],
        body: str,
        parts: list[bytes],
        deadline: float,
        seccomp_refused: Callable[[], list[BlockEvent]] = list,
    ) -> Steps[CodeOutput]:
        logs = str(header.get("logs", ""))
        # What the policy refused, as the worker (the code's own process) tells it: bounded and plain;
        # and the system calls the seccomp filter refused, as the host answered them itself.
        events = events_from_text(header.get("events"), walls=WORKER_WALLS) + seccomp_refused()
        if header.get("op") == "done":
            value = codec.literal_value(body) if not parts else codec.NOT_LITERAL
            if value is codec.NOT_LITERAL:
                value = yield from self._decoded(body, parts, deadline, logs, events)
            return CodeOutput(value, logs, bool(header.get("final")), events=events)
        failure: ExecutionError
        if header.get("op") == "interrupted":  # `interrupt()`: the block stopped, the worker stays
            failure = interrupted(logs)
        elif header.get("op") == "error":
            kind = ExecutionTimeout if header.get("timeout") else ExecutionError
            failure = kind(
                str(header.get("message", "")),
                logs=logs,
                traceback=str(header.get("traceback", "")),
                error_type=str(header.get("error_type") or "") or None,
            )
        else:
            raise SandboxError(f"the worker answered a block with {header.get('op')!r}", state_lost=False)
        failure.events = events
        raise failure


class _Tally:
    """What one block cost, as the host sees it: the worker's CPU time and memory peak read from
    /proc (never from the worker's own word), its wall time, the tool calls it asked the host for
    and the bytes it sent back (its logs and its value)."""

    def __init__(self, worker: WorkerProcess) -> None:
        self.meter = worker.meter
        self.tool_calls = 0
        self.started = time.monotonic()
        self.ended: float | None = None
        self.measured: Measured | None = None

    def begin(self, cpu: float | None = None) -> None:
        self.meter.begin(cpu)
        self.started = time.monotonic()

    def end(self, cpu: float | None = None) -> None:
        self.ended = time.monotonic()
        self.measured = self.meter.end(cpu)

    def usage(self, header: dict[str, Any] | None = None, body: str = "", parts: Sequence[bytes] = ()) -> BlockUsage:
        if self.measured is None:  # the block did not end with an answer: what /proc still shows
            self.end()
        assert self.measured is not None and self.ended is not None
        logs = str((header or {}).get("logs", ""))
        sent = len(logs.encode("utf-8", "surrogatepass")) + len(body.encode("utf-8", "surrogatepass"))
        return block_usage(
            self.ended - self.started,
            self.measured,
            output_bytes=sent + sum(map(len, parts)),
            tool_calls=self.tool_calls,
            egress_reason="the local worker has no network",
        )
