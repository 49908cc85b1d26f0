"""Typed JSON for values that cross a sandbox boundary, in both directions.

Variables go into a sandbox and final answers and tool results come out of it
through this one codec. JSON alone would lose types (tuple vs list, int keys,
nan, bytes...), so a value that JSON cannot hold exactly becomes a tagged object
``{"$": tag, ...}``; everything JSON holds exactly (str, bool, None, finite
floats, ints, lists, dicts with str keys) stays plain, so payloads stay compact.
Binary payloads (bytes, array buffers, image pixels) are base64 inside the JSON.
Large columns travel in columnar forms, each named by a ``form`` field so that the
older element-by-element fields still decode: a string column that repeats goes as
integer codes into its distinct values (``"form": "codes"``), an arrow-backed one
that does not as its UTF-8 buffer and the byte length of each item (``"form": "utf8"``),
missing items as code -1 or a mask; a large integer array goes in the narrowest
integer type that holds its values (``"wire"``) and is widened back on arrival.

Carried exactly, types kept: None, bool, int (within the bounds below), float (nan, inf, -0.0),
str (lone surrogates included: the text is pure-ASCII JSON), bytes, bytearray,
list, tuple, dict (any hashable keys, order kept), set, frozenset, complex,
Decimal, Fraction, UUID, range, datetime/date/time/timedelta with fixed-offset
or zoneinfo time zones, pathlib paths, OrderedDict, Counter, deque; enum members,
dataclass instances and namedtuples of registered classes (see Security); numpy arrays (any shape; every
fixed-size dtype as a raw buffer, structured ones included; object and
StringDType arrays element by element), numpy scalars and dtypes; pandas
DataFrame, Series and Index (numpy, categorical, tz-aware datetime, nullable
and string dtypes; RangeIndex, MultiIndex, names, freq), Timestamp, Timedelta,
NaT, NA; PIL images (raw pixels, mode, palette). Not kept: object identity
(shared references arrive as copies), the sign and payload of a Python float nan,
DataFrame.attrs, and image metadata the codec cannot carry. Anything else fails
with `CodecError`, or is pickled when the sender opts in with ``allow_pickle=True``.

Bounds on decoding, so that it takes time linear in the payload however the payload
was made. Each is far above what real data needs; a payload past one fails as
`CodecError`, naming the bound:
- a payload: at most 1 GiB of text and binary parts together (the local worker's
  own message limit);
- int: at most 332,193 bits, which holds every int of 100,000 decimal digits (23
  times the 4,300 digits past which Python itself refuses to convert an int to or
  from decimal text); large ints travel in hex, which parses in linear time. An int
  written in decimal (the encoder writes those under 2**2000 so) has at most 4,300
  digits, as parsing decimal takes time quadratic in its length;
- Fraction: the smaller of its numerator and denominator at most 4,096 bits (1,233
  digits): normalizing a Fraction takes their gcd, whose time grows with the
  product of their sizes (two ints of 6 million bits: 52 s);
- Decimal: at most 100,000 digits and an exponent within +-100,000 (its exact
  integer value, or its text without an exponent, is then at most 200,000 digits);
- set, frozenset, dict: at most 64 of its keys may share a hash with another key;
  keys that share one each cost a comparison with all the others as they go in,
  so that 60,000 ints k * (2**61 - 1), which hash alike, took half a minute;
- nesting: as deep as the interpreter lets JSON parse (a thousand levels on
  Python 3.11, more on later ones), deeper fails;
- numpy shapes: at most 64 dimensions under 2**63 each, checked before their
  product is taken.

Security, because the host decodes what comes out of a sandbox:
- `loads` never unpickles unless ``allow_pickle=True`` (the host never passes it
  for sandbox output); pickle is only a host-to-sandbox opt-in for trusted setups.
- `loads` never imports a module or looks up a class named by a payload: enum members,
  dataclass instances and namedtuples are restored only as classes the user registered
  with `register_class` (none by default; the standard types above have tags of their
  own), without running their ``__init__``, and a flag only as its members' bits.
  Any other class name gives the plain form (the member's value, a dict of fields, a
  tuple) and a `CodecWarning`, so nothing decoded runs code the payload chose when it
  is printed, iterated, compared or hashed. This holds for every `loads` on the host,
  its own saved runs included: a file may come from anyone. Only a sandbox, decoding
  what the host sent, also restores classes loaded there (`restore_loaded_classes`).
- No payload decodes to more memory than a small multiple of its own size (no
  compression, buffer sizes checked against shapes before anything is allocated;
  codes, lengths and masks checked against the column's length and the buffer they
  index, and the text that codes would materialize against the codes' own size),
  and no payload takes time past linear in its size to decode (the bounds above).

This module's source is also executed as-is inside sandboxes where codeward is
not installed: it imports only the standard library at top level, and numpy,
pandas and PIL only when a value of theirs is met. That is why it is one module,
longer than most: a sandbox receives exactly one source text.
"""

from __future__ import annotations

import base64
import binascii
import collections
import contextlib
import contextvars
import dataclasses
import datetime as _dt
import enum
import fractions
import itertools
import json
import math
import operator
import os
import pathlib
import pickle
import sys
import time
import types
import uuid
import warnings
import zoneinfo
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from typing import Any, TypeVar

__all__ = [
    "CodecError",
    "CodecWarning",
    "decode_variables",
    "decoding_deadline",
    "dumps",
    "encode_variables",
    "loads",
    "register_class",
    "restore_loaded_classes",
]

TAG = "$"
_PICKLE_HINT = (
    "convert it to a carried type, or, for a sandbox you trust, pass allow_pickle=True "
    "to send it pickled (host to sandbox only: the host never unpickles sandbox output)"
)
# Ints this large travel as hex: every Python parses that, whatever its
# int-to-decimal-string digit limit (the lowest settable limit is 640 digits).
_INT_LIMIT = 2**2000
_Class = TypeVar("_Class", bound=type)


class CodecError(TypeError):
    """A value that cannot be carried, or a payload that cannot be decoded."""


class CodecWarning(UserWarning):
    """A value was decoded as something plainer than it was sent (e.g. a dataclass as a dict)."""


class _Refused(Exception):
    """Internal: a value cannot be encoded; `path` grows as the error unwinds."""

    def __init__(self, value: Any, reason: str = "") -> None:
        super().__init__(reason)
        self.type = type(value)
        self.reason = reason
        self.path: list[str] = []


# --------------------------------------------------------------------- public API


def dumps(value: Any, *, allow_pickle: bool = False, parts: list[Any] | None = None) -> str:
    """Encode one value as JSON text; raise `CodecError` if it cannot be carried.

    Given a `parts` list, large binary buffers (array data, image pixels) are appended to it
    instead of going into the text as base64, for a channel that can carry raw bytes beside
    the text; `loads` then needs the same parts, in order.
    """
    encoder = _Encoder(allow_pickle, parts)
    return encoder.text(encoder.run(value, "value"))


def loads(text: str, *, allow_pickle: bool = False, parts: Sequence[Any] | None = None) -> Any:
    """Decode JSON text made by `dumps`; pickled parts are refused unless ``allow_pickle``.

    A payload past one of the decoding bounds (see the module's docstring) fails as `CodecError`.
    """
    if not isinstance(text, (str, bytes, bytearray)):
        raise CodecError(f"loads expects JSON text, got {type(text)!r}")
    size = len(text) + sum(map(len, parts or ()))
    if size > _MAX_PAYLOAD:
        raise CodecError(f"refused a payload of {size} bytes: the codec decodes at most {_MAX_PAYLOAD}")
    decoder = _Decoder(allow_pickle, parts)
    if isinstance(text, str) and len(text) >= _CUT_AT:
        text = decoder.cut_blobs(text)
    try:
        return json.loads(text, object_hook=decoder.hook, parse_constant=_bad_constant, parse_int=_plain_int_parser())
    except CodecError:
        raise
    except RecursionError:
        raise CodecError("payload is nested too deeply to decode") from None
    except (ValueError, TypeError) as exc:
        raise CodecError(f"payload is not valid codec JSON: {exc}") from None


@contextlib.contextmanager
def decoding_deadline(at: float | None) -> Iterator[None]:
    """Within the block, `loads` fails with `CodecError` once ``time.monotonic()`` passes `at`.

    Decoding is linear in the payload, but a large payload of small tagged values (sets, complex
    numbers) still takes seconds: an executor decodes what a block sent within the block's own
    time limit, so the host is never held past it.
    """
    token = _DEADLINE.set(at)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def register_class(cls: _Class) -> _Class:
    """Let `loads` restore instances of `cls`, an enum, dataclass or namedtuple class; returns `cls`.

    A payload names its class as text, and a sandbox writes whatever text it likes: a class it
    names could run code on the host when its instance is printed, iterated or compared (a
    namedtuple from the standard library ran ``uname -p`` when iterated). So only the classes the
    user registers are restored; every other class-named value decodes to its plain form (members'
    values, a dict of fields, a tuple) with a `CodecWarning`. Usable as a class decorator.
    """
    if _restorable_kind(cls) is None:
        raise TypeError(
            f"register_class takes an enum class, a dataclass built by object.__new__ or a namedtuple class, "
            f"not {cls!r}"
        )
    _REGISTERED[_class_ref(cls)] = cls
    return cls


def encode_variables(variables: dict[str, Any], *, allow_pickle: bool = False, parts: list[Any] | None = None) -> str:
    """Encode a name -> value mapping; an error names the variable, its type and the opt-in."""
    if not isinstance(variables, dict):
        raise CodecError(f"variables must be a dict of name -> value, got {type(variables)!r}")
    encoder = _Encoder(allow_pickle, parts)
    out = {}
    for name, value in variables.items():
        if type(name) is not str:
            raise CodecError(f"variable names must be str, got {name!r} ({type(name)!r})")
        out[name] = encoder.run(value, f"variable {name!r}")
    return encoder.text(out if TAG not in out else _tag("dict", v=[[k, v] for k, v in out.items()]))


def decode_variables(text: str, *, allow_pickle: bool = False, parts: Sequence[Any] | None = None) -> dict[str, Any]:
    """Decode what `encode_variables` made, checking that it is a name -> value mapping."""
    variables = loads(text, allow_pickle=allow_pickle, parts=parts)
    if not isinstance(variables, dict) or not all(type(k) is str for k in variables):
        raise CodecError("payload does not hold a mapping of variable names to values")
    return variables


# ----------------------------------------------------------------------- encoding


# ensure_ascii keeps lone surrogates exact (as \\udxxx escapes) and the text pure ASCII.
_JSON = json.JSONEncoder(ensure_ascii=True, allow_nan=False, check_circular=False, separators=(",", ":"))
# Base64 texts longer than this skip the JSON encoder's character scan (see `_Encoder.blob`).
_SPLICE_AT = 1 << 16


def _tag(tag: str, /, **fields: Any) -> dict[str, Any]:
    return {TAG: tag, **fields}


class _Encoder:
    """One encoding pass; holds the pickle opt-in and dispatches on exact types."""

    def __init__(self, allow_pickle: bool, parts: list[Any] | None = None) -> None:
        self.allow_pickle = allow_pickle
        self.blobs: list[str] = []
        self._marker = ""
        self.parts = parts  # where large buffers go as raw bytes, when the channel carries them

    @property
    def marker(self) -> str:
        """Unguessable, so no string in the value can match it; made only for values that hold a large blob."""
        if not self._marker:
            self._marker = f"\x00{os.urandom(8).hex()}:"
        return self._marker

    def blob(self, data: bytes | bytearray | memoryview) -> str:
        """Base64 of binary data; a large one stands in the tree as a marker until `text` splices it in.

        Base64 needs no JSON escaping, yet the JSON encoder would scan and copy every character of it,
        which costs more than the base64 encoding itself for arrays and images.
        """
        if self.parts is not None and len(data) >= _SPLICE_AT:
            self.parts.append(data)
            return _tag("part", i=len(self.parts) - 1)  # type: ignore[return-value]
        text = base64.b64encode(data).decode("ascii")
        if len(text) < _SPLICE_AT:
            return text
        self.blobs.append(text)
        return f"{self.marker}{len(self.blobs) - 1}"

    def text(self, tree: Any) -> str:
        """The JSON text of an encoded tree, with the large base64 texts spliced in."""
        text = _JSON.encode(tree)
        if not self.blobs:
            return text
        parts = text.split(_JSON.encode(self.marker)[:-1])  # the marker as JSON writes it, without its end quote
        out = [parts[0]]
        for part in parts[1:]:
            index, rest = part.split('"', 1)
            out += ['"', self.blobs[int(index)], '"', rest]
        return "".join(out)

    def run(self, value: Any, label: str) -> Any:
        try:
            return self.enc(value)
        except _Refused as exc:
            where = label + "".join(reversed(exc.path))
            reason = f" ({exc.reason})" if exc.reason else ""
            raise CodecError(f"{where}: cannot carry {exc.type!r}{reason}; {_PICKLE_HINT}") from None
        except RecursionError:
            raise CodecError(f"{label}: nested too deeply (or contains itself) to be carried") from None

    def enc(self, v: Any) -> Any:
        t = type(v)
        if t is str or t is bool or v is None:
            return v
        if t is int:
            return v if -_INT_LIMIT < v < _INT_LIMIT else _tag("int", hex=hex(v))
        encode = _ENCODERS.get(t)
        if encode is not None:
            return encode(self, v)
        return self.enc_other(v)

    def enc_other(self, v: Any) -> Any:
        if isinstance(v, enum.Enum):
            return _tag("enum", cls=_class_ref(type(v)), name=v.name, v=self.enc(v.value))
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            fields = {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}
            return _tag("dc", cls=_class_ref(type(v)), f=self.items(fields, ".{}"))
        if isinstance(v, tuple) and "_fields" in vars(type(v)):  # a namedtuple
            return _tag("nt", cls=_class_ref(type(v)), v=self.each(v))
        module = type(v).__module__ or ""
        for prefix, encode in _LAZY_ENCODERS:
            if module == prefix or module.startswith(prefix + "."):
                return encode(self, v)
        return self.fallback(v)

    def fallback(self, v: Any, reason: str = "") -> Any:
        """Pickle what cannot be carried when opted in, else refuse."""
        if not self.allow_pickle:
            raise _Refused(v, reason)
        try:
            return _tag("pickle", b64=self.blob(pickle.dumps(v, protocol=4)))
        except Exception as exc:
            raise _Refused(v, f"pickling it failed: {exc}") from None

    def each(self, values: Any, fmt: str = "[{}]") -> list[Any]:
        """Encode a sequence, naming the failing position in errors."""
        out = []
        enc = self.enc
        for i, x in enumerate(values):
            t = type(x)
            if t is str or t is bool or x is None:
                out.append(x)
                continue
            try:
                out.append(enc(x))
            except _Refused as exc:
                exc.path.append(fmt.format(i))
                raise
        return out

    def items(self, mapping: dict[Any, Any], fmt: str = "[{!r}]") -> Any:
        """A dict: a JSON object when its keys are plain str, else a list of pairs."""
        plain = TAG not in mapping and set(map(type, mapping)) <= {str}
        if plain and _is_plain(mapping.values()):
            return mapping
        out: Any = {} if plain else []
        enc = self.enc
        for k, x in mapping.items():
            key = k if plain else self.key(k)
            t = type(x)
            try:
                ex = x if t is str or t is bool or x is None else enc(x)
            except _Refused as exc:
                exc.path.append(fmt.format(k))
                raise
            if plain:
                out[k] = ex
            else:
                out.append([key, ex])
        return out if plain else _tag("dict", v=out)

    def key(self, k: Any) -> Any:
        try:
            return self.enc(k)
        except _Refused as exc:
            exc.path.append(f"<key {k!r}>")
            raise


_JSON_SCALARS = frozenset({str, bool, type(None), int, float})


def _is_plain(values: Any, kinds: set[type] | None = None) -> bool:
    """True when every item is a JSON scalar that needs no tag, so the container is sent as is.

    Checked with C-level loops (map, set, all, min, max), which keeps plain data near `json` speed;
    `kinds` is the set of the items' types, when the caller has it already.
    """
    kinds = set(map(type, values)) if kinds is None else kinds
    if not kinds <= _JSON_SCALARS:
        return False
    if float in kinds:
        floats = values if len(kinds) == 1 else [x for x in values if type(x) is float]
        if not all(map(math.isfinite, floats)):
            return False
    if int in kinds:
        ints = values if len(kinds) == 1 else [x for x in values if type(x) is int]
        return min(ints) > -_INT_LIMIT and max(ints) < _INT_LIMIT
    return True


def _enc_list(e: _Encoder, v: list[Any], fmt: str = "[{}]", kinds: set[type] | None = None) -> Any:
    return v if _is_plain(v, kinds) else e.each(v, fmt)


def _enc_float(e: _Encoder, v: float) -> Any:
    return v if math.isfinite(v) else _tag("float", v=repr(v))


def _enc_tz(tz: Any, *, pytz_zones: bool = False) -> Any:
    """A time zone as JSON: fixed offsets (UTC included) and zoneinfo zones by key.

    pandas before 3 gives tz-aware columns pytz zones, so those are carried by key too where
    pandas holds them (``pytz_zones``); a datetime holding a pytz zone is refused, as its
    offset depends on how it was localized.
    """
    if tz is None:
        return None
    if type(tz) is _dt.timezone:
        offset, *name = tz.__getinitargs__()  # type: ignore[attr-defined]
        return {"offset": _td_parts(offset), "name": name[0] if name else None}
    if type(tz) is zoneinfo.ZoneInfo and tz.key is not None:
        return {"key": tz.key}
    if pytz_zones and type(tz).__module__.startswith("pytz") and isinstance(getattr(tz, "zone", None), str):
        return {"key": tz.zone, "lib": "pytz"}
    raise _Refused(tz, "only datetime.timezone offsets and zoneinfo.ZoneInfo zones with a key are carried")


def _td_parts(td: _dt.timedelta) -> list[int]:
    return [td.days, td.seconds, td.microseconds]


def _enc_with_tz(kind: str) -> Callable[[_Encoder, Any], Any]:
    def encode(e: _Encoder, v: Any) -> Any:
        try:
            tz = _enc_tz(v.tzinfo)
        except _Refused as exc:
            raise _Refused(v, exc.reason) from None
        return _tag(kind, v=v.replace(tzinfo=None).isoformat(), tz=tz, fold=v.fold)

    return encode


def _enc_path(e: _Encoder, v: pathlib.PurePath) -> Any:
    return _tag("path", cls=type(v).__name__, v=str(v))


def _enc_tz_value(e: _Encoder, v: Any) -> Any:
    return _tag("tz", tz=_enc_tz(v))


_ENCODERS: dict[type, Callable[[_Encoder, Any], Any]] = {
    float: _enc_float,
    list: _enc_list,
    dict: lambda e, v: e.items(v),
    tuple: lambda e, v: _tag("tuple", v=_enc_list(e, v)),
    set: lambda e, v: _tag("set", v=_enc_list(e, list(v), "{{item {}}}")),
    frozenset: lambda e, v: _tag("frozenset", v=_enc_list(e, list(v), "{{item {}}}")),
    bytes: lambda e, v: _tag("bytes", b64=e.blob(v)),
    bytearray: lambda e, v: _tag("bytearray", b64=e.blob(v)),
    complex: lambda e, v: _tag("complex", v=[_enc_float(e, v.real), _enc_float(e, v.imag)]),
    Decimal: lambda e, v: _tag("decimal", v=str(v)),
    fractions.Fraction: lambda e, v: _tag("fraction", v=[e.enc(v.numerator), e.enc(v.denominator)]),
    uuid.UUID: lambda e, v: _tag("uuid", v=str(v)),
    range: lambda e, v: _tag("range", v=[e.enc(v.start), e.enc(v.stop), e.enc(v.step)]),
    _dt.datetime: _enc_with_tz("datetime"),
    _dt.time: _enc_with_tz("time"),
    _dt.date: lambda e, v: _tag("date", v=v.isoformat()),
    _dt.timedelta: lambda e, v: _tag("timedelta", v=_td_parts(v)),
    collections.OrderedDict: lambda e, v: _tag("odict", v=e.items(v)),
    collections.Counter: lambda e, v: _tag("counter", v=e.items(v)),
    collections.deque: lambda e, v: _tag("deque", v=_enc_list(e, list(v)), maxlen=v.maxlen),
    _dt.timezone: _enc_tz_value,
    zoneinfo.ZoneInfo: _enc_tz_value,
    **{
        cls: _enc_path
        for cls in (pathlib.PurePosixPath, pathlib.PureWindowsPath, pathlib.PosixPath, pathlib.WindowsPath)
    },
}


def _class_ref(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


# The classes `loads` restores by name (see `register_class`), keyed by their ``module:qualname``.
_REGISTERED: dict[str, type] = {}
# Whether `loads` also restores classes loaded where it runs: only inside a sandbox (see below).
_LOADED_CLASSES_TOO = False


def restore_loaded_classes() -> None:
    """Inside a sandbox, let `loads` restore any enum, dataclass or namedtuple class loaded there.

    What a sandbox decodes comes from the host, and its classes are the sandbox's own to run, so
    an enum the host sends arrives as that enum. The host itself never calls this: it restores
    only the classes its user registers.
    """
    global _LOADED_CLASSES_TOO
    _LOADED_CLASSES_TOO = True


def _restorable_kind(cls: Any) -> str | None:
    """The tag under which instances of `cls` travel by class ("enum", "dc", "nt"), or None.

    A dataclass must be made by ``object.__new__``: the decoder makes its instances that way,
    without calling ``__init__``, as pickle does.
    """
    if not isinstance(cls, type):
        return None
    if issubclass(cls, enum.Enum):
        return "enum"
    if dataclasses.is_dataclass(cls) and cls.__new__ is object.__new__:
        return "dc"
    if issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple):
        return "nt"
    return None


# Encoders for third-party types, found by the value's module name so that this
# module never imports numpy, pandas or PIL just to check a value's type.
_LAZY_ENCODERS: list[tuple[str, Callable[[_Encoder, Any], Any]]] = []  # filled below


# ------------------------------------------------- numpy, pandas and PIL (lazily)


def _enc_numpy(e: _Encoder, v: Any) -> Any:
    np = sys.modules["numpy"]
    if type(v) is np.ndarray:
        return _enc_ndarray(e, v, "nd")
    if isinstance(v, np.generic):
        return _enc_ndarray(e, np.asarray(v), "npscalar")
    if isinstance(v, np.dtype):
        return _tag("npdtype", v=_enc_dtype(v))
    return e.fallback(v, "only numpy ndarrays, scalars and dtypes are carried; for a subclass pass np.asarray(x)")


def _enc_ndarray(e: _Encoder, a: Any, tag: str) -> Any:
    """Raw buffer in base64 for fixed-size dtypes; elementwise for object and variable-width strings."""
    dt, shape = a.dtype, list(a.shape)
    if dt.kind == "O":
        flat = a.ravel()
        items = flat.tolist()  # an object array's tolist gives its elements as they are
        kinds = set(map(type, items))
        if kinds <= _STR_OR_NONE:
            factorized = _factorize_strs(flat)
            if factorized is not None:
                return _tag(tag, dtype="|O", shape=shape, **_enc_codes(e, *factorized))
        return _tag(tag, dtype="|O", shape=shape, items=_enc_list(e, items, "[flat index {}]", kinds))
    if dt.kind == "T" and not hasattr(dt, "na_object"):
        return _tag(tag, dtype="T", shape=shape, items=a.ravel().tolist())
    if dt.hasobject or dt.kind == "T":
        return e.fallback(a, f"numpy dtype {dt} holds Python objects or missing-value markers")
    order = "F" if a.flags.f_contiguous and not a.flags.c_contiguous else "C"
    wire = _narrow_ints(a) if a.size >= _NARROW_AT and dt.kind in "iu" and dt.itemsize > 1 else None
    if wire is not None:  # exact: every value fits the narrower type; the decoder widens it back
        buffer = _raw_bytes(a.astype(wire, order=order), order)
        return _tag(tag, dtype=_enc_dtype(dt), shape=shape, order=order, wire=wire.str, b64=e.blob(buffer))
    return _tag(tag, dtype=_enc_dtype(dt), shape=shape, order=order, b64=e.blob(_raw_bytes(a, order)))


# Integer arrays this large travel in the narrowest integer type that holds their values.
_NARROW_AT = 4096


def _narrow_ints(a: Any) -> Any:
    """A little-endian integer dtype narrower than the array's that holds all its values, or None."""
    np = sys.modules["numpy"]
    low, high = int(a.min()), int(a.max())
    for name in ("<i1", "<u1", "<i2", "<u2", "<i4", "<u4"):
        wire = np.dtype(name)
        info = np.iinfo(wire)
        if wire.itemsize >= a.dtype.itemsize:
            return None
        if info.min <= low and high <= info.max and np.can_cast(wire, a.dtype, "safe"):
            return wire
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


# Columns of strings this long or longer may travel as codes into their distinct values (when they
# repeat), or as arrow's UTF-8 buffer and lengths; shorter ones stay plain JSON lists.
_COLUMNAR_AT = 1024
_SAMPLE = 1 << 16  # items looked at to guess whether a column repeats
# A factorized column may stand for at most this multiple of its codes' and distinct values' bytes
# (plus a little), once its text is materialized (arrow storage); the decoder refuses more.
_MAX_EXPANSION = 16
_EXPANSION_SLACK = 1 << 16
_STR_OR_NONE = frozenset({str, type(None)})


def _sample_at(n: int) -> slice:
    """Evenly spread positions of a column of `n` items, about `_SAMPLE` of them."""
    return slice(None, None, max(1, n // _SAMPLE))


def _repeats(distinct: int, sampled: int) -> bool:
    """Whether a column looks worth factorizing: its sample holds at most half as many distinct values as items."""
    return distinct * 2 <= sampled


def _code_dtype(np: Any, count: int) -> Any:
    """The smallest signed integer dtype for codes into `count` values (and -1 for missing)."""
    for name in ("i1", "i2", "i4"):
        if count <= np.iinfo(name).max:
            return np.dtype(name)
    return np.dtype("i8")


def _factorize_strs(values: Any) -> tuple[Any, list[str]] | None:
    """Codes (-1 for None) and distinct values of a 1-D object array of exact str and None, when they repeat.

    Uses pandas' hash table when pandas is already loaded; the caller has checked every item's exact type,
    so pandas' notion of missing (None, nan, NA) can only meet None here.
    """
    pd, np = sys.modules.get("pandas"), sys.modules["numpy"]
    n = len(values)
    if pd is None or n < _COLUMNAR_AT:
        return None
    sample = values[_sample_at(n)]
    if not _repeats(len(set(sample.tolist())), len(sample)):
        return None
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    if len(uniques) * 2 > n:
        return None
    return codes.astype(_code_dtype(np, len(uniques)), copy=False), uniques.tolist()


def _enc_codes(e: _Encoder, codes: Any, uniques: list[str]) -> dict[str, Any]:
    return {"form": "codes", "codes": _enc_ndarray(e, codes, "nd"), "uniques": uniques}


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


def _enc_pandas(e: _Encoder, v: Any) -> Any:
    try:
        return _enc_pandas_value(e, v)
    except _Refused:
        if not e.allow_pickle:
            raise
        return e.fallback(v)  # a frame with one column that cannot be carried travels whole, pickled


def _enc_pandas_value(e: _Encoder, v: Any) -> Any:
    pd = sys.modules["pandas"]
    t = type(v)
    if t is pd.DataFrame:
        columns = []
        for i in range(v.shape[1]):
            try:
                columns.append(_enc_pdarray(e, v.iloc[:, i]))
            except _Refused as exc:
                exc.path.append(f"[column {v.columns[i]!r}]")
                raise
        return _tag("df", index=_enc_index(e, v.index), columns=_enc_index(e, v.columns), data=columns)
    if t is pd.Series:
        return _tag("series", index=_enc_index(e, v.index), name=e.enc(v.name), data=_enc_pdarray(e, v))
    if isinstance(v, pd.Index):
        return _enc_index(e, v)
    if t is pd.Timestamp:
        return _tag("pdts", v=e.enc(v.to_datetime64()), tz=_enc_tz(v.tzinfo, pytz_zones=True))
    if t is pd.Timedelta:
        return _tag("pdtd", v=e.enc(v.to_timedelta64()))
    if v is pd.NaT or v is pd.NA:
        return _tag("pdnull", v="NaT" if v is pd.NaT else "NA")
    return e.fallback(v, "pandas DataFrame, Series, Index, Timestamp, Timedelta, NaT and NA are carried")


def _enc_pdarray(e: _Encoder, s: Any) -> Any:
    """The values of a Series or Index, by dtype: numpy, categorical, tz-aware, nullable, string."""
    pd, np = sys.modules["pandas"], sys.modules["numpy"]
    dt, arr = s.dtype, s.array
    if isinstance(dt, np.dtype):
        return _enc_ndarray(e, s.to_numpy(), "nd")
    if isinstance(dt, pd.CategoricalDtype):
        return _tag(
            "pdcat",
            codes=_enc_ndarray(e, np.asarray(arr.codes), "nd"),
            categories=_enc_index(e, dt.categories),
            ordered=bool(dt.ordered),
        )
    if isinstance(dt, pd.DatetimeTZDtype):
        utc = arr.tz_convert("UTC").tz_localize(None).to_numpy()
        return _tag("pddttz", v=_enc_ndarray(e, utc, "nd"), tz=_enc_tz(dt.tz, pytz_zones=True))
    if isinstance(arr, (pd.arrays.IntegerArray, pd.arrays.FloatingArray, pd.arrays.BooleanArray)):
        values = arr.to_numpy(dtype=dt.numpy_dtype, na_value=dt.numpy_dtype.type(0))
        return _tag("pdmask", data=_enc_ndarray(e, values, "nd"), mask=_enc_ndarray(e, arr.isna(), "nd"))
    if isinstance(dt, pd.StringDtype):
        na = getattr(dt, "na_value", pd.NA)
        fields = _enc_arrow_strs(e, arr) if dt.storage == "pyarrow" else None
        if fields is None:
            values = arr.to_numpy(dtype=object, na_value=None)
            factorized = _factorize_strs(values)
            fields = _enc_codes(e, *factorized) if factorized else {"v": _enc_list(e, values.tolist())}
        return _tag("pdstr", storage=dt.storage, na="NA" if na is pd.NA else "nan", **fields)
    raise _Refused(s, f"pandas dtype {dt} is not carried")


def _enc_arrow_strs(e: _Encoder, arr: Any) -> dict[str, Any] | None:
    """An arrow-backed string column without making a Python str per item: codes into its distinct
    values when that is smaller (and decodes within `_MAX_EXPANSION`), else its UTF-8 buffer with
    each item's length in bytes, and a mask of missing items."""
    pa, np = sys.modules.get("pyarrow"), sys.modules["numpy"]
    n = len(arr)
    if pa is None or n < _COLUMNAR_AT:
        return None
    a = pa.array(arr)
    if isinstance(a, pa.ChunkedArray):
        a = a.combine_chunks()
    if not pa.types.is_large_string(a.type):
        a = a.cast(pa.large_string())
    offsets = np.frombuffer(a.buffers()[1], dtype=np.int64)[a.offset : a.offset + n + 1]
    start, end = int(offsets[0]), int(offsets[-1])
    sample = a[_sample_at(n)]
    if _repeats(len(sample.dictionary_encode().dictionary), len(sample)):
        encoded = a.dictionary_encode()
        dictionary = encoded.dictionary
        codes = encoded.indices.fill_null(-1).to_numpy().astype(_code_dtype(np, len(dictionary)), copy=False)
        held = codes.nbytes + _arrow_text_bytes(np, dictionary)
        # Smaller than the text with a byte of length per item, the least the other form takes.
        if held < end - start + n and end - start <= _MAX_EXPANSION * held + _EXPANSION_SLACK:
            return _enc_codes(e, codes, dictionary.to_pylist())
    lengths = np.diff(offsets)
    lengths = lengths.astype(np.min_scalar_type(int(lengths.max())), copy=False)
    data = a.buffers()[2]
    missing = a.is_null().to_numpy(zero_copy_only=False) if a.null_count else None
    return {
        "form": "utf8",
        "lengths": _enc_ndarray(e, lengths, "nd"),
        "b64": e.blob(memoryview(data)[start:end] if data is not None else b""),
        "missing": None if missing is None else _enc_ndarray(e, missing, "nd"),
    }


def _arrow_text_bytes(np: Any, strings: Any) -> int:
    """The UTF-8 bytes held by a large_string arrow array's items."""
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int64)[strings.offset : strings.offset + len(strings) + 1]
    return int(offsets[-1] - offsets[0])


def _enc_index(e: _Encoder, idx: Any) -> Any:
    pd = sys.modules["pandas"]
    if type(idx) is pd.RangeIndex:
        return _tag("pdrange", v=[idx.start, idx.stop, idx.step], name=e.enc(idx.name))
    if isinstance(idx, pd.MultiIndex):
        return _tag(
            "pdmulti",
            levels=[_enc_index(e, level) for level in idx.levels],
            codes=[_enc_ndarray(e, c, "nd") for c in idx.codes],
            names=e.each(idx.names),
        )
    freq = getattr(idx, "freqstr", None) if isinstance(idx, (pd.DatetimeIndex, pd.TimedeltaIndex)) else None
    return _tag("pdindex", v=_enc_pdarray(e, idx), name=e.enc(idx.name), freq=freq)


def _enc_pil(e: _Encoder, v: Any) -> Any:
    image_module = sys.modules.get("PIL.Image")
    if image_module is None or not isinstance(v, image_module.Image):
        return e.fallback(v, "only PIL images are carried from PIL")
    palette = v.palette
    info = []
    for key, value in v.info.items():
        try:  # metadata is carried where it can be; the pixels always are
            info.append([e.enc(key), e.enc(value)])
        except _Refused:
            continue
    return _tag(
        "image",
        mode=v.mode,
        size=list(v.size),
        b64=e.blob(v.tobytes()),
        info=_tag("dict", v=info) if info else None,
        palette=[palette.mode, v.getpalette(palette.mode)] if palette is not None else None,
    )


_LAZY_ENCODERS += [("numpy", _enc_numpy), ("pandas", _enc_pandas), ("PIL", _enc_pil)]


# ----------------------------------------------------------------------- decoding


# Bounds on what a payload may ask of the decoder: the module's docstring says why each is where it is.
_MAX_PAYLOAD = 1 << 30  # characters of text and bytes of binary parts
_MAX_INT_BITS = 332_193  # 10**100_000 < 2**332_193
_MAX_PLAIN_INT_DIGITS = 4300  # Python's own default limit (sys.get_int_max_str_digits)
_MAX_FRACTION_BITS = 4096  # the smaller of a Fraction's numerator and denominator
_MAX_DECIMAL_DIGITS = 100_000
_MAX_DECIMAL_EXPONENT = 100_000
_DECIMAL_TEXT_ROOM = 32  # what a Decimal's text holds besides its digits: sign, point, leading zeros, exponent
_MAX_SHARED_HASHES = 64  # keys of one set or dict that share a hash with another of its keys
_MAX_DIMENSION = 2**63  # numpy's own bound
_HASH_MODULUS = sys.hash_info.modulus  # 2**61 - 1 on 64-bit builds: an int hashes to itself modulo this


def _bad_constant(name: str) -> Any:
    raise CodecError(f"payload holds the bare JSON constant {name}; the codec tags non-finite floats")


def _plain_int_parser() -> Callable[[str], int] | None:
    """What parses the JSON text's ints: None (Python's own, the fast path) where Python's limit on
    decimal digits is in force and no looser than ours; a process may set it higher, or turn it off."""
    limit = getattr(sys, "get_int_max_str_digits", lambda: 0)()  # not in Pythons before 3.10.7
    return None if 0 < limit <= _MAX_PLAIN_INT_DIGITS else _parse_plain_int


def _parse_plain_int(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > _MAX_PLAIN_INT_DIGITS:
        raise CodecError(
            f"refused an int of {digits} decimal digits: ints written in decimal are capped at "
            f"{_MAX_PLAIN_INT_DIGITS} digits (larger ones travel in hex)"
        )
    return int(text)


# When decoding must stop (see `decoding_deadline`), looked at once every `_DEADLINE_STRIDE + 1` objects.
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("codeward_decoding_deadline", default=None)
_DEADLINE_STRIDE = 0x3FF

# Texts this long have their large base64 strings cut out before JSON parsing (see `_Decoder.cut_blobs`).
_CUT_AT = 1 << 20
_BLOB_KEY = '"b64":"'


class _Decoder:
    """One decoding pass: `hook` turns each tagged JSON object (innermost first) into its value."""

    def __init__(self, allow_pickle: bool, parts: Sequence[Any] | None = None) -> None:
        self.allow_pickle = allow_pickle
        self.blobs: list[str | None] = []
        self.marker = ""
        self.parts = list(parts) if parts is not None else None
        self.deadline = _DEADLINE.get()
        self.objects = 0

    def cut_blobs(self, text: str) -> str:
        """The text with each long ``"b64":"..."`` string replaced by a marker that `hook` swaps back.

        The JSON parser would copy those strings character by character; `str.find` and a slice copy
        them at memory speed. In valid JSON the key pattern cannot occur inside a string (its quotes
        would be escaped), and only runs with no backslash are cut, so each cut string is exactly
        the one JSON would have read. The marker is random for each pass, so no string in the payload
        can name a cut blob, and each blob is handed out once.
        """
        parts: list[str] = []
        at, find = 0, text.find
        start = find(_BLOB_KEY)
        while start >= 0:
            begin = start + len(_BLOB_KEY)
            end = find('"', begin)
            if end < 0:
                break
            if end - begin >= _SPLICE_AT and find("\\", begin, end) < 0:
                if not self.marker:
                    self.marker = f"\x00{os.urandom(8).hex()}:"
                parts += [text[at:begin], "\\u0000", self.marker[1:], str(len(self.blobs))]
                self.blobs.append(text[begin:end])
                at = end
            start = find(_BLOB_KEY, end)
        if not parts:
            return text
        parts.append(text[at:])
        return "".join(parts)

    def hook(self, obj: dict[str, Any]) -> Any:
        self.objects += 1
        if not self.objects & _DEADLINE_STRIDE and self.deadline is not None and time.monotonic() > self.deadline:
            raise CodecError("decoding the payload ran past the time limit of the code that sent it")
        if self.marker and "b64" in obj:
            self.restore_blob(obj)
        if TAG not in obj:
            return obj
        tag = obj[TAG]
        decode = _DECODERS.get(tag) if isinstance(tag, str) else None
        if decode is None:
            raise CodecError(f"payload holds an unknown tag {tag!r}")
        try:
            return decode(self, obj)
        except CodecError:
            raise
        except Exception as exc:
            raise CodecError(f"malformed {tag!r} value in payload: {type(exc).__name__}: {exc}") from None

    def restore_blob(self, obj: dict[str, Any]) -> None:
        value = obj["b64"]
        if type(value) is not str or not value.startswith(self.marker):
            return
        index = int(value[len(self.marker) :])
        blob = self.blobs[index]
        if blob is None:
            raise CodecError("payload uses one binary part twice")
        self.blobs[index] = None
        obj["b64"] = blob

    def part(self, obj: dict[str, Any]) -> Any:
        """A buffer that came beside the text as raw bytes, handed out once."""
        index = obj["i"]
        if self.parts is None or type(index) is not int or not 0 <= index < len(self.parts):
            raise CodecError(f"payload refers to binary part {index!r}, which did not come with it")
        part = self.parts[index]
        if part is None:
            raise CodecError("payload uses one binary part twice")
        self.parts[index] = None
        return part

    def unpickle(self, obj: dict[str, Any]) -> Any:
        if not self.allow_pickle:
            raise CodecError(
                "payload holds a pickled value; refused because allow_pickle is False "
                "(never pass allow_pickle=True for data that came out of a sandbox)"
            )
        return pickle.loads(_unb64(obj["b64"]))


_STRICT_BASE64 = {"strict_mode": True} if sys.version_info >= (3, 11) else {}


def _unb64(text: Any) -> bytes:
    if isinstance(text, (bytes, memoryview)):  # a part that came beside the text (see `_Decoder.part`)
        return text  # type: ignore[return-value]
    if not isinstance(text, str):
        raise CodecError("binary payload is not a base64 string")
    return binascii.a2b_base64(text, **_STRICT_BASE64)


def _dec_int(x: Any) -> int:
    if type(x) is int:
        return x
    if isinstance(x, dict) and x.get(TAG) == "int":
        return _dec_big_int(x)
    raise CodecError(f"expected an int, got {type(x).__name__}")


def _dec_big_int(obj: dict[str, Any]) -> int:
    text = obj["hex"]
    if not isinstance(text, str):
        raise CodecError("big int is not a hex string")
    value = int(text, 16)
    if value.bit_length() > _MAX_INT_BITS:
        raise CodecError(
            f"refused an int of {value.bit_length()} bits: ints are capped at {_MAX_INT_BITS} bits "
            "(100,000 decimal digits)"
        )
    return value


def _dec_float(x: Any) -> float:
    if type(x) is float:
        return x
    if type(x) is int:
        return float(x)
    if isinstance(x, dict) and x.get(TAG) == "float":
        return _dec_special_float(x)
    raise CodecError(f"expected a float, got {type(x).__name__}")


def _dec_special_float(obj: dict[str, Any]) -> float:
    if obj["v"] not in ("nan", "inf", "-inf"):
        raise CodecError(f"unknown special float {obj['v']!r}")
    return float(obj["v"])


def _dec_list(x: Any) -> list[Any]:
    if type(x) is not list:
        raise CodecError(f"expected a list, got {type(x).__name__}")
    return x


def _dec_str(x: Any) -> str:
    if type(x) is not str:
        raise CodecError(f"expected a string, got {type(x).__name__}")
    return x


def _dec_strings(x: Any, *, missing: bool = False) -> list[str | None]:
    """A list of strings (and None where ``missing``), checked at C speed."""
    if not set(map(type, _dec_list(x))) <= ({str, type(None)} if missing else {str}):
        raise CodecError("expected a list of strings")
    return x  # type: ignore[no-any-return]


def _dec_dict(x: Any) -> dict[Any, Any]:
    if type(x) is not dict:
        raise CodecError(f"expected a mapping, got {type(x).__name__}")
    return x


def _dec_keys(kind: str, keys: list[Any]) -> list[Any]:
    """The keys of a set or dict, refused when many of them share a hash.

    Each key that shares a hash costs a comparison with every other one that does as it goes into
    the set or dict, so that many such keys take time quadratic in their count. Counting distinct
    hashes cannot be flooded in turn: hashes are 64-bit ints, and an int's hash is its remainder
    modulo 2**61 - 1, which at most four 64-bit ints of one sign share.
    """
    if len(keys) <= _MAX_SHARED_HASHES or _hashes_apart(keys):
        return keys
    shared = len(keys) - len(set(map(hash, keys)))
    if shared > _MAX_SHARED_HASHES:
        raise CodecError(
            f"refused a {kind} of {len(keys)} keys, {shared} of which share a hash with another: at most "
            f"{_MAX_SHARED_HASHES} may (keys with one hash make building it take time quadratic in their count)"
        )
    return keys


def _hashes_apart(keys: list[Any]) -> bool:
    """Whether the keys cannot share hashes (but for a pair or so), which is cheaper to know than to count:
    ints within 2**61 - 1 of zero hash to themselves (-1 as -2), and strs hash under a key random to each
    process (and under one that PYTHONHASHSEED fixes, many strs with one 64-bit hash are out of reach)."""
    kinds = set(map(type, keys))
    return kinds == {str} or (kinds == {int} and min(keys) > -_HASH_MODULUS and max(keys) < _HASH_MODULUS)


def _dec_fraction(obj: dict[str, Any]) -> fractions.Fraction:
    """A Fraction, refused when normalizing it would take the gcd of two large numbers."""
    numerator, denominator = (_dec_int(p) for p in _dec_list(obj["v"]))
    if min(numerator.bit_length(), denominator.bit_length()) > _MAX_FRACTION_BITS:
        raise CodecError(
            f"refused a Fraction whose numerator and denominator both have more than {_MAX_FRACTION_BITS} bits "
            "(normalizing it would take their gcd, whose time grows with the product of their sizes)"
        )
    return fractions.Fraction(numerator, denominator)


def _dec_decimal(obj: dict[str, Any]) -> Decimal:
    """A Decimal within the digits and exponent that keep its integer value and its text bounded."""
    text = _dec_str(obj["v"])
    if len(text) > _MAX_DECIMAL_DIGITS + _DECIMAL_TEXT_ROOM:
        raise CodecError(
            f"refused a Decimal of {len(text)} characters: Decimals are capped at {_MAX_DECIMAL_DIGITS} digits"
        )
    value = Decimal(text)
    _, digits, exponent = value.as_tuple()
    if len(digits) > _MAX_DECIMAL_DIGITS or (type(exponent) is int and abs(exponent) > _MAX_DECIMAL_EXPONENT):
        raise CodecError(
            f"refused a Decimal of {len(digits)} digits and exponent {exponent}: Decimals are capped at "
            f"{_MAX_DECIMAL_DIGITS} digits and exponents within +-{_MAX_DECIMAL_EXPONENT}"
        )
    return value


def _dec_td(x: Any) -> _dt.timedelta:
    days, seconds, micros = (_dec_int(p) for p in _dec_list(x))
    return _dt.timedelta(days=days, seconds=seconds, microseconds=micros)


def _dec_tz(x: Any) -> _dt.tzinfo | None:
    if x is None:
        return None
    if "key" in x:
        if x.get("lib") == "pytz" and _importable("pytz"):
            zone: _dt.tzinfo = sys.modules["pytz"].timezone(
                _dec_str(x["key"])
            )  # pytz knows its keys; unknown ones raise
            return zone
        try:  # zoneinfo validates keys: normalized relative paths only
            return zoneinfo.ZoneInfo(_dec_str(x["key"]))
        except zoneinfo.ZoneInfoNotFoundError:
            raise CodecError(f"time zone {x['key']!r} is unknown here (no tz database? install tzdata)") from None
    offset = _dec_td(x["offset"])
    return _dt.timezone(offset) if x.get("name") is None else _dt.timezone(offset, _dec_str(x["name"]))


def _dec_with_tz(parse: Callable[[str], Any]) -> Callable[[_Decoder, dict[str, Any]], Any]:
    def decode(d: _Decoder, obj: dict[str, Any]) -> Any:
        return parse(_dec_str(obj["v"])).replace(tzinfo=_dec_tz(obj.get("tz")), fold=obj.get("fold", 0))

    return decode


def _dec_pairs(d: _Decoder, obj: dict[str, Any]) -> dict[Any, Any]:
    """A dict sent as [key, value] pairs, checked at C speed: its keys may be anything hashable."""
    pairs = _dec_list(obj["v"])
    if pairs and (set(map(type, pairs)) != {list} or set(map(len, pairs)) != {2}):
        raise CodecError("dict entry is not a [key, value] pair")
    _dec_keys("dict", list(map(operator.itemgetter(0), pairs)))
    return dict(pairs)


_PATH_CLASSES = {cls.__name__: cls for cls in _ENCODERS if isinstance(cls, type) and issubclass(cls, pathlib.PurePath)}


def _dec_path(d: _Decoder, obj: dict[str, Any]) -> pathlib.PurePath:
    name = obj["cls"]
    cls = _PATH_CLASSES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise CodecError(f"unknown path class {name!r}")
    try:
        return cls(_dec_str(obj["v"]))
    except NotImplementedError:
        pure = pathlib.PureWindowsPath if "Windows" in name else pathlib.PurePosixPath
        warnings.warn(
            f"a {name} cannot exist on this system; decoded it as {pure.__name__}", CodecWarning, stacklevel=2
        )
        return pure(_dec_str(obj["v"]))


def _registered(ref: Any, kind: str) -> type | None:
    """The registered class a payload names, when it is of the tag's kind (see `register_class`);
    inside a sandbox, also a class loaded there (see `restore_loaded_classes`)."""
    cls = _REGISTERED.get(ref) if isinstance(ref, str) else None
    if cls is None and _LOADED_CLASSES_TOO:
        cls = _loaded_class(ref)
    return cls if cls is not None and _restorable_kind(cls) == kind else None


def _loaded_class(ref: Any) -> type | None:
    """Find a class by ``module:qualname`` among loaded modules only; never import."""
    if not isinstance(ref, str) or ":" not in ref:
        return None
    module_name, qualname = ref.split(":", 1)
    obj: Any = sys.modules.get(module_name)
    for part in qualname.split("."):
        # The namespace is read past any __getattribute__/__getattr__ hook: a module may import on
        # attribute access (module __getattr__, importlib's LazyLoader), and no descriptor runs.
        try:
            namespace = object.__getattribute__(obj, "__dict__")
        except AttributeError:
            return None
        obj = namespace.get(part) if isinstance(namespace, (dict, types.MappingProxyType)) else None
    return obj if isinstance(obj, type) else None


def _decoded_plainer(ref: Any, cls: type | None, kind: str, as_what: str) -> None:
    """Warn that a class-named value arrived plain, and say how to have it restored."""
    if cls is None:
        why = "is not registered for restoring: a payload names its class, so only registered classes are made"
        how = "Call codeward.executors.codec.register_class(<that class>) before decoding to have it restored"
    else:
        why = "differs from the registered class: other fields, or a value that is none of its members"
        how = "Check that the sender and the receiver define the class alike"
    warnings.warn(f"{kind} {ref!r:.200} {why}; decoded it as {as_what}. {how}.", CodecWarning, stacklevel=4)


_FLAG_MISSING = enum.Flag._missing_.__func__  # type: ignore[attr-defined]


def _dec_enum(d: _Decoder, obj: dict[str, Any]) -> Any:
    cls, value = _registered(obj["cls"], "enum"), obj["v"]
    member = _enum_member(cls, value, obj.get("name")) if cls is not None else None
    if member is not None:
        return member
    _decoded_plainer(obj["cls"], cls, "enum class", "the member's plain value")
    return value


def _enum_member(cls: Any, value: Any, name: Any) -> Any:
    """The member of a registered enum a payload stands for, or None.

    A flag is found by its value alone: one of its members, or a combination of their bits (made
    only by the standard library's own ``_missing_``); a value with any other bit is none of them.
    """
    try:
        member = cls._value2member_map_.get(value)
    except TypeError:  # an unhashable value
        member = None
    if member is not None:
        return member
    if issubclass(cls, enum.Flag):
        standard = getattr(cls._missing_, "__func__", None) is _FLAG_MISSING
        return cls(value) if standard and _only_member_bits(cls, value) else None
    return cls.__members__.get(name) if isinstance(name, str) else None


def _only_member_bits(cls: Any, value: Any) -> bool:
    """Whether `value` is a non-negative int whose bits all belong to the flag class's members."""
    if type(value) is not int or value < 0:
        return False
    known = 0
    for member in cls.__members__.values():
        if type(member._value_) is int:
            known |= member._value_
    return value & ~known == 0


def _dec_dataclass(d: _Decoder, obj: dict[str, Any]) -> Any:
    fields = obj["f"]
    if not isinstance(fields, dict):
        raise CodecError("dataclass fields are not a mapping")
    cls = _registered(obj["cls"], "dc")
    if cls is not None and {f.name for f in dataclasses.fields(cls)} == set(fields):
        # Restored the way pickle restores objects: no __init__/__post_init__ code runs.
        instance: Any = object.__new__(cls)
        for name, value in fields.items():
            object.__setattr__(instance, name, value)
        return instance
    _decoded_plainer(obj["cls"], cls, "dataclass", "a dict of its fields")
    return fields


def _dec_namedtuple(d: _Decoder, obj: dict[str, Any]) -> Any:
    items = _dec_list(obj["v"])
    cls = _registered(obj["cls"], "nt")
    if cls is not None and len(cls._fields) == len(items):  # type: ignore[attr-defined]
        return tuple.__new__(cls, items)  # bypasses the class's own __new__, like pickle's copyreg path
    _decoded_plainer(obj["cls"], cls, "namedtuple", "a plain tuple")
    return tuple(items)


def _import(name: str) -> Any:
    """Import a fixed third-party module a payload's tag needs (never a name from the payload)."""
    if not _importable(name):
        raise CodecError(f"payload holds a {name} value, but {name} cannot be imported here")
    return sys.modules[name]


def _importable(name: str) -> bool:
    try:
        __import__(name)
    except ImportError:
        return False
    return True


def _dec_shape(x: Any) -> tuple[int, ...]:
    """A shape within numpy's own bounds, so that the product of its dimensions is cheap to take."""
    shape = tuple(_dec_int(n) for n in _dec_list(x))
    if len(shape) > 64 or not all(0 <= n < _MAX_DIMENSION for n in shape):
        raise CodecError("invalid array shape: at most 64 dimensions, each from 0 to 2**63 - 1")
    return shape


def _dec_dtype(np: Any, x: Any) -> Any:
    if isinstance(x, str):
        return np.dtype(x)
    if isinstance(x, dict) and "sub" in x:
        return np.dtype((_dec_dtype(np, x["sub"]), _dec_shape(x["shape"])))
    if isinstance(x, dict) and "names" in x:
        spec = {key: x[key] for key in ("names", "offsets", "titles", "itemsize")}
        spec["formats"] = [_dec_dtype(np, f) for f in _dec_list(x["formats"])]
        return np.dtype(spec, align=bool(x.get("aligned")))
    raise CodecError(f"invalid numpy dtype {x!r}")


_MAX_EMPTY_ITEMS = 1 << 16


def _dec_ndarray(d: _Decoder, obj: dict[str, Any]) -> Any:
    np = _import("numpy")
    shape = _dec_shape(obj["shape"])
    count = math.prod(shape)
    if obj.get("form") == "codes":
        if obj["dtype"] != "|O":
            raise CodecError(f"coded arrays are object arrays, not {obj['dtype']!r}")
        a = _dec_coded_objects(np, obj, count).reshape(shape)
    elif "form" in obj:
        raise CodecError(f"unknown array form {obj['form']!r}")
    elif "items" in obj:
        items = _dec_list(obj["items"])
        if len(items) != count:
            raise CodecError(f"array of shape {shape} needs {count} items, payload has {len(items)}")
        if obj["dtype"] == "T":
            a = np.array(_dec_strings(items), dtype=np.dtypes.StringDType())
        elif obj["dtype"] == "|O":
            a = np.empty(count, dtype=object)
            if set(map(type, items)) <= _JSON_SCALARS:  # nothing numpy would unpack as a sequence
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
        if dt.itemsize == 0 and count > _MAX_EMPTY_ITEMS:  # costs no bytes, yet anything iterating it would hang
            raise CodecError(f"refused {count} elements of the zero-size numpy dtype {dt}")
        wire = dt if obj.get("wire") is None else np.dtype(_dec_str(obj["wire"]))
        if wire != dt and (wire.kind not in "iu" or dt.kind not in "iu" or not np.can_cast(wire, dt, "safe")):
            raise CodecError(f"integers sent as {wire} cannot widen exactly to {dt}")
        data = _unb64(obj["b64"])
        if len(data) != count * wire.itemsize:
            raise CodecError(
                f"array of shape {shape} and dtype {wire} needs {count * wire.itemsize} bytes, payload has {len(data)}"
            )
        if not data:
            flat = np.zeros(count, dtype=dt)
        elif wire != dt:
            flat = np.frombuffer(data, dtype=wire).astype(dt)
        else:
            flat = np.frombuffer(bytearray(data), dtype=dt)
        a = flat.reshape(shape, order="F" if obj.get("order") == "F" else "C")
    return a[()] if obj[TAG] == "npscalar" else a


def _dec_pdarray(pd: Any, a: Any) -> Any:
    """The values inside a Series or Index: a numpy array or a pandas extension array."""
    if type(a) is not sys.modules["numpy"].ndarray and not isinstance(a, pd.api.extensions.ExtensionArray):
        raise CodecError(f"expected array values, got {type(a).__name__}")
    return a


def _dec_pdcat(d: _Decoder, obj: dict[str, Any]) -> Any:
    pd = _import("pandas")
    dtype = pd.CategoricalDtype(obj["categories"], ordered=bool(obj["ordered"]))
    return pd.Categorical.from_codes(obj["codes"], dtype=dtype)


def _dec_pddttz(d: _Decoder, obj: dict[str, Any]) -> Any:
    pd = _import("pandas")
    return pd.array(obj["v"]).tz_localize("UTC").tz_convert(_dec_tz(obj["tz"]))


def _dec_pdmask(d: _Decoder, obj: dict[str, Any]) -> Any:
    pd = _import("pandas")
    data, mask = obj["data"], obj["mask"]
    classes = {"i": pd.arrays.IntegerArray, "u": pd.arrays.IntegerArray, "f": pd.arrays.FloatingArray}
    classes["b"] = pd.arrays.BooleanArray
    kind = classes.get(getattr(getattr(data, "dtype", None), "kind", ""))
    if kind is None:
        raise CodecError("nullable array data is not a numeric or bool numpy array")
    return kind(data, mask.astype(bool))


def _dec_pdstr(d: _Decoder, obj: dict[str, Any]) -> Any:
    pd = _import("pandas")
    storage = obj["storage"] if obj["storage"] == "pyarrow" and _importable("pyarrow") else "python"
    na = pd.NA if obj["na"] == "NA" else float("nan")
    try:
        dtype = pd.StringDtype(storage, na_value=na)
    except TypeError:  # pandas before 2.3 has no na_value
        dtype = pd.StringDtype(storage)
    form = obj.get("form")
    if form is None:
        return pd.array(_dec_strings(obj["v"], missing=True), dtype=dtype)
    np = _import("numpy")
    if form == "codes":
        if storage == "pyarrow":
            return pd.array(_dec_coded_arrow(np, obj), dtype=dtype)
        return pd.array(_dec_coded_objects(np, obj, None), dtype=dtype)
    if form == "utf8":
        return pd.array(_dec_utf8_column(np, obj, arrow=storage == "pyarrow"), dtype=dtype)
    raise CodecError(f"unknown string column form {form!r}")


def _dec_codes(np: Any, obj: dict[str, Any], count: int | None) -> tuple[Any, list[str | None]]:
    """Codes into distinct strings (-1 for missing), checked: every code points at one of them."""
    codes, uniques = obj["codes"], _dec_strings(obj["uniques"])
    if type(codes) is not np.ndarray or codes.ndim != 1 or codes.dtype.kind != "i":
        raise CodecError("string codes are not a 1-D integer array")
    if count is not None and len(codes) != count:
        raise CodecError(f"an array of {count} items has {len(codes)} codes")
    if len(codes) and (int(codes.min()) < -1 or int(codes.max()) >= len(uniques)):
        raise CodecError(f"string codes outside -1..{len(uniques) - 1}")
    return codes, uniques


def _dec_coded_objects(np: Any, obj: dict[str, Any], count: int | None) -> Any:
    """An object array of the coded strings (None where missing): one reference per item, no new text."""
    codes, uniques = _dec_codes(np, obj, count)
    table = np.empty(len(uniques) + 1, dtype=object)
    table[: len(uniques)] = uniques
    return table.take(codes)  # -1 takes the last slot: None


def _dec_coded_arrow(np: Any, obj: dict[str, Any]) -> Any:
    """An arrow string array of the coded strings, refused when its text would outgrow the payload."""
    pa = sys.modules["pyarrow"]
    codes, uniques = _dec_codes(np, obj, None)
    dictionary = pa.array(uniques, type=pa.large_string())
    lengths = np.diff(np.frombuffer(dictionary.buffers()[1], dtype=np.int64)[: len(uniques) + 1])
    valid = codes[codes >= 0]
    text = int(np.bincount(valid, minlength=len(uniques)) @ lengths) if len(valid) else 0
    held = codes.nbytes + int(lengths.sum())
    if text > _MAX_EXPANSION * held + _EXPANSION_SLACK:
        raise CodecError(f"string codes would expand {held} bytes to {text} bytes of text")
    indices = pa.array(codes, mask=codes < 0)
    return pa.DictionaryArray.from_arrays(indices, dictionary).cast(pa.large_string())


def _dec_utf8_column(np: Any, obj: dict[str, Any], *, arrow: bool) -> Any:
    """Strings cut from one UTF-8 buffer by their lengths in bytes, checked before anything is cut."""
    lengths, data, missing = obj["lengths"], _unb64(obj["b64"]), obj["missing"]
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


def _dec_index(d: _Decoder, obj: dict[str, Any]) -> Any:
    pd = _import("pandas")
    values, name, freq = _dec_pdarray(pd, obj["v"]), obj["name"], obj.get("freq")
    if freq is not None and values.dtype.kind in "mM":
        cls = pd.DatetimeIndex if values.dtype.kind == "M" else pd.TimedeltaIndex
        for spelling in _freq_spellings(_dec_str(freq)):
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


def _dec_series(d: _Decoder, obj: dict[str, Any]) -> Any:
    pd = _import("pandas")
    values = _dec_pdarray(pd, obj["data"])
    return pd.Series(values, index=_dec_pdindex(pd, obj["index"]), dtype=values.dtype, name=obj["name"], copy=False)


def _dec_pdindex(pd: Any, x: Any) -> Any:
    if not isinstance(x, pd.Index):
        raise CodecError(f"expected a pandas Index, got {type(x).__name__}")
    return x


def _dec_df(d: _Decoder, obj: dict[str, Any]) -> Any:
    pd = _import("pandas")
    index, columns = _dec_pdindex(pd, obj["index"]), _dec_pdindex(pd, obj["columns"])
    arrays = [_dec_pdarray(pd, a) for a in _dec_list(obj["data"])]
    if len(arrays) != len(columns):
        raise CodecError(f"DataFrame has {len(columns)} column names but {len(arrays)} columns")
    # Series with an explicit dtype: pandas would otherwise re-infer object columns (e.g. as str).
    df = pd.DataFrame(
        {i: pd.Series(a, index=index, dtype=a.dtype, copy=False) for i, a in enumerate(arrays)}, index=index
    )
    df.columns = columns
    return df


def _dec_image(d: _Decoder, obj: dict[str, Any]) -> Any:
    image_module = _import("PIL.Image")
    mode = _dec_str(obj["mode"])
    width, height = _dec_shape(obj["size"])
    data = _unb64(obj["b64"])
    # Check the buffer against the size before PIL allocates anything.
    row = (width + 7) // 8 if mode == "1" else width * len(image_module.new(mode, (1, 1)).tobytes())
    if len(data) != row * height:
        raise CodecError(f"a {mode} image of {width}x{height} needs {row * height} bytes, payload has {len(data)}")
    image = image_module.frombytes(mode, (width, height), data) if data else image_module.new(mode, (width, height))
    if obj.get("palette") is not None:
        palette_mode, palette = _dec_list(obj["palette"])
        image.putpalette(palette, rawmode=_dec_str(palette_mode))
    if obj.get("info"):
        image.info.update(obj["info"])
    return image


def _dec_pdscalar(d: _Decoder, obj: dict[str, Any]) -> Any:
    pd = _import("pandas")
    if obj[TAG] == "pdnull":
        return pd.NaT if obj["v"] == "NaT" else pd.NA
    if obj[TAG] == "pdtd":
        return pd.Timedelta(obj["v"])
    stamp = pd.Timestamp(obj["v"])
    tz = _dec_tz(obj.get("tz"))
    return stamp if tz is None else stamp.tz_localize("UTC").tz_convert(tz)


_DECODERS: dict[str, Callable[[_Decoder, dict[str, Any]], Any]] = {
    "int": lambda d, o: _dec_big_int(o),
    "float": lambda d, o: _dec_special_float(o),
    "dict": _dec_pairs,
    "tuple": lambda d, o: tuple(_dec_list(o["v"])),
    "set": lambda d, o: set(_dec_keys("set", _dec_list(o["v"]))),
    "frozenset": lambda d, o: frozenset(_dec_keys("frozenset", _dec_list(o["v"]))),
    "bytes": lambda d, o: bytes(_unb64(o["b64"])),
    "part": _Decoder.part,
    "bytearray": lambda d, o: bytearray(_unb64(o["b64"])),
    "complex": lambda d, o: complex(*(_dec_float(p) for p in _dec_list(o["v"])[:2])),
    "decimal": lambda d, o: _dec_decimal(o),
    "fraction": lambda d, o: _dec_fraction(o),
    "uuid": lambda d, o: uuid.UUID(_dec_str(o["v"])),
    "range": lambda d, o: range(*(_dec_int(p) for p in _dec_list(o["v"])[:3])),
    "datetime": _dec_with_tz(_dt.datetime.fromisoformat),
    "time": _dec_with_tz(_dt.time.fromisoformat),
    "date": lambda d, o: _dt.date.fromisoformat(_dec_str(o["v"])),
    "timedelta": lambda d, o: _dec_td(o["v"]),
    "tz": lambda d, o: _dec_tz(o["tz"]),
    "path": _dec_path,
    "enum": _dec_enum,
    "dc": _dec_dataclass,
    "nt": _dec_namedtuple,
    "odict": lambda d, o: collections.OrderedDict(_dec_dict(o["v"])),
    "counter": lambda d, o: collections.Counter(_dec_dict(o["v"])),
    "deque": lambda d, o: collections.deque(_dec_list(o["v"]), maxlen=o["maxlen"]),
    "pickle": lambda d, o: d.unpickle(o),
    "nd": _dec_ndarray,
    "npscalar": _dec_ndarray,
    "npdtype": lambda d, o: _dec_dtype(_import("numpy"), o["v"]),
    "pdcat": _dec_pdcat,
    "pddttz": _dec_pddttz,
    "pdmask": _dec_pdmask,
    "pdstr": _dec_pdstr,
    "pdindex": _dec_index,
    "pdrange": lambda d, o: _import("pandas").RangeIndex(*(_dec_int(p) for p in _dec_list(o["v"])[:3]), name=o["name"]),
    "pdmulti": lambda d, o: _import("pandas").MultiIndex(levels=o["levels"], codes=o["codes"], names=o["names"]),
    "series": _dec_series,
    "df": _dec_df,
    "pdts": _dec_pdscalar,
    "pdtd": _dec_pdscalar,
    "pdnull": _dec_pdscalar,
    "image": _dec_image,
}
