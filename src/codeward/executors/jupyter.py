"""`executor="jupyter"`: the model's code runs in a local IPython kernel, a separate process.

The kernel starts with a clean, minimal environment (never the host's: API keys
stay out), on this interpreter or another one (`python=`, e.g. a virtualenv).
Variables, tools and answers cross through the value codec; tools run on the
host by default (see `bridge`). A kernel that dies is replaced on the next run,
with variables and tools sent again.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any

from codeward.executors import codec
from codeward.executors.base import CodeOutput, ExecutionError, Executor, ExecutorError, SandboxError
from codeward.executors.bridge import TOOL_MODES, ToolBridge, bootstrap_code, cell_calling, request_kind
from codeward.executors.kernel import CellResult, KernelSession, LocalKernel, display_value
from codeward.executors.prelude import PAYLOAD_SOURCE
from codeward.platform.tools import Tool

__all__ = ["JupyterExecutor", "clean_environment"]

#: Kernel options: no history database (many kernels at once would contend for it).
_KERNEL_ARGUMENTS = ["--HistoryManager.enabled=False"]

#: Seconds codeward's own cells (setup, loading variables and tools) may take.
_SETUP_TIMEOUT = 120.0


def clean_environment(extra: dict[str, str] | None = None, *, python: str | None = None) -> dict[str, str]:
    """The kernel's whole environment: PATH, HOME, LANG and what the caller adds; nothing else of the host's."""
    path = os.environ.get("PATH", os.defpath)
    if python is not None:
        path = os.path.dirname(python) + os.pathsep + path
    env = {"PATH": path, "HOME": os.environ.get("HOME", os.path.expanduser("~")), "LANG": os.environ.get("LANG", "C.UTF-8")}
    for key, value in (extra or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"env must map str to str; {key!r} maps to a {type(value).__name__}")
        env[key] = value
    return env


class JupyterExecutor(Executor):
    """Runs code in a local Jupyter kernel; see the module docstring.

    `timeout_seconds` bounds each `run`; `tools_mode` is "host" (tools run here,
    called from the sandbox) or "inline" (their source runs in the sandbox);
    `allow_pickle` lets variables that the codec cannot carry go in by pickle,
    for trusted setups only (nothing is ever unpickled coming out).
    """

    name = "jupyter"

    def __init__(
        self,
        kernel_name: str = "python3",
        python: str | None = None,
        timeout_seconds: float | None = 30,
        tools_mode: str = "host",
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        *,
        allow_pickle: bool = False,
        transport: str | None = None,
    ) -> None:
        if tools_mode not in TOOL_MODES:
            raise ValueError(f"tools_mode must be one of {', '.join(map(repr, TOOL_MODES))}, got {tools_mode!r}")
        if timeout_seconds is not None and not timeout_seconds > 0:
            raise ValueError(f"timeout_seconds must be a positive number of seconds or None, got {timeout_seconds!r}")
        if cwd is not None and not os.path.isdir(cwd):
            raise ValueError(f"cwd {cwd!r} is not a directory")
        self.kernel_name = kernel_name
        self.python = _find_python(python) if python is not None else None
        self.timeout_seconds = timeout_seconds
        self.tools_mode = tools_mode
        self.cwd = cwd
        self.allow_pickle = allow_pickle
        self.transport = transport or ("tcp" if sys.platform == "win32" else "ipc")
        self._env = clean_environment(env, python=self.python)
        self._variables: dict[str, Any] = {}
        self._bridge = ToolBridge({}, mode=tools_mode, allow_pickle=allow_pickle)
        self._session: KernelSession | None = None
        self._ready_generation = 0
        self._notes = ""  # what codeward's own cells printed (codec warnings), shown with the next run
        self._closed = False
        self._ensure_ready()

    # -- the kernel --------------------------------------------------------------

    def _start_session(self) -> KernelSession:
        argv = None
        if self.python is not None:
            argv = [self.python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        try:
            process = LocalKernel(
                argv=argv,
                kernel_name=self.kernel_name,
                env=self._env,
                cwd=self.cwd,
                transport=self.transport,
                extra_arguments=_KERNEL_ARGUMENTS,
            )
            return KernelSession(process)
        except SandboxError as error:
            hint = f" (is ipykernel installed for {self.python}? pip install ipykernel)" if self.python else ""
            raise SandboxError(f"{error.message}{hint}", logs=error.logs) from error

    def _ensure_ready(self) -> KernelSession:
        """A running kernel with codeward's side installed and the remembered variables and tools sent."""
        if self._closed:
            raise ExecutorError("this JupyterExecutor is closed; create a new one")
        if self._session is None:
            self._session = self._start_session()
        session = self._session
        if self._ready_generation != session.generation:
            self._internal(session, bootstrap_code(allow_pickle=self.allow_pickle))
            self._ready_generation = session.generation
            if self._variables:
                self._load("variables", codec.encode_variables(self._variables, allow_pickle=self.allow_pickle))
            if self._bridge.tools:
                self._load("tools", self._bridge.specs_text)
        return session

    def _internal(self, session: KernelSession, code: str, answers: dict[str, str] | None = None) -> CellResult:
        """Run codeward's own cell, answering its requests from `answers`; its failure is ours, not the model's."""
        replies = answers or {}
        result = session.execute(
            code, timeout=_SETUP_TIMEOUT, on_input=lambda prompt: replies.get(request_kind(prompt)[0], "")
        )
        if result.status != "ok":
            raise SandboxError(
                f"codeward could not set up the kernel: {result.error_name}: {result.error_value}\n{result.traceback}",
                logs=result.logs,
                state_lost=False,
            )
        self._notes += result.logs
        return result

    def _load(self, what: str, text: str) -> None:
        self._internal(self._ensure_ready(), cell_calling(f"load_{what}"), {what: text})

    # -- the contract ------------------------------------------------------------

    def send_variables(self, variables: dict[str, Any]) -> None:
        text = codec.encode_variables(variables, allow_pickle=self.allow_pickle)  # fails before anything is sent
        self._variables.update(variables)
        self._load("variables", text)

    def send_tools(self, tools: dict[str, Tool]) -> None:
        self._bridge = ToolBridge(tools, mode=self.tools_mode, allow_pickle=self.allow_pickle)
        self._load("tools", self._bridge.specs_text)

    def run(self, code: str) -> CodeOutput:
        session = self._ensure_ready()
        notes, self._notes = self._notes, ""
        try:
            result = session.execute(code, timeout=self.timeout_seconds, on_input=self._bridge.answer)
        except SandboxError as error:
            self._discard_session()
            error.logs = notes + error.logs
            raise
        except ExecutionError as error:
            error.logs = notes + error.logs
            raise
        result.logs = notes + result.logs
        return _code_output(result)

    def install_packages(self, packages: list[str]) -> list[str]:
        """pip-install into the kernel's own interpreter; return the top-level modules they provide."""
        if not packages:
            return []
        session = self._ensure_ready()
        code = f"__import__('sys').modules['_codeward'].install_packages({list(packages)!r})"
        result = session.execute(code, timeout=None)
        if result.status != "ok":
            raise ExecutorError(f"installing {packages} into the kernel failed: {result.error_value}")
        output = _code_output(result).output
        return list(output)

    def close(self) -> None:
        self._closed = True
        self._discard_session()

    def _discard_session(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None
            self._ready_generation = 0

    def __del__(self) -> None:  # a forgotten executor must not leave a kernel running
        if not getattr(self, "_closed", True):
            try:
                self.close()
            except Exception:  # during interpreter shutdown, modules may already be gone
                pass


def _code_output(result: CellResult) -> CodeOutput:
    """Turn the kernel's reply into the contract's answer: a final answer, a value, or an error."""
    entries = {key: value for entry in result.payload if entry.get("source") == PAYLOAD_SOURCE for key, value in entry.items()}
    displays = [display_value(bundle) for bundle in result.displays]
    if "final" in entries:
        return CodeOutput(_decode(entries["final"], result.logs), result.logs, True, displays)
    if "final_error" in entries:
        raise ExecutionError(entries["final_error"], logs=result.logs, error_type="CodecError")
    if result.status != "ok":
        raise ExecutionError(
            f"{result.error_name}: {result.error_value}",
            logs=result.logs,
            traceback=result.traceback,
            error_type=result.error_name or None,
        )
    if "value" in entries:
        output = _decode(entries["value"], result.logs)
    elif result.result is not None:  # a value the codec cannot carry: its richest display instead
        output = display_value(result.result)
    else:
        output = None
    return CodeOutput(output, result.logs, False, displays)


def _decode(text: str, logs: str) -> Any:
    """A value that came out of the sandbox: decoded without pickle, whatever the sandbox claims."""
    try:
        return codec.loads(text)
    except codec.CodecError as error:
        raise ExecutionError(f"the sandbox sent a value codeward refuses: {error}", logs=logs, error_type="CodecError") from error


def _find_python(python: str) -> str:
    found = shutil.which(python) if os.sep not in python else python
    if not found or not os.access(found, os.X_OK):
        raise ValueError(f"python={python!r} is not an executable interpreter; give the path of a python binary")
    return os.path.abspath(found)
