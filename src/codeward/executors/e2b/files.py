"""`ex.files` on e2b: E2B's own files API (envd's), which works in the sandbox's own file system.

The host never opens a path here at all: envd does, inside the microVM, so a link the code
made leads only where the sandbox already is. What `SandboxFiles` adds is the same as on
every executor: no ``..``, and the budget: a file is read as a stream and refused as soon as
it passes what the call may move, so a large file never fills the host's memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING

from e2b import FileNotFoundException, SandboxException, SandboxNotFoundException
from e2b import TimeoutException as E2BTimeout
from e2b.sandbox.filesystem.filesystem import FileType

from codeward.executors.files import FilesError, Names, SandboxFiles

if TYPE_CHECKING:
    from e2b_code_interpreter import Sandbox

__all__ = ["E2BFiles"]


class E2BFiles(SandboxFiles):
    """The files of the sandbox `sandbox()` returns (started if need be), through `request`, which
    turns a sandbox found gone into the executor's `SandboxError`."""

    def __init__(self, sandbox: Callable[[], Sandbox], request: Callable[[str], AbstractContextManager[None]]) -> None:
        super().__init__()
        self._sandbox = self._weakly(sandbox)
        self._request = self._weakly(request)

    def _write(self, path: str, data: bytes) -> None:
        with self._request(f"writing {path!r}"), _as_files_error(path):
            self._sandbox().files.write(path, data, use_octet_stream=True)

    def _read(self, path: str, limit: int) -> bytes:
        parts: list[bytes] = []
        size = 0
        with (
            self._request(f"reading {path!r}"),
            _as_files_error(path),
            self._sandbox().files.read(path, format="stream") as stream,
        ):
            for chunk in stream:
                parts.append(chunk)
                size += len(chunk)
                if size > limit:
                    raise self._too_large(f"the file {path!r}", size)
        return b"".join(parts)

    def _list(self, path: str, limit: int) -> Names:
        with self._request(f"listing {path!r}"), _as_files_error(path):
            entries = self._sandbox().files.list(path)
        names = sorted(entry.name + ("/" if entry.type == FileType.DIR else "") for entry in entries)
        if sum(len(name) + 1 for name in names) > limit:
            raise self._too_large(f"the listing of {path!r}", sum(len(name) + 1 for name in names))
        return names

    def _remove(self, path: str) -> None:
        with self._request(f"removing {path!r}"), _as_files_error(path):
            self._sandbox().files.remove(path)

    def _exists(self, path: str) -> bool:
        with self._request(f"looking for {path!r}"), _as_files_error(path):
            return bool(self._sandbox().files.exists(path))


@contextmanager
def _as_files_error(path: str) -> Iterator[None]:
    """E2B's answer that the path is wrong (missing, a folder, refused) as a `FilesError`; a sandbox
    that is gone stays the SDK's error, for the executor to make a `SandboxError` of."""
    try:
        yield
    except FileNotFoundException as error:
        raise FilesError(f"no file or folder at {path!r}: {error}", error_type="FileNotFoundError") from None
    except (E2BTimeout, SandboxNotFoundException):
        raise
    except SandboxException as error:
        raise FilesError(f"E2B refused {path!r}: {error}", error_type=type(error).__name__) from None
