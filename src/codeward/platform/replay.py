"""Replaying a saved run: the offline smoke test for an agent.

Record once with a real model (``codeward run ... --save run.json``), then on
every commit replay it: a `ReplayModel` plays the recorded model messages, the
code runs again in a fresh sandbox with the current tools, and each step's
observation, error and the final answer are compared with the recording.

The run file (`codeward.platform.run_files`) records how the run was set up. It may
come from a stranger, so that record is a hint, never an order: the replay runs on
the executor, tools and imports its user passes, and imports nothing the file names.
Where the record says the run needs more than was passed, the replay stops before
running anything and names the flags, showing the file's values escaped, as
suggestions to check. ``codeward replay`` and `codeward.testing` both drive it.
"""

from __future__ import annotations

import difflib
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codeward.executors.settings import checked_names
from codeward.handed_files import inside
from codeward.platform.code_agent import CodeAgent
from codeward.platform.errors import AgentGenerationError
from codeward.platform.models import ReplayModel
from codeward.platform.run_files import (
    load_run_file,
    recorded_entries,
    recorded_strings,
    recorded_variables,
    run_record,
)
from codeward.platform.tool_specs import load_tool_specs, spec_under
from codeward.terminal_text import visible
from codeward.tools import Tool
from codeward.usage import UsageError
from codeward.value_files import check_value_file, load_value_file
from codeward.wording import counted

__all__ = ["Difference", "ReplayNeedsFlags", "ReplayReport", "replay_run"]

_DEFAULT_EXECUTOR = "local"
#: The sandboxes `--as-recorded` may take from a run file: those that confine code at least as the
#: default does. Any other (jupyter runs code on the host, unconfined) needs its own --executor.
_ADOPTABLE_EXECUTORS = frozenset({"local", "docker", "e2b"})
#: How a variable's recorded origin reads in a message.
_ORIGINS = {
    "python": "Python",
    "saved": "the run file, which could not read it back",
    "secret": "a secret, which a run file never keeps",
}
_CHECK_SUGGESTIONS = (
    "These suggestions are the run file's own words: check each before you pass it, "
    "as a flag grants what a file cannot (host code to import, a sandbox, imports). "
    "--as-recorded takes the recorded tool and variable files inside the run's folder and a "
    "confining executor at once; installed modules, imports, an unconfined executor and MCP servers "
    "(--mcp: a server is a process to start) still need their flags."
)


class ReplayNeedsFlags(UsageError):
    """The run cannot be replayed as it ran from what was passed; the message names the flags."""


def _flag(name: str, value: str) -> str:
    """A flag as the user would type it, with the file's value escaped and quoted for the shell."""
    return f"{name} {shlex.quote(visible(value, keep_lines=False))}"


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
    recorded_executor: str | None = None

    @property
    def ok(self) -> bool:
        return not self.differences

    def render(self) -> str:
        where = f"on the {self.executor} executor"
        if self.recorded_executor and self.recorded_executor != self.executor:
            where += f" (recorded on {self.recorded_executor})"
        if self.ok:
            return f"{self.path}: {counted(self.steps_checked, 'step')} and the final answer match {where}"
        head = f"{self.path}: {counted(len(self.differences), 'difference')} {where}"
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


def _settings_note(record: dict[str, Any]) -> str:
    """The recorded executor settings, for the user to judge: a replay never applies them."""
    settings = record.get("executor_settings")
    if not isinstance(settings, dict):
        return ""
    shown = [
        f"{visible(str(name), keep_lines=False)}={value!r}"
        for name, value in settings.items()
        if isinstance(value, (bool, int, float, str))
    ]
    return f" ({', '.join(shown)})" if shown else ""


def _executor_needs(record: dict[str, Any], executor: str | None) -> list[str]:
    """A run recorded on another sandbox is replayed there only if the user says so."""
    recorded = record.get("executor")
    if executor is not None or not isinstance(recorded, str) or recorded == _DEFAULT_EXECUTOR:
        return []
    need = (
        f"{_flag('--executor', recorded)}: the run was recorded on that executor{_settings_note(record)}; "
        f"a replay runs on {_DEFAULT_EXECUTOR} only if told (--executor {_DEFAULT_EXECUTOR})"
    )
    return [need]


def _import_needs(record: dict[str, Any], executor: str, imports: list[str]) -> list[str]:
    """Imports the local sandbox allowed the recorded run beyond its defaults, and the replay was not given."""
    if executor != _DEFAULT_EXECUTOR or "*" in imports:
        return []
    missing = [module for module in recorded_strings(record, "authorized_imports") if module not in imports]
    if not missing:
        return []
    flags = " ".join(_flag("--import", module) for module in missing)
    return [f"{flags}: the run's code was allowed these imports beyond the defaults"]


def _tool_needs(record: dict[str, Any], tools: list[Tool], folder: Path) -> list[str]:
    """Recorded tools the replay was not given, with the spec or MCP server each was recorded under where known."""
    sources = recorded_entries(record, "tool_sources")
    if not sources and not tools:  # a run saved before tool sources: its specs, with no names to compare
        specs = recorded_strings(record, "tools")
        return [f"{_flag('--tools', spec_under(spec, folder))}: the run was recorded with it" for spec in specs]
    given = {tool.name for tool in tools}
    located: dict[str, list[str]] = {}
    unlocated = []
    for source in sources:
        if source["name"] in given:
            continue
        name, spec, server = visible(source["name"], keep_lines=False), source.get("spec"), source.get("server")
        if isinstance(server, str):
            located.setdefault(_flag("--mcp", server), []).append(name)
        elif isinstance(spec, str):
            located.setdefault(_flag("--tools", spec_under(spec, folder)), []).append(name)
        else:
            unlocated.append(name)
    needs = [f"{flag}: for the tool(s) {', '.join(names)}" for flag, names in located.items()]
    if unlocated:
        needs.append(f"--tools SPEC: for the tool(s) {', '.join(unlocated)}, whose module was not recorded")
    return needs


def _variable_needs(record: dict[str, Any], available: set[str], folder: Path) -> list[str]:
    """Recorded variables neither saved in the run nor passed with --var, with the file each came from."""
    needs = []
    for source in recorded_entries(record, "variable_sources"):
        name = visible(source["name"], keep_lines=False)
        if source["name"] in available:
            continue
        file = source.get("file")
        if isinstance(file, str):
            needs.append(f"{_flag('--var', f'{name}=@{folder / file}')}: the run read {name} from that file")
        else:
            recorded = str(source.get("from", "python"))
            origin = _ORIGINS.get(recorded, visible(recorded, keep_lines=False))
            needs.append(f"--var {shlex.quote(name)}=@FILE: {name} came from {origin}; save its value to a file")
    return needs


def _recorded_tool_specs(record: dict[str, Any], folder: Path, given: set[str]) -> list[str]:
    """The recorded specs of the tools not given, for --as-recorded: only files inside the run's folder.

    A file's import runs its code, so the record may name only what the user was handed with it:
    a ``file.py`` spec, or a module whose file lies in the folder (``tools:lookup`` with
    ``tools.py`` beside the run). An installed module, or a file that climbs out, stays a flag
    for the user to pass. Never an MCP server: it is recorded with no spec, as starting a
    process always takes the user's --mcp."""
    sources = recorded_entries(record, "tool_sources")
    specs = [
        s["spec"] for s in sources if s["name"] not in given and isinstance(s.get("spec"), str) and "server" not in s
    ]
    if not sources and not given:
        specs = recorded_strings(record, "tools")
    adopted = []
    for spec in dict.fromkeys(specs):
        target, sep, attr = spec.partition(":")
        if (file := _tool_file_inside(folder, target)) is not None:
            adopted.append(f"{file}{sep}{attr}")
    return adopted


def _tool_file_inside(folder: Path, target: str) -> Path | None:
    """The file a recorded spec names, if it lies inside the run's folder: a path, or a top-level module's file."""
    if target.endswith(".py"):
        return inside(folder, target)
    if not target.isidentifier():
        return None  # a dotted module is imported through its packages, wherever they are installed
    for candidate in (f"{target}.py", f"{target}/__init__.py"):
        if (file := inside(folder, candidate)) is not None and file.is_file():
            return file
    return None


def _recorded_variable_files(record: dict[str, Any], folder: Path, given: set[str]) -> dict[str, Any]:
    """The values of recorded variables read from files inside the run's folder, for --as-recorded."""
    values = {}
    for source in recorded_entries(record, "variable_sources"):
        file = source.get("file")
        if source["name"] in given or not isinstance(file, str) or not source["name"].isidentifier():
            continue
        if (found := inside(folder, file)) is not None and found.is_file():
            values[source["name"]] = load_value_file(check_value_file(found))
    return values


def _adopted_executor(record: dict[str, Any]) -> str | None:
    """The recorded executor, for --as-recorded, when it confines code at least as the default does."""
    recorded = record.get("executor")
    return recorded if isinstance(recorded, str) and recorded in _ADOPTABLE_EXECUTORS else None


def _check_needs(path: Path, needs: list[str]) -> None:
    """Stop before anything runs when the run needs flags it was not given, naming each."""
    if needs:
        lines = "\n".join(f"  {need}" for need in needs)
        raise ReplayNeedsFlags(
            visible(
                f"{path} cannot be replayed as it ran with what was passed; nothing was run. Pass:\n"
                f"{lines}\n{_CHECK_SUGGESTIONS}"
            )
        )


def _replay_agent(
    data: dict[str, Any], record: dict[str, Any], model: ReplayModel, tools: list[Tool], executor: str, **settings: Any
) -> CodeAgent:
    """The agent that re-runs the recording: as many steps as it took, planning as often."""
    actions = [s for s in data["steps"] if s.get("type") == "action"]
    if actions and (actions[-1].get("error") or {}).get("message", "").startswith(
        "reached the maximum number of steps"
    ):
        actions = actions[:-1]  # the answer asked for after the last step, not a step of its own
    interval = record.get("planning_interval")
    if not isinstance(interval, int) or isinstance(interval, bool) or interval < 1:
        interval = _planning_interval(data["steps"])
    return CodeAgent(
        tools=tools,
        model=model,
        executor=executor,
        planning_interval=interval,
        max_steps=max(1, len(actions)),
        verbosity_level=-1,
        **settings,
    )


def replay_run(
    path: str | Path,
    *,
    executor: str | None = None,
    tools: list[Tool] | None = None,
    tool_specs: list[str] | None = None,
    variables: dict[str, Any] | None = None,
    executor_kwargs: dict[str, Any] | None = None,
    authorized_imports: list[str] | None = None,
    as_recorded: bool = False,
) -> ReplayReport:
    """Re-run a saved run's code in a fresh sandbox and compare it with the recording.

    Only what the caller passes decides the sandbox (`executor`, default local, with
    `executor_kwargs` and `authorized_imports`) and the host code (`tools`, else `tool_specs`).
    The run's record is compared with them: where the run needs more, `ReplayNeedsFlags`
    names it before anything runs. `variables` add to (and override) the values a
    ``codeward run --save`` kept.

    `as_recorded` is the caller's consent to take from the record what it lacks: an executor
    that confines code at least as local does, the recorded tools whose files lie inside the
    run's folder, and variable files inside that folder. Never an installed module, imports beyond
    the defaults or an unconfined executor: those always take their own flags.
    """
    imports = [] if authorized_imports is None else checked_names("authorized_imports", authorized_imports, "modules")
    if tool_specs is not None:
        tool_specs = checked_names("tool_specs", tool_specs, "tool files or modules", "['tools.py']")
    path = Path(path)
    try:
        model = ReplayModel(path)  # checks that the file is a saved run, with errors that say so
    except ValueError as error:
        raise UsageError(str(error)) from None
    data = load_run_file(path)
    tasks = [step["task"] for step in data["steps"] if step.get("type") == "task"]
    if not tasks:
        raise UsageError(f"{path} is not a saved run: it has no task step")
    record = run_record(data)
    tools = tools if tools is not None else load_tool_specs(tool_specs or [])
    given = {**recorded_variables(record), **(variables or {})}
    if as_recorded:
        executor = executor or _adopted_executor(record)
        names = {tool.name for tool in tools}
        tools += [t for t in load_tool_specs(_recorded_tool_specs(record, path.parent, names)) if t.name not in names]
        given = {**_recorded_variable_files(record, path.parent, set(given)), **given}
    chosen = executor or _DEFAULT_EXECUTOR
    _check_needs(
        path,
        [
            *_executor_needs(record, executor),
            *_import_needs(record, chosen, imports),
            *_tool_needs(record, tools, path.parent),
            *_variable_needs(record, set(given), path.parent),
        ],
    )
    agent = _replay_agent(
        data,
        record,
        model,
        tools,
        chosen,
        executor_kwargs=executor_kwargs,
        additional_authorized_imports=imports or None,
    )
    recorded_executor = record.get("executor") if isinstance(record.get("executor"), str) else None
    with agent:
        try:
            agent.run(tasks[-1], additional_args=given or None)
        except AgentGenerationError as error:
            replayed = agent.memory.to_dict()["steps"]
            checked, differences = _compare(data["steps"], replayed)
            differences.append(Difference(None, "run", "ended with the recording", f"needed more: {error}"))
            return ReplayReport(path, chosen, checked, differences, recorded_executor)
        replayed = agent.memory.to_dict()["steps"]
    checked, differences = _compare(data["steps"], replayed)
    return ReplayReport(path, chosen, checked, differences, recorded_executor)
