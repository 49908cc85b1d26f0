"""Fields read from files a user was handed (saved runs, batch results), each checked for its type.

A run file or a results line may come from anyone, or be cut short by a crash: a field of the
wrong type reads as missing, so one odd value shows as a gap on the page instead of failing it.
And a text keeps at most `MOST_CHARACTERS` characters (an id or a state far fewer), with a note of
how many were left off: one huge output costs the page a bounded size, never a copy per wall.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["MOST_CHARACTERS", "MOST_NAME_CHARACTERS", "mapping", "number", "text", "whole"]

#: The most characters of one text a page shows; the file keeps the whole.
MOST_CHARACTERS = 100_000
#: The most characters of a name (a job's id, a state) a page shows.
MOST_NAME_CHARACTERS = 200


def text(value: Any, most: int | None = None) -> str:
    """A value as the page shows it: a string as is, anything else as JSON, nothing as empty; at most
    `most` characters of it (`MOST_CHARACTERS` unless said), then a note of how many more the file holds."""
    most = MOST_CHARACTERS if most is None else most
    if value is None:
        return ""
    if isinstance(value, str):
        shown = value
    else:
        try:
            shown = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError, RecursionError):
            shown = repr(value)
    if len(shown) <= most:
        return shown
    return f"{shown[:most]} [... {len(shown) - most:,} more characters are in the file, not on this page]"


def number(value: Any) -> float | None:
    """A finite number, or None for anything else (a bool, a string, NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def whole(value: Any) -> int | None:
    """A whole number, or None for anything else."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def mapping(value: Any) -> dict[str, Any]:
    """A JSON object, or an empty one for anything else."""
    return value if isinstance(value, dict) else {}
