"""gVisor (`runtime="runsc"`): whether the engine has it, with the flags codeward's kernel needs.

The sandbox's kernel binds its ipc sockets in a folder bind-mounted from the host, and
gVisor refuses to make host Unix sockets unless its `--host-uds` flag allows creating them
(`create` or `all`); a sandbox with an egress list also connects to its proxy's host socket,
which needs `open` or `all`. `all` serves both, and is what codeward registers. This runsc also refuses Docker's `--network none`
unless it is told `--network=none` itself. A runtime registered without them starts
containers whose kernel never answers, so it is refused before any container starts, with
the daemon.json entry that fixes it.

No Docker SDK here: `codeward doctor` asks the same question of any install.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any, NamedTuple

from codeward.executors.base import ExecutorError
from codeward.usage import UsageError

__all__ = [
    "GVISOR",
    "GVISOR_LEAST_PIDS",
    "RUNSC_ARGS",
    "RuntimeProblem",
    "RuntimeUnusable",
    "checked_runtime",
    "mounts_problem",
    "registration_line",
    "runtime_problem",
]

#: The name codeward's docs and CI register gVisor under.
GVISOR = "runsc"
#: The least runsc flags under which codeward's kernel starts (see the module's docstring).
RUNSC_ARGS = ("--network=none", "--host-uds=all")
_HOST_UDS_ENOUGH = frozenset({"create", "all"})
#: The least pids limit a gVisor sandbox starts under. The limit counts gVisor's own host threads
#: (about 70 at rest on a two-core machine), not the sandbox's processes; below this the kernel dies at start.
GVISOR_LEAST_PIDS = 128


class RuntimeProblem(NamedTuple):
    """What is wrong with a runtime, and the step that fixes it (apart, for `codeward doctor`'s columns)."""

    detail: str
    fix: str

    def __str__(self) -> str:
        return f"{self.detail}; {self.fix}"


class RuntimeUnusable(ExecutorError, UsageError):
    """The container runtime asked for is missing from the engine, or cannot run codeward's kernel."""


def registration_line(name: str = GVISOR, path: str = "/usr/bin/runsc") -> str:
    """What to do so that the engine runs gVisor as `name`: a step a person can paste."""
    entry = {"runtimes": {name: {"path": path, "runtimeArgs": list(RUNSC_ARGS)}}}
    return (
        f"install runsc (Debian: apt-get install -y runsc), merge {json.dumps(entry)} into "
        "/etc/docker/daemon.json, then reload the engine (kill -HUP $(pidof dockerd))"
    )


def runtime_problem(
    runtimes: Mapping[str, Any], name: str, network: str = "none", egress: bool = False
) -> RuntimeProblem | None:
    """Why containers of runtime `name` cannot run codeward's kernel on an engine with `runtimes`; None when they can.

    `runtimes` is what `docker info` reports. Only gVisor's flags are known here: any
    other registered runtime is taken as it is.
    """
    entry = runtimes.get(name)
    if entry is None:
        known = ", ".join(sorted(runtimes)) or "none"
        fix = registration_line(name) if name == GVISOR else f"register {name!r} in /etc/docker/daemon.json"
        return RuntimeProblem(f"the Docker engine has no runtime {name!r} (it has: {known})", fix)
    if not _is_gvisor(name, entry):
        return None
    flags = _flags(entry.get("runtimeArgs") or [])
    missing = []
    if not _may_create_host_sockets(flags):
        missing.append(f"--host-uds=create (it has --host-uds={flags.get('host-uds', 'none')})")
    if egress and not _may_open_host_sockets(flags):
        missing.append(
            f"--host-uds=all for an egress list, whose proxy the sandbox reaches through a host socket "
            f"(it has --host-uds={flags.get('host-uds', 'none')})"
        )
    if network == "none" and flags.get("network") != "none":
        missing.append("--network=none (this runsc refuses Docker's own `--network none` without it)")
    if network != "none" and flags.get("network") == "none":
        return RuntimeProblem(
            f"the engine's runtime {name!r} (gVisor) has --network=none, so a sandbox on network {network!r} "
            "would get no network at all",
            f"register gVisor a second time without --network=none (as {name}-net, say) and pass that runtime",
        )
    if not missing:
        return None
    return RuntimeProblem(
        f"the engine's runtime {name!r} (gVisor) lacks {' and '.join(missing)}, so codeward's kernel cannot start in it",
        registration_line(name, str(entry.get("path") or "/usr/bin/runsc")),
    )


def checked_runtime(
    runtimes: Mapping[str, Any], name: str, network: str, pids_limit: int, egress: bool = False
) -> None:
    """Raise `RuntimeUnusable` at once, rather than let a sandbox wait for a kernel that cannot start."""
    problem = runtime_problem(runtimes, name, network, egress)
    if problem:
        raise RuntimeUnusable(str(problem))
    if _is_gvisor(name, runtimes[name]) and pids_limit < GVISOR_LEAST_PIDS:
        raise RuntimeUnusable(
            f"pids_limit={pids_limit} is too low for gVisor: the limit counts gVisor's own threads on the host "
            f"(about 70 at rest), so its kernel cannot start; give pids_limit={GVISOR_LEAST_PIDS} or more"
        )


def mounts_problem(runtimes: Mapping[str, Any], name: str, modes: Mapping[str, str]) -> RuntimeProblem | None:
    """Why host mounts (target to "ro"/"rw") would not behave as mounts under runtime `name`; None when they would.

    gVisor shares bind mounts with the host by default (``--file-access-mounts=shared``). A runsc
    registered with an overlay over all mounts (``--overlay2=all:...``, or the older ``--overlay``)
    keeps the sandbox's writes in that overlay, so a writable mount would never reach the host; one
    with ``--file-access-mounts=exclusive`` would not see the host's changes while it runs.
    """
    entry = runtimes.get(name)
    if not modes or entry is None or not _is_gvisor(name, entry):
        return None
    flags = _flags(entry.get("runtimeArgs") or [])
    overlaid = flags.get("overlay") == "true" or flags.get("overlay2", "").startswith("all")
    if overlaid and "rw" in modes.values():
        return RuntimeProblem(
            f"the engine's runtime {name!r} (gVisor) puts an overlay over every mount, so what the sandbox writes "
            "to a mode='rw' mount would never reach the host",
            f"register gVisor a second time without --overlay/--overlay2=all (as {name}-mounts, say) and pass that "
            "runtime, or mount read-only",
        )
    if flags.get("file-access-mounts") == "exclusive":
        return RuntimeProblem(
            f"the engine's runtime {name!r} (gVisor) has --file-access-mounts=exclusive, so the sandbox would not "
            "see the host's changes to its mounts",
            "register gVisor without that flag (shared is its default)",
        )
    return None


def _is_gvisor(name: str, entry: Mapping[str, Any]) -> bool:
    return name == GVISOR or PurePath(str(entry.get("path") or "")).name == GVISOR


def _flags(args: Sequence[str]) -> dict[str, str]:
    """runsc's flags as name to value: `--name=value`, `-name=value` and `--name value` alike."""
    flags: dict[str, str] = {}
    pending: str | None = None
    for arg in map(str, args):
        if pending is not None and not arg.startswith("-"):
            flags[pending] = arg
            pending = None
            continue
        name, equals, value = arg.lstrip("-").partition("=")
        flags[name] = value if equals else "true"
        pending = None if equals else name
    return flags


def _may_create_host_sockets(flags: Mapping[str, str]) -> bool:
    if flags.get("host-uds") in _HOST_UDS_ENOUGH:
        return True
    return flags.get("fsgofer-host-uds") == "true"  # the older flag's name, meaning --host-uds=all


def _may_open_host_sockets(flags: Mapping[str, str]) -> bool:
    return flags.get("host-uds") in {"open", "all"} or flags.get("fsgofer-host-uds") == "true"
