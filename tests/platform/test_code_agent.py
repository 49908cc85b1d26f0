"""The agent lifecycle end to end: a scripted model driving a CodeAgent over the real local executor."""

from __future__ import annotations

import json

import pytest

from codeward import (
    ActionStep,
    AgentError,
    AgentExecutionError,
    AgentGenerationError,
    AgentMaxStepsError,
    AgentParsingError,
    CodeAgent,
    FinalAnswerStep,
    PlanningStep,
    ReplayModel,
    RunResult,
    ScriptedModel,
    ToolCall,
    tool,
)
from codeward.platform.agents import ActionOutput
from codeward.platform.models import ChatMessageStreamDelta


@tool
def get_temperature(city: str) -> float:
    """Returns today's temperature in a city, in degrees Celsius.

    Args:
        city: The city's name, e.g. "Oslo".
    """
    return {"Oslo": 4.5, "Rome": 17.0, "Cairo": 26.5}[city]


def code(body: str, thought: str = "I will do it.") -> str:
    return f"Thought: {thought}\n<code>\n{body}\n</code>"


def make_agent(responses, executor, **kwargs) -> tuple[CodeAgent, ScriptedModel]:
    model = ScriptedModel(responses)
    agent = CodeAgent(
        tools=kwargs.pop("tools", [get_temperature]), model=model, executor=executor, verbosity_level=-1, **kwargs
    )
    return agent, model


def test_additional_args_are_variables_and_named_in_the_task(executor):
    agent, model = make_agent(
        [code("warm = {c: get_temperature(c) for c in cities}\nfinal_answer(max(warm, key=warm.get))")],
        executor,
    )
    with agent:
        answer = agent.run("Which city is warmest?", additional_args={"cities": ["Oslo", "Rome", "Cairo"]})
    assert answer == "Cairo"
    task_text = model.calls[0][1].text()
    assert "cities (list, 3 items" in task_text and "'Oslo'" in task_text


def test_a_large_value_is_named_not_pasted_into_the_prompt(executor):
    big = "x" * 5_000_000
    agent, model = make_agent([code("final_answer(len(blob))")], executor)
    with agent:
        assert agent.run("Measure blob", additional_args={"blob": big}) == 5_000_000
    prompt = sum(len(m.text()) for m in model.calls[0])
    assert prompt < 20_000


def test_a_code_error_in_step_one_reaches_the_model_which_recovers(executor):
    agent, model = make_agent(
        [
            code("print('looking up'); t = get_temperature('Atlantis')"),
            code("final_answer(get_temperature('Rome'))", "Atlantis is unknown; use Rome."),
        ],
        executor,
    )
    with agent:
        result = agent.run("Temperature?", return_full_result=True)
    assert isinstance(result, RunResult)
    assert result.output == 17.0 and result.state == "success"
    first = next(s for s in result.steps if isinstance(s, ActionStep))
    assert isinstance(first.error, AgentExecutionError)
    assert "KeyError" in first.error.message and "Atlantis" in first.error.message
    assert "looking up" in (first.observations or "")
    second_call = "\n".join(m.text() for m in model.calls[1])
    assert "KeyError" in second_call and "looking up" in second_call


def test_max_steps_forces_an_answer_and_reports_the_state(executor):
    agent, model = make_agent([code("x = 1"), code("x += 1"), "The answer is probably 2."], executor, max_steps=2)
    with agent:
        result = agent.run("Count", return_full_result=True)
    assert result.state == "max_steps_error"
    assert result.output == "The answer is probably 2."
    last = result.steps[-1]
    assert isinstance(last, ActionStep) and isinstance(last.error, AgentMaxStepsError)
    assert len(model.calls) == 3


def test_planning_steps_run_at_the_interval_with_remaining_steps_filled_in(executor):
    responses = [
        "1. Look up.\n2. Answer.<end_plan>",
        code("t = get_temperature('Oslo')"),
        code("u = t + 1"),
        "1. Answer now.<end_plan>",
        code("final_answer(u)"),
    ]
    agent, model = make_agent(responses, executor, planning_interval=2, max_steps=5)
    with agent:
        result = agent.run("Oslo plus one", return_full_result=True)
    assert result.output == 5.5
    plans = [s for s in result.steps if isinstance(s, PlanningStep)]
    assert len(plans) == 2 and "Answer now." in plans[1].plan
    update_prompt = model.calls[3][-1].text()
    assert "You have 3 steps left" in update_prompt


def test_streaming_yields_deltas_calls_outputs_and_steps_in_order(executor):
    agent, _ = make_agent([code("x = 20 + 1\nx"), code("final_answer(x * 2)")], executor)
    with agent:
        events = list(agent.run("Double it", stream=True))
    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "ChatMessageStreamDelta"
    assert isinstance(events[-1], FinalAnswerStep) and events[-1].output == 42
    outputs = [e for e in events if isinstance(e, ActionOutput)]
    assert [o.output for o in outputs] == [21, 42]
    assert any(isinstance(e, ToolCall) and "x * 2" in e.arguments for e in events)
    first_step = kinds.index("ActionStep")
    assert kinds.index("ActionOutput") < first_step and kinds.index("ToolCall") < first_step
    joined = "".join(e.content or "" for e in events if isinstance(e, ChatMessageStreamDelta))
    assert "x = 20 + 1" in joined


def test_token_usage_is_summed_over_steps(executor):
    agent, _ = make_agent([code("a = 1"), code("final_answer(a)")], executor)
    with agent:
        result = agent.run("One", return_full_result=True)
    per_step = [s.token_usage for s in result.steps if isinstance(s, ActionStep)]
    assert all(u and u.input_tokens > 0 and u.output_tokens > 0 for u in per_step)
    assert result.token_usage.total_tokens == sum(u.total_tokens for u in per_step)
    assert result.timing.duration is not None and result.timing.duration >= 0


def test_final_answer_checks_send_a_failed_check_back_to_the_model(executor):
    def is_positive(answer, memory):
        return answer > 0

    agent, model = make_agent(
        [code("final_answer(-3)"), code("final_answer(3)")], executor, final_answer_checks=[is_positive]
    )
    with agent:
        assert agent.run("A positive number") == 3
    assert "failed the check 'is_positive'" in "\n".join(m.text() for m in model.calls[1])


def test_step_callbacks_see_planning_action_and_final_steps(executor):
    seen = []
    agent, _ = make_agent(
        ["Plan.<end_plan>", code("final_answer(7)")],
        executor,
        planning_interval=1,
        step_callbacks=[lambda step, agent: seen.append((type(step).__name__, agent.step_number))],
    )
    with agent:
        agent.run("Seven")
    assert [name for name, _ in seen] == ["PlanningStep", "ActionStep", "FinalAnswerStep"]


def test_a_managed_agent_is_called_like_a_tool(executor):
    helper_model = ScriptedModel([code("final_answer(get_temperature('Cairo'))")])
    helper = CodeAgent(
        tools=[get_temperature],
        model=helper_model,
        executor=executor,
        name="weather_desk",
        description="Looks up temperatures.",
        verbosity_level=-1,
    )
    boss, boss_model = make_agent(
        [code("report = weather_desk(task='Temperature in Cairo?')\nprint(report)"), code("final_answer(report)")],
        executor,
        tools=[],
        managed_agents=[helper],
    )
    with helper, boss:
        answer = boss.run("Ask the weather desk about Cairo")
    assert "weather_desk" in answer and "26.5" in answer
    assert "Temperature in Cairo?" in helper_model.calls[0][1].text()
    assert "def weather_desk(task: str" in boss_model.calls[0][0].text()


def test_reset_false_continues_the_conversation(executor):
    agent, model = make_agent([code("n = 5\nfinal_answer(n)"), code("final_answer(n + 1)")], executor)
    with agent:
        assert agent.run("Five") == 5
        assert agent.run("And one more?", reset=False) == 6
    second = "\n".join(m.text() for m in model.calls[1])
    assert "Five" in second and "And one more?" in second


def test_final_answer_cannot_be_swallowed_by_except_exception(executor):
    agent, _ = make_agent([code("try:\n    final_answer('done')\nexcept Exception:\n    print('swallowed')")], executor)
    with agent:
        assert agent.run("Finish") == "done"


def test_a_model_that_writes_no_code_is_told_how_and_can_recover(executor):
    agent, _model = make_agent(["I think the answer is 4.", code("final_answer(4)")], executor)
    with agent:
        result = agent.run("2+2", return_full_result=True)
    first = result.steps[1]
    assert isinstance(first.error, AgentParsingError)
    assert "<code>" in first.error.message
    assert result.output == 4


def test_a_model_that_fails_is_raised_to_the_caller(executor):
    agent, _ = make_agent([code("x = 1")], executor, max_steps=3)
    with agent, pytest.raises(AgentGenerationError, match="no response left"):
        agent.run("Loop")


def test_memory_saves_and_replays_the_same_run(executor, tmp_path):
    agent, _ = make_agent([code("t = get_temperature('Oslo')"), code("final_answer(t * 2)")], executor)
    with agent:
        assert agent.run("Double Oslo") == 9.0
        path = agent.memory.save(tmp_path / "run.json")
    saved = json.loads(path.read_text())
    assert [s["type"] for s in saved["steps"]] == ["task", "action", "action"]
    replayed = CodeAgent(tools=[get_temperature], model=ReplayModel(path), executor=executor, verbosity_level=-1)
    with replayed:
        assert replayed.run("Double Oslo") == 9.0


def test_interrupt_from_a_callback_stops_before_the_next_step(executor):
    def stop_after_first(step, agent):
        if isinstance(step, ActionStep):
            agent.interrupt()

    agent, model = make_agent([code("x = 1"), code("final_answer(x)")], executor, step_callbacks=[stop_after_first])
    with agent, pytest.raises(AgentError, match="interrupted"):
        agent.run("Stop early")
    assert len(model.calls) == 1


def test_instructions_and_markdown_code_blocks(executor):
    agent, model = make_agent(
        ["Thought: sum.\n```python\nfinal_answer(sum(range(4)))\n```"],
        executor,
        instructions="Always answer in French.",
        code_block_tags="markdown",
    )
    with agent:
        assert agent.run("Sum to three") == 6
    system = model.calls[0][0].text()
    assert "Always answer in French." in system and "```python" in system


def test_images_ride_along_with_the_task(executor):
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
    agent, model = make_agent([code("final_answer('seen')")], executor)
    with agent:
        agent.run("Describe the image", images=[png])
    parts = model.calls[0][1].content
    assert parts[0]["type"] == "text" and parts[1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_replay_prints_every_step(executor, capsys):
    agent, _ = make_agent([code("print('hello from step one')"), code("final_answer(2)")], executor)
    with agent:
        agent.run("Two")
    capsys.readouterr()
    agent.replay()
    shown = capsys.readouterr().out
    assert "hello from step one" in shown and "Final answer: 2" in shown and "Step 2" in shown


@pytest.mark.parametrize("executor", ["local", "jupyter"])
def test_max_print_outputs_length_reaches_the_executor_by_name(executor: str) -> None:
    code = "for i in range(300):\n    print(f'row {i:03d}')\nfinal_answer('done')"
    model = ScriptedModel([f"Thought: print a lot\n<code>\n{code}\n</code>"])
    agent = CodeAgent(tools=[], model=model, executor=executor, max_print_outputs_length=600)
    try:
        assert agent.executor.max_print_outputs_length == 600  # type: ignore[attr-defined]
        agent.run("print")
        observation = agent.memory.steps[-1].observations or ""
        assert "characters of output cut" in observation and len(observation) < 800
    finally:
        agent.executor.close()


def test_an_endless_loop_on_local_tells_the_step_and_the_model_the_limit_and_why():
    agent, model = make_agent(
        [code("while True:\n    pass"), code("final_answer(1)")], "local", executor_kwargs={"max_operations": 1000}
    )
    with agent:
        agent.run("Loop.")
    failed = next(step for step in agent.memory.steps if isinstance(step, ActionStep) and step.error is not None)
    for text in (failed.error.message, "\n".join(m.text() for m in model.calls[1])):
        assert "more than 1,000 operations" in text and "look for an endless loop" in text, text
        assert "Traceback" in text and "while True:" in text, text


def test_an_ordinary_error_is_told_by_its_traceback_once():
    agent, _ = make_agent([code("1 / 0"), code("final_answer(1)")], "local")
    with agent:
        agent.run("Divide.")
    failed = next(step for step in agent.memory.steps if isinstance(step, ActionStep) and step.error is not None)
    assert failed.error.message.startswith("Code execution failed:\nTraceback"), failed.error.message
    assert failed.error.message.count("ZeroDivisionError: division by zero") == 1, failed.error.message


def test_a_block_stopped_at_its_time_limit_tells_the_model_what_to_do_once(executor):
    agent, model = make_agent(
        [code("import time\ntime.sleep(30)"), code("final_answer(1)")], executor, executor_kwargs={"timeout_seconds": 1}
    )
    with agent:
        assert agent.run("Sleep.") == 1
    failed = next(step for step in agent.memory.steps if isinstance(step, ActionStep) and step.error is not None)
    told = failed.error.message
    assert "limit" in told, told
    advice = ("per step", "Make the code faster")
    assert sum(told.count(words) for words in advice) == 1, told
    assert told in "\n".join(message.text() for message in model.calls[1])


def test_a_given_dict_is_previewed_in_the_users_order():
    agent, model = make_agent([code("final_answer(len(settings))")], "local")
    settings = {"zeta": 1, "alpha": {"b": 2, "a": 1}, "mid": 3}
    with agent:
        assert agent.run("Count.", additional_args={"settings": settings}) == 3
    assert "{'zeta': 1, 'alpha': {'b': 2, 'a': 1}, 'mid': 3}" in model.calls[0][1].text()
