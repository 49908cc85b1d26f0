"""The viewer's pages: Jinja2 templates shipped with codeward, rendered with every value escaped.

Every text on a page came from a model, a sandbox or a file a user was handed, so three walls
stand between it and the browser. Jinja2 escapes every value (autoescape), after control and
format characters are written out (`visible`: no bidi override reorders what is read, no lone
surrogate fails the file's encoding). And the page's Content-Security-Policy lets only its own
style and script run, by a nonce drawn for each page, and images only from ``data:`` URIs:
markup that slipped through anyway could neither run nor fetch anything.

A batch is written as pages: an index of its jobs (`render_batch`: a row each, the charts, the
filters) and a page per job with its run (`render_job`), in a folder beside the index named after it
(``index_files/`` for ``index.html``, as a browser saves a page). The index is rendered a piece at a
time straight to its file and each job's page is written as its run is read, so thousands of jobs
hold one run and the index's rows at once. A job's page is named from its id made safe
(`codeward.view.batches`), inside that folder, which is opened without following a link
(`codeward.handed_files.open_folder`): no id leads out of it or takes the index's name.
"""

from __future__ import annotations

import functools
import os
import secrets
import webbrowser
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from codeward.handed_files import open_folder, write_fresh
from codeward.terminal_text import visible
from codeward.usage import UsageError
from codeward.view import batches as batch_views
from codeward.view import runs as run_views
from codeward.view.batches import BatchView, JobPage, read_batch, read_jobs
from codeward.view.charts import PARTS, duration_chart, time_segments
from codeward.view.runs import RunView, read_run

__all__ = [
    "SHOWN_CHARACTERS",
    "SHOWN_LINES",
    "jobs_folder",
    "open_view",
    "render_batch",
    "render_job",
    "render_run",
    "write_view",
]

#: A long text shows its first `SHOWN_CHARACTERS` characters or `SHOWN_LINES` lines, whichever
#: ends first; the rest is one click away, in a collapsed ``<details>``.
SHOWN_CHARACTERS = 2000
SHOWN_LINES = 20


def cut(text: str) -> tuple[str, str]:
    """The part of a text shown at once (its first lines or characters, whichever ends first), and the rest."""
    end = min(len(text), SHOWN_CHARACTERS)
    newline = -1
    for _ in range(SHOWN_LINES):
        newline = text.find("\n", newline + 1, end)
        if newline == -1:
            break
    else:
        end = newline + 1
    return text[:end], text[end:]


@functools.cache
def _highlighters() -> tuple[PythonLexer, HtmlFormatter[str]]:
    """Pygments' lexer and formatter, made once: a batch's pages highlight thousands of blocks."""
    return PythonLexer(), HtmlFormatter(nowrap=True)


def _code(code: str) -> Markup:
    """Python highlighted by Pygments, which escapes every token it writes."""
    return Markup(highlight(visible(code), *_highlighters()))


def _visible(value: Any) -> Any:
    """Jinja's last word on every value: text written out visibly; our own markup (highlighted code) kept."""
    return visible(value) if isinstance(value, str) and not isinstance(value, Markup) else value


def _seconds(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


@functools.cache
def _environment() -> Environment:
    environment = Environment(
        loader=PackageLoader("codeward.view", "templates"),
        autoescape=True,
        finalize=_visible,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["code"] = _code
    environment.filters["seconds"] = _seconds
    environment.globals["cut"] = cut
    return environment


@functools.cache
def _code_styles() -> Markup:
    """Pygments' CSS for highlighted code: our own text, so it is not escaped."""
    return Markup(HtmlFormatter(style="default").get_style_defs(".code"))  # type: ignore[no-untyped-call]


def _budgets() -> dict[str, int]:
    """What a page shows at most, for its notes of what was left off."""
    return {
        "most_steps": run_views.MOST_STEPS,
        "most_displays": run_views.MOST_DISPLAYS,
        "most_artifacts": run_views.MOST_ARTIFACTS,
        "most_jobs": batch_views.MOST_JOBS,
    }


def _stream(template: str, **context: Any) -> Iterator[str]:
    """The page a piece at a time, with a nonce of its own that lets its style and script, and nothing else, run."""
    nonce = secrets.token_urlsafe(18)
    page = _environment().get_template(template)
    return page.generate(nonce=nonce, code_styles=_code_styles(), **_budgets(), **context)


def _render(template: str, **context: Any) -> str:
    return "".join(_stream(template, **context))


def render_run(run: RunView | str | Path) -> str:
    """A saved run's page: the task, each step, the final answer."""
    view = run if isinstance(run, RunView) else read_run(run)
    return _render("run.html", run=view)


def jobs_folder(index: Path) -> Path:
    """Where a batch's job pages go: a folder beside its index, named after it (``index_files``)."""
    return index.with_name(f"{index.stem}_files")


def _index(view: BatchView, index: Path) -> Iterator[str]:
    return _stream(
        "batch.html",
        batch=view,
        durations=duration_chart(view.jobs),
        segments=time_segments(view.time_totals),
        parts=PARTS,
        pages=quote(jobs_folder(index).name),
    )


def render_batch(batch: BatchView | str | Path, index: str = "index.html") -> str:
    """A batch folder's index, as the file `index` (its name sets where it links each job's page): the
    jobs' table with filters, and the charts."""
    view = batch if isinstance(batch, BatchView) else read_batch(batch)
    return "".join(_index(view, Path(index)))


def render_job(job: JobPage, index: str = "index.html") -> str:
    """A batch job's page, in the folder beside the index `index`: its state, error and run."""
    return _render("job.html", job=job.row, page=job, index=quote(Path(index).name))


def _write_batch(folder: Path, target: Path) -> None:
    """The job pages, each written as its run is read, then the index a piece at a time: never the whole in memory."""
    view = read_batch(folder)
    pages = open_folder(jobs_folder(target))
    try:
        for job in read_jobs(folder, view):
            write_fresh(job.row.page, render_job(job, target.name).encode("utf-8"), folder=pages)
    finally:
        os.close(pages)
    write_fresh(target, (piece.encode("utf-8") for piece in _index(view, target)))


def write_view(path: str | Path, out: str | Path | None = None, *, batch: bool = False) -> Path:
    """Write the page of a saved run (or, with `batch`, of a batch folder) and return where.

    By default a run's page goes beside it (``RUN.html``) and a batch's index into its folder (``index.html``),
    its job pages into the folder `jobs_folder` names.
    """
    path = Path(path)
    if batch and not path.is_dir():
        raise UsageError(f"--runs {path}: not a folder; expected the folder a codeward batch --runs DIR wrote")
    if not batch and path.is_dir():
        raise UsageError(f"{path} is a folder: for a batch's folder use codeward view --runs {path}")
    target = Path(out) if out is not None else (path / "index.html" if batch else path.with_suffix(".html"))
    try:  # a page shows a run's output: its owner's only, never via a link
        if batch:
            _write_batch(path, target)
        else:
            write_fresh(target, render_run(path).encode("utf-8"))
    except OSError as error:
        raise UsageError(f"cannot write the page to {target}: {error.strerror}; pick another place with -o") from None
    return target


def open_view(page: Path) -> bool:
    """Open a written page in the user's browser; False where no browser could be started."""
    return webbrowser.open(page.resolve().as_uri())
