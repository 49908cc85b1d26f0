"""One execute request's outcome, as every kernel-backed sandbox reports it.

The jupyter and docker executors read it off a kernel's channels (`CellCollector`
gathers the messages of one request, within its budget), the e2b executor off
E2B's stream; either way, `code_output` turns it into the
contract's `CodeOutput` or error, with values decoded by the codec and never
unpickled. Nothing here needs jupyter_client, so the e2b extra does not either.
"""

from __future__ import annotations

import functools
import re
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from codeward.effects import Offloaded, Steps, blocking
from codeward.executors import codec
from codeward.executors.base import CodeOutput, ExecutionError, SandboxError
from codeward.executors.codec.pieces import fits_one_piece
from codeward.executors.displays import richest_display
from codeward.executors.kernel.prelude import PAYLOAD_SOURCE, REPORT_MIME
from codeward.executors.live import LiveOutput, display_text

__all__ = [
    "BoundedText",
    "CellCollector",
    "CellResult",
    "InputHandler",
    "InputSteps",
    "OutputBudget",
    "bundle_size",
    "code_output",
    "code_outputting",
    "decoding",
    "decoding_sandbox_value",
    "decoding_within",
    "kept_bundle",
    "over_budget_reply",
    "request_error",
    "require_setup_ok",
    "strip_ansi",
]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

#: The MIME types of a display that codeward reads (`displays.richest_display`, its reports).
_KEPT_MIMES = ("image/png", "image/jpeg", "text/html", "text/markdown", "text/plain", REPORT_MIME)
#: Answers an `input()` request from the kernel: prompt in, reply text out.
InputHandler = Callable[[str], str]
#: The same answer, as steps that may wait (`codeward.effects`): a host tool's call, awaited under `arun`.
InputSteps = Callable[[str], Steps[str]]
_TRACEBACK_CHARS = 100_000  # a longer traceback keeps its end, where the error is
_DROPPED_NOTE = (
    "\n[codeward: the sandbox sent output faster than it could be read, and its kernel dropped some of it; "
    "print or show less at a time]"
)


def kept_bundle(data: Any) -> dict[str, str]:
    """The parts of a display's MIME bundle codeward reads, and only text ones: the rest is not kept."""
    if not isinstance(data, dict):
        return {}
    return {mime: data[mime] for mime in _KEPT_MIMES if isinstance(data.get(mime), str)}


def bundle_size(data: dict[str, Any]) -> int:
    """The characters of a bundle's (or payload entry's) text values: what holding it costs."""
    return sum(len(value) for value in data.values() if isinstance(value, str))


def output_cut_note(dropped: int) -> str:
    return (
        f"\n[codeward: {dropped:,} bytes of this cell's output (printed text, displays, tool requests or its value) "
        "came past the cell's output budget and were dropped; print, show or send less at a time]"
    )


def request_error(kind: str, error_type: str, message: str, raised: BaseException | None = None) -> str:
    """The reply to a sandbox's request that fails: the prelude raises it as `error_type` in the code.

    For an exception the host `raised`, the reply also names its nearest built-in base, so a
    `ToolError` standing for a type the sandbox lacks is still caught by ``except ValueError``
    and the like, and carries its arguments when they are plain, so ``KeyError('Z')`` arrives as
    itself rather than as the text of its message.
    """
    error: dict[str, Any] = {"kind": kind, "type": error_type, "message": message}
    if raised is not None:
        error["base"] = next(cls.__name__ for cls in type(raised).__mro__ if cls.__module__ == "builtins")
        if all(isinstance(arg, (str, int, float, bool, type(None))) for arg in raised.args):
            error["args"] = list(raised.args)
    return codec.dumps({"error": error})


def over_budget_reply(size: int) -> str:
    """The reply to a request that would pass what is left of the cell's output budget: it is not read."""
    return request_error(
        "call",
        "ToolCallError",
        f"the request is {size:,} bytes, past what is left of the cell's output budget; "
        "send the tool smaller arguments",
    )


class OutputBudget:
    """The bytes one cell may still bring back; what would pass it is counted, not kept.

    Each item kept (a printed piece, a display, a request) also costs `ITEM_BYTES`, what the host
    spends to hold it, so a flood of empty displays is bounded too.
    """

    ITEM_BYTES = 256

    def __init__(self, limit: int) -> None:
        self.left = limit
        self.dropped = 0

    def spend(self, size: int) -> bool:
        size += self.ITEM_BYTES
        if size > self.left:
            self.dropped += size
            return False
        self.left -= size
        return True

    def noted(self, logs: str) -> str:
        """`logs`, with the note that output was dropped when some was."""
        return logs + output_cut_note(self.dropped) if self.dropped else logs


def strip_ansi(text: str) -> str:
    """Tracebacks without the terminal colours IPython adds."""
    return _ANSI.sub("", text)


@dataclass
class CellResult:
    """What the kernel sent back for one execute request."""

    status: str
    logs: str
    result: dict[str, Any] | None = None
    displays: list[dict[str, Any]] = field(default_factory=list)
    payload: list[dict[str, Any]] = field(default_factory=list)
    error_name: str = ""
    error_value: str = ""
    traceback: str = ""
    #: The bytes of output the cell sent (printed text, displays, its value), kept or not.
    output_bytes: int = 0


def result_bytes(result: CellResult) -> int:
    """The bytes of what a cell brought back and the host kept: its logs, displays, value and payload."""
    shown = sum(map(bundle_size, result.displays)) + (bundle_size(result.result) if result.result else 0)
    return len(result.logs.encode("utf-8", "surrogatepass")) + shown + sum(map(bundle_size, result.payload))


class BoundedText:
    """Text that keeps its head and tail once it outgrows `limit`, so runaway output cannot fill memory."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._head: list[str] = []
        self._head_size = 0
        self._tail = ""
        self._dropped = 0

    def add(self, text: str) -> None:
        """Keep `text`, or the part of it the limit leaves room for. A `str` subclass (in process, the
        code's own) is measured and cut as the characters it holds, never by its own `len` or slicing."""
        if type(text) is not str:
            if not isinstance(text, str):
                raise TypeError(f"write() argument must be str, not {type(text).__name__}")
            text = "".join([text])
        half = self._limit // 2
        if self._head_size < half:
            piece = text[: half - self._head_size]
            self._head.append(piece)
            self._head_size += len(piece)
            text = text[len(piece) :]
        if text:
            joined = self._tail + text
            self._dropped += max(len(joined) - half, 0)
            self._tail = joined[-half:] if half else ""

    write = add  # a sink that print() and stdout can write to

    def text(self) -> str:
        head = "".join(self._head)
        if not self._dropped:
            return head + self._tail
        return f"{head}\n[... {self._dropped} characters of output cut ...]\n{self._tail}"


def prelude_entries(payload: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What the prelude wrote into a cell's reply (`prelude._write_payload`), as one map; the entries of
    anything else in the kernel left out."""
    return {key: value for entry in payload if entry.get("source") == PAYLOAD_SOURCE for key, value in entry.items()}


def code_output(result: CellResult) -> CodeOutput:
    """Turn the kernel's reply into the contract's answer: a final answer, a value, or an error."""
    return blocking(code_outputting(result))


def code_outputting(result: CellResult) -> Steps[CodeOutput]:
    """`code_output`, as steps: awaited, a large value is decoded off the loop (`codec.steps`)."""
    entries = prelude_entries(result.payload)
    displays = [shown for shown in map(richest_display, result.displays) if shown is not None]
    if "cut" in entries:
        raise ExecutionError(
            f"the code's value or final answer is {entries['cut']:,} bytes, past what was left of the cell's "
            "output budget; return a smaller value (a summary, or the first rows)",
            logs=result.logs,
            error_type="OutputLimitExceeded",
        )
    if "interrupted" in entries:
        raise ExecutionError(
            "the code was interrupted as it sent its value or final answer; its state is kept",
            logs=result.logs,
            error_type="KeyboardInterrupt",
        )
    if "final" in entries:
        final = yield from decoding_sandbox_value(entries["final"], result.logs)
        return CodeOutput(final, result.logs, True, displays)
    if "final_error" in entries:
        raise ExecutionError(entries["final_error"], logs=result.logs, error_type="CodecError")
    if result.status != "ok":
        raise ExecutionError(
            f"{result.error_name}: {result.error_value}",
            logs=result.logs,
            traceback=result.traceback,
            error_type=result.error_name or None,
        )
    if "value" in entries:
        output = yield from decoding_sandbox_value(entries["value"], result.logs)
    elif result.result is not None:  # a value the codec cannot carry: its richest display instead
        shown = richest_display(result.result)
        output = shown.data if shown is not None and not shown.is_image else shown
    else:
        output = None
    return CodeOutput(output, result.logs, False, displays)


#: Seconds past a block's time limit that decoding what it sent may take before it is refused.
DECODING_GRACE = 0.5


def decoding_within(timeout: float) -> AbstractContextManager[None]:
    """A block's time limit, from now, for every decode of what it sends (its tool requests, its value)."""
    return codec.decoding_deadline(time.monotonic() + timeout + DECODING_GRACE)


def decoding(text: str, *, parts: Sequence[Any] | None = None) -> Steps[Any]:
    """`codec.loads(text, parts=parts)`, as steps. Awaited, a large payload is decoded in pieces on
    a thread of the offload pool, so the loop's own thread keeps its turns (`codec.pieces`); blocking,
    in place, at the C parser's full speed. A small one in place either way: it takes less than a piece."""
    if fits_one_piece(len(text)):
        return codec.loads(text, parts=parts)
    whole = functools.partial(codec.loads, text, parts=parts)
    in_pieces = functools.partial(codec.loads, text, parts=parts, in_pieces=True)
    return (yield Offloaded(whole, awaited_as=in_pieces))


def decoding_sandbox_value(text: str, logs: str) -> Steps[Any]:
    """A value that came out of the sandbox: decoded without pickle, whatever the sandbox claims."""
    try:
        return (yield from decoding(text))
    except codec.CodecError as error:
        raise ExecutionError(
            f"the sandbox sent a value codeward refuses: {error}", logs=logs, error_type="CodecError"
        ) from error


def require_setup_ok(result: CellResult, sandbox: str) -> None:
    """codeward's own cells (setup, variables, tools) must succeed: a failure there is the sandbox's, not the code's."""
    if result.status != "ok":
        raise SandboxError(
            f"codeward could not set up {sandbox}: {result.error_name}: {result.error_value}\n{result.traceback}",
            logs=result.logs,
            state_lost=False,
        )


class CellCollector:
    """Accumulates the messages of one execute request into a `CellResult`, within a budget.

    Everything the cell sends (printed text, displays, its result and codeward's payload)
    draws bytes from `max_output_bytes`; what comes past it is dropped and counted, so the
    host holds at most the budget (plus the message being read) whatever the sandbox sends.
    Displays keep only the MIME types codeward reads.
    """

    def __init__(self, max_log_chars: int, max_output_bytes: int, live: LiveOutput | None = None) -> None:
        self._logs = BoundedText(max_log_chars)
        self._live = live
        self._budget = OutputBudget(max_output_bytes)
        self._reply: dict[str, Any] | None = None
        self._idle = False
        self._dropped = False
        self._first, self._last, self._counted = sys.maxsize, -1, 0
        self.interrupted = False
        self._result: dict[str, Any] | None = None
        self._displays: list[dict[str, Any]] = []
        self._traceback = ""
        self.output_bytes = 0

    @property
    def done(self) -> bool:
        return self._reply is not None and self._idle

    @property
    def replied(self) -> bool:
        return self._reply is not None

    @property
    def stopped_unanswered(self) -> bool:
        """Idle after an interrupt, with no reply: the interrupt landed in the kernel's own handling
        of the cell (as it began or ended), which then sends none; the kernel keeps its state."""
        return self.interrupted and self._idle and self._reply is None

    @property
    def reply_status(self) -> str:
        return self._reply["status"] if self._reply else ""

    @property
    def interrupted_as_it_reported(self) -> bool:
        """The interrupt landed as the cell sent its value or answer (`prelude._report`): its reply
        says ok, but the cell did not finish."""
        return "interrupted" in prelude_entries(self._reply.get("payload", []) if self._reply else [])

    def give_up_waiting_for_idle(self) -> None:
        """End a replied cell whose idle status never came: the kernel's iopub queue overflowed
        (a flood the host read more slowly than it came) and dropped it, with other output."""
        self._idle = self._dropped = True

    def count(self, msg: dict[str, Any]) -> None:
        """Note the number the kernel's session gave a message it sent (`<session>_<pid>_<n>`).

        The kernel numbers every message it sends on one counter, and all those made while a
        cell runs reach this client (iopub in order, then the reply), unless its full iopub
        queue dropped some: a gap among the numbers read is output lost in the sandbox.
        """
        number = str(msg.get("header", {}).get("msg_id", "")).rpartition("_")[2]
        if number.isdigit() and len(number) < 19:
            value = int(number)
            self._first, self._last = min(self._first, value), max(self._last, value)
            self._counted += 1

    @property
    def _lost(self) -> bool:
        if self._dropped:
            return True
        if self.interrupted or not self._counted:
            return False  # an interrupt's reply goes to the control channel, which is not read here
        return self._last - self._first + 1 > self._counted

    def _kept_entry(self, entry: Any) -> dict[str, Any]:
        """A payload entry, or in place of one past the budget a mark `code_output` reports."""
        if not isinstance(entry, dict):
            return {}
        size = bundle_size(entry)
        self.output_bytes += size
        return entry if self._budget.spend(size) else {"source": entry.get("source"), "cut": size}

    def take(self, channel: str, msg: dict[str, Any]) -> None:
        kind, content = msg["msg_type"], msg["content"]
        if channel == "shell":
            self._reply = {**content, "payload": [self._kept_entry(entry) for entry in content.get("payload", [])]}
        elif kind == "status":
            self._idle = content.get("execution_state") == "idle"
        elif kind == "stream":
            text = content.get("text", "")
            self.output_bytes += len(text) if isinstance(text, str) else 0
            if isinstance(text, str) and self._budget.spend(len(text)):
                self._logs.add(text)
                if self._live is not None:
                    self._live("stderr" if content.get("name") == "stderr" else "stdout", text)
        elif kind in ("execute_result", "display_data"):
            bundle = kept_bundle(content.get("data", {}))
            self.output_bytes += bundle_size(bundle)
            if self._budget.spend(bundle_size(bundle)):
                if kind == "execute_result":
                    self._result = bundle
                else:
                    self._displays.append(bundle)
                    if self._live is not None and bundle and REPORT_MIME not in bundle:
                        self._live("display", display_text(bundle))
        elif kind == "error":
            lines = "\n".join(str(line) for line in content.get("traceback", []))
            self._traceback = strip_ansi(lines)[-_TRACEBACK_CHARS:]

    def answering(self, prompt: str, on_input: InputSteps) -> Steps[str]:
        """The reply to a request from the cell's code, which draws from the budget before it is read."""
        if self._budget.spend(len(prompt)):
            return (yield from on_input(prompt))
        return over_budget_reply(len(prompt))

    def logs(self) -> str:
        text = self._budget.noted(self._logs.text())
        return text + _DROPPED_NOTE if self._lost else text

    def traceback(self) -> str:
        return self._traceback

    def result(self) -> CellResult:
        reply = self._reply or {}
        return CellResult(
            status=reply.get("status", "error"),
            logs=self.logs(),
            result=self._result,
            displays=self._displays,
            payload=list(reply.get("payload", [])),
            error_name=reply.get("ename", ""),
            error_value=reply.get("evalue", ""),
            traceback=self._traceback,
            output_bytes=self.output_bytes,
        )
