"""The `codeward` command.

Each subcommand is a module of this package with an ``add_parser`` function that declares its
arguments and a handler; the work itself lives in the modules the handlers import (lazily, so
that ``codeward batch`` does not pay for litellm, nor ``codeward demo`` for docker). How a
handler's failure is printed, and the exit code it becomes, is `codeward.cli.output`'s.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from codeward import __version__
from codeward.cli import batch, demo, doctor, egress, mcp, replay, run, sandboxes, view
from codeward.cli.output import console_for, exit_code

__all__ = ["main"]

#: The subcommands, in the order the help lists them.
_SUBCOMMANDS = (demo, run, batch, replay, view, doctor, sandboxes, mcp, egress)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="codeward", description="Agents that act by writing Python, in a sandbox.")
    parser.add_argument("--version", action="version", version=f"codeward {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for subcommand in _SUBCOMMANDS:
        subcommand.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    console = console_for(args)

    def command() -> int:
        _instrument_if_asked()
        return int(args.handler(args, console))

    return exit_code(command, console)


def _instrument_if_asked() -> None:
    """``CODEWARD_OTEL=1`` sends traces where the ``OTEL_EXPORTER_OTLP_*`` variables say (batch workers inherit it)."""
    if os.environ.get("CODEWARD_OTEL") == "1":
        from codeward.telemetry import instrument

        instrument()
