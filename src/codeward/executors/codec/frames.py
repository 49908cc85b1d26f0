"""pandas: DataFrame, Series and Index (numpy, categorical, tz-aware, nullable and string dtypes;
RangeIndex, MultiIndex, names, freq), Timestamp, Timedelta, NaT and NA.

A frame travels column by column, each column's values by dtype, with numpy's forms for numpy
dtypes (`arrays`) and the time zone forms of `times`. A large string column goes as codes into
its distinct values when it repeats (``"form": "codes"``), else, arrow-backed, as its UTF-8 buffer
and the byte length of each item (``"form": "utf8"``); missing items as code -1 or a mask.
pandas is never imported here: its values are found by their module's name, and a payload's tag
imports it.
"""

from __future__ import annotations

import itertools
import sys
import warnings
from collections.abc import Callable
from typing import Any

from . import bounds, wire
from .arrays import (
    COLUMNAR_AT,
    code_dtype,
    dec_coded_objects,
    dec_codes,
    enc_codes,
    enc_ndarray,
    factorize_strs,
    repeats,
    sample_at,
)
from .errors import CodecError, CodecWarning
from .times import dec_tz, enc_tz
from .wire import TAG, Decoder, Encoder, Refused, dec_int, dec_list, dec_str, dec_strings, enc_list, tag, unb64


def encode(e: Encoder, v: Any) -> Any:
    """A value of pandas': a frame, a series, an index, or a scalar of its own."""
    try:
        return _enc_pandas_value(e, v)
    except Refused:
        if not e.allow_pickle:
            raise
        return e.fallback(v)  # a frame with one column that cannot be carried travels whole, pickled


def _enc_pandas_value(e: Encoder, v: Any) -> Any:
    pd = sys.modules["pandas"]
    t = type(v)
    if t is pd.DataFrame:
        columns = []
        for i in range(v.shape[1]):
            try:
                columns.append(_enc_pdarray(e, v.iloc[:, i]))
            except Refused as exc:
                exc.path.append(f"[column {v.columns[i]!r}]")
                raise
        return tag("df", index=_enc_index(e, v.index), columns=_enc_index(e, v.columns), data=columns)
    if t is pd.Series:
        return tag("series", index=_enc_index(e, v.index), name=e.enc(v.name), data=_enc_pdarray(e, v))
    if isinstance(v, pd.Index):
        return _enc_index(e, v)
    if t is pd.Timestamp:
        return tag("pdts", v=e.enc(v.to_datetime64()), tz=enc_tz(v.tzinfo, pytz_zones=True))
    if t is pd.Timedelta:
        return tag("pdtd", v=e.enc(v.to_timedelta64()))
    if v is pd.NaT or v is pd.NA:
        return tag("pdnull", v="NaT" if v is pd.NaT else "NA")
    return e.fallback(v, "pandas DataFrame, Series, Index, Timestamp, Timedelta, NaT and NA are carried")


def _enc_pdarray(e: Encoder, s: Any) -> Any:
    """The values of a Series or Index, by dtype: numpy, categorical, tz-aware, nullable, string."""
    pd, np = sys.modules["pandas"], sys.modules["numpy"]
    dt, arr = s.dtype, s.array
    if isinstance(dt, np.dtype):
        return enc_ndarray(e, s.to_numpy(), "nd")
    if isinstance(dt, pd.CategoricalDtype):
        return tag(
            "pdcat",
            codes=enc_ndarray(e, np.asarray(arr.codes), "nd"),
            categories=_enc_index(e, dt.categories),
            ordered=bool(dt.ordered),
        )
    if isinstance(dt, pd.DatetimeTZDtype):
        utc = arr.tz_convert("UTC").tz_localize(None).to_numpy()
        return tag("pddttz", v=enc_ndarray(e, utc, "nd"), tz=enc_tz(dt.tz, pytz_zones=True))
    if isinstance(arr, (pd.arrays.IntegerArray, pd.arrays.FloatingArray, pd.arrays.BooleanArray)):
        values = arr.to_numpy(dtype=dt.numpy_dtype, na_value=dt.numpy_dtype.type(0))
        return tag("pdmask", data=enc_ndarray(e, values, "nd"), mask=enc_ndarray(e, arr.isna(), "nd"))
    if isinstance(dt, pd.StringDtype):
        na = getattr(dt, "na_value", pd.NA)
        fields = _enc_arrow_strs(e, arr) if dt.storage == "pyarrow" else None
        if fields is None:
            values = arr.to_numpy(dtype=object, na_value=None)
            factorized = factorize_strs(values)
            fields = enc_codes(e, *factorized) if factorized else {"v": enc_list(e, values.tolist())}
        return tag("pdstr", storage=dt.storage, na="NA" if na is pd.NA else "nan", **fields)
    raise Refused(s, f"pandas dtype {dt} is not carried")


def _enc_arrow_strs(e: Encoder, arr: Any) -> dict[str, Any] | None:
    """An arrow-backed string column without making a Python str per item: codes into its distinct
    values when that is smaller (and decodes within `bounds.MAX_EXPANSION`), else its UTF-8 buffer with
    each item's length in bytes, and a mask of missing items."""
    pa, np = sys.modules.get("pyarrow"), sys.modules["numpy"]
    n = len(arr)
    if pa is None or n < COLUMNAR_AT:
        return None
    a = pa.array(arr)
    if isinstance(a, pa.ChunkedArray):
        a = a.combine_chunks()
    if not pa.types.is_large_string(a.type):
        a = a.cast(pa.large_string())
    offsets = np.frombuffer(a.buffers()[1], dtype=np.int64)[a.offset : a.offset + n + 1]
    start, end = int(offsets[0]), int(offsets[-1])
    sample = a[sample_at(n)]
    if repeats(len(sample.dictionary_encode().dictionary), len(sample)):
        encoded = a.dictionary_encode()
        dictionary = encoded.dictionary
        codes = encoded.indices.fill_null(-1).to_numpy().astype(code_dtype(np, len(dictionary)), copy=False)
        held = codes.nbytes + _arrow_text_bytes(np, dictionary)
        # Smaller than the text with a byte of length per item, the least the other form takes.
        if held < end - start + n and end - start <= bounds.MAX_EXPANSION * held + bounds.EXPANSION_SLACK:
            return enc_codes(e, codes, dictionary.to_pylist())
    lengths = np.diff(offsets)
    lengths = lengths.astype(np.min_scalar_type(int(lengths.max())), copy=False)
    data = a.buffers()[2]
    missing = a.is_null().to_numpy(zero_copy_only=False) if a.null_count else None
    return {
        "form": "utf8",
        "lengths": enc_ndarray(e, lengths, "nd"),
        "b64": e.blob(memoryview(data)[start:end] if data is not None else b""),
        "missing": None if missing is None else enc_ndarray(e, missing, "nd"),
    }


def _arrow_text_bytes(np: Any, strings: Any) -> int:
    """The UTF-8 bytes held by a large_string arrow array's items."""
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int64)[strings.offset : strings.offset + len(strings) + 1]
    return int(offsets[-1] - offsets[0])


def _enc_index(e: Encoder, idx: Any) -> Any:
    pd = sys.modules["pandas"]
    if type(idx) is pd.RangeIndex:
        return tag("pdrange", v=[idx.start, idx.stop, idx.step], name=e.enc(idx.name))
    if isinstance(idx, pd.MultiIndex):
        return tag(
            "pdmulti",
            levels=[_enc_index(e, level) for level in idx.levels],
            codes=[enc_ndarray(e, c, "nd") for c in idx.codes],
            names=e.each(idx.names),
        )
    freq = getattr(idx, "freqstr", None) if isinstance(idx, (pd.DatetimeIndex, pd.TimedeltaIndex)) else None
    return tag("pdindex", v=_enc_pdarray(e, idx), name=e.enc(idx.name), freq=freq)


# ----------------------------------------------------------------------- decoding


def _dec_pdarray(pd: Any, a: Any) -> Any:
    """The values inside a Series or Index: a numpy array or a pandas extension array."""
    if type(a) is not sys.modules["numpy"].ndarray and not isinstance(a, pd.api.extensions.ExtensionArray):
        raise CodecError(f"expected array values, got {type(a).__name__}")
    return a


def _dec_pdcat(d: Decoder, obj: dict[str, Any]) -> Any:
    pd = wire.import_library("pandas")
    dtype = pd.CategoricalDtype(obj["categories"], ordered=bool(obj["ordered"]))
    return pd.Categorical.from_codes(obj["codes"], dtype=dtype)


def _dec_pddttz(d: Decoder, obj: dict[str, Any]) -> Any:
    pd = wire.import_library("pandas")
    return pd.array(obj["v"]).tz_localize("UTC").tz_convert(dec_tz(obj["tz"]))


def _dec_pdmask(d: Decoder, obj: dict[str, Any]) -> Any:
    pd = wire.import_library("pandas")
    data, mask = obj["data"], obj["mask"]
    classes = {"i": pd.arrays.IntegerArray, "u": pd.arrays.IntegerArray, "f": pd.arrays.FloatingArray}
    classes["b"] = pd.arrays.BooleanArray
    kind = classes.get(getattr(getattr(data, "dtype", None), "kind", ""))
    if kind is None:
        raise CodecError("nullable array data is not a numeric or bool numpy array")
    return kind(data, mask.astype(bool))


def _dec_pdstr(d: Decoder, obj: dict[str, Any]) -> Any:
    pd = wire.import_library("pandas")
    storage = obj["storage"] if obj["storage"] == "pyarrow" and wire.importable("pyarrow") else "python"
    na = pd.NA if obj["na"] == "NA" else float("nan")
    try:
        dtype = pd.StringDtype(storage, na_value=na)
    except TypeError:  # pandas before 2.3 has no na_value
        dtype = pd.StringDtype(storage)
    form = obj.get("form")
    if form is None:
        return pd.array(dec_strings(obj["v"], missing=True), dtype=dtype)
    np = wire.import_library("numpy")
    if form == "codes":
        if storage == "pyarrow":
            return pd.array(_dec_coded_arrow(np, obj), dtype=dtype)
        return pd.array(dec_coded_objects(np, obj, None), dtype=dtype)
    if form == "utf8":
        return pd.array(_dec_utf8_column(np, obj, arrow=storage == "pyarrow"), dtype=dtype)
    raise CodecError(f"unknown string column form {form!r}")


def _dec_coded_arrow(np: Any, obj: dict[str, Any]) -> Any:
    """An arrow string array of the coded strings, refused when its text would outgrow the payload."""
    pa = sys.modules["pyarrow"]
    codes, uniques = dec_codes(np, obj, None)
    dictionary = pa.array(uniques, type=pa.large_string())
    lengths = np.diff(np.frombuffer(dictionary.buffers()[1], dtype=np.int64)[: len(uniques) + 1])
    valid = codes[codes >= 0]
    text = int(np.bincount(valid, minlength=len(uniques)) @ lengths) if len(valid) else 0
    held = codes.nbytes + int(lengths.sum())
    bounds.check_expansion(held, text)
    indices = pa.array(codes, mask=codes < 0)
    return pa.DictionaryArray.from_arrays(indices, dictionary).cast(pa.large_string())


def _dec_utf8_column(np: Any, obj: dict[str, Any], *, arrow: bool) -> Any:
    """Strings cut from one UTF-8 buffer by their lengths in bytes, checked before anything is cut."""
    lengths, data, missing = obj["lengths"], unb64(obj["b64"]), obj["missing"]
    if type(lengths) is not np.ndarray or lengths.ndim != 1 or lengths.dtype.kind not in "ui":
        raise CodecError("string lengths are not a 1-D integer array")
    n = len(lengths)
    if n and (int(lengths.min()) < 0 or int(lengths.max()) * n >= 2**63):
        raise CodecError("string lengths are negative or too large")
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, dtype=np.int64, out=offsets[1:])
    if offsets[-1] != len(data):
        raise CodecError(f"string lengths add up to {int(offsets[-1])} bytes, the buffer holds {len(data)}")
    if missing is not None and (type(missing) is not np.ndarray or missing.dtype != bool or missing.shape != (n,)):
        raise CodecError(f"the missing-value mask of {n} strings is not {n} bools")
    if arrow:
        pa = sys.modules["pyarrow"]
        validity = None if missing is None else pa.py_buffer(np.packbits(~missing, bitorder="little"))
        strings = pa.Array.from_buffers(pa.large_string(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)])
        strings.validate(full=True)  # UTF-8 inside every item
        return strings
    text = data.decode("ascii") if data.isascii() else None  # then byte offsets are character offsets
    out = np.empty(n, dtype=object)
    for first in range(0, n, _CUT_CHUNK):  # a chunk at a time: Python ints for every offset would be large
        bounds = offsets[first : first + _CUT_CHUNK + 1].tolist()
        if text is not None:
            out[first : first + len(bounds) - 1] = [text[a:b] for a, b in itertools.pairwise(bounds)]
        else:
            out[first : first + len(bounds) - 1] = [data[a:b].decode("utf-8") for a, b in itertools.pairwise(bounds)]
    if missing is not None:
        out[missing] = None
    return out


_CUT_CHUNK = 1 << 16


# Frequency aliases that pandas 2.2 renamed: a sandbox may run a pandas on the other side of that change.
_FREQ_RENAMES = {"H": "h", "BH": "bh", "CBH": "cbh", "T": "min", "S": "s", "L": "ms", "U": "us", "N": "ns"}
_FREQ_RENAMES |= {"M": "ME", "BM": "BME", "SM": "SME", "CBM": "CBME", "Q": "QE", "BQ": "BQE", "A": "YE", "BA": "BYE"}
_FREQ_RENAMES |= {new: old for old, new in list(_FREQ_RENAMES.items())}


def _freq_spellings(freq: str) -> list[str]:
    """The frequency as sent, then as the other side of pandas' 2.2 renaming spells it."""
    digits = len(freq) - len(freq.lstrip("-0123456789"))
    base, _, suffix = freq[digits:].partition("-")
    renamed = _FREQ_RENAMES.get(base)
    return [freq] if renamed is None else [freq, freq[:digits] + renamed + (f"-{suffix}" if suffix else "")]


def _dec_index(d: Decoder, obj: dict[str, Any]) -> Any:
    pd = wire.import_library("pandas")
    values, name, freq = _dec_pdarray(pd, obj["v"]), obj["name"], obj.get("freq")
    if freq is not None and values.dtype.kind in "mM":
        cls = pd.DatetimeIndex if values.dtype.kind == "M" else pd.TimedeltaIndex
        for spelling in _freq_spellings(dec_str(freq)):
            try:
                return cls(values, freq=spelling, name=name)
            except ValueError:
                continue
        warnings.warn(
            f"pandas here does not know the index frequency {freq!r}; decoded the index without it",
            CodecWarning,
            stacklevel=3,
        )
    return pd.Index(values, dtype=values.dtype, name=name, copy=False)


def _dec_series(d: Decoder, obj: dict[str, Any]) -> Any:
    pd = wire.import_library("pandas")
    values = _dec_pdarray(pd, obj["data"])
    return pd.Series(values, index=_dec_pdindex(pd, obj["index"]), dtype=values.dtype, name=obj["name"], copy=False)


def _dec_pdindex(pd: Any, x: Any) -> Any:
    if not isinstance(x, pd.Index):
        raise CodecError(f"expected a pandas Index, got {type(x).__name__}")
    return x


def _dec_df(d: Decoder, obj: dict[str, Any]) -> Any:
    pd = wire.import_library("pandas")
    index, columns = _dec_pdindex(pd, obj["index"]), _dec_pdindex(pd, obj["columns"])
    arrays = [_dec_pdarray(pd, a) for a in dec_list(obj["data"])]
    if len(arrays) != len(columns):
        raise CodecError(f"DataFrame has {len(columns)} column names but {len(arrays)} columns")
    # Series with an explicit dtype: pandas would otherwise re-infer object columns (e.g. as str).
    df = pd.DataFrame(
        {i: pd.Series(a, index=index, dtype=a.dtype, copy=False) for i, a in enumerate(arrays)}, index=index
    )
    df.columns = columns
    return df


def _dec_pdscalar(d: Decoder, obj: dict[str, Any]) -> Any:
    pd = wire.import_library("pandas")
    if obj[TAG] == "pdnull":
        return pd.NaT if obj["v"] == "NaT" else pd.NA
    if obj[TAG] == "pdtd":
        return pd.Timedelta(obj["v"])
    stamp = pd.Timestamp(obj["v"])
    tz = dec_tz(obj.get("tz"))
    return stamp if tz is None else stamp.tz_localize("UTC").tz_convert(tz)


DECODERS: dict[str, Callable[[Decoder, dict[str, Any]], Any]] = {
    "pdcat": _dec_pdcat,
    "pddttz": _dec_pddttz,
    "pdmask": _dec_pdmask,
    "pdstr": _dec_pdstr,
    "pdindex": _dec_index,
    "pdrange": lambda d, o: wire.import_library("pandas").RangeIndex(
        *(dec_int(p) for p in dec_list(o["v"])[:3]), name=o["name"]
    ),
    "pdmulti": lambda d, o: wire.import_library("pandas").MultiIndex(
        levels=o["levels"], codes=o["codes"], names=o["names"]
    ),
    "series": _dec_series,
    "df": _dec_df,
    "pdts": _dec_pdscalar,
    "pdtd": _dec_pdscalar,
    "pdnull": _dec_pdscalar,
}
