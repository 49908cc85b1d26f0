"""Spans as the tests read them: from an in-memory exporter, or decoded off the wire by an OTLP/HTTP receiver."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from codeward import telemetry
from tests.cli.conftest import codeward  # noqa: F401 (the real command, in a scratch folder)
from tests.integrations.conftest import sandbox_name  # noqa: F401 (local, and docker where an engine is)


@dataclass
class Span:
    """One span, the same whether it came from memory or from the wire."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str | None
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    error: bool = False


def from_sdk(span: ReadableSpan) -> Span:
    context = span.get_span_context()
    assert context is not None
    return Span(
        span.name,
        f"{context.trace_id:032x}",
        f"{context.span_id:016x}",
        f"{span.parent.span_id:016x}" if span.parent else None,
        dict(span.attributes or {}),
        [(event.name, dict(event.attributes or {})) for event in span.events],
        span.status.status_code.name == "ERROR",
    )


def _plain(value: Any) -> Any:
    """An OTLP AnyValue as the Python value it carries."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_plain(item) for item in value.array_value.values)
    return getattr(value, kind)


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _plain(pair.value) for pair in pairs}


def from_wire(body: bytes) -> list[Span]:
    """The spans of one OTLP/HTTP export request, decoded with the protocol's own protobuf classes."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    return [
        Span(
            span.name,
            span.trace_id.hex(),
            span.span_id.hex(),
            span.parent_span_id.hex() or None,
            _attributes(span.attributes),
            [(event.name, _attributes(event.attributes)) for event in span.events],
            span.status.code == 2,  # STATUS_CODE_ERROR
        )
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]


class Receiver:
    """An OTLP/HTTP trace receiver on loopback: ``POST /v1/traces`` with a protobuf body."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.received = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
                    self.send_response(404)
                    self.end_headers()
                    return
                with receiver.received:
                    receiver.spans += from_wire(body)
                    receiver.received.notify_all()
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, name: str, count: int = 1, timeout: float = 30) -> list[Span]:
        """Every span received, once `count` spans called `name` are among them."""
        with self.received:
            self.received.wait_for(lambda: sum(s.name == name for s in self.spans) >= count, timeout)
            return list(self.spans)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.close()


@pytest.fixture
def instrumented() -> Iterator[Callable[..., InMemorySpanExporter]]:
    """codeward instrumented with the given options, its spans kept in memory as each ends."""
    providers: list[TracerProvider] = []

    def instrument(**options: Any) -> InMemorySpanExporter:
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        telemetry.instrument(tracer_provider=provider, **options)
        providers.append(provider)
        return exporter

    yield instrument
    telemetry.uninstrument()
    for provider in providers:
        provider.shutdown()


@pytest.fixture
def memory_exporter(instrumented: Callable[..., InMemorySpanExporter]) -> InMemorySpanExporter:
    return instrumented()


def children(spans: list[Span], parent: Span) -> list[Span]:
    return [span for span in spans if span.parent_id == parent.span_id]


def only(spans: list[Span], name: str) -> Span:
    [span] = [span for span in spans if span.name == name]
    return span
