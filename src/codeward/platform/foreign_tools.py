"""Tools written for smolagents or LangChain, made into codeward tools on the host.

A user moving to codeward keeps the tools they have: `CodeAgent(tools=[...])` takes
them as they are, and they run on the host like any codeward tool, behind the same
argument checks. The library a tool comes from is told by the modules of its
type's classes, never by importing that library, so a base install imports neither.
"""

from __future__ import annotations

from typing import Any

from codeward.tools import JSON_TYPES, Tool

__all__ = ["LangChainTool", "SmolagentsTool", "as_codeward_tool", "foreign_tool", "library_of"]

_LIBRARIES = ("smolagents", "langchain_core")


def library_of(candidate: object) -> str | None:
    """The top-level package ("smolagents", "langchain_core") that defines one of the classes of
    `candidate`'s type, or None: a user's subclass of a library's tool counts as that library's."""
    for klass in type(candidate).__mro__:
        package = klass.__module__.partition(".")[0]
        if package in _LIBRARIES:
            return package
    return None


def foreign_tool(candidate: object) -> Tool | None:
    """`candidate` as a codeward tool if it is a smolagents tool (or managed agent) or a LangChain
    tool, else None, so the caller keeps its own message for what is no tool at all."""
    library = library_of(candidate)
    if library == "smolagents" and hasattr(candidate, "inputs"):
        return SmolagentsTool(candidate)
    if library == "langchain_core" and hasattr(candidate, "invoke"):
        return LangChainTool(candidate)
    return None


def as_codeward_tool(candidate: object) -> Tool:
    """A codeward tool as it is, a smolagents or LangChain tool converted; anything else is refused."""
    if isinstance(candidate, Tool):
        return candidate
    converted = foreign_tool(candidate)
    if converted is None:
        raise TypeError(
            f"{candidate!r} is not a Tool; decorate the function with @tool or subclass Tool "
            "(smolagents and LangChain tools are taken as they are)"
        )
    return converted


def _codeward_type(name: Any) -> str:
    """A JSON-schema type as codeward names it; one codeward has no check for (smolagents'
    "audio", JSON schema's extras) accepts any value."""
    return name if name in JSON_TYPES else "any"


def _codeward_types(kind: Any) -> str | list[str]:
    """One type, or a list of them (JSON schema allows both), as a codeward input's `type`."""
    names = list(dict.fromkeys(_codeward_type(name) for name in _as_list(kind)))
    return names[0] if len(names) == 1 else names


def _as_list(kind: Any) -> list[Any]:
    return kind if isinstance(kind, list) else [kind]


class SmolagentsTool(Tool):
    """A smolagents `Tool` (or a smolagents agent offered as one), called through its own
    `__call__` so that its `setup()` runs once before the first call, as smolagents does."""

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped
        self.name = wrapped.name
        self.description = wrapped.description
        self.inputs = {arg: self._spec(spec) for arg, spec in wrapped.inputs.items()}
        self.output_type = _codeward_type(wrapped.output_type)
        super().__init__()

    @staticmethod
    def _spec(spec: dict[str, Any]) -> dict[str, Any]:
        return {**spec, "type": _codeward_types(spec.get("type", "any"))}

    def forward(self, **arguments: Any) -> Any:
        return self.wrapped(**arguments)


class LangChainTool(Tool):
    """A LangChain `BaseTool`, described by the schema LangChain itself offers to models
    (so injected arguments stay hidden) and called through `invoke`."""

    def __init__(self, wrapped: Any) -> None:
        from langchain_core.utils.function_calling import convert_to_openai_tool

        function = convert_to_openai_tool(wrapped)["function"]
        parameters = function.get("parameters", {})
        required = set(parameters.get("required", []))
        self.wrapped = wrapped
        self.name = function["name"]
        self.description = function.get("description") or wrapped.description
        self.inputs = {
            arg: self._spec(arg, schema, arg in required) for arg, schema in parameters.get("properties", {}).items()
        }
        super().__init__()

    @staticmethod
    def _spec(arg: str, schema: dict[str, Any], required: bool) -> dict[str, Any]:
        """One argument's JSON schema as a codeward input; `Optional[X]` arrives as `anyOf`."""
        branches = schema.get("anyOf", [schema])
        kinds = [kind for branch in branches for kind in _as_list(branch.get("type", "any"))]
        spec: dict[str, Any] = {
            "type": _codeward_types(kinds),
            "description": schema.get("description") or schema.get("title") or arg,
        }
        if not required:
            spec["default"] = schema.get("default")
        return spec

    def forward(self, **arguments: Any) -> Any:
        return self.wrapped.invoke(arguments)
