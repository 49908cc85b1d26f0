"""Append-only JSON-lines files that survive crashes: the batch's results and audit.

Each record is one ``write`` of a whole line on a file opened with ``O_APPEND``,
then ``fsync``: a finished record is on disk before the batch moves on. A kill
can still cut the *last* line short (a large write is not atomic against
SIGKILL), so whoever opens the file again first cuts that torn tail off; a torn
line is never followed by another, and readers see only whole records.
Records are written as ASCII JSON, so any Python ``str`` a sandbox hands
back (a lone surrogate too) is stored as an escape and read back exactly.
Several processes may append to one file (the audit): with ``shared=True`` an
``flock`` around each write keeps their lines whole. A file with one writer
(the results) is instead held with `exclusive_writer` for the writer's whole
life, so a second batch on the same file is refused rather than interleaved.
Both may hold secret values: they are created readable by their owner only,
and never opened through a link (`codeward.handed_files`).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from codeward.handed_files import handed_lines, most_handed_bytes, open_append, open_handed, too_large
from codeward.json_values import read_json
from codeward.redaction import redacted_data
from codeward.usage import UsageError

__all__ = ["JsonlAppender", "exclusive_writer", "repair_and_read"]


def _cut_torn_tail(path: Path) -> int:
    """Truncate after the last newline; return how many bytes were dropped."""
    with open_handed(path, update=True) as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        block = 1 << 16
        position = size
        while position > 0:
            start = max(0, position - block)
            handle.seek(start)
            chunk = handle.read(position - start)
            index = chunk.rfind(b"\n")
            if index != -1:
                keep = start + index + 1
                break
            position = start
        else:
            keep = 0
        if keep != size:
            handle.truncate(keep)
            os.fsync(handle.fileno())
        return size - keep


def repair_and_read(path: str | Path) -> tuple[list[dict[str, Any]], int]:
    """The file's records, after cutting a torn last line; and how many bytes were cut."""
    path = Path(path)
    if not path.exists():
        return [], 0
    dropped = _cut_torn_tail(path)
    records = []
    for number, data in handed_lines(path):
        if data is None:
            raise too_large(path, f"line {number}", most_handed_bytes())
        line = data.decode("utf-8")
        if not line.strip():
            continue
        try:
            record = read_json(line)
        except json.JSONDecodeError as error:
            raise UsageError(f"{path}: line {number} is not a JSON record ({error}); was it edited by hand?") from None
        if isinstance(record, dict):
            records.append(record)
    return records, dropped


def _fsync_directory(path: Path) -> None:
    """Make a newly created file's name durable too, not just its contents."""
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def exclusive_writer(path: str | Path) -> Iterator[None]:
    """Hold `path` for one writer; raise if another process holds it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_append(path, read_only=True)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(
                f"{path} is being written by another running codeward batch; wait for it, or use --out"
            ) from None
        yield
    finally:
        os.close(fd)


class JsonlAppender:
    """Appends one record per line; each `append` returns once the line is on disk."""

    def __init__(self, path: str | Path, shared: bool = False) -> None:
        self.path = Path(path)
        self.shared = shared
        created = not self.path.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = open_append(self.path)
        if created:
            _fsync_directory(self.path)

    def append(self, record: dict[str, Any]) -> None:
        if self._fd is None:
            raise ValueError(f"{self.path} is closed")
        # ASCII JSON: every str, lone surrogates included, is written as escapes that read back exactly
        data = (json.dumps(redacted_data(record), ensure_ascii=True, default=str) + "\n").encode("ascii")
        if self.shared:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            os.fsync(self._fd)
        finally:
            if self.shared:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
