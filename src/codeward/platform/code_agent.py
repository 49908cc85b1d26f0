"""The code agent: each step, the model writes Python and a sandbox runs it."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterable
from dataclasses import replace
from typing import Any

from codeward import tracing
from codeward.effects import Offloaded, Steps, awaited, blocking
from codeward.executors.base import (
    BlockEvent,
    BlockUsage,
    CodeOutput,
    ExecutionError,
    ExecutionTimeout,
    Executor,
    ExecutorError,
    OutputCallback,
    SandboxError,
    create_executor,
)
from codeward.executors.displays import Display
from codeward.executors.live import heard_by_all
from codeward.executors.settings import checked_names
from codeward.platform.agents import ActionOutput, MultiStepAgent
from codeward.platform.artifacts import OutputsBudget, OutputsCollector
from codeward.platform.errors import AgentError, AgentExecutionError, AgentParsingError, AgentToolCallError
from codeward.platform.live_blocks import BlockOutputDelta
from codeward.platform.memory import ActionStep
from codeward.platform.models import Model, ToolCall
from codeward.platform.parsing import extract_code
from codeward.platform.run_effects import BlockRun, LiveBlock, SandboxSend
from codeward.platform.run_files import RunSetup, mounts_setting, plain_settings
from codeward.tools import Tool
from codeward.wall_events import MAX_EVENTS

__all__ = ["CodeAgent"]

_TAGS = {None: ("<code>", "</code>"), "markdown": ("```python", "```")}
_OUTPUT_PREVIEW = 10_000


def _text_of(value: Any, what: str, show: Callable[[Any], str]) -> str:
    """`show(value)`; a value that cannot be shown is the step's error, which the model sees and
    can answer with another value, rather than an exception that ends the run."""
    try:
        return show(value)
    except Exception as error:
        raise AgentExecutionError(
            f"The code's {what} cannot be shown: {show.__name__}() of its {type(value).__name__} raised "
            f"{type(error).__name__}. Give a value made of plain types (str, numbers, lists, dicts) instead."
        ) from None


#: Arguments of smolagents' CodeAgent that mean something else here (or nothing), with what to write instead.
_SMOLAGENTS_ONLY = {
    "executor_type": "codeward names the sandbox with executor=, e.g. CodeAgent(..., executor={value!r})",
    "use_structured_outputs_internally": (
        "codeward has no structured-output mode; the model always writes code between code_block_tags, "
        "so leave the argument out"
    ),
}


def _refuse_smolagents_only(kwargs: dict[str, Any]) -> None:
    """A smolagents argument codeward does not take fails with what to write instead, rather than
    with Python's bare 'unexpected keyword argument'."""
    for name, advice in _SMOLAGENTS_ONLY.items():
        if name in kwargs:
            raise TypeError(f"CodeAgent takes no {name}= (a smolagents argument): {advice.format(value=kwargs[name])}")


def _code_block_tags(tags: str | tuple[str, str] | None) -> tuple[str, str]:
    if tags in _TAGS:
        return _TAGS[tags]
    if isinstance(tags, (tuple, list)) and len(tags) == 2 and all(isinstance(t, str) and t for t in tags):
        return tags[0], tags[1]
    raise ValueError(f"code_block_tags must be None, 'markdown' or a pair of strings, got {tags!r}")


class CodeAgent(MultiStepAgent):
    """An agent whose actions are Python code, run in the sandbox named by `executor`.

    `executor` is a registered name (``"local"``, ``"jupyter"``, ``"docker"``,
    ``"e2b"``) built with `executor_kwargs`, or an `Executor` you built yourself.

    With `collect_outputs`, the files the code writes under the working folder's ``outputs/``
    are collected after each step into the step's `artifacts`, within the budgets of
    `codeward.platform.artifacts` (`outputs_budget` sets others).
    """

    prompt_kind = "code_agent"

    def __init__(
        self,
        tools: Iterable[Tool],
        model: Model,
        prompt_templates: dict[str, Any] | None = None,
        additional_authorized_imports: list[str] | None = None,
        executor: str | Executor = "local",
        executor_kwargs: dict[str, Any] | None = None,
        code_block_tags: str | tuple[str, str] | None = None,
        max_print_outputs_length: int | None = None,
        stream_outputs: bool = False,
        collect_outputs: bool = False,
        outputs_budget: OutputsBudget | None = None,
        **kwargs: Any,
    ) -> None:
        _refuse_smolagents_only(kwargs)
        self.collect_outputs = collect_outputs
        self.outputs = OutputsCollector(outputs_budget) if collect_outputs else None
        self.code_block_tags = _code_block_tags(code_block_tags)
        self.additional_authorized_imports = (
            []
            if additional_authorized_imports is None
            else checked_names("additional_authorized_imports", additional_authorized_imports, "module names")
        )
        self.max_print_outputs_length = max_print_outputs_length
        self.stream_outputs = stream_outputs
        self._sandbox_has_tools = False  # sent by each run, and by the first `run_code` outside a run
        self.executor = self._create_executor(executor, dict(executor_kwargs or {}))
        try:
            super().__init__(tools, model, prompt_templates, **kwargs)
        except BaseException:
            self.executor.close()
            raise

    def _create_executor(self, executor: str | Executor, kwargs: dict[str, Any]) -> Executor:
        if isinstance(executor, Executor):
            if kwargs:
                raise ValueError(
                    "executor_kwargs apply only when executor is a name; configure your Executor instance directly"
                )
            return executor
        if executor == "local" and self.additional_authorized_imports:
            kwargs.setdefault("authorized_imports", self.additional_authorized_imports)
        if self.max_print_outputs_length is not None:  # every executor keeps printed output to one length
            kwargs.setdefault("max_print_outputs_length", self.max_print_outputs_length)
        return create_executor(executor, **kwargs)

    def _prompt_variables(self) -> dict[str, Any]:
        opening, closing = self.code_block_tags
        imports = getattr(self.executor, "authorized_imports", None)
        if imports is None:
            note = "You can import any module installed in the sandbox."
        elif "*" in imports:
            note = "You can import any module."
        else:
            note = f"You can import only these modules: {', '.join(sorted(imports)) or 'none'}."
        return super()._prompt_variables() | {
            "authorized_imports": note,
            "code_block_opening_tag": opening,
            "code_block_closing_tag": closing,
        }

    def _executor_name(self) -> str | None:
        return self.executor.name or type(self.executor).__name__

    def _run_setup(self) -> RunSetup:
        """The base record, with the sandbox: its name, plain settings and the imports it added."""
        return replace(
            super()._run_setup(),
            executor=self._executor_name(),
            executor_settings=plain_settings(self.executor),
            authorized_imports=self._added_imports(),
        )

    def _added_imports(self) -> list[str]:
        """The imports allowed beyond the local executor's defaults: what `--import` would give."""
        imports = getattr(self.executor, "authorized_imports", None)
        if imports is None:
            return []
        from codeward.executors.local.imports import DEFAULT_AUTHORIZED_IMPORTS

        return [module for module in imports if module not in DEFAULT_AUTHORIZED_IMPORTS]

    def _setting_up(self) -> Steps[None]:
        yield SandboxSend(self.executor, "variables", self.state)
        yield SandboxSend(self.executor, "tools", {**self.tools, **self.managed_agents})
        self._sandbox_has_tools = True
        if self.outputs is not None:
            yield Offloaded(self.outputs.start_run, self.executor.files)

    def run_code(self, code: str, on_output: OutputCallback | None = None) -> ActionStep:
        """Run one block in this agent's sandbox as if its model had written it; return the block's step.

        For callers whose own model writes the code (`codeward mcp serve` lends the sandbox to an
        MCP client's model): no model is asked. The first block sends the agent's variables and
        tools to the sandbox unless a run already did; the sandbox keeps what blocks define, from
        one call to the next and across runs. The step is appended to `memory`, numbered after its
        last action step, with `observations` as the model would see them and the value in
        `action_output`. A block that fails has its `AgentError` in `error`, not raised. A block
        that calls ``final_answer(x)`` has `is_final_answer` set and x as its output, and ends
        nothing else: there is no run to end, and the next block runs in the same sandbox.
        `on_output` hears the block's output as it comes, as `Executor.run`'s does.
        """
        return blocking(self._running_code(code, on_output))

    async def arun_code(self, code: str, on_output: OutputCallback | None = None) -> ActionStep:
        """`run_code`, awaited, through the executor's `arun`; `on_output` is called on the loop."""
        return await awaited(self._running_code(code, on_output))

    def _running_code(self, code: str, on_output: OutputCallback | None) -> Steps[ActionStep]:
        if not self._sandbox_has_tools:
            yield from self._setting_up()
        past = self.memory.action_steps()  # a caller may have dropped the oldest: number after the last
        step = ActionStep(step_number=past[-1].step_number + 1 if past else 1, code_action=code)
        try:
            outcome = yield from self._execute(code, step, on_output)
            step.action_output, step.is_final_answer = outcome.output, outcome.is_final_answer
        except AgentError as error:
            step.error = error
        finally:
            step.timing.end_time = time.time()
            self.memory.steps.append(step)
        return step

    def _step_stream(self, action_step: ActionStep, streaming: bool) -> Generator[Any, None, None]:
        opening, closing = self.code_block_tags
        messages = self.write_memory_to_messages()
        action_step.model_input_messages = messages
        stop = [closing] if closing not in opening else []  # a fence would also cut the opening one
        message = yield from self._generate(
            messages, streaming or self.stream_outputs, stop_sequences=[*stop, "Observation:"]
        )
        text = message.text()
        if opening != closing and text.count(opening) > text.count(closing):
            text += closing  # the stop sequence cut it off
        message.content = text
        action_step.model_output_message = message
        action_step.model_output = text
        action_step.token_usage = message.token_usage
        self.logger.model_output(text)
        try:
            code = extract_code(text, opening, closing)
        except ValueError as error:
            raise AgentParsingError(str(error)) from None
        action_step.code_action = code
        call = ToolCall("python_interpreter", code, f"call_{self.step_number}")
        action_step.tool_calls = [call]
        yield call
        self.logger.code(code)
        # streaming, the block's output comes as events, between the step's call and its output
        yield (yield from self._execute(code, action_step, live=streaming))

    def interrupt(self) -> None:
        """Stop the run before its next step, and the block that runs now (safe from another thread)."""
        super().interrupt()
        try:
            self.executor.interrupt()
        except NotImplementedError:  # an executor that cannot: the block runs to its end or time limit
            pass

    def _execute(
        self, code: str, action_step: ActionStep, on_output: OutputCallback | None = None, *, live: bool = False
    ) -> Steps[ActionOutput]:
        """Run the block, its output also the run's events if `live`; then collect what it wrote."""
        try:
            result = yield from self._execute_block(code, action_step, on_output, live)
        except AgentError:  # a block that failed may have written files too
            yield from self._collect_outputs(action_step)
            raise
        yield from self._collect_outputs(action_step)
        return result

    def _collect_outputs(self, action_step: ActionStep) -> Steps[None]:
        """The files new or changed under outputs/ onto the step, and a line naming them for the model."""
        if self.outputs is None:
            return
        collected = yield Offloaded(self.outputs.collect, self.executor.files)
        action_step.artifacts = collected.artifacts
        action_step.artifact_notes = collected.all_notes()
        line = collected.observation()
        if line:
            action_step.observations = f"{action_step.observations}\n{line}" if action_step.observations else line
            self.logger.observation(line)

    def _execute_block(
        self, code: str, action_step: ActionStep, on_output: OutputCallback | None, live: bool
    ) -> Steps[ActionOutput]:
        try:
            output = yield from self._run_in_sandbox(code, self._output_shown(on_output), live)
        except ExecutorError as error:
            action_step.usage, action_step.events = error.usage, list(error.events)
            if not isinstance(error, (ExecutionError, SandboxError)):
                raise
            raise self._agent_error(error, action_step) from None
        action_step.usage, action_step.events = output.usage, list(output.events)
        self.logger.displays(output.displays)
        action_step.displays = [shown for shown in output.displays if isinstance(shown, Display)]
        observation = logged = f"Execution logs:\n{output.logs}" if output.logs else ""
        if self.logger.showed_block_output:  # the logs are on the screen already
            logged = ""
        if output.is_final_answer:
            self._record_logs(action_step, output.logs)
            _text_of(output.output, "final answer", repr)  # a run's record and result show it both ways
            _text_of(output.output, "final answer", str)
        elif output.output is not None or not output.logs:
            shown = _text_of(output.output, "value", str)
            if len(shown) > _OUTPUT_PREVIEW:
                shown = shown[:_OUTPUT_PREVIEW] + f"... ({len(shown) - _OUTPUT_PREVIEW} more characters)"
            value = f"Last output from code snippet:\n{shown}"
            observation = f"{observation}\n{value}" if observation else value
            logged = f"{logged}\n{value}" if logged else value
        action_step.observations = observation
        if logged:
            self.logger.observation(logged)
        return ActionOutput(output.output, output.is_final_answer)

    def _agent_error(self, error: ExecutionError | SandboxError, action_step: ActionStep) -> AgentError:
        """The agent's error for a block that failed in its sandbox; what it printed goes on the step."""
        self._record_logs(action_step, error.logs)
        if isinstance(error, ExecutionTimeout):
            return AgentExecutionError(error.advised)
        if isinstance(error, SandboxError):
            lost = (
                " Variables and functions defined by earlier code are lost; tools and given variables were sent again."
                if error.state_lost
                else ""
            )
            return AgentExecutionError(f"The sandbox failed: {error.message}.{lost}")
        kind = AgentToolCallError if error.error_type == "ToolCallError" else AgentExecutionError
        return kind(f"Code execution failed:\n{error.detail}")

    def _output_shown(self, on_output: OutputCallback | None) -> OutputCallback | None:
        """What the block's output goes to as it comes: the logger, which shows it on the screen,
        `on_output`, and the step callbacks given for `BlockOutputDelta`; None when none wants it,
        so the sandbox need not send it live."""
        told = None
        callbacks = self._callbacks_for(BlockOutputDelta)
        if callbacks:

            def told(stream: str, text: str) -> None:
                self._fire_callbacks(BlockOutputDelta(stream, text), callbacks)

        shown = self.logger.block_output if self.logger.shows_block_output else None
        return heard_by_all(shown, on_output, told)

    def _run_in_sandbox(self, code: str, on_output: OutputCallback | None, live: bool) -> Steps[CodeOutput]:
        """Run the block in the sandbox, in an ``execute_code`` span naming the sandbox, the code and how it ended."""
        attributes: dict[str, str | list[str]] = {tracing.SANDBOX_NAME: self._executor_name() or ""}
        sandbox_id = getattr(self.executor, "sandbox_id", None)  # where the executor names its sandbox
        if sandbox_id:
            attributes[tracing.SANDBOX_ID] = str(sandbox_id)
        mounts = mounts_setting(self.executor)
        if mounts:
            attributes[tracing.SANDBOX_MOUNTS] = [f"{target}:{mode}" for target, mode in mounts.items()]
        with tracing.span("execute_code", attributes) as span:
            span.event(tracing.CODE, {tracing.CODE: code})
            try:
                output: CodeOutput = yield (LiveBlock if live else BlockRun)(self.executor, code, on_output)
            except Exception as error:
                span.set({tracing.CODE_OUTCOME: "error", **_usage_attributes(getattr(error, "usage", None))})
                _trace_events(span, getattr(error, "events", None))
                raise
            finally:
                started = getattr(self.executor, "sandbox_id", None)
                if not sandbox_id and started:  # a sandbox this block started (the first, or after one died)
                    span.set({tracing.SANDBOX_ID: str(started)})
            _trace_events(span, output.events)
            span.set({tracing.CODE_OUTCOME: "final_answer" if output.is_final_answer else "ok"})
            span.set(_usage_attributes(output.usage))
            span.value(tracing.CODE_OUTPUT, output.output)
            return output

    @staticmethod
    def _record_logs(action_step: ActionStep, logs: str) -> None:
        if logs:
            action_step.observations = f"Execution logs:\n{logs}"

    def close(self) -> None:
        """Close the sandbox. Also done by `with CodeAgent(...) as agent:`."""
        self.executor.close()

    async def aclose(self) -> None:
        """Close the sandbox, awaited. Also done by `async with CodeAgent(...) as agent:`."""
        await self.executor.aclose()

    def cleanup(self) -> None:
        """smolagents' name for `close()`, so code moved over from it closes the sandbox too."""
        self.close()

    @property
    def python_executor(self) -> Executor:
        """smolagents' name for `executor`: the sandbox this agent runs its code in."""
        return self.executor

    def __enter__(self) -> CodeAgent:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> CodeAgent:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _trace_events(span: tracing.Span, events: object) -> None:
    """An event on the block's span for each thing the sandbox's walls refused (a bounded list)."""
    if not isinstance(events, list):
        return
    for event in events[: MAX_EVENTS + 1]:
        if isinstance(event, BlockEvent):
            span.event(
                tracing.WALL_REFUSED,
                {tracing.WALL_NAME: event.wall, tracing.WALL_DETAIL: event.detail, tracing.WALL_COUNT: event.count},
            )


def _usage_attributes(usage: BlockUsage | None) -> dict[str, int | float]:
    """A block's usage as its span's attributes (``codeward.code.cpu_seconds``...): the figures measured."""
    if not isinstance(usage, BlockUsage):
        return {}
    figures = {name: getattr(usage, name) for name in tracing.USAGE_FIGURES}
    return {f"codeward.code.{name}": value for name, value in figures.items() if value is not None}
