"""What every kernel-backed sandbox does the same way, whatever starts its kernel.

A `KernelExecutor` installs codeward's sandbox side in a fresh kernel, sends
the variables and tools it was given (and sends them again to a kernel that
replaced a dead one), runs code with the host tool bridge answering, and turns
the kernel's replies into the contract's `CodeOutput` or errors. A subclass
only says how its kernel starts: `_start_process()` (a local process for
jupyter, a container for docker).

Each of these is written once, as steps that yield what they wait on (`codeward.effects`):
`run` drives them by blocking, `arun` by awaiting, so under `arun` the event loop watches the
kernel's sockets and no thread waits for a block; a host tool the sandbox calls is awaited on
the loop when it is an ``async def``, and run in the bounded pool otherwise.
"""

from __future__ import annotations

import contextvars
import time
from abc import abstractmethod
from typing import Any, ClassVar, Self, TypeVar

from codeward.effects import Offloaded, Steps, awaited, blocking, offload
from codeward.executors import codec
from codeward.executors.base import (
    BlockUsage,
    CodeOutput,
    ExecutionError,
    ExecutionTimeout,
    ExecutorError,
    SandboxError,
)
from codeward.executors.files import FilesError
from codeward.executors.kernel.bridge import (
    bootstrap_code,
    cell_calling,
    request_kind,
)
from codeward.executors.kernel.cells import (
    CellResult,
    code_output,
    code_outputting,
    decoding_within,
    require_setup_ok,
)
from codeward.executors.kernel.files import KernelFiles
from codeward.executors.kernel.remembering import RememberingExecutor
from codeward.executors.kernel.session import KernelProcess, KernelSession, answered
from codeward.executors.kernel.waiting import Owned
from codeward.executors.live import OutputCallback
from codeward.executors.metering import Meter, block_usage
from codeward.executors.settings import DEFAULT_OUTPUT_BUDGET, DEFAULT_PRINT_OUTPUTS_LENGTH, checked_packages
from codeward.tools import Tool

__all__ = ["KernelExecutor"]

#: Seconds codeward's own cells (setup, loading variables and tools) may take.
_SETUP_TIMEOUT = 120.0
#: Set while `acreate` builds an executor: its `__init__` leaves the start to be awaited.
_Executor = TypeVar("_Executor", bound="KernelExecutor")
_START_AWAITED: contextvars.ContextVar[bool] = contextvars.ContextVar("codeward_start_awaited", default=False)


class KernelExecutor(RememberingExecutor):
    """An executor whose sandbox is a Jupyter kernel; subclasses say how the kernel starts.

    `timeout_seconds` bounds each `run`; `tools_mode` is "host" (tools run here,
    called from the sandbox), "inline" (their source runs in the sandbox) or
    "auto" (each inline where it can be shipped, here where it must run);
    `allow_pickle` lets variables that the codec cannot carry go in by pickle,
    for trusted setups only (nothing is ever unpickled coming out). Subclasses
    call `_start()` at the end of their `__init__` to start the kernel.
    """

    #: Where pip installs in the sandbox, a folder that lasts only as long as the sandbox,
    #: so a replaced sandbox gets the same installs again; None: into the kernel's own environment.
    packages_prefix: ClassVar[str | None] = None

    def __init__(
        self,
        *,
        timeout_seconds: float,
        tools_mode: str,
        allow_pickle: bool,
        max_output_bytes: int = DEFAULT_OUTPUT_BUDGET,
        max_print_outputs_length: int = DEFAULT_PRINT_OUTPUTS_LENGTH,
    ) -> None:
        super().__init__(
            timeout_seconds=timeout_seconds,
            tools_mode=tools_mode,
            allow_pickle=allow_pickle,
            max_output_bytes=max_output_bytes,
            max_print_outputs_length=max_print_outputs_length,
        )
        self._installed: list[list[str]] = []  # installs a replaced sandbox needs again (see packages_prefix)
        self._session: KernelSession | None = None
        self._ready_generation = 0
        self.files = KernelFiles(self._file_cell, self._file_seconds)

    @classmethod
    async def acreate(cls, **kwargs: Any) -> Self:
        """Build and start an executor without holding the event loop: the blocking part of the start
        (a kernel process, a container) runs in the bounded pool, the wait for the kernel to answer on
        the loop, so that many started together overlap their starts. A failed or cancelled start
        leaves nothing running."""
        executor = await offload(lambda: _built_unstarted(cls, kwargs))
        try:
            await awaited(executor._ensuring_ready())
        except BaseException:
            await offload(executor.close)
            raise
        return executor

    def _start(self) -> None:
        """Start the sandbox, at the end of `__init__`; under `acreate` the start is awaited instead."""
        if not _START_AWAITED.get():
            self._ensure_ready()

    @abstractmethod
    def _start_process(self) -> KernelProcess:
        """Start a sandbox's kernel (blocking) and return who owns it."""

    def _starting_session(self) -> Steps[KernelSession]:
        """Start a sandbox and connect a session to its kernel that keeps this executor's output limits."""
        process = yield Owned(self._start_process, _shut_down)
        session = KernelSession(
            process, max_log_chars=self.max_print_outputs_length, max_output_bytes=self.max_output_bytes, connect=False
        )
        yield from session.starting()
        return session

    def _ran_in_advance(self, bootstrap: str) -> bool:
        """Whether the kernel just connected to already ran `bootstrap` (a warm pool's sandbox did)."""
        return False

    def _ensure_ready(self) -> KernelSession:
        return blocking(self._ensuring_ready())

    def _ensuring_ready(self) -> Steps[KernelSession]:
        """A running kernel with codeward's side installed and the remembered variables and tools sent."""
        self._check_open()
        if self._session is None:
            self._session = yield from self._starting_session()
        session = self._session
        if self._ready_generation != session.generation:
            bootstrap = bootstrap_code(allow_pickle=self.allow_pickle)
            if not self._ran_in_advance(bootstrap):
                yield from self._internally(session, bootstrap)
            self._ready_generation = session.generation
            for packages in self._installed:
                yield from self._installing(session, packages)
            if self._variables:
                variables = codec.encode_variables(self._variables, allow_pickle=self.allow_pickle)
                yield from self._loading("variables", variables)
            if self._bridge.tools:
                yield from self._loading("tools", self._bridge.specs_text)
        return session

    def _internally(self, session: KernelSession, code: str, answers: dict[str, str] | None = None) -> Steps[None]:
        """Run codeward's own cell, answering its requests from `answers`; its failure is ours, not the model's."""
        replies = answers or {}
        result = yield from session.executing(
            code, timeout=_SETUP_TIMEOUT, on_input=answered(lambda prompt: replies.get(request_kind(prompt)[0], ""))
        )
        require_setup_ok(result, "the kernel")
        self._notes += result.logs

    def _file_cell(self, code: str, answers: dict[str, str]) -> CellResult:
        """Run one of `files`' cells, held at most the time limit as a block is (the code may have
        replaced what the cell calls); a sandbox that died under it is replaced on the next call."""
        session = self._ensure_ready()
        generation = session.generation
        try:
            return session.execute(
                code, timeout=self.timeout_seconds, on_input=lambda prompt: answers.get(request_kind(prompt)[0], "")
            )
        except SandboxError:
            self._discard_session()
            raise
        except ExecutionTimeout:
            lost = session.generation != generation
            raise FilesError(
                f"the sandbox did not answer this ex.files call within the time limit of {self.timeout_seconds:g} s "
                "(timeout_seconds), so it was interrupted"
                + (
                    ", and as it did not stop, its kernel was restarted: variables and functions defined by "
                    "earlier code are lost"
                    if lost
                    else ""
                ),
                error_type="TimeoutError",
            ) from None

    def _file_seconds(self) -> float:
        return self.timeout_seconds

    def _load(self, what: str, text: str) -> None:
        blocking(self._loading(what, text))

    def _loading(self, what: str, text: str) -> Steps[None]:
        session = yield from self._ensuring_ready()
        yield from self._internally(session, cell_calling(f"load_{what}"), {what: text})

    # -- the contract ------------------------------------------------------------

    def run(self, code: str, on_output: OutputCallback | None = None) -> CodeOutput:
        return blocking(self._running(code, on_output))

    async def arun(self, code: str, on_output: OutputCallback | None = None) -> CodeOutput:
        """`run`, awaited natively: the loop watches the kernel's sockets while the block runs, and
        `on_output` is called on the loop's thread. A cancel interrupts the block (restarting a kernel
        that does not stop) before `CancelledError` goes on; the executor stays usable."""
        return await awaited(self._running(code, on_output))

    async def asend_variables(self, variables: dict[str, Any]) -> None:
        await awaited(self._loading("variables", self._remember_variables(variables)))

    async def asend_tools(self, tools: dict[str, Tool]) -> None:
        await awaited(self._loading("tools", self._remember_tools(tools)))

    def _running(self, code: str, on_output: OutputCallback | None) -> Steps[CodeOutput]:
        """One block, from a ready kernel to its `CodeOutput`: `run` and `arun` alike."""
        session = yield from self._ensuring_ready()
        notes = self._take_notes()
        meter, bridge = self._meter(session), self._bridge
        meter.begin()
        started, calls = time.monotonic(), bridge.calls

        def usage(output_bytes: int = 0) -> BlockUsage:
            return block_usage(
                time.monotonic() - started,
                meter.end(),
                output_bytes=output_bytes,
                tool_calls=bridge.calls - calls,
                egress_reason=self._egress_reason(),
            )

        with decoding_within(self.timeout_seconds):
            try:
                result = yield from session.running_block(
                    code, timeout=self.timeout_seconds, on_input=bridge.answering, on_output=on_output
                )
            except SandboxError as error:
                error.usage = usage()
                yield Offloaded(self._discard_session)
                error.logs = notes + error.logs
                raise
            except ExecutionError as error:
                error.usage = usage()
                error.logs = notes + error.logs
                raise
            result.logs = notes + result.logs
            spent = usage(result.output_bytes)
            try:
                output = yield from code_outputting(result)
            except ExecutorError as error:
                error.usage = spent
                raise
            output.usage = spent
            return output

    def _egress_reason(self) -> str:
        """Why a block's network traffic is not counted (a subclass that counts it fills it in after)."""
        return "this sandbox does not count its network traffic"

    def _meter(self, session: KernelSession) -> Meter:
        """What measures a block's CPU time and memory peak from the host; a subclass whose host sees
        the sandbox's processes gives its own."""
        return Meter("this sandbox's processes are not visible to the host")

    def interrupt(self) -> None:
        session = self._session
        if session is not None:
            session.interrupt()

    def install_packages(self, packages: list[str]) -> list[str]:
        """pip-install into the kernel's own interpreter; return the top-level modules they provide."""
        packages = checked_packages(packages)
        if not packages:
            return []
        installed = blocking(self._installing(self._ensure_ready(), packages))
        if self.packages_prefix is not None:
            self._installed.append(packages)
        return installed

    def _installing(self, session: KernelSession, packages: list[str]) -> Steps[list[str]]:
        result = yield from session.executing(
            cell_calling("install_packages", packages, self.packages_prefix), timeout=None
        )
        if result.status != "ok":
            raise ExecutorError(f"installing {packages} into the kernel failed: {result.error_value}")
        return list(code_output(result).output)

    def close(self) -> None:
        self._closed = True
        self._discard_session()

    def _discard_session(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None
            self._ready_generation = 0


def _built_unstarted(cls: type[_Executor], kwargs: dict[str, Any]) -> _Executor:
    """`cls(**kwargs)`, with its start left to `acreate` to await."""
    token = _START_AWAITED.set(True)
    try:
        return cls(**kwargs)
    finally:
        _START_AWAITED.reset(token)


def _shut_down(process: KernelProcess) -> None:
    process.shutdown()
