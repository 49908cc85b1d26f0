"""The run viewer: ``codeward view`` writes a saved run as one HTML file, and a batch folder as an index
of its jobs with a page per job in a folder beside it.

A page needs no network to open: its styles, script and images are inside it. Every text
in it is escaped, since what a model wrote and a sandbox printed is hostile input, and the
page's Content-Security-Policy runs no script but its own.
"""

from __future__ import annotations

from codeward.view.batches import BatchView, JobPage, read_batch, read_jobs
from codeward.view.pages import (
    SHOWN_CHARACTERS,
    SHOWN_LINES,
    jobs_folder,
    open_view,
    render_batch,
    render_job,
    render_run,
    write_view,
)
from codeward.view.runs import RunView, read_run

__all__ = [
    "SHOWN_CHARACTERS",
    "SHOWN_LINES",
    "BatchView",
    "JobPage",
    "RunView",
    "jobs_folder",
    "open_view",
    "read_batch",
    "read_jobs",
    "read_run",
    "render_batch",
    "render_job",
    "render_run",
    "write_view",
]
