"""The local worker's confinement alone, for `codeward doctor --attack`: plain Python, no policy.

The local executor has two walls, and its policy refuses every probe before the operating system is
asked. That shows the policy holds, which no machine changes; what this machine decides is the second
wall, the worker's confinement (resource limits, no_new_privs, seccomp, Landlock), which depends on
the kernel. `ConfinedPython` is a fresh interpreter confined by the very call the local worker makes
(`confinement.confine`, with the worker's read paths, its working folder as the one writable place,
its memory limit and its environment), that then runs each block as plain Python: the probes meet
the kernel's walls alone. It dies with the doctor, and a block that kills it is a `SandboxError`.
"""

from __future__ import annotations

import json
import select
import shutil
import subprocess
import sys
import tempfile
from typing import Any

from codeward.executors.base import CodeOutput, ExecutionError, Executor, SandboxError
from codeward.tools import Tool

__all__ = ["ConfinedPython"]

#: Confines itself as the worker does, then runs each block sent as a JSON line, answering with one.
_RUNNER = r"""
import contextlib, ctypes, io, json, os, signal, sys
sys.path[:] = json.loads(sys.argv[1])
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the doctor
from codeward.executors.local.confinement import confine, interpreter_read_paths
folder, memory = sys.argv[2], int(sys.argv[3])
answers = os.fdopen(os.dup(1), "w")  # what a child process writes to fd 1 goes nowhere, not into the answers
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
missing = confine(read_paths=interpreter_read_paths(), write_paths=[folder], max_memory_bytes=memory, strict=False)
os.chdir(folder)
answers.write(json.dumps({"missing": missing}) + "\n")
answers.flush()
namespace = {"__name__": "__main__"}
while line := sys.stdin.readline():
    printed = io.StringIO()
    reply = {}
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            exec(compile(json.loads(line), "<probe>", "exec"), namespace)
    except BaseException as error:
        reply = {"error_type": type(error).__name__, "message": f"{type(error).__name__}: {error}"}
    reply["logs"] = printed.getvalue()[-100_000:]
    answers.write(json.dumps(reply) + "\n")
    answers.flush()
"""


class ConfinedPython(Executor):
    """Plain Python in a process confined as the local worker confines itself; `missing` names the
    layers this machine could not apply."""

    name = "local-confinement"
    #: The program the process runs (a test's control takes its confine() call away).
    runner = _RUNNER

    def __init__(self, max_memory_bytes: int = 1 << 30, timeout_seconds: float = 60) -> None:
        self.max_memory_bytes = max_memory_bytes
        self.timeout_seconds = timeout_seconds
        self.working_folder = tempfile.mkdtemp(prefix="codeward-confined-")
        self.missing: list[str] = []
        self._process: subprocess.Popen[str] | None = None
        try:
            self._start()
        except BaseException:
            shutil.rmtree(self.working_folder, ignore_errors=True)
            raise

    def _start(self) -> None:
        from codeward.executors.local.worker_process import worker_environment, worker_import_path

        argv = [sys.executable, "-I", "-c", self.runner, json.dumps(worker_import_path(())), self.working_folder]
        self._process = subprocess.Popen(
            [*argv, str(self.max_memory_bytes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=worker_environment(None),
            cwd="/",
            text=True,
            start_new_session=True,
        )
        ready = self._answer()
        self.missing = list(ready.get("missing") or [])

    def _answer(self) -> dict[str, Any]:
        """The process's next line, within the time limit; a process that ends or hangs is a sandbox that died."""
        process = self._process
        assert process is not None and process.stdout is not None
        readable, _, _ = select.select([process.stdout], [], [], self.timeout_seconds)
        line = process.stdout.readline() if readable else ""
        if not line:
            self._stop()
            how = "ran past its time limit" if not readable else "died"
            raise SandboxError(f"the confined interpreter {how}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def _stop(self) -> None:
        if self._process is not None:
            if self._process.poll() is None:
                self._process.kill()
            self._process.wait()
            for stream in (self._process.stdin, self._process.stdout):
                if stream is not None:
                    stream.close()
            self._process = None

    def run(self, code: str, on_output: Any = None) -> CodeOutput:
        if self._process is None:
            self._start()
        assert self._process is not None and self._process.stdin is not None
        try:
            self._process.stdin.write(json.dumps(code) + "\n")
            self._process.stdin.flush()
        except OSError as error:
            self._stop()
            raise SandboxError(f"the confined interpreter died: {error}") from error
        answer = self._answer()
        logs = str(answer.get("logs", ""))
        if "error_type" in answer:
            raise ExecutionError(str(answer["message"]), logs=logs, error_type=str(answer["error_type"]))
        return CodeOutput(output=None, logs=logs, is_final_answer=False)

    def send_variables(self, variables: dict[str, Any]) -> None:
        if variables:
            raise ValueError("the confined interpreter takes no variables")

    def send_tools(self, tools: dict[str, Tool]) -> None:
        if tools:
            raise ValueError("the confined interpreter takes no tools")

    def close(self) -> None:
        self._stop()
        shutil.rmtree(self.working_folder, ignore_errors=True)
