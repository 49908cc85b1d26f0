"""Round trips of the value codec for standard-library values, and what stays plain JSON.

`same` is the exact comparison every codec test uses: types kept, float signs and
nan kept, Decimal representation kept, order of dicts kept.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import enum
import json
import math
import pathlib
import uuid
import zoneinfo
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codeward.executors.codec import CodecError, decode_variables, dumps, encode_variables, loads, register_class


@register_class
class Color(enum.Enum):
    RED = "red"
    PAIR = (1, 2)


@register_class
class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@register_class
class Perm(enum.Flag):
    R = 4
    W = 2
    X = 1


@register_class
@dataclasses.dataclass
class Point:
    x: Any
    y: Any = None


@register_class
@dataclasses.dataclass(frozen=True)
class Frozen:
    name: str
    tags: tuple = ()


@register_class
@dataclasses.dataclass(slots=True)
class Slotted:
    a: int
    b: Any = dataclasses.field(default=None, compare=True)


# The codec restores only classes registered with it; these are the tests' own.
Pair = register_class(collections.namedtuple("Pair", ["left", "right"]))


def _same_float(a: float, b: float) -> bool:
    if math.isnan(a):
        return math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def _same_tz(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    return (
        type(a) is type(b)
        and a == b
        and a.tzname(None) == b.tzname(None)
        and getattr(a, "key", 0) == getattr(b, "key", 0)
    )


def same(a: Any, b: Any) -> bool:
    """Exact equality: same types all the way down, nan equal to nan, -0.0 distinct from 0.0."""
    if type(a) is not type(b):
        return False
    t = type(a)
    if t is float:
        return _same_float(a, b)
    if t is complex:
        return _same_float(a.real, b.real) and _same_float(a.imag, b.imag)
    if t is Decimal:
        return a.compare_total(b) == 0
    if isinstance(a, tuple):  # tuples and namedtuples
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=False))
    if t is list:
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=False))
    if t is collections.deque:
        return a.maxlen == b.maxlen and same(list(a), list(b))
    if isinstance(a, dict):  # dict, OrderedDict, Counter: same items in the same order
        return len(a) == len(b) and all(
            same(ka, kb) and same(va, vb) for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=False)
        )
    if t in (set, frozenset):
        return len(a) == len(b) and all(any(same(x, y) for y in b) for x in a)
    if t in (dt.datetime, dt.time):
        return a.replace(tzinfo=None) == b.replace(tzinfo=None) and a.fold == b.fold and _same_tz(a.tzinfo, b.tzinfo)
    if isinstance(a, dt.tzinfo):
        return _same_tz(a, b)
    if dataclasses.is_dataclass(a):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, enum.Enum):
        return a is b
    extra = _SAME_BY_MODULE.get((t.__module__ or "").split(".")[0])
    if extra is not None:
        return extra(a, b)
    return bool(a == b)


def _same_numpy(a: Any, b: Any) -> bool:
    if isinstance(a, np.dtype):
        return a == b and a.descr == b.descr
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind in "OT":
        return all(same(x, y) for x, y in zip(a.ravel().tolist(), b.ravel().tolist(), strict=False))
    return a.tobytes() == b.tobytes()  # bit-exact, nan payloads and -0.0 included


def _same_pandas(a: Any, b: Any) -> bool:
    checks = {pd.DataFrame: pd.testing.assert_frame_equal, pd.Series: pd.testing.assert_series_equal}
    check = checks.get(type(a))
    if check is None:
        if isinstance(a, pd.Index):
            check = pd.testing.assert_index_equal
        else:  # Timestamp, Timedelta, NaT, NA
            return repr(a) == repr(b) and (a is b or bool(a == b))
    strict: dict[str, Any] = {"check_exact": True}
    if check is pd.testing.assert_index_equal:
        strict["exact"] = True
    else:
        strict.update(check_index_type=True, check_freq=True)
    if check is pd.testing.assert_frame_equal:
        strict["check_column_type"] = True
    try:
        check(a, b, **strict)
    except AssertionError:
        return False
    return getattr(a.index, "freq", None) == getattr(b.index, "freq", None) if hasattr(a, "index") else True


def _same_pil(a: Any, b: Any) -> bool:
    return (a.mode, a.size, a.tobytes(), a.getpalette(), a.info) == (
        b.mode,
        b.size,
        b.tobytes(),
        b.getpalette(),
        b.info,
    )


_SAME_BY_MODULE = {"numpy": _same_numpy, "pandas": _same_pandas, "PIL": _same_pil}


def round_trip(value: Any, **kw: Any) -> Any:
    text = dumps(value, **kw)
    assert text.isascii()
    json.loads(text)  # strict JSON: no NaN/Infinity literals
    return loads(text, **kw)


def assert_round_trip(value: Any) -> None:
    back = round_trip(value)
    assert same(value, back), f"{value!r} came back as {back!r}"


# ------------------------------------------------------------------ strategies

# Hypothesis warns when it prints these (large, nested) strategies; the warning says nothing about the codec.
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

fixed_offsets = st.builds(
    dt.timezone,
    st.timedeltas(min_value=dt.timedelta(hours=-23, minutes=-59), max_value=dt.timedelta(hours=23, minutes=59)),
) | st.builds(
    dt.timezone,
    st.timedeltas(min_value=dt.timedelta(hours=-3), max_value=dt.timedelta(hours=3)),
    st.text(st.characters(min_codepoint=65, max_codepoint=90), min_size=1, max_size=5),
)
time_zones = st.none() | st.just(dt.UTC) | fixed_offsets | st.timezones()
texts = st.text(st.characters(blacklist_categories=())) | st.just("$")  # lone surrogates included
# Around the size where ints switch to hex, and far beyond the int-to-str digit limit.
big_ints = st.builds(
    lambda n, bits: n * 2**bits, st.integers(-(2**64), 2**64), st.sampled_from([1936, 1990, 2000, 16000])
)
ints = st.integers() | big_ints
floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324]
)

hashable_scalars = (
    st.none()
    | st.booleans()
    | ints
    | floats
    | texts
    | st.binary(max_size=20)
    | st.complex_numbers(allow_nan=True, allow_infinity=True)
    | st.decimals(allow_nan=True, allow_infinity=True).filter(lambda d: not d.is_snan())
    | st.fractions()
    | st.uuids()
    | st.dates()
    | st.datetimes(timezones=time_zones, allow_imaginary=False)
    | st.times(timezones=time_zones)
    | st.timedeltas()
    | st.sampled_from(list(Color) + list(Level) + [Perm.R | Perm.W, Perm(0)])
    | st.builds(pathlib.PurePosixPath, st.text(max_size=10))
    | st.builds(pathlib.PosixPath, st.text(max_size=10))
    | st.builds(pathlib.PureWindowsPath, st.text(max_size=10))
    | st.builds(range, st.integers(-5, 5), st.integers(-5, 50), st.integers(1, 3))
    | time_zones.filter(lambda tz: tz is not None)
)
hashables = st.recursive(
    hashable_scalars,
    lambda inner: (
        st.lists(inner, max_size=3).map(tuple)
        | st.frozensets(inner, max_size=3)
        | st.builds(Frozen, texts, st.lists(inner, max_size=2).map(tuple))
    ),
    max_leaves=8,
)
values = st.recursive(
    hashables | st.binary(max_size=20).map(bytearray) | st.decimals(allow_nan=True, allow_infinity=True),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(hashables | texts, inner, max_size=4)
        | st.sets(hashables, max_size=4)
        | st.frozensets(hashables, max_size=4)
        | st.builds(Point, inner, inner)
        | st.builds(Slotted, st.integers(), inner)
        | st.builds(Pair, inner, inner)
        | st.dictionaries(hashables, inner, max_size=4).map(collections.OrderedDict)
        | st.dictionaries(hashables, st.integers(), max_size=4).map(collections.Counter)
        | st.builds(collections.deque, st.lists(inner, max_size=4), st.none() | st.integers(4, 6))
    ),
    max_leaves=20,
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**200), 2**200)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text().filter(lambda k: k != "$"), inner, max_size=4)
    ),
    max_leaves=20,
)


# ----------------------------------------------------------------- properties

# No per-example deadline: the machines that run these are shared, and speed is measured in bench/, not here.
RELAXED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@settings(RELAXED, max_examples=300)
@given(values)
def test_every_carried_value_round_trips_exactly(value: Any) -> None:
    assert_round_trip(value)


@RELAXED
@given(json_values)
def test_json_values_stay_plain_json(value: Any) -> None:
    """Values JSON holds exactly are not tagged: the payload is their plain JSON text."""
    assert json.loads(dumps(value)) == value  # a tag would show as a {"$": ...} object here
    assert dumps(value) == json.dumps(value, separators=(",", ":"))


@RELAXED
@given(st.dictionaries(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True), values, max_size=5))
def test_variables_round_trip(variables: dict[str, Any]) -> None:
    back = decode_variables(encode_variables(variables))
    assert same(variables, back)


# --------------------------------------------------------------- edge values


@pytest.mark.parametrize(
    "value",
    [
        -0.0,
        math.nan,
        math.inf,
        -math.inf,
        5e-324,
        1.7976931348623157e308,
        2**2000,
        2**2000 + 1,
        -(2**2001),
        10**5000,
        -(10**5000),
        "\ud800",
        "a\udfffb",
        "",
        "$",
        "\x00",
        "ünï😀",
        b"",
        b"\x00\xff",
        bytearray(b"\x01"),
        (),
        [],
        {},
        set(),
        frozenset(),
        ((),),
        [[]],
        {"$": 1},
        {"$": {"$": "tuple"}},
        {"a": 1, "$": 2},
        {(1, "a"): 1, frozenset({1, 2}): 2, 3: 3, None: 4, 1.5: 5, "s": 6},
        {True: "t", 2: "two"},
        complex(-0.0, math.nan),
        complex(math.inf, -math.inf),
        Decimal("NaN"),
        Decimal("-sNaN"),
        Decimal("-0E+3"),
        Decimal("1.2300"),
        Decimal("-Infinity"),
        Fraction(-(10**50), 3),
        dt.datetime(2021, 11, 7, 1, 30, fold=1, tzinfo=zoneinfo.ZoneInfo("America/New_York")),
        dt.datetime(2000, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30, microseconds=7), "IST?")),
        dt.datetime.min,
        dt.datetime.max,
        dt.date.min,
        dt.time(23, 59, 59, 999999, tzinfo=dt.UTC),
        dt.timedelta.min,
        dt.timedelta.max,
        dt.UTC,
        zoneinfo.ZoneInfo("Asia/Kathmandu"),
        uuid.UUID(int=0),
        pathlib.PurePosixPath("/a/b"),
        pathlib.Path("rel/x"),
        pathlib.PureWindowsPath(r"C:\x\y"),
        range(0),
        range(-3, 10**30, 7),
        Color.PAIR,
        Level.HIGH,
        Perm.R | Perm.X,
        Point(Color.RED, {"k": (1, 2)}),
        Frozen("n", (Level.LOW,)),
        Slotted(1, [Point(1)]),
        Pair(1, Pair((), None)),
        collections.OrderedDict([(2, "b"), ("$", "a")]),
        collections.Counter("abracadabra"),
        collections.deque([1, (2,)], maxlen=5),
    ],
    ids=lambda v: type(v).__name__,
)
def test_edge_values_round_trip(value: Any) -> None:
    assert_round_trip(value)


def test_large_binary_payloads_are_spliced_in_exactly() -> None:
    """Large base64 texts bypass the JSON encoder; several in one value must land in their own places."""
    value = [b"\x00" * 100_000, "\x00:0", bytearray(range(256)) * 300, {"k": (b"ab" * 40_000,)}, b"small"]
    text = dumps(value)
    assert "\\u0000" in text and text.count("\\u0000") == 1  # only the string that holds one
    assert_round_trip(value)


def test_dict_order_is_kept_whatever_the_keys() -> None:
    value = {3: "c", 1: "a", (2,): "b"}
    assert list(round_trip(value)) == [3, 1, (2,)]


def test_shared_references_become_copies() -> None:
    """The codec carries values, not object identity: documented, and checked here."""
    inner = [1]
    back = round_trip([inner, inner])
    assert back == [[1], [1]] and back[0] is not back[1]


def test_variables_may_be_named_like_the_tag_key() -> None:
    assert decode_variables(encode_variables({"$": 1, "x": (2,)})) == {"$": 1, "x": (2,)}


def test_variables_must_be_a_dict_of_str_names() -> None:
    with pytest.raises(CodecError, match="variable names must be str"):
        encode_variables({1: "x"})  # type: ignore[dict-item]
    with pytest.raises(CodecError, match="must be a dict"):
        encode_variables([("x", 1)])  # type: ignore[arg-type]
    with pytest.raises(CodecError, match="mapping of variable names"):
        decode_variables(dumps([1, 2]))
