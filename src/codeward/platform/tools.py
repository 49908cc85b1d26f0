"""The tool contract, under the platform's name: `codeward.tools` holds it, below both the platform
and the sandboxes, and this path keeps the names that agents' code has always imported from here."""

from codeward.tools import FinalAnswerTool, FunctionTool, Tool, ToolCallError, ToolDefinitionError, tool

__all__ = ["FinalAnswerTool", "FunctionTool", "Tool", "ToolCallError", "ToolDefinitionError", "tool"]
