"""Where codeward's traces are cut: hooks that do nothing until a tracer is installed.

The agent loop, the model calls, the code blocks and every tool call on the host
open a span here unconditionally. Until `codeward.telemetry.instrument()`
installs a tracer, `span()` hands back one shared object whose methods do
nothing, so a base install imports no OpenTelemetry and pays a function call per
hook. The attribute names are those of OpenTelemetry's GenAI semantic
conventions where one exists, and ``codeward.*`` otherwise. It sits below the platform
and the sandboxes, since the tool contract (`codeward.tools`) opens a span for every call.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Protocol

__all__ = [
    "AGENT_NAME",
    "CODE",
    "CODE_OUTCOME",
    "CODE_OUTPUT",
    "FINISH_REASONS",
    "INPUT_TOKENS",
    "JOB_ID",
    "OPERATION",
    "OUTPUT_TOKENS",
    "REQUEST_MODEL",
    "SANDBOX_ID",
    "SANDBOX_MOUNTS",
    "SANDBOX_NAME",
    "STEP_NUMBER",
    "TOOL_ARGUMENTS",
    "TOOL_NAME",
    "TOOL_RESULT",
    "USAGE_FIGURES",
    "WALL_COUNT",
    "WALL_DETAIL",
    "WALL_NAME",
    "WALL_REFUSED",
    "Span",
    "Tracer",
    "flush",
    "install",
    "span",
]

Attributes = Mapping[str, str | bool | int | float | list[str]]

OPERATION = "gen_ai.operation.name"
AGENT_NAME = "gen_ai.agent.name"
REQUEST_MODEL = "gen_ai.request.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
FINISH_REASONS = "gen_ai.response.finish_reasons"
TOOL_NAME = "gen_ai.tool.name"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
STEP_NUMBER = "codeward.step.number"
SANDBOX_NAME = "codeward.sandbox.name"
SANDBOX_ID = "codeward.sandbox.id"
#: The sandbox's host mounts, as ``TARGET:MODE`` (never the host path).
SANDBOX_MOUNTS = "codeward.sandbox.mounts"
CODE = "codeward.code"
CODE_OUTCOME = "codeward.code.outcome"
#: The figures of a block's usage an ``execute_code`` span carries, each as ``codeward.code.<figure>``.
USAGE_FIGURES = ("wall_seconds", "cpu_seconds", "peak_memory_bytes", "output_bytes", "tool_calls", "egress_bytes")
CODE_OUTPUT = "codeward.code.output"
JOB_ID = "codeward.job.id"
#: The event on a block's span for each thing a sandbox's wall refused, and its attributes.
WALL_REFUSED = "codeward.wall.refused"
WALL_NAME = "codeward.wall.name"
WALL_DETAIL = "codeward.wall.detail"
WALL_COUNT = "codeward.wall.count"


class Span(Protocol):
    """What a hook may tell the span it opened."""

    def set(self, attributes: Attributes) -> None:
        """Attributes known only once the work is done (tokens, outcome)."""

    def event(self, name: str, attributes: Attributes) -> None:
        """Something that happened during the span, such as the code a block runs."""

    def value(self, key: str, value: Any) -> None:
        """A value of the user's (a tool's arguments, an answer): kept only when the tracer captures values."""


class Tracer(Protocol):
    """What `codeward.telemetry` installs: it opens real spans, as the current span's children."""

    def span(self, name: str, attributes: Attributes) -> AbstractContextManager[Span]: ...

    def flush(self) -> None: ...


class _NoSpan:
    """The span and its context manager while no tracer is installed: one shared object that does nothing."""

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        return None

    def set(self, attributes: Attributes) -> None:
        return None

    def event(self, name: str, attributes: Attributes) -> None:
        return None

    def value(self, key: str, value: Any) -> None:
        return None


_NO_SPAN = _NoSpan()
_tracer: Tracer | None = None


def span(name: str, attributes: Attributes | None = None) -> AbstractContextManager[Span]:
    """A span around the ``with`` block, child of the current one; nothing at all without a tracer."""
    if _tracer is None:
        return _NO_SPAN
    return _tracer.span(name, attributes or {})


def install(tracer: Tracer | None) -> None:
    """Make the hooks open real spans (`None` makes them do nothing again)."""
    global _tracer
    _tracer = tracer


def flush() -> None:
    """Send the spans ended so far, before a process that may be killed goes on to other work."""
    if _tracer is not None:
        _tracer.flush()
