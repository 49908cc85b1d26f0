"""`executor="e2b"`: the model's code runs in an E2B cloud sandbox (a Firecracker microVM).

Isolation without running Docker yourself, through the `e2b-code-interpreter`
SDK. The sandbox runs an IPython kernel behind E2B's HTTP server, so codeward's
sandbox side is the same prelude and value codec as in the kernel sandboxes,
with three differences forced by a server that only relays outputs:

- tools go where they can run (``tools_mode="auto"``, the default): a `@tool`
  function that can be shipped goes as source, with the imports and plain
  constants it uses from its module, and runs *inside* the sandbox; one that
  must run on the host (an MCP tool, an object with state, an async function,
  one that uses the host's secrets or has no source) is called there. The
  kernel cannot ask the host through its stdin channel, so a host call is a
  marked line the code prints and an answer the host writes into the sandbox
  through envd's file API (see `output`): the tool runs on the host, its
  secrets, state and MCP servers with it, and its arguments are checked there
  by the same `ToolBridge` as on the other sandboxes. ``tools_mode="host"``
  calls every tool on the host, ``"inline"`` ships every one and refuses one
  that cannot be shipped; variables and tool descriptions travel inside the
  cells that define them;
- reply payloads do not reach the host, so final answers and last values come
  back as displays of codeward's own type, decoded here without pickle;
- the SDK's own deadline fires at twice the timeout asked (its HTTP transport
  sums the read and write timeouts: E2B#1881), so the time limit is enforced
  inside the sandbox by a timer; the SDK's deadline stays behind it as a
  backstop, after which a context that will not stop is restarted.

The async API (`arun`, `asend_variables`, `asend_tools`, `aclose`, `acreate`)
is native: it awaits E2B's async SDK (`AsyncSandbox`) on the event loop. The
executor's logic is written once, as steps that yield the SDK calls they wait
on (`calls`): `run` makes them with the sync SDK, `arun` awaits them with the
async one. An executor reaches its sandbox through both SDKs, whichever its
caller started with, the other made from the same fields when first needed.
Cancelling an awaited block closes its stream, which makes E2B interrupt it.

Each executor runs in a code context (a kernel) of its own, so one sandbox can
serve several executors and `close()` can stop exactly what it started. A
sandbox whose lifetime ran out, or that was killed, raises `SandboxError`; the
next run starts a new sandbox and sends variables and tools again.

Offline, with ``E2B_DEBUG=true``, the SDK creates no cloud sandbox and talks to
a local server on ``localhost:49999`` (or ``E2B_SANDBOX_URL``): no API key is
needed then. The test suite's server speaks the same protocol.
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import httpx
from e2b import (
    AuthenticationException,
    ConnectionConfig,
    NotFoundException,
    SandboxException,
)
from e2b import TimeoutException as E2BTimeout
from e2b_code_interpreter import Context, Execution, Sandbox

from codeward.effects import Steps, awaited, blocking
from codeward.executors import codec
from codeward.executors.base import (
    CodeOutput,
    ExecutionError,
    ExecutionTimeout,
    ExecutorError,
    SandboxError,
)
from codeward.executors.e2b.calls import RETRYABLE, SandboxHandles, SdkCall, Started, retried
from codeward.executors.e2b.files import E2BFiles
from codeward.executors.e2b.network import network_rules
from codeward.executors.e2b.output import CellReading, HostRequests, OutputFlood, OutputStopped, e2b_usage
from codeward.executors.kernel.bridge import ToolBridge, bootstrap_code, cell_calling
from codeward.executors.kernel.cells import (
    CellResult,
    code_output,
    code_outputting,
    decoding_within,
    require_setup_ok,
    strip_ansi,
)
from codeward.executors.kernel.remembering import RememberingExecutor
from codeward.executors.live import BlockStops, LiveOutput, OutputCallback
from codeward.executors.settings import (
    DEFAULT_OUTPUT_BUDGET,
    DEFAULT_PRINT_OUTPUTS_LENGTH,
    checked_packages,
    checked_seconds,
    checked_tool_names,
    checked_variable_names,
)
from codeward.tools import Tool

__all__ = ["E2BExecutor"]

logger = logging.getLogger(__name__)

MISSING_KEY = (
    "the e2b executor needs an E2B API key: set the E2B_API_KEY environment variable or pass "
    "api_key=... (keys are at https://e2b.dev/dashboard). To use a local server that speaks "
    "E2B's protocol instead, set E2B_DEBUG=true"
)
#: Seconds the SDK's deadline waits past the in-sandbox limit before giving up on the run (at most).
_BACKSTOP_GRACE = 1.0
#: Seconds a context gets to show it is free again after a run overran even the backstop.
_PROBE_SECONDS = 1.0
#: Seconds codeward's own cells (setup, variables, tools) may take.
_SETUP_SECONDS = 120.0
#: Where answers go when E2B names no working folder for the context.
_ANSWERS_HOME = "/tmp"
#: Sandbox lifetimes are renewed once less than this share of `sandbox_timeout` is left.
_RENEW_SHARE = 0.5
#: Errors E2B's server reports when the context's kernel died under the execution.
_KERNEL_LOST = ("ContextRestarting", "UnexpectedEndOfExecution")
#: The ends of IPython's traceback headers, its rule of dashes and its "Name  Traceback (most recent call
#: last)" lines, which E2B's server runs into the next entry: it joins the entries with nothing between.
_RULE_END = re.compile(r"\A(-{20,})(?=[^\n])")
_HEADER_END = re.compile(r"^([\w.]+ +Traceback \(most recent call last\))(?=[^\n])", re.MULTILINE)

#: Set by `acreate` while it builds an executor: the constructor leaves the sandbox's start to it.
_STARTED_BY_CALLER: ContextVar[bool] = ContextVar("codeward_e2b_started_by_caller", default=False)

T = TypeVar("T")


class E2BExecutor(RememberingExecutor):
    """Runs code in an E2B sandbox; see the module docstring.

    `timeout_seconds` bounds each run; `sandbox_timeout` is the sandbox's
    lifetime in seconds, renewed while the executor is used; `sandbox_id`
    connects to a running sandbox, which `close()` then leaves running (if it
    is lost, the next run creates a sandbox of its own, which `close()` kills);
    `envs` become environment variables in the sandbox. `connection` passes
    options to the SDK's connection (``domain``, ``debug``, ``sandbox_url``,
    ``proxy``, ``request_timeout``...). `allow_pickle` lets variables the codec
    cannot carry go in pickled, for trusted setups (nothing comes out pickled).
    `egress` lists the only hosts, IP addresses and CIDR blocks the sandbox may
    reach, as E2B's own network rules (see `network`; ``[]``: none);
    `egress_headers` is refused on e2b, with the reason.
    """

    name = "e2b"

    def __init__(
        self,
        api_key: str | None = None,
        template: str | None = None,
        timeout_seconds: float = 30,
        sandbox_timeout: int = 300,
        sandbox_id: str | None = None,
        envs: dict[str, str] | None = None,
        allow_internet_access: bool = False,
        tools_mode: str = "auto",
        *,
        allow_pickle: bool = False,
        connection: dict[str, Any] | None = None,
        max_output_bytes: int = DEFAULT_OUTPUT_BUDGET,
        max_print_outputs_length: int = DEFAULT_PRINT_OUTPUTS_LENGTH,
        egress: Sequence[str] | None = None,
        egress_headers: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        _check_arguments(checked_seconds("timeout_seconds", timeout_seconds), sandbox_timeout, envs)
        self._network = network_rules(egress, egress_headers)
        if self._network is not None and allow_internet_access:
            raise ValueError(
                "allow_internet_access=True opens the whole internet and egress=[...] names the only places the "
                "sandbox may reach: pass one of them"
            )
        if self._network is not None and sandbox_id is not None:
            raise ValueError(
                "egress applies when the executor creates the sandbox: a sandbox named by sandbox_id keeps the "
                "network rules it was created with, which codeward cannot see. Leave sandbox_id out, or create "
                "that sandbox with E2B's own network= rules"
            )
        super().__init__(
            timeout_seconds=timeout_seconds,
            tools_mode=tools_mode,
            allow_pickle=allow_pickle,
            max_output_bytes=max_output_bytes,
            max_print_outputs_length=max_print_outputs_length,
        )
        self.sandbox_timeout = int(sandbox_timeout)
        self.template = template
        self.allow_internet_access = allow_internet_access
        self.egress = None if self._network is None else tuple(self._network.get("allow_out", []))
        self._envs = dict(envs or {})
        self._options = _connection_options(api_key, connection)
        self._sandbox: SandboxHandles | None = None
        self._context: Context | None = None
        self._owned = False
        self._connect_to = sandbox_id
        self._renewed_at = 0.0
        self._ready = False
        self._folder = ""  # where the sandbox waits for the answers to its tool requests (host tools)
        self._kernel_pid: int | None = None  # the context's kernel process, which `interrupt()` signals
        self._stops = BlockStops()
        self.files = E2BFiles(self._ready_sandbox, self._requesting)
        if _STARTED_BY_CALLER.get():
            return
        try:
            blocking(self._readying())
        except BaseException:
            self.close()  # a sandbox made before the failure must not outlive it
            raise

    @classmethod
    async def acreate(cls, **kwargs: Any) -> E2BExecutor:
        """The executor, built and its sandbox started with E2B's async SDK, the event loop free meanwhile."""
        token = _STARTED_BY_CALLER.set(True)
        try:
            executor = cls(**kwargs)
        finally:
            _STARTED_BY_CALLER.reset(token)
        try:
            await awaited(executor._readying())
        except BaseException:
            await executor.aclose()  # a sandbox made before the failure must not outlive it
            raise
        return executor

    # -- the sandbox ---------------------------------------------------------------

    @property
    def sandbox_id(self) -> str | None:
        """The id of the sandbox in use, e.g. to connect to it from elsewhere."""
        return self._sandbox.sandbox_id if self._sandbox is not None else None

    def _readying(self) -> Steps[tuple[SandboxHandles, Context]]:
        """A live sandbox and context with codeward's side installed and variables and tools sent."""
        self._check_open()
        if self._sandbox is None:
            self._sandbox = yield from self._opening()
        else:
            yield from self._renewing(self._sandbox)
        if self._context is None:
            sandbox = self._sandbox
            self._context = yield from self._requested(retried(lambda: SdkCall(sandbox, "create_code_context")))
            self._ready = False
        if not self._ready:
            yield from self._installing()
        return self._sandbox, self._context

    def _ready_sandbox(self) -> Sandbox:
        return blocking(self._readying())[0].blocking()

    def _live(self) -> tuple[SandboxHandles, Context]:
        """The sandbox and context a run is using (set up by the caller before any cell runs)."""
        if self._sandbox is None or self._context is None:
            raise SandboxError("the E2B sandbox is not set up for this run; run the code again")
        return self._sandbox, self._context

    def _opening(self) -> Steps[SandboxHandles]:
        sandbox_id, self._connect_to = self._connect_to, None
        sandbox: SandboxHandles
        try:
            if sandbox_id is not None:
                sandbox = yield from retried(
                    lambda: Started("connect", sandbox_id, timeout=self.sandbox_timeout, **self._options)
                )
                self._owned = False
            else:
                key = uuid.uuid4().hex  # the same key on every retry: E2B then creates one sandbox, not several
                sandbox = yield from retried(
                    lambda: Started(
                        "create",
                        template=self.template,
                        timeout=self.sandbox_timeout,
                        # with an allow-list, E2B's rules say it all (its allow_internet_access=False is a deny-all)
                        allow_internet_access=None if self.egress else self.allow_internet_access,
                        network=self._network,
                        idempotency_key=key,
                        **self._options,
                    )
                )
                self._owned = True
        except AuthenticationException as error:
            raise ExecutorError(f"E2B refused the API key: {error}. {MISSING_KEY}") from error
        except NotFoundException as error:
            raise SandboxError(
                f"E2B has no sandbox {sandbox_id!r}: it expired or was killed. Pass sandbox_id=None to create one",
            ) from error
        except RETRYABLE as error:
            raise SandboxError(
                f"could not reach E2B to get a sandbox, after retrying: {type(error).__name__}: {error}. "
                "Check the network, or E2B's status page",
                state_lost=False,
            ) from error
        except SandboxException as error:
            raise ExecutorError(f"E2B could not give a sandbox (template {self.template!r}): {error}") from error
        self._renewed_at = time.monotonic()
        return sandbox

    def _renewing(self, sandbox: SandboxHandles) -> Steps[None]:
        """Push the sandbox's end of life back once much of it is used, so it outlives the runs."""
        left = self._renewed_at + self.sandbox_timeout - time.monotonic()
        if left > max(self.sandbox_timeout * _RENEW_SHARE, self.timeout_seconds + _BACKSTOP_GRACE):
            return
        yield from self._requested(retried(lambda: SdkCall(sandbox, "set_timeout", self.sandbox_timeout)))
        self._renewed_at = time.monotonic()

    def _installing(self) -> Steps[None]:
        """Set up a fresh context in one round trip: prelude and codec, time limit, environment, variables, tools."""
        cells = [
            bootstrap_code(allow_pickle=self.allow_pickle),
            cell_calling("report_by_display"),
            cell_calling("limit_time", self.timeout_seconds),
        ]
        if self.tools_mode != "inline":  # the channel back, for tools sent now or later that run on the host
            self._folder = posixpath.join(self._live()[1].cwd or _ANSWERS_HOME, ".codeward", uuid.uuid4().hex)
            cells.append(cell_calling("ask_by_output", self._folder))
        if self._envs:
            cells.append(f"__import__('os').environ.update({self._envs!r})")
        if self._variables:
            cells.append(
                cell_calling("load_variables", codec.encode_variables(self._variables, allow_pickle=self.allow_pickle))
            )
        if self._bridge.tools:
            cells.append(cell_calling("load_tools", self._bridge.specs_text))
        cells.append("__import__('os').getpid()")
        pid = code_output((yield from self._internal("\n".join(cells)))).output
        self._kernel_pid = pid if type(pid) is int and pid > 1 else None
        self._ready = True

    def _internal(self, code: str) -> Steps[CellResult]:
        """Run codeward's own cell; its failure is the sandbox's, not the model's code's."""
        cell = yield from self._executing(code, _SETUP_SECONDS)
        require_setup_ok(cell, "the E2B sandbox")
        self._notes += cell.logs
        return cell

    def _host_requests(self, sandbox: SandboxHandles, seconds: float) -> HostRequests | None:
        """With host tools, what answers the cell's tool requests: the bridge, writing through envd."""
        if not self._bridge.runs_on_host:  # then the sandbox announces no nonce, and the host takes no request
            return None

        def write(path: str, data: bytes) -> SdkCall:
            return SdkCall(sandbox, "files.write", path, data, use_octet_stream=True)

        return HostRequests(self._bridge, write, self._folder, time.monotonic() + seconds)

    # -- one execution -----------------------------------------------------------------

    def _executing(self, code: str, seconds: float, live: LiveOutput | None = None) -> Steps[CellResult]:
        """Run a cell in the context and gather what came back, handing its output to `live` as it
        comes; transport failures become executor errors."""
        sandbox, context = self._live()
        reading = CellReading(
            self.max_print_outputs_length, self.max_output_bytes, self._host_requests(sandbox, seconds), live
        )
        handlers = {"on_stdout": reading.printed, "on_stderr": reading.printed, "on_result": reading.shown}
        started = time.monotonic()
        try:
            execution = yield SdkCall(
                sandbox, "run_code", code, context=context, timeout=seconds + _BACKSTOP_GRACE, handlers=handlers
            )
        except OutputStopped:  # the stream closed, E2B interrupts the cell: the caller's callback failed
            assert live is not None and live.failure is not None
            raise live.failure from None
        except OutputFlood as flood:
            raise ExecutionError(
                f"the code sent more than twice its output budget of {self.max_output_bytes:,} bytes, so codeward "
                "stopped reading and the sandbox interrupted the code (E2B's SDK holds all it reads until the "
                "code ends); variables defined before are kept. Print, show or return less at a time",
                logs=reading.logs(),
                error_type="OutputLimitExceeded",
            ) from flood
        except E2BTimeout as error:
            if time.monotonic() - started >= seconds:
                yield from self._overrunning(seconds, reading.logs())
            raise (yield from self._losing(error, reading.logs())) from error
        except NotFoundException as error:
            self._context = None
            raise SandboxError(
                f"the sandbox no longer has codeward's code context ({error}): variables and functions defined by "
                "earlier code are lost; the next run makes a new context and sends variables and tools again",
                logs=reading.logs(),
            ) from error
        except (httpx.HTTPError, SandboxException, OSError) as error:  # is the sandbox still there?
            raise (yield from self._losing(error, reading.logs())) from error
        return self._cell(execution, reading, seconds)

    def _cell(self, execution: Execution, reading: CellReading, seconds: float) -> CellResult:
        error, logs = execution.error, reading.logs()
        if error is not None and error.name == "TimeLimitExceeded":
            raise ExecutionTimeout(
                f"the code ran past its time limit of {seconds:g} s and was stopped",
                logs=logs,
                traceback=_traceback_text(error.traceback),
                error_type="TimeoutError",
            )
        if error is not None and error.name in _KERNEL_LOST:
            self._ready = False
            raise SandboxError(
                "the sandbox's Python process died while running the code (out of memory, killed, or exited). "
                "Variables and functions defined by earlier code are lost; the next run sends variables and "
                f"tools again. E2B said: {error.name}: {error.value}",
                logs=logs,
            )
        return CellResult(
            status="ok" if error is None else "error",
            logs=logs,
            result=reading.main,
            displays=reading.displays,
            payload=[entry if "cut" in entry else _report(entry["text"], logs) for entry in reading.reports],
            error_name=error.name if error else "",
            error_value=error.value if error else "",
            traceback=_traceback_text(error.traceback) if error else "",
        )

    def _overrunning(self, seconds: float, logs: str) -> Steps[None]:
        """The run outlived even the backstop: see whether the context stopped, else restart it; then raise."""
        sandbox, context = self._live()
        try:
            yield SdkCall(sandbox, "run_code", "None", context=context, timeout=_PROBE_SECONDS)
        except Exception:  # still busy (or gone): a restart is the only way to stop it
            self._ready = False
            try:
                yield SdkCall(sandbox, "restart_code_context", context)
            except Exception as error:
                raise (yield from self._losing(error, logs)) from error
            raise ExecutionTimeout(
                f"the code ran past its time limit of {seconds:g} s and did not stop, so its context was restarted: "
                "variables and functions defined by earlier code are lost (variables and tools given by the "
                "caller are sent again)",
                logs=logs,
                error_type="TimeoutError",
            ) from None
        raise ExecutionTimeout(
            f"the code ran past its time limit of {seconds:g} s and was interrupted",
            logs=logs,
            error_type="TimeoutError",
        )

    def _losing(
        self, error: Exception, logs: str, during: str = "the run; the code may or may not have run"
    ) -> Steps[SandboxError]:
        """The error for a request that failed: the sandbox is gone, or the network or E2B failed."""
        sandbox = self._sandbox
        try:
            running = sandbox is not None and bool((yield SdkCall(sandbox, "is_running")))
        except Exception:  # cannot tell: assume it is gone, and start afresh
            running = False
        if running:
            return SandboxError(
                f"a request to the E2B sandbox failed during {during} ({type(error).__name__}: {error}); "
                "the sandbox and its state are still there",
                logs=logs,
                state_lost=False,
            )
        self._forget_sandbox()
        return SandboxError(
            "the E2B sandbox is gone (its lifetime ran out, or it was killed): variables and functions defined "
            "by earlier code are lost; the next run starts a new sandbox and sends variables and tools again. "
            f"E2B said: {error}",
            logs=logs,
        )

    def _requested(self, steps: Steps[T]) -> Steps[T]:
        """A control request (no code runs): a sandbox found gone on the way raises `SandboxError`."""
        try:
            return (yield from steps)
        except (httpx.HTTPError, SandboxException, OSError) as error:
            raise (yield from self._losing(error, "", "codeward's setup (no code of yours ran); try again")) from error

    @contextmanager
    def _requesting(self, during: str) -> Iterator[None]:
        """`_requested` for a block of blocking calls (`files`): a sandbox found gone raises `SandboxError`."""
        try:
            yield
        except (httpx.HTTPError, SandboxException, OSError) as error:
            raise blocking(self._losing(error, "", f"{during} (no code of yours ran); try again")) from error

    def _forget_sandbox(self) -> None:
        self._sandbox, self._context, self._ready = None, None, False

    # -- the contract ------------------------------------------------------------------

    def _load(self, what: str, text: str) -> None:
        blocking(self._loading(what, text))

    def _loading(self, what: str, text: str) -> Steps[None]:
        yield from self._readying()
        yield from self._internal(cell_calling(f"load_{what}", text))

    async def asend_variables(self, variables: dict[str, Any]) -> None:
        """`send_variables`, awaited with E2B's async SDK."""
        checked_variable_names(variables, tools=self._bridge.tools)
        text = codec.encode_variables(variables, allow_pickle=self.allow_pickle)  # fails before anything is sent
        self._variables.update(variables)
        await awaited(self._loading("variables", text))

    async def asend_tools(self, tools: dict[str, Tool]) -> None:
        """`send_tools`, awaited with E2B's async SDK."""
        checked_tool_names(tools)
        self._bridge = ToolBridge(tools, mode=self.tools_mode, allow_pickle=self.allow_pickle)
        await awaited(self._loading("tools", self._bridge.specs_text))

    def run(self, code: str, on_output: OutputCallback | None = None) -> CodeOutput:
        return blocking(self._running(code, on_output))

    async def arun(self, code: str, on_output: OutputCallback | None = None) -> CodeOutput:
        """`run`, awaited with E2B's async SDK: `on_output` and async host tools run on the event loop's
        thread, sync host tools in the shared bounded pool. Cancelling the awaiting task closes the
        block's stream, which makes E2B interrupt the block; the executor stays usable."""
        return await awaited(self._running(code, on_output))

    def _running(self, code: str, on_output: OutputCallback | None) -> Steps[CodeOutput]:
        yield from self._readying()
        notes = self._take_notes()
        live = LiveOutput(on_output, self.max_print_outputs_length)
        bridge, started = self._bridge, time.monotonic()
        calls = bridge.calls
        cell: CellResult | None = None
        try:
            with decoding_within(self.timeout_seconds), self._stops.running(self._signal_kernel):
                cell = yield from self._executing(code, self.timeout_seconds, live)
                output = yield from code_outputting(cell)
        except ExecutorError as error:
            error.usage = e2b_usage(time.monotonic() - started, cell, bridge.calls - calls)
            error.logs = notes + error.logs
            raise
        output.usage = e2b_usage(time.monotonic() - started, cell, bridge.calls - calls)
        output.logs = notes + output.logs
        return output

    def interrupt(self) -> None:
        """Stop the running block as Ctrl-C does: SIGINT to its kernel, sent by a one-line cell in the
        sandbox's default context (E2B relays no interrupt, and the block's own stream belongs to the
        thread that reads it). Between blocks nothing happens, and the kernel ignores a late one."""
        self._stops.interrupt()

    def _signal_kernel(self) -> None:
        sandbox, pid = self._sandbox, self._kernel_pid
        if sandbox is None or pid is None:
            return
        try:
            sandbox.blocking().run_code(
                f"__import__('os').kill({pid}, __import__('signal').SIGINT)", timeout=_PROBE_SECONDS * 5
            )
        except Exception as error:  # the block's own run reports a sandbox that is gone
            logger.info("could not interrupt the E2B code context: %s", error)

    def install_packages(self, packages: list[str]) -> list[str]:
        """pip-install into the sandbox's Python (it needs internet access); return the modules they provide."""
        packages = checked_packages(packages)
        if not packages:
            return []
        return blocking(self._installing_packages(packages))

    def _installing_packages(self, packages: list[str]) -> Steps[list[str]]:
        yield from self._readying()
        yield from self._internal(cell_calling("limit_time", 0))
        try:
            cell = yield from self._executing(cell_calling("install_packages", packages), _SETUP_SECONDS * 5)
        finally:
            yield from self._internal(cell_calling("limit_time", self.timeout_seconds))
        if cell.status != "ok":
            if self.egress:
                hint = f" (the sandbox reaches only egress={list(self.egress)}: pip needs pypi.org and files.pythonhosted.org)"
            elif self.allow_internet_access:
                hint = ""
            else:
                hint = " (the sandbox has no internet access: allow_internet_access=False)"
            raise ExecutorError(f"installing {packages} into the E2B sandbox failed{hint}: {cell.error_value}")
        return list(code_output(cell).output)

    def close(self) -> None:
        """Stop this executor's context, and kill the sandbox if this executor created it."""
        blocking(self._closing())

    async def aclose(self) -> None:
        """`close`, awaited with E2B's async SDK."""
        await awaited(self._closing())

    def _closing(self) -> Steps[None]:
        if self._closed:
            return
        self._closed = True
        sandbox, context, owned = self._sandbox, self._context, self._owned
        self._forget_sandbox()
        if sandbox is None:
            return
        if context is not None:
            try:
                yield SdkCall(sandbox, "remove_code_context", context)
            except Exception as error:  # best effort: the sandbox may already be gone
                logger.info("could not remove the code context %s: %s", context.id, error)
        if owned:
            try:
                yield from retried(lambda: SdkCall(sandbox, "kill"))
            except Exception as error:
                logger.warning("could not kill E2B sandbox %s (it ends at its timeout): %s", sandbox.sandbox_id, error)


def _check_arguments(timeout_seconds: float, sandbox_timeout: int, envs: Any) -> None:
    if isinstance(sandbox_timeout, bool) or not isinstance(sandbox_timeout, int) or sandbox_timeout <= timeout_seconds:
        raise ValueError(
            f"sandbox_timeout must be a whole number of seconds longer than timeout_seconds ({timeout_seconds!r}), "
            f"got {sandbox_timeout!r}: it is how long the sandbox lives between renewals"
        )
    if envs is not None and not (
        isinstance(envs, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in envs.items())
    ):
        raise ValueError(f"envs must be a dict of str to str, got {envs!r}")


def _connection_options(api_key: str | None, connection: dict[str, Any] | None) -> dict[str, Any]:
    """The SDK's connection options, checked now: without debug mode, an API key must be there."""
    options = dict(connection or {})
    if api_key is not None:
        options["api_key"] = api_key
    try:
        config = ConnectionConfig(**options)
    except TypeError as error:
        raise ValueError(f"connection has an option the E2B SDK does not know: {error}") from None
    if not config.debug and not config.api_key:
        raise ValueError(MISSING_KEY)
    return options


def _traceback_text(traceback: str) -> str:
    """The traceback E2B sends, without colours and with its headers on lines of their own again."""
    return _HEADER_END.sub(r"\1\n", _RULE_END.sub(r"\1\n", strip_ansi(traceback)))


def _report(text: Any, logs: str) -> dict[str, Any]:
    """One of codeward's reports from the sandbox: plain JSON around codec text, never unpickled."""
    try:
        entry = json.loads(text)
    except (TypeError, ValueError, RecursionError) as error:
        raise ExecutionError(f"the sandbox sent a report codeward cannot read: {error}", logs=logs) from None
    if not isinstance(entry, dict):
        raise ExecutionError("the sandbox sent a report codeward cannot read: not an object", logs=logs)
    return entry
