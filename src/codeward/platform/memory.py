"""The agent's memory: what happened at each step, and the messages the model sees.

The system prompt is kept apart from the steps, so `reset=True` clears the run
and keeps the agent's instructions. A memory saves to a run file (`codeward.platform.run_files`):
the record that `ReplayModel` plays and `agent.replay()` shows, with the run's set-up
(`RunSetup`) that `codeward replay` reads as hints.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codeward.executors.base import BlockEvent, BlockUsage
from codeward.executors.displays import Display
from codeward.platform.artifacts import MOST_FILES, Artifact
from codeward.platform.errors import AgentError
from codeward.platform.models import ChatMessage, TokenUsage, ToolCall
from codeward.platform.run_files import RunSetup, load_run_file, write_run
from codeward.wall_events import checked_events

__all__ = [
    "ActionStep",
    "AgentMemory",
    "FinalAnswerStep",
    "MemoryStep",
    "PlanningStep",
    "SystemPromptStep",
    "TaskStep",
    "Timing",
]


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
    #: Files the code wrote under outputs/, new or changed (``CodeAgent(collect_outputs=True)``).
    artifacts: list[Artifact] = field(default_factory=list)
    #: What collecting outputs/ left off, and why (a budget, a link, not a plain file).
    artifact_notes: list[str] = field(default_factory=list)
    action_output: Any = None
    error: AgentError | None = None
    token_usage: TokenUsage | None = None
    is_final_answer: bool = False
    #: What the sandbox's walls refused while the step's block ran (`BlockEvent`), even where the code
    #: caught the refusal.
    events: list[BlockEvent] = field(default_factory=list)
    #: What the step's code block cost in its sandbox (time, CPU, memory, output, tool calls), as the host measured it.
    usage: BlockUsage | None = None

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
            "artifacts": [artifact.to_dict() for artifact in self.artifacts],
            "artifact_notes": list(self.artifact_notes),
            "action_output": _describe(self.action_output),
            "error": self.error.to_dict() if self.error else None,
            "token_usage": self.token_usage.to_dict() if self.token_usage else None,
            "is_final_answer": self.is_final_answer,
            "events": [event.to_dict() for event in self.events],
            "usage": self.usage.to_dict() if self.usage else None,
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

    def block_usage(self) -> BlockUsage | None:
        """What the run's code blocks cost in all (`BlockUsage` `+`); None when no block was measured."""
        total: BlockUsage | None = None
        for step in self.action_steps():
            if step.usage is not None:
                total = step.usage if total is None else total + step.usage
        return total

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
        return write_run(Path(path), self.to_dict(), self.setup)

    @classmethod
    def load(cls, path: str | Path) -> AgentMemory:
        """Rebuild a saved memory: enough to read, show and replay it (live values become text)."""
        data = load_run_file(path)
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


#: The type each figure of a saved `BlockUsage` must have: a saved run is a file someone handed over.
_USAGE_TYPES: dict[str, tuple[type, ...]] = {
    "wall_seconds": (int, float),
    "cpu_seconds": (int, float, type(None)),
    "peak_memory_bytes": (int, type(None)),
    "output_bytes": (int,),
    "tool_calls": (int,),
    "egress_bytes": (int, type(None)),
    "peak_memory_scope": (str,),
}


def saved_block_usage(data: Any) -> BlockUsage | None:
    """A block's usage read back from a saved run or a batch record; None for one missing or malformed."""
    if not isinstance(data, dict) or "wall_seconds" not in data:
        return None
    for name, kinds in _USAGE_TYPES.items():
        value = data.get(name)
        if name in data and (isinstance(value, bool) or not isinstance(value, kinds)):
            return None
    if data.get("peak_memory_scope", "block") not in ("block", "sandbox"):
        return None
    unmeasured = data.get("unmeasured") or {}
    if not isinstance(unmeasured, dict) or not all(isinstance(v, str) for v in unmeasured.values()):
        return None
    known = {name: data[name] for name in _USAGE_TYPES if name in data}
    return BlockUsage(**known, unmeasured={str(k): v for k, v in unmeasured.items()})


def _artifacts(records: Any) -> list[Artifact]:
    """A saved step's artifacts, each checked (`Artifact.from_dict`); malformed ones left out."""
    if not isinstance(records, list):
        return []
    read = (Artifact.from_dict(record) for record in records[:MOST_FILES])
    return [artifact for artifact in read if isinstance(artifact, Artifact)]


def _error(record: dict[str, Any]) -> AgentError:
    """A saved step's error as the kind it was (out of steps, a parsing error...), else a plain AgentError."""
    from codeward.platform import errors

    kind = getattr(errors, str(record.get("type")), None)
    made: type[AgentError] = kind if isinstance(kind, type) and issubclass(kind, AgentError) else AgentError
    return made(str(record.get("message", "")))


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
            artifacts=_artifacts(data.get("artifacts")),
            artifact_notes=[note for note in data.get("artifact_notes") or [] if isinstance(note, str)],
            action_output=data.get("action_output"),
            error=_error(error) if error else None,
            token_usage=_usage(data.get("token_usage")),
            is_final_answer=data.get("is_final_answer", False),
            events=checked_events(data.get("events")),
            usage=saved_block_usage(data.get("usage")),
        )
    raise ValueError(f"unknown step type {kind!r} in saved memory")
