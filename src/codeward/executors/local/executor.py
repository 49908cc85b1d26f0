"""`LocalExecutor`: the policy interpreter, in a confined worker process by default.

The policy (`interpreter`) makes the model's code refuse clearly and fast; the
worker process (`process`, `worker`) and the operating system's layers around it
(`confinement`) contain what a policy inside a process cannot: C code that
hangs, crashes or allocates without asking. ``isolation="in_process"`` keeps the
interpreter in the host's own process, for values the codec cannot carry.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import shutil
import tempfile
import time
import warnings
import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codeward.executors.base import FINAL_ANSWER_TOOL, BlockUsage, CodeOutput, ExecutionError, Executor, ExecutorError
from codeward.executors.codec import CodecError
from codeward.executors.files import FolderFiles
from codeward.executors.live import BlockStops, LiveOutput, OutputCallback
from codeward.executors.local.data_policy import DataPolicy
from codeward.executors.local.imports import DEFAULT_AUTHORIZED_IMPORTS, checked_import_entries, machine_modules_named
from codeward.executors.local.interpreter import Interpreter, ToolHandle
from codeward.executors.settings import (
    DEFAULT_PRINT_OUTPUTS_LENGTH,
    checked_names,
    checked_seconds,
    checked_tool_names,
    checked_variable_names,
)
from codeward.tools import called
from codeward.usage import user_stacklevel

if TYPE_CHECKING:
    from codeward.executors.local.process import WorkerExecutor
    from codeward.tools import Tool

__all__ = ["CONFINEMENTS", "ISOLATIONS", "LocalExecutor"]

ISOLATIONS = ("process", "in_process")
CONFINEMENTS = ("auto", "strict", "none")

logger = logging.getLogger(__name__)
_reported_missing: set[tuple[str, ...]] = set()


class LocalExecutor(Executor):
    """Runs the model's code on this machine, under a restricted compiler and runtime guards.

    Args:
        authorized_imports: modules the code may import, added to
            `DEFAULT_AUTHORIZED_IMPORTS`; ``"pkg.*"`` allows a package's
            submodules by name, ``"*"`` allows every module (including ``os``).
        timeout_seconds: wall-clock limit per block, host tools it calls
            included. The block is stopped while it runs; in a worker, one that
            does not stop (a long C call, code that undid its alarm) has its worker
            killed a second later, and one whose host tool is still running then
            has it killed when the tool returns (a tool on the host cannot be
            stopped mid-call).
        max_operations: loop iterations and function calls per block.
        max_print_outputs_length: characters of printed output kept per block.
        allowed_paths: folders that numpy/pandas file functions may read and
            write (and, in a confined worker, the only ones it can open at all
            besides the interpreter's own); without it they are refused.
        max_value_size: items or characters one operation may build.
        max_int_bits: size of the integers arithmetic may build.
        max_memory_bytes: in a worker, the memory of the whole worker process,
            across blocks; in process, the growth of the host's memory allowed per
            block (None: unchecked).
        isolation: ``"process"`` runs the code in a worker process that is
            replaced when it dies; ``"in_process"`` runs it in this process, with
            the policy alone (values the codec cannot carry, like a live database
            connection, need it).
        confinement: for the worker, ``"auto"`` applies every layer this machine
            has (resource limits, no_new_privs, seccomp, Landlock) and logs once
            which it could not; ``"strict"`` refuses to start where one is missing;
            ``"none"`` applies none.
        env: environment variables for the worker, which otherwise gets none of
            the host's.

    The code's `open()` reaches the files of its working folder and nothing else: a fresh
    folder, owner-only, removed by `close()`, that `files` shows to the host (and that a
    confined worker may write, as it may `allowed_paths`).
    """

    name = "local"

    def __init__(
        self,
        authorized_imports: Iterable[str] = (),
        timeout_seconds: float = 30,
        max_operations: int = 10_000_000,
        max_print_outputs_length: int = DEFAULT_PRINT_OUTPUTS_LENGTH,
        allowed_paths: Sequence[str | Path] | None = None,
        *,
        max_value_size: int = 10_000_000,
        max_int_bits: int = 1_000_000,
        max_memory_bytes: int | None = 1 << 30,
        isolation: str = "process",
        confinement: str = "auto",
        env: Mapping[str, str] | None = None,
    ) -> None:
        authorized_imports = checked_names("authorized_imports", authorized_imports, "module names")
        if isinstance(max_operations, bool) or not isinstance(max_operations, (int, float)) or max_operations <= 0:
            raise ValueError(f"max_operations must be a positive number, got {max_operations!r}")
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be one of {', '.join(map(repr, ISOLATIONS))}, got {isolation!r}")
        if confinement not in CONFINEMENTS:
            raise ValueError(f"confinement must be one of {', '.join(map(repr, CONFINEMENTS))}, got {confinement!r}")
        if env is not None and isolation == "in_process":
            raise ValueError("env= sets the worker's environment; with isolation='in_process' there is no worker")
        self.isolation = isolation
        self.confinement = confinement
        entries = checked_import_entries((*DEFAULT_AUTHORIZED_IMPORTS, *authorized_imports))
        if machine := machine_modules_named(entries):
            left = "nothing (isolation='in_process')" if isolation == "in_process" else "only the worker's confinement"
            warnings.warn(
                f"authorized_imports names {', '.join(map(repr, machine))}, a module of the machine: the code gets "
                "all of it (its functions; for builtins eval, exec and globals(), which run code the policy never "
                f"saw), and {left} then stands between the code and this machine",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
        self.authorized_imports = tuple(dict.fromkeys(entries))
        #: The folders numpy and pandas may reach; the worker is given these, resolved here.
        self.data_policy = DataPolicy(allowed_paths)
        self.timeout_seconds = checked_seconds("timeout_seconds", timeout_seconds)
        self.max_operations = int(max_operations)
        self.max_print_outputs_length = int(max_print_outputs_length)
        self.max_memory_bytes = max_memory_bytes
        settings: dict[str, Any] = {
            "authorized_imports": self.authorized_imports,
            "timeout_seconds": self.timeout_seconds,
            "max_operations": self.max_operations,
            "max_print_outputs_length": self.max_print_outputs_length,
            "allowed_paths": None if allowed_paths is None else [str(root) for root in self.data_policy.roots],
            "max_value_size": max_value_size,
            "max_int_bits": max_int_bits,
            "max_memory_bytes": max_memory_bytes,
            "working_folder": tempfile.mkdtemp(prefix="codeward-local-"),
        }
        #: The code's working folder, fresh and owner-only: what its `open()` reaches, and `files` shows.
        self.working_folder: str = settings["working_folder"]
        self._folder_files = FolderFiles(self.working_folder)
        self.files = self._folder_files
        # removed by close(), or, for an executor its caller forgot, when it is collected or the program ends
        self._remove_folder = weakref.finalize(self, shutil.rmtree, self.working_folder, ignore_errors=True)
        self._closed = False
        self._stops = BlockStops()  # in process: the worker keeps its own
        self._tools: dict[str, Tool] = {}
        self._tool_calls = 0  # in process: the calls the running block made
        self._interpreter: Interpreter | None = None
        self._worker: WorkerExecutor | None = None
        if isolation == "in_process":
            self._interpreter = Interpreter(**settings, host_process=True)
        else:
            self._worker = _start_worker(settings, confinement, env)

    @property
    def sandbox_id(self) -> str | None:
        """The worker process the code runs in (``local-PID-TAG``); None in process, where there is none."""
        return None if self._worker is None else self._worker.sandbox_id

    @property
    def missing_layers(self) -> list[str]:
        """The confinement layers the worker could not apply on this machine."""
        return [] if self._worker is None else list(self._worker.missing_layers)

    # The contract -----------------------------------------------------------
    def send_variables(self, variables: dict[str, Any]) -> None:
        """Make each item a variable of the code (names must be public identifiers)."""
        self._check_open()
        checked_variable_names(variables, tools=self._tools)
        if self._worker is not None:
            try:
                self._worker.send_variables(variables)
            except CodecError as error:
                raise _not_for_the_worker(error) from None
        else:
            assert self._interpreter is not None
            self._interpreter.send_variables(variables)

    def send_tools(self, tools: dict[str, Tool]) -> None:
        """Make each tool callable by name; `final_answer` ends the block with its argument."""
        self._check_open()
        checked_tool_names(tools)
        self._tools.update(tools)
        if self._worker is not None:
            self._worker.send_tools(self._tools)
        else:
            assert self._interpreter is not None
            self._interpreter.send_tools(
                {
                    n: ToolHandle(n, t.description, functools.partial(self._calling, t), n == FINAL_ANSWER_TOOL)
                    for n, t in self._tools.items()
                }
            )

    def run(self, code: str, on_output: OutputCallback | None = None) -> CodeOutput:
        self._check_open()
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, got {type(code).__name__}")
        if self._worker is not None:
            output = self._worker.run(code, on_output)
            self._report_missing_layers()
            return output
        assert self._interpreter is not None
        live = LiveOutput(_in_host_context(on_output), self.max_print_outputs_length)
        self._tool_calls = 0
        started, cpu = time.monotonic(), time.thread_time()
        try:
            with self._stops.running(self._interpreter.interrupt):
                output = self._interpreter.run(code, live)
        except ExecutionError as error:
            error.usage = self._in_process_usage(started, cpu, error.logs)
            live.raise_failure()  # the callback's failure stopped the block: it is what the caller sees
            raise
        output.usage = self._in_process_usage(started, cpu, output.logs)
        live.raise_failure()
        return output

    def _calling(self, tool: Tool, *args: Any, **kwargs: Any) -> Any:
        self._tool_calls += 1
        return called(tool, *args, **kwargs)

    def _in_process_usage(self, started: float, cpu: float, logs: str) -> BlockUsage:
        """In process, the block runs on the caller's thread: its CPU time is that thread's; its memory
        is the host's own, which has no peak of the block's to read."""
        return BlockUsage(
            wall_seconds=time.monotonic() - started,
            cpu_seconds=round(time.thread_time() - cpu, 3),
            output_bytes=len(logs.encode("utf-8", "surrogatepass")),
            tool_calls=self._tool_calls,
            unmeasured={
                "peak_memory_bytes": "in process, the block's memory is the host's own",
                "egress_bytes": "the local executor does not watch the network",
            },
        )

    async def arun(self, code: str, on_output: OutputCallback | None = None) -> CodeOutput:
        """`run`, awaited. A worker's socket is watched by the event loop, with no thread per block; in
        process, the block runs in the shared pool of threads (`Executor.arun`)."""
        self._check_open()
        if self._worker is None:
            return await super().arun(code, on_output)
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, got {type(code).__name__}")
        output = await self._worker.arun(code, on_output)
        self._report_missing_layers()
        return output

    async def asend_variables(self, variables: dict[str, Any]) -> None:
        self._check_open()
        if self._worker is None:
            return await super().asend_variables(variables)
        checked_variable_names(variables, tools=self._tools)
        try:
            await self._worker.asend_variables(variables)
        except CodecError as error:
            raise _not_for_the_worker(error) from None

    async def asend_tools(self, tools: dict[str, Tool]) -> None:
        self._check_open()
        if self._worker is None:
            return await super().asend_tools(tools)
        checked_tool_names(tools)
        self._tools.update(tools)
        await self._worker.asend_tools(self._tools)

    async def aclose(self) -> None:
        if self._worker is not None and not self._closed:
            await self._worker.aclose()  # the worker's exit awaited; the rest takes no wait
        self.close()

    def interrupt(self) -> None:
        """Stop the running block from another thread: a worker gets SIGINT, as from Ctrl-C; in
        process, the block is stopped at its next bytecode (or at once from a sleep)."""
        if self._worker is not None:
            self._worker.interrupt()
        else:
            self._stops.interrupt()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._worker is not None:
                self._worker.close()
            if self._interpreter is not None:
                self._interpreter.close()
            self._folder_files.close()
            self._remove_folder()

    def _report_missing_layers(self) -> None:
        missing = tuple(self.missing_layers)
        if missing and missing not in _reported_missing:
            _reported_missing.add(missing)
            logger.warning(
                "the local executor's worker runs without %s on this machine (codeward doctor says why)",
                ", ".join(missing),
            )

    def _check_open(self) -> None:
        if self._closed:
            raise ExecutorError("this LocalExecutor is closed; create a new one")


def _not_for_the_worker(error: CodecError) -> CodecError:
    return CodecError(
        f"{error}. A live object (a connection, an open file) cannot go to the worker process; "
        "pass data instead, or use LocalExecutor(isolation='in_process'), which keeps such values "
        "in this process under the policy alone"
    )


def _in_host_context(on_output: OutputCallback | None) -> OutputCallback | None:
    """In process the callback is called from inside the block, whose context variables are the
    code's own (numpy's settings, say): it runs in a copy of the caller's instead, as elsewhere."""
    if on_output is None:
        return None
    host = contextvars.copy_context()
    return lambda stream, text: host.run(on_output, stream, text)


def _start_worker(settings: dict[str, Any], confinement: str, env: Mapping[str, str] | None) -> WorkerExecutor:
    from codeward.executors.local.process import WorkerExecutor

    if confinement == "strict":
        from codeward.executors.local.confinement import missing_layers

        missing = missing_layers()
        if missing:
            reasons = "; ".join(f"{layer}: {why}" for layer, why in missing.items())
            raise ExecutorError(
                f"confinement='strict' needs every layer, and this machine lacks {reasons}. "
                "Use confinement='auto' to run with the layers it has"
            )
    return WorkerExecutor({**settings, "confinement": confinement}, env)
