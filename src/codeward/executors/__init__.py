"""Sandboxes that run the model's code, behind one contract (`Executor`)."""

from codeward.executors.base import (
    CodeOutput,
    ExecutionError,
    ExecutionTimeout,
    Executor,
    ExecutorError,
    SandboxError,
    available_executors,
    create_executor,
    register_executor,
)

__all__ = [
    "CodeOutput",
    "ExecutionError",
    "ExecutionTimeout",
    "Executor",
    "ExecutorError",
    "SandboxError",
    "available_executors",
    "create_executor",
    "register_executor",
]
