"""A sandbox ends with its owner: a small process beside each container removes it when the owner dies.

The reaper (`owners.reap_orphans`) removes a dead owner's containers only when codeward next
starts on the engine; until then a container whose owner was killed (SIGKILL, the OOM killer, a
crash) would run on with its memory and CPU. So each container gets a watchdog: a process in a
session of its own (a signal to the owner's process group or terminal does not reach it) whose
stdin is the read end of a pipe whose write end only the owner holds: the programs it runs do not
inherit it, and a child it forks closes it at once, so a child that outlives the owner does not
keep the container alive. However the owner ends, the kernel closes that end; the watchdog reads EOF
and removes the container by id, and the folder its sockets live in. An owner that removes the
container itself writes one byte first: the watchdog then leaves without asking the engine.

The watchdog is this file run by the owner's interpreter: it waits with nothing but the standard
library loaded, and imports the Docker SDK only when it has work to do. It reaches the engine the
environment points at (DOCKER_HOST), as `docker.from_env()` does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

__all__ = ["Watchdog", "watch"]

_RELEASED = b"r"
_HELD: set[int] = set()  # the write ends this process holds, closed in a forked child


def _close_inherited() -> None:
    for pipe in _HELD:
        os.close(pipe)
    _HELD.clear()


os.register_at_fork(after_in_child=_close_inherited)


@dataclass
class Watchdog:
    """The owner's side: the pipe's write end, and the process at the other end."""

    pipe: int
    process: subprocess.Popen[bytes]

    def release(self) -> None:
        """The owner removed the container itself: the watchdog leaves without removing anything."""
        if self.pipe not in _HELD:
            return  # released already, or this is a forked child, which never held the pipe
        _HELD.discard(self.pipe)
        try:
            os.write(self.pipe, _RELEASED)
        except OSError:
            pass  # the watchdog is gone already
        os.close(self.pipe)
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass  # it ends on its own; the interpreter collects it later


def watch(container_id: str, ipc_dir: str) -> Watchdog:
    """Start the watchdog of a container that this process owns."""
    read_end, write_end = os.pipe()  # neither end is inherited by what this process runs later
    try:
        process = subprocess.Popen(
            [sys.executable, "-I", __file__, container_id, ipc_dir],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    _HELD.add(write_end)
    return Watchdog(write_end, process)


def _guard(container_id: str, ipc_dir: str) -> None:
    """Wait for the owner's end; remove the container unless the owner said it did."""
    if os.read(0, 1) == _RELEASED:
        return
    import docker

    try:
        docker.from_env().containers.get(container_id).remove(force=True)
    except docker.errors.NotFound:
        pass
    shutil.rmtree(ipc_dir, ignore_errors=True)


if __name__ == "__main__":
    _guard(sys.argv[1], sys.argv[2])
