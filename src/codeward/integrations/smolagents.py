"""codeward's sandboxes under smolagents' own `CodeAgent`, without rewriting the agent.

    from codeward.integrations.smolagents import executor
    agent = smolagents.CodeAgent(tools=[...], model=model, executor=executor("docker"))

smolagents hands its executor the agent's variables, its tools (smolagents `Tool`
objects, its `final_answer` and its managed agents) and each code block. Here the
tools become codeward tools that run on the host through codeward's bridge, the
block runs in the codeward sandbox named, and a failure becomes an exception whose
text smolagents shows its model, as it does for its own executors.
"""

from __future__ import annotations

from typing import Any

from codeward.executors.base import (
    ExecutionError,
    ExecutionTimeout,
    Executor,
    ExecutorError,
    SandboxError,
    create_executor,
    install_line,
)
from codeward.platform.foreign_tools import as_codeward_tool

try:
    from smolagents.local_python_executor import CodeOutput as SmolagentsCodeOutput
    from smolagents.local_python_executor import PythonExecutor
except ModuleNotFoundError as missing:
    raise ImportError(
        f"codeward.integrations.smolagents needs the package {missing.name!r}, which is not installed; "
        f"install it with: {install_line('smolagents')}"
    ) from missing

__all__ = ["CodewardExecutor", "SandboxCodeError", "executor"]


def executor(sandbox: str | Executor = "docker", **settings: Any) -> CodewardExecutor:
    """A smolagents Python executor that runs code in codeward's sandbox `sandbox` ("local",
    "jupyter", "docker", "e2b"), built with `settings`, or in an `Executor` you built yourself."""
    if isinstance(sandbox, Executor):
        if settings:
            raise ValueError("settings apply only when the sandbox is a name; configure your Executor directly")
        return CodewardExecutor(sandbox)
    return CodewardExecutor(create_executor(sandbox, **settings))


class SandboxCodeError(Exception):
    """The code block failed in the sandbox. smolagents' CodeAgent turns any exception from its
    executor into an `AgentExecutionError` with this text, which its model sees next step."""


class CodewardExecutor(PythonExecutor):  # type: ignore[misc]
    """smolagents' `PythonExecutor` interface over a codeward `Executor`."""

    def __init__(self, sandbox: Executor) -> None:
        self.sandbox = sandbox

    def send_variables(self, variables: dict[str, Any]) -> None:
        self.sandbox.send_variables(variables)

    def send_tools(self, tools: dict[str, Any]) -> None:
        self.sandbox.send_tools({name: as_codeward_tool(tool) for name, tool in tools.items()})

    def __call__(self, code_action: str) -> Any:
        """Run one block; smolagents' own `CodeOutput` back, or `SandboxCodeError` saying what failed."""
        try:
            result = self.sandbox.run(code_action)
        except ExecutorError as error:
            raise SandboxCodeError(_failure_text(error)) from error
        return SmolagentsCodeOutput(output=result.output, logs=result.logs, is_final_answer=result.is_final_answer)

    def cleanup(self) -> None:
        """Close the sandbox; smolagents' `agent.cleanup()` and `with CodeAgent(...)` call this."""
        self.sandbox.close()


def _failure_text(error: ExecutorError) -> str:
    """What the model is shown: what the code printed, then the fault, laid out as smolagents'
    own remote executors do, since its CodeAgent records only the exception's text."""
    if isinstance(error, ExecutionTimeout):
        fault = error.advised
    elif isinstance(error, ExecutionError):
        fault = error.detail
    elif isinstance(error, SandboxError) and error.state_lost:
        fault = f"The sandbox failed: {error.message}. Variables and functions defined by earlier code are lost."
    else:
        fault = f"The sandbox failed: {error.message}."
    logs = f"Execution logs:\n{error.logs}\n" if error.logs else ""
    return f"{logs}Executing code yielded an error:\n{fault}"
