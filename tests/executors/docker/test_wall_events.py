"""What a container's limits refused during a block, read by the host from the container's cgroup:
out-of-memory kills (wall "memory") and forks refused at the pids limit (wall "pids"), on runc and gVisor."""

from __future__ import annotations

import pytest

from codeward.executors.base import BlockEvent, SandboxError
from codeward.executors.docker.executor import DockerExecutor

pytestmark = pytest.mark.timeout(300)

MEMORY = "256m"
PIDS = 64

#: A child process that allocates four times the sandbox's memory: the kernel kills it, not the sandbox.
CHILD_PAST_MEMORY = """
import subprocess, sys
subprocess.run([sys.executable, "-c", "x = bytearray(2**30); print(len(x))"], capture_output=True).returncode
"""

#: Forks past the pids limit, a bounded number of them, each child waiting a moment so they add up.
FORKS_PAST_PIDS = f"""
import os, time
children, refused = [], 0
for _ in range({PIDS} + 20):
    try:
        pid = os.fork()
    except OSError:
        refused += 1
        continue
    if pid == 0:
        time.sleep(2)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
refused
"""


def test_a_plain_block_has_no_events(runtime, sandbox_image):
    """The control: a new sandbox (gVisor's counts its own start) and a block that stays within its limits."""
    pids = PIDS if runtime is None else 128
    with DockerExecutor(runtime=runtime, mem_limit=MEMORY, pids_limit=pids) as executor:
        assert executor.run("1 + 1").events == []
        assert executor.run("x = bytearray(2**20)\nlen(x)").events == []


def test_a_block_that_fills_the_sandboxs_memory_has_a_memory_event_on_its_error(runtime, sandbox_image):
    pids = PIDS if runtime is None else 128
    with DockerExecutor(runtime=runtime, mem_limit=MEMORY, pids_limit=pids) as executor:
        executor.run("1")
        with pytest.raises(SandboxError) as died:
            executor.run("x = bytearray(2**30)")
        assert [event.wall for event in died.value.events] == ["memory"], died.value.events
        assert MEMORY in died.value.events[0].detail
        assert executor.run("2").events == [], "the next block, in a fresh sandbox, starts from nothing"


def test_a_child_killed_out_of_memory_is_a_memory_event_and_the_block_goes_on(sandbox_image):
    """On runc a child the kernel kills leaves the sandbox running: the count comes from its cgroup.
    (Under gVisor the whole sandbox is the one host process the kernel can kill: see the test above.)"""
    with DockerExecutor(mem_limit=MEMORY, pids_limit=PIDS) as executor:
        result = executor.run(CHILD_PAST_MEMORY)
        assert result.output == -9
        assert result.events == [BlockEvent("memory", f"a process killed out of memory (limit {MEMORY})", 1)]
        assert executor.run("3").events == []


def test_forks_past_the_pids_limit_are_a_pids_event(sandbox_image):
    """On runc; under gVisor the limit counts gVisor's own host threads, and reaching it ends the sandbox."""
    with DockerExecutor(mem_limit=MEMORY, pids_limit=PIDS) as executor:
        result = executor.run(FORKS_PAST_PIDS)
        assert result.output > 0
        (event,) = result.events
        assert event.wall == "pids" and f"limit {PIDS}" in event.detail
        assert event.count >= result.output  # every refused fork counted, and the threads' too
        assert executor.run("4").events == []
