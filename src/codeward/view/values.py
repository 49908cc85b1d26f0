"""Fields read from files a user was handed (saved runs, batch results), each checked for its type.

A run file or a results line may come from anyone, or be cut short by a crash: a field of the
wrong type reads as missing, so one odd value shows as a gap on the page instead of failing it.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["mapping", "number", "text", "whole"]


def text(value: Any) -> str:
    """A value as the page shows it: a string as is, anything else as JSON, nothing as empty."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


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
