"""codeward: agents that act by writing Python, run in the sandbox of your choice.

The names below are imported when first used, so that importing one part of
codeward (a sandbox's worker process imports only the local executor) does not
load the agent, the models and the terminal display with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codeward.platform.agents import ActionOutput, MultiStepAgent, RunResult, ToolOutput
    from codeward.platform.code_agent import CodeAgent
    from codeward.platform.display import AgentLogger, LogLevel
    from codeward.platform.errors import (
        AgentError,
        AgentExecutionError,
        AgentGenerationError,
        AgentMaxStepsError,
        AgentParsingError,
        AgentToolCallError,
        AgentToolExecutionError,
    )
    from codeward.platform.live_blocks import BlockOutputDelta
    from codeward.platform.memory import (
        ActionStep,
        AgentMemory,
        FinalAnswerStep,
        PlanningStep,
        SystemPromptStep,
        TaskStep,
    )
    from codeward.platform.models import (
        ChatMessage,
        LiteLLMModel,
        Model,
        ModelError,
        ReplayModel,
        ScriptedModel,
        TokenUsage,
        ToolCall,
    )
    from codeward.platform.toolcalling_agent import PythonInterpreterTool, ToolCallingAgent
    from codeward.tools import FinalAnswerTool, Tool, ToolCallError, ToolDefinitionError, tool

__version__ = "0.1.0"

_LAZY = {
    "ActionOutput": "codeward.platform.agents",
    "ActionStep": "codeward.platform.memory",
    "AgentError": "codeward.platform.errors",
    "AgentExecutionError": "codeward.platform.errors",
    "AgentGenerationError": "codeward.platform.errors",
    "AgentLogger": "codeward.platform.display",
    "AgentMaxStepsError": "codeward.platform.errors",
    "AgentMemory": "codeward.platform.memory",
    "AgentParsingError": "codeward.platform.errors",
    "AgentToolCallError": "codeward.platform.errors",
    "AgentToolExecutionError": "codeward.platform.errors",
    "BlockOutputDelta": "codeward.platform.live_blocks",
    "ChatMessage": "codeward.platform.models",
    "CodeAgent": "codeward.platform.code_agent",
    "FinalAnswerStep": "codeward.platform.memory",
    "FinalAnswerTool": "codeward.tools",
    "LiteLLMModel": "codeward.platform.models",
    "LogLevel": "codeward.platform.display",
    "Model": "codeward.platform.models",
    "ModelError": "codeward.platform.models",
    "MultiStepAgent": "codeward.platform.agents",
    "PlanningStep": "codeward.platform.memory",
    "PythonInterpreterTool": "codeward.platform.toolcalling_agent",
    "ReplayModel": "codeward.platform.models",
    "RunResult": "codeward.platform.agents",
    "ScriptedModel": "codeward.platform.models",
    "SystemPromptStep": "codeward.platform.memory",
    "TaskStep": "codeward.platform.memory",
    "TokenUsage": "codeward.platform.models",
    "Tool": "codeward.tools",
    "ToolCall": "codeward.platform.models",
    "ToolCallError": "codeward.tools",
    "ToolCallingAgent": "codeward.platform.toolcalling_agent",
    "ToolDefinitionError": "codeward.tools",
    "ToolOutput": "codeward.platform.agents",
    "tool": "codeward.tools",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'codeward' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "ActionOutput",
    "ActionStep",
    "AgentError",
    "AgentExecutionError",
    "AgentGenerationError",
    "AgentLogger",
    "AgentMaxStepsError",
    "AgentMemory",
    "AgentParsingError",
    "AgentToolCallError",
    "AgentToolExecutionError",
    "BlockOutputDelta",
    "ChatMessage",
    "CodeAgent",
    "FinalAnswerStep",
    "FinalAnswerTool",
    "LiteLLMModel",
    "LogLevel",
    "Model",
    "ModelError",
    "MultiStepAgent",
    "PlanningStep",
    "PythonInterpreterTool",
    "ReplayModel",
    "RunResult",
    "ScriptedModel",
    "SystemPromptStep",
    "TaskStep",
    "TokenUsage",
    "Tool",
    "ToolCall",
    "ToolCallError",
    "ToolCallingAgent",
    "ToolDefinitionError",
    "ToolOutput",
    "tool",
]
