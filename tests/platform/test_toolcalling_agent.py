"""The same lifecycle with JSON tool calls: tools run on the host."""

from __future__ import annotations

import json

from codeward import (
    ActionStep,
    AgentMaxStepsError,
    AgentToolCallError,
    AgentToolExecutionError,
    CodeAgent,
    FinalAnswerStep,
    PlanningStep,
    ScriptedModel,
    ToolCall,
    ToolCallingAgent,
    tool,
)
from codeward.platform.agents import ToolOutput


@tool
def get_temperature(city: str) -> float:
    """Returns today's temperature in a city, in degrees Celsius.

    Args:
        city: The city's name.
    """
    return {"Oslo": 4.5, "Rome": 17.0}[city]


@tool
def warmest(temperatures: dict) -> str:
    """Names the warmest city.

    Args:
        temperatures: A mapping of city to temperature.
    """
    return max(temperatures, key=temperatures.get)


def call(name: str, **arguments) -> str:
    return "Action:\n" + json.dumps({"name": name, "arguments": arguments})


def agent_for(responses, **kwargs):
    model = ScriptedModel(responses)
    return ToolCallingAgent(
        tools=kwargs.pop("tools", [get_temperature, warmest]), model=model, verbosity_level=-1, **kwargs
    ), model


def test_additional_args_can_be_passed_by_name():
    agent, model = agent_for([call("warmest", temperatures="temps"), call("final_answer", answer="Rome")])
    assert agent.run("Warmest?", additional_args={"temps": {"Oslo": 4.5, "Rome": 17.0}}) == "Rome"
    assert "temps (dict, 2 items" in model.calls[0][1].text()
    assert "Rome" in model.calls[1][-1].text()


def test_native_tool_calls_are_used_when_the_model_returns_them():
    agent, _ = agent_for(
        [
            {"tool_calls": [{"name": "get_temperature", "arguments": {"city": "Oslo"}}]},
            {"tool_calls": [{"name": "final_answer", "arguments": {"answer": 4.5}}]},
        ]
    )
    assert agent.run("Oslo?") == 4.5


def test_wrong_arguments_and_tool_failures_reach_the_model_which_recovers():
    agent, model = agent_for(
        [
            call("get_temperature", town="Oslo"),
            call("get_temperature", city="Atlantis"),
            call("nonexistent"),
            call("get_temperature", city="Oslo"),
            call("final_answer", answer=4.5),
        ]
    )
    result = agent.run("Oslo?", return_full_result=True)
    errors = [s.error for s in result.steps if isinstance(s, ActionStep) and s.error]
    assert isinstance(errors[0], AgentToolCallError) and "unexpected argument 'town'" in errors[0].message
    assert isinstance(errors[1], AgentToolExecutionError) and "KeyError" in errors[1].message
    assert isinstance(errors[2], AgentToolCallError) and "unknown tool 'nonexistent'" in errors[2].message
    assert "unexpected argument 'town'" in "\n".join(m.text() for m in model.calls[1])
    assert result.output == 4.5 and result.state == "success"


def test_max_steps_planning_tokens_callbacks_and_checks():
    seen = []
    agent, _model = agent_for(
        [
            "Plan: look up Oslo.<end_plan>",
            call("final_answer", answer=-1),
            call("get_temperature", city="Oslo"),
            "Plan: answer.<end_plan>",
            call("get_temperature", city="Rome"),
            "It is 4.5 in Oslo.",
        ],
        planning_interval=2,
        max_steps=3,
        final_answer_checks=[lambda answer, memory: answer >= 0],
        step_callbacks={
            PlanningStep: [lambda s: seen.append("plan")],
            FinalAnswerStep: [lambda s: seen.append("final")],
        },
    )
    result = agent.run("Oslo?", return_full_result=True)
    assert result.state == "max_steps_error" and result.output == "It is 4.5 in Oslo."
    assert isinstance(result.steps[-1].error, AgentMaxStepsError)
    assert "failed the check" in result.steps[2].error.message
    assert seen == ["plan", "plan", "final"]
    assert result.token_usage.total_tokens > 0


def test_streaming_yields_tool_calls_and_outputs():
    agent, _ = agent_for([call("get_temperature", city="Rome"), call("final_answer", answer=17.0)])
    events = list(agent.run("Rome?", stream=True))
    calls = [e for e in events if isinstance(e, ToolCall)]
    outputs = [e for e in events if isinstance(e, ToolOutput)]
    assert [c.name for c in calls] == ["get_temperature", "final_answer"]
    assert outputs[0].output == 17.0 and outputs[-1].is_final_answer
    assert isinstance(events[-1], FinalAnswerStep) and events[-1].output == 17.0


def test_a_managed_code_agent_works_as_a_tool(executor):
    helper = CodeAgent(
        tools=[get_temperature],
        model=ScriptedModel(["<code>\nfinal_answer(get_temperature('Rome'))\n</code>"]),
        executor=executor,
        name="desk",
        description="Looks up temperatures.",
        verbosity_level=-1,
    )
    agent, _ = agent_for(
        [call("desk", task="Rome?"), call("final_answer", answer="done")], tools=[], managed_agents=[helper]
    )
    with helper:
        result = agent.run("Ask the desk", return_full_result=True)
    observation = result.steps[1].observations
    assert "Report from team member 'desk'" in observation and "17.0" in observation


def test_the_python_interpreter_base_tool_runs_in_the_local_sandbox():
    agent, _ = agent_for(
        [
            call("python_interpreter", code="print(sum(range(5)))"),
            call("python_interpreter", code="import os\nos.getcwd()"),
            call("final_answer", answer="ok"),
        ],
        tools=[],
        add_base_tools=True,
    )
    result = agent.run("Sum", return_full_result=True)
    assert "10" in result.steps[1].observations
    refused = result.steps[2]  # the sandbox's import gate, not a plain exec, answered
    assert "import of 'os' is not allowed" in f"{refused.observations} {refused.error}"


def test_text_without_a_tool_call_is_a_parsing_error_the_model_sees():
    agent, model = agent_for(["I would say 4.", call("final_answer", answer=4)])
    assert agent.run("2+2") == 4
    assert "No tool call was found" in "\n".join(m.text() for m in model.calls[1])
