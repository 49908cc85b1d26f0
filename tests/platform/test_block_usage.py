"""A run's steps carry what each code block cost, `RunResult.usage` sums them, and a saved run keeps them."""

from __future__ import annotations

import json
from pathlib import Path

from codeward import CodeAgent, ScriptedModel
from codeward.executors.base import BlockUsage
from codeward.platform.memory import ActionStep, AgentMemory, saved_block_usage

SPIN = "import time\nstarted = time.process_time()\nwhile time.process_time() - started < 0.5:\n    pass"
HOLD = "held = b'x' * (60 * 2**20)\nprint(len(held))"


def _code(body: str) -> str:
    return f"Thought: go on.\n<code>\n{body}\n</code>"


def _two_block_run(**agent_options: object) -> tuple[CodeAgent, object]:
    model = ScriptedModel([_code(SPIN), _code(HOLD), _code("final_answer(len(held))")])
    agent = CodeAgent(
        tools=[],
        model=model,
        verbosity_level=-1,
        max_steps=5,
        executor_kwargs={"max_operations": 10**9, "max_value_size": 100_000_000},
        additional_authorized_imports=["time"],
        **agent_options,
    )
    with agent:
        result = agent.run("Spin, then hold.", return_full_result=True)
    return agent, result


def test_each_step_carries_its_blocks_usage_and_the_result_sums_them() -> None:
    agent, result = _two_block_run()
    steps = agent.memory.action_steps()
    usages = [step.usage for step in steps]
    assert all(isinstance(usage, BlockUsage) for usage in usages), usages
    spin, hold, final = usages
    assert spin.cpu_seconds >= 0.35 and hold.peak_memory_bytes >= 60 * 2**20 and hold.output_bytes > 0
    total = result.usage
    assert total is not None
    assert total.wall_seconds == spin.wall_seconds + hold.wall_seconds + final.wall_seconds
    assert total.cpu_seconds == spin.cpu_seconds + hold.cpu_seconds + final.cpu_seconds
    assert total.peak_memory_bytes == max(spin.peak_memory_bytes, hold.peak_memory_bytes, final.peak_memory_bytes)
    assert result.to_dict()["usage"] == total.to_dict()


def test_a_failed_block_still_counts() -> None:
    model = ScriptedModel([_code("print('x' * 100)\n1 / 0"), _code("final_answer(1)")])
    with CodeAgent(tools=[], model=model, verbosity_level=-1) as agent:
        result = agent.run("Fail once.", return_full_result=True)
    failed = agent.memory.action_steps()[0]
    assert failed.error is not None and failed.usage is not None and failed.usage.output_bytes >= 100
    assert result.usage is not None and result.usage.output_bytes >= failed.usage.output_bytes


def test_a_saved_run_keeps_each_steps_usage(tmp_path: Path) -> None:
    agent, result = _two_block_run()
    agent.memory.save(tmp_path / "run.json")
    loaded = AgentMemory.load(tmp_path / "run.json")
    assert [step.usage for step in loaded.action_steps()] == [step.usage for step in agent.memory.action_steps()]
    assert loaded.block_usage() == result.usage


def test_a_saved_usage_that_is_malformed_is_left_out_not_trusted() -> None:
    good = BlockUsage(1.0, 0.5, 1000, 10, 1, None, "block", {"egress_bytes": "no network"}).to_dict()
    assert saved_block_usage(good) == BlockUsage.from_dict(good)
    for bad in (
        {**good, "cpu_seconds": "lots"},
        {**good, "tool_calls": True},
        {**good, "unmeasured": {"cpu_seconds": 3}},
        {**good, "peak_memory_scope": "everything"},
        {"cpu_seconds": 1.0},
        "1 s",
    ):
        assert saved_block_usage(bad) is None, bad
    step = ActionStep(step_number=1, usage=BlockUsage.from_dict(good))
    assert json.loads(json.dumps(step.to_dict()))["usage"] == good
