"""numpy: arrays of any shape and dtype, scalars and dtypes; and the coded form of string columns.

Every fixed-size dtype travels as its raw buffer (structured ones included), a large integer array
in the narrowest integer type that holds its values (``"wire"``), widened back on arrival; object
and StringDType arrays go element by element, or, when their strings repeat, as integer codes into
their distinct values (``"form": "codes"``), which pandas string columns (`frames`) share. numpy is
never imported here: its values are found by their module's name, and a payload's tag imports it.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

from . import bounds, wire
from .errors import CodecError
from .wire import TAG, Decoder, Encoder, dec_list, dec_shape, dec_str, dec_strings, enc_list, tag, unb64


def encode(e: Encoder, v: Any) -> Any:
    """A value of numpy's: an array, a scalar or a dtype."""
    np = sys.modules["numpy"]
    if type(v) is np.ndarray:
        return enc_ndarray(e, v, "nd")
    if isinstance(v, np.generic):
        return enc_ndarray(e, np.asarray(v), "npscalar")
    if isinstance(v, np.dtype):
        return tag("npdtype", v=_enc_dtype(v))
    return e.fallback(v, "only numpy ndarrays, scalars and dtypes are carried; for a subclass pass np.asarray(x)")


def enc_ndarray(e: Encoder, a: Any, kind: str) -> Any:
    """Raw buffer in base64 for fixed-size dtypes; elementwise for object and variable-width strings."""
    dt, shape = a.dtype, list(a.shape)
    if dt.kind == "O":
        flat = a.ravel()
        items = flat.tolist()  # an object array's tolist gives its elements as they are
        kinds = set(map(type, items))
        if kinds <= _STR_OR_NONE:
            factorized = factorize_strs(flat)
            if factorized is not None:
                return tag(kind, dtype="|O", shape=shape, **enc_codes(e, *factorized))
        return tag(kind, dtype="|O", shape=shape, items=enc_list(e, items, "[flat index {}]", kinds))
    if dt.kind == "T" and not hasattr(dt, "na_object"):
        return tag(kind, dtype="T", shape=shape, items=a.ravel().tolist())
    if dt.hasobject or dt.kind == "T":
        return e.fallback(a, f"numpy dtype {dt} holds Python objects or missing-value markers")
    order = "F" if a.flags.f_contiguous and not a.flags.c_contiguous else "C"
    narrow = _narrow_ints(a) if a.size >= _NARROW_AT and dt.kind in "iu" and dt.itemsize > 1 else None
    if narrow is not None:  # exact: every value fits the narrower type; the decoder widens it back
        buffer = _raw_bytes(a.astype(narrow, order=order), order)
        return tag(kind, dtype=_enc_dtype(dt), shape=shape, order=order, wire=narrow.str, b64=e.blob(buffer))
    return tag(kind, dtype=_enc_dtype(dt), shape=shape, order=order, b64=e.blob(_raw_bytes(a, order)))


# Integer arrays this large travel in the narrowest integer type that holds their values.
_NARROW_AT = 4096


def _narrow_ints(a: Any) -> Any:
    """A little-endian integer dtype narrower than the array's that holds all its values, or None."""
    np = sys.modules["numpy"]
    low, high = int(a.min()), int(a.max())
    for name in ("<i1", "<u1", "<i2", "<u2", "<i4", "<u4"):
        narrow = np.dtype(name)
        info = np.iinfo(narrow)
        if narrow.itemsize >= a.dtype.itemsize:
            return None
        if info.min <= low and high <= info.max and np.can_cast(narrow, a.dtype, "safe"):
            return narrow
    return None


def _raw_bytes(a: Any, order: str) -> Any:
    """The array's buffer in `order` as bytes, without a copy where it is already laid out that way."""
    flat = a.T if order == "F" else a
    if flat.flags.c_contiguous and a.dtype.itemsize:
        try:  # a uint8 view exports a buffer for every dtype (datetime64 and structured ones refuse their own)
            return memoryview(flat.reshape(-1).view(sys.modules["numpy"].uint8))
        except (TypeError, ValueError):
            pass
    return a.tobytes(order)


def _enc_dtype(dt: Any) -> Any:
    """A numpy dtype as JSON, structured and subarray dtypes included (offsets and padding kept)."""
    if dt.names is not None:
        fields = [dt.fields[name] for name in dt.names]
        return {
            "names": list(dt.names),
            "formats": [_enc_dtype(f[0]) for f in fields],
            "offsets": [f[1] for f in fields],
            "titles": [f[2] if len(f) > 2 else None for f in fields],
            "itemsize": dt.itemsize,
            "aligned": dt.isalignedstruct,
        }
    if dt.subdtype is not None:
        return {"sub": _enc_dtype(dt.subdtype[0]), "shape": list(dt.subdtype[1])}
    return dt.str


# ------------------------------------------------------------ coded string columns


# Columns of strings this long or longer may travel as codes into their distinct values (when they
# repeat), or as arrow's UTF-8 buffer and lengths; shorter ones stay plain JSON lists.
COLUMNAR_AT = 1024
_SAMPLE = 1 << 16  # items looked at to guess whether a column repeats
_STR_OR_NONE = frozenset({str, type(None)})


def sample_at(n: int) -> slice:
    """Evenly spread positions of a column of `n` items, about `_SAMPLE` of them."""
    return slice(None, None, max(1, n // _SAMPLE))


def repeats(distinct: int, sampled: int) -> bool:
    """Whether a column looks worth factorizing: its sample holds at most half as many distinct values as items."""
    return distinct * 2 <= sampled


def code_dtype(np: Any, count: int) -> Any:
    """The smallest signed integer dtype for codes into `count` values (and -1 for missing)."""
    for name in ("i1", "i2", "i4"):
        if count <= np.iinfo(name).max:
            return np.dtype(name)
    return np.dtype("i8")


def factorize_strs(values: Any) -> tuple[Any, list[str]] | None:
    """Codes (-1 for None) and distinct values of a 1-D object array of exact str and None, when they repeat.

    Uses pandas' hash table when pandas is already loaded; the caller has checked every item's exact type,
    so pandas' notion of missing (None, nan, NA) can only meet None here.
    """
    pd, np = sys.modules.get("pandas"), sys.modules["numpy"]
    n = len(values)
    if pd is None or n < COLUMNAR_AT:
        return None
    sample = values[sample_at(n)]
    if not repeats(len(set(sample.tolist())), len(sample)):
        return None
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    if len(uniques) * 2 > n:
        return None
    return codes.astype(code_dtype(np, len(uniques)), copy=False), uniques.tolist()


def enc_codes(e: Encoder, codes: Any, uniques: list[str]) -> dict[str, Any]:
    return {"form": "codes", "codes": enc_ndarray(e, codes, "nd"), "uniques": uniques}


def dec_codes(np: Any, obj: dict[str, Any], count: int | None) -> tuple[Any, list[str | None]]:
    """Codes into distinct strings (-1 for missing), checked: every code points at one of them."""
    codes, uniques = obj["codes"], dec_strings(obj["uniques"])
    if type(codes) is not np.ndarray or codes.ndim != 1 or codes.dtype.kind != "i":
        raise CodecError("string codes are not a 1-D integer array")
    if count is not None and len(codes) != count:
        raise CodecError(f"an array of {count} items has {len(codes)} codes")
    if len(codes) and (int(codes.min()) < -1 or int(codes.max()) >= len(uniques)):
        raise CodecError(f"string codes outside -1..{len(uniques) - 1}")
    return codes, uniques


def dec_coded_objects(np: Any, obj: dict[str, Any], count: int | None) -> Any:
    """An object array of the coded strings (None where missing): one reference per item, no new text."""
    codes, uniques = dec_codes(np, obj, count)
    table = np.empty(len(uniques) + 1, dtype=object)
    table[: len(uniques)] = uniques
    return table.take(codes)  # -1 takes the last slot: None


# ----------------------------------------------------------------------- decoding


def _dec_dtype(np: Any, x: Any) -> Any:
    if isinstance(x, str):
        return np.dtype(x)
    if isinstance(x, dict) and "sub" in x:
        return np.dtype((_dec_dtype(np, x["sub"]), dec_shape(x["shape"])))
    if isinstance(x, dict) and "names" in x:
        spec = {key: x[key] for key in ("names", "offsets", "titles", "itemsize")}
        spec["formats"] = [_dec_dtype(np, f) for f in dec_list(x["formats"])]
        return np.dtype(spec, align=bool(x.get("aligned")))
    raise CodecError(f"invalid numpy dtype {x!r}")


def _dec_ndarray(d: Decoder, obj: dict[str, Any]) -> Any:
    np = wire.import_library("numpy")
    shape = dec_shape(obj["shape"])
    count = math.prod(shape)
    if obj.get("form") == "codes":
        if obj["dtype"] != "|O":
            raise CodecError(f"coded arrays are object arrays, not {obj['dtype']!r}")
        a = dec_coded_objects(np, obj, count).reshape(shape)
    elif "form" in obj:
        raise CodecError(f"unknown array form {obj['form']!r}")
    elif "items" in obj:
        items = dec_list(obj["items"])
        if len(items) != count:
            raise CodecError(f"array of shape {shape} needs {count} items, payload has {len(items)}")
        if obj["dtype"] == "T":
            a = np.array(dec_strings(items), dtype=np.dtypes.StringDType())
        elif obj["dtype"] == "|O":
            a = np.empty(count, dtype=object)
            if set(map(type, items)) <= wire.JSON_SCALARS:  # nothing numpy would unpack as a sequence
                a[:] = items
            else:
                for i, x in enumerate(items):
                    a[i] = x
        else:
            raise CodecError(f"elementwise arrays are object or string arrays, not {obj['dtype']!r}")
        a = a.reshape(shape)
    else:
        dt = _dec_dtype(np, obj["dtype"])
        if dt.hasobject or dt.kind == "T":  # a buffer of object pointers would be memory corruption
            raise CodecError(f"refused a raw buffer for numpy dtype {dt}, which holds pointers")
        if dt.itemsize == 0 and count > bounds.MAX_EMPTY_ITEMS:  # costs no bytes, yet anything iterating it would hang
            raise CodecError(f"refused {count} elements of the zero-size numpy dtype {dt}")
        narrow = dt if obj.get("wire") is None else np.dtype(dec_str(obj["wire"]))
        if narrow != dt and (narrow.kind not in "iu" or dt.kind not in "iu" or not np.can_cast(narrow, dt, "safe")):
            raise CodecError(f"integers sent as {narrow} cannot widen exactly to {dt}")
        data = unb64(obj["b64"])
        if len(data) != count * narrow.itemsize:
            raise CodecError(
                f"array of shape {shape} and dtype {narrow} needs {count * narrow.itemsize} bytes, payload has {len(data)}"
            )
        if not data:
            flat = np.zeros(count, dtype=dt)
        elif narrow != dt:
            flat = np.frombuffer(data, dtype=narrow).astype(dt)
        else:
            flat = np.frombuffer(bytearray(data), dtype=dt)
        a = flat.reshape(shape, order="F" if obj.get("order") == "F" else "C")
    return a[()] if obj[TAG] == "npscalar" else a


DECODERS: dict[str, Callable[[Decoder, dict[str, Any]], Any]] = {
    "nd": _dec_ndarray,
    "npscalar": _dec_ndarray,
    "npdtype": lambda d, o: _dec_dtype(wire.import_library("numpy"), o["v"]),
}
