"""`ex.files` for kernel sandboxes (jupyter, docker): every call is a cell of codeward's own.

The host never opens a path in the sandbox's folder, not even through a bind mount: a cell
calls the prelude's `files`, which walks the path inside the sandbox with `beneath` (no link
followed, no ``..``). Data to write crosses as the answer to the cell's request, the way
variables do; what is read comes back as the cell's value, within the cell's output budget.

The kernel runs a stranger's code, which may have replaced the prelude's `files`: so each
answer is taken as the stranger's. Its text is bounded in characters before it is decoded
(a file read by what was asked for, a listing by what is left of the budget and by
`MAX_LISTING_NAMES` names), decoded within the codec's bounds on time and memory, and must be
exactly what the call expects; ``exists``, ``remove`` and ``write`` answer with a word or
nothing. The call itself is held at most the executor's time limit (see `KernelExecutor`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from codeward.executors import codec
from codeward.executors.files import FileBudgetExceeded, FilesError, Names, SandboxFiles
from codeward.executors.kernel.bridge import cell_calling
from codeward.executors.kernel.cells import DECODING_GRACE, CellResult, prelude_entries

__all__ = ["MAX_LISTING_NAMES", "KernelFiles"]

#: Runs a cell of codeward's own, answering its requests (by kind) from the dict given.
CellRunner = Callable[[str, dict[str, str]], CellResult]

#: The most names one listing may hold, whatever their bytes: past it the listing is refused.
MAX_LISTING_NAMES = 100_000
#: What a decoded name may cost the host beyond its characters (a str and its place in the list):
#: with the listing's text, the memory its decoding may take (`codec.decoding_memory`).
_NAME_COST = 112
#: The answers of the calls that return no data, exactly as the prelude writes them.
_WORDS: dict[str, dict[str | None, bool | None]] = {
    "exists": {"true": True, "false": False},
    "remove": {"null": None},
    "write": {None: None},
}
#: Characters of a read's answer beyond its base64 (the tag around it), or of a "too large" answer.
_ROOM = 64
#: What decoding that much text may take besides (`codec.bounds.decoded_size` of a tag).
_DECODED_ROOM = 1024
#: A call's answer: its text, or None where there was none; and when its decoding must end.
_Answer = tuple[str | None, float]


class KernelFiles(SandboxFiles):
    """The working folder of a kernel sandbox, reached through cells that `run_cell` runs, each held
    at most `seconds()` (the executor's time limit) with the decoding of its answer."""

    def __init__(self, run_cell: CellRunner, seconds: Callable[[], float]) -> None:
        super().__init__()
        self._run_cell = self._weakly(run_cell)
        self._seconds = self._weakly(seconds)

    def _answer(self, operation: str, *arguments: Any, answers: dict[str, str] | None = None) -> _Answer:
        """The text of the prelude's answer to ``files(operation, *arguments)`` (None: it gave none),
        and when its decoding must end; its failure as a `FilesError`."""
        deadline = time.monotonic() + self._seconds() + DECODING_GRACE
        result = self._run_cell(cell_calling("files", operation, *arguments), answers or {})
        if result.status != "ok":
            raise FilesError(f"{result.error_name}: {result.error_value}", error_type=result.error_name)
        entries = prelude_entries(result.payload)
        if "cut" in entries:
            raise FileBudgetExceeded(
                f"the answer is {entries['cut']:,} bytes, past the cell's output budget; a file read through "
                "a kernel crosses its output budget (max_output_bytes) as text a third larger: raise it, or "
                "read less at a time",
                error_type="OutputLimitExceeded",
            )
        text = entries.get("value")
        if set(entries) - {"source", "value"} or result.result is not None or not isinstance(text, (str, type(None))):
            raise _out_of_turn(operation, arguments[0])
        return text, deadline

    def _decoded(self, answer: _Answer, operation: str, path: str, most: int, memory: int) -> Any:
        """The answer's text decoded by its deadline, having been refused past `most` characters (or
        `memory` bytes once decoded); a sandbox that answered nothing answered out of turn."""
        text, deadline = answer
        if text is None:
            raise _out_of_turn(operation, path)
        if len(text) > most:
            raise self._too_large(_what(operation, path), len(text))
        try:
            with codec.decoding_memory(memory), codec.decoding_deadline(deadline):
                value = codec.loads(text)
        except codec.CodecError as error:
            raise FilesError(
                f"the sandbox's answer for {_what(operation, path)} was refused: {error}", error_type="CodecError"
            ) from None
        if isinstance(value, dict) and set(value) == {"too_large"} and type(value["too_large"]) is int:
            raise self._too_large(_what(operation, path), value["too_large"])
        return value

    def _word(self, operation: str, path: str, answers: dict[str, str] | None = None) -> Any:
        """The answer of a call that returns no data: one of the few it may be, anything else refused."""
        text, _ = self._answer(operation, path, answers=answers)
        words = _WORDS[operation]
        if text not in words:
            raise _out_of_turn(operation, path)
        return words[text]

    def _write(self, path: str, data: bytes) -> None:
        self._word("write", path, answers={"file": codec.dumps(data)})

    def _read(self, path: str, limit: int) -> bytes:
        most = 4 * -(-limit // 3) + _ROOM  # the file's base64, and its tag
        data = self._decoded(self._answer("read", path, limit), "read", path, most, most + _DECODED_ROOM)
        if not isinstance(data, bytes):
            raise FilesError(f"the sandbox sent {type(data).__name__} for the file {path!r}, not bytes")
        return data

    def _listing(self, path: str, limit: int) -> tuple[Names, int]:
        """The names, and their cost: the characters of the listing's text."""
        answer = self._answer("listing", path, limit)
        text = answer[0] or ""
        if (text.count('"') - text.count('\\"')) // 2 > MAX_LISTING_NAMES:  # as many names, or more
            raise _too_many(path)
        memory = len(text) + _NAME_COST * MAX_LISTING_NAMES + _DECODED_ROOM
        names = self._decoded(answer, "listing", path, max(limit, _ROOM), memory)
        if not isinstance(names, list) or not all(type(name) is str for name in names):
            raise FilesError(f"the sandbox sent {type(names).__name__} for the listing of {path!r}")
        if len(names) > MAX_LISTING_NAMES:
            raise _too_many(path)
        return names, len(text)

    def _list(self, path: str, limit: int) -> Names:
        return self._listing(path, limit)[0]

    def _remove(self, path: str) -> None:
        self._word("remove", path)

    def _exists(self, path: str) -> bool:
        return bool(self._word("exists", path))


def _what(operation: str, path: str) -> str:
    return f"the listing of {path!r}" if operation == "listing" else f"the file {path!r}"


def _out_of_turn(operation: str, path: str) -> FilesError:
    return FilesError(
        f"the sandbox answered out of turn to ex.files' {operation} of {path!r} (the code may have replaced "
        "codeward's side of it); its answer was refused",
        error_type="OutOfTurn",
    )


def _too_many(path: str) -> FilesError:
    return FilesError(
        f"the listing of {path!r} holds more than {MAX_LISTING_NAMES:,} names, the most ex.files lists at once; "
        "list a folder with fewer",
        error_type="TooManyNames",
    )
