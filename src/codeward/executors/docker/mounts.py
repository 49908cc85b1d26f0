"""Host folders and files bind-mounted into a docker sandbox, checked before any container starts.

`DockerExecutor(mounts={"/data": "/host/path"})` shows the sandbox a host path, read-only
unless its mount says ``mode="rw"``. A mount is written as a path (read-only), a `Mount`, or
the JSON-friendly ``{"source": ..., "mode": "rw"}`` a batch jobs file holds.

What a mount may not give away, checked on the source once it is resolved (links followed,
`os.path.realpath`), so a link on the host that points at a forbidden place is refused too:
- the root, and anything under ``/proc``, ``/sys``, ``/dev`` or ``/boot``;
- anything but a folder or a regular file (a socket, a FIFO, a device);
- the Docker engine's socket, or a folder that holds it (``/run`` and ``/var/run`` do): with it,
  the sandbox could start containers of its own, as root on the host;
- codeward's own folders for sandboxes: the ipc and egress folders in the temporary root (their
  sockets and keys belong to other sandboxes), a folder that holds them, and the egress proxy's home.

A target must be an absolute path without ``..``, and neither the sandbox's own system folders
(``/proc``, ``/usr``, ``/etc``, ...) nor codeward's folders inside it, nor a folder that holds one.
A folder inside the sandbox's home (``/home/sandbox/data``) or under ``/tmp`` is fine.

A read-write mount is written by the sandbox's user, whose uid (`sandbox.sandbox_ids`) is not the
host user's when the host runs as root: a source that uid cannot write is refused with the uid to
give access to, rather than left to fail inside the sandbox (codeward never changes its mode).

No Docker SDK here: settings are checked, and a batch's jobs file too, on any install.
"""

from __future__ import annotations

import os
import posixpath
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias

__all__ = [
    "MODES",
    "Mount",
    "MountSpec",
    "checked_mounts",
    "mount_modes",
    "mounts_in_folder",
    "parse_mount_option",
    "plain_mounts",
]

#: A read-only mount, and one the sandbox may write.
MODES = ("ro", "rw")
#: Host folders no mount may show, nor anything under them.
_FORBIDDEN_SOURCES = ("/proc", "/sys", "/dev", "/boot")
#: Where the Docker engine listens, besides DOCKER_HOST's unix path.
ENGINE_SOCKETS = ("/var/run/docker.sock", "/run/docker.sock")
#: The prefixes of codeward's folders for sandboxes in the temporary root (`sandbox`, `egress.proxy`).
_CODEWARD_TEMP_PREFIXES = ("codeward-ipc-", "codeward-egress-")
#: Folders of the sandbox no mount may cover, nor go under: its system and codeward's own.
_RESERVED_TARGETS = (
    "/proc",
    "/sys",
    "/dev",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/boot",
    "/opt/sandbox",
    "/opt/codeward-packages",
    "/run/codeward",
    "/run/codeward-egress",
)
#: The sandbox's own writable folders: a mount may go inside them, never replace one.
_OWN_TARGETS = ("/tmp", "/home/sandbox")


@dataclass(frozen=True)
class Mount:
    """A host path (`source`) shown to the sandbox, read-only (``"ro"``, the default) or writable (``"rw"``)."""

    source: str
    mode: Literal["ro", "rw"] = "ro"

    def to_dict(self) -> dict[str, str]:
        return {"source": self.source, "mode": self.mode}


#: How a mount may be given: a host path (read-only), a `Mount`, or ``{"source": ..., "mode": ...}``.
MountSpec: TypeAlias = "str | os.PathLike[str] | Mount | Mapping[str, Any]"


def checked_mounts(
    mounts: Mapping[str, MountSpec] | None, sandbox_uid: tuple[int, int] | None = None
) -> dict[str, Mount]:
    """The mounts by target, each source resolved and checked; a `ValueError` saying what is wrong and what to do.

    `sandbox_uid`: the (uid, gid) the sandbox runs as, to check that a read-write source is writable by it.
    """
    if mounts is None:
        return {}
    if not isinstance(mounts, Mapping):
        raise ValueError(
            f"mounts must map sandbox paths to host paths, such as {{'/data': '/srv/data'}}, got {mounts!r:.80}"
        )
    checked: dict[str, Mount] = {}
    for raw_target, spec in mounts.items():
        target = _checked_target(raw_target)
        if target in checked:
            raise ValueError(f"mounts: two mounts at {target!r}; give each sandbox path once")
        source, mode = _source_and_mode(target, spec)
        checked[target] = Mount(_checked_source(target, source, mode, sandbox_uid), mode)
    return checked


def _source_and_mode(target: str, spec: Any) -> tuple[str, Literal["ro", "rw"]]:
    source: Any
    mode: Any
    if isinstance(spec, Mount):
        source, mode = spec.source, spec.mode
    elif isinstance(spec, Mapping):
        unknown = sorted(set(map(str, spec)) - {"source", "mode"})
        if unknown:
            raise ValueError(f"mounts[{target!r}]: unknown key(s) {', '.join(unknown)}; a mount has source and mode")
        source, mode = spec.get("source"), spec.get("mode", "ro")
    else:
        source, mode = spec, "ro"
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if not isinstance(source, str) or not source:
        raise ValueError(f"mounts[{target!r}]: the source must be a host path, got {source!r:.80}")
    if mode not in MODES:
        raise ValueError(f"mounts[{target!r}]: mode must be 'ro' (read-only, the default) or 'rw', got {mode!r:.40}")
    return source, "rw" if mode == "rw" else "ro"


def _checked_target(target: Any) -> str:
    if not isinstance(target, str) or not target.startswith("/"):
        raise ValueError(f"mounts: the sandbox path {target!r:.80} must be absolute, such as '/data'")
    if ".." in target.split("/"):
        raise ValueError(f"mounts: the sandbox path {target!r:.80} may not hold '..'; write the folder it means")
    normal = posixpath.normpath(target)
    normal = "/" + normal.lstrip("/")  # POSIX keeps a leading '//'
    for reserved in _RESERVED_TARGETS:
        if _within(normal, reserved):
            raise ValueError(
                f"mounts: {target!r} would cover the sandbox's own {reserved}; mount at a folder of your own, "
                "such as /data or /home/sandbox/data"
            )
        if _within(reserved, normal):
            what = "every folder of the sandbox" if normal == "/" else f"the sandbox's own {reserved}"
            raise ValueError(f"mounts: {target!r} would hide {what}; mount at a folder of your own, such as /data")
    if normal in _OWN_TARGETS:
        raise ValueError(
            f"mounts: {target!r} would replace the sandbox's own writable folder; mount inside it, "
            f"such as {normal}/data"
        )
    return normal


def _checked_source(target: str, source: str, mode: str, sandbox_uid: tuple[int, int] | None) -> str:
    where = f"mounts[{target!r}]"
    resolved = os.path.realpath(os.path.expanduser(source))
    try:
        info = os.stat(resolved)
    except OSError as error:
        raise ValueError(
            f"{where}: the host path {source!r} cannot be read ({error.strerror}); give one that exists"
        ) from None
    said = source if resolved == source else f"{source!r} (which is {resolved!r})"
    if resolved == "/":
        raise ValueError(f"{where}: {said} is the host's root; mount the one folder the code needs")
    for forbidden in _FORBIDDEN_SOURCES:
        if _within(resolved, forbidden):
            raise ValueError(f"{where}: {said} is under the host's {forbidden}, which no sandbox may see")
    if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
        raise ValueError(
            f"{where}: {said} is neither a folder nor a regular file (a socket, a FIFO, a device?); mount a folder or a file"
        )
    for socket_path in engine_sockets():
        if _within(socket_path, resolved):
            raise ValueError(
                f"{where}: {said} holds the Docker engine's socket {socket_path}, with which the sandbox could "
                "start containers as root on the host; mount a folder that does not hold it"
            )
    temp = os.path.realpath(tempfile.gettempdir())
    if _within(temp, resolved):
        raise ValueError(
            f"{where}: {said} holds the temporary root {temp}, where codeward keeps other sandboxes' sockets "
            "and keys; mount a folder of your own inside it, or elsewhere"
        )
    if _within(resolved, temp) and resolved != temp:
        first = Path(resolved).relative_to(temp).parts[0]
        if first.startswith(_CODEWARD_TEMP_PREFIXES):
            raise ValueError(
                f"{where}: {said} is inside codeward's folder {temp}/{first}, which belongs to a sandbox; "
                "mount a folder of your own"
            )
    home = _proxy_home()
    if _within(resolved, home) or _within(home, resolved):
        raise ValueError(f"{where}: {said} is or holds the egress proxy's home {home}; mount a folder of your own")
    if mode == "rw" and sandbox_uid is not None and not _writable_by(resolved, info, *sandbox_uid):
        uid, _ = sandbox_uid
        raise ValueError(
            f"{where}: the sandbox runs as uid {uid}, which cannot write {said}; give that uid write access "
            f"(chown {uid} or setfacl -m u:{uid}:rwx), or mount it read-only"
        )
    return resolved


def engine_sockets() -> list[str]:
    """Where the Docker engine's socket is (links followed): the usual places and DOCKER_HOST's unix path."""
    paths = list(ENGINE_SOCKETS)
    host = os.environ.get("DOCKER_HOST", "")
    if host.startswith("unix://"):
        paths.append(host[len("unix://") :])
    return sorted({os.path.realpath(path) for path in paths if path})


def _proxy_home() -> str:
    """Where `codeward egress install` puts the egress proxy (links followed)."""
    from codeward.egress.proxy import default_proxy_home

    return os.path.realpath(default_proxy_home())


def _within(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or inside it (both normal absolute paths)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _writable_by(path: str, info: os.stat_result, uid: int, gid: int) -> bool:
    """Whether `uid:gid` may write `path` by its mode bits; True where an ACL may say more (not read here)."""
    try:
        if os.listxattr(path) and any(name.startswith("system.posix_acl") for name in os.listxattr(path)):
            return True
    except OSError:
        pass
    if uid == 0:
        return True
    if info.st_uid == uid:
        return bool(info.st_mode & stat.S_IWUSR)
    if info.st_gid == gid:
        return bool(info.st_mode & stat.S_IWGRP)
    return bool(info.st_mode & stat.S_IWOTH)


def mount_modes(mounts: Mapping[str, Mount]) -> dict[str, str]:
    """Each target's mode: what a saved run and a trace record (never the host path, which may say too much)."""
    return {target: mount.mode for target, mount in sorted(mounts.items())}


def plain_mounts(mounts: Mapping[str, Mount]) -> dict[str, dict[str, str]]:
    """The mounts as JSON values (a batch job's executor settings travel as JSON)."""
    return {target: mount.to_dict() for target, mount in mounts.items()}


def parse_mount_option(option: str, base: Path | None = None) -> tuple[str, Mount]:
    """``TARGET=SOURCE`` or ``TARGET=SOURCE:rw`` (``:ro`` also said), as `--mount` takes it; a relative
    SOURCE is relative to `base` (the working folder by default). Raises `ValueError` for a malformed option."""
    target, equals, source = option.partition("=")
    if not equals or not target or not source:
        raise ValueError(f"--mount {option!r}: write TARGET=SOURCE or TARGET=SOURCE:rw, such as /data=./data")
    mode: Literal["ro", "rw"] = "ro"
    path, colon, suffix = source.rpartition(":")
    if colon and suffix in MODES and path:
        source, mode = path, "rw" if suffix == "rw" else "ro"
    full = Path(source).expanduser()
    if not full.is_absolute():
        full = (base or Path.cwd()) / full
    return target, Mount(str(full), mode)


def mounts_in_folder(
    mounts: Any, folder: Path, given: Mapping[str, MountSpec] | None = None
) -> dict[str, dict[str, str]]:
    """A jobs file's mounts, a relative source taken from the file's `folder`, added to the command line's
    (`given`) and checked, as JSON values; a `ValueError` for any that is malformed or refused."""
    if not isinstance(mounts, Mapping):
        raise ValueError(f"mounts must map sandbox paths to host paths, got {mounts!r:.80}")
    own: dict[str, MountSpec] = {}
    for target, spec in mounts.items():
        mount = dict(spec) if isinstance(spec, Mapping) else {"source": spec}
        source = mount.get("source")
        if isinstance(source, str) and source and not Path(source).expanduser().is_absolute():
            mount["source"] = str(folder / source)
        own[target] = mount
    from codeward.executors.docker.hardening import sandbox_ids

    return plain_mounts(checked_mounts({**(given or {}), **own}, sandbox_ids()))
