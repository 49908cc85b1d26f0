"""The spans of a code agent's run: their tree, and the GenAI attributes on each."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from codeward import CodeAgent, ScriptedModel, telemetry, tool, tracing
from tests.cli.sample_tools import double
from tests.telemetry.conftest import Span, children, from_sdk, only


@tool
def refuse(x: int) -> int:
    """Always fails.

    Args:
        x: Anything.
    """
    raise LookupError(f"nothing for {x}")


def code(body: str) -> str:
    return f"Thought: I will do it.\n<code>\n{body}\n</code>"


def run_agent(sandbox: str, *bodies: str, **run_options: object) -> object:
    model = ScriptedModel([code(body) for body in bodies])
    with CodeAgent(tools=[double, refuse], model=model, executor=sandbox) as agent:
        return agent.run("Double 21.", **run_options)  # type: ignore[call-overload]


def recorded(exporter: InMemorySpanExporter) -> list[Span]:
    return [from_sdk(span) for span in exporter.get_finished_spans()]


def test_a_run_is_a_tree_of_agent_steps_chats_code_blocks_and_tool_calls(memory_exporter, sandbox_name):
    answer = run_agent(sandbox_name, "n = double(21)\nprint(n)", "final_answer(n)")
    assert answer == 42
    spans = recorded(memory_exporter)

    agent = only(spans, "invoke_agent CodeAgent")
    assert agent.parent_id is None and not agent.error
    assert agent.attributes[tracing.OPERATION] == "invoke_agent"
    assert agent.attributes[tracing.AGENT_NAME] == "CodeAgent"
    assert agent.attributes[tracing.REQUEST_MODEL] == "scripted"
    assert agent.attributes[tracing.SANDBOX_NAME] == sandbox_name
    assert agent.attributes[tracing.INPUT_TOKENS] > 0 and agent.attributes[tracing.OUTPUT_TOKENS] > 0
    assert {span.trace_id for span in spans} == {agent.trace_id}

    steps = children(spans, agent)
    assert [step.name for step in steps] == ["step", "step"]
    assert [step.attributes[tracing.STEP_NUMBER] for step in steps] == [1, 2]
    for step, (body, outcome) in zip(
        steps, [("n = double(21)\nprint(n)", "ok"), ("final_answer(n)", "final_answer")], strict=True
    ):
        chat, block = children(spans, step)
        assert chat.name == "chat scripted"
        assert chat.attributes[tracing.OPERATION] == "chat"
        assert chat.attributes[tracing.REQUEST_MODEL] == "scripted"
        assert chat.attributes[tracing.INPUT_TOKENS] > 0 and chat.attributes[tracing.OUTPUT_TOKENS] > 0
        assert tuple(chat.attributes[tracing.FINISH_REASONS]) == ("stop",)
        assert block.name == "execute_code"
        assert block.attributes[tracing.SANDBOX_NAME] == sandbox_name
        assert block.attributes[tracing.CODE_OUTCOME] == outcome
        assert block.events == [(tracing.CODE, {tracing.CODE: body})]

    [call] = children(spans, children(spans, steps[0])[1])
    assert call.name == "execute_tool double"
    assert call.attributes == {tracing.OPERATION: "execute_tool", tracing.TOOL_NAME: "double"}
    assert children(spans, children(spans, steps[1])[1]) == []


def test_no_value_of_the_users_is_recorded_unless_asked(memory_exporter):
    # A result long enough that no sandbox id, pid or time in a span holds it by chance ("42" once did).
    run_agent("local", "n = double(31415926)", "final_answer(n)", additional_args={"secret": "hunter2"})
    spans = recorded(memory_exporter)
    assert not any(
        "hunter2" in str(value) or "62831852" in str(value)
        for span in spans
        for value in [*span.attributes.values(), *span.events]
    )
    assert not any(key in span.attributes for span in spans for key in (tracing.TOOL_ARGUMENTS, tracing.TOOL_RESULT))


def test_with_capture_values_the_task_arguments_results_and_answer_are_recorded(instrumented):
    exporter = instrumented(capture_values=True)
    run_agent("local", "n = double(21)", "final_answer(n)")
    spans = recorded(exporter)
    call = only(spans, "execute_tool double")
    assert call.attributes[tracing.TOOL_ARGUMENTS] == "{'x': 21}"
    assert call.attributes[tracing.TOOL_RESULT] == "42"
    agent = only(spans, "invoke_agent CodeAgent")
    assert agent.attributes["codeward.final_answer"] == "42"
    assert agent.attributes["codeward.task"] == "Double 21."


def test_a_failing_tool_and_a_failing_block_are_marked_as_errors(memory_exporter):
    run_agent("local", "refuse(1)", "final_answer(0)")
    spans = recorded(memory_exporter)
    call = only(spans, "execute_tool refuse")
    assert call.error and call.attributes["error.type"] == "LookupError"
    first_block = next(span for span in spans if span.name == "execute_code")
    assert first_block.error and first_block.attributes[tracing.CODE_OUTCOME] == "error"
    first_step = next(span for span in spans if span.name == "step")
    assert first_step.attributes["error.type"] == "AgentExecutionError"


def test_each_code_block_span_carries_what_the_block_cost(memory_exporter):
    run_agent("local", "n = double(21)\nprint(n)", "1 / 0", "final_answer(n)")
    blocks = [span for span in recorded(memory_exporter) if span.name == "execute_code"]
    assert len(blocks) == 3
    first, failed, _ = blocks
    assert first.attributes["codeward.code.tool_calls"] == 1 and first.attributes["codeward.code.output_bytes"] > 0
    assert (
        first.attributes["codeward.code.cpu_seconds"] >= 0 and first.attributes["codeward.code.peak_memory_bytes"] > 0
    )
    assert failed.attributes[tracing.CODE_OUTCOME] == "error" and failed.attributes["codeward.code.wall_seconds"] > 0
    assert "codeward.code.egress_bytes" not in first.attributes  # not measured on local: left out, never 0


def test_a_long_code_block_is_cut_at_the_documented_length_with_its_whole_length_beside_it(memory_exporter):
    body = "x = 1  # " + "a" * (2 * telemetry.CODE_LIMIT)
    run_agent("local", body, "final_answer(x)")
    [(_, attributes)] = next(span for span in recorded(memory_exporter) if span.name == "execute_code").events
    assert attributes[tracing.CODE] == body[: telemetry.CODE_LIMIT]
    assert attributes[f"{tracing.CODE}.length"] == len(body)


@pytest.mark.parametrize("stream", [False, True])
def test_streaming_runs_give_the_same_tree(memory_exporter, stream):
    model = ScriptedModel([code("final_answer(double(2))")])
    with CodeAgent(tools=[double], model=model, stream_outputs=stream) as agent:
        events = list(agent.run("Double 2.", stream=True))
    assert events[-1].output == 4
    spans = recorded(memory_exporter)
    [step] = children(spans, only(spans, "invoke_agent CodeAgent"))
    assert [span.name for span in children(spans, step)] == ["chat scripted", "execute_code"]
    assert tuple(only(spans, "chat scripted").attributes[tracing.FINISH_REASONS]) == ("stop",)


def _running(sandbox: str, sandbox_id: str) -> bool:
    """Whether the id names a live sandbox: the local worker process (by its pid), or a running container."""
    if sandbox == "local":
        return Path(f"/proc/{sandbox_id.split('-')[1]}").is_dir()
    import docker

    client = docker.from_env()
    try:
        return bool(client.containers.get(sandbox_id).status == "running")
    finally:
        client.close()


def test_each_code_block_names_the_sandbox_it_ran_in(memory_exporter, sandbox_name):
    model = ScriptedModel([code("n = 1"), code("final_answer(n)")])
    with CodeAgent(tools=[], model=model, executor=sandbox_name) as agent:
        assert agent.run("Go.") == 1
        sandbox_id = agent.executor.sandbox_id
        assert sandbox_id and _running(sandbox_name, sandbox_id)
    assert agent.executor.sandbox_id is None  # closed: no sandbox left to name
    blocks = [span for span in recorded(memory_exporter) if span.name == "execute_code"]
    assert [block.attributes[tracing.SANDBOX_ID] for block in blocks] == [sandbox_id, sandbox_id]
