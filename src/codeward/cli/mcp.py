"""`codeward mcp serve`: codeward as an MCP server, each client session in a sandbox of its own."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from codeward.cli.options import add_import_option
from codeward.usage import UsageError

__all__ = ["add_parser"]


def _mcp_serve(args: argparse.Namespace, console: Console) -> int:
    from codeward.executors.base import executor_class, import_with_extra
    from codeward.platform.tool_specs import load_tool_specs

    server = import_with_extra("codeward.mcp.server", needed_by="codeward mcp serve", extra="mcp")
    try:
        executor_class(args.executor)  # a wrong name or a missing extra is told now, not at the first call
    except ValueError as error:
        raise UsageError(str(error)) from error
    if args.idle_timeout <= 0:
        raise UsageError(f"--idle-timeout must be a positive number of seconds, got {args.idle_timeout}")
    options = server.ServeOptions(args.executor, load_tool_specs(args.tools), args.imports, args.idle_timeout)
    if args.http is None:
        server.serve_stdio(options)
    else:
        server.serve_http(options, args.host, args.http)
    return 0


def add_parser(commands: Any) -> None:
    mcp = commands.add_parser("mcp", help="codeward as an MCP server")
    actions = mcp.add_subparsers(dest="action", metavar="ACTION", required=True)
    serve = actions.add_parser(
        "serve",
        help="offer run_python and reset to MCP clients, each session in a sandbox of its own",
        description="Serves MCP on stdin and stdout, or over streamable HTTP with --http. Each client "
        "session gets its own sandbox, started on its first run_python and closed when the session ends.",
    )
    serve.add_argument("--executor", default="local", metavar="NAME", help="the sandbox (default: local)")
    serve.add_argument(
        "--tools",
        action="append",
        default=[],
        metavar="SPEC",
        help="tools the code can call: module:attr, module, or file.py[:attr] (repeatable)",
    )
    add_import_option(serve)
    serve.add_argument(
        "--http", type=int, metavar="PORT", help="serve streamable HTTP at /mcp on PORT (0: a free one, printed)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="the address --http listens on (default: 127.0.0.1)")
    serve.add_argument(
        "--idle-timeout",
        type=float,
        default=1800.0,
        metavar="SECONDS",
        help="close a session's sandbox after this long without a call (default 1800)",
    )
    serve.set_defaults(handler=_mcp_serve, console_to_stderr=True)
