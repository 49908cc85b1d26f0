"""The agent's memory: what happened at each step, and the messages the model sees.

The system prompt is kept apart from the steps, so `reset=True` clears the run
and keeps the agent's instructions. A memory saves to JSON: the record that
`ReplayModel` plays and `agent.replay()` shows, with the run's set-up (`RunSetup`)
that `codeward replay` reads as hints.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codeward.executors.displays import Display
from codeward.platform.errors import AgentError
from codeward.platform.models import ChatMessage, TokenUsage, ToolCall

__all__ = [
    "RUN_RECORD",
    "ActionStep",
    "AgentMemory",
    "FinalAnswerStep",
    "MemoryStep",
    "PlanningStep",
    "RunSetup",
    "SystemPromptStep",
    "TaskStep",
    "Timing",
    "ToolSource",
    "VariableSource",
    "plain_settings",
]

#: The key of a saved run's set-up record, which `codeward replay` reads.
RUN_RECORD = "codeward_run"

#: The executor settings a saved run records: limits and modes that say how the code ran. Never a
#: path, an environment, a key or a connection, so a run file can be handed to anyone.
_PLAIN_SETTINGS = (
    "timeout_seconds",
    "max_operations",
    "max_memory_bytes",
    "max_print_outputs_length",
    "max_output_bytes",
    "isolation",
    "confinement",
    "tools_mode",
    "allow_pickle",
    "kernel_name",
    "sandbox_timeout",
    "allow_internet_access",
)


@dataclass
class Timing:
    start_time: float = field(default_factory=time.time)
    end_time: float | None = None

    @property
    def duration(self) -> float | None:
        return None if self.end_time is None else self.end_time - self.start_time

    def to_dict(self) -> dict[str, float | None]:
        return {"start_time": self.start_time, "end_time": self.end_time, "duration": self.duration}


class MemoryStep:
    def to_messages(self, summary_mode: bool = False) -> list[ChatMessage]:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError


def _user(text: str) -> ChatMessage:
    return ChatMessage("user", text)


@dataclass
class SystemPromptStep(MemoryStep):
    system_prompt: str

    def to_messages(self, summary_mode: bool = False) -> list[ChatMessage]:
        return [] if summary_mode else [ChatMessage("system", self.system_prompt)]

    def to_dict(self) -> dict[str, Any]:
        return {"type": "system_prompt", "system_prompt": self.system_prompt}


@dataclass
class TaskStep(MemoryStep):
    task: str
    task_images: list[Any] | None = None

    def to_messages(self, summary_mode: bool = False) -> list[ChatMessage]:
        text = f"New task:\n{self.task}"
        if not self.task_images:
            return [_user(text)]
        from codeward.platform.images import image_parts

        return [ChatMessage("user", [{"type": "text", "text": text}, *image_parts(self.task_images)])]

    def to_dict(self) -> dict[str, Any]:
        return {"type": "task", "task": self.task, "images": len(self.task_images or [])}


@dataclass
class PlanningStep(MemoryStep):
    model_input_messages: list[ChatMessage]
    model_output_message: ChatMessage
    plan: str
    timing: Timing
    token_usage: TokenUsage | None = None

    def to_messages(self, summary_mode: bool = False) -> list[ChatMessage]:
        if summary_mode:
            return []
        return [ChatMessage("assistant", self.plan.strip()), _user("Now proceed and carry out this plan.")]

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "planning",
            "plan": self.plan,
            "model_output_message": self.model_output_message.to_dict(),
            "timing": self.timing.to_dict(),
            "token_usage": self.token_usage.to_dict() if self.token_usage else None,
        }


@dataclass
class ActionStep(MemoryStep):
    step_number: int
    timing: Timing = field(default_factory=Timing)
    model_input_messages: list[ChatMessage] | None = None
    model_output_message: ChatMessage | None = None
    model_output: str | None = None
    tool_calls: list[ToolCall] | None = None
    code_action: str | None = None
    observations: str | None = None
    observations_images: list[Any] | None = None
    #: What the code showed (plots, images, HTML) as the sandbox sent it: saved, never shown to the model.
    displays: list[Display] = field(default_factory=list)
    action_output: Any = None
    error: AgentError | None = None
    token_usage: TokenUsage | None = None
    is_final_answer: bool = False

    def to_messages(self, summary_mode: bool = False) -> list[ChatMessage]:
        messages = []
        if self.model_output and self.model_output.strip() and not summary_mode:
            messages.append(ChatMessage("assistant", self.model_output.strip()))
        elif self.tool_calls and not self.code_action:
            calls = [call.to_dict() for call in self.tool_calls]
            messages.append(ChatMessage("assistant", "Calling tools:\n" + json.dumps(calls, default=str)))
        if self.observations is not None:
            messages.append(_user(f"Observation:\n{self.observations}"))
        if self.error is not None:
            messages.append(
                _user(
                    f"Error:\n{self.error.message}\n"
                    "Now let's retry: take care not to repeat previous errors! "
                    "If you have retried several times, try a completely different approach."
                )
            )
        return messages

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "action",
            "step_number": self.step_number,
            "timing": self.timing.to_dict(),
            "model_output_message": self.model_output_message.to_dict() if self.model_output_message else None,
            "model_output": self.model_output,
            "tool_calls": [call.to_dict() for call in self.tool_calls or []],
            "code_action": self.code_action,
            "observations": self.observations,
            "displays": [shown.to_dict() for shown in self.displays],
            "action_output": _describe(self.action_output),
            "error": self.error.to_dict() if self.error else None,
            "token_usage": self.token_usage.to_dict() if self.token_usage else None,
            "is_final_answer": self.is_final_answer,
        }


@dataclass
class FinalAnswerStep(MemoryStep):
    output: Any

    def to_messages(self, summary_mode: bool = False) -> list[ChatMessage]:
        return []

    def to_dict(self) -> dict[str, Any]:
        return {"type": "final_answer", "output": _describe(self.output)}


def _describe(value: Any) -> Any:
    """JSON-safe form of a value for the saved record; the live value stays in memory."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)[:2000]


def plain_settings(executor: object) -> dict[str, Any]:
    """The executor's settings worth recording: the allowed names, and only plain values."""
    settings = {}
    for name in _PLAIN_SETTINGS:
        value = getattr(executor, name, None)
        if isinstance(value, (bool, int, float, str)):
            settings[name] = value
    return settings


@dataclass(frozen=True)
class ToolSource:
    """Where a tool came from, so a replay can name the `--tools` spec or `--mcp` server that finds it again."""

    name: str
    module: str | None = None
    attr: str | None = None
    file: str | None = None
    #: The command (or URL) of the MCP server that offers the tool; a tool says so with `server_command`.
    server: str | None = None

    @classmethod
    def of(cls, tool: Any) -> ToolSource:
        """Look the tool up by identity in its module; a module run as a script is named by its file.

        Only modules already imported are read: recording a tool never imports anything. A tool
        that a server offers (an MCP tool) names the server instead: its module is not where it lives.
        """
        server = getattr(tool, "server_command", None)
        if isinstance(server, str):
            return cls(tool.name, server=server)
        function = getattr(tool, "function", None)
        module_name = getattr(function if function is not None else type(tool), "__module__", None) or ""
        module = sys.modules.get(module_name)
        attr = next((key for key, value in vars(module).items() if value is tool), None) if module else None
        if attr is None:
            return cls(tool.name)
        if module_name != "__main__":
            return cls(tool.name, module=module_name, attr=attr)
        file = getattr(module, "__file__", None)
        return cls(tool.name, attr=attr, file=str(Path(file).resolve())) if file else cls(tool.name)

    def spec(self, folder: Path) -> str | None:
        """The spec as `--tools` takes it, a file relative to `folder`; None where the origin is unknown."""
        if self.file is not None:
            where = os.path.relpath(self.file, folder.resolve())
        elif self.module is not None:
            where = self.module
        else:
            return None
        return f"{where}:{self.attr}" if self.attr else where

    def to_dict(self, folder: Path) -> dict[str, Any]:
        if self.server is not None:
            return {"name": self.name, "server": self.server}
        spec = self.spec(folder)
        return {"name": self.name, "spec": spec} if spec else {"name": self.name}


@dataclass(frozen=True)
class VariableSource:
    """A variable's name and where its value came from (never the value: it may be private)."""

    name: str
    origin: str = "python"
    file: str | None = None

    def to_dict(self, folder: Path) -> dict[str, Any]:
        record: dict[str, Any] = {"name": self.name, "from": self.origin}
        if self.file is not None:
            record["file"] = os.path.relpath(self.file, folder.resolve())
        return record


@dataclass
class RunSetup:
    """How a run was set up, saved with it so that a replay can say what it needs to run the same way.

    Names, plain settings and origins only. A saved run may come from a stranger, so a replay
    shows these as suggestions and acts only on what its user passes.
    """

    tools: list[ToolSource]
    variables: list[VariableSource]
    planning_interval: int | None = None
    executor: str | None = None
    executor_settings: dict[str, Any] = field(default_factory=dict)
    authorized_imports: list[str] = field(default_factory=list)

    def to_dict(self, folder: Path) -> dict[str, Any]:
        """The record, with file paths relative to `folder` (where the run is saved)."""
        return {
            "executor": self.executor,
            "executor_settings": dict(self.executor_settings),
            "authorized_imports": list(self.authorized_imports),
            "planning_interval": self.planning_interval,
            "tool_sources": [tool.to_dict(folder) for tool in self.tools],
            "variable_sources": [variable.to_dict(folder) for variable in self.variables],
        }


class AgentMemory:
    """The system prompt and the steps of the current run, and how that run was set up."""

    def __init__(self, system_prompt: str) -> None:
        self.system_prompt = SystemPromptStep(system_prompt)
        self.steps: list[MemoryStep] = []
        self.setup: RunSetup | None = None

    def reset(self) -> None:
        self.steps = []

    def to_messages(self, summary_mode: bool = False) -> list[ChatMessage]:
        messages = self.system_prompt.to_messages(summary_mode)
        for step in self.steps:
            messages.extend(step.to_messages(summary_mode))
        return messages

    def action_steps(self) -> list[ActionStep]:
        return [step for step in self.steps if isinstance(step, ActionStep)]

    def token_usage(self) -> TokenUsage:
        total = TokenUsage()
        for step in self.steps:
            usage = getattr(step, "token_usage", None)
            if usage:
                total += usage
        return total

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "codeward.memory/1",
            "system_prompt": self.system_prompt.system_prompt,
            "steps": [step.to_dict() for step in self.steps],
        }

    def save(self, path: str | Path) -> Path:
        """Write the run as JSON, with its set-up, so that `codeward replay` can say what it needs."""
        path = Path(path)
        data = self.to_dict()
        if self.setup is not None:
            data[RUN_RECORD] = self.setup.to_dict(path.parent)
        path.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> AgentMemory:
        """Rebuild a saved memory: enough to read, show and replay it (live values become text)."""
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or "steps" not in data:
            raise ValueError(f"{path} is not a saved agent memory (no 'steps')")
        memory = cls(data.get("system_prompt", ""))
        memory.steps = [_step_from_dict(step) for step in data["steps"]]
        return memory


def _timing(data: dict[str, Any] | None) -> Timing:
    data = data or {}
    return Timing(data.get("start_time") or 0.0, data.get("end_time"))


def _usage(data: dict[str, Any] | None) -> TokenUsage | None:
    return TokenUsage(data["input_tokens"], data["output_tokens"]) if data else None


def _step_from_dict(data: dict[str, Any]) -> MemoryStep:
    kind = data.get("type")
    if kind == "task":
        return TaskStep(data["task"])
    if kind == "planning":
        return PlanningStep(
            [],
            ChatMessage.from_dict(data["model_output_message"]),
            data["plan"],
            _timing(data.get("timing")),
            _usage(data.get("token_usage")),
        )
    if kind == "final_answer":
        return FinalAnswerStep(data.get("output"))
    if kind == "action":
        error = data.get("error")
        message = data.get("model_output_message")
        return ActionStep(
            step_number=data["step_number"],
            timing=_timing(data.get("timing")),
            model_output_message=ChatMessage.from_dict(message) if message else None,
            model_output=data.get("model_output"),
            tool_calls=[
                ToolCall(c["function"]["name"], c["function"]["arguments"], c["id"])
                for c in data.get("tool_calls") or []
            ]
            or None,
            code_action=data.get("code_action"),
            observations=data.get("observations"),
            displays=[shown for shown in map(Display.from_dict, data.get("displays") or []) if shown is not None],
            action_output=data.get("action_output"),
            error=AgentError(error["message"]) if error else None,
            token_usage=_usage(data.get("token_usage")),
            is_final_answer=data.get("is_final_answer", False),
        )
    raise ValueError(f"unknown step type {kind!r} in saved memory")
