"""smolagents' own CodeAgent, unmodified, running its code in codeward's sandboxes."""

from __future__ import annotations

from typing import Any

import pytest

smolagents = pytest.importorskip("smolagents")

from smolagents import ChatMessage, MessageRole, tool  # noqa: E402
from smolagents.utils import AgentExecutionError  # noqa: E402

from codeward.executors.base import ExecutorError  # noqa: E402
from codeward.integrations.smolagents import CodewardExecutor, executor  # noqa: E402

#: Every call a tool received, on the host: a tool that ran in the sandbox could not append here.
HOST_CALLS: list[str] = []


@tool
def get_weather(city: str) -> str:
    """Tells the weather in a city.

    Args:
        city: The city's name.
    """
    HOST_CALLS.append(city)
    return f"sunny in {city}"


class ScriptedSmolagentsModel(smolagents.Model):  # type: ignore[misc]
    """Stands in for the LLM: plays canned replies in smolagents' own message type, keeps what it was shown."""

    def __init__(self, replies: list[str]) -> None:
        super().__init__(model_id="scripted")
        self.replies = list(replies)
        self.shown: list[list[Any]] = []

    def generate(self, messages: list[Any], stop_sequences: list[str] | None = None, **kwargs: Any) -> ChatMessage:
        self.shown.append(messages)
        return ChatMessage(role=MessageRole.ASSISTANT, content=self.replies.pop(0))


def _agent(sandbox_name: str, replies: list[str]) -> Any:
    model = ScriptedSmolagentsModel(replies)
    return smolagents.CodeAgent(
        tools=[get_weather], model=model, executor=executor(sandbox_name), verbosity_level=smolagents.LogLevel.OFF
    )


def test_smolagents_code_agent_gets_variables_runs_a_host_tool_and_answers(sandbox_name: str) -> None:
    HOST_CALLS.clear()
    replies = [
        "Thought: ask the tool.\n<code>\nreport = get_weather(city)\nprint(report)\n</code>",
        "Thought: answer.\n<code>\nfinal_answer(report.upper())\n</code>",
    ]
    with _agent(sandbox_name, replies) as agent:
        answer = agent.run("What is the weather?", additional_args={"city": "Oslo"})
    assert answer == "SUNNY IN OSLO"
    assert HOST_CALLS == ["Oslo"]
    first_step = agent.memory.steps[1]
    assert "sunny in Oslo" in first_step.observations


def test_a_failing_block_is_fed_back_to_the_smolagents_model(sandbox_name: str) -> None:
    replies = [
        "<code>\nprint('before the fault')\n1 / 0\n</code>",
        "<code>\nfinal_answer('recovered')\n</code>",
    ]
    with _agent(sandbox_name, replies) as agent:
        answer = agent.run("Divide.")
    assert answer == "recovered"
    error = agent.memory.steps[1].error
    assert isinstance(error, AgentExecutionError)
    assert "ZeroDivisionError" in error.message and "before the fault" in error.message
    second_prompt = "".join(str(message.content) for message in agent.model.shown[1])
    assert "ZeroDivisionError" in second_prompt


def test_an_endless_loop_tells_the_smolagents_model_the_limit_and_why() -> None:
    model = ScriptedSmolagentsModel(["<code>\nwhile True:\n    pass\n</code>", "<code>\nfinal_answer('done')\n</code>"])
    sandbox = executor("local", max_operations=1000)
    with smolagents.CodeAgent(
        tools=[], model=model, executor=sandbox, verbosity_level=smolagents.LogLevel.OFF
    ) as agent:
        assert agent.run("Loop.") == "done"
    message = agent.memory.steps[1].error.message
    assert "more than 1,000 operations" in message and "look for an endless loop" in message, message


def test_a_tool_called_wrongly_is_an_error_the_model_sees() -> None:
    replies = ["<code>\nget_weather(city=3)\n</code>", "<code>\nfinal_answer('done')\n</code>"]
    with _agent("local", replies) as agent:
        assert agent.run("Weather?") == "done"
    assert "argument 'city' must be string" in agent.memory.steps[1].error.message


def test_cleanup_closes_the_codeward_sandbox() -> None:
    agent = _agent("local", [])
    assert isinstance(agent.python_executor, CodewardExecutor)
    agent.cleanup()
    with pytest.raises(ExecutorError, match="closed"):
        agent.python_executor.sandbox.run("1")


def test_settings_go_to_a_sandbox_named_but_not_to_one_given() -> None:
    built = executor("local", timeout_seconds=7)
    with pytest.raises(ValueError, match="configure your Executor directly"):
        executor(built.sandbox, timeout_seconds=7)
    built.cleanup()
