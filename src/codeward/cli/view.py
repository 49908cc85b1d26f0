"""`codeward view`: a saved run written as an HTML page, or a batch's folder as an index and a page per job."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from codeward.cli.output import notes_console
from codeward.terminal_text import visible_text
from codeward.usage import UsageError

__all__ = ["add_parser"]


def _view(args: argparse.Namespace, console: Console) -> int:
    from codeward.view import jobs_folder, open_view, write_view

    if (args.run is None) == (args.runs is None):
        raise UsageError(
            "codeward view takes a saved run (codeward view RUN.json) or a batch's folder "
            "(codeward view --runs DIR), one of the two"
        )
    page = write_view(args.run or args.runs, args.out, batch=args.runs is not None)
    pages = f" and a page per job in {jobs_folder(page)}" if args.runs is not None else ""
    console.print(visible_text(f"wrote {page}{pages}"), highlight=False, soft_wrap=True)
    if args.open and not open_view(page):
        notes_console().print(
            visible_text(f"no browser could be started here; open {page.resolve().as_uri()} yourself")
        )
    return 0


def add_parser(commands: Any) -> None:
    view = commands.add_parser("view", help="write a saved run, or a batch's folder, as HTML pages")
    view.add_argument("run", nargs="?", metavar="RUN.json", help="a run saved with codeward run --save")
    view.add_argument("--runs", metavar="DIR", help="a batch's folder (codeward batch --runs DIR) instead of a run")
    view.add_argument(
        "-o",
        "--out",
        metavar="FILE.html",
        help="where to write the page (default: RUN.html, or DIR/index.html with a page per job in DIR/index_files/)",
    )
    view.add_argument("--open", action="store_true", help="open the page in the web browser once written")
    view.set_defaults(handler=_view)
