"""The tool-calling agent: each step, the model names a tool and its arguments as JSON.

Tools run on the host. Native tool calling is used where the model returns tool
calls; otherwise the first JSON object with a "name" in its text is the call.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from typing import Any

from codeward.effects import Steps
from codeward.platform.agents import MultiStepAgent, ToolOutput
from codeward.platform.errors import AgentParsingError, AgentToolCallError, AgentToolExecutionError
from codeward.platform.memory import ActionStep
from codeward.platform.models import ToolCall
from codeward.platform.parsing import extract_tool_call
from codeward.tools import Tool, ToolCalled, ToolCallError

__all__ = ["PythonInterpreterTool", "ToolCallingAgent"]


class PythonInterpreterTool(Tool):
    """Python for a tool-calling agent, run in the restricted local sandbox."""

    name = "python_interpreter"
    description = (
        "Runs Python code in a restricted sandbox and returns what it printed and the value of its last line. "
        "State does not carry over between calls."
    )
    inputs = {"code": {"type": "string", "description": "The Python code to run."}}
    output_type = "string"

    def forward(self, code: str) -> str:
        from codeward.executors.base import ExecutionError, create_executor

        with create_executor("local") as executor:
            try:
                result = executor.run(code)
            except ExecutionError as error:
                raise RuntimeError(error.traceback or error.message) from None
        return f"{result.logs}{result.output!r}" if result.output is not None else result.logs


class ToolCallingAgent(MultiStepAgent):
    prompt_kind = "toolcalling_agent"

    def _base_tools(self) -> list[Tool]:
        return [PythonInterpreterTool()]

    def _step_stream(self, action_step: ActionStep, streaming: bool) -> Generator[Any, None, None]:
        messages = self.write_memory_to_messages()
        action_step.model_input_messages = messages
        tools = list({**self.tools, **self.managed_agents}.values())
        message = yield from self._generate(
            messages, streaming, stop_sequences=["Observation:"], tools_to_call_from=tools
        )
        action_step.model_output_message = message
        action_step.model_output = message.text()
        action_step.token_usage = message.token_usage
        calls = message.tool_calls
        if not calls:
            try:
                name, arguments = extract_tool_call(message.text())
            except ValueError as error:
                raise AgentParsingError(str(error)) from None
            calls = [ToolCall(name, arguments, f"call_{self.step_number}")]
            message.tool_calls = calls
        action_step.tool_calls = calls
        observations = []
        for call in calls:
            yield call
            output = yield from self._call_tool(call)
            observations.append(output.observation)
            action_step.observations = "\n".join(observations)
            yield output
            if output.is_final_answer:
                break

    def _resolve(self, arguments: Any) -> Any:
        """A string naming a variable from `additional_args` stands for its value."""
        if isinstance(arguments, str) and arguments in self.state:
            return self.state[arguments]
        if isinstance(arguments, dict):
            return {key: self._resolve(value) for key, value in arguments.items()}
        return arguments

    def _call_tool(self, call: ToolCall) -> Steps[ToolOutput]:
        available = {**self.tools, **self.managed_agents}
        tool = available.get(call.name)
        if tool is None:
            raise AgentToolCallError(f"unknown tool {call.name!r}; call one of: {', '.join(available)}")
        arguments = self._resolve(call.arguments)
        try:
            if not isinstance(arguments, dict):
                arguments = tool.bind_arguments(() if arguments is None else (arguments,), {})
            result = yield ToolCalled(tool, arguments)  # awaited in `arun`: an async tool runs on the loop
        except ToolCallError as error:
            raise AgentToolCallError(
                f"wrong arguments for tool {call.name!r}: {error}. Its inputs are: {json.dumps(tool.inputs, default=str)}"
            ) from None
        except Exception as error:
            raise AgentToolExecutionError(f"tool {call.name!r} failed with {type(error).__name__}: {error}") from None
        final = call.name == "final_answer"
        observation = str(result)
        self.logger.observation(f"{call.name}: {observation}")
        return ToolOutput(call.id, result, final, observation, call)
