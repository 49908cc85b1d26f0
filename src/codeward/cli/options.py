"""The options several subcommands share, and what their values become: an agent, variables, MCP tools.

`run`, `replay`, `batch` and `mcp serve` declare these flags through one function each, so a flag
reads the same wherever it is taken; what a flag names that cannot work is a `UsageError`, the
user's to fix, never a fault of codeward's.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import re
import stat
from typing import TYPE_CHECKING, Any

from codeward.executors.base import ExecutorError
from codeward.redaction import mark_secret
from codeward.usage import UsageError

if TYPE_CHECKING:
    from codeward import CodeAgent

__all__ = [
    "ENV_VALUE",
    "add_egress_options",
    "add_import_option",
    "add_mcp_env",
    "add_model_options",
    "add_mount_option",
    "check_variable_names",
    "egress_executors",
    "egress_settings",
    "hand_files",
    "make_agent",
    "mcp_tools",
    "mount_settings",
    "read_handed_files",
    "read_variables",
]

#: A header value that ends in ``env:NAME`` takes that part from the environment variable NAME.
ENV_VALUE = re.compile(r"(?P<text>.*?)env:(?P<name>[A-Za-z_][A-Za-z0-9_]*)")


def make_agent(**settings: Any) -> CodeAgent:
    """The agent the options describe; options it refuses, or a sandbox that cannot start (no engine,
    no key), are for the user to fix, not faults of codeward's."""
    from codeward import CodeAgent

    try:
        return CodeAgent(**settings)
    except (ValueError, ExecutorError) as error:
        raise UsageError(
            f"the agent could not be set up with the {settings.get('executor')!r} sandbox: {error}"
        ) from error


def read_handed_files(options: list[str]) -> list[tuple[str, bytes]]:
    """What `--file PATH[=NAME]` hands the sandbox: (NAME, bytes) each, NAME the file's own name unless
    given; read before any sandbox starts, so a wrong path is a usage error with nothing started."""
    from codeward.executors.files import DEFAULT_CALL_BYTES

    handed = []
    for option in options:
        path, _, name = option.partition("=")
        try:
            info = os.stat(path)
        except OSError as error:
            raise UsageError(f"--file {option!r}: {path!r} cannot be read ({error.strerror})") from None
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(
                f"--file {option!r}: {path!r} is not a regular file; give a file (for a folder, --mount it)"
            )
        if info.st_size > DEFAULT_CALL_BYTES:
            raise UsageError(
                f"--file {option!r}: {path!r} is {info.st_size:,} bytes, past the {DEFAULT_CALL_BYTES:,} bytes a "
                "file may move into a sandbox; --mount a folder that holds it (docker), or use the Python API"
            )
        with open(path, "rb") as handle:
            handed.append((name or os.path.basename(path), handle.read(DEFAULT_CALL_BYTES + 1)))
    return handed


def hand_files(agent: CodeAgent, handed: list[tuple[str, bytes]]) -> None:
    """Write the `--file` files into the sandbox's working folder, where the code's open() finds them."""
    from codeward.executors.files import FilesError

    for name, data in handed:
        try:
            agent.executor.files.write(name, data)
        except (FilesError, ValueError) as error:
            raise UsageError(f"--file: {name!r} could not be written into the sandbox: {error}") from None


def read_variables(options: list[str]) -> dict[str, Any]:
    """The values `--var NAME=@FILE` names, each read from its file as its suffix says."""
    from codeward.value_files import load_value_file, parse_var_option

    parsed = [parse_var_option(option) for option in options]
    return {name: load_value_file(path) for name, path in parsed}


def check_variable_names(options: list[str], tools: list[Any]) -> None:
    """Refuse a `--var NAME=@FILE` whose NAME is a tool's: in the sandbox the variable would hide the tool."""
    names = {getattr(tool, "name", None) for tool in tools}
    for option in options:
        name = option.partition("=")[0]
        if name in names:
            raise UsageError(
                f"--var {option!r}: {name!r} is also the name of a tool the agent is given, and the variable "
                f"would hide it; give the variable another name, such as --var {name}_data={option.partition('=')[2]}"
            )


def mcp_tools(commands: list[str], servers: contextlib.ExitStack, env_names: list[str]) -> list[Any]:
    """The tools of each `--mcp` server, started here (on the host) and stopped when `servers` closes;
    a server started as a command gets the `--mcp-env` variables, and of the host's environment only those."""
    if env_names and not commands:
        raise UsageError("--mcp-env passes variables to --mcp servers: name a server with --mcp")
    if not commands:
        return []
    from codeward.mcp import MCPToolError, MCPTools
    from codeward.mcp.tools import served_over_http  # after the line above, which names the extra if missing

    env = _mcp_env(env_names)
    tools: list[Any] = []
    for command in commands:
        try:
            tools += servers.enter_context(MCPTools(command, env=None if served_over_http(command) else env))
        except (MCPToolError, ValueError) as error:
            raise UsageError(f"--mcp {command!r}: {error}") from error
    return tools


def _mcp_env(names: list[str]) -> dict[str, str]:
    """The host's variables `--mcp-env` names, each of which must be set."""
    missing = [name for name in names if name not in os.environ]
    if missing:
        raise UsageError(
            f"--mcp-env {', '.join(missing)}: not set in this environment; set it before running, or drop the option"
        )
    values = {name: os.environ[name] for name in names}
    mark_secret(*values.values())  # what a server is given is never written out
    return values


def executor_name(name: str) -> str:
    """`--executor`'s value, checked as it is parsed, so that a typo stops before anything is shown or started."""
    import difflib

    from codeward.executors.base import available_executors

    known = available_executors()
    if name in known:
        return name
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise argparse.ArgumentTypeError(f"unknown executor {name!r}; {hint}choose one of {', '.join(known)}")


def add_executor_option(parser: argparse.ArgumentParser, help_text: str, default: str | None = "local") -> None:
    """`--executor`, its choices named in the help and checked when parsed."""
    from codeward.executors.base import available_executors

    choices = ", ".join(available_executors())
    parser.add_argument(
        "--executor", default=default, metavar="NAME", type=executor_name, help=f"{help_text}; one of {choices}"
    )


def add_model_options(parser: argparse.ArgumentParser, executor_help: str) -> None:
    """`--model`, `--executor` and `--tools`, as `run` and `batch` take them; `executor_help` says what the default is for."""
    parser.add_argument(
        "--model",
        metavar="ID",
        help="a litellm model id, replay:RUN.json or script:RESPONSES.yaml (default: $CODEWARD_MODEL)",
    )
    add_executor_option(parser, executor_help)
    parser.add_argument(
        "--tools",
        action="append",
        default=[],
        metavar="SPEC",
        help="tools to give the agent: module:attr, module, or file.py[:attr] (repeatable)",
    )


def add_import_option(parser: argparse.ArgumentParser) -> None:
    """`--import`, as `run` and `mcp serve` take it: the sandbox's imports are the command line's to widen."""
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="a module the code may import, beyond the defaults (repeatable; pkg.* for a package)",
    )


def add_mcp_env(parser: argparse.ArgumentParser) -> None:
    """`--mcp-env`, as `run` and `replay` take it: a server started as a command sees no other host variable."""
    parser.add_argument(
        "--mcp-env",
        action="append",
        default=[],
        metavar="NAME",
        help="a variable of this environment to pass to the --mcp servers started as commands, which get "
        "no other (repeatable)",
    )


def add_egress_options(parser: argparse.ArgumentParser, whose: str = "the sandbox") -> None:
    """`--egress` and `--egress-header`, as `run`, `batch` and `mcp serve` take them."""
    parser.add_argument(
        "--egress",
        action="append",
        metavar="HOST",
        help=f"a host {whose} may reach through a proxy of its own on this machine (docker): pypi.org, "
        "*.example.com, host:port, 10.0.0.0/8 (repeatable); without it the sandbox reaches nothing",
    )
    parser.add_argument(
        "--egress-header",
        action="append",
        default=[],
        metavar="HOST:NAME=VALUE",
        help="a header the proxy adds to requests to a listed HOST (or HOST:PORT), such as "
        "'api.example.com:Authorization=Bearer env:API_KEY': a value ending in env:VAR takes that part "
        "from this environment's VAR, so the key stays out of your shell history; the sandbox never sees "
        "it (repeatable)",
    )


def egress_headers(options: list[str]) -> dict[str, dict[str, str]]:
    """The `--egress-header HOST:NAME=VALUE` options as the headers to add per host, values read from the environment."""
    headers: dict[str, dict[str, str]] = {}
    for option in options:
        target, equals, value = option.partition("=")
        host, colon, name = target.rpartition(":")
        if not equals or not colon or not host.strip() or not name.strip():
            raise UsageError(
                f"--egress-header {option!r}: write HOST:NAME=VALUE, such as "
                "'api.example.com:Authorization=Bearer env:API_KEY'"
            )
        headers.setdefault(host.strip(), {})[name.strip()] = _header_value(option, value)
    return headers


def _header_value(option: str, value: str) -> str:
    """The value as given, or, ending in ``env:NAME``, with that part read from the environment (a secret)."""
    match = ENV_VALUE.fullmatch(value)
    if match is None:
        mark_secret(value)
        return value
    name = match.group("name")
    if name not in os.environ:
        raise UsageError(f"--egress-header {option!r}: {name} is not set in this environment; set it before running")
    secret = os.environ[name]
    mark_secret(secret)
    return match.group("text") + secret


def egress_executors() -> set[str]:
    """The executors that take an egress list: docker, and any other whose class accepts `egress`."""
    from codeward.executors.base import available_executors, executor_class

    names = {"docker"}
    for name in set(available_executors()) - names:
        with contextlib.suppress(ImportError, ValueError):
            if "egress" in inspect.signature(executor_class(name)).parameters:
                names.add(name)
    return names


def egress_settings(executor: str, egress: list[str] | None, header_options: list[str]) -> dict[str, Any]:
    """The executor settings `--egress` and `--egress-header` ask for, checked now; {} when neither is given."""
    if egress is None:
        if header_options:
            raise UsageError("--egress-header adds headers to requests to listed hosts: name them with --egress HOST")
        return {}
    if executor not in egress_executors():
        raise UsageError(
            f"--egress gives a docker sandbox a way out, through a proxy of its own; the {executor!r} sandbox "
            "has no such proxy: use --executor docker"
        )
    from codeward.egress.policy import parse_policy

    headers = egress_headers(header_options)
    try:
        parse_policy(egress, headers)
    except ValueError as error:
        raise UsageError(f"--egress/--egress-header: {error}") from error
    if executor == "docker":
        from codeward.egress.proxy import EgressUnavailable, mitmdump_path

        try:
            mitmdump_path()
        except EgressUnavailable as error:
            raise UsageError(str(error)) from error
    return {"egress": list(egress), **({"egress_headers": headers} if headers else {})}


def add_mount_option(parser: argparse.ArgumentParser, whose: str = "the sandbox") -> None:
    """`--mount`, as `run`, `batch` and `mcp serve` take it: host paths are the command line's to show."""
    parser.add_argument(
        "--mount",
        dest="mounts",
        action="append",
        default=[],
        metavar="TARGET=SOURCE[:rw]",
        help=f"show a host folder or file to {whose} at TARGET (docker), read-only unless :rw is added, "
        "such as /data=./data or /out=./out:rw (repeatable)",
    )


def mount_settings(executor: str, options: list[str]) -> dict[str, Any]:
    """The executor settings `--mount` asks for, checked now (before any sandbox starts); {} when none is given."""
    if not options:
        return {}
    if executor != "docker":
        raise UsageError(
            f"--mount shows host paths to a docker sandbox; the {executor!r} sandbox takes no mounts: "
            "use --executor docker"
        )
    from codeward.executors.docker.hardening import sandbox_ids
    from codeward.executors.docker.mounts import checked_mounts, parse_mount_option, plain_mounts

    mounts: dict[str, Any] = {}
    try:
        for option in options:
            target, mount = parse_mount_option(option)
            if target in mounts:
                raise ValueError(f"--mount {option!r}: {target} is mounted twice")
            mounts[target] = mount
        checked = checked_mounts(mounts, sandbox_ids())
    except ValueError as error:
        raise UsageError(f"--mount: {error}") from error
    return {"mounts": plain_mounts(checked)}
