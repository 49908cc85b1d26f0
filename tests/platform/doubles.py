"""A bare in-process executor for unit tests of the agent loop only.

It runs code with plain `exec` and no protection at all: the lifecycle's
end-to-end tests use the real local executor instead.
"""

from __future__ import annotations

import ast
import contextlib
import io
from typing import Any

from codeward.executors.base import (
    FINAL_ANSWER_TOOL,
    CodeOutput,
    ExecutionError,
    Executor,
    FinalAnswerSignal,
)


class ExecDouble(Executor):
    name = "exec-double"

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {}
        self.closed = False
        self.sent_variables: list[dict[str, Any]] = []
        self.sent_tools: list[list[str]] = []

    def send_variables(self, variables: dict[str, Any]) -> None:
        self.sent_variables.append(dict(variables))
        self.namespace.update(variables)

    def send_tools(self, tools: dict[str, Any]) -> None:
        self.sent_tools.append(sorted(tools))
        for name, tool in tools.items():
            if name == FINAL_ANSWER_TOOL:

                def final(*args: Any, _tool: Any = tool, **kwargs: Any) -> None:
                    raise FinalAnswerSignal(_tool(*args, **kwargs))

                self.namespace[name] = final
            else:
                self.namespace[name] = tool

    def run(self, code: str, on_output: Any = None) -> CodeOutput:
        out = io.StringIO()
        tree = ast.parse(code)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(tree, "<code>", "exec"), self.namespace)
                value = eval(compile(ast.Expression(last.value), "<code>", "eval"), self.namespace) if last else None
        except FinalAnswerSignal as signal:
            return CodeOutput(signal.value, out.getvalue(), True)
        except Exception as error:
            raise ExecutionError(
                f"{type(error).__name__}: {error}",
                logs=out.getvalue(),
                traceback=f"{type(error).__name__}: {error}",
                error_type=type(error).__name__,
            ) from None
        return CodeOutput(value, out.getvalue(), False)

    def close(self) -> None:
        self.closed = True
