"""A step's block output as it comes: events of `agent.run(..., stream=True)`, and the logger's screen."""

from __future__ import annotations

import io
import threading
import time

import pytest
from rich.console import Console

from codeward import ActionStep, AgentError, AgentLogger, CodeAgent, FinalAnswerStep, ScriptedModel, ToolCall
from codeward.executors.base import CodeOutput
from codeward.platform.agents import ActionOutput
from codeward.platform.live_blocks import BlockOutputDelta
from tests.platform.doubles import ExecDouble
from tests.timing import busy_seconds

#: A block whose first line comes a while before its end: held until the end, the line would come
#: with it; a busy machine may hand it over up to a second and a half late and it still counts as live.
PRINT_SLEEP_PRINT = "import time\nprint('one')\ntime.sleep(2.5)\nprint('two')"
#: How long a block asked to stop may take to end on a busy machine; the blocks stopped below sleep
#: longer past their print, so one that went on to its end fails.
STOPPED_WITHIN = busy_seconds(1.0)


def code(body: str) -> str:
    return f"Thought: go.\n<code>\n{body}\n</code>"


def test_streaming_yields_the_blocks_output_between_its_call_and_its_output(executor):
    model = ScriptedModel([code(PRINT_SLEEP_PRINT), code("final_answer(2)")])
    with CodeAgent(tools=[], model=model, executor=executor, verbosity_level=-1) as agent:
        timed = [(time.monotonic(), event) for event in agent.run("Count", stream=True)]
    events = [event for _, event in timed]
    pieces = [event for event in events if isinstance(event, BlockOutputDelta)]
    assert "".join(piece.text for piece in pieces) == "one\ntwo\n"
    assert {piece.stream for piece in pieces} == {"stdout"}
    first = events.index(pieces[0])
    call = max(i for i, event in enumerate(events[:first]) if isinstance(event, ToolCall))
    output = next(i for i, event in enumerate(events) if isinstance(event, ActionOutput))
    assert call < first < output < next(i for i, event in enumerate(events) if isinstance(event, ActionStep))
    heard_one = next(at for at, event in timed if isinstance(event, BlockOutputDelta) and "one" in event.text)
    ended = next(at for at, event in timed if isinstance(event, ActionOutput))
    assert ended - heard_one >= 1.0, "the first line came as it was printed, not with the step's end"
    assert isinstance(events[-1], FinalAnswerStep) and events[-1].output == 2
    assert "one\ntwo" in agent.memory.action_steps()[0].observations


def test_a_consumer_that_stops_reading_interrupts_the_block(executor):
    model = ScriptedModel([code("import time\nprint('long')\ntime.sleep(5)\nkept = 1"), code("final_answer(1)")])
    with CodeAgent(tools=[], model=model, executor=executor, verbosity_level=-1) as agent:
        events = agent.run("Wait", stream=True)
        for event in events:
            if isinstance(event, BlockOutputDelta):
                break
        started = time.monotonic()
        events.close()  # type: ignore[attr-defined]
        assert time.monotonic() - started < STOPPED_WITHIN < 5
        assert agent.executor.run("'still here'").output == "still here"


def test_the_agents_interrupt_stops_the_running_block(executor):
    model = ScriptedModel([code("import time\nprint('napping')\ntime.sleep(5)")])
    asked: list[float] = []
    agent = CodeAgent(tools=[], model=model, executor=executor, verbosity_level=-1, max_steps=3)
    with agent, pytest.raises(AgentError, match="interrupted"):
        for event in agent.run("Nap", stream=True):
            if isinstance(event, BlockOutputDelta) and not asked:
                asked.append(time.monotonic())
                threading.Thread(target=agent.interrupt).start()
    assert time.monotonic() - asked[0] < STOPPED_WITHIN < 5
    step = agent.memory.action_steps()[0]
    assert step.error is not None and "interrupt" in step.error.message.lower()


def test_the_logger_shows_block_output_as_it_comes_and_not_again(executor):
    screen = io.StringIO()
    logger = AgentLogger(console=Console(file=screen, width=100, color_system=None))
    model = ScriptedModel([code("print('shown once \\x1b[31m')\n7"), code("final_answer(1)")])
    with CodeAgent(tools=[], model=model, executor=executor, logger=logger) as agent:
        agent.run("Show")
    text = screen.getvalue()
    assert text.splitlines().count("shown once \\x1b[31m") == 1, text  # as it came, and not again after
    assert "\x1b" not in text  # the sandbox's text cannot drive the terminal
    assert "Last output from code snippet:\n7" in text


def test_step_callbacks_given_for_block_output_hear_it_as_it_comes(executor):
    model = ScriptedModel([code(PRINT_SLEEP_PRINT), code("final_answer(2)")])
    heard: list[tuple[float, str, str]] = []
    steps: list[object] = []
    callbacks = {
        BlockOutputDelta: [lambda delta: heard.append((time.monotonic(), delta.stream, delta.text))],
        ActionStep: [lambda step, agent: steps.append((time.monotonic(), step))],
    }
    listed: list[object] = []  # control: a list of callbacks hears steps only, as smolagents' callbacks expect
    with CodeAgent(tools=[], model=model, executor=executor, verbosity_level=-1, step_callbacks=callbacks) as agent:
        assert agent.run("Count") == 2  # not streamed: the callbacks hear it all the same
    with CodeAgent(
        tools=[],
        model=ScriptedModel([code("print('x')\nfinal_answer(1)")]),
        executor=executor,
        verbosity_level=-1,
        step_callbacks=[listed.append],
    ) as agent:
        agent.run("Once")
    assert "".join(text for _, _, text in heard) == "one\ntwo\n" and {s for _, s, _ in heard} == {"stdout"}
    first_step_ended = steps[0][0]
    assert first_step_ended - heard[0][0] >= 1.0, "the first line came as it was printed"
    assert listed and not any(isinstance(step, BlockOutputDelta) for step in listed)


class ExecutorBeforeLiveOutput(ExecDouble):
    """An executor written to the contract before live output: its `run` takes the code alone."""

    def run(self, code: str) -> CodeOutput:  # type: ignore[override]
        return super().run(code)


def test_an_executor_whose_run_takes_no_on_output_still_streams_its_logs_when_the_block_ends():
    model = ScriptedModel([code("print('whole')"), code("final_answer(3)")])
    with CodeAgent(tools=[], model=model, executor=ExecutorBeforeLiveOutput(), verbosity_level=-1) as agent:
        events = list(agent.run("Print", stream=True))
    assert [event.text for event in events if isinstance(event, BlockOutputDelta)] == ["whole\n"]
    assert isinstance(events[-1], FinalAnswerStep) and events[-1].output == 3
