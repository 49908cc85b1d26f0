"""What a docker sandbox is allowed: its limits and the container settings a caller may add.

Kept apart from the code that starts containers so that settings can be checked
(and a `SandboxPool` described) without the Docker SDK installed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, fields
from typing import Any

from codeward.executors.docker.gvisor import GVISOR

__all__ = [
    "CONTAINER_HOME",
    "EXTRA_RUN_KWARGS",
    "PACKAGES_DIR",
    "Hardening",
    "checked_extra_run_kwargs",
    "container_log_config",
    "sandbox_ids",
]

#: The home the image's user has.
CONTAINER_HOME = "/home/sandbox"
#: Where `install_packages` puts packages: mounted only in sandboxes with a network, and
#: the one writable folder that allows running code (compiled extensions are mapped executable).
PACKAGES_DIR = "/opt/codeward-packages"
#: How large Docker's log of a sandbox's own output may grow on the host before Docker empties it.
LOG_MAX_SIZE = "256k"
# The first uid tried for root's sandboxes: inside Debian's range for
# project-allocated ids, below systemd's dynamic users, normally free.
_UNUSED_UID_START = 61000
_SIZE = re.compile(r"^[1-9][0-9]*[bkmgBKMG]?$")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def size_in_bytes(size: str) -> int | None:
    """A size as Docker's limits are written (``2g``, ``512m``, ``1.5GiB``, a number of bytes) in
    bytes; None for text that is no such size."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", str(size), re.IGNORECASE)
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()]) if match else None


def _checked_bytes(size: str) -> int:
    """A size `Hardening` has checked already (`_SIZE`), in bytes."""
    found = size_in_bytes(size)
    assert found is not None, size
    return found


#: The keys `extra_run_kwargs` may carry: none of them weakens the sandbox.
EXTRA_RUN_KWARGS = frozenset(
    {"environment", "hostname", "domainname", "shm_size", "cpuset_cpus", "cpu_shares", "mem_reservation", "log_config"}
)
# Settings that the named arguments own, and the argument for each.
_NAMED_INSTEAD = {
    "network_mode": "network",
    "network": "network",
    "network_disabled": "network",
    "mem_limit": "mem_limit",
    "memswap_limit": "mem_limit",
    "nano_cpus": "cpus",
    "cpu_quota": "cpus",
    "cpu_period": "cpus",
    "pids_limit": "pids_limit",
    "tmpfs": "tmpfs_size",
    "runtime": "runtime",
    "mounts": "mounts",
    "volumes": "mounts",
    "volumes_from": "mounts",
}


@dataclass(frozen=True)
class Hardening:
    """The limits a sandbox runs under; every default is the strict one."""

    network: str = "none"
    mem_limit: str = "1g"
    cpus: float = 1.0
    pids_limit: int = 256
    tmpfs_size: str = "256m"
    runtime: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.network, str) or not self.network:
            raise ValueError(f"network must name a Docker network ('none', 'bridge', ...), got {self.network!r}")
        for name in ("mem_limit", "tmpfs_size"):
            if not _SIZE.match(str(getattr(self, name))):
                raise ValueError(f"{name} must be a size such as '1g' or '512m', got {getattr(self, name)!r}")
        if isinstance(self.cpus, bool) or not isinstance(self.cpus, (int, float)) or not self.cpus > 0:
            raise ValueError(f"cpus must be a positive number of CPUs such as 1.0 or 0.5, got {self.cpus!r}")
        if isinstance(self.pids_limit, bool) or not isinstance(self.pids_limit, int) or self.pids_limit < 16:
            raise ValueError(f"pids_limit must be a whole number of processes, at least 16, got {self.pids_limit!r}")
        if self.runtime is not None and (not isinstance(self.runtime, str) or not self.runtime):
            raise ValueError(f"runtime must name a Docker runtime such as 'runsc', or be None, got {self.runtime!r}")

    def changes(self) -> dict[str, Any]:
        """The settings that differ from the strict defaults (for the log: loosening is never silent)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != f.default}

    def loosened(self) -> dict[str, Any]:
        """The settings that confine less than the strict defaults: a network, more memory, CPUs,
        processes or scratch space, a runtime other than Docker's or gVisor. Lower limits and
        gVisor confine more, and are not worth a warning."""
        strict = Hardening()
        looser = {
            "network": self.network != strict.network,
            "mem_limit": _checked_bytes(self.mem_limit) > _checked_bytes(strict.mem_limit),
            "cpus": self.cpus > strict.cpus,
            "pids_limit": self.pids_limit > strict.pids_limit,
            "tmpfs_size": _checked_bytes(self.tmpfs_size) > _checked_bytes(strict.tmpfs_size),
            "runtime": self.runtime not in (strict.runtime, GVISOR),
        }
        return {name: getattr(self, name) for name, loose in looser.items() if loose}

    def run_options(self, uid: int, gid: int, packages: bool = False) -> dict[str, Any]:
        """The Docker SDK arguments that enforce these limits for a kernel run as `uid:gid`.

        `packages`: a folder for `install_packages` even without a network (an egress list can reach an index).
        """
        options: dict[str, Any] = {
            "network_mode": self.network,
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "read_only": True,
            "tmpfs": {
                "/tmp": f"rw,nosuid,nodev,noexec,size={self.tmpfs_size},mode=1777",
                CONTAINER_HOME: f"rw,nosuid,nodev,noexec,size={self.tmpfs_size},uid={uid},gid={gid},mode=0700",
            },
            "user": f"{uid}:{gid}",
            "mem_limit": self.mem_limit,
            "memswap_limit": self.mem_limit,
            "nano_cpus": int(self.cpus * 1e9),
            "pids_limit": self.pids_limit,
            "init": True,
        }
        if self.network != "none" or packages:
            options["tmpfs"][PACKAGES_DIR] = (
                f"rw,nosuid,nodev,exec,size={self.tmpfs_size},uid={uid},gid={gid},mode=0700"
            )
        if self.runtime:
            options["runtime"] = self.runtime
        return options


def checked_extra_run_kwargs(extra: dict[str, Any] | None) -> dict[str, Any]:
    """`extra` if it only adds harmless container settings; an error naming the right argument otherwise.

    Anything that could weaken the sandbox is refused here, so loosening always
    goes through a named argument, where it is validated and logged.
    """
    extra = dict(extra or {})
    for key in extra:
        if key in _NAMED_INSTEAD:
            raise ValueError(f"extra_run_kwargs cannot set {key!r}; use the named argument {_NAMED_INSTEAD[key]}=")
        if key not in EXTRA_RUN_KWARGS:
            allowed = ", ".join(sorted(EXTRA_RUN_KWARGS))
            raise ValueError(
                f"extra_run_kwargs cannot set {key!r}: it could weaken the sandbox or would break it; "
                f"allowed keys are {allowed}"
            )
    if not isinstance(extra.get("environment", {}), dict):
        raise TypeError("extra_run_kwargs['environment'] must be a dict of names to values")
    return extra


def container_log_config() -> dict[str, Any]:
    """Docker's log of what a sandbox's kernel writes to its stdout and stderr, capped on the host's disk.

    The code's output reaches the host through the kernel, so this log only keeps the
    tail that explains a kernel that failed to start. Docker's default log has no cap,
    so a sandbox writing to fd 2 in a loop would fill the host's disk. A user's
    `extra_run_kwargs["log_config"]` replaces this. A new dict each time: the SDK keeps it.
    """
    return {"type": "json-file", "config": {"max-size": LOG_MAX_SIZE, "max-file": "1"}}


def sandbox_ids() -> tuple[int, int]:
    """The uid and gid the kernel runs as: a host user that is not root runs it as itself; root
    under a uid no account on the host has, so no person can drive it (`sandbox`'s docstring says more)."""
    if os.getuid() != 0:
        return os.getuid(), os.getgid()
    uid = _UNUSED_UID_START
    while _account_exists(uid):
        uid += 1
    return uid, uid


def _account_exists(uid: int) -> bool:
    import pwd  # POSIX only, like the sandboxes whose uid this picks

    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True
