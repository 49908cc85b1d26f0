"""Worker processes, seen from the parent: start, give a job, cancel, kill.

Why processes rather than threads: a job cannot be stopped from outside a
thread (Python has no thread kill), so a per-job timeout or Ctrl-C could only
ask politely; a process can be asked (its sandbox closes cleanly) and
then, after a grace period, killed with everything it started. A crash or a
runaway allocation in one job takes one worker down, not the batch. And the
local executor runs the model's code in the worker's own interpreter, so
processes are also what lets two jobs use two cores. Workers are reused from
job to job (a fresh sandbox each time) so the interpreter start is paid once
per worker, not once per job; `bench/batch.py` measures what this costs
against running the same jobs in-process.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

import codeward
from codeward.executors.codec import dumps

__all__ = ["Worker"]

_STDERR_TAIL = 2000


def _environment() -> dict[str, str]:
    """The parent's environment, with codeward importable from wherever the parent found it."""
    environ = dict(os.environ)
    root = str(Path(codeward.__file__).resolve().parents[1])
    existing = environ.get("PYTHONPATH")
    environ["PYTHONPATH"] = root + (os.pathsep + existing if existing else "")
    return environ


class Worker:
    """One worker process and the job it is running, if any."""

    def __init__(self, audit: Path | None, runs: Path | None, warm_pool: bool = True) -> None:
        read_end, write_end = os.pipe()
        self.stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the worker; closed by close())
        command = [sys.executable, "-m", "codeward.batch.worker", str(write_end)]
        command += ["--audit", str(audit)] if audit is not None else []
        command += ["--runs", str(runs)] if runs is not None else []
        command += [] if warm_pool else ["--no-warm-pool"]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=self.stderr,
            pass_fds=(write_end,),
            start_new_session=True,  # its own process group: killed as one, and Ctrl-C is ours to relay
            env=_environment(),
        )
        os.close(write_end)
        self.channel = read_end
        os.set_blocking(read_end, False)
        self._buffer = b""
        self.job: Any = None
        self.block: dict[str, Any] | None = None  # the audit record of the code block running now
        self.started_at: float | None = None
        self.deadline: float | None = None
        self.cancel_reason: str | None = None
        self.kill_at: float | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def idle(self) -> bool:
        return self.job is None

    def assign(self, job: Any) -> None:
        self.job = job
        self.started_at = self.deadline = self.cancel_reason = self.kill_at = None
        self._send(job.to_dict())

    def _send(self, message: dict[str, Any]) -> None:
        """A line on the worker's stdin; a worker that died already is noticed by its closed channel."""
        channel = self.process.stdin
        if channel is None:  # never: the worker is started with a pipe for its input
            raise RuntimeError("the batch worker was started without an input channel")
        try:
            channel.write((dumps(message) + "\n").encode("utf-8"))
            channel.flush()
        except (BrokenPipeError, ValueError):
            pass

    def job_started(self, now: float) -> None:
        self.started_at = now
        timeout = self.job.timeout_seconds if self.job is not None else None
        self.deadline = now + timeout if timeout else None

    def finish_job(self) -> None:
        self.job = self.block = None
        self.started_at = self.deadline = self.cancel_reason = self.kill_at = None

    def read_events(self) -> tuple[list[dict[str, Any]], bool]:
        """Whole event lines received so far, and whether the channel is closed (the worker exited)."""
        closed = False
        while True:
            try:
                chunk = os.read(self.channel, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                closed = True
                break
            self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()], closed

    def cancel(self, reason: str, grace_seconds: float) -> None:
        """Ask the job to stop (its sandbox closes); kill the worker if it has not within the grace period."""
        if self.cancel_reason is not None or self.job is None:
            return
        self.cancel_reason = reason
        self.kill_at = time.monotonic() + grace_seconds
        self._send({"cancel": self.job.id})

    def kill(self) -> None:
        """Kill the worker's whole process group, and reap it."""
        self._signal(signal.SIGKILL, group=True)
        self.process.wait()

    def _signal(self, signum: int, group: bool = False) -> None:
        try:
            if group:
                os.killpg(self.process.pid, signum)
            else:
                os.kill(self.process.pid, signum)
        except ProcessLookupError:
            pass

    def stop(self, wait_seconds: float) -> None:
        """Close its stdin (the worker finishes and exits); kill it if it does not in time."""
        self._close_stdin()
        try:
            self.process.wait(timeout=wait_seconds)
        except subprocess.TimeoutExpired:
            self.kill()
        self._signal(signal.SIGKILL, group=True)  # anything it started and left behind
        self.release()

    def _close_stdin(self) -> None:
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()

    def release(self) -> None:
        """Close the parent's ends of the worker's pipes (once it has exited)."""
        with contextlib.suppress(OSError):
            os.close(self.channel)
        self._close_stdin()
        self.stderr.close()

    def exit_description(self) -> str:
        """How the worker ended, with the end of what it wrote to stderr."""
        code = self.process.poll()
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        self.stderr.seek(0)
        tail = self.stderr.read().decode("utf-8", "replace")[-_STDERR_TAIL:].strip()
        return f"the worker process {how}" + (f"; its stderr ends:\n{tail}" if tail else "")
