"""The one contract every sandbox implements, and the registry that names them.

The agent lifecycle knows only this module: an executor receives variables and
tools once per run, then runs code blocks and answers with a `CodeOutput`.
Everything about *where* the code runs lives in the executor's own module.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.metadata
import inspect
import json
import shlex
import urllib.parse
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, fields
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from codeward.effects import offload
from codeward.executors.live import OutputCallback
from codeward.executors.settings import checked_packages

if TYPE_CHECKING:
    import asyncio

    from codeward.tools import Tool

__all__ = [
    "FINAL_ANSWER_TOOL",
    "BlockEvent",
    "BlockUsage",
    "CodeOutput",
    "ExecutionError",
    "ExecutionTimeout",
    "Executor",
    "ExecutorError",
    "Files",
    "FinalAnswerSignal",
    "OutputCallback",
    "SandboxError",
    "acreate_executor",
    "available_executors",
    "create_executor",
    "register_executor",
    "run_block",
]

#: The tool whose call ends a run. Every sandbox makes it raise a `BaseException`
#: so that `except Exception:` in the model's code cannot swallow it.
FINAL_ANSWER_TOOL = "final_answer"


class FinalAnswerSignal(BaseException):
    """Raised by `final_answer(x)` inside an in-process sandbox; carries `x`."""

    def __init__(self, value: Any) -> None:
        super().__init__("final_answer called")
        self.value = value


class ExecutorError(Exception):
    """Base of every error an executor raises to its caller.

    `logs` holds what the code printed before the failure, so that nothing the
    model's code produced is lost when it fails.
    """

    def __init__(self, message: str, *, logs: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.logs = logs
        #: What the block cost and what the walls refused before it failed, where the sandbox knows.
        self.usage: BlockUsage | None = None
        self.events: list[BlockEvent] = []


class ExecutionError(ExecutorError):
    """The model's code failed inside the sandbox.

    `traceback` is the sandbox's own traceback text; `error_type` is the name of
    the exception class raised there (e.g. ``"ZeroDivisionError"``).
    """

    def __init__(
        self,
        message: str,
        *,
        logs: str = "",
        traceback: str = "",
        error_type: str | None = None,
    ) -> None:
        super().__init__(message, logs=logs)
        self.traceback = traceback
        self.error_type = error_type

    @property
    def detail(self) -> str:
        """The failure as a model reads it: the sandbox's traceback, led by the executor's own sentence
        where the traceback does not say it (a limit's count and what to look for, an interruption)."""
        traceback = self.traceback.strip()
        if not traceback:
            return self.message
        lead = self.message.removesuffix(self.traceback).strip()
        if not lead or lead.rstrip(": ") in traceback:
            return traceback
        return f"{lead}\n{traceback}"


class ExecutionTimeout(ExecutionError):
    """The code ran past its time limit and was stopped inside the sandbox."""

    #: What to do about it, for a message that does not say (the local executor's does).
    ADVICE = "Make the code faster, or do the work in smaller steps."

    @property
    def advised(self) -> str:
        """The message as a model reads it: with what to do about it, said once."""
        return self.message if "per step" in self.message else f"{self.message}\n{self.ADVICE}"


class SandboxError(ExecutorError):
    """The sandbox itself failed (killed, out of memory, daemon gone).

    The executor starts a fresh sandbox on the next run and sends variables and
    tools again; `state_lost` says that names defined by earlier code are gone.
    """

    def __init__(self, message: str, *, logs: str = "", state_lost: bool = True) -> None:
        super().__init__(message, logs=logs)
        self.state_lost = state_lost


@dataclass(frozen=True)
class BlockUsage:
    """What one block consumed in its sandbox.

    `peak_memory_bytes` is the block's own high-water mark unless `peak_memory_scope` is
    ``"sandbox"``: then it is the sandbox's since it started, where the platform gives only that.
    """

    wall_seconds: float
    cpu_seconds: float | None = None
    peak_memory_bytes: int | None = None
    output_bytes: int = 0
    tool_calls: int = 0
    egress_bytes: int | None = None
    peak_memory_scope: str = "block"
    #: Why a figure is None, by its name: e.g. ``{"cpu_seconds": "E2B does not report it"}``.
    unmeasured: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {item.name: getattr(self, item.name) for item in fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BlockUsage:
        """A usage read back from a saved run or a batch record: unknown keys are left out."""
        known = {item.name for item in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})

    def summary(self) -> str:
        """One line for people: '1.02 s CPU · 212 MB peak memory · 1.2 kB output · 3 tool calls'; a figure
        not measured is left out (`unmeasured` says why)."""
        parts = [] if self.cpu_seconds is None else [f"{self.cpu_seconds:.2f} s CPU"]
        if self.peak_memory_bytes is not None:
            scope = " (sandbox)" if self.peak_memory_scope == "sandbox" else ""
            parts.append(f"{_bytes_text(self.peak_memory_bytes)} peak memory{scope}")
        parts.append(f"{_bytes_text(self.output_bytes)} output")
        parts.append(f"{self.tool_calls:,} tool call{'' if self.tool_calls == 1 else 's'}")
        if self.egress_bytes is not None:
            parts.append(f"{_bytes_text(self.egress_bytes)} network")
        return " · ".join(parts)

    def __add__(self, other: BlockUsage) -> BlockUsage:
        """Totals over blocks: times, bytes and calls add; a peak is the higher one; None stays None
        only when neither side measured it."""
        return BlockUsage(
            wall_seconds=self.wall_seconds + other.wall_seconds,
            cpu_seconds=_sum(self.cpu_seconds, other.cpu_seconds),
            peak_memory_bytes=_max(self.peak_memory_bytes, other.peak_memory_bytes),
            output_bytes=self.output_bytes + other.output_bytes,
            tool_calls=self.tool_calls + other.tool_calls,
            egress_bytes=_sum(self.egress_bytes, other.egress_bytes),
            peak_memory_scope="sandbox" if "sandbox" in (self.peak_memory_scope, other.peak_memory_scope) else "block",
            unmeasured={**other.unmeasured, **self.unmeasured},
        )


@dataclass(frozen=True)
class BlockEvent:
    """One thing a wall refused while a block ran.

    `wall` names the wall (``"policy"``, ``"seccomp"``, ``"landlock"``, ``"memory"``, ``"pids"``,
    ``"egress"``); `detail` what was refused, in the wall's own terms (a system call's name, an
    import, a host); `count` how many times in the block. Read back from a saved run or an audit
    line with `codeward.wall_events.checked_events`, which holds a stranger's to the same bounds.
    """

    wall: str
    detail: str
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"wall": self.wall, "detail": self.detail, "count": self.count}


def _bytes_text(size: int) -> str:
    """'512 B', '1.2 kB', '212 MB', '1.5 GB' (powers of 1000, as people read them)."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size} B"


def _sum(first: float | None, second: float | None) -> Any:
    if first is None or second is None:
        return second if first is None else first
    return first + second


def _max(first: int | None, second: int | None) -> int | None:
    if first is None or second is None:
        return second if first is None else first
    return max(first, second)


@dataclass
class CodeOutput:
    """What one code block produced.

    `output` is the final answer when `is_final_answer` is true, otherwise the
    value of the block's last expression (or None). `displays` holds rich outputs
    the code showed (PIL images, HTML text), in sandboxes that have them. `usage` is what the
    block consumed, and `events` what the sandbox's walls refused while it ran.
    """

    output: Any
    logs: str
    is_final_answer: bool
    displays: list[Any] = field(default_factory=list)
    usage: BlockUsage | None = None
    events: list[BlockEvent] = field(default_factory=list)


class Files(Protocol):
    """The sandbox's working folder, seen from the host (`ex.files`; `files.SandboxFiles` does the
    checks every executor shares: paths that never lead out, and the budget every byte draws from)."""

    def write(self, path: str, data: bytes | str) -> None:
        """Write `data` (text as UTF-8) to `path`, replacing what was there."""

    def read(self, path: str, *, most: int | None = None) -> bytes:
        """The bytes of the file at `path`; with `most`, refused past that many bytes, before they cross."""

    def list(self, path: str = ".") -> list[str]:
        """The names in the folder at `path`, sorted; a folder's name ends with ``/``."""

    def remove(self, path: str) -> None:
        """Remove the file (or empty folder) at `path`."""

    def exists(self, path: str) -> bool:
        """Whether anything is at `path`."""


class Executor(ABC):
    """A sandbox that runs code blocks and keeps state between them.

    Executors are context managers; `close()` is idempotent.
    """

    #: The registry name, e.g. ``"local"``.
    name: ClassVar[str] = ""
    #: The sandbox's working folder: write, read, list, remove, exists (see `Files`).
    files: Files

    @abstractmethod
    def send_variables(self, variables: dict[str, Any]) -> None:
        """Make each item a real variable inside the sandbox."""

    @abstractmethod
    def send_tools(self, tools: dict[str, Tool]) -> None:
        """Make each tool callable by its name inside the sandbox.

        The tool named `FINAL_ANSWER_TOOL` must, when called, end the block with
        a `CodeOutput` whose `is_final_answer` is true.
        """

    @abstractmethod
    def run(self, code: str, on_output: OutputCallback | None = None) -> CodeOutput:
        """Run one code block; raise `ExecutionError`, `ExecutionTimeout` or `SandboxError`.

        `on_output(stream, text)` is called while the block runs, on the thread that called
        `run`, with each piece the block prints ("stdout", "stderr") or shows ("display"), so a
        user watches a long block as it goes; the returned logs still hold the whole output.
        No more than the logs' length reaches it in all. An exception it raises stops the
        block and is raised from `run` once the block has ended; the executor stays usable.
        """

    def interrupt(self) -> None:
        """Stop the running block, from another thread, as Ctrl-C does; nothing runs: nothing happens.

        The block's `run` raises `ExecutionError` with `error_type` "KeyboardInterrupt" and what it
        printed; the state defined before (variables, functions) is kept.
        """
        raise NotImplementedError(f"the {self.name or type(self).__name__} executor cannot interrupt a block")

    def __call__(self, code: str) -> CodeOutput:
        return self.run(code)

    # The same contract, awaited. An executor with a native way to wait (a socket the loop watches,
    # an async client) overrides these; the defaults run the blocking call in `effects.offload`'s
    # bounded pool, so a third party's executor works from an event loop without holding it.

    async def arun(self, code: str, on_output: OutputCallback | None = None) -> CodeOutput:
        """`run`, awaited; `on_output` is called on the event loop's thread. Cancelling the awaiting
        task stops the block as `interrupt()` does, and raises `CancelledError` once it has ended."""
        return await _offloaded_run(self, code, on_output)

    async def asend_variables(self, variables: dict[str, Any]) -> None:
        """`send_variables`, awaited."""
        await offload(self.send_variables, variables)

    async def asend_tools(self, tools: dict[str, Tool]) -> None:
        """`send_tools`, awaited."""
        await offload(self.send_tools, tools)

    async def aclose(self) -> None:
        """`close`, awaited. Also done by `async with executor:`."""
        await offload(self.close)

    async def __aenter__(self) -> Executor:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def install_packages(self, packages: list[str]) -> list[str]:
        """Install packages into the sandbox and return the names now importable."""
        checked_packages(packages)
        raise ExecutorError(
            f"the {self.name or type(self).__name__} executor cannot install packages; "
            "use a sandbox that can (jupyter, docker with network, e2b)"
        )

    @abstractmethod
    def close(self) -> None:
        """Release the sandbox. Calling it again does nothing."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


_OPEN_PARAMETERS = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def run_block(executor: Executor, code: str, on_output: OutputCallback | None) -> CodeOutput:
    """`executor.run(code, on_output)`; an executor written before live output (``run(self, code)``)
    runs the block whole, and `on_output` hears its logs when it ends rather than a TypeError."""
    if on_output is None:
        return executor.run(code)
    if _takes_on_output(type(executor)):
        return executor.run(code, on_output)
    output = executor.run(code)
    if output.logs:
        on_output("stdout", output.logs)
    return output


@functools.lru_cache(maxsize=64)
def _takes_on_output(kind: type[Executor]) -> bool:
    """Whether the executor class's `run` takes `on_output`: read once a class, not at every block."""
    try:
        parameters = inspect.signature(kind.run).parameters.values()
    except (AttributeError, TypeError, ValueError):
        return True
    return any(p.name == "on_output" or p.kind in _OPEN_PARAMETERS for p in parameters)


# `Executor.arun` for an executor with no native way to wait: its blocking `run` in the shared pool.
# The block's output crosses to the event loop's thread, where `on_output` is called, as a native
# `arun` calls it; a callback that raises stops the block (`interrupt()`), and its exception is
# raised once the block has ended, as `run` does. Cancelling the awaiting task interrupts the block
# and waits for it to end, so the executor is left between blocks, usable, and never mid-block.

#: After a cancel, how long the block may take to stop by `interrupt()` before the executor is closed.
CANCEL_GRACE_SECONDS = 5.0


async def _offloaded_run(executor: Executor, code: str, on_output: OutputCallback | None) -> CodeOutput:
    import asyncio  # here: the local worker imports this module, and needs no event loop

    loop = asyncio.get_running_loop()
    failure: list[Exception] = []
    heard = None
    if on_output is not None:
        callback = on_output

        def on_loop(stream: str, text: str) -> None:
            if failure:
                return
            try:
                callback(stream, text)
            except Exception as error:  # stops the block; raised once it has ended
                failure.append(error)
                with contextlib.suppress(NotImplementedError):
                    executor.interrupt()

        def heard(stream: str, text: str) -> None:
            loop.call_soon_threadsafe(on_loop, stream, text)

    output = await _stop_on_cancel(executor, offload(run_block, executor, code, heard))
    await asyncio.sleep(0)  # the pieces the block's last prints queued on the loop are heard first
    if failure:
        raise failure[0]
    return output


async def _stop_on_cancel(executor: Executor, running: asyncio.Future[CodeOutput]) -> CodeOutput:
    """Await a block running elsewhere; on cancel, interrupt it and wait for its end (closing the
    executor if it does not stop within `CANCEL_GRACE_SECONDS`), then raise `CancelledError`."""
    import asyncio

    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        with contextlib.suppress(NotImplementedError):
            executor.interrupt()
        done, _ = await asyncio.wait([running], timeout=CANCEL_GRACE_SECONDS)
        if done:
            running.exception()  # the interrupted block's error is the cancel's, taken so none is left unheard
        else:
            await offload(executor.close)
        raise


# name -> (module, class name, extra that installs its dependencies or None)
_REGISTRY: dict[str, tuple[str, str, str | None]] = {}


def register_executor(name: str, module: str, class_name: str, extra: str | None = None) -> None:
    """Make `create_executor(name)` build `module.class_name`, imported only when asked for."""
    _REGISTRY[name] = (module, class_name, extra)


def available_executors() -> list[str]:
    return sorted(_REGISTRY)


def executor_class(name: str) -> type[Executor]:
    """Import the executor class registered as `name`, with errors that say how to fix it."""
    if not isinstance(name, str) or name not in _REGISTRY:
        known = ", ".join(repr(n) for n in available_executors())
        raise ValueError(f"unknown executor {name!r}; choose one of {known}, or pass an Executor instance")
    module_name, class_name, extra = _REGISTRY[name]
    module = import_with_extra(module_name, needed_by=f"the {name!r} executor", extra=extra)
    cls: type[Executor] = getattr(module, class_name)
    return cls


def install_line(extra: str) -> str:
    """The pip line that installs codeward's `extra`, quoted so that a shell leaves the brackets alone.

    A codeward installed from a folder (a checkout, ``pip install -e .``) names that folder, as
    pip recorded it (PEP 610): the line must work when pasted, from wherever it is pasted.
    """
    folder, editable = _installed_from()
    if folder is None:
        return f"pip install 'codeward[{extra}]'"
    return f"pip install {'-e ' if editable else ''}{shlex.quote(f'{folder}[{extra}]')}"


def _installed_from() -> tuple[str | None, bool]:
    """The local folder codeward was installed from, and whether editably; (None, False) otherwise.

    The installed copy's metadata says so; a checkout's own ``src/codeward.egg-info``, which
    comes first when ``src`` is on the path, does not, so every copy of the metadata is asked.
    """
    for distribution in importlib.metadata.distributions(name="codeward"):
        try:
            recorded = json.loads(distribution.read_text("direct_url.json") or "null")
        except ValueError:
            continue
        url = recorded.get("url") if isinstance(recorded, dict) else None
        if isinstance(url, str) and url.startswith("file://"):
            dir_info = recorded.get("dir_info")
            editable = isinstance(dir_info, dict) and dir_info.get("editable") is True
            return urllib.parse.unquote(urllib.parse.urlparse(url).path), editable
    return None, False


def import_with_extra(module_name: str, *, needed_by: str, extra: str | None) -> ModuleType:
    """Import `module_name`; a missing optional package becomes an error with the pip line that installs it."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if extra is None or module_name == missing or module_name.startswith(missing + "."):
            raise
        raise ImportError(
            f"{needed_by} needs the package {error.name!r}, which is not installed; "
            f"install it with: {install_line(extra)}"
        ) from error


def create_executor(name: str, **kwargs: Any) -> Executor:
    """Build the executor registered as `name` with `kwargs`."""
    return executor_class(name)(**kwargs)


async def acreate_executor(name: str, **kwargs: Any) -> Executor:
    """`create_executor`, awaited: a sandbox that starts when built (a container, a kernel) starts
    without holding the event loop, so that many started together overlap their starts."""
    cls = executor_class(name)
    native = getattr(cls, "acreate", None)
    if native is not None:
        executor: Executor = await native(**kwargs)
        return executor
    return await offload(lambda: cls(**kwargs))


register_executor("local", "codeward.executors.local.executor", "LocalExecutor")
register_executor("jupyter", "codeward.executors.jupyter", "JupyterExecutor", extra="jupyter")
register_executor("e2b", "codeward.executors.e2b", "E2BExecutor", extra="e2b")
register_executor("docker", "codeward.executors.docker.executor", "DockerExecutor", extra="docker")
