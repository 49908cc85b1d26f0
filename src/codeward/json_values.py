"""Live values in JSON records (run results, batch results, audit lines).

A value goes through the value codec, so ``codec.loads(json.dumps(record["output"]))``
gives it back typed (DataFrames, arrays, sets, dates...). A value the codec cannot
carry is described instead, and the record says so rather than failing.
"""

from __future__ import annotations

import json
from typing import Any

from codeward.executors.codec import CodecError, dumps

__all__ = ["carry", "preview"]

_PREVIEW_CHARS = 500


def carry(value: Any) -> tuple[Any, str | None]:
    """``(tree, None)``: the codec's JSON tree; or ``(None, description)`` when it cannot be carried."""
    try:
        return json.loads(dumps(value)), None
    except CodecError as error:
        return None, f"{type(value).__name__} not carried ({error}): {preview(value)}"


def preview(value: Any, limit: int = _PREVIEW_CHARS) -> str:
    """A short text form for logs and audit lines; never a large value whole."""
    try:
        text = repr(value)
    except Exception as error:  # a broken __repr__ must not break the record
        text = f"<{type(value).__name__}: repr failed: {error}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
