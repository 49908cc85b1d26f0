"""Batch jobs: read from YAML or JSONL, and checked whole before anything runs.

A malformed file costs nothing: every job is validated first (fields, types,
model ids, variable files, executors, tool specs) and every fault is reported
with the line its job starts on, the job and the field at fault, so a batch
never dies at job 40 of 50 on a typo.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from codeward.executors.base import available_executors
from codeward.model_ids import ModelIdError, check_model_id
from codeward.tool_specs import ToolSpecError, load_tool_specs
from codeward.usage import UsageError
from codeward.value_files import ValueFileError, check_value_file

__all__ = ["Job", "JobDefaults", "JobFileError", "file_reference", "load_jobs"]

_FIELDS = (
    "id",
    "task",
    "additional_args",
    "model",
    "executor",
    "executor_kwargs",
    "max_steps",
    "timeout_seconds",
    "authorized_imports",
    "tools",
)
_MAX_REPORTED = 20


class JobFileError(UsageError):
    """The jobs file is malformed; the message lists each job and field at fault."""


@dataclass
class JobDefaults:
    """What the command line supplies to jobs that do not say."""

    model: str | None = None
    executor: str = "local"
    tools: list[str] = field(default_factory=list)
    max_steps: int = 20


@dataclass
class Job:
    """One task to run in a sandbox of its own; every field resolved and checked."""

    id: str
    task: str
    model: str
    executor: str
    additional_args: dict[str, Any] | str = field(default_factory=dict)
    executor_kwargs: dict[str, Any] = field(default_factory=dict)
    max_steps: int = 20
    timeout_seconds: float | None = None
    authorized_imports: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def file_reference(value: Any) -> str | None:
    """The path in an ``"@file"`` value, or None for a plain value (``"@@x"`` is the literal ``"@x"``)."""
    if isinstance(value, str) and value.startswith("@") and not value.startswith("@@"):
        return value[1:]
    return None


def _read_entries(path: Path) -> list[tuple[str, Any]]:
    """(where, raw entry) pairs; `where` names the entry for error messages."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise JobFileError(f"{path}: no such jobs file") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        return _yaml_entries(path, text)
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return _jsonl_entries(path, text)
    raise JobFileError(f"{path}: jobs files are .yaml, .yml or .jsonl, not {path.suffix or 'without suffix'}")


def _yaml_entries(path: Path, text: str) -> list[tuple[str, Any]]:
    """Each job with the line it starts on, so that a fault points into the file."""
    try:
        data = yaml.safe_load(text)
        lines = _job_lines(yaml.compose(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError as error:
        raise JobFileError(f"{path}: not valid YAML: {error}") from None
    if isinstance(data, dict) and "jobs" in data:
        data = data["jobs"]
    if not isinstance(data, list):
        raise JobFileError(f"{path}: a YAML jobs file holds a list of jobs (or a map with a 'jobs' list)")
    return [
        (f"job {index + 1} at line {line}", entry) for index, (line, entry) in enumerate(zip(lines, data, strict=True))
    ]


def _job_lines(root: yaml.Node | None) -> list[int]:
    """The first line of each job in the document: items of the top list, or of the top map's 'jobs' list."""
    if isinstance(root, yaml.MappingNode):
        root = next((value for key, value in root.value if key.value == "jobs"), None)
    if not isinstance(root, yaml.SequenceNode):
        return []
    return [item.start_mark.line + 1 for item in root.value]


def _jsonl_entries(path: Path, text: str) -> list[tuple[str, Any]]:
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                entries.append((f"line {number}", json.loads(line)))
            except json.JSONDecodeError as error:
                raise JobFileError(f"{path}: line {number} is not valid JSON: {error}") from None
    return entries


class _Checker:
    """Validates one entry, collecting every fault instead of stopping at the first."""

    def __init__(self, where: str, entry: dict[str, Any], base_dir: Path) -> None:
        self.where = where
        self.entry = entry
        self.base_dir = base_dir
        self.faults: list[str] = []

    def fault(self, name: str, message: str) -> None:
        self.faults.append(f"{self.where}, field '{name}': {message}")

    def _path(self, raw: str) -> Path:
        path = Path(raw).expanduser()
        return path if path.is_absolute() else self.base_dir / path

    def string(self, name: str, required: bool = False) -> str | None:
        value = self.entry.get(name)
        if value is None:
            if required:
                self.fault(name, "is missing")
            return None
        if isinstance(value, int) and not isinstance(value, bool) and name == "id":
            return str(value)
        if not isinstance(value, str) or not value.strip():
            self.fault(name, f"must be a non-empty string, got {value!r:.80}")
            return None
        return value

    def number(self, name: str, kind: type, default: Any) -> Any:
        value = self.entry.get(name, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else int) or value <= 0:
            self.fault(name, f"must be a positive {'number' if kind is float else 'integer'}, got {value!r}")
            return default
        return value

    def string_list(self, name: str) -> list[str]:
        value = self.entry.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.fault(name, f"must be a list of strings, got {value!r:.80}")
            return []
        return value

    def variables(self) -> dict[str, Any] | str:
        value = self.entry.get("additional_args", {})
        reference = file_reference(value)
        if reference is not None:
            if not reference.lower().endswith(".json"):
                self.fault("additional_args", f"{value!r} must name a .json file holding a map of variables")
                return {}
            return "@" + str(self._checked_file("additional_args", reference) or reference)
        if not isinstance(value, dict):
            self.fault(
                "additional_args", f"must be a map of variable names to values, or '@file.json'; got {value!r:.80}"
            )
            return {}
        resolved = {}
        for name, item in value.items():
            if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
                self.fault("additional_args", f"{name!r} cannot be a variable name; use a Python identifier")
            reference = file_reference(item)
            resolved[name] = (
                item if reference is None else "@" + str(self._checked_file(f"additional_args.{name}", reference))
            )
        return resolved

    def _checked_file(self, name: str, raw: str) -> Path | None:
        try:
            return check_value_file(self._path(raw)).resolve()
        except ValueFileError as error:
            self.fault(name, str(error))
            return None


def _check_entry(where: str, entry: Any, base_dir: Path, defaults: JobDefaults) -> tuple[Job | None, list[str]]:
    if not isinstance(entry, dict):
        return None, [f"{where}: a job is a map with at least 'id' and 'task', got {type(entry).__name__}"]
    check = _Checker(where, entry, base_dir)
    job_id = check.string("id", required=True)
    if job_id:
        check.where = f"{where} (id {job_id!r})"
    for name in entry:
        if name not in _FIELDS:
            check.fault(name, f"is not a job field; the fields are: {', '.join(_FIELDS)}")
    task = check.string("task", required=True)
    executor = check.string("executor") or defaults.executor
    if executor not in available_executors():
        check.fault("executor", f"unknown executor {executor!r}; choose one of {', '.join(available_executors())}")
    kwargs = entry.get("executor_kwargs", {})
    if not isinstance(kwargs, dict):
        check.fault("executor_kwargs", f"must be a map of keyword arguments, got {kwargs!r:.80}")
        kwargs = {}
    model = check.string("model") or defaults.model
    if model is None:
        check.fault("model", "no model: set the job's model, pass --model, or set CODEWARD_MODEL")
    else:
        try:
            model = check_model_id(model, base_dir if "model" in entry else None)
        except ModelIdError as error:
            check.fault("model", str(error))
    tools = check.string_list("tools") or list(defaults.tools)
    try:
        load_tool_specs(tools)
    except (ToolSpecError, ImportError, SyntaxError) as error:
        check.fault("tools", str(error))
    job = Job(
        id=job_id or "",
        task=task or "",
        model=model or "",
        executor=executor,
        additional_args=check.variables(),
        executor_kwargs=kwargs,
        max_steps=check.number("max_steps", int, defaults.max_steps),
        timeout_seconds=check.number("timeout_seconds", float, None),
        authorized_imports=check.string_list("authorized_imports"),
        tools=tools,
    )
    return (None if check.faults else job), check.faults


def load_jobs(path: str | Path, defaults: JobDefaults | None = None) -> list[Job]:
    """Every job of the file, checked; raise `JobFileError` listing every fault found."""
    path = Path(path)
    defaults = defaults or JobDefaults()
    entries = _read_entries(path)
    if not entries:
        raise JobFileError(f"{path}: holds no jobs")
    jobs: list[Job] = []
    faults: list[str] = []
    seen: dict[str, str] = {}
    for where, entry in entries:
        job, problems = _check_entry(where, entry, path.parent, defaults)
        faults.extend(problems)
        if job is None:
            continue
        if job.id in seen:
            faults.append(f"{where}, field 'id': {job.id!r} is also the id of {seen[job.id]}; ids must be unique")
        seen[job.id] = where
        jobs.append(job)
    if faults:
        shown = faults[:_MAX_REPORTED]
        more = f"\n  ... and {len(faults) - len(shown)} more" if len(faults) > len(shown) else ""
        raise JobFileError(f"{path}: {len(faults)} problem(s), nothing was run:\n  " + "\n  ".join(shown) + more)
    return jobs
