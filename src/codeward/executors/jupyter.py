"""`executor="jupyter"`: the model's code runs in a local IPython kernel, a separate process.

The kernel starts with a clean, minimal environment (never the host's: API keys
stay out), on this interpreter or another one (`python=`, e.g. a virtualenv), in a fresh
folder of its own unless `cwd=` names one.
Variables, tools and answers cross through the value codec; tools run on the
host by default (see `bridge`). A kernel that dies is replaced on the next run,
with variables and tools sent again.
"""

from __future__ import annotations

import os
import shutil
import sys
import weakref

from codeward.effects import Steps
from codeward.executors.base import SandboxError
from codeward.executors.kernel.executor import KernelExecutor
from codeward.executors.kernel.folders import WORKING_PREFIX, owned_folder, reap_dead_owners
from codeward.executors.kernel.owners import LocalKernel
from codeward.executors.kernel.session import KernelSession
from codeward.executors.metering import Meter, ProcessMeter
from codeward.executors.settings import DEFAULT_OUTPUT_BUDGET, DEFAULT_PRINT_OUTPUTS_LENGTH
from codeward.wording import a

__all__ = ["JupyterExecutor", "clean_environment"]

#: Kernel options: no history database (many kernels at once would contend for it).
_KERNEL_ARGUMENTS = ["--HistoryManager.enabled=False"]


def clean_environment(extra: dict[str, str] | None = None, *, python: str | None = None) -> dict[str, str]:
    """The kernel's whole environment: PATH, HOME, LANG and what the caller adds; nothing else of the host's."""
    path = os.environ.get("PATH", os.defpath)
    if python is not None:
        path = os.path.dirname(python) + os.pathsep + path
    env = {
        "PATH": path,
        "HOME": os.environ.get("HOME", os.path.expanduser("~")),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
    }
    for key, value in (extra or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"env must map str to str; {key!r} maps to {a(type(value).__name__)}")
        env[key] = value
    return env


class JupyterExecutor(KernelExecutor):
    """Runs code in a local Jupyter kernel; see the module docstring and `KernelExecutor`.

    `kernel_name` picks an installed kernel spec; `python` instead runs ipykernel
    on that interpreter. `env` is added to the clean environment; `transport`
    is "ipc" (the default where available: sockets in a private folder) or "tcp"
    (loopback only).
    """

    name = "jupyter"

    def __init__(
        self,
        kernel_name: str = "python3",
        python: str | None = None,
        timeout_seconds: float = 30,
        tools_mode: str = "host",
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        *,
        allow_pickle: bool = False,
        transport: str | None = None,
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
        if cwd is not None and not os.path.isdir(cwd):
            raise ValueError(f"cwd {cwd!r} is not a directory")
        self.kernel_name = kernel_name
        self.python = _find_python(python) if python is not None else None
        #: The kernel's working folder (what `files` shows): `cwd`, or a fresh owner-only one of its own.
        reap_dead_owners()  # the kernel and working folders that killed hosts left behind
        self._own_folder = owned_folder(WORKING_PREFIX) if cwd is None else None
        self.cwd = cwd or self._own_folder
        # removed by close(), or, for an executor its caller forgot, when it is collected or the program ends
        self._remove_folder = (
            weakref.finalize(self, shutil.rmtree, self._own_folder, ignore_errors=True) if self._own_folder else None
        )
        self.transport = transport or ("tcp" if sys.platform == "win32" else "ipc")
        self._env = clean_environment(env, python=self.python)
        self._process_meter: ProcessMeter | None = None
        self._start()

    def close(self) -> None:
        super().close()
        self._close_meter()
        if self._remove_folder is not None:
            self._remove_folder()

    # -- the kernel --------------------------------------------------------------

    def _egress_reason(self) -> str:
        return "the jupyter executor does not watch the kernel's network"

    def _meter(self, session: KernelSession) -> Meter:
        """The kernel's process and those it started, read from /proc by the host."""
        pid = getattr(session.process, "pid", None)
        if pid is None:
            return Meter("the kernel's process is not known to the host")
        if self._process_meter is None or self._process_meter.pid != pid:  # kept open while the kernel lives
            self._close_meter()
            self._process_meter = ProcessMeter(pid)
        return self._process_meter

    def _close_meter(self) -> None:
        if self._process_meter is not None:
            self._process_meter.close()
            self._process_meter = None

    def _start_process(self) -> LocalKernel:
        argv = None
        if self.python is not None:
            argv = [self.python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        return LocalKernel(
            argv=argv,
            kernel_name=self.kernel_name,
            env=self._env,
            cwd=self.cwd,
            transport=self.transport,
            extra_arguments=_KERNEL_ARGUMENTS,
        )

    def _starting_session(self) -> Steps[KernelSession]:
        """The kernel's start, with a hint when another interpreter's kernel does not answer."""
        try:
            return (yield from super()._starting_session())
        except SandboxError as error:
            hint = f" (is ipykernel installed for {self.python}? pip install ipykernel)" if self.python else ""
            raise SandboxError(f"{error.message}{hint}", logs=error.logs) from error


def _find_python(python: str) -> str:
    found = shutil.which(python) if os.sep not in python else python
    if not found or not os.access(found, os.X_OK):
        raise ValueError(f"python={python!r} is not an executable interpreter; give the path of a python binary")
    return os.path.abspath(found)
