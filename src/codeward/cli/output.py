"""How every subcommand speaks and ends: its consoles, and what each kind of failure prints and exits with.

One rule for every subcommand: what the command was asked for (a run's steps and answer, or its
`--json` object; a batch's summary; a replay's verdict; a page's path; a table) goes to stdout;
everything else (errors, warnings, notes, progress bars) goes to stderr, so a pipe or a file
gets the results alone. An error is one line however narrow the terminal, so `2>&1 | grep` finds
it whole; tables take the terminal's width, and their own width on a pipe, never cut at 80 columns.

Bad input, or a setup step the user must take, is one line and exit 2; an interrupt is exit 130;
anything else is a fault of codeward's own (or of a sandbox mid-run), exit 1, with its traceback
kept in a file, never passed off as bad input. Under `--json` a failure is also one JSON object
on stdout, with its `error`. Text from elsewhere (a sandbox, a model, a run file) is printed
through `literal`, so the terminal obeys none of its control characters, rich reads none of it as
markup, and no known secret is shown.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement

from codeward.redaction import redacted
from codeward.terminal_text import visible
from codeward.usage import UsageError

__all__ = ["console_for", "exit_code", "literal", "notes_console", "print_json", "print_table"]


def literal(text: str, *, one_line: bool = False) -> str:
    """Text from elsewhere as rich markup that prints it as it is, its control characters named, its
    secrets hidden; with `one_line`, its lines joined into one (a list after a colon reads on, others
    are parted by semicolons) and any other line break written out."""
    if one_line:
        text = _joined(text)
    return escape(visible(redacted(text), keep_lines=not one_line))


def _joined(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    joined = lines[0] if lines else ""
    for line in lines[1:]:
        joined += (" " if joined.endswith(":") else "; ") + line
    return joined


def console_for(args: argparse.Namespace) -> Console:
    """The console for results: stdout, or stderr where stdout is for data (--json's object, or the MCP protocol)."""
    return Console(stderr=bool(getattr(args, "json", False) or getattr(args, "console_to_stderr", False)))


def notes_console() -> Console:
    """The console for errors, warnings, notes and progress: stderr, whose lines never wrap (a line is
    one line whatever the terminal's width) and whose text rich does not colour by guesswork."""
    return Console(stderr=True, soft_wrap=True, highlight=False)


def print_table(console: Console, renderable: Any) -> None:
    """A table at the terminal's width, or on a pipe at its own width: never cut at 80 columns."""
    if console.is_terminal:
        console.print(renderable)
        return
    shown = console.width
    console.width = max(Measurement.get(console, console.options.update_width(10_000), renderable).maximum, 1)
    try:
        console.print(renderable)
    finally:
        console.width = shown


def print_json(payload: dict[str, Any]) -> None:
    """The one JSON object a `--json` command prints on stdout."""
    sys.stdout.write(json.dumps(payload, default=str) + "\n")
    sys.stdout.flush()


def exit_code(command: Callable[[], int], args: argparse.Namespace | None = None) -> int:
    """Run the command; a failure is printed on stderr as its kind says (and under --json, as a JSON
    object on stdout too), and becomes the exit code that kind has. A command prints its JSON object
    as its last act, so one that raises has printed none."""
    errors = notes_console()
    as_json = bool(getattr(args, "json", False))
    try:
        return int(command())
    except (UsageError, ImportError, FileNotFoundError) as error:  # the input, or a setup step the user must take
        message = str(error)
        errors.print(f"[bold red]error:[/bold red] {literal(message, one_line=True)}")
        code = 2
    except KeyboardInterrupt:  # the sandbox was closed on the way out (agents are context managers)
        errors.print("[yellow]interrupted[/yellow]")
        message, code = "interrupted", 130
    except Exception as error:  # a fault of codeward's own, or of a sandbox mid-run: never passed off as bad input
        log = _keep_traceback()
        message = f"{type(error).__name__}: {error}"
        errors.print(
            f"[bold red]codeward failed:[/bold red] {literal(message, one_line=True)}; the traceback is in "
            f"{escape(str(log))}; if this looks like a bug, please report it with that file"
        )
        code = 1
    if as_json:
        print_json({"output": None, "state": "error", "error": redacted(message), "exit_code": code})
    return code


def _keep_traceback() -> Path:
    """Write the exception being handled to a file of its own, and return the file's path."""
    import tempfile
    import traceback

    handle, name = tempfile.mkstemp(prefix="codeward-failure-", suffix=".log")
    with open(handle, "w", encoding="utf-8") as log:
        log.write(redacted(traceback.format_exc()))
    return Path(name)
