"""The options several subcommands share, and what their values become: an agent, variables, MCP tools.

`run`, `replay`, `batch` and `mcp serve` declare these flags through one function each, so a flag
reads the same wherever it is taken; what a flag names that cannot work is a `UsageError`, the
user's to fix, never a fault of codeward's.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from typing import TYPE_CHECKING, Any

from codeward.executors.base import ExecutorError
from codeward.redaction import mark_secret
from codeward.usage import UsageError

if TYPE_CHECKING:
    from codeward import CodeAgent

__all__ = ["add_import_option", "add_mcp_env", "add_model_options", "make_agent", "mcp_tools", "read_variables"]


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


def read_variables(options: list[str]) -> dict[str, Any]:
    """The values `--var NAME=@FILE` names, each read from its file as its suffix says."""
    from codeward.value_files import load_value_file, parse_var_option

    parsed = [parse_var_option(option) for option in options]
    return {name: load_value_file(path) for name, path in parsed}


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


def add_model_options(parser: argparse.ArgumentParser, executor_help: str) -> None:
    """`--model`, `--executor` and `--tools`, as `run` and `batch` take them; `executor_help` says what the default is for."""
    parser.add_argument(
        "--model",
        metavar="ID",
        help="a litellm model id, replay:RUN.json or script:RESPONSES.yaml (default: $CODEWARD_MODEL)",
    )
    parser.add_argument("--executor", default="local", metavar="NAME", help=executor_help)
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
