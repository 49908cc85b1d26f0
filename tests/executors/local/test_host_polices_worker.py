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

import contextlib
import os
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from codeward import effects
from codeward.effects import Readable
from codeward.executors import LocalExecutor
from codeward.executors.base import ExecutionError, ExecutionTimeout, SandboxError
from codeward.executors.local import channel, process, worker_process
from codeward.executors.local.channel import Channel, ChannelTimeout
from codeward.platform.tools import tool
from tests.executors.contract.conftest import process_gone
from tests.memory import peak_growth
from tests.timing import busy_seconds

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="attacks a Linux worker"),
]

LIMIT = 1.0
#: Past the limit, what a block may take on a busy two-core machine before the host has ended it:
#: the worker's grace to stop by itself, then the kill and the answer, as a busy machine slows them
#: (a slow frame's refusal once took 2.6 s past the limit there). Every control's harm lasts longer.
ROOM = busy_seconds(process.GRACE_SECONDS)
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
    while data:
        data = data[os.write(FD, data):]

def request_number():
    for o in gc.get_objects():
        try:
            if type(o).__name__ == "_HostLine":
                return o.seq
        except Exception:  # the policy refuses to name some objects' types
            pass

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
    """An executor whose worker has started: the limits under test begin after a start, which a busy
    machine can stretch to seconds, so the times the tests take are of the block alone."""
    settings: dict[str, Any] = {"authorized_imports": ["*"], "timeout_seconds": LIMIT, "max_operations": 10**15}
    sandbox = LocalExecutor(**{**settings, **options})
    try:
        sandbox.run("None")
    except BaseException:
        sandbox.close()
        raise
    return sandbox


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


# --- frames: bounded, taken as they come, decoded within the deadline --------------------------

ALARM_OFF = UNDO_ALARM["timer-off"]


def test_a_forged_length_over_the_frame_limit_is_refused_before_the_host_reads_it(monkeypatch):
    stream = (
        CHANNEL + ALARM_OFF + "chunk = b'x' * 2**20\nwrite_all(struct.pack('!IQ', 2, 200 * 2**20) + b'{}')\n"
        "for _ in range(200):\n    write_all(chunk)\n"
    )
    options = {"max_value_size": 2_000_000}  # a body limit of 64 MiB
    with monkeypatch.context() as lifted:
        lifted.setattr(worker_process, "frame_limits", lambda settings: (2**20, 2**40))  # control: no limit
        with executor(**options) as sandbox, peak_growth() as grown:
            outcome, _ = timed(lambda: sandbox.run(stream))
        assert isinstance(outcome, SandboxError), outcome
        assert grown() > 150 * 2**20, f"control: the host grew by only {grown() / 2**20:.0f} MiB"
    with executor(**options) as sandbox:
        with peak_growth() as grown:
            outcome, took = timed(lambda: sandbox.run(stream))
        assert isinstance(outcome, SandboxError) and "over the limit" in outcome.message, outcome
        assert grown() < GROWTH, f"the host grew by {grown() / 2**20:.0f} MiB"
        assert took < LIMIT + ROOM
        later_blocks_hold(sandbox)


def _preallocating(self: Any, deadline: float | None) -> Any:
    """How the channel read a large frame before: a buffer of the announced size, allocated first."""
    while len(self._pending) < 12:
        if not (yield Readable(self.sock, deadline)):
            raise ChannelTimeout("no answer before the deadline")
        self._pending += self._attempt(self.sock.recv, 65536, deadline) or b""
    head_size, body_size = struct.unpack_from("!IQ", self._pending)
    size = 12 + head_size + body_size
    buffer = bytearray(size)
    got = len(self._pending)
    buffer[:got] = self._pending
    self._pending.clear()
    view = memoryview(buffer)
    while got < size:
        if not (yield Readable(self.sock, deadline)):
            raise ChannelTimeout("no answer before the deadline")
        got += self._attempt(lambda into, flags: self.sock.recv_into(into, 0, flags), view[got:], deadline) or 0
    self._pending += buffer
    return self._taken()


def test_a_length_within_the_limit_is_not_allocated_before_its_bytes_come(monkeypatch):
    claim = CHANNEL + ALARM_OFF + "write_all(struct.pack('!IQ', 2, 100 * 2**20) + b'{}')\ntime.sleep(30)"
    options = {"max_value_size": 4_000_000}  # a body limit of 128 MB
    with monkeypatch.context() as old:
        old.setattr(Channel, "_message", _preallocating)  # control: the old read
        with executor(**options) as sandbox, peak_growth() as grown:
            timed(lambda: sandbox.run(claim))
        assert grown() > 80 * 2**20, f"control: the host grew by only {grown() / 2**20:.0f} MiB"
    with executor(**options) as sandbox:
        with peak_growth() as grown:
            outcome, took = timed(lambda: sandbox.run(claim))
        assert isinstance(outcome, SandboxError) and "time limit" in outcome.message, outcome
        assert grown() < GROWTH, f"the host grew by {grown() / 2**20:.0f} MiB"
        assert took < LIMIT + ROOM
        later_blocks_hold(sandbox)


#: A block's answer whose body is 120 MB of lone surrogates, UTF-8-encoded as `Channel.send` writes
#: them: within the frame limit, and seconds of the interpreter's lock if decoded whole.
SURROGATES = (
    CHANNEL
    + ALARM_OFF
    + """
chunk = b'\\xed\\xa0\\x80' * (1 << 20)
head = json.dumps({'op': 'done', 'final': False, 'logs': '', 'seq': request_number()}).encode()
write_all(struct.pack('!IQ', len(head), len(chunk) * 40) + head)
for _ in range(40):
    write_all(chunk)
time.sleep(30)
"""
)


def _decoded_whole(data: Any, deadline: float | None) -> str:
    """How the channel decoded a body before: all of it at once, whatever the deadline."""
    return bytes(data).decode("utf-8", "surrogatepass")


def test_a_body_of_lone_surrogates_is_decoded_within_the_blocks_time(monkeypatch):
    with monkeypatch.context() as whole:
        whole.setattr(channel, "_text", _decoded_whole)  # control
        with executor() as sandbox:
            _, took = timed(lambda: sandbox.run(SURROGATES))
        assert took > LIMIT + ROOM, f"control: the body was decoded whole in {took:.1f} s"
    with executor() as sandbox:
        outcome, took = timed(lambda: sandbox.run(SURROGATES))
        assert isinstance(outcome, SandboxError) and "time limit" in outcome.message, outcome
        assert took < LIMIT + ROOM
        later_blocks_hold(sandbox)


#: A frame for the running block, an answer or a tool request by its HEADER, whose body takes the
#: host many seconds to decode: 2.4 million one-element sets of a complex number, 116 MB, within
#: the frame limit.
SLOW_FRAME = (
    CHANNEL
    + """
item = b'{"$":"set","v":[{"$":"complex","v":[0.0,1.0]}]}'
chunk = (item + b",") * 10_000
head = json.dumps({**HEADER, "seq": request_number()}).encode()
write_all(struct.pack("!IQ", len(head), len(chunk) * 240 + len(item) + 2) + head + b"[")
for _ in range(240):
    write_all(chunk)
write_all(item + b"]")
"""
)
SLOW = {
    "value": (SLOW_FRAME.replace("HEADER", "{'op': 'done', 'final': False, 'logs': ''}"), ExecutionError),
    "tool-request": (SLOW_FRAME.replace("HEADER", "{'op': 'tool', 'call': 1}"), SandboxError),
}


@pytest.mark.parametrize(("code", "refusal"), SLOW.values(), ids=SLOW.keys())
def test_a_frame_slow_to_decode_is_refused_at_the_deadline(code, refusal, monkeypatch):
    """The refusal first; then the time, against the control's in the same run: the whole decoding,
    which a busy machine stretches as it stretches what follows the deadline (the deadline is checked
    between pieces, and a piece's parse is slower there too)."""
    from codeward.executors import codec

    # The frame's 2.4 million sets are past the decoded-size budget too: only the deadline is tried here.
    monkeypatch.setattr(codec, "decoding_memory", lambda allowance: contextlib.nullcontext())
    with executor() as sandbox:
        with monkeypatch.context() as unbounded:
            unbounded.setattr(codec, "decoding_deadline", lambda at: contextlib.nullcontext())  # control
            outcome, whole = timed(lambda: sandbox.run(code))
        assert whole > LIMIT + ROOM, f"control: {outcome!r:.200} in {whole:.1f} s"
    with executor() as sandbox:
        outcome, took = timed(lambda: sandbox.run(code))
        assert isinstance(outcome, refusal), outcome
        if refusal is ExecutionError:
            assert outcome.error_type == "CodecError", outcome
        assert took < whole / 2, (
            f"the host was held {took:.1f} s under a {LIMIT:g} s limit (decoding all: {whole:.1f} s)"
        )
        later_blocks_hold(sandbox, allow_one_loss=True)  # a value's block still sends its real answer after


#: The code answers its own block with a forged frame, then ends, so that its real answer follows.
SECOND_ANSWER = CHANNEL + (
    "write_all(frame({'op': 'done', 'final': False, 'logs': '', 'seq': request_number()}, b'\"forged\"'))\n'real'"
)
GARBAGE = CHANNEL + "write_all(struct.pack('!IQ', 5, 0) + b'{\"op\"')\n'real'"


def test_a_second_answer_is_never_taken_for_the_next_block(monkeypatch):
    with monkeypatch.context() as unchecked:  # control: answers read in order, whatever their number
        unchecked.setattr(
            process.WorkerExecutor,
            "_receive",
            lambda self, worker, seq, deadline, *, code_running: self._next_message(
                worker, deadline, code_running=code_running
            ),
        )
        with executor() as sandbox:
            assert sandbox.run(SECOND_ANSWER).output == "forged"
            assert sandbox.run("'the next block'").output == "real", "control: the next block got the old answer"
    with executor() as sandbox:
        assert sandbox.run(SECOND_ANSWER).output == "forged"  # the worker's own block: its to answer
        later_blocks_hold(sandbox, allow_one_loss=True)


def test_garbage_on_the_channel_ends_the_worker_cleanly():
    with executor() as sandbox:
        with pytest.raises(SandboxError, match="does not decode"):
            sandbox.run(GARBAGE)
        later_blocks_hold(sandbox)


def test_a_worker_that_closes_its_channel_and_runs_on_is_stopped(monkeypatch):
    code = CHANNEL + ALARM_OFF + f"time.sleep({LIMIT - 0.2})\nos.close(FD)\nwhile True:\n    pass"
    with monkeypatch.context() as patient:
        patient.setattr(worker_process, "DEATH_SECONDS", 10.0)  # control: the host waits long for its status
        with executor() as sandbox:
            outcome, took = timed(lambda: sandbox.run(code))
        assert took > LIMIT + ROOM, f"control: {outcome} in {took:.1f} s"
    with executor() as sandbox:
        outcome, took = timed(lambda: sandbox.run(code))
        assert isinstance(outcome, SandboxError) and "stopped answering" in outcome.message, outcome
        assert took < LIMIT + ROOM
        later_blocks_hold(sandbox)


@tool
def big() -> str:
    """Twenty million characters, from the host."""
    return "x" * 20_000_000


#: A forged call to `big`, after which the code never reads its socket again.
DEAF = (
    CHANNEL
    + ALARM_OFF
    + (
        "write_all(frame({'op': 'tool', 'seq': request_number(), 'call': 1}, b'{\"tool\": \"big\", \"arguments\": {}}'))\n"
        "while True:\n    pass"
    )
)


def _write_without_deadline(self, pieces, total, deadline, sent):
    """The channel's write as it was before it had a deadline: all of it, however long the reader takes."""
    skip = sent[0]
    for piece in pieces:
        self.sock.sendall(memoryview(piece).cast("B")[skip:])
        skip = 0
    sent[0] = total
    yield from ()


def test_a_worker_that_stops_reading_cannot_hold_the_host_in_a_send(monkeypatch):
    with monkeypatch.context() as blocking, executor() as sandbox:
        blocking.setattr(Channel, "_writing_all", _write_without_deadline)  # control
        sandbox.send_tools({"big": big})
        sandbox.run("1")
        worker = sandbox._worker._worker  # type: ignore[union-attr]
        stuck = threading.Thread(target=timed, args=(lambda: sandbox.run(DEAF),), daemon=True)
        stuck.start()
        stuck.join(LIMIT + ROOM + 1)
        assert stuck.is_alive(), "control: the host should still be sending to a worker that does not read"
        os.kill(worker.process.pid, signal.SIGKILL)  # lets the host go
        stuck.join(10)
    with executor() as sandbox:
        sandbox.send_tools({"big": big})
        outcome, took = timed(lambda: sandbox.run(DEAF))
        assert isinstance(outcome, SandboxError) and "stopped taking" in outcome.message, outcome
        assert took < LIMIT + ROOM
        later_blocks_hold(sandbox)


#: Live output in a trickle: each piece comes a moment after the host began to wait for the next.
TRICKLE = "import time\nfor i in range(200):\n    print(i)\n    time.sleep(0.001)\n'done'"


def test_a_trickle_of_messages_gets_the_host_to_look_once_a_request(monkeypatch):
    """The host looks for an answer without sleeping for a moment after each request: a worker that
    paces its messages must not turn that into a core of the host's CPU time for its whole block."""
    looks: list[float] = []
    made = effects._Ready.__init__

    def recorded(self: Any, sock: Any, deadline: float | None, spin: float = 0.0) -> None:
        made(self, sock, deadline, spin)
        if spin:
            looks.append(spin)

    monkeypatch.setattr(effects._Ready, "__init__", recorded)
    heard: list[str] = []
    with monkeypatch.context() as every_wait:
        every_wait.setattr(Channel, "_spin_now", lambda self: worker_process.ANSWER_SPIN_SECONDS)  # control
        with executor() as sandbox:
            looks.clear()
            assert sandbox.run(TRICKLE, on_output=lambda stream, text: heard.append(text)).output == "done"
        assert len(looks) > 50, f"control: the host looked before {len(looks)} waits"
    with executor() as sandbox:
        looks.clear()
        assert sandbox.run(TRICKLE, on_output=lambda stream, text: heard.append(text)).output == "done"
        assert len(looks) <= 1, f"the host looked before {len(looks)} waits of one block"
    assert "199\n" in heard


# --- life: the worker ends with its host -----------------------------------------------------

CLEAR_PDEATHSIG = "import ctypes\nctypes.CDLL(None, use_errno=True).prctl(1, 0, 0, 0, 0), ctypes.get_errno()"

HOST = """
import os, sys
from codeward.executors import LocalExecutor
from codeward.executors.local import worker_process

if sys.argv[2] == "no-reaper":
    class NoReaper:
        def __init__(self, pid, folder):
            self.process = None
        def releasing(self):
            yield from ()
    worker_process.Reaper = NoReaper
executor = LocalExecutor(authorized_imports=["*"], timeout_seconds=100, confinement=sys.argv[1])
print(executor.working_folder, flush=True)
cleared = executor.run(sys.argv[3]).output
reaper = executor._worker._worker.reaper.process
print(executor.run("import os\\nos.getpid()").output, reaper.pid if reaper else 0, cleared, flush=True)
executor.run("any(iter(int, 1))")
"""


def _host_dies(confinement: str, reaper: str) -> tuple[list[int], tuple[int, int], str]:
    """Start a host that owns a LocalExecutor whose code clears its PDEATHSIG, SIGKILL the host
    mid-block; return the worker's and reaper's pids still alive 5 s later, what prctl said, and
    the host's working folder (which, without a reaper, nothing else removes)."""
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, confinement, reaper, CLEAR_PDEATHSIG], stdout=subprocess.PIPE, text=True
    )
    assert host.stdout is not None
    folder = host.stdout.readline().strip()
    worker, reaper_pid, result, errno = host.stdout.readline().replace("(", " ").replace(",", " ").split()[:4]
    pids = [int(worker)] + ([int(reaper_pid)] if int(reaper_pid) else [])
    time.sleep(0.3)
    assert not process_gone(int(worker))
    host.kill()
    host.wait()
    deadline = time.monotonic() + 5
    while not all(map(process_gone, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [pid for pid in pids if not process_gone(pid)], (int(result), int(errno.rstrip(")"))), folder


def test_a_worker_that_clears_its_parent_death_signal_still_dies_with_its_host():
    alive, cleared, folder = _host_dies("none", "no-reaper")  # control: unconfined, no reaper
    try:
        assert alive, "control: the worker should outlive its host once it cleared PR_SET_PDEATHSIG"
        assert cleared == (0, 0)
    finally:
        for pid in alive:
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)
    alive, cleared, _ = _host_dies("none", "reaper")  # the reaper alone holds
    assert not alive, f"left running after the host was killed: {alive}"
    alive, cleared, _ = _host_dies("auto", "reaper")  # and seccomp refuses the call itself
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


#: A thread the code leaves running after its block, burning CPU while no block runs.
LEFT_RUNNING = (
    "import threading\nthreading.Thread(target=lambda: [None for _ in iter(int, 1)], daemon=True).start()\n'started'"
)


def spend_idle_cpu(sandbox: LocalExecutor, seconds: float) -> float:
    """Wait until the worker has spent `seconds` of CPU since its last answer, and return what it spent.

    Counted in CPU time, not by the clock: on a machine whose cores other work keeps busy, the
    thread gets a fraction of one. The wait is bounded by what a busy machine needs for it."""
    worker = sandbox._worker._worker  # type: ignore[union-attr]
    deadline = time.monotonic() + busy_seconds(seconds) + 1
    while worker.busy_while_idle() <= seconds and time.monotonic() < deadline:
        time.sleep(0.05)
    return worker.busy_while_idle()


def test_a_thread_left_running_between_blocks_is_stopped_at_the_next_request(monkeypatch):
    spent = 2 * process.IDLE_CPU_SECONDS
    with monkeypatch.context() as unwatched:
        unwatched.setattr(process, "IDLE_CPU_SECONDS", float("inf"))  # control: idle CPU not looked at
        with executor() as sandbox:
            assert sandbox.run(LEFT_RUNNING).output == "started"
            worker = sandbox.sandbox_id
            assert spend_idle_cpu(sandbox, spent) > spent, "control: the thread burns CPU between blocks"
            assert sandbox.run("'next'").output == "next"
            assert sandbox.sandbox_id == worker, "control: the same worker goes on"
    with executor() as sandbox:
        assert sandbox.run(LEFT_RUNNING).output == "started"
        assert spend_idle_cpu(sandbox, spent) > spent
        with pytest.raises(SandboxError, match="kept running code between blocks"):
            sandbox.run("'next'")
        later_blocks_hold(sandbox)


def test_an_idle_worker_goes_on_between_blocks():
    with executor() as sandbox:
        assert sandbox.run("import numpy\nint(numpy.arange(10).sum())").output == 45
        worker = sandbox.sandbox_id
        time.sleep(1.0)
        assert sandbox.run("'next'").output == "next"
        assert sandbox.sandbox_id == worker


#: A thread that, once its block has answered, holds the interpreter's lock in a C sleep: no CPU
#: spent, and no answer to the host's next request until it wakes.
HELD_ASLEEP = (
    "import threading, ctypes, time\n"
    "def hold():\n"
    "    time.sleep(0.3)\n"
    "    ctypes.PyDLL(None).sleep(6)\n"
    "threading.Thread(target=hold, daemon=True).start()\n"
    "'started'"
)
#: When the host sends after `HELD_ASLEEP` answered: its thread holds the lock by then, even on a machine
#: so busy that the thread wakes from its 0.3 s sleep a second late.
HOLD_BEGUN = 1.5


@pytest.mark.parametrize("load", ["variables", "tools"])
def test_loading_into_a_held_worker_is_bounded_by_the_blocks_limit(load, monkeypatch):
    from codeward.platform.tools import FinalAnswerTool

    def send(sandbox: LocalExecutor) -> None:
        time.sleep(HOLD_BEGUN)
        if load == "variables":
            sandbox.send_variables({"x": 1})
        else:
            sandbox.send_tools({"final_answer": FinalAnswerTool()})

    with monkeypatch.context() as patient:
        patient.setattr(process, "LOADING_BYTES_PER_SECOND", 1.0)  # control: a deadline of minutes
        with executor() as sandbox:
            assert sandbox.run(HELD_ASLEEP).output == "started"
            outcome, took = timed(lambda: send(sandbox))
            assert took > LIMIT + ROOM, f"control: {outcome!r:.200} in {took:.1f} s"
    with executor() as sandbox:
        assert sandbox.run(HELD_ASLEEP).output == "started"
        outcome, took = timed(lambda: send(sandbox))
        assert isinstance(outcome, SandboxError) and "did not answer in time" in outcome.message, outcome
        assert took < LIMIT + ROOM + HOLD_BEGUN, f"the host was held {took:.1f} s"
        later_blocks_hold(sandbox)


def test_a_value_that_decodes_past_the_memory_allowance_is_refused(monkeypatch):
    """Two million references to one empty dict: 16 MB in the worker, 6 MB on the wire, and two
    million dicts (150 MB) once the host decodes them."""
    from codeward.executors import codec

    options = {"max_memory_bytes": 200 * 2**20, "timeout_seconds": 20}  # time to encode two million items
    with monkeypatch.context() as unbounded:
        unbounded.setattr(codec, "decoding_memory", lambda allowance: contextlib.nullcontext())  # control
        with executor(**options) as sandbox:
            outcome, _ = timed(lambda: sandbox.run("[{}] * 2_000_000"))
        assert not isinstance(outcome, BaseException), outcome
        decoded = outcome.output
        assert len({id(item) for item in decoded}) == 2_000_000, "control: the host built a dict for each"
        del decoded, outcome
    with executor(**options) as sandbox, peak_growth() as grown:
        outcome, _ = timed(lambda: sandbox.run("[{}] * 2_000_000"))
        assert isinstance(outcome, ExecutionError) and "once decoded" in outcome.message, outcome
        assert grown() < GROWTH, f"the host grew by {grown() / 2**20:.0f} MiB"
        assert sandbox.run("len([{}] * 200_000)").output == 200_000


#: Output frames past what the logs may hold, forged straight onto the channel, as fast as it takes them.
OUTPUT_FLOOD = (
    CHANNEL
    + """
seq = request_number()
piece = frame({"op": "output", "seq": seq, "stream": "stdout", "text": "x" * 1000})
for _ in range(10_000):
    write_all(piece)
'flooded'
"""
)


def test_live_output_past_the_logs_length_ends_the_worker_and_never_reaches_the_callback():
    heard: list[str] = []
    with executor(max_print_outputs_length=5000) as sandbox:
        with pytest.raises(SandboxError, match="more output than its logs may hold"):
            sandbox.run(OUTPUT_FLOOD, on_output=lambda stream, text: heard.append(text))
        assert sum(map(len, heard)) <= 5000
        later_blocks_hold(sandbox)


#: A block that ignores Ctrl-C, waits for the host to be cancelled, then asks for the tool `tick`
#: over and over with forged requests, as code with `os` and `signal` can.
ASKS_AFTER_CANCEL = (
    CHANNEL
    + ALARM_OFF
    + "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(0.6)\n"
    + "for call in range(40):\n"
    + "    write_all(frame({'op': 'tool', 'seq': request_number(), 'call': call}, "
    + 'b\'{"tool": "tick", "arguments": {}}\'))\n'
    + "    time.sleep(0.05)\n"
    + "time.sleep(30)"
)


def test_a_cancelled_block_gets_no_host_tool_run_however_it_asks():
    """`arun` cancelled: the block is asked to stop, and whatever it sends after, no host tool runs
    for it (the caller has gone); one that does not stop within the grace loses its worker."""
    import asyncio

    from codeward.tools import tool
    from tests.executors.awaiting import cancelled_after

    ran: list[float] = []

    @tool
    def tick() -> int:
        """Counts a call.

        Returns:
            how many calls so far
        """
        ran.append(time.monotonic())
        return len(ran)

    async def main() -> float:
        with executor(timeout_seconds=20) as sandbox:
            await sandbox.asend_tools({"tick": tick})
            took = await cancelled_after(0.3, sandbox.arun(ASKS_AFTER_CANCEL))
            later_blocks_hold(sandbox)
            return took

    took = asyncio.run(main())
    assert not ran, f"{len(ran)} tool calls ran for a cancelled block"
    assert took < busy_seconds(process.INTERRUPT_GRACE_SECONDS + 1)


def test_a_reply_cut_by_a_cancel_stops_its_worker():
    """Cancelled while the host sends a tool's large reply to a worker that stopped reading: the reply
    is cut midway, so that worker could only read garbage next; it is stopped, and later blocks hold."""
    import asyncio

    from tests.executors.awaiting import cancelled_after

    async def main() -> None:
        with executor(timeout_seconds=20) as sandbox:
            await sandbox.asend_tools({"big": big})
            await cancelled_after(1.0, sandbox.arun(DEAF))
            later_blocks_hold(sandbox)

    asyncio.run(main())


#: A forged tool request whose argument (1.5 million keys, which take the host about a second and a
#: half to read) finishes arriving just before the block's deadline (3 s, and 1 s of grace): read,
#: it is already past it.
LATE_REQUEST = (
    "import signal, time\nT0 = time.monotonic()\n"
    + ALARM_OFF
    + "signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
    + CHANNEL
    + 'ALL = [b\'{"tool": "tick", "arguments": {"n": {\']\n'
    + "for s in range(0, 1_500_000, 100_000):\n"
    + "    ALL.append((b',' if s else b'') + b','.join([b'\"k%d\":null' % i for i in range(s, s + 100_000)]))\n"
    + "ALL.append(b'}}}')\n"
    + "head = json.dumps({'op': 'tool', 'seq': request_number(), 'call': 1}).encode()\n"
    + "while time.monotonic() < T0 + 3.7:\n    pass\n"
    + "write_all(struct.pack('!IQ', len(head), sum(map(len, ALL))) + head)\n"
    + "for chunk in ALL:\n    write_all(chunk)\n"
    + "while True:\n    pass"
)


def test_a_tool_request_read_past_the_deadline_runs_no_tool():
    ran: list[float] = []

    @tool
    def tick(n: dict) -> int:
        """Counts a call.

        Args:
            n: anything
        """
        ran.append(time.monotonic())
        return len(ran)

    with executor(timeout_seconds=3) as sandbox:
        sandbox.send_tools({"tick": tick})
        outcome, _ = timed(lambda: sandbox.run(LATE_REQUEST))
        assert isinstance(outcome, SandboxError) and "time limit" in outcome.message, outcome
        later_blocks_hold(sandbox)
    assert not ran, "the tool ran for a request read past the block's deadline"
