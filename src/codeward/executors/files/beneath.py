"""Files beneath a folder, reached without following a link anywhere on the way.

A sandbox's working folder is the sandbox's to change: between two of the host's steps its
code can put a symbolic link where a folder or a file was. So every path is walked one name at
a time from the folder, each step opened relative to the last with ``O_NOFOLLOW``: a link at
any step is refused, never followed, and a ``..`` is refused before anything is opened. This
is `handed_files`' rule for a folder a user hands over (no link at the file's own name), taken
to every step, since here every step may be the stranger's.

One module, two places: `ex.files` uses it on the host for the local executor's folder, and
kernel sandboxes (jupyter, docker) receive its source with codeward's sandbox side and use it
there, so every executor answers the same path in the same way. It therefore needs nothing
but the standard library, and keeps to syntax an older Python reads.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from typing import Any

__all__ = [
    "Refused",
    "TooLarge",
    "exists",
    "listing",
    "open_descriptor",
    "path_text",
    "read",
    "remove",
    "split",
    "write",
]

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: The access flags each mode of `open_file` opens with, before O_NOFOLLOW and O_CLOEXEC.
_MODES = {
    "r": os.O_RDONLY,
    "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
    "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL,
}


class Refused(PermissionError):
    """A path that could lead out of its folder (``..``, a link, an absolute path where only the
    folder is open): refused, never followed. `strerror` says which, and what to do."""


class TooLarge(ValueError):
    """What a call would move is past the bytes it may move; `size` is what it found (at least)."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        super().__init__(f"{what} is {size:,} bytes or more, past the {limit:,} bytes this call may move")
        self.size = size


def path_text(path: Any) -> str:
    """`path` as a plain `str` of its own: a copy made without calling any method of the path's
    class, so a `str` or `bytes` subclass of the sandbox's cannot answer a check with one text
    and the system call with another. Every use of a path takes this copy once and keeps to it."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if isinstance(path, str):
        return "".join([path])  # copies the characters; no method of a subclass runs
    if isinstance(path, (bytes, bytearray)):
        return os.fsdecode(b"".join([path]))
    raise TypeError(f"a path is text, got {type(path).__name__}")


def split(path: Any) -> tuple[bool, list[str]]:
    """Whether `path` is absolute, and its names; a path that could lead out (``..``) is refused."""
    path = path_text(path)
    if not path or "\0" in path:
        raise ValueError(f"{path!r} is not a path: give a file's name, relative to the working folder")
    names = [name for name in path.split("/") if name not in ("", ".")]
    if ".." in names:
        raise Refused(
            errno.EACCES, f"{path!r} contains '..': paths stay inside their folder, so name the file from there"
        )
    return path.startswith("/"), names


def _link_refused(name: str) -> Refused:
    return Refused(
        errno.ELOOP, f"{name!r} is a symbolic link, and files here are never reached through one (it may lead out)"
    )


def _is_link(folder: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _step(folder: int, name: str, create: bool) -> int:
    """The folder `name` in `folder`, opened without following a link (made first, with `create`).
    A link is told by its own lstat, not by the error: Linux says ELOOP or ENOTDIR for one,
    gVisor ENOENT for a link whose target is missing."""
    try:
        return os.open(name, _FOLDER, dir_fd=folder)
    except OSError as error:
        if _is_link(folder, name):
            raise _link_refused(name) from None
        if not (create and isinstance(error, FileNotFoundError)):
            raise
    os.mkdir(name, 0o700, dir_fd=folder)
    return os.open(name, _FOLDER, dir_fd=folder)


def _folder(root: str, names: list[str], create: bool = False) -> int:
    """A descriptor of the folder `names` lead to from `root`, each step taken without following a link
    (`root` itself included: a link put where the folder was is refused, not followed)."""
    try:
        fd = os.open(root, _FOLDER)
    except OSError:
        if os.path.islink(root):
            raise _link_refused(root) from None
        raise
    try:
        for name in names:
            inner = _step(fd, name, create)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def _parent(root: str, path: Any, create: bool = False) -> tuple[int, str]:
    """The descriptor of the folder that holds `path` (relative to `root`, or absolute), and its last name."""
    absolute, names = split(path)
    if not names:
        raise IsADirectoryError(errno.EISDIR, f"{path!r} names a folder, not a file")
    return _folder("/" if absolute else root, names[:-1], create), names[-1]


def _opened(folder: int, name: str, flags: int, mode: int = 0o600) -> int:
    """`name` in `folder` opened with `flags` and never through a link; only a regular file is kept."""
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode, dir_fd=folder)
    except OSError as error:
        if error.errno == errno.ELOOP or _is_link(folder, name):
            raise _link_refused(name) from None
        if error.errno == errno.ENXIO:  # a FIFO no one reads, opened without blocking
            raise IsADirectoryError(errno.EISDIR, f"{name!r} is not a plain file") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO would block, a device is the machine's
        os.close(fd)
        raise IsADirectoryError(errno.EISDIR, f"{name!r} is not a plain file")
    os.set_blocking(fd, True)
    return fd


def write(root: str, path: Any, data: bytes) -> None:
    """Write `data` to `path` whole: into a file created fresh beside it, then renamed over the name,
    so a link at the name is replaced, never written through. Missing folders are made (owner-only)."""
    folder, name = _parent(root, path, create=True)
    try:
        # a name is at most 255 bytes: keep 100 bytes of it, whole characters
        temporary = f".{os.fsencode(name)[:100].decode('utf-8', 'ignore')}.{secrets.token_hex(6)}.tmp"
        fd = _opened(folder, temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            with os.fdopen(fd, "wb") as stream:
                stream.write(data)
            os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            os.unlink(temporary, dir_fd=folder)
            raise
    finally:
        os.close(folder)


def read(root: str, path: Any, limit: int) -> bytes:
    """The bytes of the plain file at `path`; `TooLarge` past `limit` (checked before reading, and while)."""
    folder, name = _parent(root, path)
    try:
        fd = _opened(folder, name, os.O_RDONLY)
    finally:
        os.close(folder)
    with os.fdopen(fd, "rb") as stream:
        size = os.fstat(fd).st_size
        if size > limit:
            raise TooLarge(repr(path), size, limit)
        data = stream.read(limit + 1)
    if len(data) > limit:  # it grew while read
        raise TooLarge(repr(path), len(data), limit)
    return data


def listing(root: str, path: Any, limit: int) -> list[str]:
    """The names in the folder at `path`, sorted, a folder's with a ``/`` after it; `TooLarge` once
    their characters pass `limit` (a folder of millions of names is the sandbox's, not the host's)."""
    absolute, names = split(path)
    fd = _folder("/" if absolute else root, names)
    found: list[str] = []
    size = 0
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                found.append(entry.name + ("/" if entry.is_dir(follow_symlinks=False) else ""))
                size += len(found[-1]) + 1
                if size > limit:
                    raise TooLarge(f"the listing of {path!r}", size, limit)
    finally:
        os.close(fd)
    return sorted(found)


def remove(root: str, path: Any) -> None:
    """Remove the file (or link, or empty folder) at `path`: a link is removed itself, never followed."""
    folder, name = _parent(root, path)
    try:
        try:
            os.unlink(name, dir_fd=folder)
        except IsADirectoryError:
            os.rmdir(name, dir_fd=folder)
        except PermissionError:  # what some systems say for unlink() of a folder
            if not stat.S_ISDIR(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode):
                raise
            os.rmdir(name, dir_fd=folder)
    finally:
        os.close(folder)


def exists(root: str, path: Any) -> bool:
    """Whether anything (a file, a folder, a link) is at `path`; a link on the way is refused."""
    absolute, names = split(path)
    if not names:
        return os.path.isdir("/" if absolute else root)
    try:
        folder = _folder("/" if absolute else root, names[:-1])
    except (FileNotFoundError, NotADirectoryError):
        return False
    try:
        os.stat(names[-1], dir_fd=folder, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return False
    finally:
        os.close(folder)
    return True


def open_descriptor(root: str, path: Any, mode: str = "r") -> int:
    """A descriptor for `open(path, mode)` in the local executor's code: inside `root` only (an
    absolute path is refused), never through a link, plain files only; the modes of `open`
    (r, w, a, x, with b or t, and + to update)."""
    if not isinstance(mode, str) or not mode or mode[0] not in _MODES or set(mode[1:]) - set("bt+"):
        raise ValueError(f"mode {mode!r}: use one of 'r', 'w', 'a', 'x', with 'b' for bytes, '+' to update")
    path = path_text(path)  # one text for the check and the walk
    absolute, _ = split(path)
    if absolute:
        raise Refused(errno.EACCES, f"{path!r}: files here are opened from the working folder only")
    flags = _MODES[mode[0]]
    if "+" in mode:
        flags = (flags & ~os.O_WRONLY) | os.O_RDWR
    folder, name = _parent(root, path)
    try:
        return _opened(folder, name, flags)
    finally:
        os.close(folder)
