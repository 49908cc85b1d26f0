"""One execute request's outcome, as every kernel-backed sandbox reports it.

The jupyter and docker executors read it off a kernel's channels, the e2b
executor off E2B's stream; either way, `code_output` turns it into the
contract's `CodeOutput` or error, with values decoded by the codec and never
unpickled. Nothing here needs jupyter_client, so the e2b extra does not either.
"""

from __future__ import annotations

import base64
import io
import re
from dataclasses import dataclass, field
from typing import Any

from codeward.executors import codec
from codeward.executors.base import CodeOutput, ExecutionError, SandboxError
from codeward.executors.kernel.prelude import PAYLOAD_SOURCE

__all__ = [
    "BoundedText",
    "CellResult",
    "code_output",
    "decode_sandbox_value",
    "display_value",
    "require_setup_ok",
    "strip_ansi",
]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """Tracebacks without the terminal colours IPython adds."""
    return _ANSI.sub("", text)


@dataclass
class CellResult:
    """What the kernel sent back for one execute request."""

    status: str
    logs: str
    result: dict[str, Any] | None = None
    displays: list[dict[str, Any]] = field(default_factory=list)
    payload: list[dict[str, Any]] = field(default_factory=list)
    error_name: str = ""
    error_value: str = ""
    traceback: str = ""


class BoundedText:
    """Text that keeps its head and tail once it outgrows `limit`, so runaway output cannot fill memory."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._head: list[str] = []
        self._head_size = 0
        self._tail = ""
        self._dropped = 0

    def add(self, text: str) -> None:
        half = self._limit // 2
        if self._head_size < half:
            piece = text[: half - self._head_size]
            self._head.append(piece)
            self._head_size += len(piece)
            text = text[len(piece) :]
        if text:
            joined = self._tail + text
            self._dropped += max(len(joined) - half, 0)
            self._tail = joined[-half:] if half else ""

    def text(self) -> str:
        head = "".join(self._head)
        if not self._dropped:
            return head + self._tail
        return f"{head}\n[... {self._dropped} characters of output cut ...]\n{self._tail}"


def display_value(bundle: dict[str, Any]) -> Any:
    """The most useful Python value in a mime bundle: a PIL image, else HTML text, else plain text."""
    for mime in ("image/png", "image/jpeg"):
        if mime in bundle:
            data = base64.b64decode(bundle[mime])
            try:
                from PIL import Image
            except ImportError:  # without pillow, the encoded image is still worth returning
                return data
            image = Image.open(io.BytesIO(data))
            image.load()
            return image
    for mime in ("text/html", "text/markdown", "text/plain"):
        if mime in bundle:
            return bundle[mime]
    return None


def code_output(result: CellResult) -> CodeOutput:
    """Turn the kernel's reply into the contract's answer: a final answer, a value, or an error."""
    entries = {
        key: value for entry in result.payload if entry.get("source") == PAYLOAD_SOURCE for key, value in entry.items()
    }
    displays = [display_value(bundle) for bundle in result.displays]
    if "final" in entries:
        return CodeOutput(decode_sandbox_value(entries["final"], result.logs), result.logs, True, displays)
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
        output = decode_sandbox_value(entries["value"], result.logs)
    elif result.result is not None:  # a value the codec cannot carry: its richest display instead
        output = display_value(result.result)
    else:
        output = None
    return CodeOutput(output, result.logs, False, displays)


def decode_sandbox_value(text: str, logs: str) -> Any:
    """A value that came out of the sandbox: decoded without pickle, whatever the sandbox claims."""
    try:
        return codec.loads(text)
    except codec.CodecError as error:
        raise ExecutionError(
            f"the sandbox sent a value codeward refuses: {error}", logs=logs, error_type="CodecError"
        ) from error


def require_setup_ok(result: CellResult, sandbox: str) -> None:
    """codeward's own cells (setup, variables, tools) must succeed: a failure there is the sandbox's, not the code's."""
    if result.status != "ok":
        raise SandboxError(
            f"codeward could not set up {sandbox}: {result.error_name}: {result.error_value}\n{result.traceback}",
            logs=result.logs,
            state_lost=False,
        )
