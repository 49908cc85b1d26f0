"""The local executor's working folder, as the model's code reaches it with `open()`.

The folder is on the host's disk, so what the code writes there draws from a budget: every
byte a file of the code's takes in is counted (a worker counts from what the folder holds when
it first opens a file to write), and a write past `DEFAULT_FOLDER_BYTES` fails with an `OSError`
that names the budget, so a loop of writes cannot fill the host's disk. Paths are walked by
`beneath`: only files inside the folder, never through a link. The code gets a `WorkingFile`:
the methods of a file, over the standard library's own layers (buffered, text) on a raw file
that counts what it writes. Never those layers themselves: ``type(f.buffer.raw)`` is
`io.FileIO`, whose call opens any path the process can.
"""

from __future__ import annotations

import errno
import io
import os
import weakref
from typing import Any

from codeward.executors.files import beneath
from codeward.executors.local.imports import SandboxViolation

__all__ = ["DEFAULT_FOLDER_BYTES", "WorkingFile", "folder_open"]

#: The bytes the code's files may take in, in all, in one executor's working folder.
DEFAULT_FOLDER_BYTES = 2**30
#: The files the code may hold open at once: in process, its descriptors are the host's.
MOST_OPEN_FILES = 64


class _Allowance:
    """What the code has written into the folder, counted against `limit`."""

    def __init__(self, folder: str, limit: int) -> None:
        self.folder = folder
        self.limit = limit
        self.used: int | None = None
        self.open_files: weakref.WeakSet[WorkingFile] = weakref.WeakSet()

    def opening(self) -> None:
        """Refuse a file past `MOST_OPEN_FILES` held open at once (a closed or dropped one is let go)."""
        if sum(not file.closed for file in list(self.open_files)) >= MOST_OPEN_FILES:
            raise OSError(
                errno.EMFILE,
                f"the code holds {MOST_OPEN_FILES} files open, as many as it may at once; close some "
                "(`with open(...) as f:` closes each when done)",
            )

    def take(self, size: int) -> None:
        if self.used is None:
            self.used = _held(self.folder)
        if self.used + size > self.limit:
            raise OSError(
                errno.EFBIG,
                f"the working folder's budget of {self.limit:,} bytes written is spent ({self.used:,} used); "
                "write less, or ask the host to collect and remove files (ex.files)",
            )
        self.used += size


def _held(folder: str) -> int:
    """The bytes the files in `folder` hold now (links are not followed)."""
    total = 0
    for parent, _, names in os.walk(folder):
        for name in names:
            try:
                total += os.stat(os.path.join(parent, name), follow_symlinks=False).st_size
            except OSError:
                continue
    return total


class _CountedFile(io.FileIO):
    """A raw file whose writes are counted against the folder's allowance first."""

    _allowance: _Allowance  # an underscore name: the code's policy refuses to read or set it

    def write(self, data: Any, /) -> int:
        size = memoryview(data).nbytes
        past_end = self.tell() + size - os.fstat(self.fileno()).st_size  # a seek past the end makes the file longer
        self._allowance.take(max(size, past_end))
        return super().write(data)

    def truncate(self, size: int | None = None, /) -> int:
        if size is not None:  # a longer file reads back as that many bytes, written or not
            self._allowance.take(max(0, size - os.fstat(self.fileno()).st_size))
        return super().truncate(size)


def folder_open(folder: str, limit: int = DEFAULT_FOLDER_BYTES) -> Any:
    """The code's `open`: files in `folder` only, never through a link, writes within `limit`."""
    allowance = _Allowance(folder, limit)

    def open(file: Any, mode: str = "r", encoding: str | None = None, newline: str | None = None) -> Any:
        allowance.opening()
        try:
            fd = beneath.open_descriptor(folder, file, mode)
        except beneath.Refused as refused:  # the sandbox's own refusal, reported as the others are
            raise SandboxViolation(refused.strerror or str(refused)) from None
        try:
            raw = _CountedFile(fd, mode.replace("b", "").replace("t", ""), closefd=True)
        except BaseException:
            os.close(fd)
            raise
        raw._allowance = allowance
        buffered: Any
        if "+" in mode:
            buffered = io.BufferedRandom(raw)
        elif mode[0] == "r":
            buffered = io.BufferedReader(raw)
        else:
            buffered = io.BufferedWriter(raw)
        opened = buffered if "b" in mode else io.TextIOWrapper(buffered, encoding=encoding or "utf-8", newline=newline)
        working = WorkingFile(opened, file, mode)
        allowance.open_files.add(working)
        return working

    return open


class WorkingFile:
    """A file of the working folder, as the code holds it: a file's methods, and its name and mode.
    The file object inside has an underscore name, which the code's policy keeps out of reach."""

    def __init__(self, file: Any, name: Any, mode: str) -> None:
        self._file = file
        self.name = name
        self.mode = mode

    def read(self, size: int = -1) -> Any:
        return self._file.read(size)

    def readline(self, size: int = -1) -> Any:
        return self._file.readline(size)

    def readlines(self, hint: int = -1) -> list[Any]:
        return list(self._file.readlines(hint))

    def write(self, data: Any) -> int:
        return int(self._file.write(data))

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self._file.seek(offset, whence))

    def tell(self) -> int:
        return int(self._file.tell())

    def truncate(self, size: int | None = None) -> int:
        return int(self._file.truncate(size))

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    @property
    def closed(self) -> bool:
        return bool(self._file.closed)

    def readable(self) -> bool:
        return bool(self._file.readable())

    def writable(self) -> bool:
        return bool(self._file.writable())

    def seekable(self) -> bool:
        return bool(self._file.seekable())

    def __iter__(self) -> WorkingFile:
        return self

    def __next__(self) -> Any:
        line = self._file.readline()
        if not line:
            raise StopIteration
        return line

    def __enter__(self) -> WorkingFile:
        return self

    def __exit__(self, *exception: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<file {self.name!r} mode={self.mode!r}>"
