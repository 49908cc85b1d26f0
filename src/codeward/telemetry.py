"""Public API (``codeward.telemetry.instrument()``), and the only module that imports OpenTelemetry.

OpenTelemetry traces of agent runs: ``codeward.telemetry.instrument()``, or ``CODEWARD_OTEL=1``.

A run gives one ``invoke_agent`` span, one ``step`` span per step, a ``chat``
span per model call, an ``execute_code`` span per code block and an
``execute_tool`` span per tool call on the host, named as OpenTelemetry's GenAI
semantic conventions name them. An application's global tracer provider gets
them when it has set one; otherwise codeward makes a provider of its own, whose
OTLP/HTTP exporter sends them where the standard ``OTEL_EXPORTER_OTLP_*``
variables say. That provider never holds the process's exit past `EXIT_WAIT`,
and a collector it cannot reach is told once, in one line, not once per retry.

Values of the user's (the task, tool arguments and results, answers, and the
messages of exceptions, which carry values: ``int(token)``) stay out of the
spans unless `instrument(capture_values=True)`; a code block's text is always
recorded, cut at `CODE_LIMIT` characters. Every text a span carries has the
secrets codeward knows of (`codeward.redaction`) replaced. This is the only
module that imports OpenTelemetry, and only `instrument()`'s callers import it.
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import threading
import traceback as tracebacks
from collections.abc import Sequence
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.trace import Status, StatusCode
except ImportError as missing:  # pragma: no cover - the message is the point
    raise ImportError(f"codeward's traces need OpenTelemetry: pip install 'codeward[otel]' ({missing})") from missing

from codeward import tracing
from codeward.redaction import redacted
from codeward.usage import UsageError

__all__ = ["CODE_LIMIT", "EXIT_WAIT", "VALUE_LIMIT", "instrument", "uninstrument"]

log = logging.getLogger(__name__)

CODE_LIMIT = 8192
"""The characters of a code block kept in its span's event; the event says when the rest was cut."""

VALUE_LIMIT = 1024
"""The characters of a captured value's repr kept in a span."""

EXIT_WAIT = 1.0
"""The seconds codeward's own provider may hold the process's exit to send the spans it still holds."""


def instrument(
    *,
    capture_values: bool = False,
    exporter: SpanExporter | None = None,
    tracer_provider: trace.TracerProvider | None = None,
) -> trace.TracerProvider:
    """Send codeward's spans through OpenTelemetry from now on, and return the provider that sends them.

    The provider is `tracer_provider` if given; else a new one of codeward's exporting through
    `exporter` if given; else the application's global provider
    (``opentelemetry.trace.set_tracer_provider``) if it has set one; else a new one of
    codeward's, exporting over OTLP/HTTP to where ``OTEL_EXPORTER_OTLP_*`` say. An OTLP
    endpoint without ``http://`` or ``https://`` raises `UsageError` saying what to write.
    """
    provider = tracer_provider or (_provider(exporter) if exporter else _global_provider())
    if provider is None:
        provider = _provider(_otlp_exporter())
    tracing.install(_Tracer(provider, capture_values))
    return provider


def uninstrument() -> None:
    """Make codeward's hooks do nothing again (the provider is the caller's to shut down)."""
    tracing.install(None)


def _global_provider() -> trace.TracerProvider | None:
    """The application's global provider, or None while it is OpenTelemetry's stand-in that records nothing."""
    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    return provider


_TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"


def _otlp_endpoint() -> str:
    """Where the OTLP/HTTP exporter sends spans, as its variables say; a URL it cannot send to is a usage error."""
    name, value = _TRACES_ENDPOINT, os.environ.get(_TRACES_ENDPOINT, "").strip()
    if not value:
        name, value = _ENDPOINT, os.environ.get(_ENDPOINT, "").strip() or "http://localhost:4318"
        endpoint = f"{value.removesuffix('/')}/v1/traces"
    else:
        endpoint = value
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        bare = value.split("://", 1)[-1]
        raise UsageError(
            f"{name}={value!r} is not a URL the OTLP/HTTP exporter can send to: write "
            f"{name}=http://{bare} (or https://{bare} for a collector that speaks TLS)"
        )
    return endpoint


def _otlp_exporter() -> SpanExporter:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    endpoint = _otlp_endpoint()
    return _Exporter(OTLPSpanExporter(endpoint=endpoint), endpoint)


def _provider(exporter: SpanExporter) -> TracerProvider:
    """A provider of its own, so an application's global one is neither replaced nor warned about.

    Its spans still held at exit get `EXIT_WAIT` seconds to leave, not the exporter's retries.
    """
    if not isinstance(exporter, _Exporter):  # one given: an OTLP exporter names its endpoint
        endpoint = getattr(exporter, "_endpoint", None)
        exporter = _Exporter(exporter, endpoint if isinstance(endpoint, str) else None)
    _HELD.install()
    provider = TracerProvider(resource=Resource.create({"service.name": "codeward"}), shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    atexit.register(_close_within, provider, exporter, EXIT_WAIT)
    return provider


def _close_within(provider: TracerProvider, exporter: _Exporter, seconds: float) -> None:
    """Shut `provider` down at exit, sending what it holds, for `seconds` at most."""
    closing = threading.Thread(target=provider.shutdown, name="codeward-traces-at-exit", daemon=True)
    closing.start()
    closing.join(seconds)
    if closing.is_alive():
        exporter.stop()  # ends a wait between retries at once
        closing.join(0.1)


class _Held(logging.Filter):
    """Holds back what the OTLP exporter logs while one of codeward's exports in this thread (a
    line per retry and per failed batch), and hands it to that exporter to sum up once, in one line."""

    LOGGERS = ("opentelemetry.exporter.otlp.proto.http.trace_exporter", "opentelemetry.exporter.otlp.common.http")

    def __init__(self) -> None:
        super().__init__()
        self.local = threading.local()
        self.installed = False

    def install(self) -> None:
        if not self.installed:
            self.installed = True
            for name in self.LOGGERS:
                logging.getLogger(name).addFilter(self)

    def filter(self, record: logging.LogRecord) -> bool:
        exporter: _Exporter | None = getattr(self.local, "exporter", None)
        if exporter is None:
            return True
        exporter.held(record)
        return False


_HELD = _Held()


class _Exporter(SpanExporter):
    """An exporter that says once, in one line, that its spans could not be sent, and can be stopped at exit."""

    def __init__(self, inner: SpanExporter, endpoint: str | None) -> None:
        self.inner = inner
        self.endpoint = endpoint
        self._told = False
        self._stopped = False
        self._held: list[logging.LogRecord] = []  # what the inner exporter logged during this export
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._stopped:
            return SpanExportResult.FAILURE
        self._held = []
        _HELD.local.exporter = self
        try:
            result = self.inner.export(spans)
        finally:
            _HELD.local.exporter = None
        if result is not SpanExportResult.SUCCESS:
            self._tell(_export_failure(self._held, self.endpoint))
        return result

    def held(self, record: logging.LogRecord) -> None:
        """A line the inner exporter logged: a collector that cannot be reached is told at its first
        retry, not after them (a batch worker's parent may have stopped listening by then)."""
        self._held.append(record)
        errors = [arg for arg in record.args or () if isinstance(arg, BaseException)]
        if any(_network_cause(error) is not None for error in errors):
            self._tell(_export_failure([record], self.endpoint))

    def _tell(self, why: str) -> None:
        with self._lock:
            if self._told:
                return
            self._told = True
        log.warning("codeward's traces are not being sent: %s", why)

    def stop(self) -> None:
        """Stop the inner exporter (once): a wait between its retries ends, and later batches are dropped."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self.inner.shutdown()

    def shutdown(self) -> None:
        self.stop()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def _export_failure(held: list[logging.LogRecord], endpoint: str | None) -> str:
    """Why an export failed, from what the exporter logged while it tried, in one clause."""
    where = endpoint or "the exporter's endpoint"
    errors = [arg for record in held for arg in record.args or () if isinstance(arg, BaseException)]
    # the exporter names no error when its deadline left no time to retry: a connection of our own says why
    for error in [*errors, _connect_error(endpoint)]:
        cause = _network_cause(error) if error is not None else None
        if cause is not None:
            return (
                f"no OTLP collector answers at {where} ({cause}); start one there, or set "
                f"{_ENDPOINT} to one that runs (unset CODEWARD_OTEL to send no traces)"
            )
    # "Failed to export %s batch code: %s, reason: %s": the status the collector answered, if it did
    statuses = [record.args[1] for record in held if "code: %s" in str(record.msg) and isinstance(record.args, tuple)]
    if statuses and statuses[0] is not None:
        return f"the collector at {where} refused them with HTTP status {statuses[0]}"
    said = f" ({type(errors[0]).__name__}: {errors[0]})" if errors else ""
    return f"exporting them to {where} failed{said}"


def _connect_error(endpoint: str | None) -> OSError | None:
    """The error a TCP connection to the endpoint's host and port meets within half a second, if any."""
    parts = urlsplit(endpoint or "")
    if not parts.hostname:
        return None
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        socket.create_connection((parts.hostname, port), timeout=0.5).close()
    except (OSError, ValueError) as error:
        return error if isinstance(error, OSError) else None
    return None


def _network_cause(error: BaseException) -> str | None:
    """Why a request got no answer (connection refused, timed out...), or None if the failure was another."""
    seen: set[int] = set()
    pending: list[Any] = [error]
    while pending:
        link = pending.pop(0)
        if not isinstance(link, BaseException) or id(link) in seen:
            continue
        seen.add(id(link))
        if isinstance(link, TimeoutError) or "Timeout" in type(link).__name__:
            return "timed out"
        if isinstance(link, socket.gaierror):
            return f"the host name does not resolve: {link.strerror}"
        if isinstance(link, OSError) and link.errno and link.errno > 0:
            said = os.strerror(link.errno)
            return said[:1].lower() + said[1:]
        pending += [link.__cause__, link.__context__, getattr(link, "reason", None), *link.args]
    return None


class _Tracer:
    """codeward's hooks, answered with OpenTelemetry spans."""

    def __init__(self, provider: trace.TracerProvider, capture_values: bool) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("codeward")
        self.capture_values = capture_values

    def span(self, name: str, attributes: tracing.Attributes) -> _Span:
        return _Span(self.tracer.start_span(name, attributes=_clean(attributes)), self.capture_values)

    def flush(self) -> None:
        """Send the spans ended so far, waiting `EXIT_WAIT` seconds at most: a collector that is
        down must not hold each batch job for the exporter's retries (the send goes on meanwhile)."""
        force_flush = getattr(self.provider, "force_flush", None)
        if force_flush is not None:
            flushing = threading.Thread(target=force_flush, name="codeward-traces-flush", daemon=True)
            flushing.start()
            flushing.join(EXIT_WAIT)


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
