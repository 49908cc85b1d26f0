"""The host polices its worker from outside, as if the model's code already ran anything in it.

Every attack here runs with ``authorized_imports=["*"]`` and confinement on, so the code has
`ctypes`, `os`, `signal` and `gc`: the policy (wall 1) is out of the way, and what holds is the
host. The code undoes its own limits (its alarm, its parent-death signal), keeps the block going
through host tools, and writes forged frames on its channel to the host. The host must end the
block by its limit plus 2 seconds, keep its memory, give every later block its own answer (or one
clean `SandboxError`, then a fresh worker), and take the worker down when it dies itself.

Each test first shows the harm with the host's check taken away inside the test (the deadline
moved far off, the frame limit lifted, the answers' numbers unchecked, the reaper not started),
so a check that stopped holding would fail here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from codeward.executors import LocalExecutor
from codeward.executors.base import ExecutionError, ExecutionTimeout, SandboxError
from codeward.executors.local import process
from codeward.executors.local.watchdog import resident_bytes
from codeward.platform.tools import tool
from tests.executors.contract.conftest import process_gone
from tests.security.conftest import SANDBOX_OFF

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(SANDBOX_OFF or not sys.platform.startswith("linux"), reason="attacks a Linux worker"),
]

LIMIT = 1.0
#: Past the limit, what a block may take on a busy two-core machine before the host has ended it.
ROOM = 2.0
#: Host memory growth allowed while a forged frame is refused (the control grows by hundreds of MB).
GROWTH = 50 * 2**20

#: Code that finds the worker's socket to its host, the number of the request it is answering, and
#: writes raw bytes there, as code with `os` and `gc` can.
CHANNEL = """
import gc, json, os, stat, struct, time

def channel_fd():
    for fd in range(3, 256):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                return fd
        except OSError:
            pass

FD = channel_fd()

def write_all(data):
    view = memoryview(data)
    while len(view):
        view = view[os.write(FD, view):]

def request_number():
    return next(o for o in gc.get_objects() if type(o).__name__ == "_HostLine").seq

def frame(header, body=b""):
    head = json.dumps(header).encode()
    return struct.pack("!IQ", len(head), len(body)) + head + body
"""

#: Ways the code turns off the worker's own alarm, each followed by a loop that means to run for
#: three times the limit.
UNDO_ALARM = {
    "timer-off": "import signal\nsignal.setitimer(signal.ITIMER_REAL, 0)\n",
    "alarm-ignored": "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n",
    "alarm-blocked": "import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM, signal.SIGVTALRM])\n",
}
LOOPS = {
    "busy": f"import time\nend = time.monotonic() + {3 * LIMIT}\nwhile time.monotonic() < end:\n    pass\n'escaped'",
    "host-tools": f"import time\nend = time.monotonic() + {3 * LIMIT}\nwhile time.monotonic() < end:\n    pause()\n'escaped'",
}


@tool
def pause() -> int:
    """Wait a fifth of a second on the host."""
    time.sleep(0.2)
    return 0


def executor(**options: Any) -> LocalExecutor:
    settings: dict[str, Any] = {"authorized_imports": ["*"], "timeout_seconds": LIMIT, "max_operations": 10**15}
    return LocalExecutor(**{**settings, **options})


def later_blocks_hold(sandbox: LocalExecutor, *, allow_one_loss: bool = False) -> None:
    """Three later blocks each return their own value; `allow_one_loss`: the first may instead be
    a clean SandboxError (the host found the worker out of turn), after which the rest hold."""
    for n in (3, 5, 7):
        try:
            assert sandbox.run(f"x = {n}\nx * 2").output == n * 2
        except SandboxError as error:
            assert allow_one_loss and n == 3, f"block {n}: {error}"
            assert "lost" in error.message and "new worker" in error.message
            assert sandbox.run(f"x = {n}\nx * 2").output == n * 2


@contextmanager
def peak_growth() -> Iterator[list[int]]:
    """The host's largest resident growth while the body runs, sampled every 5 ms from /proc."""
    start = resident_bytes() or 0
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], (resident_bytes() or start) - start)
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peak
    finally:
        done.set()
        sampler.join()


def timed(run: Callable[[], Any]) -> tuple[BaseException | Any, float]:
    """What `run` returned or raised, and the seconds it took."""
    started = time.monotonic()
    try:
        outcome: BaseException | Any = run()
    except (ExecutionError, SandboxError) as error:
        outcome = error
    return outcome, time.monotonic() - started


# --- time: the host keeps the deadline -------------------------------------------------------


@pytest.mark.parametrize("loop", LOOPS.values(), ids=LOOPS.keys())
@pytest.mark.parametrize("undo", UNDO_ALARM.values(), ids=UNDO_ALARM.keys())
def test_code_that_undoes_its_alarm_is_ended_by_the_host_deadline(undo, loop, monkeypatch):
    with executor() as sandbox:
        sandbox.send_tools({"pause": pause})
        with monkeypatch.context() as far:
            far.setattr(process, "GRACE_SECONDS", 60.0)  # control: no host deadline near
            assert sandbox.run(undo + loop).output == "escaped", "the code did not outlive its own limit"
        outcome, took = timed(lambda: sandbox.run(undo + loop))
        assert isinstance(outcome, SandboxError) and "time limit" in outcome.message, outcome
        assert took < LIMIT + ROOM, f"the block ran {took:.1f} s under a {LIMIT:g} s limit"
        later_blocks_hold(sandbox)


@pytest.mark.parametrize("late", [0.6, process.GRACE_SECONDS + 0.6], ids=["within-grace", "past-deadline"])
def test_a_host_tool_past_the_limit_leaves_no_answer_for_later_blocks(late, monkeypatch):
    returned: list[float] = []

    @tool
    def slow() -> str:
        """Outlive the block's limit on the host."""
        time.sleep(LIMIT + late)
        returned.append(time.monotonic())
        return "the slow tool's answer"

    with executor(authorized_imports=[]) as sandbox:
        sandbox.send_tools({"slow": slow})
        started = time.monotonic()
        outcome, took = timed(lambda: sandbox.run("slow()"))
        # the hazard is real: the tool's answer was ready only after the block's limit
        assert returned and returned[0] - started > LIMIT
        assert isinstance(outcome, (ExecutionTimeout, SandboxError)), outcome
        if isinstance(outcome, SandboxError):
            assert "host tool" in outcome.message and "time limit" in outcome.message
        assert took < LIMIT + late + ROOM
        later_blocks_hold(sandbox)


# --- life: the worker ends with its host -----------------------------------------------------

CLEAR_PDEATHSIG = "import ctypes\nctypes.CDLL(None, use_errno=True).prctl(1, 0, 0, 0, 0), ctypes.get_errno()"

HOST = """
import os, sys
from codeward.executors import LocalExecutor
from codeward.executors.local import process

if sys.argv[2] == "no-reaper":
    class NoReaper:
        def __init__(self, pid):
            self.process = None
        def release(self):
            pass
    process.Reaper = NoReaper
executor = LocalExecutor(authorized_imports=["*"], timeout_seconds=100, confinement=sys.argv[1])
cleared = executor.run(sys.argv[3]).output
reaper = executor._worker._worker.reaper.process
print(executor.run("import os\\nos.getpid()").output, reaper.pid if reaper else 0, cleared, flush=True)
executor.run("any(iter(int, 1))")
"""


def _host_dies(confinement: str, reaper: str) -> tuple[list[int], tuple[int, int]]:
    """Start a host that owns a LocalExecutor whose code clears its PDEATHSIG, SIGKILL the host
    mid-block; return the worker's and reaper's pids still alive 5 s later, and what prctl said."""
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, confinement, reaper, CLEAR_PDEATHSIG], stdout=subprocess.PIPE, text=True
    )
    assert host.stdout is not None
    worker, reaper_pid, result, errno = host.stdout.readline().replace("(", " ").replace(",", " ").split()[:4]
    pids = [int(worker)] + ([int(reaper_pid)] if int(reaper_pid) else [])
    time.sleep(0.3)
    assert not process_gone(int(worker))
    host.kill()
    host.wait()
    deadline = time.monotonic() + 5
    while not all(map(process_gone, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [pid for pid in pids if not process_gone(pid)], (int(result), int(errno.rstrip(")")))


def test_a_worker_that_clears_its_parent_death_signal_still_dies_with_its_host():
    alive, cleared = _host_dies("none", "no-reaper")  # control: unconfined, no reaper
    try:
        assert alive, "control: the worker should outlive its host once it cleared PR_SET_PDEATHSIG"
        assert cleared == (0, 0)
    finally:
        for pid in alive:
            os.kill(pid, signal.SIGKILL)
    alive, cleared = _host_dies("none", "reaper")  # the reaper alone holds
    assert not alive, f"left running after the host was killed: {alive}"
    alive, cleared = _host_dies("auto", "reaper")  # and seccomp refuses the call itself
    assert not alive, f"left running after the host was killed: {alive}"
    assert cleared == (-1, 1), "seccomp should refuse prctl(PR_SET_PDEATHSIG) with EPERM"


def test_closing_leaves_no_worker_or_reaper():
    sandbox = executor()
    sandbox.run("1")
    first = sandbox._worker._worker  # type: ignore[union-attr]
    with pytest.raises(SandboxError):
        sandbox.run("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    sandbox.run("1")  # a second worker, with a reaper of its own
    second = sandbox._worker._worker  # type: ignore[union-attr]
    sandbox.close()
    pids = [first.process.pid, first.reaper.process.pid, second.process.pid, second.reaper.process.pid]
    assert all(map(process_gone, pids)), [pid for pid in pids if not process_gone(pid)]
