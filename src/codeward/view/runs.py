"""A saved run read for its page: the task, each step's texts, code, displays, time and tokens.

The file is one a user was handed (``codeward run --save``, ``agent.memory.save``, a batch's
runs folder): every field is checked (`codeward.view.values`), a step that is not a record shows
as malformed, and a display becomes an image on the page only if its bytes are one of a few
raster formats, checked by their signature. SVG, HTML or anything else a sandbox showed is
shown as text, never as markup.

A page's size has a bound of its own beside the file's: at most `MOST_STEPS` steps and
`MOST_DISPLAYS` displays a step are shown, and a note says how many were left off, so a file of
a million tiny steps costs a page no more than a file of a few.
"""

from __future__ import annotations

import base64
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markupsafe import Markup

from codeward.executors.base import BlockUsage
from codeward.executors.displays import Display
from codeward.platform.artifacts import MOST_FILE_BYTES, Artifact, decoded_size, safe_name
from codeward.platform.memory import saved_block_usage
from codeward.platform.run_files import load_run_file, run_record
from codeward.usage import UsageError
from codeward.view.values import MOST_NAME_CHARACTERS, mapping, number, text, whole
from codeward.wall_events import checked_events
from codeward.wording import a

__all__ = [
    "MAX_ARTIFACT_BYTES",
    "MAX_IMAGE_BYTES",
    "MOST_ARTIFACTS",
    "MOST_ARTIFACT_TEXT",
    "MOST_DISPLAYS",
    "MOST_PAGE_ARTIFACT_BYTES",
    "MOST_STEPS",
    "ArtifactView",
    "Image",
    "RunView",
    "StepView",
    "read_run",
    "run_view",
]

#: The largest image embedded in a page; a larger one is named, not shown.
MAX_IMAGE_BYTES = 8 * 2**20
#: The most steps a run's page shows; the rest are counted.
MOST_STEPS = 500
#: The most displays a step shows; the rest are counted.
MOST_DISPLAYS = 20

#: The most artifacts a step shows; the rest are counted.
MOST_ARTIFACTS = 50
#: The largest artifact decoded for a page (what a run collects at most): a larger blob is named, not decoded.
MAX_ARTIFACT_BYTES = MOST_FILE_BYTES
#: The bytes of all a page's artifacts decoded together; past them, artifacts are named, not decoded.
MOST_PAGE_ARTIFACT_BYTES = 64 * 2**20
#: The largest artifact shown as text (escaped), when it is UTF-8.
MOST_ARTIFACT_TEXT = 64 * 2**10
#: The media types an artifact is shown inline as, when its bytes are that format: raster images only.
_INLINE = ("image/png", "image/jpeg", "image/gif", "image/webp")

_EXPECTED = "a run saved by codeward run --save or agent.memory.save (a JSON object with 'steps')"


@dataclass(frozen=True)
class Image:
    """A displayed image whose bytes were checked to be the raster format its MIME type names."""

    mime: str
    data_uri: str
    size: int


@dataclass(frozen=True)
class ArtifactView:
    """A file the step's code wrote under outputs/: its name, size and media type (guessed from the
    name), an image when its bytes are the raster format the name says, else its text when small."""

    name: str
    size: int
    media_type: str
    image: Image | None = None
    text: str | None = None


@dataclass
class _PageBudget:
    """The artifact bytes a page may still decode."""

    bytes_left: int = field(default_factory=lambda: MOST_PAGE_ARTIFACT_BYTES)


@dataclass
class StepView:
    """One step as the page shows it; `kind` is action, planning or malformed."""

    kind: str
    number: int | None = None
    model_text: str = ""
    code: str = ""
    output: str = ""
    error: str = ""
    images: list[Image] = field(default_factory=list)
    #: Displays shown as text: (MIME type, text); HTML and SVG among them, escaped.
    texts: list[tuple[str, str]] = field(default_factory=list)
    #: Displays left out, with why.
    refused: list[str] = field(default_factory=list)
    #: Displays past `MOST_DISPLAYS`, not looked at.
    displays_left_off: int = 0
    artifacts: list[ArtifactView] = field(default_factory=list)
    #: Artifacts left out, with why; and the notes of what the run left off collecting.
    artifacts_refused: list[str] = field(default_factory=list)
    artifact_notes: list[str] = field(default_factory=list)
    #: Artifacts past `MOST_ARTIFACTS`, not looked at.
    artifacts_left_off: int = 0
    duration: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    final_answer: str | None = None
    #: What the sandbox's walls refused while the block ran: (wall, detail, count), checked and bounded.
    events: list[tuple[str, str, int]] = field(default_factory=list)
    #: What its code block cost in the sandbox, as saved (checked: a malformed record is left out).
    usage: BlockUsage | None = None


@dataclass
class RunView:
    name: str
    task: str = ""
    executor: str = ""
    steps: list[StepView] = field(default_factory=list)
    final_answer: str | None = None
    duration: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    #: Steps past `MOST_STEPS`, not shown.
    steps_left_off: int = 0
    #: What the shown steps' code cost in all.
    usage: BlockUsage | None = None


def _is_format(mime: str, data: bytes) -> bool:
    """Whether the bytes start as the format the MIME type names does (PNG, JPEG, GIF or WebP)."""
    if mime == "image/png":
        return data.startswith(b"\x89PNG\r\n\x1a\n")
    if mime == "image/jpeg":
        return data.startswith(b"\xff\xd8\xff")
    if mime == "image/gif":
        return data.startswith((b"GIF87a", b"GIF89a"))
    if mime == "image/webp":
        return data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    return False


def _display(record: Any, step: StepView) -> None:
    """Add a saved display to the step: as an image if its bytes are the raster format it claims, else as text."""
    shown = Display.from_dict(record)
    if shown is None:
        step.refused.append("a display that is not a record of a MIME type and its data")
    elif isinstance(shown.data, str):
        step.texts.append((shown.mime, shown.data))
    elif not _is_format(shown.mime, shown.data):
        step.refused.append(
            f"{a(shown.mime)} display of {len(shown.data):,} bytes: only PNG, JPEG, GIF and WebP images are shown"
        )
    elif len(shown.data) > MAX_IMAGE_BYTES:
        step.refused.append(
            f"{a(shown.mime)} image of {len(shown.data):,} bytes, over the {MAX_IMAGE_BYTES:,} a page embeds"
        )
    else:
        # a checked MIME type and base64: nothing in it to escape, and megabytes not worth escaping
        uri = Markup(f"data:{shown.mime};base64,{base64.b64encode(shown.data).decode('ascii')}")
        step.images.append(Image(shown.mime, uri, len(shown.data)))


def _artifact(record: Any, step: StepView, budget: _PageBudget) -> None:
    """Add a saved artifact to the step: refused if its name could lead out or its blob is past the
    page's budgets (checked on the base64's length, before decoding); an image only if the name says
    PNG, JPEG, GIF or WebP and the bytes are that; else its name and size, and its text if small."""
    if isinstance(record, dict) and isinstance(record.get("base64"), str):
        needed = decoded_size(record["base64"])
        if needed > budget.bytes_left and needed <= MAX_ARTIFACT_BYTES:
            name = record.get("name")
            shown = text(name, MOST_NAME_CHARACTERS) if safe_name(name) else "(a name that could lead out)"
            step.artifacts_refused.append(
                f"{shown}: past the {MOST_PAGE_ARTIFACT_BYTES:,} bytes of artifacts a page decodes"
            )
            return
    read = Artifact.from_dict(record, MAX_ARTIFACT_BYTES)
    if isinstance(read, str):
        step.artifacts_refused.append(text(read, MOST_NAME_CHARACTERS * 2))
        return
    budget.bytes_left -= read.size
    name = text(read.name, MOST_NAME_CHARACTERS)
    image = None
    if read.media_type in _INLINE and _is_format(read.media_type, read.data) and read.size <= MAX_IMAGE_BYTES:
        uri = Markup(f"data:{read.media_type};base64,{base64.b64encode(read.data).decode('ascii')}")
        image = Image(read.media_type, uri, read.size)
    shown_text = None
    if image is None and read.size <= MOST_ARTIFACT_TEXT:
        try:
            shown_text = read.data.decode("utf-8")
        except UnicodeDecodeError:
            shown_text = None
    step.artifacts.append(ArtifactView(name, read.size, read.media_type, image, shown_text))


def _artifacts(record: dict[str, Any], step: StepView, budget: _PageBudget) -> None:
    artifacts = record.get("artifacts")
    artifacts = artifacts if isinstance(artifacts, list) else []
    for saved in artifacts[:MOST_ARTIFACTS]:
        _artifact(saved, step, budget)
    step.artifacts_left_off = max(0, len(artifacts) - MOST_ARTIFACTS)
    notes = record.get("artifact_notes")
    notes = notes if isinstance(notes, list) else []
    step.artifact_notes = [text(note, 2000) for note in notes[:MOST_ARTIFACTS] if isinstance(note, str)]


def _tokens(step: dict[str, Any]) -> tuple[int | None, int | None]:
    usage = mapping(step.get("token_usage"))
    return whole(usage.get("input_tokens")), whole(usage.get("output_tokens"))


def _action(record: dict[str, Any], budget: _PageBudget) -> StepView:
    step = StepView("action", whole(record.get("step_number")))
    step.model_text = text(record.get("model_output"))
    step.code = text(record.get("code_action"))
    step.output = text(record.get("observations"))
    step.error = text(mapping(record.get("error")).get("message"))
    displays = record.get("displays")
    displays = displays if isinstance(displays, list) else []
    for shown in displays[:MOST_DISPLAYS]:
        _display(shown, step)
    step.displays_left_off = max(0, len(displays) - MOST_DISPLAYS)
    _artifacts(record, step, budget)
    step.events = [(event.wall, event.detail, event.count) for event in checked_events(record.get("events"))]
    if record.get("is_final_answer") is True:
        step.final_answer = text(record.get("action_output"))
    return step


def _planning(record: dict[str, Any]) -> StepView:
    return StepView("planning", model_text=text(record.get("plan")))


def _step(record: Any, budget: _PageBudget) -> StepView | None:
    """The step as shown; None for the task and final-answer records, which the run shows apart."""
    if not isinstance(record, dict):
        return StepView("malformed", output=text(record))
    kind = record.get("type")
    if kind in ("task", "final_answer"):
        return None
    if kind not in ("action", "planning"):
        return StepView("malformed", output=text(record))
    step = _action(record, budget) if kind == "action" else _planning(record)
    step.duration = number(mapping(record.get("timing")).get("duration"))
    step.input_tokens, step.output_tokens = _tokens(record)
    step.usage = saved_block_usage(record.get("usage"))
    return step


def _final_answer(records: list[Any], steps: list[StepView]) -> str | None:
    for record in records:
        if isinstance(record, dict) and record.get("type") == "final_answer":
            return text(record.get("output"))
    answered = [step.final_answer for step in steps if step.final_answer is not None]
    return answered[-1] if answered else None


def _span(records: list[Any]) -> float | None:
    """From the first step's start to the last one's end (read a record at a time: nothing kept per step)."""
    first, last = math.inf, -math.inf
    for record in records:
        timing = mapping(record.get("timing")) if isinstance(record, dict) else {}
        if (start := number(timing.get("start_time"))) is not None and start > 0:
            first = min(first, start)
        if (end := number(timing.get("end_time"))) is not None:
            last = max(last, end)
    return last - first if math.isfinite(first) and math.isfinite(last) else None


def run_view(data: Any, name: str, most_steps: int | None = None) -> RunView:
    """The page's view of a saved run's JSON, with at most `most_steps` steps (`MOST_STEPS` unless said);
    `UsageError` if it is not a saved run at all."""
    most_steps = MOST_STEPS if most_steps is None else min(most_steps, MOST_STEPS)
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise UsageError(f"{name} is not {_EXPECTED}")
    records: list[Any] = data["steps"]
    view = RunView(
        text(name, MOST_NAME_CHARACTERS), executor=text(run_record(data).get("executor"), MOST_NAME_CHARACTERS)
    )
    tasks = (r.get("task") for r in records if isinstance(r, dict) and r.get("type") == "task")
    view.task = text("\n\n".join(text(task) for task in itertools.islice(tasks, MOST_STEPS)))
    budget = _PageBudget()
    for record in records:
        if len(view.steps) < most_steps:
            view.steps.extend(filter(None, [_step(record, budget)]))
        elif not (isinstance(record, dict) and record.get("type") in ("task", "final_answer")):
            view.steps_left_off += 1
    view.final_answer = _final_answer(records, view.steps)
    view.duration = _span(records)
    view.input_tokens = sum(step.input_tokens or 0 for step in view.steps)
    view.output_tokens = sum(step.output_tokens or 0 for step in view.steps)
    for step in view.steps:
        if step.usage is not None:
            view.usage = step.usage if view.usage is None else view.usage + step.usage
    return view


def read_run(path: str | Path, most_steps: int | None = None) -> RunView:
    """Read a saved run (its first `most_steps` steps); a missing file, or one that is not a saved run, is a
    `UsageError` that says what was expected."""
    path = Path(path)
    try:
        data = load_run_file(path)  # never through a link at its name
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise UsageError(f"{path} is not a file: expected {_EXPECTED}") from None
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise UsageError(f"{path} is not JSON ({error}): expected {_EXPECTED}") from None
    return run_view(data, path.name, most_steps)
