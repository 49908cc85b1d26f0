"""Saved runs, and replaying them: the offline smoke test for an agent.

Record once with a real model (``codeward run ... --save run.json``), then on
every commit replay it: a `ReplayModel` plays the recorded model messages, the
code runs again in a fresh sandbox with the current tools, and each step's
observation, error and the final answer are compared with the recording.

A saved run is the agent memory's JSON (``AgentMemory.to_dict``) plus a
``codeward_run`` record of what the replay needs to rebuild the run: the tool
specs, the variables (through the value codec), the executor and imports.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codeward.executors.codec import CodecError, decode_variables, encode_variables
from codeward.platform.code_agent import CodeAgent
from codeward.platform.errors import AgentGenerationError
from codeward.platform.models import ReplayModel
from codeward.platform.tools import Tool
from codeward.tool_specs import load_tool_specs, spec_relative_to, spec_under
from codeward.usage import UsageError

__all__ = ["RUN_RECORD", "Difference", "ReplayReport", "replay_run", "save_run"]

#: The key of the replay record inside a saved run.
RUN_RECORD = "codeward_run"


def save_run(
    agent: CodeAgent,
    path: str | Path,
    *,
    tool_specs: list[str],
    variables: dict[str, Any],
    executor: str,
    authorized_imports: list[str],
) -> str | None:
    """Write the agent's last run with its replay record; return a warning if variables were left out."""
    path = Path(path)
    data = agent.memory.to_dict()
    record: dict[str, Any] = {
        "tools": [spec_relative_to(spec, path.parent) for spec in tool_specs],
        "executor": executor,
        "authorized_imports": list(authorized_imports),
        "planning_interval": agent.planning_interval,
    }
    warning = None
    try:
        record["variables"] = encode_variables(variables)
    except CodecError as error:
        warning = f"the variables were not saved ({error}); pass them to codeward replay with --var"
    data[RUN_RECORD] = record
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    os.replace(temporary, path)
    return warning


@dataclass
class Difference:
    """One thing the replay did differently from the recording."""

    step: int | None
    what: str
    recorded: str
    replayed: str

    def render(self) -> str:
        where = f"step {self.step} {self.what}" if self.step is not None else self.what
        lines = difflib.unified_diff(
            self.recorded.splitlines(),
            self.replayed.splitlines(),
            fromfile=f"recorded {where}",
            tofile=f"replayed {where}",
            lineterm="",
        )
        return "\n".join(lines) or f"{where}: {self.recorded!r} became {self.replayed!r}"


@dataclass
class ReplayReport:
    path: Path
    executor: str
    steps_checked: int
    differences: list[Difference] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences

    def render(self) -> str:
        if self.ok:
            return f"{self.path}: {self.steps_checked} steps and the final answer match on the {self.executor} executor"
        head = f"{self.path}: {len(self.differences)} difference(s) on the {self.executor} executor"
        return "\n\n".join([head, *(d.render() for d in self.differences)])


def _planning_interval(steps: list[dict[str, Any]]) -> int | None:
    """Infer how often the recorded agent planned, so the replay asks the model in the same order."""
    positions, actions = [], 0
    for step in steps:
        if step.get("type") == "planning":
            positions.append(actions)
        elif step.get("type") == "action":
            actions += 1
    if not positions:
        return None
    return positions[1] - positions[0] if len(positions) > 1 else actions + 1


def _fields(steps: list[dict[str, Any]]) -> tuple[dict[int, dict[str, str]], str]:
    """Per action step, what is compared; and the final answer, as the saved JSON shows them."""
    by_step = {}
    for step in steps:
        if step.get("type") == "action":
            error = step.get("error") or {}
            by_step[step["step_number"]] = {
                "observation": step.get("observations") or "",
                "error": error.get("message", ""),
            }
    actions = [step for step in steps if step.get("type") == "action"]
    final = json.dumps(actions[-1].get("action_output"), default=str) if actions else ""
    return by_step, final


def _compare(recorded: list[dict[str, Any]], replayed: list[dict[str, Any]]) -> tuple[int, list[Difference]]:
    old, old_final = _fields(recorded)
    new, new_final = _fields(replayed)
    differences = []
    for number in sorted(set(old) | set(new)):
        if number not in new:
            differences.append(Difference(number, "step", "ran", "did not run"))
            continue
        if number not in old:
            differences.append(Difference(number, "step", "was not in the recording", "ran"))
            continue
        for what in ("observation", "error"):
            if old[number][what] != new[number][what]:
                differences.append(Difference(number, what, old[number][what], new[number][what]))
    if old_final != new_final:
        differences.append(Difference(None, "final answer", old_final, new_final))
    return len(old), differences


def replay_run(
    path: str | Path,
    *,
    executor: str | None = None,
    tools: list[Tool] | None = None,
    tool_specs: list[str] | None = None,
    variables: dict[str, Any] | None = None,
    executor_kwargs: dict[str, Any] | None = None,
) -> ReplayReport:
    """Re-run a saved run's code in a fresh sandbox and compare it with the recording.

    Tools come from `tools`, else `tool_specs`, else the specs the run recorded;
    `variables` are added to (and override) the recorded ones.
    """
    path = Path(path)
    try:
        model = ReplayModel(path)  # checks that the file is a saved run, with errors that say so
    except ValueError as error:
        raise UsageError(str(error)) from None
    data = json.loads(path.read_text(encoding="utf-8"))
    record = data.get(RUN_RECORD) or {}
    chosen = executor or record.get("executor") or "local"
    if tools is None:
        recorded = [spec_under(spec, path.parent) for spec in record.get("tools", [])]
        tools = load_tool_specs(tool_specs if tool_specs is not None else recorded)
    given = decode_variables(record["variables"]) if record.get("variables") else {}
    given.update(variables or {})
    tasks = [step["task"] for step in data["steps"] if step.get("type") == "task"]
    if not tasks:
        raise UsageError(f"{path} is not a saved run: it has no task step")
    actions = [s for s in data["steps"] if s.get("type") == "action"]
    if actions and (actions[-1].get("error") or {}).get("message", "").startswith(
        "reached the maximum number of steps"
    ):
        actions = actions[:-1]  # the answer asked for after the last step, not a step of its own
    agent = CodeAgent(
        tools=tools,
        model=model,
        executor=chosen,
        executor_kwargs=executor_kwargs,
        additional_authorized_imports=record.get("authorized_imports") or None,
        planning_interval=record.get("planning_interval") or _planning_interval(data["steps"]),
        max_steps=max(1, len(actions)),
        verbosity_level=-1,
    )
    with agent:
        try:
            agent.run(tasks[-1], additional_args=given or None)
        except AgentGenerationError as error:
            replayed = agent.memory.to_dict()["steps"]
            checked, differences = _compare(data["steps"], replayed)
            differences.append(Difference(None, "run", "ended with the recording", f"needed more: {error}"))
            return ReplayReport(path, chosen, checked, differences)
        replayed = agent.memory.to_dict()["steps"]
    checked, differences = _compare(data["steps"], replayed)
    return ReplayReport(path, chosen, checked, differences)
