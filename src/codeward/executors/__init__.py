"""Sandboxes that run the model's code, behind one contract (`Executor`).

The layout follows the layers: `base` (the contract and the registry), `codec`
(the value codec every sandbox shares), `local/` (the policy-guarded local
executor), `kernel/` (what every kernel-backed sandbox shares: session,
executor base, tool bridge, sandbox prelude, cell results), `docker/`,
`jupyter` and `e2b`.

Each executor class, `SandboxPool` and `Mount` (a docker sandbox's host mount) is importable from here (`from
codeward.executors import JupyterExecutor`), but its module, and the SDK it
needs, loads only when asked.
"""

import functools
from typing import Any

from codeward.executors.base import (
    _REGISTRY,
    CodeOutput,
    ExecutionError,
    ExecutionTimeout,
    Executor,
    ExecutorError,
    SandboxError,
    available_executors,
    create_executor,
    executor_class,
    register_executor,
)

__all__ = [
    "CodeOutput",
    "DockerExecutor",
    "E2BExecutor",
    "ExecutionError",
    "ExecutionTimeout",
    "Executor",
    "ExecutorError",
    "JupyterExecutor",
    "LocalExecutor",
    "Mount",
    "SandboxError",
    "SandboxPool",
    "available_executors",
    "create_executor",
    "register_executor",
]


def __getattr__(name: str) -> Any:
    if name == "SandboxPool":
        from codeward.executors.docker.pool import SandboxPool

        return SandboxPool
    if name == "Mount":
        from codeward.executors.docker.mounts import Mount

        return Mount
    for registered, (_, class_name, _) in _REGISTRY.items():
        if class_name == name:
            try:
                return executor_class(registered)
            except ImportError as missing:
                return _needs_extra(class_name, str(missing))
    raise AttributeError(f"module 'codeward.executors' has no attribute {name!r}")


@functools.cache
def _needs_extra(class_name: str, message: str) -> type:
    """What an executor's name gives where its extra is missing: importing it works (so code that
    names every sandbox imports on a base install); making one raises the pip line."""

    def refuse(cls: type, *args: Any, **kwargs: Any) -> Any:
        raise ImportError(message)

    return type(class_name, (), {"__new__": refuse, "__doc__": f"Not available here: {message}"})
