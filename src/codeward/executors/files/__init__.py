"""`ex.files`: the sandbox's working folder, as every executor shows it to the host.

Paths are relative to the sandbox's working folder (an absolute path reaches the rest of the
sandbox where the sandbox has one: docker, jupyter, e2b); ``..`` is refused everywhere, so a
path never leads out of its folder. What `SandboxFiles` does here is the same for every executor:
it checks the path, turns text into UTF-8, and draws every byte that crosses (written, read,
listed) from a `FileBudget`, per call and per sandbox, so that what a sandbox sends back
cannot fill the host's memory. Each kind of sandbox says only how the bytes move
(`_write`, `_read`, ...):

- local: `FolderFiles`, on the host, in the executor's own fresh folder, every step of every
  path opened without following a link (`beneath`);
- jupyter and docker: through the kernel (`kernel.files`), the same `beneath` walk done
  inside the sandbox, so the host never touches a path the sandbox can change;
- e2b: E2B's own files API (`e2b.files`).
"""

from __future__ import annotations

import os
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from codeward.executors.base import ExecutorError
from codeward.executors.files import beneath

__all__ = [
    "DEFAULT_CALL_BYTES",
    "DEFAULT_SANDBOX_BYTES",
    "FileBudget",
    "FileBudgetExceeded",
    "FilesError",
    "FolderFiles",
    "SandboxFiles",
]

T = TypeVar("T")

#: A folder's names, as `list` gives them (the alias keeps the method's name from hiding the type).
Names = list[str]

#: The bytes one `ex.files` call may move (a file written or read, a listing): a file this
#: large crosses a kernel's output budget (64 MiB) once encoded, with room to spare.
DEFAULT_CALL_BYTES = 32 * 2**20
#: The bytes all of one executor's `ex.files` calls may move together.
DEFAULT_SANDBOX_BYTES = 2**30


class FilesError(ExecutorError):
    """An `ex.files` call failed; `error_type` names what the sandbox raised (``FileNotFoundError``)."""

    def __init__(self, message: str, *, error_type: str = "") -> None:
        super().__init__(message)
        self.error_type = error_type


class FileBudgetExceeded(FilesError):
    """A call would move more bytes than its budget allows; the message names the budget."""


@dataclass
class FileBudget:
    """What `ex.files` may move: `per_call` bytes a call, `per_sandbox` bytes in all (`used` so far).

    Set a larger one with ``ex.files.budget = FileBudget(per_call=..., per_sandbox=...)``.
    """

    per_call: int = DEFAULT_CALL_BYTES
    per_sandbox: int = DEFAULT_SANDBOX_BYTES
    used: int = 0

    def call_limit(self) -> int:
        """The most the next call may move: its own budget, or what is left of the sandbox's."""
        return max(0, min(self.per_call, self.per_sandbox - self.used))

    def draw(self, size: int, what: str) -> None:
        """Count `size` bytes of `what` against the budget, or refuse them, naming the budget passed."""
        if size > self.per_call:
            raise FileBudgetExceeded(
                f"{what} is {size:,} bytes, past ex.files' budget of {self.per_call:,} bytes a call; "
                "move it in parts, or raise ex.files.budget.per_call",
                error_type="FileBudgetExceeded",
            )
        if self.used + size > self.per_sandbox:
            raise FileBudgetExceeded(
                f"{what} is {size:,} bytes, and ex.files has moved {self.used:,} of its budget of "
                f"{self.per_sandbox:,} bytes a sandbox; raise ex.files.budget.per_sandbox to move more",
                error_type="FileBudgetExceeded",
            )
        self.used += size


class SandboxFiles(ABC):
    """The contract's `Files`, with what every executor shares; subclasses move the bytes."""

    def __init__(self) -> None:
        self.budget = FileBudget()

    @staticmethod
    def _weakly(method: Callable[..., T]) -> Callable[..., T]:
        """`method` of the executor, held without keeping it alive: an executor its caller forgot
        is then freed at once, and its sandbox with it, not at the next cycle collection."""
        held = weakref.WeakMethod(method)

        def call(*arguments: Any) -> T:
            bound = held()
            if bound is None:
                raise FilesError("the executor these files belonged to is gone; use its files while it is open")
            return bound(*arguments)

        return call

    def write(self, path: str | os.PathLike[str], data: bytes | str) -> None:
        """Write `data` (text as UTF-8) to `path`, replacing what was there; folders are made as needed."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"ex.files.write takes bytes or str, got {type(data).__name__}")
        path = _checked(path)
        self.budget.draw(len(data), f"the data for {path!r}")
        self._write(path, bytes(data))

    def read(self, path: str | os.PathLike[str], *, most: int | None = None) -> bytes:
        """The bytes of the file at `path`; with `most`, a file larger than `most` bytes is refused
        (`FileBudgetExceeded`) before more than that crosses, whatever the budget would allow."""
        path = _checked(path)
        limit = self.budget.call_limit() if most is None else max(0, min(most, self.budget.call_limit()))
        data = self._read(path, limit)
        if len(data) > limit:  # a sandbox that sent more than it was asked for
            raise self._too_large(f"the file {path!r}", len(data))
        self.budget.draw(len(data), f"the file {path!r}")
        return data

    def list(self, path: str | os.PathLike[str] = ".") -> Names:
        """The names in the folder at `path`, sorted; a folder's name ends with ``/``."""
        path = _checked(path)
        names, size = self._listing(path, self.budget.call_limit())
        self.budget.draw(size, f"the listing of {path!r}")
        return names

    def remove(self, path: str | os.PathLike[str]) -> None:
        """Remove the file (or empty folder, or link: never what it points to) at `path`."""
        self._remove(_checked(path))

    def exists(self, path: str | os.PathLike[str]) -> bool:
        """Whether anything is at `path` (a link there counts; one on the way is refused)."""
        return self._exists(_checked(path))

    def _too_large(self, what: str, size: int) -> FileBudgetExceeded:
        """The error for `what`, found to be `size` bytes (or more) where the call may move less."""
        try:
            self.budget.draw(size, what)
        except FileBudgetExceeded as error:
            return error
        self.budget.used -= size  # within the budget after all: then the sandbox's own limit spoke
        return FileBudgetExceeded(f"{what} is {size:,} bytes, more than this call may move", error_type="TooLarge")

    @abstractmethod
    def _write(self, path: str, data: bytes) -> None: ...

    @abstractmethod
    def _read(self, path: str, limit: int) -> bytes:
        """The file's bytes; past `limit`, raise `_too_large` (or return more: `read` refuses it)."""

    def _listing(self, path: str, limit: int) -> tuple[Names, int]:
        """The names, and the bytes they cost to move (a character and a separator each, unless
        the sandbox's answer says otherwise)."""
        names = self._list(path, limit)
        return names, sum(len(name) + 1 for name in names)

    @abstractmethod
    def _list(self, path: str, limit: int) -> Names: ...

    @abstractmethod
    def _remove(self, path: str) -> None: ...

    @abstractmethod
    def _exists(self, path: str) -> bool: ...


def _checked(path: Any) -> str:
    """`path` as text, refused (before any sandbox sees it) if it is empty or could lead out (``..``)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"a path is a str or a Path, got {type(path).__name__}")
    text = os.fsdecode(os.fspath(path))
    try:
        beneath.split(text)
    except beneath.Refused as error:
        raise FilesError(error.strerror or str(error), error_type="Refused") from None
    except ValueError as error:
        raise FilesError(str(error), error_type="ValueError") from None
    return text


class FolderFiles(SandboxFiles):
    """A folder on this machine (the local executor's), every step of every path taken without a link."""

    def __init__(self, folder: str) -> None:
        super().__init__()
        self.folder = folder
        self._closed = False

    def close(self) -> None:
        """The folder is gone (its executor closed): its name is free for anyone to make again, so no
        later call may reach whatever is at that path now."""
        self._closed = True

    def _inside(self, path: str) -> str:
        """`path` relative to the folder: an absolute path must name a place inside it."""
        if self._closed:
            raise FilesError("the executor these files belonged to is closed; its working folder is gone")
        if not path.startswith("/"):
            return path
        relative = os.path.relpath(path, self.folder)
        if relative == ".." or relative.startswith("../"):
            raise FilesError(
                f"{path!r} is outside this sandbox's working folder ({self.folder}); the local executor's "
                "files are those in its folder: name them relative to it",
                error_type="PermissionError",
            )
        return relative

    def _write(self, path: str, data: bytes) -> None:
        with _as_files_error():
            beneath.write(self.folder, self._inside(path), data)

    def _read(self, path: str, limit: int) -> bytes:
        with _as_files_error():
            try:
                return beneath.read(self.folder, self._inside(path), limit)
            except beneath.TooLarge as error:
                raise self._too_large(f"the file {path!r}", error.size) from None

    def _list(self, path: str, limit: int) -> Names:
        with _as_files_error():
            try:
                return beneath.listing(self.folder, self._inside(path), limit)
            except beneath.TooLarge as error:
                raise self._too_large(f"the listing of {path!r}", error.size) from None

    def _remove(self, path: str) -> None:
        with _as_files_error():
            beneath.remove(self.folder, self._inside(path))

    def _exists(self, path: str) -> bool:
        with _as_files_error():
            return beneath.exists(self.folder, self._inside(path))


@contextmanager
def _as_files_error() -> Iterator[None]:
    """What the file system raised, as a `FilesError` that names it; the budget's own errors pass."""
    try:
        yield
    except FilesError:
        raise
    except (OSError, ValueError) as error:
        message = str(error)
        if isinstance(error, OSError) and error.strerror:
            message = f"{error.strerror}: {error.filename}" if error.filename else error.strerror
        raise FilesError(message, error_type=type(error).__name__) from None
