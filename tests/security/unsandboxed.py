"""The same code with no sandbox at all: the control of every attack, and the switch that turns
the sandbox off to prove the attack suite notices.

`Unsandboxed` runs each block with plain `exec` and the real builtins, as a host
that trusted the model would. Each block runs in a forked copy of this process
(which replays the earlier blocks first), so an attack that works harms only the
copy: the copy's files are the host's files (a canary written there is written),
but a hang, a crash or `SystemExit` ends the copy, not the test run. The copy reports
with its own references to `json`'s functions, so code that patches the module changes
only what the code itself sees. The copy's
memory may grow by `memory_room` at most, and it gets `CONTROL_SECONDS`.
"""

from __future__ import annotations

import ast
import builtins
import os
import resource
import select
import signal
import warnings
from json import dumps, loads
from typing import Any

from codeward.executors.base import FINAL_ANSWER_TOOL, CodeOutput, ExecutionError, Executor, FinalAnswerSignal
from codeward.executors.local.interpreter import ToolHandle
from codeward.platform.tools import Tool

#: How much more memory the copy may write to than this process has; past it, MemoryError.
#: Room enough for pandas' parsers, and a safety net for the machine.
MEMORY_ROOM = 4 * 1024**3
#: The local executor's default memory allowance: an attack "exhausts" when it wants more.
ALLOWANCE = 1024**3
#: Seconds a block may take before the copy counts as hung.
CONTROL_SECONDS = 2.0
#: Seconds an exhausting payload runs before it counts as hung: its harm is endless (or astronomically
#: long), so that it is still running after a second shows it on any machine. The attack suite waits
#: this long for each such control, and with the sandbox off for each attack.
EXHAUSTED_SECONDS = 1.0


class HostHarmed(Exception):
    """The unsandboxed block hung, crashed, ran out of memory or stopped the process it ran in.

    Deliberately not an `ExecutionError`: an attack test that receives it has met no sandbox."""

    def __init__(self, how: str) -> None:
        super().__init__(how)
        self.how = how


class Unsandboxed(Executor):
    """Plain `exec` with full builtins; takes (and ignores) the LocalExecutor's limit options."""

    name = "unsandboxed"

    def __init__(
        self,
        timeout_seconds: float | None = None,
        *,
        memory_room: int = MEMORY_ROOM,
        hung_after: float = CONTROL_SECONDS,
        **ignored_limits: Any,
    ) -> None:
        """`hung_after`: the most seconds a block may take, whatever `timeout_seconds`, before the copy counts as hung."""
        self.seconds = hung_after if timeout_seconds is None else min(float(timeout_seconds), hung_after)
        self.memory_room = memory_room
        self.namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
        self.blocks: list[str] = []

    def send_variables(self, variables: dict[str, Any]) -> None:
        self.namespace.update(variables)

    def send_tools(self, tools: dict[str, Tool]) -> None:
        self.namespace.update(
            {name: ToolHandle(name, tool.description, tool, name == FINAL_ANSWER_TOOL) for name, tool in tools.items()}
        )

    def run(self, code: str, on_output: Any = None) -> CodeOutput:
        report = self._run_in_copy(code)
        if "harm" in report:
            raise HostHarmed(report["harm"])
        if "error_type" in report:
            raise ExecutionError(report["message"], error_type=report["error_type"])
        self.blocks.append(code)
        return CodeOutput(output=report.get("value"), logs="", is_final_answer=report.get("final", False))

    def install_packages(self, packages: list[str]) -> list[str]:
        raise NotImplementedError("the unsandboxed control installs nothing")

    def close(self) -> None:
        self.blocks.clear()

    def _run_in_copy(self, code: str) -> dict[str, Any]:
        read_end, write_end = os.pipe()
        with warnings.catch_warnings():
            # Python 3.12+ warns that a forked copy of a threaded process may deadlock; the copy only
            # runs the block, and a copy that hangs is killed at the time limit like any other.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # the copy: never returns into the test run
            os.close(read_end)
            try:
                _cap_memory(self.memory_room)
                report = _run_blocks(self.namespace, [*self.blocks, code])
                os.write(write_end, dumps(report).encode())
            finally:
                os._exit(0)
        os.close(write_end)
        try:
            ready, _, _ = select.select([read_end], [], [], self.seconds)
            if not ready:
                os.kill(pid, signal.SIGKILL)
                return {"harm": f"the code was still running after {self.seconds:g} s"}
            data = b"".join(iter(lambda: os.read(read_end, 65536), b""))
        finally:
            os.close(read_end)
            _reap(pid)
        if not data:
            return {"harm": "the process running the code died"}
        return loads(data)


def _run_blocks(namespace: dict[str, Any], blocks: list[str]) -> dict[str, Any]:
    value: Any = None
    try:
        for block in blocks:
            value = _exec(block, namespace)
    except FinalAnswerSignal as answer:
        return {"value": _plain(answer.value), "final": True}
    except MemoryError as error:
        return {"error_type": "MemoryError", "message": f"MemoryError: {error}"}
    except Exception as error:
        return {"error_type": type(error).__name__, "message": f"{type(error).__name__}: {error}"}
    except BaseException as error:
        return {"harm": f"{type(error).__name__} stopped the process"}
    return {"value": _plain(value)}


def _exec(code: str, namespace: dict[str, Any]) -> Any:
    tree = ast.parse(code)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "<unsandboxed>", "exec"), namespace)
    if last is None:
        return None
    return eval(compile(ast.Expression(last.value), "<unsandboxed>", "eval"), namespace)


def _plain(value: Any) -> Any:
    """The value if JSON carries it, else only its type: a repr could run code or crash."""
    try:
        dumps(value)
    except (TypeError, ValueError, RecursionError):
        return f"<{type(value).__name__}>"
    return value


def _cap_memory(room: int) -> None:
    """Cap the memory the copy may write to (RLIMIT_DATA: heap and private mappings), not its
    address space: threads of numpy and pandas reserve address space they never use."""
    with open("/proc/self/status") as status:
        data_kib = next(int(line.split()[1]) for line in status if line.startswith("VmData:"))
    resource.setrlimit(resource.RLIMIT_DATA, (data_kib * 1024 + room, resource.RLIM_INFINITY))


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
