"""smolagents' `evaluate_python_code` and `LocalPythonExecutor`, as its own executor tests call them,
running the code in codeward's `LocalExecutor` instead of smolagents' interpreter.

- `evaluate_python_code` runs each call in a fresh local executor in the host's process: the same
  compile-time policy and runtime guards as a worker, without the operating system's confinement
  around them, and without a worker's start for each of the suite's hundreds of calls.
  CODEWARD_SMOLAGENTS_SUITE_ISOLATION=process runs them in a worker each instead (slower); then a
  few more tests fail on the worker's own boundaries (a host class sent as a variable, a type handed
  back, `os.listdir` of a folder the worker may not read).
- `LocalPythonExecutor` is codeward's smolagents integration (`CodewardExecutor`) over a local
  executor with its confined worker, one per executor the test makes, closed when the test ends.

Results come back as smolagents gives them: the block's value and whether it was a final answer
(a block ending in an assignment gives the value assigned, as smolagents' does), the `state` dict
updated with the names the code bound (read back from the sandbox, as it hands values out), the
printed text as `state["_print_outputs"]`, and every failure as smolagents' `InterpreterError` (or
`ExecutionTimeoutError`) holding codeward's report: the traceback, ending in the error's type and
message.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import os
from typing import Any

from smolagents.default_tools import BASE_PYTHON_TOOLS
from smolagents.local_python_executor import (
    BASE_BUILTIN_MODULES,
    DEFAULT_MAX_LEN_OUTPUT,
    MAX_EXECUTION_TIME_SECONDS,
    ExecutionTimeoutError,
    InterpreterError,
    PrintContainer,
)

from codeward.executors.base import ExecutionError, ExecutionTimeout, ExecutorError
from codeward.executors.local import LocalExecutor
from codeward.integrations.smolagents import CodewardExecutor, SandboxCodeError
from codeward.platform.foreign_tools import as_codeward_tool
from codeward.tools import Tool

#: The executors the running test opened; the suite's conftest closes them when it ends.
OPEN: list[LocalExecutor] = []

#: Where `evaluate_python_code` runs the code: in process (the default), or "process" for a worker
#: per call (CODEWARD_SMOLAGENTS_SUITE_ISOLATION=process).
ISOLATION = os.environ.get("CODEWARD_SMOLAGENTS_SUITE_ISOLATION", "in_process")

#: smolagents' "no limit" (None) as a limit codeward takes.
_NO_TIMEOUT = 3600.0


class PlainFunctionTool(Tool):
    """A plain function offered as a tool, as smolagents' tests do (`{"add_two": add_two}`): its
    named parameters are its inputs, of any type; in the host's process it is called as it is called."""

    def __init__(self, name: str, function: Any) -> None:
        self.name = name
        self.description = f"the test's function {name}"
        self.function = function
        self.inputs = _inputs_of(function)
        super().__init__()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)


def _inputs_of(function: Any) -> dict[str, dict[str, Any]]:
    """The function's named parameters, of any type, as a tool's inputs: what a worker's call of the
    tool is bound to (in the host's process the call reaches the function as it is made)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return {}
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {
        p.name: {"type": "any", "description": p.name, "nullable": p.default is not inspect.Parameter.empty}
        for p in parameters
        if p.kind in named
    }


def codeward_tools(tools: dict[str, Any]) -> dict[str, Tool]:
    """The test's tools as codeward tools; smolagents' stand-ins for builtins (`BASE_PYTHON_TOOLS`,
    which it passes as tools) are left out, since codeward's sandbox has its own builtins."""
    converted: dict[str, Tool] = {}
    for name, value in tools.items():
        # a builtin offered as a tool is left to the sandbox's own builtins (which have no eval or exec),
        # but for `__import__`, a name codeward refuses for a tool: the tests that offer it see that
        if BASE_PYTHON_TOOLS.get(name) is value or (getattr(builtins, name, None) is value and name != "__import__"):
            continue
        if callable(value) and not hasattr(value, "forward") and not isinstance(value, Tool):
            converted[name] = PlainFunctionTool(name, value)
        else:
            converted[name] = as_codeward_tool(value)
    return converted


def parsed(code: str) -> ast.Module:
    """The code's tree; an empty one where it does not parse (the sandbox reports that itself)."""
    try:
        return ast.parse(code)
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


def bound_names(code: str) -> list[str]:
    """Every name the code may bind at its top level (a name bound only inside a function is
    looked for too, and found missing): what `state` is read back for."""
    names: list[str] = []
    for node in ast.walk(parsed(code)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.append(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.extend((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.extend(node.names)
    return list(dict.fromkeys(name for name in names if name.isidentifier() and not name.startswith("_")))


def assigned_last(code: str) -> str | None:
    """The name a block's last statement assigns (`x = 3`, `x += 1`), whose value smolagents gives
    as the block's value where Python gives none; None where the last statement is something else."""
    body = parsed(code).body
    last = body[-1] if body else None
    if isinstance(last, ast.Assign):
        target: ast.expr | None = last.targets[-1]
    elif isinstance(last, (ast.AugAssign, ast.AnnAssign)):
        target = last.target
    else:
        target = None
    return target.id if isinstance(target, ast.Name) else None


def interpreter_error(error: ExecutorError) -> InterpreterError:
    """codeward's failure as smolagents' own error, holding codeward's report of it."""
    if isinstance(error, ExecutionTimeout):
        return ExecutionTimeoutError(error.advised)
    if isinstance(error, ExecutionError):
        return InterpreterError(f"Code execution failed due to: {error.detail}")
    return InterpreterError(f"The sandbox failed: {error.message}")


def printed(logs: str) -> PrintContainer:
    """What the code printed, in the container smolagents keeps it in."""
    container = PrintContainer()
    container.value = logs
    return container


def read_back(sandbox: LocalExecutor, names: list[str], state: dict[str, Any]) -> None:
    """Each of `names` the code's namespace holds, into `state`, as the sandbox hands a value out."""
    for name in names:
        try:
            state[name] = sandbox.run(name).output
        except ExecutorError:
            continue


def evaluate_python_code(
    code: str,
    static_tools: dict[str, Any] | None = None,
    custom_tools: dict[str, Any] | None = None,
    state: dict[str, Any] | None = None,
    authorized_imports: list[str] = BASE_BUILTIN_MODULES,
    max_print_outputs_length: int = DEFAULT_MAX_LEN_OUTPUT,
    timeout_seconds: int | None = MAX_EXECUTION_TIME_SECONDS,
) -> tuple[Any, bool]:
    """smolagents' `evaluate_python_code`, run by codeward's local executor."""
    state = {} if state is None else state
    sandbox = LocalExecutor(
        authorized_imports,
        timeout_seconds=_NO_TIMEOUT if timeout_seconds is None else timeout_seconds,
        max_print_outputs_length=max_print_outputs_length,
        isolation=ISOLATION,
    )
    OPEN.append(sandbox)
    sandbox.send_tools(codeward_tools({**(custom_tools or {}), **(static_tools or {})}))
    variables = {name: value for name, value in state.items() if not name.startswith("_")}
    sandbox.send_variables(variables)
    try:
        result = sandbox.run(code)
    except ExecutorError as error:
        state["_print_outputs"] = printed(error.logs)
        read_back(sandbox, [*variables, *bound_names(code)], state)
        raise interpreter_error(error) from error
    state["_print_outputs"] = printed(result.logs)
    read_back(sandbox, [*variables, *bound_names(code)], state)
    assigned = assigned_last(code)
    if assigned is not None and not result.is_final_answer:
        return state.get(assigned), False
    return result.output, result.is_final_answer


class SandboxState(dict[str, Any]):
    """`executor.state` read from the sandbox: a name looked up is fetched from the code's namespace."""

    def __init__(self, sandbox: LocalExecutor) -> None:
        super().__init__()
        self._sandbox = sandbox

    def __getitem__(self, name: str) -> Any:
        if not name.isidentifier() or name.startswith("_"):
            raise KeyError(name)
        try:
            return self._sandbox.run(name).output
        except ExecutorError:
            raise KeyError(name) from None

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        try:
            return self[name]
        except KeyError:
            return default

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name, self) is not self


class LocalPythonExecutor(CodewardExecutor):
    """smolagents' `LocalPythonExecutor` as its tests make it, backed by codeward's local executor
    (a confined worker) through codeward's smolagents integration."""

    def __init__(
        self,
        additional_authorized_imports: list[str],
        max_print_outputs_length: int | None = None,
        additional_functions: dict[str, Any] | None = None,
        timeout_seconds: int | None = MAX_EXECUTION_TIME_SECONDS,
    ) -> None:
        try:
            sandbox = LocalExecutor(
                [*BASE_BUILTIN_MODULES, *additional_authorized_imports],
                timeout_seconds=_NO_TIMEOUT if timeout_seconds is None else timeout_seconds,
                max_print_outputs_length=max_print_outputs_length or DEFAULT_MAX_LEN_OUTPUT,
            )
        except (ValueError, ExecutorError) as error:
            raise InterpreterError(str(error)) from error
        OPEN.append(sandbox)
        super().__init__(sandbox)
        self.additional_functions = additional_functions or {}
        self.state = SandboxState(sandbox)

    def send_tools(self, tools: dict[str, Any]) -> None:
        try:
            self.sandbox.send_tools(codeward_tools({**tools, **self.additional_functions}))
        except (TypeError, ValueError) as error:
            raise InterpreterError(str(error)) from error

    def __call__(self, code_action: str) -> Any:
        try:
            output = super().__call__(code_action)
        except SandboxCodeError as error:
            cause = error.__cause__
            if isinstance(cause, ExecutorError):
                raise interpreter_error(cause) from cause
            raise
        assigned = assigned_last(code_action)
        if assigned is not None and not output.is_final_answer:
            output.output = self.state.get(assigned)
        return output


def close_all() -> None:
    """Close what the finished test opened."""
    while OPEN:
        OPEN.pop().close()
