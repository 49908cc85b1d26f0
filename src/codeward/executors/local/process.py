"""The host's side of the local worker: start it, talk to it, and replace it when it dies.

The worker is a fresh process of this interpreter (``-I -S``: no user site, no
``PYTHON*`` variables, no ``.pth`` code) with an environment of our making; it
confines itself before the model's code runs (see `worker`). Whatever the policy
cannot stop ends with the worker: a C call that outlives the time limit is
killed, a crash or an out-of-memory kill is reported in words, and the next block
starts a new worker with the variables and tools sent again. Nothing the model's
code allocates lives in the host.

The host trusts nothing the worker does once the model's code has run in it, and
polices it from outside:

- time: each block has a deadline the host keeps, its limit plus `GRACE_SECONDS`,
  whatever the worker does to its own alarm; the host tools the block calls run
  within it, and so does what the host sends (a worker that stops reading cannot
  hold the host in a send). A tool on the host cannot be stopped mid-call: one
  still running at the deadline has its worker killed when it returns.
- order: every request the host sends has a number (random, so none can be
  guessed ahead), and an answer must carry the number of the request it answers
  (a block's tool calls carry the block's), or the worker is stopped; a tool
  call's reply carries the number of that call, so a reply that comes after its
  block gave up waiting is dropped by the worker, never taken for the next
  block's result.
- size: a frame from the worker may hold no more than the block may send (see
  `frame_limits`), is taken as its bytes arrive, and what it holds is decoded
  within the block's deadline.
- life: a reaper process the model's code never runs in kills the worker when the
  host ends (see `reaper`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import glob
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from codeward.executors import codec
from codeward.executors.base import CodeOutput, ExecutionError, ExecutionTimeout, SandboxError
from codeward.executors.kernel.remembering import RememberingExecutor
from codeward.executors.live import STREAMS, BlockStops, LiveOutput, OutputCallback
from codeward.executors.local.channel import TEXT_LIMIT, Channel, ChannelClosed, ChannelError, ChannelTimeout
from codeward.executors.local.folder_watch import FolderWatch
from codeward.executors.local.interpreter import interrupted
from codeward.executors.local.reaper import Reaper
from codeward.executors.local.working_folder import DEFAULT_FOLDER_BYTES
from codeward.executors.settings import DEFAULT_OUTPUT_BUDGET, checked_variable_names

__all__ = ["WorkerExecutor", "frame_limits", "worker_environment", "worker_import_path"]

#: Beyond the time limit, how long a block may take to stop by itself before its worker is killed.
GRACE_SECONDS = 1.0
#: After Ctrl-C, how long the host waits for the block to stop and send what it printed.
INTERRUPT_GRACE_SECONDS = 1.0
#: How long a new worker may take to import and confine itself.
START_SECONDS = 60.0
#: How fast a worker is expected to at least take in what is sent to it: loading variables or tools
#: may take the block's time limit, plus the grace, plus a second for each this many bytes.
LOADING_BYTES_PER_SECOND = 50 * 2**20
#: How long a worker whose socket closed may take to exit before it counts as alive and silent: an
#: exiting process closes its files just before it becomes a zombie, so its status comes at once;
#: code that closes the socket and runs on is stopped this soon, well within `GRACE_SECONDS` + 1.
DEATH_SECONDS = 0.5
#: CPU seconds a worker may spend between two of its requests: a thread the code left running
#: after its block burns CPU while the host waits for no answer, and is stopped at the next request.
IDLE_CPU_SECONDS = 0.5
#: Bytes a header may hold besides the logs and an error's texts: the operation, flags, parts' sizes.
HEADER_ROOM = 1 << 16
#: Bytes of codec text one item of a value may take: the longest, about 31, is a complex number or
#: a dict's int key with its float (a character takes at most 12, an astral one escaped).
ITEM_BYTES = 32

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

_SPAWNER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="codeward-worker-spawner")

_BOOT = (
    "import sys; sys.path[:] = __import__('json').loads(sys.argv[2]); "
    "from codeward.executors.local.worker import main; main(int(sys.argv[1]))"
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
    prefixes = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    codeward_root = Path(__file__).resolve().parents[3]
    allowed = {name.split(".")[0] for name in authorized_imports} - {"*"}
    kept = []
    for entry in sys.path:
        if not entry or not os.path.isdir(entry):
            continue
        folder = Path(entry).resolve()
        if (
            folder == codeward_root
            or {"site-packages", "dist-packages"} & set(folder.parts)
            or any(folder.is_relative_to(prefix) for prefix in prefixes)
            or any(_holds_module(folder, name) for name in allowed)
        ):
            kept.append(entry)
    return kept


def _holds_module(folder: Path, name: str) -> bool:
    return (
        (folder / name).is_dir()
        or any(folder.glob(f"{glob.escape(name)}.*py*"))
        or any(folder.glob(f"{glob.escape(name)}.*.so"))
    )


def frame_limits(settings: Mapping[str, Any]) -> tuple[int, int]:
    """The most bytes a worker's frame may hold: its header, and its whole. Measured from what a
    block may send, so that a worker claiming a gigabyte is refused before the host reads it.

    The header carries the logs (`max_print_outputs_length` characters) and an error's message and
    traceback (`TEXT_LIMIT` characters each, cut by the worker), at most 12 bytes a character as
    JSON's ASCII escapes. The body carries the block's value or a tool call's arguments: one
    operation builds at most `max_value_size` items or characters, and `ITEM_BYTES` holds the
    codec's text for any one of them, so a value at that cap fits (320 MB with the defaults;
    never less than the kernel sandboxes' 64 MiB output budget). A larger value (many values at
    the cap in one list) ends its worker with a `SandboxError` that gives both sizes.
    """
    header = 12 * (settings["max_print_outputs_length"] + 2 * TEXT_LIMIT) + HEADER_ROOM
    body = max(DEFAULT_OUTPUT_BUDGET, ITEM_BYTES * settings["max_value_size"])
    return header, header + body


def worker_environment(extra: Mapping[str, str] | None) -> dict[str, str]:
    """The worker's environment: none of the host's variables, only ours and those passed in `env=`."""
    return {**_BASE_ENVIRONMENT, **dict(extra or {})}


class WorkerExecutor(RememberingExecutor):
    """The policy interpreter in a worker process; `LocalExecutor(isolation="process")` is this."""

    name = "local"

    def __init__(self, settings: dict[str, Any], env: Mapping[str, str] | None) -> None:
        super().__init__(timeout_seconds=settings["timeout_seconds"], tools_mode="host", allow_pickle=False)
        self._settings = settings
        self._env = worker_environment(env)
        self._worker: _Worker | None = _Worker(settings, self._env)  # starts now, is waited for at first use
        self.missing_layers: list[str] = []
        self._stops = BlockStops()

    @property
    def sandbox_id(self) -> str | None:
        """The worker process the code runs in, as traces and batch results name it; None between workers."""
        return self._worker.sandbox_id if self._worker is not None else None

    # -- the contract ------------------------------------------------------------

    def run(self, code: str, on_output: OutputCallback | None = None) -> CodeOutput:
        """Run one block. Its time limit is wall-clock time kept by the host, and covers the host
        tools the block calls: the worker is killed `GRACE_SECONDS` past it whatever it does.
        What the block prints reaches `on_output` as the worker sends it."""
        self._check_open()
        worker = self._live_worker()
        live = LiveOutput(on_output, self._settings["max_print_outputs_length"])
        try:
            with self._stops.running(worker.interrupt):
                header, body, parts, deadline = self._converse(worker, code, live)
        except SandboxError:
            raise
        except KeyboardInterrupt as interrupt:  # Ctrl-C: the run ends, and what the block printed goes with it
            raise interrupt from self._interrupted(worker)
        except BaseException:  # stopped mid-block otherwise: the worker's next answer would be this block's
            self._lost(worker, "interrupted")
            raise
        try:
            return self._outcome(header, body, parts, deadline)
        finally:
            live.raise_failure()  # the callback's failure stopped the block: it is what the caller sees

    def interrupt(self) -> None:
        """Stop the running block as Ctrl-C does (SIGINT): it answers with what it printed, and the
        worker, with what the code defined, stays. Between blocks nothing happens."""
        self._stops.interrupt()

    def _interrupted(self, worker: _Worker) -> ExecutionError:
        """Stop the block and keep what it printed, which lives only in the worker; the worker is
        stopped after, whether or not it answered (a second Ctrl-C stops it at once)."""
        try:
            logs = self._last_logs(worker)
        finally:
            self._lost(worker, "interrupted")
        return interrupted(logs)

    @staticmethod
    def _last_logs(worker: _Worker) -> str:
        """Ask the worker to stop its block (SIGINT) and take the logs of its answer, if it comes in time."""
        deadline = time.monotonic() + INTERRUPT_GRACE_SECONDS
        try:
            worker.process.send_signal(signal.SIGINT)
            while True:
                header, _, _ = worker.channel.receive(deadline)
                if header.get("op") not in ("tool", "output"):  # a tool asked for before the interrupt is not run
                    return str(header.get("logs", ""))
        except (OSError, ChannelError):  # gone, silent or garbled: nothing printed can be trusted to come
            return ""

    def send_variables(self, variables: dict[str, Any]) -> None:
        checked_variable_names(variables, tools=self._bridge.tools)
        parts: list[Any] = []
        text = codec.encode_variables(variables, parts=parts)  # fails before anything is sent
        self._variables.update(variables)
        self._load("variables", text, parts)

    def _converse(self, worker: _Worker, code: str, live: LiveOutput) -> tuple[dict[str, Any], str, list[bytes], float]:
        """Send the block, hand its output to `live` and answer its tool calls until it ends, all
        before one deadline (which is returned, for decoding the answer within it too)."""
        deadline = time.monotonic() + self.timeout_seconds + GRACE_SECONDS
        seq = self._transmit(worker, {"op": "run", "live": live.wanted}, code, deadline=deadline)
        heard = 0
        while True:
            header, body, parts = self._receive(worker, seq, deadline, code_running=True)
            if header.get("op") == "output":
                heard += self._deliver(worker, header, live, heard)
                continue
            if header.get("op") != "tool":
                return header, body, parts, deadline
            reply = self._answer_tool(worker, body, deadline)
            self._transmit(worker, {"op": "reply", "call": header.get("call")}, reply, deadline=deadline)

    def _deliver(self, worker: _Worker, header: dict[str, Any], live: LiveOutput, heard: int) -> int:
        """Hand a piece of the block's output to `live`; return its length. A worker sends no more
        than the logs' length in all, and no empty piece, so the pieces are bounded too: one that
        does is stopped. A callback that fails stops the block, as `interrupt()` does."""
        stream, text = header.get("stream"), header.get("text")
        if stream not in STREAMS or not isinstance(text, str) or not text:
            raise self._lost(worker, "the worker process sent output codeward cannot read, and was stopped")
        if heard + len(text) > self._settings["max_print_outputs_length"]:
            raise self._lost(worker, "the worker process sent more output than its logs may hold, and was stopped")
        failed = live.failure is not None
        live(str(stream), text)
        if live.failure is not None and not failed:
            self._stops.interrupt()
        return len(text)

    def _answer_tool(self, worker: _Worker, body: str, deadline: float) -> str:
        """Run the tool the block asked for; its request is decoded within the block's deadline.
        The host cannot stop a tool mid-call: past the deadline when it returns, the worker is
        stopped (its block has already given up waiting), and the block ends as a timeout."""
        with self._decoding(deadline):
            reply = self._bridge.answer_tool(body)
        if time.monotonic() > deadline:
            raise self._lost(
                worker,
                f"the code ran past its {self.timeout_seconds:g}-second time limit in a host tool it called "
                "(the limit covers the tools a block calls, and a tool on the host cannot be stopped mid-call), "
                "so its worker process was stopped when the tool returned",
            )
        return reply

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._worker is not None:
            self._worker.stop()
            self._worker = None

    # -- the worker --------------------------------------------------------------

    def _load(self, what: str, text: str, parts: Sequence[Any] = ()) -> None:
        if self._worker is None or not self._worker.ready:
            self._live_worker()  # a new worker is sent everything remembered, this included
            return
        self._send(self._worker, what, text, parts)

    def _send(self, worker: _Worker, what: str, text: str, parts: Sequence[Any] = ()) -> None:
        """Load variables or tools into a running worker, by a deadline the host sets from what it sends:
        a worker that stops answering (a thread of the code's holding it) holds the host no longer."""
        size = len(text) + sum(map(len, parts))
        deadline = time.monotonic() + self.timeout_seconds + GRACE_SECONDS + size / LOADING_BYTES_PER_SECOND
        seq = self._transmit(worker, {"op": what}, text, parts, deadline=deadline)
        header, _, _ = self._receive(worker, seq, deadline, code_running=False)
        if header.get("op") != "loaded":
            raise self._lost(worker, f"the worker answered {header.get('op')!r} to loading {what}")

    def _live_worker(self) -> _Worker:
        """The running worker, or a new one with the variables and tools sent again."""
        if self._worker is not None and self._worker.ready:
            return self._worker
        if self._worker is None:
            self._worker = _Worker(self._settings, self._env)
        worker = self._worker
        header, _, _ = self._receive(worker, worker.start_seq, time.monotonic() + START_SECONDS, code_running=False)
        if header.get("op") != "ready":
            raise self._lost(worker, f"the worker did not start: {header.get('message', header)}")
        worker.ready = True
        self.missing_layers = [str(layer) for layer in header.get("missing", [])]
        if self._variables:
            parts: list[Any] = []
            self._send(worker, "variables", codec.encode_variables(self._variables, parts=parts), parts)
        if self._bridge.tools:
            self._send(worker, "tools", self._bridge.specs_text)
        return worker

    def _transmit(
        self, worker: _Worker, header: dict[str, Any], body: str, parts: Sequence[Any] = (), *, deadline: float
    ) -> int:
        """Send a request by `deadline` (a worker that stops reading cannot hold the host); return
        its number, which the worker's answer must carry. A worker that ran code since its last
        answer (a thread the code left behind) is stopped first; a tool's reply is part of its
        block, whose deadline bounds whatever runs meanwhile."""
        if header["op"] != "reply" and worker.busy_while_idle() > IDLE_CPU_SECONDS:
            raise self._lost(
                worker,
                f"the worker process kept running code between blocks (more than {IDLE_CPU_SECONDS:g} CPU seconds "
                "while no block ran: a thread the code started and left running), and was stopped",
            )
        try:
            return worker.send(header, body, parts, deadline)
        except OSError:  # a worker that died while idle (killed from outside) shows it here first
            raise self._lost(worker, worker.death()) from None
        except ChannelTimeout:
            raise self._lost(worker, "the worker process stopped taking what the host sent, and was stopped") from None

    def _receive(
        self, worker: _Worker, seq: int, deadline: float, *, code_running: bool
    ) -> tuple[dict[str, Any], str, list[bytes]]:
        """The worker's answer to request `seq`; anything else, or nothing by `deadline`, stops it."""
        header, body, parts = self._next_message(worker, deadline, code_running=code_running)
        if header.get("seq") != seq:
            raise self._lost(
                worker,
                f"the worker process answered out of turn (to {header.get('seq')!r:.30}, not {seq}), and was stopped",
            )
        return header, body, parts

    def _next_message(
        self, worker: _Worker, deadline: float, *, code_running: bool
    ) -> tuple[dict[str, Any], str, list[bytes]]:
        try:
            message = worker.channel.receive(deadline)
            if message[0].get("op") not in ("tool", "output"):  # the block goes on: a tool's reply is not checked
                worker.answered()
            return message
        except ChannelTimeout:
            if code_running:
                raise self._lost(
                    worker,
                    f"the code ran past its {self.timeout_seconds:g}-second time limit and did not stop (a call "
                    "that cannot be interrupted, such as C code), so its worker process was stopped",
                ) from None
            raise self._lost(worker, "the worker process did not answer in time and was stopped") from None
        except ChannelClosed:
            raise self._lost(worker, worker.death()) from None
        except ChannelError as error:
            raise self._lost(worker, f"the worker process sent {error}, and was stopped") from None

    @contextlib.contextmanager
    def _decoding(self, deadline: float) -> Iterator[None]:
        """What the host decodes from the worker: by the block's deadline, and within its memory allowance."""
        with codec.decoding_deadline(deadline), codec.decoding_memory(self._settings["max_memory_bytes"]):
            yield

    def _lost(self, worker: _Worker, what: str) -> SandboxError:
        """Stop `worker` for good; the next block starts a new one."""
        worker.stop(graceful=False)
        if self._worker is worker:
            self._worker = None
        return SandboxError(f"{what}; what the code defined is lost, and a new worker takes the next block")

    def _outcome(self, header: dict[str, Any], body: str, parts: list[bytes], deadline: float) -> CodeOutput:
        logs = str(header.get("logs", ""))
        if header.get("op") == "done":
            try:
                with self._decoding(deadline):
                    value = codec.loads(body, parts=parts)
            except codec.CodecError as error:
                raise ExecutionError(
                    f"the sandbox sent a value codeward refuses: {error}", logs=logs, error_type="CodecError"
                ) from None
            return CodeOutput(value, logs, bool(header.get("final")))
        if header.get("op") == "interrupted":  # `interrupt()`: the block stopped, the worker stays
            raise interrupted(logs)
        if header.get("op") == "error":
            kind = ExecutionTimeout if header.get("timeout") else ExecutionError
            raise kind(
                str(header.get("message", "")),
                logs=logs,
                traceback=str(header.get("traceback", "")),
                error_type=str(header.get("error_type") or "") or None,
            )
        raise SandboxError(f"the worker answered a block with {header.get('op')!r}", state_lost=False)


def _reaper_for(process: subprocess.Popen[bytes]) -> Reaper:
    """The reaper of a worker just started; a worker that cannot have one is killed at once,
    as nothing would end it with its host."""
    try:
        return Reaper(process.pid)
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise


class _Worker:
    """One worker process and its end of the socket."""

    def __init__(self, settings: dict[str, Any], env: dict[str, str]) -> None:
        import_path = worker_import_path(settings["authorized_imports"])
        host_end, worker_end = socket.socketpair()
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by stop())
        try:
            # Started from one long-lived thread: the worker dies with the thread that started it.
            self.process = _SPAWNER.submit(
                subprocess.Popen,
                [sys.executable, "-I", "-S", "-c", _BOOT, str(worker_end.fileno()), json.dumps(import_path)],
                pass_fds=(worker_end.fileno(),),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self.stderr,
                cwd="/",
                start_new_session=True,
            ).result()
        finally:
            worker_end.close()
        self.reaper = _reaper_for(self.process)
        #: Its pid, to find it by, and a tag of its own, as a pid is reused once the process is gone.
        self.sandbox_id = f"local-{self.process.pid}-{uuid.uuid4().hex[:8]}"
        header_limit, limit = frame_limits(settings)
        self.channel = Channel(host_end, limit=limit, header_limit=header_limit)
        self.start_seq = self.send({"op": "start", "host_pid": os.getpid(), **settings})
        self.ready = False
        self._stat = f"/proc/{self.process.pid}/stat"
        self._cpu_at_answer: float | None = None  # its CPU time when it last answered, where the system says
        self._overrun: str | None = None  # why the host stopped it, when it did
        self._folder_watch = FolderWatch(settings["working_folder"], DEFAULT_FOLDER_BYTES, self._stop_for)

    def _stop_for(self, reason: str) -> None:
        """Kill the worker from the host, for `reason`, which its death then gives."""
        self._overrun = reason
        with contextlib.suppress(OSError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def cpu_seconds(self) -> float | None:
        """The user and system CPU time of all its threads, from /proc; None where there is no /proc."""
        try:
            with open(self._stat, "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime and stime, fields 14 and 15

    def answered(self) -> None:
        """Mark the end of an answer: from here until the next request, the worker should be idle."""
        self._cpu_at_answer = self.cpu_seconds()

    def busy_while_idle(self) -> float:
        """CPU seconds it spent since its last answer (0 where that cannot be known)."""
        now = self.cpu_seconds()
        if now is None or self._cpu_at_answer is None:
            return 0.0
        return now - self._cpu_at_answer

    def send(
        self, header: dict[str, Any], body: str = "", parts: Sequence[Any] = (), deadline: float | None = None
    ) -> int:
        """Send a request under a number of its own, and return that number. The number is drawn
        at random: code in the worker that reads the current one still cannot write the answer to
        the next request ahead of time, to be taken for a later block's result."""
        seq = secrets.randbits(62)
        self.channel.send({**header, "seq": seq}, body, parts, deadline)
        return seq

    def interrupt(self) -> None:
        """Send SIGINT: a running block stops as from Ctrl-C; between blocks the worker lets it go."""
        try:
            self.process.send_signal(signal.SIGINT)
        except OSError:  # already gone: the block's answer says so
            pass

    def death(self) -> str:
        """What happened to a worker whose end of the socket closed, in words."""
        if self._overrun is not None:
            return f"the worker process was stopped by the host: {self._overrun}"
        try:
            code = self.process.wait(timeout=DEATH_SECONDS)
        except subprocess.TimeoutExpired:
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
        self.ready = False
        self._folder_watch.close()
        if graceful and self.process.poll() is None:
            try:
                self.channel.send({"op": "close"})
                self.process.wait(timeout=0.5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.reaper.release()
        self.channel.close()
        self.stderr.close()
