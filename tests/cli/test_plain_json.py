"""`codeward run --json` writes its output as plain JSON: what each kind of value becomes."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import fractions
import json
import uuid

import numpy as np
import pandas as pd
import pytest

from codeward.json_values import plain


class Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int
    y: float


Pair = collections.namedtuple("Pair", "left right")


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (np.arange(4, dtype=np.int8).reshape(2, 2), [[0, 1], [2, 3]]),
        (np.array([1.5, np.nan, np.inf]), [1.5, None, None]),
        (np.int64(7), 7),
        (pd.DataFrame({"a": [1, 2], "b": ["x", None]}), [{"a": 1, "b": "x"}, {"a": 2, "b": None}]),
        (pd.DataFrame({"a": [1]}, index=pd.Index(["r"], name="row")), [{"row": "r", "a": 1}]),
        (pd.Series([1, 2]), [1, 2]),
        (pd.Series([1, 2], index=["p", "q"]), {"p": 1, "q": 2}),
        (pd.array([1, None], dtype="Int64"), [1, None]),
        (pd.Timestamp("2024-05-01", tz="UTC"), "2024-05-01T00:00:00+00:00"),
        ((1, frozenset({3, 2}), collections.deque([4])), [1, [2, 3], [4]]),
        ({1: "one", (2, 3): "pair", None: "none"}, {"1": "one", "[2, 3]": "pair", "null": "none"}),
        (datetime.date(2024, 5, 1), "2024-05-01"),
        (datetime.timedelta(minutes=2), 120.0),
        (b"\x00\xff", "AP8="),
        (decimal.Decimal("1.10"), "1.10"),
        (fractions.Fraction(1, 3), "1/3"),
        (uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
        (Colour.RED, "red"),
        (Point(1, float("nan")), {"x": 1, "y": None}),
        (Pair(1, "b"), {"left": 1, "right": "b"}),
    ],
    ids=repr,
)
def test_each_kind_of_value_is_written_as_plain_json(value, written):
    assert plain(value) == written
    assert json.loads(json.dumps(plain(value), allow_nan=False)) == written
