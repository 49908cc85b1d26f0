"""The agent's error tree.

Every `AgentError` but `AgentGenerationError` is recorded on the step and shown
to the model, which can then correct itself; a model that cannot answer at all
is the caller's problem, so that one is raised.
"""

from __future__ import annotations

__all__ = [
    "AgentError",
    "AgentExecutionError",
    "AgentGenerationError",
    "AgentMaxStepsError",
    "AgentParsingError",
    "AgentToolCallError",
    "AgentToolExecutionError",
]


class AgentError(Exception):
    """Something the model did went wrong; the text is written for the model to read."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict[str, str]:
        return {"type": type(self).__name__, "message": self.message}


class AgentParsingError(AgentError):
    """The model's output held no code or tool call that could be parsed."""


class AgentExecutionError(AgentError):
    """The model's code or tool call failed while running."""


class AgentToolCallError(AgentExecutionError):
    """A tool was called wrongly: unknown name or arguments that do not fit."""


class AgentToolExecutionError(AgentExecutionError):
    """A tool raised while running."""


class AgentMaxStepsError(AgentError):
    """The run used all its steps without a final answer."""


class AgentGenerationError(AgentError):
    """The model itself failed (unreachable, out of scripted responses...): raised to the caller."""
