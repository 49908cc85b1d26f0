"""envd's file system, as the SDK's `sandbox.files` reaches it: upload, download, three Connect RPCs.

- ``POST /files?path=...``: the body written to the file (see `upload`);
- ``GET /files?path=...``: the file's bytes (``application/octet-stream``), 404 when missing;
- ``POST /filesystem.Filesystem/{ListDir,Stat,Remove}``: Connect's unary protocol with the JSON
  codec the SDK uses (the request and the answer are the messages of E2B's own
  ``filesystem_pb``); an error is Connect's ``{"code", "message"}`` with its HTTP status.

A relative path is taken from the sandbox's home, an absolute one as it stands. E2B's envd
follows links inside its microVM, whose files are all the sandbox's; this server's "microVM" is
the test machine, so it walks paths with codeward's `beneath` and follows no link, which keeps
what the host can see here to what a real sandbox could show.
"""

from __future__ import annotations

import json
import os
import stat
from http import HTTPStatus
from typing import Any

from e2b.envd.filesystem import filesystem_pb

from codeward.executors.files import beneath

#: The most a download or a listing may be here: the tests' files are small.
_LIMIT = 1 << 30

#: Connect's code, and the HTTP status it travels with, for what the file system raised.
_NOT_FOUND = ("not_found", HTTPStatus.NOT_FOUND)
_INVALID = ("invalid_argument", HTTPStatus.BAD_REQUEST)


def upload(home: str, path: str, data: bytes) -> None:
    """Write `data` to `path`, made fresh and renamed over the name: a link there is replaced, and
    one on the way refused, so the code in this "sandbox" cannot aim the server at a host file."""
    beneath.write(home, path, data)


def download(home: str, path: str) -> tuple[HTTPStatus, bytes, str]:
    """The answer to ``GET /files``: the bytes, or envd's JSON error."""
    try:
        return HTTPStatus.OK, beneath.read(home, path, _LIMIT), "application/octet-stream"
    except (OSError, ValueError) as error:
        status = HTTPStatus.NOT_FOUND if isinstance(error, FileNotFoundError) else HTTPStatus.BAD_REQUEST
        return status, _json_error(int(status), f"cannot read {path!r}: {error}"), "application/json"


def rpc(home: str, method: str, body: bytes) -> tuple[HTTPStatus, bytes]:
    """The answer to one of envd's file system RPCs, as Connect's JSON: the response, or an error."""
    handlers = {"ListDir": _list_dir, "Stat": _stat, "Remove": _remove}
    if method not in handlers:
        return HTTPStatus.NOT_FOUND, _connect_error("unimplemented", f"this server has no {method}")
    try:
        return HTTPStatus.OK, handlers[method](home, body).to_json().encode()
    except (OSError, ValueError) as error:
        code, status = _NOT_FOUND if isinstance(error, (FileNotFoundError, NotADirectoryError)) else _INVALID
        return status, _connect_error(code, str(error))


def _list_dir(home: str, body: bytes) -> Any:
    path = filesystem_pb.ListDirRequest.from_json(body, ignore_unknown_fields=True).path
    names = beneath.listing(home, path, _LIMIT)
    return filesystem_pb.ListDirResponse(entries=[_entry(home, f"{path}/{name.rstrip('/')}") for name in names])


def _stat(home: str, body: bytes) -> Any:
    path = filesystem_pb.StatRequest.from_json(body, ignore_unknown_fields=True).path
    if not beneath.exists(home, path):
        raise FileNotFoundError(f"no such file or folder: {path!r}")
    return filesystem_pb.StatResponse(entry=_entry(home, path))


def _remove(home: str, body: bytes) -> Any:
    path = filesystem_pb.RemoveRequest.from_json(body, ignore_unknown_fields=True).path
    beneath.remove(home, path)
    return filesystem_pb.RemoveResponse()


def _entry(home: str, path: str) -> Any:
    """envd's description of what is at `path` (a link as a link, never what it points to)."""
    absolute, names = beneath.split(path)
    found = os.stat(os.path.join("/" if absolute else home, *names), follow_symlinks=False)
    kinds = {stat.S_IFDIR: filesystem_pb.FileType.DIRECTORY, stat.S_IFLNK: filesystem_pb.FileType.SYMLINK}
    return filesystem_pb.EntryInfo(
        name=names[-1] if names else "",
        type=kinds.get(stat.S_IFMT(found.st_mode), filesystem_pb.FileType.FILE),
        path=path,
        size=found.st_size,
    )


def _json_error(status: int, message: str) -> bytes:
    return json.dumps({"code": status, "message": message}).encode()


def _connect_error(code: str, message: str) -> bytes:
    return json.dumps({"code": code, "message": message}).encode()
