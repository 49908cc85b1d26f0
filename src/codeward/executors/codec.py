"""Typed JSON for values that cross a sandbox boundary, in both directions.

Variables go into a sandbox and final answers and tool results come out of it
through this one codec. JSON alone would lose types (tuple vs list, int keys,
nan, bytes...), so a value that JSON cannot hold exactly becomes a tagged object
``{"$": tag, ...}``; everything JSON holds exactly (str, bool, None, finite
floats, ints, lists, dicts with str keys) stays plain, so payloads stay compact.
Binary payloads (bytes, array buffers, image pixels) are base64 inside the JSON.

Security, because the host decodes what comes out of a sandbox:
- `loads` never unpickles unless ``allow_pickle=True`` (the host never passes it
  for sandbox output); pickle is only a host-to-sandbox opt-in for trusted setups.
- `loads` never imports a module named by a payload: dataclass and enum classes
  are looked up in ``sys.modules`` only, through plain ``__dict__`` lookups, and
  dataclass instances are restored without running ``__init__``.
- No payload decodes to more memory than a small multiple of its own size (no
  compression, buffer sizes checked against shapes before anything is allocated),
  and nesting too deep for the interpreter fails as `CodecError`.

This module's source is also executed as-is inside sandboxes where codeward is
not installed: it imports only the standard library at top level, and numpy,
pandas and PIL only when a value of theirs is met.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import enum
import fractions
import json
import math
import pathlib
import pickle
import sys
import types
import uuid
import warnings
import zoneinfo
from decimal import Decimal
from typing import Any, Callable

__all__ = [
    "CodecError",
    "CodecWarning",
    "decode_variables",
    "dumps",
    "encode_variables",
    "loads",
]

TAG = "$"
_PICKLE_HINT = (
    "convert it to a carried type, or, for a sandbox you trust, pass allow_pickle=True "
    "to send it pickled (host to sandbox only: the host never unpickles sandbox output)"
)
# Ints above this many bits travel as hex: every Python parses them, whatever its
# int-to-decimal-string digit limit (the minimum settable limit is 640 digits).
_BIG_INT_BITS = 2000


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


def dumps(value: Any, *, allow_pickle: bool = False) -> str:
    """Encode one value as JSON text; raise `CodecError` if it cannot be carried."""
    return _to_text(_Encoder(allow_pickle).run(value, "value"))


def loads(text: str, *, allow_pickle: bool = False) -> Any:
    """Decode JSON text made by `dumps`; pickled parts are refused unless ``allow_pickle``."""
    if not isinstance(text, (str, bytes, bytearray)):
        raise CodecError(f"loads expects JSON text, got {type(text)!r}")
    hook = _Decoder(allow_pickle).hook
    try:
        return json.loads(text, object_hook=hook, parse_constant=_bad_constant)
    except CodecError:
        raise
    except RecursionError:
        raise CodecError("payload is nested too deeply to decode") from None
    except (ValueError, TypeError) as exc:
        raise CodecError(f"payload is not valid codec JSON: {exc}") from None


def encode_variables(variables: dict[str, Any], *, allow_pickle: bool = False) -> str:
    """Encode a name -> value mapping; an error names the variable, its type and the opt-in."""
    if not isinstance(variables, dict):
        raise CodecError(f"variables must be a dict of name -> value, got {type(variables)!r}")
    encoder = _Encoder(allow_pickle)
    out = {}
    for name, value in variables.items():
        if type(name) is not str:
            raise CodecError(f"variable names must be str, got {name!r} ({type(name)!r})")
        out[name] = encoder.run(value, f"variable {name!r}")
    return _to_text(out if TAG not in out else _tag("dict", v=[[k, v] for k, v in out.items()]))


def decode_variables(text: str, *, allow_pickle: bool = False) -> dict[str, Any]:
    """Decode what `encode_variables` made, checking that it is a name -> value mapping."""
    variables = loads(text, allow_pickle=allow_pickle)
    if not isinstance(variables, dict) or not all(type(k) is str for k in variables):
        raise CodecError("payload does not hold a mapping of variable names to values")
    return variables


# ----------------------------------------------------------------------- encoding


def _to_text(tree: Any) -> str:
    # ensure_ascii keeps lone surrogates exact (as \\udxxx escapes) and the text pure ASCII.
    return json.dumps(tree, ensure_ascii=True, allow_nan=False, check_circular=False, separators=(",", ":"))


def _tag(tag: str, /, **fields: Any) -> dict[str, Any]:
    return {TAG: tag, **fields}


def _b64(data: bytes | bytearray | memoryview) -> str:
    return base64.b64encode(data).decode("ascii")


class _Encoder:
    """One encoding pass; holds the pickle opt-in and dispatches on exact types."""

    def __init__(self, allow_pickle: bool) -> None:
        self.allow_pickle = allow_pickle

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
            return _tag("pickle", b64=_b64(pickle.dumps(v, protocol=4)))
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
        plain = TAG not in mapping and all(type(k) is str for k in mapping)
        out: Any = {} if plain else []
        enc = self.enc
        for k, x in mapping.items():
            try:
                ex = enc(x)
                if plain:
                    out[k] = ex
                else:
                    out.append([self.key(k), ex])
            except _Refused as exc:
                exc.path.append(fmt.format(k))
                raise
        return out if plain else _tag("dict", v=out)

    def key(self, k: Any) -> Any:
        try:
            return self.enc(k)
        except _Refused as exc:
            exc.path.append(f"<key {k!r}>")
            raise


def _enc_int(e: _Encoder, v: int) -> Any:
    return v if v.bit_length() <= _BIG_INT_BITS else _tag("int", hex=hex(v))


def _enc_float(e: _Encoder, v: float) -> Any:
    return v if math.isfinite(v) else _tag("float", v=repr(v))


def _enc_tz(tz: Any) -> Any:
    """A time zone as JSON: fixed offsets (UTC included) and zoneinfo zones by key."""
    if tz is None:
        return None
    if type(tz) is _dt.timezone:
        offset, *name = tz.__getinitargs__()  # type: ignore[attr-defined]
        return {"offset": _td_parts(offset), "name": name[0] if name else None}
    if type(tz) is zoneinfo.ZoneInfo and tz.key is not None:
        return {"key": tz.key}
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
    int: _enc_int,
    float: _enc_float,
    list: lambda e, v: e.each(v),
    dict: lambda e, v: e.items(v),
    tuple: lambda e, v: _tag("tuple", v=e.each(v)),
    set: lambda e, v: _tag("set", v=e.each(v, "{{item {}}}")),
    frozenset: lambda e, v: _tag("frozenset", v=e.each(v, "{{item {}}}")),
    bytes: lambda e, v: _tag("bytes", b64=_b64(v)),
    bytearray: lambda e, v: _tag("bytearray", b64=_b64(v)),
    complex: lambda e, v: _tag("complex", v=[_enc_float(e, v.real), _enc_float(e, v.imag)]),
    Decimal: lambda e, v: _tag("decimal", v=str(v)),
    fractions.Fraction: lambda e, v: _tag("fraction", v=[_enc_int(e, v.numerator), _enc_int(e, v.denominator)]),
    uuid.UUID: lambda e, v: _tag("uuid", v=str(v)),
    range: lambda e, v: _tag("range", v=[_enc_int(e, v.start), _enc_int(e, v.stop), _enc_int(e, v.step)]),
    _dt.datetime: _enc_with_tz("datetime"),
    _dt.time: _enc_with_tz("time"),
    _dt.date: lambda e, v: _tag("date", v=v.isoformat()),
    _dt.timedelta: lambda e, v: _tag("timedelta", v=_td_parts(v)),
    _dt.timezone: _enc_tz_value,
    zoneinfo.ZoneInfo: _enc_tz_value,
    **{cls: _enc_path for cls in (pathlib.PurePath, pathlib.PurePosixPath, pathlib.PureWindowsPath,
                                  pathlib.Path, pathlib.PosixPath, pathlib.WindowsPath)},
}


def _class_ref(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


# Encoders for third-party types, found by the value's module name so that this
# module never imports numpy, pandas or PIL just to check a value's type.
_LAZY_ENCODERS: list[tuple[str, Callable[[_Encoder, Any], Any]]] = []


# ----------------------------------------------------------------------- decoding


def _bad_constant(name: str) -> Any:
    raise CodecError(f"payload holds the bare JSON constant {name}; the codec tags non-finite floats")


def _resolve_class(ref: Any) -> type | None:
    """Find a class by ``module:qualname`` among loaded modules only; never import."""
    if not isinstance(ref, str) or ":" not in ref:
        return None
    module_name, qualname = ref.split(":", 1)
    obj: Any = sys.modules.get(module_name)
    for part in qualname.split("."):
        # vars() lookups only: no module __getattr__ (which may import) and no descriptors run.
        obj = vars(obj).get(part) if isinstance(obj, (types.ModuleType, type)) else None
    return obj if isinstance(obj, type) else None


class _Decoder:
    """One decoding pass: `hook` turns each tagged JSON object (innermost first) into its value."""

    def __init__(self, allow_pickle: bool) -> None:
        self.allow_pickle = allow_pickle

    def hook(self, obj: dict[str, Any]) -> Any:
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

    def unpickle(self, obj: dict[str, Any]) -> Any:
        if not self.allow_pickle:
            raise CodecError(
                "payload holds a pickled value; refused because allow_pickle is False "
                "(never pass allow_pickle=True for data that came out of a sandbox)"
            )
        return pickle.loads(_unb64(obj["b64"]))


def _unb64(text: Any) -> bytes:
    if not isinstance(text, str):
        raise CodecError("binary payload is not a base64 string")
    return base64.b64decode(text, validate=True)


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
    return int(text, 16)


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


def _dec_td(x: Any) -> _dt.timedelta:
    days, seconds, micros = (_dec_int(p) for p in _dec_list(x))
    return _dt.timedelta(days=days, seconds=seconds, microseconds=micros)


def _dec_tz(x: Any) -> _dt.tzinfo | None:
    if x is None:
        return None
    if "key" in x:
        # Zone keys are validated by zoneinfo (normalized relative paths only).
        return zoneinfo.ZoneInfo(_dec_str(x["key"]))
    offset = _dec_td(x["offset"])
    return _dt.timezone(offset) if x.get("name") is None else _dt.timezone(offset, _dec_str(x["name"]))


def _dec_with_tz(parse: Callable[[str], Any]) -> Callable[[_Decoder, dict[str, Any]], Any]:
    def decode(d: _Decoder, obj: dict[str, Any]) -> Any:
        return parse(_dec_str(obj["v"])).replace(tzinfo=_dec_tz(obj.get("tz")), fold=obj.get("fold", 0))

    return decode


def _dec_pairs(d: _Decoder, obj: dict[str, Any]) -> dict[Any, Any]:
    return dict(_dec_pair(p) for p in _dec_list(obj["v"]))


def _dec_pair(p: Any) -> tuple[Any, Any]:
    if type(p) is not list or len(p) != 2:
        raise CodecError("dict entry is not a [key, value] pair")
    return p[0], p[1]


_PATH_CLASSES = {cls.__name__: cls for cls in (pathlib.PurePath, pathlib.PurePosixPath, pathlib.PureWindowsPath,
                                               pathlib.Path, pathlib.PosixPath, pathlib.WindowsPath)}


def _dec_path(d: _Decoder, obj: dict[str, Any]) -> pathlib.PurePath:
    name = obj["cls"]
    cls = _PATH_CLASSES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise CodecError(f"unknown path class {name!r}")
    try:
        return cls(_dec_str(obj["v"]))
    except NotImplementedError:
        pure = pathlib.PureWindowsPath if "Windows" in name else pathlib.PurePosixPath
        warnings.warn(f"a {name} cannot exist on this system; decoded it as {pure.__name__}", CodecWarning, stacklevel=2)
        return pure(_dec_str(obj["v"]))


def _dec_enum(d: _Decoder, obj: dict[str, Any]) -> Any:
    cls, value, name = _resolve_class(obj["cls"]), obj["v"], obj.get("name")
    if cls is not None and issubclass(cls, enum.Enum):
        try:
            member = cls._value2member_map_.get(value)
        except TypeError:  # an unhashable value
            member = None
        if member is None and isinstance(name, str):
            member = cls.__members__.get(name)
        if member is None and issubclass(cls, enum.Flag):
            member = cls(value)
        if member is not None:
            return member
    warnings.warn(
        f"enum class {obj['cls']!r} is not loaded here (the codec never imports modules named by a payload); "
        "decoded the member as its plain value",
        CodecWarning,
        stacklevel=2,
    )
    return value


def _dec_dataclass(d: _Decoder, obj: dict[str, Any]) -> Any:
    fields = obj["f"]
    if not isinstance(fields, dict):
        raise CodecError("dataclass fields are not a mapping")
    cls = _resolve_class(obj["cls"])
    if (
        cls is not None
        and dataclasses.is_dataclass(cls)
        and cls.__new__ is object.__new__
        and {f.name for f in dataclasses.fields(cls)} == set(fields)
    ):
        # Restored the way pickle restores objects: no __init__/__post_init__ code runs.
        instance = object.__new__(cls)
        for name, value in fields.items():
            object.__setattr__(instance, name, value)
        return instance
    warnings.warn(
        f"dataclass {obj['cls']!r} is not loaded here, or its fields differ (the codec never imports modules "
        "named by a payload); decoded the instance as a dict of its fields",
        CodecWarning,
        stacklevel=2,
    )
    return fields


_DECODERS: dict[str, Callable[[_Decoder, dict[str, Any]], Any]] = {
    "int": lambda d, o: _dec_big_int(o),
    "float": lambda d, o: _dec_special_float(o),
    "dict": _dec_pairs,
    "tuple": lambda d, o: tuple(_dec_list(o["v"])),
    "set": lambda d, o: set(_dec_list(o["v"])),
    "frozenset": lambda d, o: frozenset(_dec_list(o["v"])),
    "bytes": lambda d, o: _unb64(o["b64"]),
    "bytearray": lambda d, o: bytearray(_unb64(o["b64"])),
    "complex": lambda d, o: complex(*(_dec_float(p) for p in _dec_list(o["v"])[:2])),
    "decimal": lambda d, o: Decimal(_dec_str(o["v"])),
    "fraction": lambda d, o: fractions.Fraction(*(_dec_int(p) for p in _dec_list(o["v"])[:2])),
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
    "pickle": lambda d, o: d.unpickle(o),
}
