"""What one E2B cell sends back, read as E2B's SDK hands it over, and the host tools it asks for.

E2B's code interpreter relays only a cell's outputs, and envd lets the host
write files into the sandbox; that is the whole channel for host tools
(a tool placed on the host: all with ``tools_mode="host"``, those that must run there with
``"auto"``). The prelude's tool stub (`ask_by_output`) prints its
request as one marked line and waits for a file; the host finds the request in
the printed text here, hands it to the `ToolBridge` (which checks the arguments
against the tool's inputs and runs the tool on the host, where its secrets and
MCP servers stay) and writes the answer through envd's file API to the file the
stub polls. The answer starts with its length, because envd writes a file in
place: the stub reads it only once it is whole.

While a tool runs on the host, the prelude starts each cell's output with a
fresh nonce; only requests carrying that nonce are taken, so text the code prints (a page it
fetched, a file it read) can never pass for a request: it stays text. A request
draws from the cell's output budget as printed text does.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from e2b_code_interpreter import OutputMessage, Result

from codeward.effects import Effect, Steps
from codeward.executors.base import BlockUsage
from codeward.executors.kernel.bridge import ToolBridge
from codeward.executors.kernel.cells import (
    BoundedText,
    CellResult,
    OutputBudget,
    bundle_size,
    kept_bundle,
    over_budget_reply,
    result_bytes,
)
from codeward.executors.kernel.prelude import ANSWER_FILE, PAYLOAD_SOURCE, REPORT_MIME, REQUEST
from codeward.executors.live import LiveOutput, display_text
from codeward.executors.metering import Measured, block_usage

__all__ = ["CellReading", "HostRequests", "OutputFlood", "OutputStopped", "e2b_usage"]

#: Result fields of the SDK and the MIME types they came from, to rebuild display bundles.
_FIELD_MIME = {
    "text": "text/plain",
    "html": "text/html",
    "markdown": "text/markdown",
    "svg": "image/svg+xml",
    "png": "image/png",
    "jpeg": "image/jpeg",
    "pdf": "application/pdf",
    "latex": "text/latex",
    "json": "application/json",
    "javascript": "application/javascript",
    "data": "e2b/data",
}
#: A line the prelude prints for the host: a cell's nonce (``cell``) or a tool request (``tool``).
_MARK = re.compile(re.escape(REQUEST) + r"([0-9a-f]{32}):(cell|tool):([0-9]{0,18}):([^\n]*)\n")


class OutputFlood(Exception):
    """Raised from the SDK's callbacks to stop reading a cell that sent more than twice its budget."""


class OutputStopped(Exception):
    """Raised from the SDK's callbacks once the caller's `on_output` failed: closing the stream
    makes E2B interrupt the cell, and `run` raises what the callback raised."""


class HostRequests:
    """The host's end of the prelude's `ask_by_output` for one cell: its requests, answered.

    `write(path, data)` is the effect that puts a file into the sandbox (``sandbox.files.write``);
    `folder` is where the prelude waits for answers. Past `deadline` (``time.monotonic()``)
    the code is being stopped, so its requests are not served, as on the kernel sandboxes.
    Answering is steps (`effects`): the tool's call and the write are waited on by the caller.
    """

    def __init__(self, bridge: ToolBridge, write: Callable[[str, bytes], Effect], folder: str, deadline: float) -> None:
        self._bridge = bridge
        self._write = write
        self._folder = folder
        self._deadline = deadline
        self._nonce: str | None = None
        self._first = True

    def take(self, text: str, budget: OutputBudget) -> Steps[str]:
        """`text` without the cell's nonce and requests, each request answered; anything else stays text."""
        first, self._first = self._first, False
        kept, start = [], 0
        for mark in _MARK.finditer(text):
            nonce, kind, number, body = mark.groups()
            if kind == "cell" and first and mark.start() == 0 and self._nonce is None:
                self._nonce = nonce  # only the cell's very first output: the code has not run yet
            elif kind == "tool" and nonce == self._nonce and number:
                if time.monotonic() < self._deadline:
                    yield from self._answer(number, body, len(mark.group()), budget)
            else:
                continue
            kept.append(text[start : mark.start()])
            start = mark.end()
        kept.append(text[start:])
        return "".join(kept)

    def _answer(self, number: str, body: str, size: int, budget: OutputBudget) -> Steps[None]:
        reply = (yield from self._bridge.answering_tool(body)) if budget.spend(size) else over_budget_reply(size)
        data = reply.encode()
        name = ANSWER_FILE.format(nonce=self._nonce, number=number)
        yield self._write(f"{self._folder}/{name}", b"%d\n%s" % (len(data), data))


class CellReading:
    """What one cell sends, kept within its output budget as E2B's SDK hands it over.

    The SDK keeps every result and printed line it reads until the call returns, so each result's
    data is taken out of the SDK's object as it arrives, and a cell that sends more than twice its
    budget is stopped by raising `OutputFlood`, which closes the stream (and E2B then interrupts it).
    With `requests`, the tool requests among printed text are answered as they arrive.
    """

    def __init__(
        self,
        max_log_chars: int,
        max_output_bytes: int,
        requests: HostRequests | None = None,
        live: LiveOutput | None = None,
    ) -> None:
        self._logs = BoundedText(max_log_chars)
        self._live = live
        self._budget = OutputBudget(max_output_bytes)
        self._limit = max_output_bytes
        self._requests = requests
        self.reports: list[dict[str, Any]] = []
        self.displays: list[dict[str, Any]] = []
        self.main: dict[str, Any] | None = None

    def printed(self, message: OutputMessage) -> Steps[None]:
        """Steps, since a tool request among the text is answered (`HostRequests`) before more is read."""
        text = message.line
        if self._requests is not None and not message.error:  # requests come on stdout only
            text = yield from self._requests.take(text, self._budget)
        if text and self._budget.spend(len(text)):
            self._logs.add(text)
            self._deliver("stderr" if message.error else "stdout", text)
        self._check_flood()

    def shown(self, result: Result) -> None:
        bundle = kept_bundle(_bundle(result))
        _empty(result)
        size = bundle_size(bundle)
        if not self._budget.spend(size):
            if REPORT_MIME in bundle:  # the value or final answer itself: `code_output` says so
                self.reports.append({"source": PAYLOAD_SOURCE, "cut": size})
            self._check_flood()
        elif REPORT_MIME in bundle:
            self.reports.append({"text": bundle[REPORT_MIME]})
        elif result.is_main_result:
            self.main = bundle
        else:
            self.displays.append(bundle)
            if bundle:
                self._deliver("display", display_text(bundle))

    def _deliver(self, stream: str, text: str) -> None:
        if self._live is not None:
            self._live(stream, text)
            if self._live.failure is not None:
                raise OutputStopped

    def logs(self) -> str:
        return self._budget.noted(self._logs.text())

    def _check_flood(self) -> None:
        if self._budget.dropped > self._limit:
            raise OutputFlood


def _empty(result: Result) -> None:
    """Drop a result's data from the SDK's own copy, which it keeps until the call returns."""
    for name in _FIELD_MIME:
        setattr(result, name, None)
    result.extra = {}


def _bundle(result: Result) -> dict[str, Any]:
    """An SDK result as the display bundle it was made from, so kernel sandboxes' tools read it."""
    bundle = {mime: getattr(result, field) for field, mime in _FIELD_MIME.items() if getattr(result, field, None)}
    bundle.update(result.extra or {})
    return bundle


#: Why E2B's blocks have no CPU time or memory peak: what its SDK reports of a sandbox is sampled.
_E2B_UNMEASURED = (
    "E2B reports no figure for one block (its sandbox metrics are samples of the whole sandbox, taken seconds apart)"
)


def e2b_usage(wall_seconds: float, cell: CellResult | None, tool_calls: int) -> BlockUsage:
    """A block's usage as the host sees it from outside E2B's sandbox: its time, output and host tool calls."""
    return block_usage(
        wall_seconds,
        Measured(unmeasured={"cpu_seconds": _E2B_UNMEASURED, "peak_memory_bytes": _E2B_UNMEASURED}),
        output_bytes=0 if cell is None else result_bytes(cell),
        tool_calls=tool_calls,
        egress_reason="E2B does not report a sandbox's network traffic",
    )
