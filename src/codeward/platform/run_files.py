"""A saved run file: what it holds beside the memory's steps, how it is written, and how its record is read.

A run file is the agent memory's JSON (``AgentMemory.to_dict``) with a ``codeward_run`` record
of how the run was set up (`RunSetup`): the executor and its plain settings, the imports it
added, where each tool and variable came from, and (for ``codeward run --save`` and a batch's
runs) the variables' values through the value codec. `AgentMemory.save`, ``codeward run --save``
and a batch worker write it (in a runs folder, under the name `run_file` gives the job);
`ReplayModel`, the replay and ``codeward view`` read it.

A run file may come from a stranger: the readers here keep only well-formed entries of the
record, and a caller treats what they return as hints, never as orders.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from codeward.executors.codec import CodecError, decode_variables, encode_variables
from codeward.handed_files import file_name, read_handed, write_fresh
from codeward.json_values import read_json
from codeward.platform.tool_specs import load_tools
from codeward.redaction import holds_secret, redacted_data
from codeward.value_files import parse_var_option

__all__ = [
    "RUN_RECORD",
    "RunSetup",
    "SavedMemory",
    "ToolSource",
    "VariableSource",
    "load_run_file",
    "mounts_setting",
    "plain_settings",
    "recorded_entries",
    "recorded_strings",
    "recorded_variables",
    "run_file",
    "run_record",
    "save_run",
    "write_run",
]

#: The key of a saved run's set-up record, which `codeward replay` reads.
RUN_RECORD = "codeward_run"

#: The executor settings a saved run records: limits and modes that say how the code ran. Never a
#: path, an environment, a key or a connection, so a run file can be handed to anyone.
_PLAIN_SETTINGS = (
    "timeout_seconds",
    "max_operations",
    "max_memory_bytes",
    "max_print_outputs_length",
    "max_output_bytes",
    "isolation",
    "confinement",
    "tools_mode",
    "allow_pickle",
    "kernel_name",
    "sandbox_timeout",
    "allow_internet_access",
)


def plain_settings(executor: object) -> dict[str, Any]:
    """The executor's settings worth recording: the allowed names, and only plain values; its mounts'
    sandbox paths and modes (`mounts_setting`), never their host paths."""
    settings: dict[str, Any] = {}
    for name in _PLAIN_SETTINGS:
        value = getattr(executor, name, None)
        if isinstance(value, (bool, int, float, str)):
            settings[name] = value
    mounts = mounts_setting(executor)
    if mounts:
        settings["mounts"] = mounts
    return settings


def mounts_setting(executor: object) -> dict[str, str]:
    """The sandbox paths an executor's host mounts appear at, and their modes (``"ro"``, ``"rw"``); {} for none.

    The host paths are left out: a saved run or a trace may be handed to anyone, and a path names
    a machine's users and folders."""
    modes = getattr(executor, "mount_modes", None)
    if not isinstance(modes, dict):
        return {}
    return {str(target): str(mode) for target, mode in modes.items() if isinstance(target, str)}


@dataclass(frozen=True)
class ToolSource:
    """Where a tool came from, so a replay can name the `--tools` spec or `--mcp` server that finds it again."""

    name: str
    module: str | None = None
    attr: str | None = None
    file: str | None = None
    #: The command (or URL) of the MCP server that offers the tool; a tool says so with `server_command`.
    server: str | None = None

    @classmethod
    def of(cls, tool: Any) -> ToolSource:
        """Look the tool up by identity in its module; a module run as a script is named by its file.

        Only modules already imported are read: recording a tool never imports anything. A tool
        that a server offers (an MCP tool) names the server instead: its module is not where it lives.
        """
        server = getattr(tool, "server_command", None)
        if isinstance(server, str):
            return cls(tool.name, server=server)
        function = getattr(tool, "function", None)
        module_name = getattr(function if function is not None else type(tool), "__module__", None) or ""
        module = sys.modules.get(module_name)
        attr = next((key for key, value in vars(module).items() if value is tool), None) if module else None
        if attr is None:
            return cls(tool.name)
        if module_name != "__main__":
            return cls(tool.name, module=module_name, attr=attr)
        file = getattr(module, "__file__", None)
        return cls(tool.name, attr=attr, file=str(Path(file).resolve())) if file else cls(tool.name)

    def spec(self, folder: Path) -> str | None:
        """The spec as `--tools` takes it, a file relative to `folder`; None where the origin is unknown."""
        if self.file is not None:
            where = os.path.relpath(self.file, folder.resolve())
        elif self.module is not None:
            where = self.module
        else:
            return None
        return f"{where}:{self.attr}" if self.attr else where

    def to_dict(self, folder: Path) -> dict[str, Any]:
        if self.server is not None:
            return {"name": self.name, "server": self.server}
        spec = self.spec(folder)
        return {"name": self.name, "spec": spec} if spec else {"name": self.name}


@dataclass(frozen=True)
class VariableSource:
    """A variable's name and where its value came from (never the value: it may be private)."""

    name: str
    origin: str = "python"
    file: str | None = None

    def to_dict(self, folder: Path) -> dict[str, Any]:
        record: dict[str, Any] = {"name": self.name, "from": self.origin}
        if self.file is not None:
            record["file"] = os.path.relpath(self.file, folder.resolve())
        return record


@dataclass
class RunSetup:
    """How a run was set up, saved with it so that a replay can say what it needs to run the same way.

    Names, plain settings and origins only. A saved run may come from a stranger, so a replay
    shows these as suggestions and acts only on what its user passes.
    """

    tools: list[ToolSource]
    variables: list[VariableSource]
    planning_interval: int | None = None
    executor: str | None = None
    executor_settings: dict[str, Any] = field(default_factory=dict)
    authorized_imports: list[str] = field(default_factory=list)

    def to_dict(self, folder: Path) -> dict[str, Any]:
        """The record, with file paths relative to `folder` (where the run is saved)."""
        return {
            "executor": self.executor,
            "executor_settings": dict(self.executor_settings),
            "authorized_imports": list(self.authorized_imports),
            "planning_interval": self.planning_interval,
            "tool_sources": [tool.to_dict(folder) for tool in self.tools],
            "variable_sources": [variable.to_dict(folder) for variable in self.variables],
        }


class SavedMemory(Protocol):
    """What a run file is written from: the memory's steps as JSON, and its set-up if it recorded one."""

    setup: RunSetup | None

    def to_dict(self) -> dict[str, Any]: ...


def write_run(
    path: Path,
    memory: dict[str, Any],
    setup: RunSetup | None,
    variables: str | None = None,
    kept_in: Path | None = None,
) -> Path:
    """Write the memory's JSON and its set-up record whole or not at all, so a crash never leaves half a run,
    never through a link, readable by its owner only (`write_fresh`: a run may hold secret values);
    `variables` are the values encoded by the codec, kept only with a record. The record's paths are
    relative to `kept_in`, the folder the run will be kept in, when that is not where it is written."""
    data = dict(memory)
    if setup is not None:
        data[RUN_RECORD] = setup.to_dict(kept_in or path.parent)
        if variables is not None:
            data[RUN_RECORD]["variables"] = variables
    return write_fresh(path, json.dumps(redacted_data(data), indent=2, default=str).encode("utf-8"))


def load_run_file(path: str | Path) -> Any:
    """A run file's JSON, read without following a link at its name and within the bytes a handed file may
    hold (`read_handed`): the file may have been handed over in a folder of links. Raises what opening
    (`OSError`, `HandedFileError`) or parsing raises."""
    return read_json(read_handed(path))


def run_file(runs: Path, job_id: str) -> Path:
    """Where a batch job's run is saved in its runs folder, for the worker that writes it and the page that
    reads it: its id as a file name (`file_name`: made safe and short, and unique again by a hash if changed)."""
    return runs / file_name(job_id, ".json")


def _tool_sources(specs: list[str]) -> list[ToolSource]:
    """Each tool under the spec the user named it by (already loaded: nothing new is imported)."""
    sources = []
    for spec in specs:
        target, _, attr = spec.partition(":")
        is_file = target.endswith(".py")
        file = str(Path(target).expanduser().resolve()) if is_file else None
        module = None if is_file else target
        sources += [ToolSource(tool.name, module, attr or None, file) for tool in load_tools(spec)]
    return sources


def _variable_sources(variables: dict[str, Any], variable_files: list[str], saved: set[str]) -> list[VariableSource]:
    """Each variable with the file `--var` read it from, else whether its value is in the run file (a
    secret's never is)."""
    files = dict(parse_var_option(option) for option in variable_files)
    return [
        VariableSource(name, "file", str(files[name].resolve()))
        if name in files
        else VariableSource(name, "saved" if name in saved else "secret" if holds_secret(value) else "python")
        for name, value in variables.items()
    ]


def save_run(
    memory: SavedMemory,
    path: str | Path,
    *,
    tool_specs: list[str],
    variables: dict[str, Any],
    executor: str,
    authorized_imports: list[str],
    variable_files: list[str] | None = None,
    kept_in: Path | None = None,
) -> str | None:
    """Write the memory's last run with its set-up record; return a warning if variables were left out.

    The record names the `--tools` specs and `--var` files as given, and the server of each MCP
    tool, so `codeward replay` can suggest the same flags; the variables' values are saved too, so
    a replay needs no `--var`, except those that hold a secret (`codeward.redaction`): a replay
    asks for them again.
    """
    path = Path(path)
    warning, encoded = None, None
    kept = {name: value for name, value in variables.items() if not holds_secret(value)}
    try:
        encoded = encode_variables(kept)
    except CodecError as error:
        warning = f"the variables were not saved ({error}); pass them to codeward replay with --var"
    recorded = memory.setup or RunSetup([], [])
    setup = replace(
        recorded,
        executor=executor,
        authorized_imports=list(authorized_imports),
        tools=_tool_sources(tool_specs) + [source for source in recorded.tools if source.server is not None],
        variables=_variable_sources(variables, variable_files or [], saved=set(kept) if encoded is not None else set()),
    )
    write_run(path, memory.to_dict(), setup, encoded, kept_in)
    return warning


def run_record(data: dict[str, Any]) -> dict[str, Any]:
    """The run file's set-up record; an empty one where it has none, or one that is not a record."""
    record = data.get(RUN_RECORD)
    return record if isinstance(record, dict) else {}


def recorded_strings(record: dict[str, Any], key: str) -> list[str]:
    """The strings of a list in the record; anything else counts as nothing recorded."""
    value = record.get(key)
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def recorded_entries(record: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The entries of a list of ``{"name": ...}`` records in the record, malformed ones left out."""
    value = record.get(key)
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, dict) and isinstance(item.get("name"), str)]


def recorded_variables(record: dict[str, Any]) -> dict[str, Any]:
    """The variables' values a ``codeward run --save`` kept: data through the codec, which runs no code."""
    encoded = record.get("variables")
    if not isinstance(encoded, str):
        return {}
    try:
        return decode_variables(encoded)
    except (CodecError, ValueError):
        return {}
