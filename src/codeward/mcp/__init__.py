"""Tools from MCP servers, for every sandbox: ``MCPTools(server)`` lists a server's tools as codeward tools.

The `mcp` SDK is an optional extra, imported only when `MCPTools` is first used,
so ``import codeward`` never pays for it; without it, that use names the pip line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codeward.mcp.tools import MCPTool, MCPToolError, MCPTools

__all__ = ["MCPTool", "MCPToolError", "MCPTools"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from codeward.executors.base import import_with_extra

    return getattr(import_with_extra("codeward.mcp.tools", needed_by="codeward.mcp", extra="mcp"), name)
