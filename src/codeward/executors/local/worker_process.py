"""One local worker process, seen from the host: started, talked to over its socket, watched, stopped.

The worker is a fresh process of this interpreter (``-I -S``: no user site, no ``PYTHON*``
variables, no ``.pth`` code) with an environment of our making, started from one long-lived thread
(it dies with the thread that started it) beside a reaper that ends it with its host. The start
is not waited for: a new `WorkerProcess` returns at once, and the first wait for its answer (an
effect, which an event loop awaits) waits for the process too, so that forty started together
from one event loop never hold it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from codeward.effects import Completed, Exited, Offloaded, Steps, blocking
from codeward.executors.local.channel import TEXT_LIMIT, Channel, ChannelError
from codeward.executors.local.folder_watch import FolderWatch, empty_folder
from codeward.executors.local.reaper import Reaper
from codeward.executors.local.seccomp_notices import SeccompNotices
from codeward.executors.local.working_folder import DEFAULT_FOLDER_BYTES
from codeward.executors.metering import SingleProcessMeter
from codeward.executors.settings import DEFAULT_OUTPUT_BUDGET
from codeward.wall_events import EVENTS_TEXT_LIMIT

__all__ = ["WorkerProcess", "frame_limits", "worker_environment", "worker_import_path"]

#: How long a worker whose socket closed may take to exit before it counts as alive and silent: an
#: exiting process closes its files just before it becomes a zombie, so its status comes at once;
#: code that closes the socket and runs on is stopped this soon, well within `GRACE_SECONDS` + 1.
DEATH_SECONDS = 0.5
#: How long a worker killed for its folder may take to die, and then the folder to be emptied.
_EMPTYING_SECONDS = 10.0
#: How long a worker asked to exit (`close()`) may take before it is killed.
STOP_SECONDS = 0.5
#: Bytes a header may hold besides the logs and an error's texts: the operation, flags, parts' sizes.
HEADER_ROOM = 1 << 16
#: How long the host looks for the worker's first message after a request before it sleeps on the
#: socket (`Channel.spin_next`): a small block answers within this, and a wake-up would add a fifth
#: to its round trip. A request costs at most this much of the host's CPU time beside the worker's,
#: whatever the worker sends; a tool's reply, which the block's own code paces, arms none.
ANSWER_SPIN_SECONDS = 0.0003
#: Bytes of codec text one item of a value may take: the longest, about 31, is a complex number or
#: a dict's int key with its float (a character takes at most 12, an astral one escaped).
ITEM_BYTES = 32

_SPAWNER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="codeward-worker-spawner")

_BOOT = (
    "import sys; sys.path[:] = __import__('json').loads(sys.argv[2]); "
    "from codeward.executors.local.worker import main; main(int(sys.argv[1]), *map(int, sys.argv[3:]))"
)

#: The worker's whole environment unless the user adds to it: one thread per math library, so that
#: the memory cap is spent on data and not on thread buffers.
_BASE_ENVIRONMENT = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
}


def worker_import_path(authorized_imports: Iterable[str]) -> list[str]:
    """The folders the worker imports from, which a confined worker may also read: the
    interpreter's own, site-packages, codeward's, and those holding a module the user allowed.
    Not the rest of the host's `sys.path` (a project folder with its `.env`, the current folder)."""
    allowed = frozenset(name.split(".")[0] for name in authorized_imports) - {"*"}
    return list(_import_path(allowed, tuple(sys.path)))


@functools.lru_cache(maxsize=32)
def _import_path(allowed: frozenset[str], path: tuple[str, ...]) -> tuple[str, ...]:
    """Read once for each set of imports and `sys.path`: a folder is listed once, not globbed for
    each module (the script's own folder may be a large one, /tmp say)."""
    prefixes = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    codeward_root = Path(__file__).resolve().parents[3]
    kept = []
    for entry in path:
        if not entry or not os.path.isdir(entry):
            continue
        folder = Path(entry).resolve()
        if (
            folder == codeward_root
            or {"site-packages", "dist-packages"} & set(folder.parts)
            or any(folder.is_relative_to(prefix) for prefix in prefixes)
            or (allowed and allowed & _modules_in(folder))
        ):
            kept.append(entry)
    return tuple(kept)


def _modules_in(folder: Path) -> set[str]:
    """The top-level names importable from `folder`: its folders, and its ``.py``/``.so`` files' stems."""
    names = set()
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                stem, dot, rest = entry.name.partition(".")
                if (not dot and entry.is_dir()) or rest.startswith("py") or rest.endswith("so"):
                    names.add(stem)
    except OSError:
        pass
    return names


def frame_limits(settings: Mapping[str, Any]) -> tuple[int, int]:
    """The most bytes a worker's frame may hold: its header, and its whole. Measured from what a
    block may send, so that a worker claiming a gigabyte is refused before the host reads it.

    The header carries the logs (`max_print_outputs_length` characters) and an error's message and
    traceback (`TEXT_LIMIT` characters each, cut by the worker) and its events (`EVENTS_TEXT_LIMIT`), at most 12 bytes a character as
    JSON's ASCII escapes. The body carries the block's value or a tool call's arguments: one
    operation builds at most `max_value_size` items or characters, and `ITEM_BYTES` holds the
    codec's text for any one of them, so a value at that cap fits (320 MB with the defaults;
    never less than the kernel sandboxes' 64 MiB output budget). A larger value (many values at
    the cap in one list) ends its worker with a `SandboxError` that gives both sizes.
    """
    header = 12 * (settings["max_print_outputs_length"] + 2 * TEXT_LIMIT + EVENTS_TEXT_LIMIT) + HEADER_ROOM
    body = max(DEFAULT_OUTPUT_BUDGET, ITEM_BYTES * settings["max_value_size"])
    return header, header + body


def _unpredictable_numbers() -> Iterator[int]:
    """Numbers of 62 random bits, drawn from the system 64 at a time (one system call, not one a request)."""
    while True:
        yield from (number >> 2 for number in struct.unpack("!64Q", os.urandom(512)))


def worker_environment(extra: Mapping[str, str] | None) -> dict[str, str]:
    """The worker's environment: none of the host's variables, only ours and those passed in `env=`."""
    return {**_BASE_ENVIRONMENT, **dict(extra or {})}


def _spawn(
    argv: list[str], worker_ends: list[socket.socket], env: dict[str, str], stderr: Any, folder: str
) -> tuple[subprocess.Popen[bytes], Reaper]:
    """Start the worker and its reaper (on the spawner thread: the worker dies with the thread that
    started it, so that thread lives as long as the host)."""
    try:
        process = subprocess.Popen(
            argv,
            pass_fds=tuple(end.fileno() for end in worker_ends),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            cwd="/",
            start_new_session=True,
        )
    finally:
        for end in worker_ends:
            end.close()
    return process, _reaper_for(process, folder)


def _reaper_for(process: subprocess.Popen[bytes], folder: str) -> Reaper:
    """The reaper of a worker just started, which removes its working `folder` if the host is killed; a
    worker that cannot have one is killed at once, as nothing would end it with its host."""
    try:
        return Reaper(process.pid, folder)
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise


class WorkerProcess:
    """One worker process and its end of the socket."""

    def __init__(self, settings: dict[str, Any], env: dict[str, str]) -> None:
        import_path = worker_import_path(settings["authorized_imports"])
        host_end, worker_end = socket.socketpair()
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by stop())
        argv = [sys.executable, "-I", "-S", "-c", _BOOT, str(worker_end.fileno()), json.dumps(import_path)]
        worker_ends = [worker_end]
        #: The system calls the worker's seccomp filter refused, answered by the host (None unconfined).
        self.notices: SeccompNotices | None = None
        if settings["confinement"] != "none" and sys.platform.startswith("linux"):
            handover_host, handover_worker = socket.socketpair()
            argv.append(str(handover_worker.fileno()))
            worker_ends.append(handover_worker)
            self.notices = SeccompNotices(handover_host)
        self._spawned = _SPAWNER.submit(_spawn, argv, worker_ends, env, self.stderr, settings["working_folder"])
        #: A tag of its own, with its pid once known (`sandbox_id`): a pid is reused once the process is gone.
        self._tag = uuid.uuid4().hex[:8]
        self._request_numbers = _unpredictable_numbers()
        header_limit, limit = frame_limits(settings)
        self.channel = Channel(host_end, limit=limit, header_limit=header_limit, flat_headers=True)
        # what the worker reads first waits in the socket until it starts; a start that failed at
        # once has closed the socket's other end, and its error comes at the first use
        try:
            self.start_seq = blocking(self.sending({"op": "start", "host_pid": os.getpid(), **settings}))
        except (OSError, ChannelError):
            self.start_seq = -1
        self.ready = False
        self._meter: SingleProcessMeter | None = None
        self._cpu_at_answer: float | None = None
        #: Its CPU seconds as `busy_while_idle` last read them.
        self.cpu_read: float | None = None  # its CPU time when it last answered, where the system says
        self._overrun: str | None = None  # why the host stopped it, when it did
        self._emptied = threading.Event()  # set once the host emptied the folder it stopped it for
        self.folder = settings["working_folder"]
        self._stopped = False
        self._folder_watch = FolderWatch(self.folder, DEFAULT_FOLDER_BYTES, self._stop_for)

    def started(self) -> Steps[None]:
        """Wait for the process to have been started (it is, at once, unless starting it failed)."""
        yield Completed(self._spawned)

    @property
    def process(self) -> subprocess.Popen[bytes]:
        return self._spawned.result()[0]

    @property
    def reaper(self) -> Reaper:
        return self._spawned.result()[1]

    @property
    def sandbox_id(self) -> str:
        """Its pid, to find it by, and its tag."""
        return f"local-{self.process.pid}-{self._tag}"

    def _stop_for(self, reason: str) -> None:
        """Kill the worker from the host for its folder, `reason`, which its death then gives, and empty
        the folder once it is dead. The folder outlives its worker: left full, it would stop each new
        worker in turn, and the executor could never run again. What filled it is the work of code
        that got past the policy."""
        self._overrun = f"{reason}; what the folder held is removed"
        with contextlib.suppress(OSError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=_EMPTYING_SECONDS)  # dead, it writes nothing more
        empty_folder(self.folder)
        self._emptied.set()

    @property
    def meter(self) -> SingleProcessMeter:
        """What reads its CPU time and memory peak (its /proc files kept open while it lives)."""
        if self._meter is None:
            self._meter = SingleProcessMeter(self.process.pid)  # its seccomp filter refuses fork
        return self._meter

    def cpu_seconds(self) -> float | None:
        """The user and system CPU time of all its threads, as the system counts it; None where it cannot be read."""
        return self.meter.cpu_seconds()

    @property
    def cpu_at_answer(self) -> float | None:
        """Its CPU seconds when it last answered, as read then."""
        return self._cpu_at_answer

    def answered(self) -> None:
        """Mark the end of an answer: from here until the next request, the worker should be idle."""
        self._cpu_at_answer = self.cpu_seconds()

    def busy_while_idle(self) -> float:
        """CPU seconds it spent since its last answer (0 where that cannot be known); the reading
        stays in `cpu_read`."""
        now = self.cpu_read = self.cpu_seconds()
        if now is None or self._cpu_at_answer is None:
            return 0.0
        return now - self._cpu_at_answer

    def sending(
        self, header: dict[str, Any], body: str = "", parts: Sequence[Any] = (), deadline: float | None = None
    ) -> Steps[int]:
        """Send a request under a number of its own, and return that number. The number is drawn
        at random: code in the worker that reads the current one still cannot write the answer to
        the next request ahead of time, to be taken for a later block's result."""
        seq = next(self._request_numbers)
        yield from self.channel.sending({**header, "seq": seq}, body, parts, deadline)
        if header["op"] != "reply":
            self.channel.spin_next(ANSWER_SPIN_SECONDS)
        return seq

    def interrupt(self) -> None:
        """Send SIGINT: a running block stops as from Ctrl-C; between blocks the worker lets it go."""
        try:
            self.process.send_signal(signal.SIGINT)
        except OSError:  # already gone: the block's answer says so
            pass

    def dying(self) -> Steps[str]:
        """What happened to a worker whose end of the socket closed, in words."""
        if self._overrun is not None:
            yield Offloaded(self._emptied.wait, _EMPTYING_SECONDS)  # the next worker starts in an emptied folder
            return f"the worker process was stopped by the host: {self._overrun}"
        code = yield Exited(self.process, DEATH_SECONDS)
        if code is None:
            return "the worker process stopped answering"
        said = self._last_words()
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            what = {
                "SIGSEGV": "crashed (SIGSEGV: the code made C code read memory it does not own)",
                "SIGKILL": "was killed (SIGKILL: out of memory, or stopped from outside)",
                "SIGABRT": "aborted (SIGABRT: C code gave up, often for want of memory)",
            }.get(name, f"was ended by {name}")
            return f"the worker process {what}" + said
        return f"the worker process exited with status {code}" + said

    def _last_words(self) -> str:
        """The end of what the worker wrote to its stderr (a fatal error's report), printable only."""
        try:
            size = os.fstat(self.stderr.fileno()).st_size
            self.stderr.seek(max(0, size - 600))
            text = self.stderr.read().decode("utf-8", "replace")
        except OSError:
            return ""
        text = "".join(c if c.isprintable() or c == "\n" else "?" for c in text).strip()
        return f"; it said: {text}" if text else ""

    def stop(self, *, graceful: bool = True) -> None:
        blocking(self.stopping(graceful=graceful))

    def stopping(self, *, graceful: bool = True) -> Steps[None]:
        """Ask the worker to exit and wait a moment for it; kill it past that, or if the wait is cut short."""
        if self._stopped:
            return
        self._stopped = True
        self.ready = False
        self._folder_watch.close()
        try:
            if (yield from self._was_started()) and graceful and self.process.poll() is None:
                with contextlib.suppress(OSError, ChannelError):
                    yield from self.channel.sending({"op": "close"}, deadline=time.monotonic() + STOP_SECONDS)
                    yield Exited(self.process, STOP_SECONDS)
        finally:
            try:
                yield from self._killed()
            finally:
                self.channel.close()
                self.stderr.close()
                if self.notices is not None:
                    self.notices.close()
                if self._meter is not None:
                    self._meter.close()

    def _was_started(self) -> Steps[bool]:
        try:
            yield from self.started()
        except Exception:  # starting it failed (said at its first use): nothing runs
            return False
        return True

    def _killed(self) -> Steps[None]:
        """Kill the process if it runs, and release its reaper; a start under way (milliseconds) ends first."""
        concurrent.futures.wait([self._spawned])
        if self._spawned.cancelled() or self._spawned.exception() is not None:
            return
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            yield Exited(self.process, STOP_SECONDS)  # a killed process ends at once, but a busy machine delays it
            self.process.wait()
        yield from self.reaper.releasing()
