"""Public API, imported by users' test suites: it stays at the top, at a path that does not move.

Helpers for testing agents with pytest, offline.

Record a run once with a real model (``codeward run ... --save tests/runs/weather.json``,
or ``agent.memory.save``), commit it, and check on every commit that the code
the model wrote still behaves the same against your current tools::

    from codeward.testing import assert_replays
    from myproject.tools import get_weather

    def test_weather_agent_still_works():
        assert_replays("tests/runs/weather.json", tools=[get_weather])
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from codeward.platform.replay import ReplayReport, replay_run
from codeward.tools import Tool

__all__ = ["assert_replays"]


def assert_replays(
    path: str | Path,
    *,
    tools: list[Tool] | None = None,
    executor: str | None = None,
    variables: dict[str, Any] | None = None,
    executor_kwargs: dict[str, Any] | None = None,
) -> ReplayReport:
    """Replay the saved run; fail the test with a diff of every observation or answer that changed.

    Only the arguments decide the sandbox and the tools, never the file: pass the `tools` the run
    used and, for a run recorded on another executor, `executor`; what is missing is named in
    the failure. `variables` add to or replace the values a ``codeward run --save`` kept.
    """
    __tracebackhide__ = True
    report = replay_run(path, executor=executor, tools=tools, variables=variables, executor_kwargs=executor_kwargs)
    if not report.ok:
        raise AssertionError(report.render())
    return report
