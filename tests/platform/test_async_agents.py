"""`arun`: the same run as `run`, awaited, on real sandboxes; many on one loop; cancelled cleanly."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

from codeward import ActionStep, CodeAgent, FinalAnswerStep, LiteLLMModel, ScriptedModel, ToolCallingAgent, tool
from codeward.platform.live_blocks import BlockOutputDelta
from codeward.platform.models import ChatMessage, ChatMessageStreamDelta
from tests.executors.awaiting import StepClock, cancelled_after, process_runs
from tests.platform.openai_server import ChatServer
from tests.timing import busy_seconds


def code(text: str) -> str:
    return f"<code>\n{text}\n</code>"


def script() -> list[str]:
    return [code("print('step one')\nx = 20"), code("final_answer(x + extra)")]


def test_arun_gives_what_run_gives(executor):
    with CodeAgent(tools=[], model=ScriptedModel(script()), executor=executor) as agent:
        ran = agent.run("add", additional_args={"extra": 1}, return_full_result=True)

    async def awaited():
        async with CodeAgent(tools=[], model=ScriptedModel(script()), executor=executor) as agent:
            return await agent.arun("add", additional_args={"extra": 1}, return_full_result=True)

    result = asyncio.run(awaited())
    assert (result.output, result.state) == (ran.output, ran.state) == (21, "success")
    assert [type(step).__name__ for step in result.steps] == [type(step).__name__ for step in ran.steps]
    assert [s.observations for s in result.steps if isinstance(s, ActionStep)] == [
        s.observations for s in ran.steps if isinstance(s, ActionStep)
    ]
    assert result.token_usage.to_dict() == ran.token_usage.to_dict()


def test_arun_streams_the_same_events_as_run(executor):
    long_block = [code("import time\nprint('one')\ntime.sleep(0.3)\nprint('two')"), code("final_answer(2)")]
    with CodeAgent(tools=[], model=ScriptedModel(long_block), executor=executor) as agent:
        ran = list(agent.run("go", stream=True))

    async def awaited():
        async with CodeAgent(tools=[], model=ScriptedModel(long_block), executor=executor) as agent:
            return [event async for event in await agent.arun("go", stream=True)]

    streamed = asyncio.run(awaited())
    kinds = [type(event).__name__ for event in streamed]
    assert kinds == [type(event).__name__ for event in ran]
    assert "BlockOutputDelta" in kinds and "ChatMessageStreamDelta" in kinds
    assert "".join(e.text for e in streamed if isinstance(e, BlockOutputDelta)) == "one\ntwo\n"
    assert isinstance(streamed[-1], FinalAnswerStep) and streamed[-1].output == 2


def test_step_callbacks_and_block_output_are_heard_on_the_loop_thread():
    heard: list[tuple[str, bool]] = []

    def on_step(step):
        heard.append((type(step).__name__, threading.current_thread() is threading.main_thread()))

    callbacks = {ActionStep: [on_step], BlockOutputDelta: [on_step]}

    async def awaited():
        model = ScriptedModel([code("print('hello')\nfinal_answer(1)")])
        async with CodeAgent(tools=[], model=model, step_callbacks=callbacks) as agent:
            return await agent.arun("go")

    assert asyncio.run(awaited()) == 1
    assert ("BlockOutputDelta", True) in heard and ("ActionStep", True) in heard
    assert all(on_loop for _, on_loop in heard), heard


@tool
async def lookup(key: str) -> str:
    """Looks a key up, awaiting.

    Args:
        key: what to look up
    """
    await asyncio.sleep(0.05)
    return f"{key}:{'loop' if threading.current_thread() is threading.main_thread() else 'elsewhere'}"


def test_an_async_tool_runs_on_the_event_loop_under_arun(executor):
    async def awaited():
        model = ScriptedModel([code("final_answer(lookup('a'))")])
        async with CodeAgent(tools=[lookup], model=model, executor=executor) as agent:
            return await agent.arun("look")

    assert asyncio.run(awaited()) == "a:loop"


def test_an_async_tool_works_under_run_too():
    model = ScriptedModel([code("final_answer(lookup('b'))")])
    with CodeAgent(tools=[lookup], model=model) as agent:
        assert agent.run("look") == "b:loop"  # on a loop of its own, on the thread that called run


def test_an_async_tool_works_under_run_called_from_a_running_loop():
    """`run` from inside a coroutine (a notebook's cell): the tool gets a loop on a thread of its own."""

    async def main():
        model = ScriptedModel([code("final_answer(lookup('d'))")])
        with CodeAgent(tools=[lookup], model=model) as agent:
            return agent.run("look")

    assert asyncio.run(main()) == "d:elsewhere"


def test_a_tool_calling_agent_awaits_its_async_tool():
    model = ScriptedModel(
        [
            {"tool_calls": [{"name": "lookup", "arguments": {"key": "c"}}]},
            {"tool_calls": [{"name": "final_answer", "arguments": {"answer": "done"}}]},
        ]
    )
    agent = ToolCallingAgent(tools=[lookup], model=model)
    assert asyncio.run(agent.arun("look")) == "done"
    assert "c:loop" in agent.memory.action_steps()[0].observations


def test_forty_agents_share_one_loop_and_never_hold_it() -> None:
    """Forty agents whose block sleeps a second wait together, and no step of any task holds the
    loop long: each step of every task on the loop is timed. (A heartbeat would measure the forty
    agents' own work done in one turn of the loop, which a busy machine stretches, not whether one
    of them blocked it.) One agent runs first, as a warm-up: the first run in a process imports the
    agent's machinery once. The bound is a busy machine's; bench/ measures a quiet one."""

    async def one(index: int) -> int:
        model = ScriptedModel([code(f"import time\ntime.sleep(1)\nfinal_answer({index} * 2)")])
        async with CodeAgent(tools=[], model=model) as agent:
            return await agent.arun("double")

    async def main() -> tuple[list[int], float, float, int]:
        clock = StepClock()
        started = time.monotonic()
        answers = await asyncio.gather(*(one(index) for index in range(40)))
        return answers, time.monotonic() - started, clock.stop(), len(clock.steps)

    assert asyncio.run(one(1)) == 2
    answers, took, held, steps = asyncio.run(main())
    assert answers == [index * 2 for index in range(40)]
    assert took < 20, f"forty one-second blocks took {took:.1f} s: they did not wait together"
    assert steps > 80  # every agent's task was timed, each in more than one step
    assert held < busy_seconds(0.2), f"a step held the loop for {held:.3f} s"


def test_cancelling_arun_stops_the_block_and_aclose_leaves_nothing(executor):
    async def main():
        model = ScriptedModel(
            [code("import time\nkept = 5\nprint('kept')\ntime.sleep(60)"), code("final_answer(kept)")]
        )
        loop, printed = asyncio.get_running_loop(), asyncio.Event()
        heard = {BlockOutputDelta: [lambda delta: loop.call_soon_threadsafe(printed.set)]}
        agent = CodeAgent(tools=[], model=model, executor=executor, step_callbacks=heard)
        # counted from the block's print: the sandbox's start, part of arun, can take seconds on a busy machine
        stopped_in = await cancelled_after(0.5, agent.arun("sleep"), ready=printed)
        step = await agent.arun_code("kept + 1")  # the sandbox still serves, with what the code defined
        await agent.aclose()
        return stopped_in, step, agent

    stopped_in, step, agent = asyncio.run(main())
    assert stopped_in < busy_seconds(2), stopped_in
    assert step.error is None and step.action_output == 6
    sandbox = getattr(agent.executor, "sandbox_id", None) or ""
    if sandbox.startswith("local-"):
        assert not process_runs(int(sandbox.split("-")[1]))
    kernel = getattr(getattr(getattr(agent.executor, "_session", None), "process", None), "pid", None)
    assert kernel is None or not process_runs(kernel)


def test_litellm_model_is_awaited_through_acompletion():
    with ChatServer(["one answer", "streamed answer here"]) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.url, api_key="k")

        async def main():
            whole = await model.agenerate([ChatMessage("user", "hi")])
            pieces = [delta async for delta in model.agenerate_stream([ChatMessage("user", "again")])]
            return whole, pieces

        whole, pieces = asyncio.run(main())
    assert whole.content == "one answer" and whole.token_usage is not None
    assert all(isinstance(piece, ChatMessageStreamDelta) for piece in pieces)
    assert "".join(piece.content or "" for piece in pieces) == "streamed answer here"
    assert len(server.requests) == 2 and server.requests[1].get("stream") is True
    assert os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP") == "True"


@tool
def tick() -> int:
    """Answers at once.

    Returns:
        one
    """
    return 1


@tool
async def slow() -> int:
    """Answers after a while.

    Returns:
        one
    """
    await asyncio.sleep(5)
    return 1


@pytest.mark.parametrize(
    "busy",
    [
        # a tool called in a tight loop keeps the host's socket always ready: an `asyncio.wait_for`
        # there swallows the cancel before Python 3.12, and the block ran to its time limit
        "while True:\n    tick()",
        # the block waits for a tool's reply that will never come: the stop reaches it there
        "slow()",
    ],
    ids=["socket-always-ready", "waiting-for-a-tool"],
)
def test_a_cancel_lands_at_once_and_the_worker_stays(busy: str) -> None:
    from codeward.executors.local.executor import LocalExecutor

    async def main() -> tuple[float, object]:
        async with LocalExecutor(timeout_seconds=20) as ex:
            await ex.asend_tools({"tick": tick, "slow": slow})
            took = await cancelled_after(0.5, ex.arun(f"kept = 3\n{busy}"))
            return took, (await ex.arun("kept")).output

    took, kept = asyncio.run(main())
    assert took < busy_seconds(1.0), f"the cancel took {took:.2f} s"
    assert kept == 3


def test_an_async_tool_in_the_hosts_own_process_gives_its_value_not_a_coroutine():
    """In process, the model's code calls the tool on the host's thread: it gets the tool's value,
    never the coroutine (a host object, with the frames of the host's code inside)."""
    from codeward.executors.local.executor import LocalExecutor

    with LocalExecutor(isolation="in_process") as ex:
        ex.send_tools({"lookup": lookup})
        got = ex.run("found = lookup('e')\n(type(found).__name__, found)").output
    assert got == ("str", "e:loop")


def test_an_async_tool_is_refused_inline_with_the_way_out():
    from codeward.executors.kernel.bridge import ToolBridge
    from codeward.tools import ToolDefinitionError

    with pytest.raises(ToolDefinitionError, match=r"async def.*plain def function.*host"):
        ToolBridge({"lookup": lookup}, mode="inline")


def test_the_readmes_async_example_runs_as_written_in_a_fresh_process():
    import subprocess
    import sys
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Async", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    done = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str([n * 2 for n in range(40)])


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_a_tool_call_asked_after_its_task_was_cancelled_never_starts(kind: str) -> None:
    """A cancel asked while the host read the tool's request (the loop busy) lands before the
    tool starts, not inside it."""
    from codeward.tools import ToolCalled

    ran: list[str] = []

    @tool
    async def async_mark() -> str:
        """Marks.

        Returns:
            a mark
        """
        ran.append("async")
        await asyncio.sleep(0)
        return "done"

    @tool
    def sync_mark() -> str:
        """Marks.

        Returns:
            a mark
        """
        ran.append("sync")
        return "done"

    async def main() -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()  # asked while this task runs, as a cancel asked while the host reads a request
        await ToolCalled(async_mark if kind == "async" else sync_mark, {}).acall()

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())
    assert not ran
