"""How every subcommand speaks and ends: its console, and what each kind of failure prints and exits with.

Bad input, or a setup step the user must take, is one line and exit 2; an interrupt is exit 130;
anything else is a fault of codeward's own (or of a sandbox mid-run), exit 1, with its traceback
kept in a file, never passed off as bad input. Text from elsewhere (a sandbox, a model, a run
file) is printed through `literal`, so the terminal obeys none of its control characters, rich
reads none of it as markup, and no known secret is shown.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from codeward.redaction import redacted
from codeward.terminal_text import visible
from codeward.usage import UsageError

__all__ = ["console_for", "exit_code", "literal"]


def literal(text: str) -> str:
    """Text from elsewhere as rich markup that prints it as it is, its control characters named, its secrets hidden."""
    return escape(visible(redacted(text)))


def console_for(args: argparse.Namespace) -> Console:
    """The console on stdout, or on stderr where stdout is for data: --json's result, or the MCP protocol itself."""
    return Console(stderr=bool(getattr(args, "json", False) or getattr(args, "console_to_stderr", False)))


def exit_code(command: Callable[[], int], console: Console) -> int:
    """Run the command; a failure is printed as its kind says, and becomes the exit code that kind has."""
    try:
        return int(command())
    except (UsageError, ImportError, FileNotFoundError) as error:  # the input, or a setup step the user must take
        console.print(f"[bold red]error:[/bold red] {literal(str(error))}", highlight=False)
        return 2
    except KeyboardInterrupt:  # the sandbox was closed on the way out (agents are context managers)
        console.print("[yellow]interrupted[/yellow]")
        return 130
    except Exception as error:  # a fault of codeward's own, or of a sandbox mid-run: never passed off as bad input
        log = _keep_traceback()
        console.print(
            f"[bold red]codeward failed:[/bold red] {literal(f'{type(error).__name__}: {error}')}\n"
            f"the traceback is in {escape(str(log))}; if this looks like a bug, please report it with that file",
            highlight=False,
        )
        return 1


def _keep_traceback() -> Path:
    """Write the exception being handled to a file of its own, and return the file's path."""
    import tempfile
    import traceback

    handle, name = tempfile.mkstemp(prefix="codeward-failure-", suffix=".log")
    with open(handle, "w", encoding="utf-8") as log:
        log.write(redacted(traceback.format_exc()))
    return Path(name)
