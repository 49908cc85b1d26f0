"""`instrument()` sends codeward's spans through the application's global tracer provider when it has
set one, as OpenTelemetry's instrumentation libraries do, and makes a provider of its own only when none is.

Each case is an application of its own, in a fresh process: a global provider can be set once per process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.cli.conftest import command_env
from tests.platform.openai_server import closed_port

APPLICATION = """
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from codeward import CodeAgent, ScriptedModel, telemetry

exporter = InMemorySpanExporter()
if sys.argv[1] == "global":
    application = TracerProvider()
    application.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(application)
provider = telemetry.instrument()
model = ScriptedModel(["Thought: add.\\n<code>\\nfinal_answer(2 + 2)\\n</code>"])
with CodeAgent(tools=[], model=model, executor="local") as agent:
    answer = agent.run("Add.")
print(json.dumps({
    "answer": answer,
    "spans": sorted(span.name for span in exporter.get_finished_spans()),
    "same_provider": provider is trace.get_tracer_provider(),
    "global_set": type(trace.get_tracer_provider()).__name__,
}))
"""


def run_application(tmp_path: Path, case: str) -> dict[str, object]:
    (tmp_path / "application.py").write_text(APPLICATION)
    done = subprocess.run(
        [sys.executable, "application.py", case], capture_output=True, text=True, cwd=tmp_path, timeout=120,
        # were codeward to export on its own, its spans would go nowhere: no collector listens there
        env=command_env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{closed_port()}"),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_an_applications_global_provider_gets_codewards_spans(tmp_path: Path):
    seen = run_application(tmp_path, "global")
    assert seen["answer"] == 4
    assert seen["same_provider"] is True
    assert seen["spans"] == sorted(["invoke_agent CodeAgent", "step", "chat scripted", "execute_code"])


def test_without_a_global_provider_codeward_makes_its_own_and_sets_none(tmp_path: Path):
    seen = run_application(tmp_path, "none")
    assert seen["answer"] == 4
    assert seen["same_provider"] is False and seen["global_set"] == "ProxyTracerProvider"
    assert seen["spans"] == []
