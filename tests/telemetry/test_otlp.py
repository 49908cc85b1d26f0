"""Spans on the wire: the real OTLP/HTTP exporter, to a receiver that decodes the protocol's protobuf."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from codeward import CodeAgent, ScriptedModel, telemetry, tracing
from tests.cli.conftest import SAMPLE_TOOLS, write_script
from tests.telemetry.conftest import Receiver, children, only
from tests.telemetry.test_spans import code, double


def test_the_otlp_http_exporter_delivers_the_run_in_the_protocols_wire_format(receiver: Receiver):
    provider = telemetry.instrument(exporter=OTLPSpanExporter(endpoint=f"{receiver.url}/v1/traces"))
    try:
        with CodeAgent(tools=[double], model=ScriptedModel([code("final_answer(double(4))")])) as agent:
            assert agent.run("Double 4.") == 8
    finally:
        telemetry.uninstrument()
        provider.shutdown()  # sends what the batch processor still holds
    spans = receiver.wait_for("invoke_agent CodeAgent")
    agent_span = only(spans, "invoke_agent CodeAgent")
    [step] = children(spans, agent_span)
    chat, block = children(spans, step)
    [call] = children(spans, block)
    assert chat.attributes[tracing.INPUT_TOKENS] > 0
    assert chat.attributes[tracing.FINISH_REASONS] == ("stop",)
    assert block.events == [(tracing.CODE, {tracing.CODE: "final_answer(double(4))"})]
    assert call.attributes == {tracing.OPERATION: "execute_tool", tracing.TOOL_NAME: "double"}


def test_codeward_run_with_codeward_otel_sends_its_spans_where_the_otlp_variables_say(codeward, receiver, tmp_path):
    model = write_script(tmp_path / "model.yaml", "final_answer(double(5))")
    done = codeward(
        "run", "Double 5.", "--model", model, "--tools", SAMPLE_TOOLS,
        CODEWARD_OTEL="1", OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    spans = receiver.wait_for("invoke_agent CodeAgent")
    assert [span.name for span in children(spans, only(spans, "execute_code"))] == ["execute_tool double"]


def test_each_batch_job_is_a_trace_of_its_own_named_by_the_job_id(codeward, receiver, tmp_path: Path):
    model = write_script(tmp_path / "model.yaml", "final_answer(double(3))")
    (tmp_path / "jobs.yaml").write_text(
        "- {id: a, task: Double.}\n- {id: b, task: Double.}\n- {id: c, task: Double.}\n"
    )
    done = codeward(
        "batch", "jobs.yaml", "--model", model, "--tools", SAMPLE_TOOLS, "--concurrency", "2",
        CODEWARD_OTEL="1", OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    results = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert sorted(result["status"] for result in results) == ["success"] * 3
    spans = receiver.wait_for("codeward.job", count=3)
    jobs = {span.attributes[tracing.JOB_ID]: span for span in spans if span.name == "codeward.job"}
    assert sorted(jobs) == ["a", "b", "c"]
    assert len({job.trace_id for job in jobs.values()}) == 3 and all(job.parent_id is None for job in jobs.values())
    by_trace: dict[str, list[str]] = defaultdict(list)
    for span in spans:
        by_trace[span.trace_id].append(span.name)
    for job in jobs.values():
        assert sorted(by_trace[job.trace_id]) == sorted(
            ["codeward.job", "invoke_agent CodeAgent", "step", "chat scripted", "execute_code", "execute_tool double"]
        )
        [agent_span] = children(spans, job)
        assert agent_span.name == "invoke_agent CodeAgent"
