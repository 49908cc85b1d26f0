"""``codeward run --outputs-dir DIR``: the run's artifacts written out as files a user can open.

The names came from a sandbox, so none is used as a path: each artifact becomes one file directly
in DIR, named ``step<N>-<name>`` made safe by `file_name` (letters, digits, ``.``, ``_``, ``-``; a
``/`` of a folder inside outputs/ becomes ``_``, and a changed name gains a hash). A name already
taken in DIR gets a counter rather than being replaced, and each file is created fresh, never
through a link (`O_EXCL | O_NOFOLLOW`), readable by its owner only unless files are shared
(`file_mode`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from codeward.handed_files import file_mode, file_name
from codeward.platform.memory import ActionStep
from codeward.usage import UsageError

__all__ = ["prepare_folder", "write_artifacts"]

#: The most tries for a free name before a file is given up.
_MOST_TRIES = 100
_SUFFIX = re.compile(r"[A-Za-z0-9]{1,10}")


def _create(folder: Path, name: str, data: bytes) -> Path | None:
    """`data` in a file created fresh in `folder` under `name` (or `name` with a counter); None if no name was free."""
    stem, dot, suffix = name.rpartition(".")
    if not stem:
        stem, dot, suffix = name, "", ""
    for attempt in range(_MOST_TRIES):
        candidate = folder / (name if attempt == 0 else f"{stem}-{attempt}{dot}{suffix}")
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, file_mode())
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
        return candidate
    return None


def _fresh_name(step: int, name: str) -> str:
    """``step<N>-<name>`` as one safe file name, keeping a plain suffix (``.png``) at its end."""
    flat = name.replace("/", "_")
    stem, _, suffix = flat.rpartition(".")
    if stem and _SUFFIX.fullmatch(suffix):
        return file_name(f"step{step}-{stem}", f".{suffix}")
    return file_name(f"step{step}-{flat}", "")


def prepare_folder(folder: str | Path) -> Path:
    """The folder, made if missing (owner-only); a `UsageError` if it cannot be: called before the run
    too, so a wrong ``--outputs-dir`` fails before any step costs anything."""
    folder = Path(folder)
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"--outputs-dir {folder}: cannot make the folder: {error.strerror}") from None
    if not folder.is_dir():
        raise UsageError(f"--outputs-dir {folder}: not a folder; name a folder")
    return folder


def write_artifacts(steps: Iterable[ActionStep], folder: str | Path) -> list[Path]:
    """Write every step's artifacts into `folder` (made if missing, owner-only); return the files written."""
    folder = prepare_folder(folder)
    written = []
    for step in steps:
        for artifact in step.artifacts:
            path = _create(folder, _fresh_name(step.step_number, artifact.name), artifact.data)
            if path is not None:
                written.append(path)
    return written
