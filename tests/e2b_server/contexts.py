"""Code contexts: one real IPython kernel each, and the translation of its messages into E2B's.

E2B's code-interpreter server relays Jupyter messages as JSON objects, one per
line; this module reproduces the relay for one `execute` request:
``number_of_executions`` when the kernel accepts the code, ``stdout``/``stderr``
for streams, ``result`` for displays and the cell's value (``is_main_result``),
one ``error`` per execution, and the end when the kernel goes idle. A kernel that
dies mid-execution is restarted and reported as E2B reports it
(``ContextRestarting``); a caller that goes away gets its execution interrupted.
"""

from __future__ import annotations

import datetime
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from queue import Empty
from typing import Any

from jupyter_client import BlockingKernelClient, KernelManager

from codeward.executors.jupyter import clean_environment

#: Lines E2B reads from a Jupyter display bundle into named fields; the rest go to `extra`.
_MIME_FIELDS = {
    "text/html": "html",
    "text/markdown": "markdown",
    "image/svg+xml": "svg",
    "image/png": "png",
    "image/jpeg": "jpeg",
    "application/pdf": "pdf",
    "text/latex": "latex",
    "application/json": "json",
    "application/javascript": "javascript",
    "e2b/data": "data",
}
_POLL = 0.05
_LIVENESS_INTERVAL = 0.25


def result_line(bundle: dict[str, Any], *, is_main_result: bool) -> dict[str, Any]:
    """A display bundle as E2B's `Result`: known MIME types as fields, the others under `extra`."""
    data = dict(bundle)
    line: dict[str, Any] = {"type": "result"}
    text = data.pop("text/plain", None)
    if text and text.startswith("'") and text.endswith("'"):
        text = text[1:-1]  # E2B strips the quotes of a str's repr
    if text is not None:
        line["text"] = text
    for mime, field in _MIME_FIELDS.items():
        if mime in data:
            line[field] = data.pop(mime)
    line["extra"] = data
    line["is_main_result"] = is_main_result
    return line


class Context:
    """One kernel, run one execution at a time, as E2B's per-context lock does."""

    def __init__(self, cwd: str, language: str = "python") -> None:
        self.id = str(uuid.uuid4())
        self.language = language
        self.cwd = cwd
        self.lock = threading.Lock()
        self._swap = threading.RLock()
        self._generation = 0
        self._manager = KernelManager(kernel_name="python3")
        self._manager.start_kernel(cwd=cwd, env=clean_environment())  # a fresh machine: none of the host's secrets
        self._client = self._connect()

    def describe(self) -> dict[str, str]:
        return {"id": self.id, "language": self.language, "cwd": self.cwd}

    def _connect(self) -> BlockingKernelClient:
        client = self._manager.client()
        client.start_channels()
        client.wait_for_ready(timeout=60)
        return client

    def restart(self) -> None:
        """A fresh kernel in place of the old one: everything defined in it is gone.

        An execution still running in the old kernel ends with E2B's
        ``UnexpectedEndOfExecution`` error.
        """
        with self._swap:
            self._generation += 1
            self._client.stop_channels()
            self._manager.restart_kernel(now=True)
            self._client = self._connect()

    def shutdown(self) -> None:
        self._client.stop_channels()
        if self._manager.has_kernel:
            self._manager.shutdown_kernel(now=True)

    def kill(self) -> None:
        """Kill the kernel process abruptly, as an out-of-memory kill would."""
        self._manager.kill_kernel()

    def execute(
        self,
        code: str,
        env_vars: dict[str, str] | None,
        emit: Callable[[dict[str, Any]], bool],
        gone: Callable[[], bool],
        keepalive: float,
    ) -> None:
        """Run `code`, handing E2B's lines to `emit`, with a keepalive line after `keepalive` s of silence.

        When the caller goes away (`gone()`, or `emit` returns False) the kernel is
        interrupted, as E2B's server does, and the rest of the execution is drained unseen.
        """
        if gone():
            # The caller left while waiting for the context (a probe that timed out): nobody
            # reads the result, and its interrupt would land in whatever runs next.
            return
        generation = self._generation
        if env_vars:
            code = _set_env_code(env_vars) + "\n" + code
        with self._swap:
            msg_id = self._client.execute(code, store_history=True, allow_stdin=False, stop_on_error=True)
        relay = _Relay()
        listening = True
        last_sent = time.monotonic()
        next_check = last_sent + _LIVENESS_INTERVAL
        while not relay.done:
            if listening and gone():
                listening = self._stop_listening(generation)
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + _LIVENESS_INTERVAL
                if generation != self._generation:
                    emit(
                        {
                            "type": "error",
                            "name": "UnexpectedEndOfExecution",
                            "value": "Connection to the execution was closed before the execution was finished",
                            "traceback": "",
                        }
                    )
                    return
                if not self._manager.is_alive():
                    self.restart()
                    emit(
                        {
                            "type": "error",
                            "name": "ContextRestarting",
                            "value": "Context was restarted",
                            "traceback": "",
                        }
                    )
                    return
            for line in self._lines_for(msg_id, relay, generation):
                last_sent = time.monotonic()
                if listening and not emit(line):
                    listening = self._stop_listening(generation)
            if listening and time.monotonic() - last_sent >= keepalive:
                last_sent = time.monotonic()
                if not emit({"type": "keepalive"}):
                    listening = self._stop_listening(generation)
        if env_vars:
            self._run_quietly(_unset_env_code(env_vars))

    def _stop_listening(self, generation: int) -> bool:
        """Interrupt the execution whose caller left, unless a restart already replaced its kernel."""
        with self._swap:
            if generation == self._generation:
                self._manager.interrupt_kernel()
        return False

    def _lines_for(self, msg_id: str, relay: _Relay, generation: int) -> list[dict[str, Any]]:
        """The lines from messages that arrived for `msg_id`, waiting a moment for the first."""
        lines: list[dict[str, Any]] = []
        with self._swap:
            if generation != self._generation:
                return lines
            for get, handle, wait in (
                (self._client.get_iopub_msg, relay.iopub, _POLL),
                (self._client.get_shell_msg, relay.reply, 0),
            ):
                while True:
                    try:
                        msg = get(timeout=wait)
                    except Empty:
                        break
                    wait = 0
                    if msg["parent_header"].get("msg_id") == msg_id:
                        lines.extend(handle(msg))
        return lines

    def _run_quietly(self, code: str) -> None:
        self._client.execute(code, silent=True, store_history=False)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                self._client.get_shell_msg(timeout=0.5)
                return
            except Empty:
                continue


class _Relay:
    """The state of one execution's translation: input accepted, error already sent, finished."""

    def __init__(self) -> None:
        self.accepted = False
        self.errored = False
        self.done = False

    def iopub(self, msg: dict[str, Any]) -> Iterator[dict[str, Any]]:
        kind, content = msg["msg_type"], msg["content"]
        if kind == "execute_input":
            self.accepted = True
            yield {"type": "number_of_executions", "execution_count": content["execution_count"]}
        elif kind == "stream":
            stamp = msg["header"].get("date")
            if isinstance(stamp, datetime.datetime):
                stamp = stamp.isoformat()
            yield {"type": content["name"], "text": content["text"], "timestamp": stamp}
        elif kind in ("display_data", "execute_result"):
            yield result_line(content["data"], is_main_result=kind == "execute_result")
        elif kind == "error":
            yield from self._error(content["ename"], content["evalue"], content["traceback"])
        elif kind == "status" and content["execution_state"] == "idle" and self.accepted:
            self.done = True

    def reply(self, msg: dict[str, Any]) -> Iterator[dict[str, Any]]:
        content = msg["content"]
        if content["status"] == "error":
            yield from self._error(content.get("ename", ""), content.get("evalue", ""), content.get("traceback", []))
        elif content["status"] == "abort":
            self.done = True
            yield {"type": "error", "name": "ExecutionAborted", "value": "Execution was aborted", "traceback": ""}

    def _error(self, name: str, value: str, traceback: list[str]) -> Iterator[dict[str, Any]]:
        if not self.errored:
            self.errored = True
            yield {"type": "error", "name": name, "value": value, "traceback": "".join(traceback)}


def _set_env_code(env_vars: dict[str, str]) -> str:
    return "import os; os.environ.update(" + repr(dict(env_vars)) + ")"


def _unset_env_code(env_vars: dict[str, str]) -> str:
    return "import os\nfor _k in " + repr(sorted(env_vars)) + ": os.environ.pop(_k, None)\ndel _k"
