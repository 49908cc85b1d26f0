"""Top-level because every surface uses it: the viewer, saved runs, a batch's results and audit files.

Files a user may have been handed, and the files codeward writes beside them: one rule each,
in one place.

- Reading: a file in a folder a user was handed (a batch's runs folder, a saved run's folder) is
  opened without following a symbolic link at its name (`open_handed`), so a link planted there
  cannot show the bytes of a file outside the folder, or truncate one. The folder itself is
  taken as the user named it. Anything but a regular file (a FIFO that would block, a device)
  is refused too.
- Paths a file names: a path written in a handed file (a job's ``@file`` value or ``script:``
  model, a saved run's variable file or tool file) counts only if, its links resolved, it lies
  inside the file's folder (`inside`): a file never reaches out of where it was handed.
- Sizes: a handed file is read whole (a saved run) or a line at a time (a batch's results and
  audit), and one read holds at most `most_handed_bytes` bytes, 256 MiB unless
  ``CODEWARD_MOST_FILE_BYTES`` says otherwise (`read_handed`, `handed_lines`): a larger file is
  refused by its size before it is read, and a longer line is passed over without being held:
  parsing one read's JSON then takes a bounded multiple of the budget.
- Names: an id that becomes a file name (a batch job's run file) keeps only letters, digits,
  ``.``, ``_`` and ``-``, never starts with a dot, and is at most `MOST_NAME_CHARACTERS` long;
  a changed id gains a hash of the whole, so two ids never share a file (`file_name`).
- Writing: an output is written whole to a temporary file created fresh beside it, then put in
  place with ``os.replace``, which replaces a link at that name rather than writing through it
  (`write_fresh`); an appended file is opened without following a link (`open_append`). A folder
  codeward writes many files into (a batch page's job pages) is opened without following a link at
  its name, and its files are written relative to it (`open_folder`), so a link planted there, or
  swapped in while the files are written, never sends them elsewhere.
- Modes: what codeward writes may hold a secret value (a tool's output, a variable, a final
  answer), so it is created readable by its owner only (0600). A user who shares a runs folder
  with a group sets ``CODEWARD_SHARED_FILES=1`` to create them 0644 (`file_mode`).
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import secrets
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from codeward.usage import UsageError

__all__ = [
    "MOST_HANDED_BYTES",
    "MOST_HANDED_BYTES_VARIABLE",
    "MOST_NAME_CHARACTERS",
    "SHARED_FILES_VARIABLE",
    "HandedFileError",
    "file_mode",
    "file_name",
    "handed_lines",
    "inside",
    "most_handed_bytes",
    "open_append",
    "open_folder",
    "open_handed",
    "read_handed",
    "too_large",
    "write_fresh",
]

#: The environment variable that makes the files codeward writes readable by others (0644), when "1".
SHARED_FILES_VARIABLE = "CODEWARD_SHARED_FILES"
#: The most bytes one read of a handed file holds (a whole saved run, or one line of a batch's files).
MOST_HANDED_BYTES = 256 * 2**20
#: The environment variable that sets another `MOST_HANDED_BYTES`, for a larger file the user trusts.
MOST_HANDED_BYTES_VARIABLE = "CODEWARD_MOST_FILE_BYTES"
#: The longest file name (before its suffix) an id becomes; file systems allow 255 bytes.
MOST_NAME_CHARACTERS = 120
#: The flag that keeps a read or an append from following a link at the file's name.
_NO_FOLLOW = os.O_NOFOLLOW
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class HandedFileError(UsageError):
    """A file codeward will not read or write as it stands; the message names it and says what to do."""


def file_mode() -> int:
    """The mode files are created with: the owner's only, unless the user asked for shared files."""
    return 0o644 if os.environ.get(SHARED_FILES_VARIABLE) == "1" else 0o600


def file_name(name: str, suffix: str) -> str:
    """`name` as a file name with `suffix`: safe characters, no leading dot, bounded length; a name
    that had to change gains 8 hex digits of its hash, so distinct names stay distinct files."""
    safe = _UNSAFE.sub("_", name)
    if safe.startswith("."):
        safe = "_" + safe[1:]
    safe = safe[:MOST_NAME_CHARACTERS]
    if safe != name:
        safe += "-" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return safe + suffix


def inside(folder: Path, name: str | Path) -> Path | None:
    """`name` (relative to `folder`, or absolute) with its links resolved, if it lies inside `folder`; else None."""
    candidate = (folder / Path(name).expanduser()).resolve()
    return candidate if candidate.is_relative_to(folder.resolve()) else None


def _refused(path: Path, error: OSError) -> HandedFileError | OSError:
    """The error for a file refused by `_NO_FOLLOW`; any other error as it was."""
    if error.errno == errno.ENXIO:  # a FIFO no one reads, opened without blocking
        return HandedFileError(f"{path} is not a regular file; codeward writes only to plain files there")
    if error.errno == errno.ELOOP:
        return HandedFileError(
            f"{path} is a symbolic link; codeward does not follow links in a folder it reads or writes, "
            "since one may lead out of it: put the file itself there, or remove the link"
        )
    return error


def open_handed(path: str | Path, *, update: bool = False, through_link: bool = False) -> BinaryIO:
    """The file at `path` opened for reading (or, with `update`, reading and writing), never through a
    link at its name (unless `through_link`: a path the user named), and only if it is a regular file;
    `HandedFileError` says what was refused."""
    path = Path(path)
    flags = (os.O_RDWR if update else os.O_RDONLY) | os.O_NONBLOCK | os.O_CLOEXEC | (0 if through_link else _NO_FOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as error:
        raise _refused(path, error) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise HandedFileError(f"{path} is not a regular file; codeward reads only plain files there")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "r+b" if update else "rb")
    except BaseException:
        os.close(fd)
        raise


def most_handed_bytes() -> int:
    """The most bytes one read of a handed file holds: `MOST_HANDED_BYTES`, or the user's own figure."""
    setting = os.environ.get(MOST_HANDED_BYTES_VARIABLE)
    if setting is None:
        return MOST_HANDED_BYTES
    try:
        most = int(setting.replace("_", ""))
    except ValueError:
        most = 0
    if most < 1:
        raise HandedFileError(
            f"{MOST_HANDED_BYTES_VARIABLE}={setting!r} is not a number of bytes; set it to a whole number "
            f"such as {2 * MOST_HANDED_BYTES}, or unset it for {MOST_HANDED_BYTES:,}"
        )
    return most


def too_large(path: Path, what: str, most: int) -> HandedFileError:
    """The refusal of `what` (a file, a line of it) for holding more than `most` bytes, and its remedy."""
    return HandedFileError(
        f"{path}: {what} is over the {most:,} bytes codeward reads of a file it was handed; if you trust "
        f"the file, set {MOST_HANDED_BYTES_VARIABLE} to a larger number of bytes"
    )


def read_handed(path: str | Path, *, through_link: bool = False) -> bytes:
    """The whole of the file at `path`, opened as `open_handed` opens it, if it holds at most
    `most_handed_bytes`; a larger one is refused by its size, before a byte of it is read."""
    path = Path(path)
    most = most_handed_bytes()
    with open_handed(path, through_link=through_link) as stream:
        size = os.fstat(stream.fileno()).st_size
        if size > most:
            raise too_large(path, f"the file holds {size:,} bytes, which", most)
        data = stream.read(size + 1)  # the size it has: a read of more would take that much memory first
    if len(data) > size:
        raise HandedFileError(f"{path} grew as it was read; read it again once nothing writes to it")
    return data


def handed_lines(path: str | Path) -> Iterator[tuple[int, bytes | None]]:
    """Each line of the file at `path` (opened as `open_handed` opens it) with its number from 1, its
    newline kept; None for a line of more than `most_handed_bytes`, which is passed over a piece at
    a time, never held whole."""
    most = most_handed_bytes()
    with open_handed(path) as stream:
        number = 0
        while line := stream.readline(most + 1):
            number += 1
            if len(line) <= most or line.endswith(b"\n"):
                yield number, line
                continue
            while line and not line.endswith(b"\n"):
                line = stream.readline(_SKIPPED_PIECE)
            yield number, None


#: How much of a line over the budget `handed_lines` reads at once as it passes over it.
_SKIPPED_PIECE = 1 << 20


def open_append(path: str | Path, *, read_only: bool = False) -> int:
    """A descriptor for appending to `path` (or, with `read_only`, for holding a lock on it), created with
    `file_mode` if missing, never through a link at its name, and only to a regular file (a FIFO would
    block the writer for ever). A file found readable by more than `file_mode` allows (one handed
    over, or written by an older codeward) is narrowed to it before anything is appended."""
    path = Path(path)
    access = os.O_RDONLY if read_only else os.O_WRONLY | os.O_APPEND
    try:
        fd = os.open(path, access | os.O_CREAT | _NO_FOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, file_mode())
    except OSError as error:
        raise _refused(path, error) from None
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise HandedFileError(f"{path} is not a regular file; codeward appends only to plain files there")
        os.set_blocking(fd, True)
        if stat.S_IMODE(found.st_mode) & ~file_mode() and found.st_uid == os.geteuid():
            os.fchmod(fd, stat.S_IMODE(found.st_mode) & file_mode())
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_folder(path: str | Path) -> int:
    """A descriptor of the folder at `path` to write files in (`write_fresh`'s `folder`): created, its
    owner's only unless files are shared, if missing; never through a link at its name, and only a folder."""
    path = Path(path)
    try:
        path.mkdir(mode=0o755 if file_mode() == 0o644 else 0o700)
    except FileExistsError:
        pass
    except OSError as error:
        raise HandedFileError(f"cannot make the folder {path}: {error.strerror}; pick another place with -o") from None
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | _NO_FOLLOW | os.O_CLOEXEC)
    except OSError as error:
        if error.errno == errno.ENOTDIR and path.is_symlink():  # what O_DIRECTORY says of a link, before ELOOP
            raise _refused(path, OSError(errno.ELOOP, "a link")) from None
        if error.errno == errno.ENOTDIR:
            raise HandedFileError(f"{path} is not a folder; move it away, or pick another place with -o") from None
        raise _refused(path, error) from None


def write_fresh(path: str | Path, data: bytes | Iterable[bytes], *, folder: int | None = None) -> Path:
    """Write `data` (bytes, or chunks of them) to `path` whole or not at all, with `file_mode`: into a
    temporary file created fresh beside it, then renamed over the name, so a link there is replaced,
    never written through. With `folder` (from `open_folder`), `path` is a name in that folder."""
    path = Path(path)
    temporary = path.with_name(f".{path.name[:MOST_NAME_CHARACTERS]}.{secrets.token_hex(6)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temporary, flags, file_mode(), dir_fd=folder)
    try:
        with os.fdopen(fd, "wb") as stream:
            if isinstance(data, bytes):
                stream.write(data)
            else:
                stream.writelines(data)
        os.replace(temporary, path, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        try:
            os.unlink(temporary, dir_fd=folder)
        except FileNotFoundError:
            pass
        raise
    return path
