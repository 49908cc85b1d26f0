"""What a container's limits refused during a block, read by the host from the container's cgroup.

The kernel counts, for each container, the processes it killed for lack of memory (``oom_kill``
in cgroup v1's ``memory.oom_control``, v2's ``memory.events``) and the forks it refused at the
pids limit (``max`` in ``pids.events``). The host reads them before and after a block: what grew
became the block's events (wall "memory", "pids"). The code inside cannot touch these counts, so
they are the host's own knowledge, not the sandbox's word. Under gVisor the sandbox's limits sit on
the same host cgroup. A container that died is gone with its cgroup: Docker's own record of an
out-of-memory kill stands in.
"""

from __future__ import annotations

from dataclasses import dataclass

from codeward.executors.base import BlockEvent
from codeward.executors.metering import cgroup_field, cgroup_folders

__all__ = ["CgroupCounts", "cgroup_counts", "counted_events"]


@dataclass(frozen=True)
class CgroupCounts:
    """A container's counts of refusals so far; None where the cgroup does not say."""

    oom_kills: int | None
    pids_refused: int | None


def cgroup_counts(container_id: str) -> CgroupCounts | None:
    """The container's counts, read from its cgroup on this machine; None when it has none here
    (a remote engine, a container gone)."""
    if not container_id or not all(c in "0123456789abcdef" for c in container_id):
        return None
    oom = pids = None
    for folder in cgroup_folders(container_id):
        if oom is None:
            oom = cgroup_field(folder / "memory.oom_control", "oom_kill")  # v1
        if oom is None:
            oom = cgroup_field(folder / "memory.events", "oom_kill")  # v2
        if pids is None:
            pids = cgroup_field(folder / "pids.events", "max")
    if oom is None and pids is None:
        return None
    return CgroupCounts(oom, pids)


def counted_events(
    before: CgroupCounts | None, after: CgroupCounts | None, *, mem_limit: str, pids_limit: int
) -> list[BlockEvent]:
    """The events of what grew from `before` to `after`."""
    if before is None or after is None:
        return []
    events = []
    if before.oom_kills is not None and after.oom_kills is not None and after.oom_kills > before.oom_kills:
        events.append(
            BlockEvent(
                "memory", f"a process killed out of memory (limit {mem_limit})", after.oom_kills - before.oom_kills
            )
        )
    if before.pids_refused is not None and after.pids_refused is not None and after.pids_refused > before.pids_refused:
        events.append(
            BlockEvent(
                "pids",
                f"a new process or thread refused (limit {pids_limit})",
                after.pids_refused - before.pids_refused,
            )
        )
    return events
