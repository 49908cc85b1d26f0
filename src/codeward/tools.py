"""Tools: what the model may call, described once and checked at every call.

This is the contract both layers need, so it sits below both: the agent platform
describes tools to the model, and every sandbox calls them (on the host through
its bridge, or shipped inline), without either importing the other.
A tool's `inputs` are JSON-schema types, so the same description serves the code
prompt (a Python signature), native tool calling (a JSON schema) and the
argument checks that every executor applies before the tool runs.
"""

from __future__ import annotations

import inspect
import re
import textwrap
import types
import typing
from collections.abc import Callable
from typing import Any

from codeward import tracing
from codeward.effects import Effect, offload, run_coroutine

__all__ = [
    "FinalAnswerTool",
    "FunctionTool",
    "Tool",
    "ToolCallError",
    "ToolCalled",
    "ToolDefinitionError",
    "called",
    "tool",
]

JSON_TYPES = ("string", "boolean", "integer", "number", "array", "object", "any", "null", "image")

_PYTHON_NAMES = {
    "string": "str",
    "boolean": "bool",
    "integer": "int",
    "number": "float",
    "array": "list",
    "object": "dict",
    "any": "Any",
    "null": "None",
    "image": "Any",
}

_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "array": lambda v: isinstance(v, (list, tuple)),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
    "any": lambda v: True,
    "image": lambda v: True,
}


class ToolDefinitionError(ValueError):
    """A tool is described wrongly (a missing docstring, an unknown type...)."""


class ToolCallError(TypeError):
    """A tool was called with arguments that do not fit its `inputs`."""


def _type_names(spec: dict[str, Any]) -> list[str]:
    kind = spec.get("type", "any")
    names = list(kind) if isinstance(kind, list) else [kind]
    if spec.get("nullable"):
        names.append("null")
    return names


class Tool:
    """A callable the model can use. Subclass it and define `forward`, or use `@tool`.

    Class attributes to set: `name`, `description`, `inputs`
    (``{"arg": {"type": "string", "description": "...", "nullable": False}}``)
    and `output_type`.
    """

    name: str = ""
    description: str = ""
    inputs: dict[str, dict[str, Any]] = {}
    output_type: str = "any"

    def __init__(self) -> None:
        self.validate_definition()

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"tool {self.name!r} defines no forward()")

    def validate_definition(self) -> None:
        """Refuse a tool description that would mislead the model or the checks."""
        where = type(self).__name__
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ToolDefinitionError(f"{where}: name must be a Python identifier, got {self.name!r}")
        if not isinstance(self.description, str) or not self.description.strip():
            raise ToolDefinitionError(f"tool {self.name!r}: description is empty; say what the tool does")
        if not isinstance(self.inputs, dict):
            raise ToolDefinitionError(f"tool {self.name!r}: inputs must be a dict of name -> spec")
        for arg, spec in self.inputs.items():
            if not isinstance(spec, dict) or "description" not in spec:
                raise ToolDefinitionError(
                    f"tool {self.name!r}: input {arg!r} needs a spec with 'type' and 'description'"
                )
            unknown = [t for t in _type_names(spec) if t not in JSON_TYPES]
            if unknown:
                raise ToolDefinitionError(
                    f"tool {self.name!r}: input {arg!r} has unknown type {unknown[0]!r}; "
                    f"use one of {', '.join(JSON_TYPES)}"
                )
        if self.output_type not in JSON_TYPES:
            raise ToolDefinitionError(
                f"tool {self.name!r}: output_type {self.output_type!r} is not one of {', '.join(JSON_TYPES)}"
            )

    def bind_arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """Map a call's positional and keyword arguments onto `inputs` and check them."""
        names = list(self.inputs)
        if len(args) > len(names):
            raise ToolCallError(
                f"{self.name}() takes {len(names)} arguments ({', '.join(names)}) but {len(args)} were given"
            )
        arguments = dict(zip(names, args, strict=False))
        for key, value in kwargs.items():
            if key in arguments:
                raise ToolCallError(f"{self.name}() got multiple values for argument {key!r}")
            arguments[key] = value
        self.validate_arguments(arguments)
        return arguments

    def validate_arguments(self, arguments: dict[str, Any]) -> None:
        """Raise `ToolCallError` naming the argument at fault and what was expected."""
        if not isinstance(arguments, dict):
            raise ToolCallError(f"{self.name}() takes its arguments as a dict, got {type(arguments).__name__}")
        for key in arguments:
            if key not in self.inputs:
                raise ToolCallError(
                    f"{self.name}() got an unexpected argument {key!r}; "
                    f"its arguments are: {', '.join(self.inputs) or 'none'}"
                )
        for key, spec in self.inputs.items():
            if key not in arguments:
                if spec.get("nullable") or "default" in spec:
                    continue
                raise ToolCallError(f"{self.name}() is missing the required argument {key!r}")
            value = arguments[key]
            allowed = _type_names(spec)
            if not any(_CHECKS[t](value) for t in allowed):
                raise ToolCallError(
                    f"{self.name}() argument {key!r} must be {' or '.join(allowed)}, "
                    f"got {type(value).__name__}: {_preview(value)}"
                )

    @property
    def is_async(self) -> bool:
        """Whether `forward` is ``async def``: then a call gives a coroutine, which the host awaits on
        its event loop in `arun` and runs to its end in `run`."""
        return inspect.iscoroutinefunction(self.forward)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Check the arguments and run the tool, in an ``execute_tool`` span: every call on the host passes here.
        An async tool's call checks its arguments at once and gives the coroutine that runs it."""
        if self.is_async:
            return self._awaited_call(self.bind_arguments(args, kwargs))
        with self._span() as span:
            arguments = self.bind_arguments(args, kwargs)
            span.value(tracing.TOOL_ARGUMENTS, arguments)
            result = self.forward(**arguments)
            span.value(tracing.TOOL_RESULT, result)
            return result

    async def _awaited_call(self, arguments: dict[str, Any]) -> Any:
        with self._span() as span:
            span.value(tracing.TOOL_ARGUMENTS, arguments)
            result = await self.forward(**arguments)
            span.value(tracing.TOOL_RESULT, result)
            return result

    def _span(self) -> typing.ContextManager[tracing.Span]:
        return tracing.span(
            f"execute_tool {self.name}", {tracing.OPERATION: "execute_tool", tracing.TOOL_NAME: self.name}
        )

    def python_signature(self) -> str:
        params = []
        for arg, spec in self.inputs.items():
            hint = " | ".join(dict.fromkeys(_PYTHON_NAMES[t] for t in _type_names(spec)))
            optional = spec.get("nullable") or "default" in spec
            default = f" = {spec.get('default')!r}" if optional else ""
            params.append(f"{arg}: {hint}{default}")
        return f"{self.name}({', '.join(params)}) -> {_PYTHON_NAMES[self.output_type]}"

    def to_code_prompt(self) -> str:
        """The tool as the model sees it in a code agent's prompt: a Python stub."""
        lines = [self.description.strip()]
        if self.inputs:
            lines += ["", "Args:"]
            lines += [f"    {arg}: {spec['description']}" for arg, spec in self.inputs.items()]
        doc = textwrap.indent('"""' + "\n".join(lines) + '\n"""', "    ")
        return f"def {self.python_signature()}:\n{doc}"

    def to_tool_calling_prompt(self) -> str:
        return (
            f"{self.name}: {self.description.strip()}\n    Takes inputs: {self.inputs}\n    Returns: {self.output_type}"
        )

    def to_json_schema(self) -> dict[str, Any]:
        """The OpenAI-style function description used by native tool calling."""
        properties: dict[str, Any] = {}
        required = []
        for arg, spec in self.inputs.items():
            types_ = [t for t in _type_names(spec) if t not in ("any", "image")]
            prop: dict[str, Any] = {"description": spec["description"]}
            if types_:
                prop["type"] = types_[0] if len(types_) == 1 else types_
            properties[arg] = prop
            if not (spec.get("nullable") or "default" in spec):
                required.append(arg)
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {"type": "object", "properties": properties, "required": required},
            },
        }

    def __repr__(self) -> str:
        return f"<Tool {self.python_signature()}>"


class FinalAnswerTool(Tool):
    """Ends the run with its argument as the answer. Every agent has one."""

    name = "final_answer"
    description = "Provides the final answer to the task and ends the run."
    inputs = {"answer": {"type": "any", "description": "The final answer to the task."}}
    output_type = "any"

    def forward(self, answer: Any) -> Any:
        return answer


class FunctionTool(Tool):
    """A tool made from a documented, typed function by `@tool`."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        self.name = function.__name__
        summary, arg_docs = _parse_docstring(function)
        self.description = summary
        self.inputs, self.output_type = _inputs_from_signature(function, arg_docs)
        super().__init__()
        self.__doc__ = function.__doc__

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.function)

    def source(self) -> str:
        """The function's own source without decorators, for sandboxes that run tools inline."""
        try:
            text = textwrap.dedent(inspect.getsource(self.function))
        except (OSError, TypeError) as error:
            raise ToolDefinitionError(
                f"tool {self.name!r}: its source cannot be read ({error}); define it in a .py file"
            ) from error
        return re.sub(r"\A(?:@.*\n)+", "", text)


def tool(function: Callable[..., Any]) -> FunctionTool:
    """Make a tool from a function with type hints and a Google-style docstring.

    The docstring's first part becomes the description; its ``Args:`` section
    must describe every argument, so that the model knows what to pass.
    """
    if not callable(function) or not hasattr(function, "__name__"):
        raise ToolDefinitionError(f"@tool takes a function, got {type(function).__name__}")
    return FunctionTool(function)


def _parse_docstring(function: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    doc = inspect.getdoc(function)
    if not doc:
        raise ToolDefinitionError(
            f"tool {function.__name__!r} has no docstring; write one that says what it does, "
            "with an 'Args:' section describing each argument"
        )
    parts = re.split(r"^\s*(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?):\s*$", doc, flags=re.M)
    summary = parts[0].strip()
    arg_docs: dict[str, str] = {}
    for header, body in zip(parts[1::2], parts[2::2], strict=False):
        if header not in ("Args", "Arguments", "Parameters"):
            continue
        current = None
        for line in body.splitlines():
            match = re.match(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", line)
            if match and not line.startswith(" " * 8):
                current = match.group(1).lstrip("*")
                arg_docs[current] = match.group(2).strip()
            elif current and line.strip():
                arg_docs[current] = (arg_docs[current] + " " + line.strip()).strip()
    return summary, arg_docs


def _json_type(hint: Any, where: str) -> tuple[str | list[str], bool]:
    """Map a type hint to a JSON-schema type and whether it admits None."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        members = [m for m in typing.get_args(hint) if m is not type(None)]
        nullable = len(members) < len(typing.get_args(hint))
        names = []
        for member in members:
            name, _ = _json_type(member, where)
            names.extend(name if isinstance(name, list) else [name])
        unique = list(dict.fromkeys(names))
        return (unique[0] if len(unique) == 1 else unique), nullable
    base = origin or hint
    mapping: dict[Any, str] = {
        str: "string",
        bool: "boolean",
        int: "integer",
        float: "number",
        list: "array",
        tuple: "array",
        dict: "object",
        type(None): "null",
        Any: "any",
        inspect.Parameter.empty: "any",
    }
    if base in mapping:
        return mapping[base], False
    if getattr(base, "__name__", "") == "Image":
        return "image", False
    return "any", False


def _inputs_from_signature(
    function: Callable[..., Any], arg_docs: dict[str, str]
) -> tuple[dict[str, dict[str, Any]], str]:
    signature = inspect.signature(function)
    try:
        hints = typing.get_type_hints(function)
    except Exception:  # unresolvable forward references: fall back to the raw annotations
        hints = {}
    inputs: dict[str, dict[str, Any]] = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"tool {function.__name__!r}: *{param.name} arguments cannot be described to the model; "
                "name each argument"
            )
        if param.name not in arg_docs:
            raise ToolDefinitionError(
                f"tool {function.__name__!r}: the docstring's 'Args:' section does not describe "
                f"argument {param.name!r}; add a line '{param.name}: what it is'"
            )
        kind, nullable = _json_type(hints.get(param.name, param.annotation), function.__name__)
        spec: dict[str, Any] = {"type": kind, "description": arg_docs[param.name]}
        if nullable:
            spec["nullable"] = True
        if param.default is not param.empty:
            spec["default"] = param.default
        inputs[param.name] = spec
    output, _ = _json_type(hints.get("return", signature.return_annotation), function.__name__)
    return inputs, output if isinstance(output, str) else "any"


def _preview(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def called(tool: Tool, *args: Any, **kwargs: Any) -> Any:
    """`tool(...)` run to its end by blocking: an async tool's coroutine on a loop of its own. What
    calls a tool and cannot await (a sandbox in the host's process) calls it so, and never hands
    the model's code a coroutine."""
    result = tool(*args, **kwargs)
    return run_coroutine(result) if inspect.isawaitable(result) else result


class ToolCalled(Effect):
    """A call of a host tool, waited on: blocking runs it (an async tool on a loop of its own);
    awaiting runs an async tool on the event loop and a sync one in the shared bounded pool."""

    def __init__(self, tool: Tool, arguments: dict[str, Any]) -> None:
        self.tool = tool
        self.arguments = arguments

    def call(self) -> Any:
        return called(self.tool, **self.arguments)

    async def acall(self) -> Any:
        import asyncio

        task = asyncio.current_task()
        if task is not None and task.cancelling():  # cancelled while the request was read: not started
            raise asyncio.CancelledError
        if self.tool.is_async:
            return await self.tool(**self.arguments)
        result = await offload(lambda: self.tool(**self.arguments))
        return await result if inspect.isawaitable(result) else result
