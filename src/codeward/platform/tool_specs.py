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
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from codeward.tools import Tool, ToolDefinitionError
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
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # the file's own code failed: the user's to fix, said with its file and line
        del sys.modules[name]
        raise _import_failed(str(path), error, path) from error
    return module


def _import(target: str, spec: str) -> ModuleType:
    if target.endswith(".py"):
        return _module_from_file(Path(target).expanduser())
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as error:
        if error.name is not None and (target == error.name or target.startswith(f"{error.name}.")):  # it is missing
            raise ToolSpecError(
                f"--tools {spec}: cannot import {error.name!r}; is it installed or on PYTHONPATH?"
            ) from None
        raise _import_failed(spec, error, None) from error
    except Exception as error:
        raise _import_failed(spec, error, None) from error


def _import_failed(spec: str, error: Exception, path: Path | None) -> ToolSpecError:
    """A tools module that raised while imported: which spec, where in its code, what went wrong, what to do."""
    frames: list[traceback.FrameSummary] = list(traceback.extract_tb(error.__traceback__))
    if path is not None:
        frames = [frame for frame in frames if Path(frame.filename) == path] or frames
    else:  # the last frame outside the import machinery: the module's own line
        frames = [frame for frame in frames if "importlib" not in frame.filename] or frames
    where = f" ({frames[-1].filename}, line {frames[-1].lineno})" if frames else ""
    if isinstance(error, ModuleNotFoundError) and error.name:
        return ToolSpecError(
            f"--tools {spec}: it imports {error.name!r}, which is not installed{where}; "
            "install the package that provides it, or remove the import"
        )
    if isinstance(error, ToolDefinitionError):
        return ToolSpecError(f"--tools {spec}: a tool is defined wrongly{where}: {error}")
    return ToolSpecError(
        f"--tools {spec}: the module raised {type(error).__name__} while imported{where}: {error}; fix the module"
    )


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
