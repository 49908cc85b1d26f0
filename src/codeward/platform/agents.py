"""The run loop every agent shares: task, steps, planning, errors fed back, final answer.

What a step *does* (run code in a sandbox, or call tools) is the subclass's
`_step_stream`; everything around it lives here once.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import inspect
import itertools
import reprlib
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, overload

from codeward import tracing
from codeward.effects import Steps, aevents, awaited, blocking, events, watched
from codeward.executors.base import BlockUsage, ExecutorError
from codeward.executors.settings import taken_name
from codeward.platform.artifacts import StepsArtifacts
from codeward.platform.display import AgentLogger, LogLevel
from codeward.platform.errors import AgentError, AgentGenerationError, AgentMaxStepsError
from codeward.platform.live_blocks import BlockOutputDelta
from codeward.platform.memory import (
    ActionStep,
    AgentMemory,
    FinalAnswerStep,
    MemoryStep,
    PlanningStep,
    TaskStep,
    Timing,
)
from codeward.platform.models import ChatMessage, Model, ModelError, TokenUsage, ToolCall
from codeward.platform.prompts import render, validate_prompt_templates
from codeward.platform.run_effects import ModelAnswer, ModelDeltas
from codeward.platform.run_files import RunSetup, ToolSource, VariableSource
from codeward.tools import FinalAnswerTool, Tool
from codeward.wording import counted

__all__ = ["ActionOutput", "ManagedAgentTool", "MultiStepAgent", "RunResult", "ToolOutput", "describe_variables"]


@dataclass
class ActionOutput:
    """What one action produced; `is_final_answer` ends the run."""

    output: Any
    is_final_answer: bool


@dataclass
class ToolOutput:
    """The result of one tool call made by a tool-calling agent."""

    id: str
    output: Any
    is_final_answer: bool
    observation: str
    tool_call: ToolCall


@dataclass
class RunResult(StepsArtifacts):
    """A whole run: its answer, how it ended, its steps, tokens and time; `artifacts`, the files collected."""

    output: Any
    state: str
    steps: list[MemoryStep]
    token_usage: TokenUsage
    timing: Timing
    #: What the run's code blocks cost in their sandbox, summed over its steps; None when none was measured.
    usage: BlockUsage | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "output": self.output,
            "state": self.state,
            "steps": [step.to_dict() for step in self.steps],
            "token_usage": self.token_usage.to_dict(),
            "timing": self.timing.to_dict(),
            "usage": self.usage.to_dict() if self.usage else None,
        }


class _InOrder(reprlib.Repr):
    """reprlib's short forms, with a dict's keys in the order the user gave them (reprlib sorts them)."""

    def repr_dict(self, x: dict[Any, Any], level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        items = [
            f"{self.repr1(key, level - 1)}: {self.repr1(x[key], level - 1)}"
            for key in itertools.islice(x, self.maxdict)
        ]
        return "{" + ", ".join(items) + (", ..." if len(x) > self.maxdict else "") + "}"


_PREVIEW = _InOrder()
_PREVIEW.maxstring = 80
_PREVIEW.maxother = 80
_PREVIEW.maxlist = _PREVIEW.maxtuple = _PREVIEW.maxset = _PREVIEW.maxdict = 5


def _preview(value: Any) -> str:
    """A short description that never renders a large value whole."""
    kind = type(value).__name__
    shape = getattr(value, "shape", None)
    if (shape is not None and hasattr(value, "dtype")) or kind in ("DataFrame", "Series"):
        columns = getattr(value, "columns", None)
        names = f", columns {_PREVIEW.repr(list(columns[:10]))}" if columns is not None else ""
        return f"{kind}, shape {tuple(shape or ())}{names}"
    size = f", {counted(len(value), 'item')}" if isinstance(value, (list, tuple, dict, set, frozenset)) else ""
    if isinstance(value, str) and len(value) > 80:
        size = f", {len(value)} characters"
    text = _PREVIEW.repr(value)
    return f"{kind}{size}: {text[:200]}"


def describe_variables(variables: dict[str, Any]) -> str:
    lines = [f"- {name} ({_preview(value)})" for name, value in variables.items()]
    return "\nYou have been given these variables, which your code can use directly by name:\n" + "\n".join(lines)


@contextlib.contextmanager
def _model_failures() -> Iterator[None]:
    """Whatever the model layer raises reaches the caller as one error type, saying it was the model."""
    try:
        yield
    except AgentError:
        raise
    except Exception as error:  # a ModelError's message says it all; another's type is part of what it says
        said = str(error) if isinstance(error, ModelError) else f"{type(error).__name__}: {error}"
        raise AgentGenerationError(f"the model failed to answer: {said}") from error


def _describe_answer(span: tracing.Span, message: ChatMessage) -> None:
    """What the model's answer cost, and why it stopped, on its ``chat`` span."""
    usage = message.token_usage
    if usage is not None:
        span.set({tracing.INPUT_TOKENS: usage.input_tokens, tracing.OUTPUT_TOKENS: usage.output_tokens})
    if message.finish_reason:
        span.set({tracing.FINISH_REASONS: [message.finish_reason]})


def _takes_agent(function: Callable[..., Any]) -> bool:
    """Whether `function` accepts `agent=`: callbacks and final answer checks written for smolagents
    take it, older ones do not, and both kinds work unchanged."""
    try:
        parameters: Mapping[str, inspect.Parameter] = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    return "agent" in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())


def _call_callback(callback: Callable[..., Any], step: MemoryStep | BlockOutputDelta, agent: MultiStepAgent) -> None:
    if _takes_agent(callback):
        callback(step, agent=agent)
    else:
        callback(step)


def _as_tool(candidate: object) -> Tool:
    """A codeward tool, or a smolagents or LangChain tool converted to one; the conversion is
    imported only when something else is given, so codeward alone never imports those libraries."""
    if isinstance(candidate, Tool):
        return candidate
    from codeward.platform.foreign_tools import as_codeward_tool

    return as_codeward_tool(candidate)


class MultiStepAgent:
    """Runs a task in steps until the model gives a final answer or the steps run out."""

    prompt_kind = "code_agent"

    def __init__(
        self,
        tools: Iterable[Tool],
        model: Model,
        prompt_templates: dict[str, Any] | None = None,
        instructions: str | None = None,
        max_steps: int = 20,
        add_base_tools: bool = False,
        verbosity_level: LogLevel | int = LogLevel.INFO,
        managed_agents: Iterable[MultiStepAgent] | None = None,
        step_callbacks: list[Callable[..., Any]] | dict[type, list[Callable[..., Any]]] | None = None,
        planning_interval: int | None = None,
        name: str | None = None,
        description: str | None = None,
        provide_run_summary: bool = False,
        final_answer_checks: list[Callable[..., Any]] | None = None,
        return_full_result: bool = False,
        logger: AgentLogger | None = None,
    ) -> None:
        from codeward.platform.prompts import load_prompt_templates

        if not isinstance(model, Model) and not callable(getattr(model, "generate", None)):
            raise TypeError(f"model must be a codeward Model (e.g. LiteLLMModel), got {type(model).__name__}")
        if not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"max_steps must be a positive integer, got {max_steps!r}")
        if planning_interval is not None and (not isinstance(planning_interval, int) or planning_interval < 1):
            raise ValueError(f"planning_interval must be a positive integer or None, got {planning_interval!r}")
        self.model = model
        self.prompt_templates = prompt_templates or load_prompt_templates(self.prompt_kind)
        validate_prompt_templates(self.prompt_templates)
        self.instructions = instructions
        self.max_steps = max_steps
        self.planning_interval = planning_interval
        self.name = name
        self.description = description
        self.provide_run_summary = provide_run_summary
        self.final_answer_checks = list(final_answer_checks or [])
        self.return_full_result = return_full_result
        self.logger = logger or AgentLogger(verbosity_level)
        self.managed_agents = self._setup_managed_agents(managed_agents)
        self.tools = self._setup_tools(tools, add_base_tools)
        self.step_callbacks = step_callbacks
        self.state: dict[str, Any] = {}
        self.memory = AgentMemory(self.initialize_system_prompt())
        self.task = ""
        self.step_number = 0
        self.interrupt_switch = False

    # -- set-up -----------------------------------------------------------------

    def _setup_managed_agents(self, agents: Iterable[MultiStepAgent] | None) -> dict[str, ManagedAgentTool]:
        if isinstance(agents, (MultiStepAgent, str)):
            raise TypeError(f"managed_agents must be a list of agents, e.g. managed_agents=[helper], got {agents!r}")
        managed: dict[str, ManagedAgentTool] = {}
        for agent in agents or []:
            if not agent.name or not agent.description:
                raise ValueError("a managed agent needs a name and a description, so the manager knows when to call it")
            if agent.name in managed:
                raise ValueError(f"two managed agents are named {agent.name!r}; names must be unique")
            managed[agent.name] = ManagedAgentTool(agent)
        return managed

    def _base_tools(self) -> list[Tool]:
        return []

    def _setup_tools(self, tools: Iterable[Tool], add_base_tools: bool) -> dict[str, Tool]:
        if isinstance(tools, (Tool, str)):
            lone = f", not the string {tools!r}" if isinstance(tools, str) else ""
            raise TypeError(f"tools must be a list of tools, e.g. tools=[my_tool]{lone}")
        table: dict[str, Tool] = {}
        for given in [*tools, *(self._base_tools() if add_base_tools else [])]:
            tool = _as_tool(given)
            if tool.name in table:
                raise ValueError(f"two tools are named {tool.name!r}; tool names must be unique")
            if tool.name in self.managed_agents:
                raise ValueError(f"{tool.name!r} names both a tool and a managed agent; names must be unique")
            if tool.name == "final_answer" and not isinstance(tool, FinalAnswerTool):
                raise ValueError(
                    f"the tool {tool!r} is named final_answer, which ends the run with its argument as the answer; "
                    "rename it, or subclass codeward.tools.FinalAnswerTool to change how answers are given"
                )
            table[tool.name] = tool
        table.setdefault("final_answer", FinalAnswerTool())
        return table

    def initialize_system_prompt(self) -> str:
        return render(self.prompt_templates["system_prompt"], **self._prompt_variables())

    def _prompt_variables(self) -> dict[str, Any]:
        return {"tools": self.tools, "managed_agents": self.managed_agents, "custom_instructions": self.instructions}

    # -- running ------------------------------------------------------------------

    @overload
    def run(
        self,
        task: str,
        stream: Literal[True],
        reset: bool = True,
        images: list[Any] | None = None,
        additional_args: dict[str, Any] | None = None,
        max_steps: int | None = None,
        return_full_result: bool | None = None,
    ) -> Generator[Any, None, None]: ...

    @overload
    def run(
        self,
        task: str,
        stream: Literal[False] = False,
        reset: bool = True,
        images: list[Any] | None = None,
        additional_args: dict[str, Any] | None = None,
        max_steps: int | None = None,
        *,
        return_full_result: Literal[True],
    ) -> RunResult: ...

    @overload
    def run(
        self,
        task: str,
        stream: Literal[False] = False,
        reset: bool = True,
        images: list[Any] | None = None,
        additional_args: dict[str, Any] | None = None,
        max_steps: int | None = None,
        return_full_result: bool | None = None,
    ) -> Any: ...

    def run(
        self,
        task: str,
        stream: bool = False,
        reset: bool = True,
        images: list[Any] | None = None,
        additional_args: dict[str, Any] | None = None,
        max_steps: int | None = None,
        return_full_result: bool | None = None,
    ) -> Any:
        """Run `task`; return the final answer, a `RunResult`, or (with `stream=True`) a generator of events."""
        max_steps, started = self._begin_run(task, reset, images, additional_args, max_steps)
        blocking(self._setting_up())
        run = events(self._run_stream(self.task, max_steps, images, streaming=stream))
        if stream:
            return run
        last = collections.deque(run, maxlen=1)  # the final answer step
        return self._result(last[0] if last else None, started, return_full_result)

    async def arun(
        self,
        task: str,
        stream: bool = False,
        reset: bool = True,
        images: list[Any] | None = None,
        additional_args: dict[str, Any] | None = None,
        max_steps: int | None = None,
        return_full_result: bool | None = None,
    ) -> Any:
        """`run`, awaited: the same arguments, steps, callbacks and result; with `stream=True`, an
        async iterator of the same events. The model is asked with `Model.agenerate` and the sandbox
        with `Executor.arun`, so the event loop serves other tasks while this run waits. Cancelling
        the awaiting task stops the running block as `interrupt()` does, and ends the run."""
        await asyncio.sleep(0)  # many runs started at once take turns from here, not all in one turn of the loop
        max_steps, started = self._begin_run(task, reset, images, additional_args, max_steps)
        await awaited(self._setting_up())
        run = aevents(self._run_stream(self.task, max_steps, images, streaming=stream))
        if stream:
            return run
        last = None
        async for event in run:
            last = event  # the last is the final answer step
        return self._result(last, started, return_full_result)

    def _begin_run(
        self,
        task: str,
        reset: bool,
        images: list[Any] | None,
        additional_args: dict[str, Any] | None,
        max_steps: int | None,
    ) -> tuple[int, Timing]:
        """Check the run's arguments and set up its memory; the steps' limit and the run's start."""
        if not isinstance(task, str) or not task.strip():
            raise ValueError("task must be a non-empty string saying what the agent should do")
        max_steps = self.max_steps if max_steps is None else max_steps
        if not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"max_steps must be a positive integer, got {max_steps!r}")
        started = Timing()
        self.task = task
        if additional_args:
            self._check_variable_names(additional_args)
            self.state.update(additional_args)
            self.task += describe_variables(additional_args)
        self.interrupt_switch = False
        self.memory.system_prompt.system_prompt = self.initialize_system_prompt()
        if reset:
            self.memory.reset()
        self.memory.steps.append(TaskStep(self.task, images))
        self.memory.setup = self._run_setup()
        self.logger.task(self.task, self._model_id(), self._executor_name())
        return max_steps, started

    def _result(self, final_step: Any, started: Timing, return_full_result: bool | None) -> Any:
        """What a run that was not streamed returns: its answer, or with `return_full_result` all of it."""
        if not isinstance(final_step, FinalAnswerStep):
            raise AgentError(f"the run ended without a final answer step (last event: {type(final_step).__name__})")
        started.end_time = time.time()
        full = self.return_full_result if return_full_result is None else return_full_result
        if not full:
            return final_step.output
        last_action = next((s for s in reversed(self.memory.steps) if isinstance(s, ActionStep)), None)
        state = "max_steps_error" if last_action and isinstance(last_action.error, AgentMaxStepsError) else "success"
        steps, tokens = list(self.memory.steps), self.memory.token_usage()
        return RunResult(final_step.output, state, steps, tokens, started, self.memory.block_usage())

    def _check_variable_names(self, variables: dict[str, Any]) -> None:
        if not isinstance(variables, dict):
            raise TypeError(
                f"additional_args must be a dict of variable names to values, got {type(variables).__name__}"
            )
        for name in variables:
            reason = taken_name(name) if isinstance(name, str) else "is not a Python identifier"
            if reason is not None:
                raise ValueError(f"additional_args key {name!r} {reason}; rename it")
            if name in self.tools or name in self.managed_agents:
                raise ValueError(f"additional_args key {name!r} would hide the tool of that name; rename it")

    def _executor_name(self) -> str | None:
        return None

    def _run_setup(self) -> RunSetup:
        """What a saved run records of this run: its tools' origins and its variables' names."""
        tools = [ToolSource.of(tool) for tool in self.tools.values() if not isinstance(tool, FinalAnswerTool)]
        variables = [VariableSource(name) for name in self.state]
        return RunSetup(tools, variables, self.planning_interval)

    def _setting_up(self) -> Steps[None]:
        """Hook: a code agent sends variables and tools to its sandbox here, yielding what it waits on."""
        return
        yield

    def interrupt(self) -> None:
        """Stop the run before its next step (safe to call from another thread or a callback)."""
        self.interrupt_switch = True

    def _run_stream(
        self, task: str, max_steps: int, images: list[Any] | None, streaming: bool
    ) -> Generator[Any, None, None]:
        """The run's steps as events, all inside the run's ``invoke_agent`` span."""
        with tracing.span(f"invoke_agent {self._agent_name()}", self._agent_attributes()) as span:
            span.value("codeward.task", task)
            final_step = yield from self._steps(task, max_steps, images, streaming)
            usage = self.memory.token_usage()
            span.set({tracing.INPUT_TOKENS: usage.input_tokens, tracing.OUTPUT_TOKENS: usage.output_tokens})
            span.value("codeward.final_answer", final_step.output)

    def _agent_name(self) -> str:
        return self.name or type(self).__name__

    def _agent_attributes(self) -> tracing.Attributes:
        return {
            tracing.OPERATION: "invoke_agent",
            tracing.AGENT_NAME: self._agent_name(),
            tracing.REQUEST_MODEL: self._model_id(),
            tracing.SANDBOX_NAME: self._executor_name() or "",
        }

    def _model_id(self) -> str:
        return str(getattr(self.model, "model_id", type(self.model).__name__))

    def _steps(
        self, task: str, max_steps: int, images: list[Any] | None, streaming: bool
    ) -> Generator[Any, None, FinalAnswerStep]:
        self.step_number = 1
        final_output: Any = None
        returned_final_answer = False
        while not returned_final_answer and self.step_number <= max_steps:
            if self.interrupt_switch:
                raise AgentError("the run was interrupted")
            if self._planning_due():
                planning_step = yield from self._planning_step(task, max_steps, streaming)
                self.memory.steps.append(planning_step)
                self.logger.plan(planning_step)
                self._fire_callbacks(planning_step)
            action_step = ActionStep(self.step_number, Timing(), observations_images=images)
            self.logger.step_start(self.step_number)
            with tracing.span("step", {tracing.STEP_NUMBER: self.step_number}) as step_span:
                try:
                    yield from watched(self._step_stream(action_step, streaming), self._final_answer_taker(action_step))
                except AgentGenerationError:
                    raise
                except AgentError as error:
                    action_step.error = error
                    step_span.set({"error.type": type(error).__name__})
                    self.logger.error(error.message)
                except KeyboardInterrupt as interrupt:
                    self._record_interrupt(action_step, interrupt)
                    raise
                finally:
                    action_step.timing.end_time = time.time()
                    self.memory.steps.append(action_step)
                    self.logger.step_end(action_step)
                    self._fire_callbacks(action_step)
            if action_step.is_final_answer:
                final_output, returned_final_answer = action_step.action_output, True
            yield action_step
            self.step_number += 1
        if returned_final_answer:
            self.logger.final_answer(final_output)
        else:
            final_output = yield from self._answer_after_max_steps(task, images)
            yield self.memory.steps[-1]
            self.logger.out_of_steps(max_steps, final_output)
        final_step = FinalAnswerStep(final_output)
        self._fire_callbacks(final_step)
        yield final_step
        return final_step

    def _final_answer_taker(self, action_step: ActionStep) -> Callable[[Any], None]:
        """What looks at each event of a step: a final answer that passes the checks ends the run."""

        def take(event: Any) -> None:
            if isinstance(event, (ActionOutput, ToolOutput)) and event.is_final_answer:
                self._check_final_answer(event.output)
                action_step.action_output = event.output
                action_step.is_final_answer = True

        return take

    def _record_interrupt(self, step: ActionStep, interrupt: KeyboardInterrupt) -> None:
        """Ctrl-C ends the run, but what the step's code printed before it is shown and kept (an
        executor gives it as the interrupt's cause), and the step says it was interrupted."""
        cause = interrupt.__cause__
        if isinstance(cause, ExecutorError) and cause.logs:
            step.observations = f"Execution logs:\n{cause.logs}"
            self.logger.observation(step.observations)
        step.error = AgentError("the run was interrupted (Ctrl-C)")
        self.logger.error(step.error.message)

    def _planning_due(self) -> bool:
        interval = self.planning_interval
        return (
            interval is not None and interval > 0 and (self.step_number == 1 or (self.step_number - 1) % interval == 0)
        )

    def _generate(
        self, messages: list[ChatMessage], streaming: bool = False, **kwargs: Any
    ) -> Generator[Any, Any, ChatMessage]:
        """Ask the model, yielding deltas when streaming; any model failure is an AgentGenerationError."""
        deltas = streaming and getattr(self.model, "supports_streaming", False)
        with self._chat_span() as span, _model_failures():
            message: ChatMessage = yield (ModelDeltas if deltas else ModelAnswer)(self.model, messages, kwargs)
            _describe_answer(span, message)
        return message

    def _chat_span(self) -> contextlib.AbstractContextManager[tracing.Span]:
        model_id = self._model_id()
        return tracing.span(f"chat {model_id}", {tracing.OPERATION: "chat", tracing.REQUEST_MODEL: model_id})

    def _planning_step(self, task: str, max_steps: int, streaming: bool) -> Generator[Any, Any, PlanningStep]:
        started = Timing()
        templates = self.prompt_templates["planning"]
        variables = self._prompt_variables() | {"task": task}
        if self.step_number == 1:
            messages = [ChatMessage("user", render(templates["initial_plan"], **variables))]
        else:
            remaining = max_steps - self.step_number + 1
            messages = [
                ChatMessage("system", render(templates["update_plan_pre_messages"], **variables)),
                *self.memory.to_messages(summary_mode=True)[1:],
                ChatMessage(
                    "user", render(templates["update_plan_post_messages"], remaining_steps=remaining, **variables)
                ),
            ]
        message = yield from self._generate(messages, streaming, stop_sequences=["<end_plan>"])
        plan = message.text().replace("<end_plan>", "").strip()
        intro = "Here are the facts I know and the plan I will follow:" if self.step_number == 1 else "My updated plan:"
        started.end_time = time.time()
        planning_step = PlanningStep(messages, message, f"{intro}\n{plan}", started, message.token_usage)
        yield planning_step
        return planning_step

    def _step_stream(self, action_step: ActionStep, streaming: bool) -> Generator[Any, None, None]:
        raise NotImplementedError

    def _check_final_answer(self, answer: Any) -> None:
        for check in self.final_answer_checks:
            name = getattr(check, "__name__", repr(check))
            try:
                passed = check(answer, self.memory, agent=self) if _takes_agent(check) else check(answer, self.memory)
            except Exception as error:
                raise AgentError(f"the final answer failed the check {name!r}: {error}") from error
            if not passed:
                raise AgentError(
                    f"the final answer {answer!r:.200} failed the check {name!r}; correct it and answer again"
                )

    def _answer_after_max_steps(self, task: str, images: list[Any] | None) -> Steps[Any]:
        """Out of steps: ask the model once for the best answer from all the work so far."""
        step = ActionStep(self.step_number, Timing(), error=AgentMaxStepsError("reached the maximum number of steps"))
        templates = self.prompt_templates["final_answer"]
        messages = [
            ChatMessage("system", render(templates["pre_messages"])),
            *self.memory.to_messages()[1:],
            ChatMessage("user", render(templates["post_messages"], task=task)),
        ]
        try:
            message = yield from self._generate(messages)
        finally:
            step.timing.end_time = time.time()
            self.memory.steps.append(step)
        step.model_output_message = message
        step.model_output = step.action_output = message.text()
        step.token_usage = message.token_usage
        self._fire_callbacks(step)
        return step.action_output

    def _fire_callbacks(
        self, step: MemoryStep | BlockOutputDelta, selected: list[Callable[..., Any]] | None = None
    ) -> None:
        for callback in self._callbacks_for(type(step)) if selected is None else selected:
            _call_callback(callback, step, self)

    def _callbacks_for(self, kind: type) -> list[Callable[..., Any]]:
        """The step callbacks that hear `kind`: a list hears every step (and no block output, which
        is not a step); a dict's entries hear what is an instance of their key."""
        callbacks = self.step_callbacks
        if not callbacks:
            return []
        if isinstance(callbacks, dict):
            return [cb for key, cbs in callbacks.items() if issubclass(kind, key) for cb in cbs]
        return list(callbacks) if issubclass(kind, MemoryStep) else []

    # -- memory ---------------------------------------------------------------------

    def write_memory_to_messages(self, summary_mode: bool = False) -> list[ChatMessage]:
        return self.memory.to_messages(summary_mode)

    def replay(self) -> None:
        """Print the last run step by step."""
        self.logger.replay(self.memory)

    def __call__(self, task: str, **kwargs: Any) -> str:
        """Run as a managed agent: the manager's task in, a report out."""
        return ManagedAgentTool(self).forward(task, kwargs.get("additional_args"))


class ManagedAgentTool(Tool):
    """An agent offered to a manager agent as a tool taking a task."""

    output_type = "string"

    def __init__(self, agent: MultiStepAgent) -> None:
        self.agent = agent
        self.name = agent.name or ""
        self.description = agent.description or ""
        self.inputs = {
            "task": {"type": "string", "description": "What the team member should do, in detail."},
            "additional_args": {
                "type": "object",
                "nullable": True,
                "description": "Variables to hand to the team member, by name.",
            },
        }
        super().__init__()

    def forward(self, task: str, additional_args: dict[str, Any] | None = None) -> str:
        agent = self.agent
        templates = agent.prompt_templates["managed_agent"]
        full_task = render(templates["task"], name=agent.name, task=task)
        result = agent.run(full_task, additional_args=additional_args or None, return_full_result=False)
        report = render(templates["report"], name=agent.name, final_answer=result)
        if agent.provide_run_summary:
            summary = "\n".join(m.text() for m in agent.write_memory_to_messages(summary_mode=True))
            report += f"\n\nWhat '{agent.name}' did:\n{summary}"
        return report
