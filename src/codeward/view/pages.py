"""The viewer's pages: Jinja2 templates shipped with codeward, rendered with every value escaped.

Every text on a page came from a model, a sandbox or a file a user was handed, so three walls
stand between it and the browser. Jinja2 escapes every value (autoescape), after control and
format characters are written out (`visible`: no bidi override reorders what is read, no lone
surrogate fails the file's encoding). And the page's Content-Security-Policy lets only its own
style and script run, by a nonce drawn for each page, and images only from ``data:`` URIs:
markup that slipped through anyway could neither run nor fetch anything.
"""

from __future__ import annotations

import functools
import secrets
import webbrowser
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from codeward.handed_files import write_fresh
from codeward.terminal_text import visible
from codeward.usage import UsageError
from codeward.view import batches as batch_views
from codeward.view import runs as run_views
from codeward.view.batches import BatchView, read_batch
from codeward.view.charts import PARTS, duration_chart, time_segments
from codeward.view.runs import RunView, read_run

__all__ = ["SHOWN_CHARACTERS", "SHOWN_LINES", "open_view", "render_batch", "render_run", "write_view"]

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


def _code(code: str) -> Markup:
    """Python highlighted by Pygments, which escapes every token it writes."""
    return Markup(highlight(visible(code), PythonLexer(), HtmlFormatter(nowrap=True)))


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
        "most_page_steps": batch_views.MOST_PAGE_STEPS,
    }


def _render(template: str, **context: Any) -> str:
    """The page, with a nonce of its own that lets its style and script, and nothing else, run."""
    nonce = secrets.token_urlsafe(18)
    page = _environment().get_template(template)
    return page.render(nonce=nonce, code_styles=_code_styles(), **_budgets(), **context)


def render_run(run: RunView | str | Path) -> str:
    """A saved run's page: the task, each step, the final answer."""
    view = run if isinstance(run, RunView) else read_run(run)
    return _render("run.html", run=view)


def render_batch(batch: BatchView | str | Path) -> str:
    """A batch folder's page: the jobs' table with filters, the charts, and each job's run."""
    view = batch if isinstance(batch, BatchView) else read_batch(batch)
    return _render(
        "batch.html",
        batch=view,
        durations=duration_chart(view.jobs),
        segments=time_segments(view.time_totals),
        parts=PARTS,
    )


def write_view(path: str | Path, out: str | Path | None = None, *, batch: bool = False) -> Path:
    """Write the page of a saved run (or, with `batch`, of a batch folder) and return where.

    By default a run's page goes beside it (``RUN.html``) and a batch's into its folder (``index.html``).
    """
    path = Path(path)
    if batch and not path.is_dir():
        raise UsageError(f"--runs {path}: not a folder; expected the folder a codeward batch --runs DIR wrote")
    if not batch and path.is_dir():
        raise UsageError(f"{path} is a folder: for a batch's folder use codeward view --runs {path}")
    page = render_batch(path) if batch else render_run(path)
    target = Path(out) if out is not None else (path / "index.html" if batch else path.with_suffix(".html"))
    try:
        write_fresh(target, page.encode("utf-8"))  # a page shows a run's output: its owner's only, never via a link
    except OSError as error:
        raise UsageError(f"cannot write the page to {target}: {error.strerror}; pick another place with -o") from None
    return target


def open_view(page: Path) -> bool:
    """Open a written page in the user's browser; False where no browser could be started."""
    return webbrowser.open(page.resolve().as_uri())
