"""The skeleton every kernel-backed executor shares, whatever reaches its kernel (jupyter_client for
jupyter and docker, E2B's SDK for e2b): it remembers the variables and tools it was given, so that a
kernel that replaced a dead one gets them again; keeps what codeward's own cells printed, to show
with the next run; refuses work once closed; and closes a forgotten executor's sandbox.

Subclasses say how one of codeward's cells loads what the host sends (`_load`) and how the
sandbox is released (`close`).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from codeward.executors import codec
from codeward.executors.base import Executor, ExecutorError
from codeward.executors.kernel.bridge import TOOL_MODES, ToolBridge
from codeward.executors.settings import (
    DEFAULT_OUTPUT_BUDGET,
    DEFAULT_PRINT_OUTPUTS_LENGTH,
    checked_bytes,
    checked_seconds,
    checked_tool_names,
    checked_variable_names,
)
from codeward.tools import Tool

__all__ = ["RememberingExecutor"]


class RememberingExecutor(Executor):
    """An executor whose sandbox is a kernel that may be replaced; see the module docstring."""

    def __init__(
        self,
        *,
        timeout_seconds: float,
        tools_mode: str,
        allow_pickle: bool,
        max_output_bytes: int = DEFAULT_OUTPUT_BUDGET,
        max_print_outputs_length: int = DEFAULT_PRINT_OUTPUTS_LENGTH,
    ) -> None:
        if tools_mode not in TOOL_MODES:
            raise ValueError(f"tools_mode must be one of {', '.join(map(repr, TOOL_MODES))}, got {tools_mode!r}")
        self.timeout_seconds = checked_seconds("timeout_seconds", timeout_seconds)
        self.max_output_bytes = checked_bytes("max_output_bytes", max_output_bytes)
        self.max_print_outputs_length = checked_bytes("max_print_outputs_length", max_print_outputs_length)
        self.tools_mode = tools_mode
        self.allow_pickle = allow_pickle
        self._variables: dict[str, Any] = {}
        self._bridge = ToolBridge({}, mode=tools_mode, allow_pickle=allow_pickle)
        self._notes = ""  # what codeward's own cells printed (codec warnings), shown with the next run
        self._closed = False

    @abstractmethod
    def _load(self, what: str, text: str) -> None:
        """Run codeward's cell that loads `text` (encoded "variables" or "tools") in the kernel."""

    def _check_open(self) -> None:
        if self._closed:
            raise ExecutorError(f"this {type(self).__name__} is closed; create a new one")

    def _take_notes(self) -> str:
        """What codeward's own cells printed since the last run, to put before that run's logs."""
        notes, self._notes = self._notes, ""
        return notes

    # -- the contract ------------------------------------------------------------

    def send_variables(self, variables: dict[str, Any]) -> None:
        self._load("variables", self._remember_variables(variables))

    def send_tools(self, tools: dict[str, Tool]) -> None:
        self._load("tools", self._remember_tools(tools))

    def _remember_variables(self, variables: dict[str, Any]) -> str:
        """Check and keep `variables`; return them encoded, for `_load` (sync or awaited) to send."""
        checked_variable_names(variables, tools=self._bridge.tools)
        text = codec.encode_variables(variables, allow_pickle=self.allow_pickle)  # fails before anything is sent
        self._variables.update(variables)
        return text

    def _remember_tools(self, tools: dict[str, Tool]) -> str:
        """Check and keep `tools`; return their descriptions, for `_load` (sync or awaited) to send."""
        checked_tool_names(tools)
        self._bridge = ToolBridge(tools, mode=self.tools_mode, allow_pickle=self.allow_pickle)
        return self._bridge.specs_text

    def __del__(self) -> None:  # a forgotten executor must not leave its sandbox running (or paid for)
        if not getattr(self, "_closed", True):
            try:
                self.close()
            except Exception:  # during interpreter shutdown, modules may already be gone
                pass
