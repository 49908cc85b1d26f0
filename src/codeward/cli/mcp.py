"""`codeward mcp serve`: codeward as an MCP server, each client session in a sandbox of its own."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from rich.console import Console

from codeward.cli.options import (
    add_egress_options,
    add_executor_option,
    add_import_option,
    add_mount_option,
    egress_settings,
    mount_settings,
)
from codeward.usage import UsageError

if TYPE_CHECKING:
    from codeward.mcp.server import HttpAccess

__all__ = ["add_parser"]

# Each budget flag of `mcp serve`: its least value, its default (ServeOptions's), what it bounds.
_BUDGETS = {
    "max_sessions": (1, 16, "HTTP sessions open at once, in total; one more is refused with an MCP error"),
    "sessions_per_client": (1, 4, "HTTP sessions open at once from one client address"),
    "waiting_calls": (0, 2, "calls a session may have waiting behind the one running; more are refused at once"),
    "threads": (1, 8, "calls running at once, in total"),
    "threads_per_client": (1, 2, "calls running at once from one client address, so no client takes every turn"),
    "steps_kept": (1, 50, "past calls a session's agent remembers; older ones are forgotten"),
}


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
    for flag, (least, _, _) in _BUDGETS.items():
        if getattr(args, flag) < least:
            raise UsageError(f"--{flag.replace('_', '-')} must be at least {least}, got {getattr(args, flag)}")
    options = server.ServeOptions(
        args.executor,
        load_tool_specs(args.tools),
        args.imports,
        args.idle_timeout,
        **{flag: getattr(args, flag) for flag in _BUDGETS},
        executor_kwargs={
            **egress_settings(args.executor, args.egress, args.egress_header),
            **mount_settings(args.executor, args.mounts),
        },
    )
    if args.http is None:
        server.serve_stdio(options)
    else:
        server.serve_http(options, args.host, args.http, _access(args))
    return 0


def _access(args: argparse.Namespace) -> HttpAccess:
    """Who may call the HTTP server: a token unless --no-auth, which only a loopback address may have."""
    from codeward.mcp.guard import TOKEN_VARIABLE, is_loopback, server_token
    from codeward.mcp.server import HttpAccess

    if args.no_auth:
        if not is_loopback(args.host):
            raise UsageError(
                f"--no-auth would let anyone who reaches {args.host} run code with your tools; use it only with a "
                f"loopback --host (127.0.0.1, ::1, localhost), or drop it and give clients the token "
                f"(set {TOKEN_VARIABLE}, or use the one printed at start)"
            )
        return HttpAccess(None, allow_hosts=args.allow_hosts, allow_origins=args.allow_origins)
    token, generated = server_token()
    return HttpAccess(token, generated, args.allow_hosts, args.allow_origins)


def add_parser(commands: Any) -> None:
    mcp = commands.add_parser("mcp", help="codeward as an MCP server")
    actions = mcp.add_subparsers(dest="action", metavar="ACTION", required=True)
    serve = actions.add_parser(
        "serve",
        help="offer run_python and reset to MCP clients, each session in a sandbox of its own",
        description="Serves MCP on stdin and stdout, or over streamable HTTP with --http. Each client "
        "session gets its own sandbox, started on its first run_python and closed when the session ends.",
    )
    add_executor_option(serve, "the sandbox (default: local)")
    serve.add_argument(
        "--tools",
        action="append",
        default=[],
        metavar="SPEC",
        help="tools the code can call: module:attr, module, or file.py[:attr] (repeatable)",
    )
    add_import_option(serve)
    add_egress_options(serve, "each session's sandbox")
    add_mount_option(serve, "each session's sandbox")
    serve.add_argument(
        "--http", type=int, metavar="PORT", help="serve streamable HTTP at /mcp on PORT (0: a free one, printed)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="the address --http listens on (default: 127.0.0.1)")
    serve.add_argument(
        "--no-auth",
        action="store_true",
        help="serve --http without a bearer token (loopback --host only: every local account can then call it); "
        "by default clients send Authorization: Bearer $CODEWARD_MCP_TOKEN, or the token generated and printed at start",
    )
    serve.add_argument(
        "--allow-host",
        dest="allow_hosts",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="a further Host header to accept (repeatable); requests naming any other host than the bound "
        "address are refused, against DNS rebinding",
    )
    serve.add_argument(
        "--allow-origin",
        dest="allow_origins",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a further Origin to accept, as scheme://host:port (repeatable); by default only the server's own",
    )
    serve.add_argument(
        "--idle-timeout",
        type=float,
        default=1800.0,
        metavar="SECONDS",
        help="close a session's sandbox after this long without a call (default 1800)",
    )
    for flag, (_, default, text) in _BUDGETS.items():
        serve.add_argument(
            f"--{flag.replace('_', '-')}", type=int, default=default, metavar="N", help=f"{text} (default {default})"
        )
    serve.set_defaults(handler=_mcp_serve, console_to_stderr=True)
