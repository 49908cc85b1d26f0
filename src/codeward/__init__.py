"""codeward: agents that act by writing Python, run in the sandbox of your choice."""

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
from codeward.platform.tools import FinalAnswerTool, Tool, ToolCallError, ToolDefinitionError, tool

__version__ = "0.1.0"

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
