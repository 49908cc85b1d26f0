"""Public API (``codeward.telemetry.instrument()``), and the only module that imports OpenTelemetry.

OpenTelemetry traces of agent runs: ``codeward.telemetry.instrument()``, or ``CODEWARD_OTEL=1``.

A run gives one ``invoke_agent`` span, one ``step`` span per step, a ``chat``
span per model call, an ``execute_code`` span per code block and an
``execute_tool`` span per tool call on the host, named as OpenTelemetry's GenAI
semantic conventions name them. The standard ``OTEL_EXPORTER_OTLP_*``
variables say where the OTLP/HTTP exporter sends them.

Values of the user's (the task, tool arguments and results, answers, and the
messages of exceptions, which carry values: ``int(token)``) stay out of the
spans unless `instrument(capture_values=True)`; a code block's text is always
recorded, cut at `CODE_LIMIT` characters. Every text a span carries has the
secrets codeward knows of (`codeward.redaction`) replaced. This is the only
module that imports OpenTelemetry, and only `instrument()`'s callers import it.
"""

from __future__ import annotations

import traceback as tracebacks
from types import TracebackType
from typing import Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
    from opentelemetry.trace import Status, StatusCode
except ImportError as missing:  # pragma: no cover - the message is the point
    raise ImportError(f"codeward's traces need OpenTelemetry: pip install 'codeward[otel]' ({missing})") from missing

from codeward import tracing
from codeward.redaction import redacted

__all__ = ["CODE_LIMIT", "VALUE_LIMIT", "instrument", "uninstrument"]

CODE_LIMIT = 8192
"""The characters of a code block kept in its span's event; the event says when the rest was cut."""

VALUE_LIMIT = 1024
"""The characters of a captured value's repr kept in a span."""


def instrument(
    *,
    capture_values: bool = False,
    exporter: SpanExporter | None = None,
    tracer_provider: trace.TracerProvider | None = None,
) -> trace.TracerProvider:
    """Send codeward's spans through OpenTelemetry from now on, and return the provider that sends them.

    By default a new provider exports over OTLP/HTTP to where ``OTEL_EXPORTER_OTLP_*`` say;
    `exporter` replaces that exporter, and `tracer_provider` (your application's, say
    ``opentelemetry.trace.get_tracer_provider()``) replaces the whole provider.
    """
    provider = tracer_provider or _provider(exporter or _otlp_exporter())
    tracing.install(_Tracer(provider, capture_values))
    return provider


def uninstrument() -> None:
    """Make codeward's hooks do nothing again (the provider is the caller's to shut down)."""
    tracing.install(None)


def _otlp_exporter() -> SpanExporter:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def _provider(exporter: SpanExporter) -> TracerProvider:
    """A provider of its own, so an application's global one is neither replaced nor warned about."""
    provider = TracerProvider(resource=Resource.create({"service.name": "codeward"}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


class _Tracer:
    """codeward's hooks, answered with OpenTelemetry spans."""

    def __init__(self, provider: trace.TracerProvider, capture_values: bool) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("codeward")
        self.capture_values = capture_values

    def span(self, name: str, attributes: tracing.Attributes) -> _Span:
        return _Span(self.tracer.start_span(name, attributes=_clean(attributes)), self.capture_values)

    def flush(self) -> None:
        force_flush = getattr(self.provider, "force_flush", None)
        if force_flush is not None:
            force_flush()


class _Span:
    """One span, current while its ``with`` block runs; a failure that leaves the block is recorded on it."""

    def __init__(self, span: trace.Span, capture_values: bool) -> None:
        self.span = span
        self.capture_values = capture_values
        self._token: object = None

    def __enter__(self) -> _Span:
        self._token = otel_context.attach(trace.set_span_in_context(self.span))
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        try:
            if error is not None:
                self._record(error)
        finally:
            self.span.end()
            otel_context.detach(self._token)  # type: ignore[arg-type]

    def _record(self, error: BaseException) -> None:
        """The failure as OpenTelemetry's exception event; its message only where values are captured."""
        kind = type(error).__name__
        said = f"{kind}: {redacted(str(error))}"[:VALUE_LIMIT] if self.capture_values else kind
        where = redacted("".join(tracebacks.format_tb(error.__traceback__)))
        self.span.set_attribute("error.type", kind)
        self.span.add_event(
            "exception",
            {"exception.type": kind, "exception.message": said, "exception.stacktrace": f"{where}{said}"},
        )
        self.span.set_status(Status(StatusCode.ERROR, said))

    def set(self, attributes: tracing.Attributes) -> None:
        self.span.set_attributes(_clean(attributes))

    def event(self, name: str, attributes: tracing.Attributes) -> None:
        self.span.add_event(name, _cut_texts(_clean(attributes)))

    def value(self, key: str, value: Any) -> None:
        if self.capture_values:
            self.span.set_attribute(key, _preview(value))


def _clean(attributes: tracing.Attributes) -> dict[str, Any]:
    """The attributes with every known secret replaced in their texts."""
    return {
        key: redacted(value)
        if isinstance(value, str)
        else [redacted(item) if isinstance(item, str) else item for item in value]
        if isinstance(value, (list, tuple))
        else value
        for key, value in attributes.items()
    }


def _cut_texts(attributes: tracing.Attributes) -> dict[str, Any]:
    """Texts past `CODE_LIMIT` cut there, each with its whole length beside it (``KEY.length``)."""
    cut: dict[str, Any] = {}
    for key, value in attributes.items():
        if isinstance(value, str) and len(value) > CODE_LIMIT:
            cut[key] = value[:CODE_LIMIT]
            cut[f"{key}.length"] = len(value)
        else:
            cut[key] = value
    return cut


def _preview(value: Any) -> str:
    try:
        shown = value if isinstance(value, str) else repr(value)
    except Exception as error:  # a value's own repr may fail; the span still ends
        shown = f"<{type(value).__name__}: repr failed with {type(error).__name__}>"
    shown = redacted(shown)  # before the cut, so that no secret is left half-shown
    if len(shown) > VALUE_LIMIT:
        shown = shown[:VALUE_LIMIT] + f"... ({len(shown) - VALUE_LIMIT} more characters)"
    return shown
