"""A session of `codeward mcp serve` remembers only its last calls, however long it lasts."""

from __future__ import annotations

import asyncio

import pytest

from codeward.mcp.server import ServeOptions, SessionSandbox


def steps_after_five_calls(kept: int) -> list[int]:
    """The step numbers a session's agent remembers after five calls, keeping `kept`."""

    async def calls() -> list[int]:
        sandbox = SessionSandbox(ServeOptions("local", steps_kept=kept))
        try:
            for n in range(5):
                assert not (await sandbox.run(f"{n}")).is_error
            assert sandbox.agent is not None  # the session's agent, as the next call would find it
            return [step.step_number for step in sandbox.agent.memory.action_steps()]
        finally:
            await sandbox.close()

    return asyncio.run(calls())


def test_a_long_session_keeps_only_its_last_steps_numbered_on() -> None:
    assert steps_after_five_calls(3) == [3, 4, 5]


@pytest.mark.parametrize("kept", [5, 50])
def test_control_with_room_for_every_step_the_memory_grows_with_each_call(kept: int) -> None:
    assert steps_after_five_calls(kept) == [1, 2, 3, 4, 5]


def _kept_after_a_big_value() -> list[object]:
    async def call() -> list[object]:
        sandbox = SessionSandbox(ServeOptions("local"))
        try:
            shown = await sandbox.run("list(range(200_000))")
            assert not shown.is_error and "more characters" in shown.content[0].text  # type: ignore[union-attr]
            assert sandbox.agent is not None
            return [step.action_output for step in sandbox.agent.memory.action_steps()]
        finally:
            await sandbox.close()

    return asyncio.run(call())


def test_a_calls_value_is_not_kept_once_the_client_has_its_text() -> None:
    assert _kept_after_a_big_value() == [None]


def test_control_keeping_the_value_holds_it_for_the_sessions_life(monkeypatch: pytest.MonkeyPatch) -> None:
    from codeward.mcp import server

    monkeypatch.setattr(server, "_forget_value", lambda step: None)
    kept = _kept_after_a_big_value()
    assert isinstance(kept[0], list) and len(kept[0]) == 200_000
