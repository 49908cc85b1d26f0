"""`codeward replay`: a saved run's code run again in a fresh sandbox, and compared with the recording."""

from __future__ import annotations

import argparse
import contextlib
from typing import Any

from rich.console import Console

from codeward.cli.options import (
    add_egress_options,
    add_executor_option,
    add_mcp_env,
    check_variable_names,
    egress_settings,
    mcp_tools,
    read_variables,
)
from codeward.cli.output import literal

__all__ = ["add_parser"]


def _replay(args: argparse.Namespace, console: Console) -> int:
    from codeward.platform.replay import replay_run
    from codeward.platform.tool_specs import load_tool_specs

    egress = egress_settings(args.executor or "local", args.egress, args.egress_header)
    with contextlib.ExitStack() as servers:
        tools = load_tool_specs(args.tools) + mcp_tools(args.mcp, servers, args.mcp_env)
        check_variable_names(args.var, tools)
        report = replay_run(
            args.run,
            executor=args.executor,
            executor_kwargs=egress or None,
            tools=tools,
            variables=read_variables(args.var),
            authorized_imports=args.imports,
            as_recorded=args.as_recorded,
        )
    shown = literal(report.render())  # the recording's text, from a file that may be a stranger's
    if report.ok:
        console.print(f"[green]replay passed:[/green] {shown}", highlight=False)
        return 0
    console.print(f"[red]replay failed:[/red] {shown}", highlight=False)
    return 1


def add_parser(commands: Any) -> None:
    replay = commands.add_parser(
        "replay",
        help="re-run a saved run's code in a fresh sandbox and compare",
        description="The run file's record of its executor, tools, variables and imports is a hint: "
        "the replay uses only what these flags give, and names the flags a run needs before running it.",
    )
    replay.add_argument("run", metavar="RUN.json", help="a run saved with codeward run --save or agent.memory.save")
    add_executor_option(replay, "the sandbox (default: local)", default=None)
    replay.add_argument(
        "--tools",
        action="append",
        default=[],
        metavar="SPEC",
        help="the tools: module:attr, module, file.py[:attr] (repeatable; never read from the run file)",
    )
    replay.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="COMMAND",
        help="an MCP server to start on the host, as a shell line or an http(s) URL; its tools join --tools "
        "(repeatable; never started from the run file, even with --as-recorded)",
    )
    add_mcp_env(replay)
    replay.add_argument(
        "--var",
        action="append",
        default=[],
        metavar="NAME=@FILE",
        help="a variable to add to (or replace in) the values the run saved",
    )
    replay.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="a module the code may import on the local sandbox, beyond the defaults (repeatable)",
    )
    add_egress_options(replay, "the replay's sandbox (--executor docker)")
    replay.add_argument(
        "--as-recorded",
        action="store_true",
        help="also take what the run file records: its tool and variable files inside its folder (tools are "
        "imported: trust the folder first), and its executor unless that runs code unconfined (jupyter)",
    )
    replay.set_defaults(handler=_replay)
