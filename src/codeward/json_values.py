"""Top-level because the command and the batch, siblings above the platform, both write these records.

Live values in JSON records (run results, batch results, audit lines).

Two forms. `carry` sends a value through the value codec, so
``codec.loads(json.dumps(record["output"]))`` gives it back typed (DataFrames,
arrays, sets, dates...); a value the codec cannot carry is described instead, and
the record says so rather than failing. `plain` writes a value as the JSON any
script reads without codeward (lists, maps, strings, numbers), giving up the types.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import enum
import json
import math
import re
import sys
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from codeward.executors.codec import CodecError, dumps

__all__ = ["carry", "plain", "preview", "read_json"]

_PREVIEW_CHARS = 500


def read_json(text: str | bytes) -> Any:
    """`json.loads` for text from elsewhere (a file a user was handed, a model's answer): a number
    too long for Python's int fails as the JSON error it is. ``json.loads`` raises a plain
    `ValueError` for it, which a reader that catches `json.JSONDecodeError` lets through."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise
    except ValueError:  # what is left: Python's limit on the digits it reads as an int
        document = text if isinstance(text, str) else text.decode("utf-8", "replace")
        limit = sys.get_int_max_str_digits()
        found = re.search(f"[0-9]{{{limit + 1},}}", document)
        message = f"a number of more than {limit:,} digits"
        raise json.JSONDecodeError(message, document, found.start() if found else 0) from None


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


def plain(value: Any) -> Any:
    """`value` as plain JSON, for scripts that read it without codeward.

    Arrays become nested lists; a DataFrame a list of row records (a named or non-default
    index becomes columns); a Series a list, or an index-to-value map when its index says
    something; tuples, sets and deques lists; dataclasses and namedtuples maps; dates ISO
    text; timedeltas seconds; bytes base64 text; nan, inf and missing values null; map keys
    text, as JSON writes them; anything else (Decimal, Fraction, UUID, paths...) its text.
    """
    if value is None or (isinstance(value, (bool, int, str)) and not isinstance(value, enum.Enum)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    library = type(value).__module__.partition(".")[0]
    if library == "numpy":
        return plain(value.tolist())
    if library == "pandas":
        return _plain_pandas(value)
    return _plain_python(value)


def _plain_python(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return plain(value.value)
    if isinstance(value, Mapping):
        return {_plain_key(key): plain(item) for key, item in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple: its fields name its items
        return {name: plain(item) for name, item in zip(value._fields, value, strict=True)}
    if isinstance(value, (list, tuple, range, deque)):
        return [plain(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return [plain(item) for item in _in_order(value)]
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    return str(value)


def _plain_pandas(value: Any) -> Any:
    import pandas as pd

    if value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, pd.DataFrame):
        frame = value if _says_nothing(value.index) else value.reset_index()
        return plain(frame.to_dict(orient="records"))
    if isinstance(value, pd.Series):
        return plain(value.tolist() if _says_nothing(value.index) else value.to_dict())
    if isinstance(value, (pd.Index, pd.api.extensions.ExtensionArray)):
        return plain(value.tolist())
    return _plain_python(value)  # Timestamp, Timedelta, Period...: the Python types they derive from


def _says_nothing(index: Any) -> bool:
    """A pandas index that only counts rows from 0, unnamed: dropping it loses nothing."""
    import pandas as pd

    return index.name is None and index.equals(pd.RangeIndex(len(index)))


def _plain_key(key: Any) -> str:
    """A map key as JSON writes one: text as is, other keys as their JSON (1 -> "1", True -> "true")."""
    if isinstance(key, str):
        return key
    written = plain(key)
    return written if isinstance(written, str) else json.dumps(written)


def _in_order(items: Iterable[Any]) -> list[Any]:
    """A set's items sorted where they can be, so that the same set is written the same way."""
    try:
        return sorted(items)
    except TypeError:
        return list(items)
