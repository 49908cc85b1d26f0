"""`ex.files` for kernel sandboxes (jupyter, docker): every call is a cell of codeward's own.

The host never opens a path in the sandbox's folder, not even through a bind mount: a cell
calls the prelude's `files`, which walks the path inside the sandbox with `beneath` (no link
followed, no ``..``). Data to write crosses as the answer to the cell's request, the way
variables do; what is read comes back as the cell's value, through the value codec and
within the cell's output budget, so a hostile sandbox can send no more than the host allows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from codeward.executors import codec
from codeward.executors.base import ExecutionError
from codeward.executors.files import FileBudgetExceeded, FilesError, Names, SandboxFiles
from codeward.executors.kernel.bridge import cell_calling
from codeward.executors.kernel.cells import CellResult, code_output

__all__ = ["KernelFiles"]

#: Runs a cell of codeward's own, answering its requests (by kind) from the dict given.
CellRunner = Callable[[str, dict[str, str]], CellResult]


class KernelFiles(SandboxFiles):
    """The working folder of a kernel sandbox, reached through cells that `run_cell` runs."""

    def __init__(self, run_cell: CellRunner) -> None:
        super().__init__()
        self._run_cell = self._weakly(run_cell)

    def _call(self, operation: str, *arguments: Any, answers: dict[str, str] | None = None) -> Any:
        """The value of the prelude's ``files(operation, *arguments)``; its failure as a `FilesError`."""
        result = self._run_cell(cell_calling("files", operation, *arguments), answers or {})
        if result.status != "ok":
            raise FilesError(f"{result.error_name}: {result.error_value}", error_type=result.error_name)
        try:
            value = code_output(result).output
        except ExecutionError as error:
            if error.error_type == "OutputLimitExceeded":
                raise FileBudgetExceeded(
                    f"{error.message}; a file read through a kernel crosses its output budget "
                    "(max_output_bytes) as text a third larger: raise it, or read less at a time",
                    error_type="OutputLimitExceeded",
                ) from None
            raise FilesError(error.message, error_type=error.error_type or "") from None
        if isinstance(value, dict) and "too_large" in value:
            what = f"the listing of {arguments[0]!r}" if operation == "listing" else f"the file {arguments[0]!r}"
            raise self._too_large(what, int(value["too_large"]))
        return value

    def _write(self, path: str, data: bytes) -> None:
        self._call("write", path, answers={"file": codec.dumps(data)})

    def _read(self, path: str, limit: int) -> bytes:
        data = self._call("read", path, limit)
        if not isinstance(data, bytes):
            raise FilesError(f"the sandbox sent {type(data).__name__} for the file {path!r}, not bytes")
        return data

    def _list(self, path: str, limit: int) -> Names:
        names = self._call("listing", path, limit)
        if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
            raise FilesError(f"the sandbox sent {type(names).__name__} for the listing of {path!r}")
        return names

    def _remove(self, path: str) -> None:
        self._call("remove", path)

    def _exists(self, path: str) -> bool:
        return bool(self._call("exists", path))
