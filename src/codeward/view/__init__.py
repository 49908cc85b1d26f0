"""The run viewer: ``codeward view`` writes a saved run, or a batch folder, as one HTML file.

The file needs no network to open: its styles, script and images are inside it. Every text
in it is escaped, since what a model wrote and a sandbox printed is hostile input, and the
page's Content-Security-Policy runs no script but its own.
"""

from __future__ import annotations

from codeward.view.batches import BatchView, read_batch
from codeward.view.pages import SHOWN_CHARACTERS, SHOWN_LINES, open_view, render_batch, render_run, write_view
from codeward.view.runs import RunView, read_run

__all__ = [
    "SHOWN_CHARACTERS",
    "SHOWN_LINES",
    "BatchView",
    "RunView",
    "open_view",
    "read_batch",
    "read_run",
    "render_batch",
    "render_run",
    "write_view",
]
