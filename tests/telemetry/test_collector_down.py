"""Traces with no collector to take them: the exit is not held past a second, the failure is one line,
and an endpoint written without its scheme is a usage error that says what to write."""

from __future__ import annotations

import logging
import subprocess
import time
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from codeward import CodeAgent, ScriptedModel, telemetry, tracing
from codeward.usage import UsageError
from tests.cli.conftest import command, command_env, write_script
from tests.platform.openai_server import closed_port
from tests.telemetry.test_spans import code
from tests.timing import busy_allowance


def unreachable(endpoint: str) -> str:
    """The one line that tells a collector that refuses connections."""
    return (
        f"codeward's traces are not being sent: no OTLP collector answers at {endpoint}/v1/traces "
        "(connection refused); start one there, or set OTEL_EXPORTER_OTLP_ENDPOINT to one that runs "
        "(unset CODEWARD_OTEL to send no traces)"
    )


def tail_after_the_answer(tmp_path: Path, **env: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    """`codeward run` of a one-step script: the seconds from its last line to its exit, and what it printed."""
    model = write_script(tmp_path / "model.yaml", "final_answer(7)")
    process = subprocess.Popen(
        command("run", "Seven.", "--model", model),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env=command_env(PYTHONUNBUFFERED="1", **env),
    )  # fmt: skip
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if line.startswith("success"):
            break
    answered = time.monotonic()
    rest, errors = process.communicate(timeout=120)
    tail = time.monotonic() - answered
    return tail, subprocess.CompletedProcess(process.args, process.returncode, "".join(lines) + rest, errors)


def test_no_collector_holds_the_exit_about_a_second_and_is_told_in_one_line(tmp_path: Path):
    control, plain = tail_after_the_answer(tmp_path)  # no traces: the exit as it is without an exporter
    assert plain.returncode == 0, plain.stdout + plain.stderr
    endpoint = f"http://127.0.0.1:{closed_port()}"
    tail, done = tail_after_the_answer(tmp_path, CODEWARD_OTEL="1", OTEL_EXPORTER_OTLP_ENDPOINT=endpoint)
    assert done.returncode == 0 and "Final answer: 7" in done.stdout, done.stdout + done.stderr
    told = [line for line in done.stderr.splitlines() if line.strip()]
    assert told == [unreachable(endpoint)]
    # the exporter's own retries would hold it 7 s (waits of 1, 2 and 4 s)
    assert tail <= busy_allowance(telemetry.EXIT_WAIT, control + 0.25), (tail, control)


@pytest.mark.parametrize(
    "variable, path", [("OTEL_EXPORTER_OTLP_ENDPOINT", ""), ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "/v1/traces")]
)
def test_an_endpoint_without_its_scheme_is_a_usage_error_that_says_what_to_write(codeward, tmp_path, variable, path):
    model = write_script(tmp_path / "model.yaml", "final_answer(7)")
    done = codeward("run", "Seven.", "--model", model, CODEWARD_OTEL="1", **{variable: f"localhost:4318{path}"})
    shown = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, shown
    assert shown.startswith(f"error: {variable}='localhost:4318{path}' is not a URL the OTLP/HTTP exporter can send to")
    assert f"write {variable}=http://localhost:4318{path}" in shown
    assert "connection adapters" not in shown and "New run" not in shown


def test_an_endpoint_without_its_scheme_is_refused_by_instrument_itself(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "collector.internal:4318")
    with pytest.raises(UsageError, match=r"write OTEL_EXPORTER_OTLP_ENDPOINT=http://collector\.internal:4318 "):
        telemetry.instrument()


@pytest.mark.parametrize("exporter", ["codeward's", "given"])
def test_failed_exports_are_told_once_not_per_retry_nor_per_batch(monkeypatch, caplog, exporter):
    caplog.set_level(logging.DEBUG)
    endpoint = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "0.5")  # a try per export: this test's waits are short
    given = OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces") if exporter == "given" else None
    provider = telemetry.instrument(exporter=given)
    try:
        for _ in range(2):
            with CodeAgent(tools=[], model=ScriptedModel([code("final_answer(1)")])) as agent:
                assert agent.run("One.") == 1
            provider.force_flush()  # type: ignore[attr-defined]  # an export that fails, each time
    finally:
        telemetry.uninstrument()
        provider.shutdown()  # type: ignore[attr-defined]
    said = [(record.name, record.getMessage()) for record in caplog.records if record.levelno >= logging.WARNING]
    assert said == [
        (
            "codeward.telemetry",
            unreachable(endpoint),
        )
    ]


def test_a_flush_between_batch_jobs_waits_about_a_second_for_a_collector_that_is_down(monkeypatch):
    """A batch worker flushes after each job; the exporter's retries (1, 2 and 4 s) must not hold every job."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    telemetry.instrument()
    try:
        with CodeAgent(tools=[], model=ScriptedModel([code("final_answer(1)")])) as agent:
            assert agent.run("One.") == 1
        started = time.monotonic()
        tracing.flush()
        took = time.monotonic() - started
    finally:
        telemetry.uninstrument()  # the provider is left to its exit hook, which stops its retries within a second
    assert took <= busy_allowance(telemetry.EXIT_WAIT, 0.1), took


def test_a_batch_worker_tells_the_batch_once_that_the_collector_is_down(codeward, tmp_path: Path):
    model = write_script(tmp_path / "model.yaml", "final_answer(7)")
    (tmp_path / "jobs.yaml").write_text("- {id: one, task: Seven.}\n- {id: two, task: Seven.}\n")
    endpoint = f"http://127.0.0.1:{closed_port()}"
    done = codeward(
        "batch", "jobs.yaml", "--model", f"{model}", "--concurrency", "1",
        CODEWARD_OTEL="1", OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
    )  # fmt: skip
    shown = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 0, shown
    assert shown.count("codeward's traces are not being sent") == 1, shown
    assert f"job one: {unreachable(endpoint)}" in shown
