"""Artifacts: the files a step's code wrote under the working folder's ``outputs/``, kept with the run.

``CodeAgent(..., collect_outputs=True)`` makes the folder before the first step and, after each
step that ran code, walks it through ``ex.files`` (the same on every executor: no link followed,
no ``..``), collecting the files that are new and those whose bytes changed since they were last
collected. Each `Artifact` is a name relative to ``outputs/``, its bytes, and a media type guessed
from the name (never from the bytes). The step keeps them (`ActionStep.artifacts`), the run's
result gives them all (`RunResult.artifacts`), the observation names them for the model, and a
saved run embeds them in base64.

What a sandbox wrote there is a stranger's, so collection is bounded, per run (reset when a run
starts) and per step, and never fails the run: what is left off gets a note on the step, saying
why. The budgets (`OutputsBudget`):

- `MOST_FILES` artifacts a run (a file collected again after it changed counts again);
- `MOST_FILE_BYTES` bytes a file: a larger one is refused by ``ex.files`` before it crosses;
- `MOST_RUN_BYTES` bytes a run, all artifacts together;
- `MOST_ENTRIES` names looked at in ``outputs/`` a step (folders included), `MOST_DEPTH` folders deep;
- `MOST_STEP_READ_BYTES` bytes read a step: a file is known to have changed only by reading it
  (its hash is compared with the last one collected), so unchanged files are read again each step;
  the bytes of an unchanged file are given back to ``ex.files``' budget, since none is kept.

A link (to a file or a folder), a FIFO, a device, a name that could lead out: skipped with a note,
never followed. A saved run's artifacts are read back through `Artifact.from_dict`, which refuses
a name that could lead out of a folder and a blob past `MOST_FILE_BYTES` before decoding it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import mimetypes
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from codeward.executors.base import Files
from codeward.executors.files import FileBudgetExceeded
from codeward.wording import counted

__all__ = [
    "MOST_DEPTH",
    "MOST_ENTRIES",
    "MOST_FILES",
    "MOST_FILE_BYTES",
    "MOST_RUN_BYTES",
    "MOST_STEP_READ_BYTES",
    "OUTPUTS",
    "Artifact",
    "Collected",
    "OutputsBudget",
    "OutputsCollector",
    "StepsArtifacts",
    "all_artifacts",
    "decoded_size",
    "human_size",
    "media_type",
    "safe_name",
]

#: The folder, relative to the sandbox's working folder, whose files are collected.
OUTPUTS = "outputs"
#: The most artifacts one run collects.
MOST_FILES = 50
#: The largest file collected.
MOST_FILE_BYTES = 10 * 2**20
#: The most bytes one run's artifacts hold together.
MOST_RUN_BYTES = 50 * 2**20
#: The most names in ``outputs/`` (and its folders) looked at after one step.
MOST_ENTRIES = 1000
#: The most bytes read from ``outputs/`` after one step: a changed file is known only by reading it.
MOST_STEP_READ_BYTES = 100 * 2**20
#: The deepest folder inside ``outputs/`` that is walked.
MOST_DEPTH = 8
#: The most notes of what was left off a step keeps (the rest are counted).
_MOST_NOTES = 20
#: The longest name (relative to ``outputs/``) an artifact may have.
_MOST_NAME = 1000


def media_type(name: str) -> str:
    """The media type a file's name suggests (``image/png``), or ``application/octet-stream``."""
    guessed, _ = mimetypes.guess_type(name, strict=False)
    return guessed or "application/octet-stream"


def safe_name(name: Any) -> bool:
    """Whether `name` is a plain relative path that stays inside its folder: no ``..``, no leading
    ``/``, no empty or ``.`` part, no backslash, NUL or control character, not too long."""
    if not isinstance(name, str) or not name or len(name) > _MOST_NAME or name.startswith("/"):
        return False
    if any(ord(c) < 32 or c in "\\\x7f" for c in name):
        return False
    return all(part not in ("", ".", "..") for part in name.split("/"))


def human_size(size: int) -> str:
    """`size` bytes as a person reads it: ``40 B``, ``12 KB``, ``3.1 MB`` (powers of 1000)."""
    if size < 1000:
        return f"{size} B"
    value, unit = float(size), "B"
    for larger in ("KB", "MB", "GB"):
        value, unit = value / 1000, larger
        if value < 1000:
            break
    return f"{value:.0f} {unit}" if value >= 10 else f"{value:.1f} {unit}"


def decoded_size(encoded: str) -> int:
    """How many bytes `encoded` (base64) decodes to, read from its length and padding alone."""
    return len(encoded) // 4 * 3 - (2 if encoded.endswith("==") else 1 if encoded.endswith("=") else 0)


@dataclass(frozen=True)
class Artifact:
    """A file the code wrote under ``outputs/``: `name` relative to it, its `data`, its `media_type`."""

    name: str
    data: bytes = field(repr=False)
    media_type: str

    @property
    def size(self) -> int:
        return len(self.data)

    def to_dict(self) -> dict[str, Any]:
        """The artifact as a saved run keeps it: its bytes in base64."""
        return {
            "name": self.name,
            "size": self.size,
            "media_type": self.media_type,
            "base64": base64.b64encode(self.data).decode("ascii"),
        }

    @classmethod
    def from_dict(cls, record: Any, most_bytes: int = MOST_FILE_BYTES) -> Artifact | str:
        """An artifact read back from a saved run (a file anyone may have written), or why not: a
        name that could lead out, a blob past `most_bytes` (refused before it is decoded), bad base64.
        The media type is guessed again from the name: the record's own is not trusted."""
        if not isinstance(record, dict):
            return "an artifact that is not a record"
        name, encoded = record.get("name"), record.get("base64")
        if not safe_name(name):
            return "an artifact whose name is not a plain path inside outputs/ (it could lead out of its folder)"
        if not isinstance(encoded, str):
            return f"the artifact {name!r} has no base64 bytes"
        if decoded_size(encoded) > most_bytes:
            return f"the artifact {name!r} holds {decoded_size(encoded):,} bytes, past the {most_bytes:,} bytes allowed"
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            return f"the artifact {name!r} is not valid base64"
        return cls(str(name), data, media_type(str(name)))

    def __repr__(self) -> str:
        return f"Artifact({self.name!r}, {self.size:,} bytes, {self.media_type!r})"


@dataclass
class Collected:
    """What one step collected, and notes of what it left off and why."""

    artifacts: list[Artifact] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    notes_left_off: int = 0

    def note(self, text: str) -> None:
        if len(self.notes) < _MOST_NOTES:
            self.notes.append(text)
        else:
            self.notes_left_off += 1

    def all_notes(self) -> list[str]:
        more = [f"{self.notes_left_off:,} more file(s) left off"] if self.notes_left_off else []
        return [*self.notes, *more]

    def observation(self) -> str:
        """The line the model reads: which files appeared, and what was left off."""
        lines = []
        if self.artifacts:
            shown = ", ".join(f"{a.name} ({human_size(a.size)})" for a in self.artifacts)
            lines.append(f"Files in {OUTPUTS}/: {shown}")
        notes = self.all_notes()
        if notes:
            lines.append(f"Not collected from {OUTPUTS}/: " + "; ".join(notes))
        return "\n".join(lines)


@dataclass
class OutputsBudget:
    """The bounds of a collection; each can be set apart (see the module's text)."""

    most_files: int = MOST_FILES
    most_file_bytes: int = MOST_FILE_BYTES
    most_run_bytes: int = MOST_RUN_BYTES
    most_entries: int = MOST_ENTRIES
    most_depth: int = MOST_DEPTH
    most_step_read_bytes: int = MOST_STEP_READ_BYTES


class OutputsCollector:
    """Collects ``outputs/`` after each step; remembers what it collected (by a hash of the bytes),
    so an unchanged file is not collected twice; counts a run's files and bytes from `start_run`."""

    def __init__(self, budget: OutputsBudget | None = None) -> None:
        self.budget = budget or OutputsBudget()
        self._seen: dict[str, bytes] = {}
        self.files_left = self.budget.most_files
        self.bytes_left = self.budget.most_run_bytes
        self._step_read_left = self.budget.most_step_read_bytes
        self._problem: str | None = None

    def start_run(self, files: Files) -> None:
        """A run begins: its budgets are full again, and ``outputs/`` exists for the code to write in
        (made by writing a file there and removing it: ``ex.files`` makes folders as it writes)."""
        self.files_left = self.budget.most_files
        self.bytes_left = self.budget.most_run_bytes
        self._problem = None
        try:
            if not files.exists(OUTPUTS):
                keep = f"{OUTPUTS}/.codeward-keep"
                files.write(keep, b"")
                files.remove(keep)
        except Exception as error:  # the run goes on: its first step says why outputs/ is missing
            self._problem = f"{OUTPUTS}/ could not be made: {_short(error)}"

    def collect(self, files: Files) -> Collected:
        """The files new or changed under ``outputs/`` since the last collection; never raises for
        what the sandbox holds: a failure becomes a note."""
        found = Collected()
        self._step_read_left = self.budget.most_step_read_bytes
        if self._problem is not None:
            found.note(self._problem)
            self._problem = None
        try:
            if not files.exists(OUTPUTS):
                return found
            self._walk(files, found)
        except Exception as error:  # a sandbox gone, a budget spent: the run goes on
            found.note(f"{OUTPUTS}/ could not be read: {_short(error)}")
        return found

    def _walk(self, files: Files, found: Collected) -> None:
        pending: list[tuple[str, int]] = [("", 0)]
        looked = 0
        unseen = 0
        while pending:
            folder, depth = pending.pop(0)
            names = files.list(f"{OUTPUTS}/{folder}" if folder else OUTPUTS)
            for listed in names:
                looked += 1
                if looked > self.budget.most_entries:
                    unseen += 1
                    continue
                is_folder = listed.endswith("/")
                name = folder + listed.rstrip("/")
                if "/" in listed.rstrip("/") or not safe_name(name):
                    found.note(f"{name!r}: not a plain name, so never followed")
                elif is_folder and depth + 1 >= self.budget.most_depth:
                    found.note(f"{name}/: deeper than the {self.budget.most_depth} folders walked")
                elif is_folder:
                    pending.append((name + "/", depth + 1))
                else:
                    self._one(files, name, found)
        if unseen:
            found.note(
                f"{unseen:,} more name(s) not looked at: a step looks at {self.budget.most_entries:,} names at most"
            )

    def _one(self, files: Files, name: str, found: Collected) -> None:
        known = name in self._seen
        if self.files_left <= 0 and not known:  # a known file is read still: a change past the budget is noted
            found.note(f"{name}: past the run's budget of {counted(self.budget.most_files, 'file')}")
            return
        most = min(self.budget.most_file_bytes, self._step_read_left)
        try:
            data = files.read(f"{OUTPUTS}/{name}", most=most)
        except FileBudgetExceeded as error:
            budget = getattr(files, "budget", None)
            if budget is not None and budget.call_limit() < most:  # ex.files' own budget is spent
                found.note(f"{name}: {_short(error)}")
            elif most < self.budget.most_file_bytes:
                found.note(f"{name}: past the {self.budget.most_step_read_bytes:,} bytes a step reads")
            else:
                found.note(f"{name}: over the budget of {self.budget.most_file_bytes:,} bytes a file")
            return
        except Exception as error:  # a link, a FIFO, a folder's link: refused by ex.files, never followed
            found.note(f"{name}: not collected, {_short(error)}")
            return
        self._step_read_left -= len(data)
        digest = hashlib.sha256(data).digest()
        if self._seen.get(name) == digest:
            _refund(files, len(data))
            return
        if self.files_left <= 0:
            found.note(f"{name}: changed, but past the run's budget of {counted(self.budget.most_files, 'file')}")
        elif len(data) > self.bytes_left:
            found.note(
                f"{name}: past what is left ({human_size(self.bytes_left)}) of the run's budget of "
                f"{self.budget.most_run_bytes:,} bytes"
            )
        else:
            self._seen[name] = digest
            self.files_left -= 1
            self.bytes_left -= len(data)
            found.artifacts.append(Artifact(name, data, media_type(name)))


def _refund(files: Files, size: int) -> None:
    """Give back to ``ex.files``' budget the bytes of a file read only to find it unchanged: they were
    dropped at once, and re-reading an unchanged file each step would otherwise spend the sandbox's
    budget (1 GiB) on nothing kept. The step's own read budget still counts them."""
    budget = getattr(files, "budget", None)
    if budget is not None and isinstance(getattr(budget, "used", None), int):
        budget.used = max(0, budget.used - size)


def _short(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return text if len(text) <= 300 else text[:300] + "..."


def all_artifacts(steps: Iterable[Any]) -> list[Artifact]:
    """Every artifact of `steps`, in order (steps without any add none)."""
    return [artifact for step in steps for artifact in getattr(step, "artifacts", None) or []]


class StepsArtifacts:
    """What a run's result gives of its steps' artifacts (`RunResult.artifacts`)."""

    steps: list[Any]

    @property
    def artifacts(self) -> list[Artifact]:
        """Every file the run's steps collected from outputs/ (``CodeAgent(collect_outputs=True)``), in order."""
        return all_artifacts(self.steps)
