"""The audit trail: one record per code block a batch job ran, with the tool calls it made.

`AuditingExecutor` wraps the job's sandbox: it sees every block the agent runs
(and the outcome, even when the block is cancelled mid-run). It announces each
block before running it, so that if the worker process dies mid-block the
parent writes the record instead (outcome ``worker_lost``). It wraps each
tool so that calls made from inside the block are recorded where they run, on
the host. A wrapped tool is an object, not a function, so with tools_mode="auto" (e2b's default)
it runs on the host and is recorded too; with tools_mode="inline" it is refused, since a tool the
sandbox ran inside itself would not be seen by the host.

A block run in a sandbox with an egress list records what it asked of the proxy (`egress_summary`):
how many requests were allowed, refused and failed, the hosts reached, and the refused and failed
requests themselves (the first `MAX_EGRESS_SHOWN`), so a reader sees what the code tried to reach.
Each record also holds the block's `events`: what the sandbox's walls refused while it ran.
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from codeward.executors.base import (
    FINAL_ANSWER_TOOL,
    BlockEvent,
    CodeOutput,
    ExecutionError,
    ExecutionTimeout,
    Executor,
    OutputCallback,
    SandboxError,
)
from codeward.json_values import preview
from codeward.tools import Tool
from codeward.wall_events import MAX_EVENTS, checked_events

if TYPE_CHECKING:
    from codeward.platform.memory import AgentMemory

__all__ = [
    "MAX_EGRESS_SHOWN",
    "AuditingExecutor",
    "BlockTimes",
    "RecordingTool",
    "code_digest",
    "egress_summary",
    "iso_time",
]

#: Refused and failed requests a block's audit record shows in full; the counts hold them all.
MAX_EGRESS_SHOWN = 20


def iso_time(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds")


def code_digest(code: str) -> str:
    """The block's sha256 over its UTF-8 text; a lone surrogate (a model may write one) is kept, not refused."""
    return hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest()


class RecordingTool(Tool):
    """A tool that behaves as the one it wraps and notes each call in `calls`."""

    def __init__(self, inner: Tool, calls: list[dict[str, Any]], lock: threading.Lock) -> None:
        self.inner = inner
        self.name = inner.name
        self.description = inner.description
        self.inputs = inner.inputs
        self.output_type = inner.output_type
        self._calls = calls
        self._lock = lock
        super().__init__()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        started = time.time()
        record: dict[str, Any] = {"tool": self.name, "args": preview(args, 300), "kwargs": preview(kwargs, 300)}
        try:
            result = super().__call__(*args, **kwargs)
        except BaseException as error:
            record["outcome"] = f"error: {type(error).__name__}: {preview(str(error), 300)}"
            raise
        else:
            record["outcome"] = "ok"
            record["result"] = preview(result, 300)
            return result
        finally:
            record["duration_seconds"] = round(time.time() - started, 6)
            with self._lock:
                self._calls.append(record)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.forward(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        # what a sandbox may ask of the tool beyond the Tool interface (e.g. `source()`)
        return getattr(self.__dict__["inner"], name)


class BlockTimes:
    """Where a job's time went, read off its block records as they are written (and passed on to `then`,
    the audit file, if any): time in the sandbox, time in host tools, and the rest of its steps, the model's.

    A step is the model's call, parsing its answer and the block; so a step's time outside its
    block is the model's. What lies outside every step (starting and closing the sandbox, saving
    the run) is left for the reader to take from the job's whole duration.
    """

    def __init__(self, then: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.blocks = 0.0
        self.tools = 0.0
        self._then = then

    def record(self, record: dict[str, Any]) -> None:
        self.blocks += record["duration_seconds"]
        self.tools += sum(call["duration_seconds"] for call in record["tool_calls"])
        if self._then is not None:
            self._then(record)

    def split(self, memory: AgentMemory) -> dict[str, float]:
        """Seconds in the model, the sandbox and tools, given the job's `AgentMemory` (whose steps are timed)."""
        steps = sum(timing.duration or 0.0 for step in memory.steps if (timing := getattr(step, "timing", None)))
        return {
            "model_seconds": round(max(0.0, steps - self.blocks), 4),
            "sandbox_seconds": round(max(0.0, self.blocks - self.tools), 4),
            "tools_seconds": round(self.tools, 4),
        }


def _outcome(error: BaseException) -> tuple[str, str]:
    if isinstance(error, ExecutionTimeout):
        return "timeout", error.message
    if isinstance(error, SandboxError):
        return "sandbox_error", error.message
    if isinstance(error, ExecutionError):
        return "error", f"{error.error_type or 'Error'}: {error.message}"
    if isinstance(error, Exception):
        return "error", f"{type(error).__name__}: {error}"
    return "cancelled", type(error).__name__


def _as_dicts(events: Any) -> list[Any]:
    return [
        event.to_dict() if isinstance(event, BlockEvent) else event for event in list(events or [])[: MAX_EVENTS + 1]
    ]


def egress_summary(requests: list[dict[str, Any]]) -> dict[str, Any]:
    """What a block asked of its egress proxy: counts by verdict, the hosts reached, and what was not let through."""
    counts = {"allowed": 0, "refused": 0, "failed": 0}
    reached: set[str] = set()
    stopped: list[dict[str, Any]] = []
    for request in requests:
        verdict = str(request.get("verdict"))
        counts[verdict] = counts.get(verdict, 0) + 1
        where = f"{request.get('host')}:{request.get('port')}"
        if verdict == "allowed":
            reached.add(where)
        elif len(stopped) < MAX_EGRESS_SHOWN:
            shown = ("method", "host", "port", "path", "verdict", "reason")
            stopped.append({key: request[key] for key in shown if request.get(key) not in (None, "")})
    return {**counts, "hosts": sorted(reached), "not_allowed": stopped}


class AuditingExecutor(Executor):
    """Runs code in `inner` and writes one audit record per block through `write`, marked with the job's `attempt`."""

    def __init__(
        self,
        inner: Executor,
        job_id: str,
        step: Callable[[], int],
        write: Callable[[dict[str, Any]], None],
        announce: Callable[[dict[str, Any] | None], None] | None = None,
        attempt: int = 1,
    ) -> None:
        self.inner = inner
        self.attempt = attempt
        self.name = inner.name or type(inner).__name__  # type: ignore[misc]
        self.sandbox_id = getattr(inner, "sandbox_id", None) or f"{self.name}-{uuid.uuid4().hex[:12]}"
        self.job_id = job_id
        self._step = step
        self._write = write
        self._announce = announce or (lambda record: None)
        self._calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def send_variables(self, variables: dict[str, Any]) -> None:
        self.inner.send_variables(variables)

    def send_tools(self, tools: dict[str, Tool]) -> None:
        wrapped = {
            name: tool if name == FINAL_ANSWER_TOOL else RecordingTool(tool, self._calls, self._lock)
            for name, tool in tools.items()
        }
        self.inner.send_tools(wrapped)

    def run(self, code: str, on_output: OutputCallback | None = None) -> CodeOutput:
        started = time.time()
        with self._lock:
            self._calls.clear()
        record: dict[str, Any] = {
            "job_id": self.job_id,
            "attempt": self.attempt,
            "step": self._step(),
            "code": code,
            "sha256": code_digest(code),
            "executor": self.name,
            "sandbox_id": self.sandbox_id,
            "start": iso_time(started),
        }
        self._announce(record)  # so a block whose process dies mid-run is still recorded, by the parent
        events: Any = []
        try:
            output = self.inner.run(code, on_output)
        except BaseException as error:
            record["outcome"], record["error"] = _outcome(error)
            events = getattr(error, "events", [])
            raise
        else:
            record["outcome"] = "final_answer" if output.is_final_answer else "ok"
            events = output.events
            return output
        finally:
            record["duration_seconds"] = round(time.time() - started, 6)
            with self._lock:
                record["tool_calls"] = list(self._calls)
            # What the sandbox's walls refused while the block ran (bounded: `wall_events`).
            record["events"] = [event.to_dict() for event in checked_events(_as_dicts(events))]
            # What the block asked of its egress proxy, as the sandbox counted it (docker with a list only).
            requests = getattr(self.inner, "last_block_egress", None)
            if requests is not None:
                record["egress"] = egress_summary(requests)
            self._write(record)
            self._announce(None)

    def interrupt(self) -> None:
        self.inner.interrupt()

    def install_packages(self, packages: list[str]) -> list[str]:
        return self.inner.install_packages(packages)

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        # executor-specific attributes the agent reads (e.g. `authorized_imports`)
        return getattr(self.__dict__["inner"], name)
