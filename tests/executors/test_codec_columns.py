"""The codec's columnar forms: string columns as codes or as a UTF-8 buffer, narrowed integers,
and large base64 strings cut out before JSON parsing; round trips, old payloads, and hostile ones."""

from __future__ import annotations

import base64
import json
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codeward.executors.codec import CodecError, decode_variables, dumps, encode_variables, loads, wire
from tests.executors.test_codec import RELAXED, assert_round_trip, round_trip, same

pa = pytest.importorskip("pyarrow")

N = 5000  # over the size where columns go columnar


def forms(value: Any) -> list[str]:
    """Every ``form`` field in the payload of `value`, outermost first."""
    found: list[str] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            if "form" in x:
                found.append(x["form"])
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(json.loads(dumps(pd.Series(value) if isinstance(value, pd.api.extensions.ExtensionArray) else value)))
    return found


def repeating(n: int = N) -> list[Any]:
    """Strings that repeat, with empty strings, non-ASCII text, lone surrogates and missing items."""
    pool = ["", "a", "ünï", "\ud800", "x\udfffy", "$", '"b64":"', "\x00", "T0001"]
    return [None if i % 7 == 3 else pool[i % len(pool)] for i in range(n)]


def distinct(n: int = N) -> list[Any]:
    return [None if i % 11 == 5 else f"item-{i}-é" if i % 2 else f"{i}" for i in range(n)]


def without_surrogates(items: list[Any]) -> list[Any]:
    return [x.encode("utf-8", "replace").decode() if isinstance(x, str) else x for x in items]


# ------------------------------------------------------------------ string columns

STRING_DTYPES = {
    "str (arrow, nan)": pd.StringDtype("pyarrow", na_value=np.nan),
    "string (arrow, NA)": pd.StringDtype("pyarrow"),
    "str (python, nan)": pd.StringDtype("python", na_value=np.nan),
    "string (python, NA)": pd.StringDtype("python"),
}


@pytest.mark.parametrize("dtype", STRING_DTYPES.values(), ids=STRING_DTYPES.keys())
@pytest.mark.parametrize(("make", "form"), [(repeating, "codes"), (distinct, "utf8")], ids=["repeating", "distinct"])
def test_large_string_columns_round_trip_in_a_columnar_form(dtype: Any, make: Any, form: str) -> None:
    items = make()
    if dtype.storage == "pyarrow":  # arrow holds UTF-8 only
        items = without_surrogates(items)
    column = pd.array(items, dtype=dtype)
    frame = pd.DataFrame({"s": column, "n": np.arange(len(items))})
    assert_round_trip(frame)
    assert_round_trip(pd.Series(column, name="s"))
    assert_round_trip(pd.Index(column, name="i"))
    expected = form if dtype.storage == "pyarrow" else ("codes" if form == "codes" else None)
    assert forms(column) == ([expected] if expected else [])


@settings(RELAXED, max_examples=40)
@given(
    st.lists(st.text() | st.none(), min_size=1, max_size=6),
    st.sampled_from(sorted(STRING_DTYPES)),
    st.booleans(),
)
def test_any_text_round_trips_in_either_columnar_form(pool: list[Any], dtype_name: str, repeat: bool) -> None:
    dtype = STRING_DTYPES[dtype_name]
    items = [
        pool[i % len(pool)] if repeat or pool[i % len(pool)] is None else pool[i % len(pool)] + str(i)
        for i in range(1500)
    ]
    if dtype.storage == "pyarrow":
        items = without_surrogates(items)
    assert_round_trip(pd.Series(pd.array(items, dtype=dtype)))
    assert_same_objects(object_array(items), round_trip(object_array(items)))


def test_the_benchmark_frame_sends_its_strings_as_codes_and_its_ids_narrowed() -> None:
    n = 200_000
    frame = pd.DataFrame(
        {
            "id": np.arange(n, dtype=np.int64),
            "price": np.random.default_rng(0).random(n),
            "ticker": pd.array([f"T{i % 5000:04d}" for i in range(n)], dtype="str"),
        }
    )
    text = encode_variables({"df": frame})
    assert len(text) < 1.4 * (n * 4 + n * 8 + n * 2) + 100_000  # int32 ids, float64 prices, int16 codes
    assert same(decode_variables(text), {"df": frame})
    assert '"wire":"<i4"' in text and '"form":"codes"' in text


def test_small_string_columns_stay_plain_lists() -> None:
    column = pd.array(["a", None, "\ud800"], dtype=pd.StringDtype("python"))
    assert forms(column) == []
    assert_round_trip(pd.Series(column))
    assert json.loads(dumps(pd.Series(["a", "a"], dtype="str")))["data"]["v"] == ["a", "a"]


def test_a_column_of_one_string_over_and_over_stays_small() -> None:
    column = pd.array(["same text"] * 100_000, dtype="str")
    assert len(dumps(pd.Series(column))) < 100_000 * 1.4 + 1000  # one byte a code
    assert_round_trip(pd.Series(column))


def test_strings_that_would_outgrow_their_codes_go_as_a_buffer() -> None:
    """Codes decoding to far more text than they hold are refused, so the encoder does not send them."""
    column = pd.array(["x" * 1000, "y" * 1000] * 5000, dtype="str")
    assert forms(column) == ["utf8"]
    assert_round_trip(pd.Series(column))


def test_sliced_and_chunked_arrow_columns_round_trip() -> None:
    column = pd.array(distinct(3 * N), dtype="str")
    assert_round_trip(pd.Series(column[N + 3 : 2 * N]))
    tail = pa.array(without_surrogates(repeating(N)[:2000]), type=pa.string())
    chunked = pa.chunked_array([pa.array(distinct(N)), tail])
    assert_round_trip(pd.Series(pd.array(chunked.cast(pa.large_string()), dtype="str")))


def test_empty_strings_only_and_missing_only_columns_round_trip() -> None:
    for dtype in STRING_DTYPES.values():
        assert_round_trip(pd.Series(pd.array([""] * N, dtype=dtype)))
        assert_round_trip(pd.Series(pd.array([None] * N, dtype=dtype)))


# ------------------------------------------------------------------ object columns


def object_array(items: list[Any]) -> np.ndarray:
    array = np.empty(len(items), dtype=object)
    array[:] = [None] * len(items)
    for i, item in enumerate(items):
        array[i] = item
    return array


def assert_same_objects(a: np.ndarray, b: np.ndarray) -> None:
    assert b.dtype == object and a.shape == b.shape
    assert all(same(x, y) for x, y in zip(a.ravel().tolist(), b.ravel().tolist(), strict=True))


def test_object_arrays_of_repeating_strings_and_none_go_as_codes() -> None:
    array = object_array(repeating())
    assert forms(array) == ["codes"]
    assert_same_objects(array, round_trip(array))
    grid = array.reshape(50, -1)
    assert_same_objects(grid, round_trip(grid))
    frame = pd.DataFrame({"o": pd.Series(array, dtype=object)})
    back = round_trip(frame)
    assert back["o"].dtype == object
    assert_same_objects(array, back["o"].to_numpy())


@pytest.mark.parametrize(
    "intruder",
    [float("nan"), pd.NA, pd.NaT, np.str_("x"), 1, 2.5, True, (1, "a"), b"x"],
    ids=lambda v: type(v).__name__,
)
def test_objects_that_are_not_exact_str_take_the_element_by_element_path(intruder: Any) -> None:
    items = repeating()
    items[17] = intruder
    array = object_array(items)
    assert forms(array) == []
    back = round_trip(array)
    assert_same_objects(array, back)
    assert type(back[17]) is type(intruder)
    frame_back = round_trip(pd.DataFrame({"o": pd.Series(array, dtype=object)}))["o"].to_numpy()
    assert_same_objects(array, frame_back)


def test_distinct_strings_in_object_arrays_stay_a_plain_list() -> None:
    array = object_array(distinct())
    assert forms(array) == []
    assert_same_objects(array, round_trip(array))


# ---------------------------------------------------------------- other columns


@pytest.mark.parametrize("ordered", [False, True])
def test_large_categoricals_round_trip(ordered: bool) -> None:
    categories = [f"c{i}" for i in range(300)]
    values = [None if i % 13 == 0 else categories[i % 300] for i in range(N)]
    column = pd.Categorical(values, categories=categories[::-1], ordered=ordered)
    assert_round_trip(pd.DataFrame({"c": column}))
    assert_round_trip(pd.CategoricalIndex(column, name="c"))


INT_ARRAYS = {
    "arange int64": np.arange(N, dtype=np.int64),
    "negative int64": -np.arange(N, dtype=np.int64) * 1000,
    "int64 extremes": np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max] * N),
    "uint64 over int64": np.full(N, 2**63 + 5, dtype=np.uint64),
    "big-endian int32": np.arange(N, dtype=">i4"),
    "uint16 small": np.arange(N, dtype=np.uint16) % 200,
    "int8": np.ones(N, dtype=np.int8),
    "fortran 2-D": np.asfortranarray(np.arange(2 * N, dtype=np.int64).reshape(2, N)),
    "strided": np.arange(3 * N, dtype=np.int64)[::3],
    "datetime64": np.arange(N).astype("datetime64[s]"),
}


@pytest.mark.parametrize("array", INT_ARRAYS.values(), ids=INT_ARRAYS.keys())
def test_integer_arrays_round_trip_exactly_narrowed_or_not(array: np.ndarray) -> None:
    assert_round_trip(array)
    back = round_trip(array)
    assert back.flags.writeable and back.dtype == array.dtype


def test_integers_travel_in_the_narrowest_type_that_holds_them() -> None:
    assert json.loads(dumps(np.arange(N, dtype=np.int64)))["wire"] == "<i2"
    assert json.loads(dumps(np.arange(N, dtype=np.uint64) + 60_000))["wire"] == "<u2"
    assert "wire" not in json.loads(dumps(INT_ARRAYS["int64 extremes"]))
    assert "wire" not in json.loads(dumps(np.arange(100, dtype=np.int64)))  # small arrays stay as they are


# ---------------------------------------------------------------- old payloads


def test_payloads_of_the_element_by_element_forms_still_decode() -> None:
    old_string = {"$": "pdstr", "storage": "pyarrow", "na": "nan", "v": ["a", None, "b"]}
    back = loads(
        json.dumps(
            {"$": "series", "index": {"$": "pdrange", "v": [0, 3, 1], "name": None}, "name": None, "data": old_string}
        )
    )
    assert same(back, pd.Series(["a", None, "b"], dtype="str"))
    old_object = {"$": "nd", "dtype": "|O", "shape": [3], "items": ["a", None, {"$": "tuple", "v": [1]}]}
    assert_same_objects(object_array(["a", None, (1,)]), loads(json.dumps(old_object)))
    old_ints = {"$": "nd", "dtype": "<i8", "shape": [2], "order": "C", "b64": base64.b64encode(b"\1" * 16).decode()}
    assert loads(json.dumps(old_ints)).tolist() == [0x0101010101010101] * 2


@pytest.fixture
def no_pyarrow(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Decode as a sandbox without pyarrow would: string columns get pandas' python storage."""
    importable = wire.importable
    monkeypatch.setattr(wire, "importable", lambda name: name != "pyarrow" and importable(name))
    yield


@pytest.mark.parametrize("make", [repeating, distinct])
def test_columnar_strings_decode_where_pyarrow_is_missing(make: Any, no_pyarrow: None) -> None:
    items = without_surrogates(make())
    back = loads(dumps(pd.Series(items, dtype="str"))).array
    assert back.dtype == pd.StringDtype("python", na_value=np.nan)
    assert back.to_numpy(dtype=object, na_value=None).tolist() == items


# ---------------------------------------------------------------- base64 cut out


@pytest.fixture
def cuts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many strings each decoding pass cut out of its text."""
    counts: list[int] = []
    cut_blobs = wire.Decoder.cut_blobs

    def spy(self: Any, text: str) -> str:
        out = cut_blobs(self, text)
        counts.append(len(self.blobs))
        return out

    monkeypatch.setattr(wire.Decoder, "cut_blobs", spy)
    return counts


def test_long_base64_strings_outside_arrays_round_trip(cuts: list[int]) -> None:
    blob = base64.b64encode(bytes(range(256)) * 1000).decode()
    value = {
        "b64": blob,  # a plain dict with the key the decoder looks for
        "raw": bytes(range(256)) * 1000,
        "text": 'a "b64":"' + blob + '" b',
        "list": ["b64", blob],
        "short": {"b64": "\x00" + "0" * 16 + ":0"},
        "df": pd.DataFrame({"x": np.random.default_rng(1).random(20_000)}),
    }
    assert_round_trip(value)
    assert cuts == [3]  # the plain dict's, the bytes' and the column's


def test_a_cut_string_is_the_one_json_would_read(cuts: list[int]) -> None:
    """A long base64 string with an escape in it is left to the JSON parser."""
    data = bytes(range(256)) * 4000
    plain = json.dumps({"$": "bytes", "b64": base64.b64encode(data).decode()}, separators=(",", ":"))
    escaped = plain.replace('"b64":"A', '"b64":"\\u0041', 1)
    assert escaped != plain
    assert loads(plain) == data and loads(escaped) == data
    assert cuts == [1, 0]


# ---------------------------------------------------------------- hostile payloads


def nd(array: np.ndarray) -> dict[str, Any]:
    return json.loads(dumps(array))


def pdstr(**fields: Any) -> dict[str, Any]:
    return {"$": "pdstr", "storage": "pyarrow", "na": "nan", **fields}


def coded(codes: Any, uniques: Any, **fields: Any) -> dict[str, Any]:
    return pdstr(form="codes", codes=nd(np.asarray(codes)) if not isinstance(codes, dict) else codes, uniques=uniques)


def utf8(lengths: Any, data: bytes, missing: Any = None) -> dict[str, Any]:
    return pdstr(
        form="utf8",
        lengths=nd(np.asarray(lengths)),
        b64=base64.b64encode(data).decode(),
        missing=None if missing is None else nd(np.asarray(missing)),
    )


def huge_codes(count: int) -> dict[str, Any]:
    return {"$": "nd", "dtype": "<i1", "shape": [count], "order": "C", "b64": "AAAA"}


HOSTILE = {
    "code past the uniques": coded([0, 2], ["a", "b"]),
    "code below -1": coded([0, -2], ["a", "b"]),
    "float codes": coded([0.0, 1.0], ["a", "b"]),
    "unsigned codes": coded(np.array([0, 1], dtype=np.uint8), ["a", "b"]),
    "2-D codes": coded([[0, 1]], ["a", "b"]),
    "codes not an array": pdstr(form="codes", codes=[0, 1], uniques=["a", "b"]),
    "uniques not strings": coded([0, 1], ["a", 2]),
    "uniques with None": coded([0, 1], ["a", None]),
    "uniques not a list": coded([0], "ab"),
    "codes claiming a huge length": coded(huge_codes(10**12), ["a"]),
    "array codes of another length": {
        "$": "nd",
        "dtype": "|O",
        "shape": [10**12],
        "form": "codes",
        "codes": nd(np.zeros(4, dtype=np.int8)),
        "uniques": ["a"],
    },
    "array codes for a string dtype": {
        "$": "nd",
        "dtype": "T",
        "shape": [1],
        "form": "codes",
        "codes": nd(np.zeros(1, dtype=np.int8)),
        "uniques": ["a"],
    },
    "lengths past the buffer": utf8([1, 5], b"abc"),
    "lengths short of the buffer": utf8([1, 1], b"abc"),
    "negative length": utf8(np.array([4, -1], dtype=np.int64), b"abc"),
    "lengths that overflow": utf8(np.array([2**63, 2**63, 3], dtype=np.uint64), b"abc"),
    "float lengths": utf8(np.array([1.0, 2.0]), b"abc"),
    "lengths claiming a huge count": pdstr(form="utf8", lengths=huge_codes(10**12), b64="", missing=None),
    "mask of another length": utf8([1, 2], b"abc", missing=[True]),
    "mask not bools": utf8([1, 2], b"abc", missing=[1, 0]),
    "invalid utf-8": utf8([1, 2], b"a\xff\xfe"),
    "cut inside a character": utf8([2, 1], "aé".encode()),
    "encoded surrogate": utf8([3], b"\xed\xa0\x80"),
    "utf8 not base64": pdstr(form="utf8", lengths=nd(np.array([1], dtype=np.uint8)), b64="!!", missing=None),
    "unknown string form": pdstr(form="zip", v=["a"]),
    "unknown array form": {**nd(np.zeros(2)), "form": "zip"},
    "ints that cannot widen": {**nd(np.arange(2, dtype=np.int16)), "dtype": "<i2", "wire": "<i8"},
    "unsigned into signed of the same size": {**nd(np.arange(2, dtype=np.int32)), "dtype": "<i4", "wire": "<u4"},
    "floats as the wire": {**nd(np.arange(2, dtype=np.float32)), "dtype": "<i8", "wire": "<f4"},
    "objects as the wire": {"$": "nd", "dtype": "<i8", "shape": [1], "order": "C", "wire": "|O", "b64": "AAAAAAAAAAA="},
    "wire buffer of another size": {
        "$": "nd",
        "dtype": "<i8",
        "shape": [10**9],
        "order": "C",
        "wire": "<i1",
        "b64": "AA==",
    },
}


@pytest.mark.parametrize("payload", HOSTILE.values(), ids=HOSTILE.keys())
@pytest.mark.parametrize("pyarrow", [True, False], ids=["pyarrow", "no pyarrow"])
def test_hostile_columnar_payloads_fail_fast_as_codec_errors_without_allocating(
    payload: Any, pyarrow: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not pyarrow:
        importable = wire.importable
        monkeypatch.setattr(wire, "importable", lambda name: name != "pyarrow" and importable(name))
    text = json.dumps(payload)
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(CodecError):
            loads(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 5
    assert peak < 20 * len(text) + 2_000_000, f"decoding a {len(text)}-character payload took {peak} bytes"


def test_codes_that_would_materialize_far_more_text_than_they_hold_are_refused(
    no_pyarrow_too: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Arrow storage would write the text out for every item; python storage shares one str per value."""
    bomb = json.dumps(coded(np.zeros(20_000, dtype=np.int8), ["x" * 50_000]))
    if no_pyarrow_too:
        importable = wire.importable
        monkeypatch.setattr(wire, "importable", lambda name: name != "pyarrow" and importable(name))
        values = loads(bomb).to_numpy()
        assert len({id(x) for x in values}) == 1
        return
    tracemalloc.start()
    try:
        with pytest.raises(CodecError, match="would expand"):
            loads(bomb)
        assert tracemalloc.get_traced_memory()[1] < 2_000_000
    finally:
        tracemalloc.stop()


@pytest.fixture(params=[False, True], ids=["pyarrow", "no pyarrow"])
def no_pyarrow_too(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)
