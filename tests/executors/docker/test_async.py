"""The docker executor's native async API on real containers: many pooled sandboxes run blocks
together while the event loop stays free; a cancel stops the block, and no container is left."""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import docker
import pytest

from codeward.executors import DockerExecutor, SandboxPool
from codeward.executors.base import ExecutionError
from tests.executors.awaiting import StepClock, cancelled_after
from tests.executors.docker.containers import MadeHere, gone
from tests.timing import busy_allowance, busy_seconds

SANDBOXES = 10


@pytest.fixture
def made_here(docker_client: docker.DockerClient, monkeypatch: pytest.MonkeyPatch) -> Iterator[MadeHere]:
    """The sandboxes this test makes, told apart from any other's by their ipc folders' parent."""
    with MadeHere(docker_client) as made:
        monkeypatch.setattr(tempfile, "tempdir", str(made.folder))
        yield made


def test_ten_pooled_sandboxes_run_blocks_together_and_the_loop_is_never_held(
    sandbox_image: str, made_here: MadeHere
) -> None:
    async def together(pool: SandboxPool) -> tuple[list[Any], float, float]:
        clock = StepClock()
        executors = await asyncio.gather(*(DockerExecutor.acreate(pool=pool) for _ in range(SANDBOXES)))
        try:
            started = time.monotonic()
            outputs = await asyncio.gather(
                *(ex.arun(f"import time; time.sleep(1); {n} * 2") for n, ex in enumerate(executors))
            )
            wall = time.monotonic() - started
        finally:
            await asyncio.gather(*(ex.aclose() for ex in executors))
        return [output.output for output in outputs], wall, clock.stop()

    with SandboxPool(size=SANDBOXES, image=sandbox_image) as pool:
        assert pool.wait_until_full(timeout=busy_seconds(60))
        outputs, wall, late = asyncio.run(together(pool))
    print(
        f"\n{SANDBOXES} sandboxes: blocks of 1 s took {wall:.2f} s together; one step held the loop {late:.3f} s at most"
    )
    assert outputs == [n * 2 for n in range(SANDBOXES)]
    assert late < busy_seconds(0.2), f"the loop was held {late:.3f} s"
    assert wall < busy_allowance(1.0, 1.0)  # together, not one after another (10 s)
    assert made_here.created() and not made_here.left()


def test_a_cancelled_block_stops_the_sandbox_stays_usable_and_aclose_removes_it(
    sandbox_image: str, made_here: MadeHere
) -> None:
    async def cancel() -> float:
        async with await DockerExecutor.acreate(image=sandbox_image, timeout_seconds=10) as ex:
            await ex.arun("kept = 'yes'")
            with pytest.raises(ExecutionError) as raised:
                await ex.arun("1 / 0")
            assert raised.value.error_type == "ZeroDivisionError"
            took = await cancelled_after(1.0, ex.arun("import time; time.sleep(30)"))
            assert (await ex.arun("kept")).output == "yes"
            assert made_here.left()
        return took

    took = asyncio.run(cancel())
    assert took < busy_seconds(1.0)
    assert made_here.created() and not made_here.left()


def test_a_block_that_ignores_the_cancel_gets_a_fresh_sandbox(
    docker_client: docker.DockerClient, sandbox_image: str, made_here: MadeHere
) -> None:
    stubborn = "import time\nwhile True:\n    try:\n        time.sleep(30)\n    except KeyboardInterrupt:\n        pass"

    async def cancel() -> tuple[str, str, float]:
        async with await DockerExecutor.acreate(image=sandbox_image, timeout_seconds=10) as ex:
            await ex.asend_variables({"given": 7})
            first = ex.sandbox_id
            took = await cancelled_after(1.0, ex.arun(stubborn))
            assert (await ex.arun("given")).output == 7  # a fresh sandbox, given its variables again
            assert first is not None and ex.sandbox_id is not None
            return first, ex.sandbox_id, took

    first, second, took = asyncio.run(cancel())
    assert first != second and gone(docker_client, first) and gone(docker_client, second)
    assert took < busy_allowance(3.0, 5.0)  # the interrupt's grace, then a new container
    assert not made_here.left()


def test_a_start_cancelled_midway_leaves_no_sandbox(sandbox_image: str, made_here: MadeHere) -> None:
    async def cancel_start(after: float) -> bool:
        """Whether the start was cancelled midway; one that ended first is closed."""
        starting = asyncio.create_task(DockerExecutor.acreate(image=sandbox_image))
        await asyncio.sleep(after)
        if starting.done():  # started before the cancel came (a quick machine): nothing to cancel midway
            await (await starting).aclose()
            return False
        starting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await starting
        return True

    assert asyncio.run(cancel_start(0.05)), "the start ended within 50 ms: it cannot be cancelled midway here"
    asyncio.run(cancel_start(0.5))  # on most machines, while the kernel is awaited
    assert made_here.created() and not made_here.left()


def test_ten_agents_on_pooled_sandboxes_answer_together_on_one_loop(sandbox_image: str, made_here: MadeHere) -> None:
    """The agent's `arun` on docker: ten agents, each with a sandbox from the pool and a block that
    sleeps a second, answer together while the loop keeps its beat; leaving them leaves nothing."""
    from codeward import CodeAgent, ScriptedModel

    async def one(pool: SandboxPool, n: int) -> Any:
        model = ScriptedModel([f"<code>\nimport time\ntime.sleep(1)\nfinal_answer({n} + 100)\n</code>"])
        sandbox = await DockerExecutor.acreate(pool=pool)
        async with CodeAgent(tools=[], model=model, executor=sandbox, verbosity_level=-1) as agent:
            return await agent.arun("wait, then answer")

    async def together(pool: SandboxPool) -> tuple[list[Any], float, float]:
        clock = StepClock()
        started = time.monotonic()
        answers = await asyncio.gather(*(one(pool, n) for n in range(SANDBOXES)))
        return answers, time.monotonic() - started, clock.stop()

    with SandboxPool(size=SANDBOXES, image=sandbox_image) as pool:
        assert pool.wait_until_full(timeout=busy_seconds(60))
        answers, wall, late = asyncio.run(together(pool))
    assert answers == [n + 100 for n in range(SANDBOXES)]
    assert wall < busy_allowance(1.0, 2.0), f"ten one-second blocks took {wall:.1f} s: not together"
    assert late < busy_seconds(0.2), f"the loop was held {late:.3f} s"
    assert made_here.created() and not made_here.left()
