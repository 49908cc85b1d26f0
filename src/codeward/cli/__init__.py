"""The `codeward` command.

Each subcommand is a module of this package with an ``add_parser`` function that declares its
arguments and a handler; the work itself lives in the modules the handlers import (lazily, so
that ``codeward batch`` does not pay for litellm, nor ``codeward demo`` for docker). How a
handler's failure is printed, and the exit code it becomes, is `codeward.cli.output`'s.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from codeward import __version__
from codeward.cli import batch, demo, doctor, egress, mcp, replay, run, sandboxes, view
from codeward.cli.output import console_for, exit_code, literal, notes_console, print_json

__all__ = ["main"]


class _BadCommandLine(Exception):
    """What argparse found wrong with the command line (its usage already shown on stderr)."""


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose complaint reaches `main` (to be said as every usage error is) instead of exiting."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        raise _BadCommandLine(f"{self.prog}: {message}")


#: The subcommands, in the order the help lists them.
_SUBCOMMANDS = (demo, run, batch, replay, view, doctor, sandboxes, mcp, egress)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="codeward", description="Agents that act by writing Python, in a sandbox.")
    parser.add_argument("--version", action="version", version=f"codeward {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for subcommand in _SUBCOMMANDS:
        subcommand.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(words)
    except _BadCommandLine as error:
        notes_console().print(f"[bold red]error:[/bold red] {literal(str(error), one_line=True)}")
        if "--json" in words:
            print_json({"output": None, "state": "error", "error": str(error), "exit_code": 2})
        return 2
    if not getattr(args, "handler", None):
        parser.print_help(sys.stderr)
        return 2
    console = console_for(args)

    def command() -> int:
        _instrument_if_asked()
        return int(args.handler(args, console))

    return exit_code(command, args)


def _instrument_if_asked() -> None:
    """``CODEWARD_OTEL=1`` sends traces where the ``OTEL_EXPORTER_OTLP_*`` variables say (batch workers inherit it)."""
    if os.environ.get("CODEWARD_OTEL") == "1":
        from codeward.telemetry import instrument

        instrument()
