"""The policy interpreter: the model's code compiled under a policy and run as CPython bytecode.

It runs wherever `LocalExecutor` puts it: in a worker process (`worker`), or in
the host's own process with ``isolation="in_process"``. Each block is compiled by `policy` (RestrictedPython plus our pass),
then run as ordinary bytecode against one globals dict that persists between
blocks. The names the compiled code calls are supplied by `guards`; the
import allow-list by `imports`; size caps and the operation budget by
`limits`; the time limit by `watchdog`; numpy and pandas file,
pickle and eval routes by `data_policy`.
"""

from __future__ import annotations

import re
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from codeward.executors import codec
from codeward.executors.base import (
    CodeOutput,
    ExecutionError,
    ExecutionTimeout,
    FinalAnswerSignal,
)
from codeward.executors.kernel import prelude
from codeward.executors.kernel.cells import request_error
from codeward.executors.live import LiveOutput
from codeward.executors.local.block_cache import BlockCache
from codeward.executors.local.crossing import (
    SCALARS,
    SHOWN_LIMIT,
    CodeSettings,
    code_object_in,
    final_answer_refused,
    vetted_from_host,
)
from codeward.executors.local.data_policy import DataPolicy
from codeward.executors.local.guards import SANDBOX_MODULE, Guards
from codeward.executors.local.imports import ImportGate
from codeward.executors.local.instrumenter import RESULT_NAME
from codeward.executors.local.library_trust import exit_refused
from codeward.executors.local.limits import (
    BlockInterrupted,
    BudgetSpentOutsideRun,
    Limits,
    MemoryLimitReached,
    OperationLimitReached,
    SandboxSignal,
    TimeLimitReached,
    make_tick,
)
from codeward.executors.local.output import BlockOutput, capture_output
from codeward.executors.local.policy import CodeRefused
from codeward.executors.local.receivers import PLAIN_RECEIVER
from codeward.executors.local.watchdog import WATCHDOG, AlarmWatchdog, Watchdog
from codeward.executors.local.working_folder import folder_open
from codeward.tools import ToolCallError
from codeward.wall_events import EventLedger, recording

__all__ = ["Interpreter", "ToolHandle", "interrupted"]

_FILENAME = "<code block {}>"
#: Any block's `_FILENAME`, its lines kept or not.
_BLOCK_FILE = re.compile(re.escape(_FILENAME).replace(re.escape("{}"), "[0-9]+"))
#: The characters of the blocks' sources kept for their tracebacks, the newest blocks' first (the
#: running block's always): a sandbox that runs many thousands of blocks holds no more than this. A
#: frame of a block whose source has gone (a function it defined, called much later) shows its
#: place without its line.
KEPT_SOURCE_CHARACTERS = 4_000_000
#: The tick of the code's functions outside its blocks: the code runs only while a block (or a text
#: worked out under a block's limits) is watched, never when a program or library calls it later
#: (a callback, a cache's comparison, an object's method it left somewhere): that raises at once.
_BETWEEN_BLOCKS = make_tick(0, BudgetSpentOutsideRun)
_ABSENT_BUILTINS = frozenset(
    {"eval", "exec", "compile", "input", "globals", "locals", "vars", "breakpoint", "exit", "quit", "help"}
)


def interrupted(logs: str) -> ExecutionError:
    """The cause given to a KeyboardInterrupt that stopped a block (its user pressed Ctrl-C): the
    interrupt still ends the run, and the caller can show what the code printed before it."""
    return ExecutionError("the code was interrupted (Ctrl-C) while it ran", logs=logs, error_type="KeyboardInterrupt")


class ToolHandle:
    """What the code sees of a tool: a callable with a name and a description.

    What it calls stays out of reach: the `Tool` itself (whose `forward` would
    skip the argument checks), or the channel to the host that runs it.
    Calling the final-answer tool raises `FinalAnswerSignal`.
    """

    __slots__ = ("_call", "_final", "description", "name")

    def __init__(self, name: str, description: str, call: Callable[..., Any], final: bool) -> None:
        self._call = call
        self._final = final
        self.name = name
        self.description = description

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result = self._call(*args, **kwargs)
        if self._final:
            raise FinalAnswerSignal(result)
        return result

    def __repr__(self) -> str:
        return f"<tool {self.name}>"


class Interpreter:
    """Compiles and runs blocks against one globals dict that persists between them.

    It trusts its settings: `LocalExecutor` checks them, and documents them.
    """

    def __init__(
        self,
        authorized_imports: tuple[str, ...],
        timeout_seconds: float,
        max_operations: int,
        max_print_outputs_length: int,
        allowed_paths: Sequence[str | Path] | None,
        max_value_size: int,
        max_int_bits: int,
        max_memory_bytes: int | None,
        *,
        memory_capped: bool = False,
        host_process: bool = False,
        watchdog: Watchdog | AlarmWatchdog = WATCHDOG,
        working_folder: str | None = None,
    ) -> None:
        self.authorized_imports = authorized_imports
        self.timeout_seconds = timeout_seconds
        self.max_operations = max_operations
        self.max_print_outputs_length = max_print_outputs_length
        self.max_memory_bytes = max_memory_bytes
        # In a worker, the operating system caps the whole process, so the watchdog need not poll.
        self._memory_capped = memory_capped
        # In the host's own process, what crosses between host and code is looked through (`crossing`).
        self._host_process = host_process
        self._settings = CodeSettings() if host_process else None
        self._watchdog = watchdog
        self._globals: dict[str, Any] = {}
        self._sources: dict[str, tuple[list[str], int]] = {}  # the newest blocks' lines and size, oldest first
        self._source_characters = 0  # the sizes in `_sources`
        self._blocks = 0  # compiled: each has a file name of its own
        self._declared_global: set[str] = set()  # names any block's functions declare global
        self._class_attributes: set[str] = set()  # public names any block's classes define
        self._compiled = BlockCache()  # the code of blocks seen before, by all their compile reads
        self._tools: dict[str, ToolHandle] = {}
        self._tool_names: frozenset[str] = frozenset()  # what each block's compile reserves, made once
        self._logs = BlockOutput(self.max_print_outputs_length)
        self._watch: Any = None  # the running block's watch, for time.sleep's deadline

        self.data_policy = DataPolicy(allowed_paths)
        self._limits = Limits(max_value_size, max_int_bits, lambda: self._globals["_tick_"])
        self._guards = Guards(self._limits, self._globals, self.data_policy, (ToolHandle,))
        overrides = self._guards.module_overrides(
            lambda: None if self._watch is None else self._watch.deadline, self._pause
        )
        self._guards.connect(ImportGate(self.authorized_imports, overrides, self.data_policy.vet_module_attribute))
        self._globals.update(self._guards.guard_names())
        self._globals["__builtins__"] = self._guards.builtins(self._print)
        if working_folder is not None:
            self._globals["__builtins__"]["open"] = folder_open(working_folder)
        self._globals["_tick_"] = _BETWEEN_BLOCKS

    def send_variables(self, variables: dict[str, Any]) -> None:
        vet = self._guards.gate.vet
        self._globals.update(
            {name: vetted_from_host(value, vet, f"the variable {name!r}") for name, value in variables.items()}
        )

    def send_tools(self, tools: dict[str, ToolHandle]) -> None:
        for name in self._tools.keys() - tools.keys():
            if self._globals.get(name) is self._tools[name]:
                del self._globals[name]
        self._tools = {name: self._crossing(handle) for name, handle in tools.items()}
        self._tool_names = frozenset(self._tools)
        self._globals.update(self._tools)

    def _crossing(self, handle: ToolHandle) -> ToolHandle:
        """In the host's process, a tool's arguments leave as the block's value would, and its
        result comes in as a variable would (see `crossing`); a worker's tools cross as data."""
        if not self._host_process or handle._final:  # a final answer is looked through at the block's end
            return handle
        name, call, vet = handle.name, handle._call, self._guards.gate.vet

        def crossing(*args: Any, **kwargs: Any) -> Any:
            args, kwargs = self._carried(list(args)), self._carried(kwargs)
            try:
                result = call(*args, **kwargs)
            except ToolCallError:  # codeward's own, about the arguments: its text is all it holds
                raise
            except Exception as error:  # the tool's own: it reaches the code as a worker's would
                reply = codec.loads(request_error("tool", type(error).__name__, str(error), error))
                raise prelude.tool_failure(name, reply["error"]) from None
            return vetted_from_host(result, vet, f"the result of the tool {name!r}")

        return ToolHandle(handle.name, handle.description, crossing, False)

    def _carried(self, value: Any) -> Any:
        """`value`, or, where it holds an object of the code's own, what a worker's codec would
        deliver of it (a dataclass as a dict); `CodecError` where the codec cannot carry it."""
        if code_object_in(value, SANDBOX_MODULE, self._globals) is None:
            return value
        return codec.loads(codec.dumps(value))

    def run(self, code: str, live: LiveOutput | None = None) -> CodeOutput:
        """Run a block; what it prints goes to its logs and, as it is printed, to `live`. What the
        policy refused while it ran (caught by the code or not) is in its `events`, or its error's."""
        ledger = EventLedger()
        try:
            with recording(ledger):
                output = self._run(code, live, ledger)
        except ExecutionError as error:
            error.events = ledger.events()
            raise
        except KeyboardInterrupt as interrupt:
            if isinstance(interrupt.__cause__, ExecutionError):
                interrupt.__cause__.events = ledger.events()
            raise
        output.events = ledger.events()
        return output

    def _run(self, code: str, live: LiveOutput | None, ledger: EventLedger) -> CodeOutput:
        filename = _FILENAME.format(self._blocks + 1)
        try:
            compiled = self._compiled.compile(
                code, filename, self._tool_names, self._declared_global, self._class_attributes
            )
        except CodeRefused as refused:
            for problem in refused.problems:
                ledger.record("policy", problem.message)
            raise ExecutionError(refused.report, traceback=refused.report, error_type=refused.error_type) from None
        self._keep_source(filename, code)
        self._logs = BlockOutput(self.max_print_outputs_length, live)
        self._globals.pop(RESULT_NAME, None)
        self._globals["_tick_"] = make_tick(self.max_operations)
        try:
            with capture_output(self._logs):
                error = self._execute(lambda: exec(compiled, self._globals))
        except KeyboardInterrupt as interrupt:
            raise interrupt from interrupted(self._logs.text())
        finally:
            self._globals["_tick_"] = _BETWEEN_BLOCKS
            self._globals.update(self._tools)
            self._globals[PLAIN_RECEIVER][0] = None  # the code's object goes when the code lets it go
        logs = self._logs.text()
        if error is None:
            output = CodeOutput(self._globals.pop(RESULT_NAME, None), logs, False)
        elif isinstance(error, FinalAnswerSignal):
            output = CodeOutput(error.value, logs, True)
        else:
            raise self._translate(error, logs) from None
        return self._leaving(output) if self._host_process else output

    def _leaving(self, output: CodeOutput) -> CodeOutput:
        """The block's value or final answer as a worker would give it, where it holds the code's
        own objects: carried by the codec, or else its shown text (a value) or an error (a final
        answer). Worked out under a block's limits, never by the host afterwards."""
        if type(output.output) in SCALARS:  # nothing of the code's: they leave without a look
            return output
        carried: list[Any] = []
        error = self.watched(lambda: carried.append(self._carried(output.output)))
        if carried:
            return CodeOutput(carried[0], output.logs, output.is_final_answer)
        if not output.is_final_answer:
            return CodeOutput(self.shown(output.output)[:SHOWN_LIMIT], output.logs, False)
        raise ExecutionError(final_answer_refused(output.output, error), logs=output.logs, error_type="CodecError")

    def interrupt(self) -> None:
        """Stop the running block from another thread, in the host's process (a worker is sent
        SIGINT instead): it ends at its next bytecode, or at once from a sleep."""
        watch = self._watch
        if watch is not None and isinstance(self._watchdog, Watchdog):
            self._watchdog.interrupt(watch)

    def _pause(self, seconds: float) -> None:
        """The sandbox's sleep: it wakes when the block is being stopped from outside."""
        watch = self._watch
        if watch is None or not seconds > 0:  # time.sleep's own errors for a bad length
            time.sleep(seconds)
        else:
            watch.sleep(seconds)

    def close(self) -> None:
        if "_tick_" in self._globals:
            # Dropping the code's objects can run its code (a suspended generator's
            # finally): that runs no further than between blocks, and neither does any later call.
            self._globals["_tick_"] = _BETWEEN_BLOCKS
            for name in [name for name in self._globals if not name.startswith("_")]:
                del self._globals[name]
            self._globals.clear()
            self._globals["_tick_"] = _BETWEEN_BLOCKS

    # Running -----------------------------------------------------------------
    def shown(self, value: Any) -> str:
        """The text of a value that cannot leave as data: its own ``__repr__`` runs under a block's limits."""
        return self._watched_text(repr, value, f"<{type(value).__name__} object>")

    def _watched_text(self, make: Callable[[Any], str], value: Any, fallback: str) -> str:
        """``make(value)``, which may run the code's own ``__repr__`` or ``__str__``, under a block's
        limits (time as well as operations); `fallback` when it fails or gives no str."""
        text: list[str] = []
        error = self.watched(lambda: text.append(make(value)))
        if error is not None or not text or type(text[0]) is not str:
            return fallback
        return text[0]

    def watched(self, action: Callable[[], Any]) -> BaseException | None:
        """`action`, which may run the code's own methods (a value's text, its encoding), under a
        block's limits; the exception that ended it, if any."""
        self._globals["_tick_"] = make_tick(self.max_operations)
        try:
            return self._execute(action)
        finally:
            self._globals["_tick_"] = _BETWEEN_BLOCKS

    def _execute(self, action: Callable[[], Any]) -> BaseException | None:
        """Run under the watchdog, with the code's own process-wide settings in the host's process;
        return the exception that ended the block, if any."""
        try:
            if self._settings is None:
                return self._run_watched(action)
            error: BaseException | None = self._settings.run(lambda: self._run_watched(action))
            return error
        except SandboxSignal as late:  # landed after the code ended, before the watch was off
            return late

    def _run_watched(self, action: Callable[[], Any]) -> BaseException | None:
        self._watch = watch = self._watchdog.arm(
            self.timeout_seconds, None if self._memory_capped else self.max_memory_bytes
        )
        try:
            action()
        except KeyboardInterrupt:
            raise
        except SystemExit as error:  # a library's sys.exit ends the block, never the host
            return exit_refused(error)
        except BaseException as error:
            return error
        finally:
            while True:  # a signal may land anywhere here; the disarming is retried until done
                try:
                    self._watchdog.disarm(watch)
                    self._watch = None
                    break
                except SandboxSignal:
                    continue
        return None

    def _print(
        self, *args: Any, sep: str | None = " ", end: str | None = "\n", file: Any = None, flush: bool = False
    ) -> None:
        text = (" " if sep is None else sep).join(str(arg) for arg in args) + ("\n" if end is None else end)
        (self._logs if file is None else file).write(text)

    def _translate(self, error: BaseException, logs: str) -> ExecutionError:
        # An exception's text may run the code's own __str__, or the __repr__ of what it carries: it is
        # computed once, under a block's limits, never with only the budget left for the host's calls.
        text = self._watched_text(str, error, "<its text ran past the sandbox's limits>")
        if isinstance(error, TimeLimitReached):
            return ExecutionTimeout(
                f"the code ran longer than the {self.timeout_seconds:g}-second limit and was stopped; "
                "make it do less work per step (smaller inputs, fewer iterations)",
                logs=logs,
                traceback=self._traceback(error, text),
                error_type="TimeoutError",
            )
        if isinstance(error, BlockInterrupted):
            return interrupted(logs)
        if isinstance(error, OperationLimitReached):
            message = (
                f"the code used more than {self.max_operations:,} operations (loop iterations and calls) "
                "and was stopped; look for an endless loop, or do less work per step"
            )
            error_type = "OperationLimitExceeded"
        elif type(error) is MemoryError and self._memory_capped:  # the OS's cap, not one of the size caps
            message = (
                f"the code grew memory by more than the worker's {self.max_memory_bytes or 0:,}-byte allowance "
                "and was stopped; work on smaller pieces of data"
            )
            error_type = "MemoryError"
        elif isinstance(error, MemoryLimitReached):
            message = (
                f"the code grew memory by more than {self.max_memory_bytes or 0:,} bytes and was stopped; "
                "work on smaller pieces of data"
            )
            error_type = "MemoryError"
        else:
            message = f"{type(error).__name__}: {text}" if text else type(error).__name__
            if isinstance(error, NameError) and error.name in _ABSENT_BUILTINS:
                message += f" ({error.name}() is not available in this sandbox: it reaches the machine)"
            error_type = type(error).__name__
        tb = self._traceback(error, text)
        return ExecutionError(f"{message}\n{tb}" if tb else message, logs=logs, traceback=tb, error_type=error_type)

    def _keep_source(self, filename: str, code: str) -> None:
        """Keep the block's lines for its tracebacks, letting the oldest blocks' go past `KEPT_SOURCE_CHARACTERS`."""
        self._blocks += 1
        self._sources[filename] = (code.splitlines(), len(code))
        self._source_characters += len(code)
        while self._source_characters > KEPT_SOURCE_CHARACTERS and len(self._sources) > 1:
            self._source_characters -= self._sources.pop(next(iter(self._sources)))[1]

    def _traceback(self, error: BaseException, text: str) -> str:
        """The traceback as the model needs it: only frames of its own code, with their lines (a frame
        of a block whose lines have gone, without)."""
        lines = ["Traceback (most recent call last):"]
        for frame in traceback.extract_tb(error.__traceback__):
            source, _ = self._sources.get(frame.filename, (None, 0))
            if source is None and not _BLOCK_FILE.fullmatch(frame.filename):
                continue
            lines.append(f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}')
            if source is not None and frame.lineno and 0 < frame.lineno <= len(source):
                lines.append(f"    {source[frame.lineno - 1].strip()}")
        lines.append(f"{type(error).__name__}: {text}" if text else type(error).__name__)
        return "\n".join(lines)
