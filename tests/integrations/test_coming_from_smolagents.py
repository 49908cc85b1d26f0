"""codeward's own CodeAgent as a smolagents user finds it: their tools, LangChain's, their
final answer checks and the names they type first."""

from __future__ import annotations

from typing import Any

import pytest

smolagents = pytest.importorskip("smolagents")
langchain_tools = pytest.importorskip("langchain_core.tools")

from codeward import CodeAgent, ScriptedModel  # noqa: E402
from codeward.executors.base import ExecutorError  # noqa: E402
from codeward.platform.display import LogLevel  # noqa: E402
from codeward.platform.foreign_tools import LangChainTool, SmolagentsTool, as_codeward_tool  # noqa: E402
from codeward.platform.memory import AgentMemory  # noqa: E402

#: Every call a tool received, on the host.
HOST_CALLS: list[str] = []


class RoundTool(smolagents.Tool):  # type: ignore[misc]
    """A smolagents tool written the class way, with a setup() that must run before its first call."""

    name = "round_to"
    description = "Rounds a number to some digits."
    inputs = {
        "value": {"type": "number", "description": "The number."},
        "digits": {"type": "integer", "description": "How many digits.", "nullable": True},
    }
    output_type = "number"

    def setup(self) -> None:
        self.calls = 0
        self.is_initialized = True

    def forward(self, value: float, digits: int | None = None) -> float:
        self.calls += 1
        HOST_CALLS.append("round_to")
        return round(value, digits or 0)


@langchain_tools.tool
def convert(celsius: float, unit: str = "F") -> str:
    """Converts a temperature in Celsius to another unit."""
    HOST_CALLS.append("convert")
    return f"{celsius * 9 / 5 + 32:.1f} {unit}"


def code(body: str) -> str:
    return f"Thought: go.\n<code>\n{body}\n</code>"


def make_agent(replies: list[str], tools: list[Any] | None = None, **settings: Any) -> tuple[CodeAgent, ScriptedModel]:
    model = ScriptedModel(replies)
    agent = CodeAgent(tools=tools or [], model=model, verbosity_level=LogLevel.OFF, **settings)
    return agent, model


def test_a_smolagents_tool_and_a_langchain_tool_run_on_the_host_in_a_codeward_agent(sandbox_name: str) -> None:
    HOST_CALLS.clear()
    rounding = RoundTool()
    replies = [code("final_answer(convert(celsius=round_to(value=21.46, digits=1)))")]
    agent, model = make_agent(replies, [rounding, convert], executor=sandbox_name)
    with agent:
        assert agent.run("How warm in Fahrenheit?") == "70.7 F"
    assert HOST_CALLS == ["round_to", "convert"]
    assert rounding.calls == 1
    system_prompt = model.calls[0][0].text()
    assert "def round_to(value: float, digits: int | None = None) -> float:" in system_prompt
    assert "def convert(celsius: float, unit: str = 'F') -> Any:" in system_prompt


def test_a_foreign_tool_called_wrongly_is_checked_before_it_runs() -> None:
    HOST_CALLS.clear()
    agent, model = make_agent([code("convert(celsius='warm')"), code("final_answer(1)")], [convert])
    with agent:
        agent.run("Convert.")
    assert HOST_CALLS == []
    assert "argument 'celsius' must be number" in model.calls[1][-1].text()


def test_the_conversion_keeps_what_each_library_says_of_its_arguments() -> None:
    round_tool = as_codeward_tool(RoundTool())
    assert isinstance(round_tool, SmolagentsTool)
    assert round_tool.inputs["digits"] == {"type": "integer", "description": "How many digits.", "nullable": True}
    convert_tool = as_codeward_tool(convert)
    assert isinstance(convert_tool, LangChainTool)
    assert convert_tool.inputs["unit"] == {"type": "string", "description": "unit", "default": "F"}
    assert convert_tool.description == "Converts a temperature in Celsius to another unit."


def test_something_that_is_no_tool_of_any_library_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="is not a Tool; decorate the function with @tool"):
        make_agent([], [print])


def test_executor_type_is_refused_with_the_argument_codeward_takes() -> None:
    with pytest.raises(TypeError, match=r"CodeAgent takes no executor_type=.*executor='docker'"):
        make_agent([], executor_type="docker")


def test_a_smolagents_style_final_answer_check_gets_the_memory_and_the_agent() -> None:
    seen: list[tuple[Any, Any]] = []

    def is_even(final_answer: Any, memory: Any, agent: Any) -> bool:
        seen.append((memory, agent))
        return bool(final_answer % 2 == 0)

    agent, model = make_agent([code("final_answer(3)"), code("final_answer(4)")], final_answer_checks=[is_even])
    with agent:
        assert agent.run("An even number.") == 4
    assert "failed the check 'is_even'" in model.calls[1][-1].text()
    assert all(isinstance(memory, AgentMemory) and given is agent for memory, given in seen)


def test_cleanup_is_close_and_python_executor_is_the_executor() -> None:
    agent, _ = make_agent([])
    assert agent.python_executor is agent.executor
    agent.cleanup()
    with pytest.raises(ExecutorError, match="closed"):
        agent.executor.run("1")
