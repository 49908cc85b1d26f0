"""Tools named on the command line: ``--tools SPEC``, a job's ``tools``, a saved run's record.

A spec is ``module:attr`` (a `Tool`, or a list/tuple of them), ``module`` (every
`Tool` defined at the module's top level), or the same with a ``.py`` file path in
place of the module (``tools/weather.py:get_weather``). The spec, not the tool,
is what a saved run records, so `codeward replay` finds the same tools again.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from codeward.tools import Tool
from codeward.usage import UsageError

__all__ = ["ToolSpecError", "load_tool_specs", "load_tools", "spec_under"]


class ToolSpecError(UsageError):
    """A tool spec that names no tools; the message says which part is wrong."""


def _module_from_file(path: Path) -> ModuleType:
    path = path.resolve()
    if not path.is_file():
        raise ToolSpecError(f"--tools {path}: no such file")
    name = f"codeward_tools_{path.stem}_{abs(hash(str(path))):x}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ToolSpecError(f"--tools {path}: Python cannot load this file as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _import(target: str, spec: str) -> ModuleType:
    if target.endswith(".py"):
        return _module_from_file(Path(target).expanduser())
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as error:
        raise ToolSpecError(
            f"--tools {spec}: cannot import {error.name!r}; is it installed or on PYTHONPATH?"
        ) from None


def load_tools(spec: str) -> list[Tool]:
    """The tools one spec names, in a stable order."""
    target, _, attr = spec.partition(":")
    if not target:
        raise ToolSpecError(f"--tools {spec!r}: write module:attr, module, or file.py[:attr]")
    module = _import(target, spec)
    if not attr:
        found = [value for value in vars(module).values() if isinstance(value, Tool)]
        if not found:
            raise ToolSpecError(f"--tools {spec}: the module defines no Tool at its top level")
        return found
    value: Any = getattr(module, attr, None)
    if value is None:
        raise ToolSpecError(f"--tools {spec}: {target} has no attribute {attr!r}")
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if not isinstance(item, Tool):
            raise ToolSpecError(f"--tools {spec}: {item!r} is not a Tool; decorate the function with @tool")
    return items


def load_tool_specs(specs: list[str]) -> list[Tool]:
    """All the tools of several specs; a name given twice is an error."""
    tools: dict[str, Tool] = {}
    for spec in specs:
        for tool in load_tools(spec):
            if tool.name in tools and tools[tool.name] is not tool:
                raise ToolSpecError(f"two tools are named {tool.name!r} (the second from --tools {spec})")
            tools[tool.name] = tool
    return list(tools.values())


def spec_under(spec: str, folder: Path) -> str:
    """The spec with a relative file path read from `folder`: how a saved run's spec is loaded."""
    target, sep, attr = spec.partition(":")
    if not target.endswith(".py") or Path(target).expanduser().is_absolute():
        return spec
    return f"{folder / target}{sep}{attr}"
