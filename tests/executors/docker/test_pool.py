"""SandboxPool: sandboxes started ahead of need, each used by one executor only, none left behind."""

from __future__ import annotations

from collections.abc import Iterator

import docker
import pytest

from codeward.executors import DockerExecutor, SandboxPool
from codeward.executors.base import ExecutorError
from codeward.platform.tools import FinalAnswerTool
from tests.executors.docker.containers import gone


@pytest.fixture
def pool(sandbox_image: str) -> Iterator[SandboxPool]:
    with SandboxPool(size=2, image=sandbox_image) as started:
        assert started.wait_until_full(timeout=120)
        yield started


def test_an_executor_takes_a_ready_sandbox_and_the_pool_refills(pool: SandboxPool) -> None:
    waiting = {sandbox.container.id for sandbox in pool.idle}
    with DockerExecutor(pool=pool) as executor:
        executor.send_variables({"n": 20})
        assert executor.run("n + 1").output == 21
        assert executor.sandbox.container.id in waiting  # type: ignore[union-attr]
    assert pool.wait_until_full(timeout=120)
    assert len(pool.idle) == 2


def test_a_used_sandbox_is_removed_never_handed_out_again(
    docker_client: docker.DockerClient, pool: SandboxPool
) -> None:
    used = []
    for _ in range(3):
        with DockerExecutor(pool=pool) as executor:
            executor.run("secret = 'left by an earlier task'")
            used.append(executor.sandbox.container.id)  # type: ignore[union-attr]
        assert gone(docker_client, used[-1])
    assert len(set(used)) == 3
    with DockerExecutor(pool=pool) as executor:
        assert executor.run("'secret' in globals()").output is False


def test_a_sandbox_that_died_while_waiting_is_not_handed_out(
    docker_client: docker.DockerClient, pool: SandboxPool
) -> None:
    for sandbox in list(pool.idle):
        sandbox.container.kill()
    with DockerExecutor(pool=pool) as executor:
        assert executor.run("6 * 7").output == 42


def test_close_removes_the_waiting_sandboxes_and_refuses_more(
    docker_client: docker.DockerClient, pool: SandboxPool
) -> None:
    waiting = [sandbox.container.id for sandbox in pool.idle]
    pool.close()
    pool.close()
    assert all(gone(docker_client, container_id) for container_id in waiting)
    with pytest.raises(ExecutorError, match="SandboxPool is closed"):
        pool.take()


def test_the_pool_owns_the_sandbox_settings(pool: SandboxPool) -> None:
    with pytest.raises(ValueError, match="give image, limits"):
        DockerExecutor(pool=pool, network="bridge")
    with pytest.raises(ValueError, match="at least 1"):
        SandboxPool(size=0)


def test_a_pooled_sandbox_comes_set_up_and_its_hooks_are_installed_once(pool: SandboxPool) -> None:
    assert pool.wait_until_full(120)
    with DockerExecutor(pool=pool, allow_pickle=True) as executor:
        hooks = executor.run(
            "sum(getattr(hook, '__module__', '') == '_codeward' "
            "for event in ('pre_run_cell', 'post_run_cell') for hook in get_ipython().events.callbacks[event])"
        )
        assert hooks.output == 2  # one refusal of input() before a cell, one report of its value after
        assert executor.run("41 + 1").output == 42
        assert executor.run("__import__('sys').modules['_codeward']._Sandbox.allow_pickle").output is True


def _bootstrap_cells(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The bootstrap cells executors run from now on (each one ships the codec and prelude again)."""
    from codeward.executors.kernel.executor import KernelExecutor

    ran: list[str] = []
    internal = KernelExecutor._internally

    def counting(self, session, code, answers=None):  # type: ignore[no-untyped-def]
        if code.startswith("exec("):
            ran.append(code)
        return internal(self, session, code, answers)

    monkeypatch.setattr(KernelExecutor, "_internally", counting)
    return ran


def test_a_warm_pools_sandbox_is_not_bootstrapped_twice(pool: SandboxPool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool ran codeward's side while the sandbox waited: the executor sends its tools and runs."""
    ran = _bootstrap_cells(monkeypatch)
    with DockerExecutor(pool=pool) as executor:
        executor.send_tools({"final_answer": FinalAnswerTool()})
        result = executor.run("final_answer(6 * 7)")
        assert result.is_final_answer and result.output == 42
        assert executor.sandbox is not None and executor.sandbox.prepared == ""  # the credit is spent
    assert ran == []


def test_a_sandbox_warmed_for_other_settings_is_bootstrapped_for_its_own(
    pool: SandboxPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = _bootstrap_cells(monkeypatch)
    with DockerExecutor(pool=pool, allow_pickle=True) as executor:
        assert executor.run("__import__('sys').modules['_codeward']._Sandbox.allow_pickle").output is True
    assert len(ran) == 1
