"""What an inline tool carries into the sandbox: its source, and what that source uses from its module.

With ``tools_mode="inline"`` (and for each tool that can go there under ``"auto"``) a
`@tool` function's source runs inside the sandbox, in a namespace of its own. Source alone is not enough when
the function uses a constant from the top of its file or a module the file
imports: it would be accepted here and fail there with a `NameError` the model
cannot fix. So the names the source reads from its globals are found (in its
compiled code, so attribute names and locals never count) and each is shipped
as what it is:

- a module, as an import of the module by its name;
- a function or class that its module makes importable, as an import of it;
- a plain value the codec carries (never pickled), as that value;
- another tool being sent, as that tool: only where the module's name is that very tool, so a
  tool of a stranger's (an MCP server's) never takes the place of what the module means.

Anything else (a helper defined beside the tool, an object the codec cannot
carry, a name the module does not define) is refused when the tools are sent,
naming the tool, the name and the way out. A tool that can only run on the host
says why in its `host_only` attribute (an MCP tool: its server runs beside the
host), and is refused with that reason rather than as an object to rewrite. Only names the code reads are
shipped, and a value that is one of the host's environment variables is
refused: a secret reaches the sandbox only when the user sends it there.
"""

from __future__ import annotations
import __future__

import builtins
import dis
import inspect
import os
import sys
import types
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from codeward.executors import codec
from codeward.tools import FunctionTool, Tool, ToolDefinitionError

__all__ = ["InlineToolRefused", "inline_spec"]

#: The way out every sandbox offers: it calls the tool on the host.
HOST_WAY_OUT = "use tools_mode='auto' (runs it on the host, the others inline) or tools_mode='host'"
#: How a tool stops needing a name from its module.
NAME_WAYS_OUT = (
    "define it inside the tool",
    "take it as an argument",
    "import it at the top of the tool's module from a module the sandbox has, such as the standard library",
)
#: Names every inline tool's namespace has in the sandbox already.
_GIVEN = frozenset({"__name__", "__builtins__"})
#: Instructions that read a name from the globals (LOAD_NAME: module level and class bodies).
_GLOBAL_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"})
#: Shorter environment values (``1``, ``en_US``) match constants by chance, and hold no secret.
_SECRET_LENGTH = 8


class InlineToolRefused(ToolDefinitionError):
    """A tool that tools_mode='inline' cannot ship, with the ways out, running it on the host the last."""

    def __init__(self, tool: str, reason: str, ways_out: Sequence[str]) -> None:
        super().__init__(f"tool {tool!r} {reason}; {_either([*ways_out, HOST_WAY_OUT])}")
        #: Why it cannot go inline, without the ways out: what "auto" logs as it places the tool on the host.
        self.reason = reason


def _either(ways: Sequence[str]) -> str:
    return f"{', '.join(ways[:-1])}, or {ways[-1]}" if len(ways) > 1 else ways[0]


def inline_spec(name: str, tool: Tool, tools: Mapping[str, Tool]) -> dict[str, Any]:
    """The source that defines the tool in the sandbox, and the `context` it needs there.

    `tools` are the tools sent with it: the sandbox defines those itself.
    """
    shippable = _shippable(name, tool)
    source = _source(name, shippable)
    return {"source": source, "context": _context(name, shippable.function, source, tools)}


def _shippable(name: str, tool: Tool) -> FunctionTool:
    """The tool, if it is a function that can run from its source alone."""
    host_only = getattr(tool, "host_only", None)
    if isinstance(host_only, str):
        raise InlineToolRefused(name, host_only, [])
    if not isinstance(tool, FunctionTool):
        raise InlineToolRefused(
            name,
            f"is a {type(tool).__name__} object, whose methods and state cannot be shipped into the sandbox",
            ["make it a self-contained @tool function (its state can be sent as a variable and passed to it)"],
        )
    if tool.is_async:
        raise InlineToolRefused(
            name,
            "is an async def function, which the model's code would get as a coroutine to await",
            ["make it a plain def function"],
        )
    code = tool.function.__code__
    if code.co_freevars:
        raise InlineToolRefused(
            name,
            f"uses names from an enclosing function ({', '.join(code.co_freevars)}), which do not exist in the sandbox",
            ["define it at module level, self-contained"],
        )
    if tool.function.__name__ != name:
        raise InlineToolRefused(
            name,
            f"is the function {tool.function.__name__!r}, and the sandbox defines a tool by its function's name",
            ["register it under its function's name"],
        )
    return tool


def _source(name: str, tool: FunctionTool) -> str:
    """The function's source, compiled in the sandbox as in its module: annotations stay unevaluated there too."""
    try:
        source = tool.source()
    except ToolDefinitionError as error:
        raise InlineToolRefused(
            name, f"has no source to ship ({error.__cause__})", ["define it in a .py file"]
        ) from error
    if tool.function.__code__.co_flags & __future__.annotations.compiler_flag:
        return f"from __future__ import annotations\n{source}"
    return source


def _context(name: str, function: Any, source: str, tools: Mapping[str, Tool]) -> dict[str, Any]:
    """What the source reads from its module, as imports, encoded constants and other tools.

    A name is another tool only where the module binds it to that tool itself, as a call on the host
    would find it: a tool sent under a name the module uses for something else (an MCP server's
    ``fetch`` beside ``from urllib.request import urlopen as fetch``) never takes its place."""
    read, bound = _global_names(compile(source, f"<tool {name}>", "exec"))
    namespace: dict[str, Any] = function.__globals__
    context: dict[str, Any] = {"imports": [], "constants": {}, "tools": []}
    for used in sorted(read - _GIVEN):
        if used in tools and namespace.get(used) is tools[used]:
            context["tools"].append(used)
        elif used in namespace:
            kind, carried = _carried(name, used, namespace[used], function.__module__)
            if kind == "imports":
                context["imports"].append([used, *carried])
            else:
                context["constants"][used] = carried
        elif used not in bound and not hasattr(builtins, used):
            raise InlineToolRefused(name, f"uses {used!r}, which its module does not define", NAME_WAYS_OUT)
    return context


def _global_names(module_code: types.CodeType) -> tuple[set[str], set[str]]:
    """The names the compiled source reads from its globals, and those its functions bind there (``global``)."""
    read: set[str] = set()
    bound: set[str] = set()
    for code in _code_objects(module_code):
        instructions = list(dis.get_instructions(code))
        own = {i.argval for i in instructions if i.opname == "STORE_NAME"}  # a class body reads its own names too
        read |= {
            i.argval
            for i in instructions
            if i.opname in _GLOBAL_LOADS and not (i.opname == "LOAD_NAME" and i.argval in own)
        }
        bound |= {i.argval for i in instructions if i.opname == "STORE_GLOBAL"}
    defined = {i.argval for i in dis.get_instructions(module_code) if i.opname == "STORE_NAME"}  # the function
    return read - defined, bound


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _code_objects(constant)


def _carried(tool: str, used: str, value: Any, own_module: str) -> tuple[str, Any]:
    """How one name goes into the sandbox: ("imports", [module, attribute path]) or ("constants", codec text)."""
    if isinstance(value, types.ModuleType):
        if value.__name__ == "__main__" or sys.modules.get(value.__name__) is not value:
            raise InlineToolRefused(tool, f"uses the module {used!r}, which cannot be imported by name", NAME_WAYS_OUT)
        return "imports", [value.__name__, []]
    definition = callable(value) and isinstance(getattr(value, "__qualname__", None), str)
    module_name = getattr(value, "__module__", None)
    if definition and module_name in (own_module, "__main__"):
        kind = "class" if inspect.isclass(value) else "function"
        raise InlineToolRefused(
            tool, f"uses {used!r}, a {kind} defined beside it, which the sandbox does not have", NAME_WAYS_OUT
        )
    path = _import_path(used, value, module_name) if module_name not in (own_module, "__main__") else None
    if path is not None:
        return "imports", [module_name, path]
    if definition:
        raise InlineToolRefused(
            tool, f"uses {used!r}, which cannot be imported by name from {module_name!r}", NAME_WAYS_OUT
        )
    return "constants", _constant(tool, used, value)


def _import_path(used: str, value: Any, module_name: Any) -> list[str] | None:
    """The attributes that reach `value` from the module it says it comes from (``os.environ``, ``math.sqrt``).

    An import ships no data: the sandbox's own module gives the value there.
    """
    module = sys.modules.get(module_name) if isinstance(module_name, str) else None
    if module is None:
        return None
    qualname = getattr(value, "__qualname__", None)
    paths = [qualname.split("."), [used]] if isinstance(qualname, str) else [[used]]
    return next((path for path in paths if _same(_attribute(module, path), value)), None)


def _attribute(holder: Any, path: list[str]) -> Any:
    for attribute in path:
        holder = getattr(holder, attribute, None)
    return holder


def _same(found: Any, value: Any) -> bool:
    """The same object; a bound method (``from random import randint``) is made anew at each lookup."""
    return found is value or (inspect.ismethod(value) and found == value)


def _constant(tool: str, used: str, value: Any) -> str:
    """The value as codec text the sandbox decodes: never pickled, and never one of the host's secrets."""
    try:
        text = codec.dumps(value)
    except codec.CodecError:
        kind = type(value)
        reason = (
            f"uses {used!r}, a {kind.__module__}.{kind.__qualname__} object: only plain values (numbers, text, "
            "lists, dicts and the like) are shipped"
        )
        raise InlineToolRefused(tool, reason, NAME_WAYS_OUT) from None
    variable = _environment_variable_holding(value)
    if variable is not None:
        raise InlineToolRefused(
            tool,
            f"uses {used!r}, which holds the value of the host's environment variable {variable}; codeward "
            "never ships the host's environment on its own",
            ["set it in the sandbox (envs= on e2b, env= on jupyter) and read os.environ inside the tool"],
        )
    return text


def _environment_variable_holding(value: Any) -> str | None:
    """The host environment variable whose value appears in `value` (an API key read when the module loaded)."""
    held = set(_strings_in(value))
    return next((key for key, text in os.environ.items() if len(text) >= _SECRET_LENGTH and text in held), None)


def _strings_in(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings_in(key)
            yield from _strings_in(item)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            yield from _strings_in(item)
