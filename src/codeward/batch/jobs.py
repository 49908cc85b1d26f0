"""Batch jobs: read from YAML or JSONL, and checked whole before anything runs.

A malformed file costs nothing: every job is validated first (fields, types,
model ids, variable files, executors, tool names) and every fault is reported
with the line its job starts on, the job and the field at fault, so a batch
never dies at job 40 of 50 on a typo.

A jobs file may come from anyone: it describes work, and the command line
grants power. Checking it imports and runs nothing. A job selects tools by
name among those ``--tools`` loads and ``--mcp`` servers offer, never names a
module nor starts a process; the files it names
(``script:`` and ``replay:`` models, ``@`` variable files) resolve inside the
jobs file's folder; and a job that asks for more than the defaults (imports
beyond them, a sandbox that confines less than the command line's, executor
settings that are not tighter limits) is refused unless the command line
consents (`JobDefaults.allow_imports`, `JobDefaults.allow_executors`).

Egress is the command line's to widen. A docker job gets ``--egress`` and its headers; its
own ``egress`` may name only hosts that list already allows (narrowing is free), and more
with ``--allow-job-egress``. Its ``egress_headers`` need that flag, and their values are
taken as written: a jobs file never reads this machine's environment (``env:NAME``), or a
file handed to the user could send a key of theirs to a host of the file's choosing.

Host paths are the command line's to show. Every docker job gets ``--mount``'s; a job's own
``executor_kwargs.mounts`` need ``--allow-job-mounts`` (``--allow-job-executors`` is not enough:
a mount reads or writes this machine's files), resolve a relative source inside the jobs
file's folder, and are checked as a sandbox's are (`executors.docker.mounts`) before any job runs.
"""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from codeward.executors.base import available_executors, executor_class
from codeward.executors.docker.gvisor import GVISOR
from codeward.executors.local.imports import DEFAULT_AUTHORIZED_IMPORTS
from codeward.executors.settings import checked_names, taken_name
from codeward.handed_files import inside, read_handed
from codeward.json_values import read_json
from codeward.platform.model_ids import ModelIdError, check_model_id
from codeward.platform.tool_specs import load_tool_specs
from codeward.usage import UsageError
from codeward.value_files import ValueFileError, check_value_file, mark_private_file
from codeward.wording import counted

__all__ = [
    "ALLOW_EGRESS_FLAG",
    "ALLOW_EXECUTORS_FLAG",
    "ALLOW_IMPORTS_FLAG",
    "ALLOW_MOUNTS_FLAG",
    "MCP_FLAG",
    "Job",
    "JobDefaults",
    "JobFileError",
    "JobPlace",
    "file_reference",
    "load_jobs",
    "load_placed_jobs",
    "refuse",
]

_FIELDS = (
    "id",
    "task",
    "additional_args",
    "model",
    "executor",
    "executor_kwargs",
    "runtime",
    "max_steps",
    "timeout_seconds",
    "authorized_imports",
    "tools",
    "egress",
    "egress_headers",
)
#: Executor settings only the job's egress fields and the command line set.
_EGRESS_SETTINGS = ("egress", "egress_headers", "egress_budget")
_MAX_REPORTED = 20
#: The command-line flags that let jobs ask for more than the defaults.
ALLOW_IMPORTS_FLAG = "--allow-job-imports"
ALLOW_EXECUTORS_FLAG = "--allow-job-executors"
ALLOW_EGRESS_FLAG = "--allow-job-egress"
ALLOW_MOUNTS_FLAG = "--allow-job-mounts"
#: The command-line flag that starts an MCP server for the jobs: a process, which only the user may start.
MCP_FLAG = "--mcp"
#: How far each sandbox confines the code: jupyter runs it on the host as it is; local adds a policy
#: and an OS-confined process; docker and e2b a container or a VM. Any other executor counts as jupyter.
_CONFINEMENT = {"jupyter": 0, "local": 1, "docker": 2, "e2b": 2}
#: Executor settings a job may lower below their defaults without consent: lower is stricter for each.
_LIMITS = (
    "timeout_seconds",
    "max_operations",
    "max_print_outputs_length",
    "max_value_size",
    "max_int_bits",
    "max_memory_bytes",
    "max_output_bytes",
    "cpus",
    "pids_limit",
    "sandbox_timeout",
)
#: What a limit looks like, for a message about one written as anything but a number.
_EXAMPLE_LIMITS = {"timeout_seconds": 5, "max_memory_bytes": 268435456, "cpus": 1.5}


class JobFileError(UsageError):
    """The jobs file is malformed; the message lists each job and field at fault."""


@dataclass
class JobDefaults:
    """What the command line supplies to jobs that do not say."""

    model: str | None = None
    executor: str = "local"
    #: The container runtime of docker jobs (``--runtime``; ``runsc`` is gVisor), None for Docker's default.
    runtime: str | None = None
    tools: list[str] = field(default_factory=list)
    #: The ``--mcp`` servers' commands (or URLs), whose tools join those of `tools`; never from a jobs file.
    mcp: list[str] = field(default_factory=list)
    max_steps: int = 20
    #: Jobs may name imports beyond the defaults (``--allow-job-imports``).
    allow_imports: bool = False
    #: Jobs may choose a sandbox that confines less, and executor settings (``--allow-job-executors``).
    allow_executors: bool = False
    #: What docker jobs may reach (``--egress``) and the headers added on the way (``--egress-header``,
    #: values already read); None: no way out.
    egress: list[str] | None = None
    egress_headers: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Jobs may name hosts beyond `egress`, and headers of their own (``--allow-job-egress``).
    allow_egress: bool = False
    #: The host paths every docker job's sandbox is shown (``--mount``), checked, as JSON values.
    mounts: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Jobs may show host paths of their own to their sandbox (``--allow-job-mounts``).
    allow_mounts: bool = False
    #: Every job's agent collects what its code writes under ``outputs/`` (``--collect-outputs``).
    collect_outputs: bool = False


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
    #: The command line's tool specs: the only host code a job's worker imports.
    tools: list[str] = field(default_factory=list)
    #: The command line's MCP servers: the only processes a job's worker starts for it.
    mcp: list[str] = field(default_factory=list)
    #: The job's choice among those tools, by name; empty for all of them.
    tool_names: list[str] = field(default_factory=list)
    #: The command line's ``--collect-outputs``: the job's run keeps the files its code writes under ``outputs/``.
    collect_outputs: bool = False
    #: Which time the job is run: 1, then one more each time ``--retry`` runs it again (`codeward.batch.results`).
    attempt: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class JobPlace:
    """Where a job is in its file (``line 3``, ``job 2 at line 5``), and whether it names its model itself."""

    where: str
    own_model: bool


def file_reference(value: Any) -> str | None:
    """The path in an ``"@file"`` value, or None for a plain value (``"@@x"`` is the literal ``"@x"``)."""
    if isinstance(value, str) and value.startswith("@") and not value.startswith("@@"):
        return value[1:]
    return None


def _read_entries(path: Path) -> list[tuple[str, Any]]:
    """(where, raw entry) pairs; `where` names the entry for error messages."""
    try:  # the user's own file, maybe a link to it; but held to the budget of a handed file
        text = read_handed(path, through_link=True).decode("utf-8")
    except FileNotFoundError:
        raise JobFileError(f"{path}: no such jobs file") from None
    except UnicodeDecodeError as error:
        raise JobFileError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start:,})") from None
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
    except (yaml.YAMLError, ValueError) as error:  # a number too long for Python's int is a ValueError
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
                entries.append((f"line {number}", read_json(line)))
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
        """A file the job names, which must resolve inside the jobs file's folder (links followed)."""
        path = inside(self.base_dir, raw)
        if path is None:
            raise ValueFileError(f"{raw!r} is outside the jobs file's folder; a job names files only inside it")
        return path

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
        try:
            return checked_names(name, value, "strings")
        except TypeError as error:
            self.fault(name, f"{str(error).removeprefix(name + ' '):.200}")
            return []

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
            if not isinstance(name, str) or (reason := taken_name(name)) is not None:
                said = reason if isinstance(name, str) else "is not a Python identifier"
                self.fault("additional_args", f"the name {name!r} {said}; choose another")
            reference = file_reference(item)
            resolved[name] = (
                item if reference is None else "@" + str(self._checked_file(f"additional_args.{name}", reference))
            )
        return resolved

    def _checked_file(self, name: str, raw: str) -> Path | None:
        try:
            checked = check_value_file(self._path(raw)).resolve()
        except ValueFileError as error:
            self.fault(name, str(error))
            return None
        mark_private_file(checked)
        return checked

    def model(self, default: str | None) -> str | None:
        """The job's model, else the command line's; a file the job names must be inside its folder."""
        raw = self.string("model")
        if raw is None:
            if default is None:
                self.fault("model", "no model: set the job's model, pass --model, or set CODEWARD_MODEL")
                return None
            return self._checked_model(default)
        scheme, _, path = raw.strip().partition(":")
        if scheme in ("script", "replay") and path:
            try:
                raw = f"{scheme}:{self._path(path)}"
            except ValueFileError as error:
                self.fault("model", str(error))
                return None
        return self._checked_model(raw)

    def _checked_model(self, model: str) -> str | None:
        try:
            return check_model_id(model)
        except ModelIdError as error:
            self.fault("model", str(error))
            return None

    def tool_names(self) -> list[str]:
        """The tools the job selects by name; a module or file is the command line's to load, not a job's."""
        names = self.string_list("tools")
        for name in names:
            if not name.isidentifier():
                self.fault(
                    "tools",
                    f"{name!r} is not a tool name; a job selects by name among the tools the command line "
                    f"loads, and cannot load modules or files: pass --tools {name} instead",
                )
        return names

    def imports(self, allowed: bool) -> list[str]:
        """The job's imports; any beyond the defaults only with the command line's consent."""
        imports = self.string_list("authorized_imports")
        beyond = [name for name in imports if name not in DEFAULT_AUTHORIZED_IMPORTS]
        if beyond and not allowed:
            self.fault(
                "authorized_imports",
                f"asks for imports beyond the defaults ({', '.join(map(repr, beyond))}); a jobs file cannot "
                f"grant them: pass {ALLOW_IMPORTS_FLAG} to let jobs name their imports",
            )
        return imports

    def executor(self, command_line: str, allowed: bool) -> str:
        """The job's sandbox; one that confines less than the command line's only with its consent."""
        executor = self.string("executor") or command_line
        if executor not in available_executors():
            self.fault("executor", f"unknown executor {executor!r}; choose one of {', '.join(available_executors())}")
        elif not allowed and executor != command_line and _confinement(executor) <= _confinement(command_line):
            self.fault(
                "executor",
                f"{executor!r} does not confine code more than the command line's {command_line!r}; pass "
                f"{ALLOW_EXECUTORS_FLAG} to let jobs choose their sandbox, or --executor {executor}",
            )
        return executor

    def runtime(self, executor: str, command_line: str | None) -> dict[str, Any]:
        """The docker job's runtime, as executor settings: the command line's, or gVisor, which confines more."""
        runtime = self.string("runtime") or command_line
        if "runtime" in self.entry and executor != "docker":
            self.fault("runtime", f"only docker sandboxes have a container runtime, and this job's is {executor!r}")
        elif runtime not in (command_line, GVISOR):
            self.fault(
                "runtime",
                f"a jobs file may ask only for {GVISOR!r} (gVisor), which confines more than the command line's "
                f"runtime; pass --runtime {runtime} to run jobs under it",
            )
        return {"runtime": runtime} if executor == "docker" and runtime else {}

    def executor_kwargs(self, executor: str, allowed: bool) -> dict[str, Any]:
        """The job's executor settings; any but a limit set tighter than its default only with consent."""
        kwargs = self.entry.get("executor_kwargs", {})
        if not isinstance(kwargs, dict):
            self.fault("executor_kwargs", f"must be a map of keyword arguments, got {kwargs!r:.80}")
            return {}
        kwargs = {name: value for name, value in kwargs.items() if name != "mounts"}  # `mounts` checks those
        named = [name for name in _EGRESS_SETTINGS if name in kwargs]
        if named:
            self.fault(
                "executor_kwargs",
                f"sets {', '.join(map(repr, named))}: a job's way out is its 'egress' and 'egress_headers' fields, "
                f"under the command line's --egress and {ALLOW_EGRESS_FLAG}",
            )
            kwargs = {name: value for name, value in kwargs.items() if name not in _EGRESS_SETTINGS}
        quoted = [name for name in _LIMITS if isinstance(kwargs.get(name), str)]
        for name in quoted:  # a limit in quotes is a typo to fix, not a setting to consent to
            self.fault(
                "executor_kwargs",
                f"sets {name!r} to {kwargs.pop(name)!r:.40}, a string: a limit is a number, written without "
                f"quotes ({name}: {_EXAMPLE_LIMITS.get(name, 5)})",
            )
        loosened = [] if allowed or not kwargs else _loosened_settings(executor, kwargs)
        if loosened:
            self.fault(
                "executor_kwargs",
                f"sets {', '.join(map(repr, loosened))}, which a jobs file may only lower below the default "
                f"limit; pass {ALLOW_EXECUTORS_FLAG} to let jobs set their sandbox's settings",
            )
        return kwargs

    def mounts(self, executor: str, defaults: JobDefaults) -> dict[str, Any]:
        """The docker job's mounts: the command line's, and the job's own only with its consent."""
        kwargs = self.entry.get("executor_kwargs")
        own = kwargs.get("mounts") if isinstance(kwargs, dict) else None
        if own is None:
            return {"mounts": dict(defaults.mounts)} if executor == "docker" and defaults.mounts else {}
        if executor != "docker":
            self.fault(
                "executor_kwargs", f"sets 'mounts': only docker sandboxes take mounts, and this job's is {executor!r}"
            )
            return {}
        if not defaults.allow_mounts:
            self.fault(
                "executor_kwargs",
                "sets 'mounts': a jobs file cannot show this machine's files to a sandbox; pass "
                f"{ALLOW_MOUNTS_FLAG} to let jobs name their mounts, or --mount on the command line",
            )
            return {}
        from codeward.executors.docker.mounts import mounts_in_folder

        try:
            return {"mounts": mounts_in_folder(own, self.base_dir, defaults.mounts)}
        except ValueError as error:
            self.fault("executor_kwargs", str(error))
            return {}

    def egress(self, executor: str, defaults: JobDefaults) -> dict[str, Any]:
        """The docker job's egress settings: the command line's, narrowed by the job, widened only with consent."""
        if "egress" not in self.entry and "egress_headers" not in self.entry:
            return _egress_kwargs(defaults.egress, defaults.egress_headers) if executor == "docker" else {}
        if executor != "docker":
            field_name = "egress" if "egress" in self.entry else "egress_headers"
            self.fault(field_name, f"only docker sandboxes have an egress list, and this job's is {executor!r}")
            return {}
        entries = self.string_list("egress") if "egress" in self.entry else list(defaults.egress or [])
        beyond = [entry for entry in entries if not _granted(entry, defaults.egress)]
        if beyond and not defaults.allow_egress:
            self.fault(
                "egress",
                f"reaches beyond the command line's --egress ({', '.join(map(repr, beyond))}); a jobs file cannot "
                f"widen what a sandbox reaches: pass {ALLOW_EGRESS_FLAG} to let jobs name their hosts, or --egress",
            )
        headers = _narrowed_headers(entries, defaults.egress_headers)
        for host, values in self._job_headers(defaults.allow_egress).items():
            headers.setdefault(host, {}).update(values)
        try:
            from codeward.egress.policy import parse_policy

            parse_policy(entries, headers)
        except ValueError as error:
            self.fault("egress", str(error))
        return _egress_kwargs(entries, headers)

    def _job_headers(self, allowed: bool) -> dict[str, dict[str, str]]:
        """The job's own headers: only with consent, and only values written in the file."""
        headers = self.entry.get("egress_headers")
        if headers is None:
            return {}
        if not allowed:
            self.fault(
                "egress_headers",
                "a jobs file cannot add headers to a sandbox's requests (they could replace your keys); pass "
                f"--egress-header on the command line, or {ALLOW_EGRESS_FLAG} to let jobs write their own",
            )
            return {}
        if not isinstance(headers, dict) or not all(isinstance(values, dict) for values in headers.values()):
            self.fault("egress_headers", f"must map hosts to maps of header names to values, got {headers!r:.80}")
            return {}
        for host, values in headers.items():
            for name, value in values.items():
                if isinstance(value, str) and ENV_REFERENCE.search(value):
                    self.fault(
                        "egress_headers",
                        f"{host}: {name} reads this machine's environment ({value!r:.40}); a jobs file never does, "
                        "or a file handed to you could send your keys to a host of its choosing: pass "
                        f"--egress-header '{host}:{name}=...env:NAME' on the command line instead",
                    )
        return {str(host): dict(values) for host, values in headers.items()}


#: What `codeward batch --egress-header` reads from the environment; never read from a jobs file.
ENV_REFERENCE = re.compile(r"env:[A-Za-z_][A-Za-z0-9_]*\s*$")


def _egress_kwargs(entries: list[str] | None, headers: dict[str, dict[str, str]]) -> dict[str, Any]:
    if entries is None:
        return {}
    return {"egress": list(entries), **({"egress_headers": headers} if headers else {})}


def _granted(entry: str, command_line: list[str] | None) -> bool:
    """Whether the command line's list already allows all that `entry` would (a name under its wildcard, too)."""
    from codeward.egress.policy import parse_policy

    try:
        granted = parse_policy(command_line or [])
        (rule,) = parse_policy([entry]).rules
    except ValueError:
        return False  # told as the job's fault when its whole list is checked
    if any((each.name, each.network, each.ports) == (rule.name, rule.network, rule.ports) for each in granted.rules):
        return True
    if rule.name is None or rule.name.startswith("*."):
        return False
    return all(granted.refusal(rule.name, port) is None for port in rule.ports)


def _narrowed_headers(entries: list[str], headers: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """The command line's headers for the hosts the job's list still names (a narrowed list drops the others)."""
    from codeward.egress.policy import parse_policy

    kept: dict[str, dict[str, str]] = {}
    for host, values in headers.items():
        try:
            parse_policy(entries, {host: values})
        except ValueError:
            continue
        kept[host] = dict(values)
    return kept


def _confinement(executor: str) -> int:
    return _CONFINEMENT.get(executor, 0)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _default_limits(executor: str, names: list[str]) -> dict[str, Any]:
    """The executor's defaults for these settings, from its signature (codeward's own module, not a job's)."""
    try:
        parameters = inspect.signature(executor_class(executor)).parameters
    except (ImportError, ValueError):  # not installed: what it would default to is not known here
        return {}
    return {name: parameters[name].default for name in names if name in parameters}


def _loosened_settings(executor: str, kwargs: dict[str, Any]) -> list[str]:
    """The settings that are not a limit lowered below the executor's default (its signature says it)."""
    defaults = _default_limits(executor, list(kwargs)) if all(name in _LIMITS for name in kwargs) else {}
    return [
        str(name)
        for name, value in kwargs.items()
        if not (_is_number(value) and _is_number(defaults.get(name)) and 0 < value <= defaults[name])
    ]


def _check_entry(where: str, entry: Any, base_dir: Path, defaults: JobDefaults) -> tuple[Job | None, list[str]]:
    if not isinstance(entry, dict):
        return None, [f"{where}: a job is a map with at least 'id' and 'task', got {type(entry).__name__}"]
    check = _Checker(where, entry, base_dir)
    job_id = check.string("id", required=True)
    if job_id:
        check.where = f"{where} (id {job_id!r})"
    for name in entry:
        if name == "mcp":
            check.fault(name, f"a jobs file cannot start an MCP server: pass {MCP_FLAG} COMMAND on the command line")
        elif name not in _FIELDS:
            check.fault(name, f"is not a job field; the fields are: {', '.join(_FIELDS)}")
    task = check.string("task", required=True)
    executor = check.executor(defaults.executor, defaults.allow_executors)
    job = Job(
        id=job_id or "",
        task=task or "",
        model=check.model(defaults.model) or "",
        executor=executor,
        additional_args=check.variables(),
        executor_kwargs={
            **check.runtime(executor, defaults.runtime),
            **check.executor_kwargs(executor, defaults.allow_executors),
            **check.egress(executor, defaults),
            **check.mounts(executor, defaults),
        },
        max_steps=check.number("max_steps", int, defaults.max_steps),
        timeout_seconds=check.number("timeout_seconds", float, None),
        authorized_imports=check.imports(defaults.allow_imports),
        tools=list(defaults.tools),
        mcp=list(defaults.mcp),
        tool_names=check.tool_names(),
        collect_outputs=defaults.collect_outputs,
    )
    return (None if check.faults else job), check.faults


def load_jobs(path: str | Path, defaults: JobDefaults | None = None) -> list[Job]:
    """Every job of the file, checked; raise `JobFileError` listing every fault found."""
    return load_placed_jobs(path, defaults)[0]


def load_placed_jobs(path: str | Path, defaults: JobDefaults | None = None) -> tuple[list[Job], dict[str, JobPlace]]:
    """`load_jobs`, and where each job is in the file (by id), for faults found in the jobs later."""
    path = Path(path)
    defaults = defaults or JobDefaults()
    entries = _read_entries(path)
    if not entries:
        raise JobFileError(f"{path}: holds no jobs")
    jobs: list[Job] = []
    faults: list[str] = []
    places: dict[str, JobPlace] = {}
    for where, entry in entries:
        job, problems = _check_entry(where, entry, path.parent, defaults)
        faults.extend(problems)
        if job is None:
            continue
        if job.id in places:
            faults.append(
                f"{where}, field 'id': {job.id!r} is also the id of {places[job.id].where}; ids must be unique"
            )
        places[job.id] = JobPlace(where, "model" in entry)
        jobs.append(job)
    refuse(path, faults)
    refuse(path, _unknown_tools(jobs, defaults))
    return jobs, places


def refuse(path: Path, faults: list[str]) -> None:
    """Raise `JobFileError` listing `faults` (the first `_MAX_REPORTED`), if there are any."""
    if faults:
        shown = faults[:_MAX_REPORTED]
        more = f"\n  ... and {len(faults) - len(shown)} more" if len(faults) > len(shown) else ""
        raise JobFileError(
            f"{path}: {counted(len(faults), 'problem')}, nothing was run:\n  " + "\n  ".join(shown) + more
        )


def _unknown_tools(jobs: list[Job], defaults: JobDefaults) -> list[str]:
    """Tool names jobs select that the command line's tools lack. Run once the file passed its checks:
    it imports the ``--tools`` modules and starts the ``--mcp`` servers, which only the command line names."""
    served = _served_tool_names(defaults.mcp)  # started even when no job selects: a server that fails is told now
    tools = load_tool_specs(defaults.tools)  # and a --tools file that fails to load, before any job runs
    if not any(job.tool_names for job in jobs):
        return []
    loaded = {tool.name for tool in tools} | served
    return [
        f"job {job.id!r}, field 'tools': no tool named {name!r} among those --tools loads or --mcp serves"
        f" ({', '.join(sorted(loaded)) or 'none'})"
        for job in jobs
        for name in job.tool_names
        if name not in loaded
    ]


def _served_tool_names(commands: list[str]) -> set[str]:
    """The tools the ``--mcp`` servers offer: each started once to list them, then stopped.

    Checked here rather than in the workers, so a server that cannot start or a name no server
    offers stops the batch before any job runs, as for ``--tools``.
    """
    if not commands:
        return set()
    from codeward.executors.base import import_with_extra

    mcp = import_with_extra("codeward.mcp.tools", needed_by=f"codeward batch {MCP_FLAG}", extra="mcp")
    names: set[str] = set()
    for command in commands:
        try:
            with mcp.MCPTools(command) as tools:
                names |= {tool.name for tool in tools}
        except (mcp.MCPToolError, ValueError) as error:
            raise UsageError(f"{MCP_FLAG} {command!r}: {error}") from error
    return names
