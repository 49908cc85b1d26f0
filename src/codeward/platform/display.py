"""What a run shows on the terminal, with rich: steps, code, logs, errors, timing and tokens.

Every text shown comes from the model, the sandbox or the user, and goes through `visible_text`:
what the code printed cannot move the cursor, write the clipboard or style itself as codeward.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.panel import Panel
from rich.rule import Rule
from rich.syntax import Syntax
from rich.text import Text

from codeward.executors.displays import Display
from codeward.terminal_text import visible, visible_text
from codeward.wording import counted

if TYPE_CHECKING:
    from codeward.platform.memory import ActionStep, AgentMemory, PlanningStep

__all__ = ["AgentLogger", "LogLevel"]


def _code_panel(code: str) -> Panel:
    """The model's code in a box; long lines wrap inside it, since a cut line would hide code that runs."""
    return Panel(Syntax(visible(code), "python", theme="monokai", line_numbers=False, word_wrap=True), title="Code")


class LogLevel(IntEnum):
    OFF = -1
    ERROR = 0
    INFO = 1
    DEBUG = 2


class AgentLogger:
    def __init__(self, level: LogLevel | int = LogLevel.INFO, console: Console | None = None) -> None:
        self.level = LogLevel(level)
        self.console = console or Console(highlight=False)
        #: Whether this step's block output was shown as it came (its observation then leaves the logs out).
        self.showed_block_output = False
        self._line_open = False  # the block's last piece did not end its line

    def _show(self, level: LogLevel, *renderables: Any) -> None:
        if self.level >= level:
            self.console.print(*renderables)

    def task(self, task: str, model_id: str, executor: str | None) -> None:
        where = f" · executor {executor}" if executor else ""
        subtitle = visible_text(f"{model_id}{where}")
        self._show(LogLevel.INFO, Panel(visible_text(task), title="New run", subtitle=subtitle, border_style="cyan"))

    def step_start(self, number: int) -> None:
        self.showed_block_output = False
        self._show(LogLevel.INFO, Rule(f"Step {number}", style="cyan"))

    @property
    def shows_block_output(self) -> bool:
        return self.level >= LogLevel.INFO

    def block_output(self, stream: str, text: str) -> None:
        """A piece of what the step's code printed or showed, on the screen as it comes (stderr in red)."""
        if self.shows_block_output and text:
            self.console.print(visible_text(text, style="red" if stream == "stderr" else ""), end="")
            self.showed_block_output = True
            self._line_open = not text.endswith("\n")

    def code(self, code: str) -> None:
        self._show(LogLevel.INFO, _code_panel(code))

    def model_output(self, text: str) -> None:
        self._show(LogLevel.DEBUG, Panel(visible_text(text), title="Model output", border_style="dim"))

    def observation(self, text: str) -> None:
        if self._line_open:
            self._line_open = False
            self._show(LogLevel.INFO, "")
        self._show(LogLevel.INFO, visible_text(text, style="default"))

    def displays(self, displays: list[Any]) -> None:
        """A line for each display the code showed, as a terminal cannot show images; one whose
        bytes cannot be read says so, and the run goes on."""
        for shown in displays if self.level >= LogLevel.INFO else ():
            line = shown.describe() if isinstance(shown, Display) else f"[{type(shown).__name__} display]"
            self.console.print(visible_text(line, style="dim"))

    def error(self, message: str) -> None:
        self._show(LogLevel.ERROR, visible_text(message, style="bold red"))

    def plan(self, step: PlanningStep) -> None:
        self._show(LogLevel.INFO, Panel(visible_text(step.plan), title="Plan", border_style="magenta"))

    def step_end(self, step: ActionStep) -> None:
        usage = step.token_usage
        tokens = f" · tokens in {usage.input_tokens} out {usage.output_tokens}" if usage else ""
        duration = step.timing.duration or 0.0
        self._show(LogLevel.INFO, Text(f"[step {step.step_number}: {duration:.2f} s{tokens}]", style="dim"))

    def final_answer(self, output: Any) -> None:
        self._show(LogLevel.INFO, visible_text(f"Final answer: {output}", style="bold green"))

    def out_of_steps(self, max_steps: int, reply: Any) -> None:
        """The steps ran out before a final answer: said so, never shown as an answer; the model's
        closing reply (the run's output, which may be code it had no step left to run) in debug."""
        self._show(
            LogLevel.INFO,
            visible_text(f"Out of steps: no final answer after {counted(max_steps, 'step')}", "bold yellow"),
        )
        self._show(
            LogLevel.DEBUG,
            Panel(visible_text(str(reply)), title="Closing reply (not a final answer)", border_style="dim"),
        )

    def replay(self, memory: AgentMemory) -> None:
        """Show a whole run again, whatever the log level."""
        from codeward.platform.errors import AgentMaxStepsError
        from codeward.platform.memory import ActionStep, FinalAnswerStep, PlanningStep, TaskStep

        for step in memory.steps:
            if isinstance(step, TaskStep):
                self.console.print(Panel(visible_text(step.task), title="Task", border_style="cyan"))
            elif isinstance(step, PlanningStep):
                self.console.print(Panel(visible_text(step.plan), title="Plan", border_style="magenta"))
            elif isinstance(step, ActionStep):
                self.console.print(Rule(f"Step {step.step_number}", style="cyan"))
                if step.code_action:
                    self.console.print(_code_panel(step.code_action))
                if step.observations:
                    self.console.print(visible_text(step.observations))
                if step.error:
                    self.console.print(visible_text(step.error.message, style="bold red"))
                out_of_steps = isinstance(step.error, AgentMaxStepsError)
                if step.is_final_answer or (
                    step.action_output is not None and step.code_action is None and not out_of_steps
                ):
                    self.console.print(visible_text(f"Final answer: {step.action_output}", style="bold green"))
            elif isinstance(step, FinalAnswerStep):
                self.console.print(visible_text(f"Final answer: {step.output}", style="bold green"))
