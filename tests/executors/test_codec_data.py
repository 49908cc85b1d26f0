"""Round trips of numpy, pandas and PIL values through the codec, without pickle."""

from __future__ import annotations

import datetime as dt
import json
import warnings
import zoneinfo
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as nps
from PIL import Image

from codeward.executors.codec import CodecError, CodecWarning, dumps, encode_variables, loads
from tests.executors.test_codec import RELAXED, Color, Point, assert_round_trip, round_trip, same

pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

# ---------------------------------------------------------------------- numpy

shapes = nps.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4)
plain_dtypes = (
    nps.boolean_dtypes()
    | nps.integer_dtypes(endianness="?")
    | nps.unsigned_integer_dtypes(endianness="?")
    | nps.floating_dtypes(endianness="?", sizes=(16, 32, 64, 128))
    | nps.complex_number_dtypes(endianness="?")
    | nps.datetime64_dtypes(endianness="?")
    | nps.timedelta64_dtypes(endianness="?")
    | nps.byte_string_dtypes(min_len=1, max_len=4)
    | nps.unicode_string_dtypes(min_len=1, max_len=4)
)
dtypes = plain_dtypes | nps.array_dtypes(plain_dtypes, min_size=1, max_size=3, allow_subarrays=True)


@settings(RELAXED, max_examples=150)
@given(nps.arrays(dtypes, shapes))
def test_arrays_of_every_fixed_size_dtype_round_trip_bit_exactly(array: np.ndarray) -> None:
    assert_round_trip(array)


@RELAXED
@given(nps.arrays(dtypes, nps.array_shapes(min_dims=2, max_dims=3, max_side=3)))
def test_fortran_ordered_and_non_contiguous_arrays_round_trip(array: np.ndarray) -> None:
    assert_round_trip(np.asfortranarray(array))
    assert_round_trip(array[::2])
    assert_round_trip(array.T)


@RELAXED
@given(nps.arrays(plain_dtypes, ()))
def test_numpy_scalars_keep_their_type(scalar_array: np.ndarray) -> None:
    scalar = scalar_array[()]
    back = round_trip(scalar)
    assert type(back) is type(scalar) and same(scalar, back)


@RELAXED
@given(
    st.lists(
        st.none() | st.integers() | st.text() | st.tuples(st.floats()) | st.builds(Point, st.integers()), max_size=6
    ),
    shapes,
)
def test_object_arrays_are_carried_elementwise(items: list[Any], shape: tuple[int, ...]) -> None:
    array = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        array[i] = item
    assert_round_trip(array)
    assert_round_trip(np.full(shape, Color.RED, dtype=object))


@pytest.mark.parametrize(
    "value",
    [
        *([np.array(["a", "", "ünï"], dtype=np.dtypes.StringDType())] if hasattr(np.dtypes, "StringDType") else []),
        np.array([np.nan, -0.0, np.inf], dtype=">f8"),
        np.array(["2020-01-01", "NaT"], dtype="datetime64[ms]"),
        np.zeros((0, 5, 0)),
        np.zeros((2, 0), dtype="U3"),
        np.array([(1, (2.0, 3.0))], dtype=np.dtype([("a", "u1"), ("b", "f4", (2,))], align=True)),
        np.array(
            [(1, 2)], dtype=np.dtype({"names": ["x", "y"], "formats": ["i2", "i2"], "offsets": [0, 4], "itemsize": 8})
        ),
        np.array([b"\x00\x01"], dtype="V2"),
        np.dtype([("a", "<i8"), ("b", ">U3", (2, 2))]),
        np.float16(-0.0),
        np.longdouble(1) / 3,
        np.datetime64("2020-01-01T00:00:00.123456789"),
        np.str_("x"),
        np.array([(1, "a")], dtype=[("n", "i4"), ("s", "U2")])[0],
    ],
    ids=lambda v: f"{type(v).__name__}-{getattr(v, 'dtype', v)}",
)
def test_numpy_edge_values_round_trip(value: Any) -> None:
    assert_round_trip(value)


def test_arrays_travel_as_base64_buffers_not_number_lists() -> None:
    array = np.arange(10_000, dtype=np.float64)
    text = dumps(array)
    assert len(text) < array.nbytes * 1.4  # base64 is 4/3 of the buffer
    assert loads(text).flags.writeable


def test_numpy_types_it_cannot_carry_are_refused_by_name() -> None:
    with pytest.raises(CodecError, match=r"variable 'r': cannot carry <class 'numpy\.(rec\.)?recarray'>.*np.asarray"):
        encode_variables({"r": np.rec.fromrecords([(1,)], names="a")})
    with pytest.raises(CodecError, match=r"\[0\].*MaskedArray"):
        dumps([np.ma.masked_array([1, 2], mask=[0, 1])])
    with pytest.raises(CodecError, match=r"\[flat index 1\]: cannot carry <class 'object'>"):
        dumps(np.array([1, object()], dtype=object))


# --------------------------------------------------------------------- pandas

OSLO = zoneinfo.ZoneInfo("Europe/Oslo")
# One strategy per column kind: builds a column of n values.
column_kinds = {
    "int64": lambda n: st.lists(st.integers(-(2**63), 2**63 - 1), min_size=n, max_size=n).map(
        lambda v: pd.array(np.array(v, dtype="int64"))
    ),
    "float": lambda n: st.lists(st.floats(), min_size=n, max_size=n).map(
        lambda v: pd.array(np.array(v, dtype="float64"))
    ),
    "bool": lambda n: st.lists(st.booleans(), min_size=n, max_size=n).map(lambda v: pd.array(np.array(v, dtype=bool))),
    "str": lambda n: st.lists(st.text() | st.none(), min_size=n, max_size=n).map(lambda v: pd.array(v, dtype="str")),
    "string": lambda n: st.lists(st.text() | st.none(), min_size=n, max_size=n).map(
        lambda v: pd.array(v, dtype="string")
    ),
    "object": lambda n: st.lists(
        st.none() | st.integers() | st.text() | st.tuples(st.integers()), min_size=n, max_size=n
    ).map(lambda v: _object_array(v)),
    "category": lambda n: st.lists(st.sampled_from(["a", "b", "c"]) | st.none(), min_size=n, max_size=n).flatmap(
        lambda v: st.booleans().map(lambda ordered: pd.Categorical(v, categories=["c", "a", "b"], ordered=ordered))
    ),
    "Int64": lambda n: st.lists(st.integers(-(2**63), 2**63 - 1) | st.none(), min_size=n, max_size=n).map(
        lambda v: pd.array(v, dtype="Int64")
    ),
    "UInt8": lambda n: st.lists(st.integers(0, 255) | st.none(), min_size=n, max_size=n).map(
        lambda v: pd.array(v, dtype="UInt8")
    ),
    "Float32": lambda n: st.lists(st.floats(width=32, allow_nan=False) | st.none(), min_size=n, max_size=n).map(
        lambda v: pd.array(v, dtype="Float32")
    ),
    "boolean": lambda n: st.lists(st.booleans() | st.none(), min_size=n, max_size=n).map(
        lambda v: pd.array(v, dtype="boolean")
    ),
    "datetime-tz": lambda n: st.lists(
        st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1)), min_size=n, max_size=n
    ).flatmap(
        lambda v: st.sampled_from([OSLO, dt.UTC, dt.timezone(dt.timedelta(hours=-5))]).map(
            lambda tz: pd.array(pd.DatetimeIndex(v).tz_localize("UTC").tz_convert(tz))
        )
    ),
    "datetime": lambda n: st.lists(st.datetimes(min_value=dt.datetime(1900, 1, 1)), min_size=n, max_size=n).map(
        lambda v: pd.array(np.array(v, dtype="datetime64[us]"))
    ),
    "timedelta": lambda n: st.lists(
        st.timedeltas(max_value=dt.timedelta(days=10**5), min_value=dt.timedelta(days=-(10**5))), min_size=n, max_size=n
    ).map(lambda v: pd.array(np.array(v, dtype="timedelta64[ns]"))),
}


def _object_array(items: list[Any]) -> np.ndarray:
    array = np.empty(len(items), dtype=object)
    array[:] = [None] * len(items)
    for i, item in enumerate(items):
        array[i] = item
    return array


def indexes(n: int) -> st.SearchStrategy[pd.Index]:
    names = st.none() | st.text(max_size=3) | st.tuples(st.integers(), st.text(max_size=2))
    return st.one_of(
        st.builds(
            lambda start, step, name: pd.RangeIndex(start, start + n * step, step, name=name),
            st.integers(-5, 5),
            st.integers(1, 3),
            names,
        ),
        st.sampled_from(sorted(column_kinds))
        .flatmap(lambda kind: column_kinds[kind](n))
        .flatmap(lambda values: names.map(lambda name: pd.Index(values, dtype=values.dtype, name=name))),
        st.lists(st.tuples(st.integers(0, 3), st.sampled_from("xyz")), min_size=n, max_size=n).flatmap(
            lambda tuples: (
                st.tuples(names, names).map(lambda ns: pd.MultiIndex.from_tuples(tuples, names=list(ns)))
                if n
                else st.just(pd.MultiIndex.from_arrays([[], []], names=["a", "b"]))
            )
        ),
        st.just(pd.date_range("2020-01-01", periods=n, freq="h", tz=OSLO, name="when")),
    )


@st.composite
def frames(draw: st.DrawFn) -> pd.DataFrame:
    n = draw(st.integers(0, 4))
    kinds = draw(st.lists(st.sampled_from(sorted(column_kinds)), max_size=5))
    columns = [draw(column_kinds[kind](n)) for kind in kinds]
    names = draw(
        st.one_of(
            st.lists(st.text(max_size=3), min_size=len(kinds), max_size=len(kinds)),  # duplicates allowed
            st.just(list(range(len(kinds)))),
            st.lists(
                st.tuples(st.text(max_size=2), st.integers()), min_size=len(kinds), max_size=len(kinds), unique=True
            ).map(lambda ts: pd.MultiIndex.from_tuples(ts) if ts else pd.Index([], dtype=object)),
        )
    )
    frame = pd.DataFrame({i: pd.Series(c, dtype=c.dtype) for i, c in enumerate(columns)}, index=pd.RangeIndex(n))
    frame.columns = (
        names
        if isinstance(names, pd.Index)
        else pd.Index(names, dtype=object if names and isinstance(names[0], str) else None)
    )
    frame.index = draw(indexes(n))
    return frame


@settings(RELAXED, max_examples=120)
@given(frames())
def test_dataframes_round_trip_with_dtypes_index_and_column_names(frame: pd.DataFrame) -> None:
    assert_round_trip(frame)


@settings(RELAXED, max_examples=80)
@given(
    st.integers(0, 4).flatmap(
        lambda n: st.tuples(
            st.sampled_from(sorted(column_kinds)).flatmap(lambda kind: column_kinds[kind](n)),
            indexes(n),
            st.none() | st.text(max_size=3) | st.tuples(st.integers()),
        )
    )
)
def test_series_round_trip_with_dtype_index_and_name(parts: tuple[Any, pd.Index, Any]) -> None:
    values, index, name = parts
    assert_round_trip(pd.Series(values, index=index, name=name, dtype=values.dtype))


@pytest.mark.parametrize(
    "value",
    [
        pd.Timestamp("2020-10-25 00:30", tz="UTC").as_unit("s").tz_convert(OSLO),
        pd.Timestamp("1677-09-22").as_unit("us"),
        pd.Timedelta(days=-3, microseconds=5),
        pd.NaT,
        pd.NA,
        pd.RangeIndex(3, 30, 4, name=("r", 1)),
        pd.Index([], dtype="int8"),
        pd.DatetimeIndex(["2020-01-01"], freq="D"),
        pd.CategoricalIndex(["a", "b"], categories=["b", "a"], ordered=True, name="c"),
        pd.Series([1, None], dtype="Int64", name=0),
        pd.DataFrame(),
        pd.DataFrame(index=[1, 2]),
        pd.DataFrame({"a": [pd.Timestamp("2020", tz="UTC"), pd.NaT, None]}, dtype=object),
        pd.DataFrame([[1, 2]], columns=pd.Index(["x", "x"], name="dup")),
        {"frame": pd.DataFrame({"x": [1.5]}), ("series",): pd.Series([True])},
    ],
    ids=lambda v: type(v).__name__,
)
def test_pandas_edge_values_round_trip(value: Any) -> None:
    assert_round_trip(value)


@pytest.mark.parametrize("spellings", [("H", "h"), ("2T", "2min"), ("M", "ME"), ("Q-DEC", "QE-DEC")])
def test_index_frequencies_survive_pandas_renaming_its_aliases(spellings: tuple[str, str]) -> None:
    """Pandas 2.2 renamed frequency aliases ("H" became "h"): a sandbox may spell them the other way."""
    for local, foreign in (spellings, spellings[::-1]):  # noqa: B007 (the pair that worked is used below)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # the spelling this pandas takes without a deprecation
                index = pd.date_range("2020-01-31", periods=3, freq=local)
            break
        except (ValueError, FutureWarning):
            continue
    payload = json.loads(dumps(index))
    payload["freq"] = foreign
    back = loads(json.dumps(payload))
    assert back.freqstr == index.freqstr and same(index, back)


def test_an_unknown_index_frequency_is_dropped_with_a_warning() -> None:
    payload = json.loads(dumps(pd.date_range("2020", periods=2, freq="D")))
    payload["freq"] = "fortnightly"
    with pytest.warns(CodecWarning, match="frequency 'fortnightly'"):
        back = loads(json.dumps(payload))
    assert back.freq is None and len(back) == 2


def test_pytz_zones_of_pandas_before_3_are_carried_by_key() -> None:
    pytz = pytest.importorskip("pytz")
    oslo = pytz.timezone("Europe/Oslo")
    frame = pd.DataFrame({"t": pd.date_range("2020-03-28", periods=3, freq="D", tz=oslo)})
    back = round_trip(frame)
    assert same(frame, back) and back["t"].dt.tz is oslo
    assert_round_trip(pd.Timestamp("2020-07-01 12:00", tz=oslo))
    with pytest.raises(CodecError, match=r"only datetime\.timezone offsets and zoneinfo"):
        dumps(oslo.localize(dt.datetime(2020, 1, 1)))  # its offset depends on how it was localized


def test_pandas_dtypes_it_cannot_carry_are_refused_naming_the_column() -> None:
    frame = pd.DataFrame({"ok": [1], "when": pd.period_range("2020", periods=1, freq="D")})
    with pytest.raises(CodecError, match=r"variable 'df'\[column 'when'\].*period\[D\]"):
        encode_variables({"df": frame})
    back = loads(dumps(frame, allow_pickle=True), allow_pickle=True)
    pd.testing.assert_frame_equal(back, frame)


# ------------------------------------------------------------------------ PIL

MODES = ["1", "L", "LA", "P", "PA", "RGB", "RGBA", "RGBX", "CMYK", "YCbCr", "LAB", "HSV", "I", "F", "I;16", "I;16B"]


@st.composite
def images(draw: st.DrawFn) -> Image.Image:
    mode = draw(st.sampled_from(MODES))
    size = draw(st.tuples(st.integers(0, 9), st.integers(0, 9)))
    raw_length = len(Image.new(mode, size).tobytes())
    image = (
        Image.frombytes(mode, size, draw(st.binary(min_size=raw_length, max_size=raw_length)))
        if raw_length
        else Image.new(mode, size)
    )
    if mode in ("P", "PA"):
        image.putpalette(
            draw(st.lists(st.integers(0, 255), min_size=3, max_size=768).filter(lambda p: len(p) % 3 == 0))
        )
        image.info["transparency"] = draw(st.integers(0, 255))
    return image


@RELAXED
@given(images())
def test_images_round_trip_losslessly_with_their_mode(image: Image.Image) -> None:
    assert_round_trip(image)


@settings(RELAXED, max_examples=40)
@given(
    st.lists(nps.arrays(plain_dtypes, shapes) | frames() | images(), max_size=3).flatmap(
        lambda parts: st.sampled_from([parts, tuple(parts), {f"k{i}": p for i, p in enumerate(parts)}])
    )
)
def test_data_values_nest_inside_containers(value: Any) -> None:
    assert_round_trip(value)
    assert_round_trip({"$": [value], (1, "key"): Point(value)})


def test_numpy_and_pandas_scalars_work_as_dict_keys() -> None:
    assert_round_trip({np.int64(1): "a", np.float32(2.5): "b", pd.Timestamp("2020-01-01"): "c", np.str_("s"): "d"})


def test_image_metadata_is_carried_where_it_can_be() -> None:
    image = Image.new("RGB", (2, 2), (1, 2, 3))
    image.info.update(dpi=(72.0, 72.0), comment=b"made here", handle=object())
    back = round_trip(image)
    assert back.info == {"dpi": (72.0, 72.0), "comment": b"made here"}
    assert back.tobytes() == image.tobytes()


def test_image_files_come_back_as_images_with_the_same_pixels(tmp_path: Any) -> None:
    Image.effect_noise((16, 8), 40).convert("RGB").save(tmp_path / "noise.png")
    with Image.open(tmp_path / "noise.png") as opened:
        back = round_trip(opened)
        assert isinstance(back, Image.Image)
        assert (back.mode, back.size, back.tobytes()) == (opened.mode, opened.size, opened.tobytes())
