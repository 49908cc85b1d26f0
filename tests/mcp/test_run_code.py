"""`CodeAgent.run_code`: one block run as if the agent's model had written it, the way `codeward mcp serve`
lends a sandbox to an MCP client's model."""

from __future__ import annotations

from codeward import CodeAgent, tool
from codeward.platform.errors import AgentExecutionError
from codeward.platform.models import Model


@tool
def double(n: int) -> int:
    """Twice a number.

    Args:
        n: Any integer.
    """
    return 2 * n


def test_blocks_share_the_sandbox_and_are_recorded_as_steps() -> None:
    with CodeAgent(tools=[double], model=Model(), verbosity_level=-1) as agent:
        agent.state["start"] = 20  # sent with the tools before the first block
        first = agent.run_code("x = double(start + 1)\nprint('doubled')\nx")
        assert first.observations == "Execution logs:\ndoubled\n\nLast output from code snippet:\n42"
        assert (first.step_number, first.action_output, first.error) == (1, 42, None)
        failed = agent.run_code("x / 0")
        assert isinstance(failed.error, AgentExecutionError) and "ZeroDivisionError" in failed.error.message
        answered = agent.run_code("final_answer(x + 1)")
        assert answered.is_final_answer and answered.action_output == 43
        after = agent.run_code("x")  # a final answer ends nothing: the sandbox keeps its state
        assert after.action_output == 42 and not after.is_final_answer
        assert [step.step_number for step in agent.memory.action_steps()] == [1, 2, 3, 4]
