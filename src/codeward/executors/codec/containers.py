"""Containers: list, tuple, dict, set, frozenset, OrderedDict, Counter, deque, range, and pathlib paths.

Lists and dicts with str keys stay plain JSON when their items do (see `wire.is_plain`); a dict
with other keys travels as [key, value] pairs, and the keys of a set or dict are checked against
the bound on keys that share a hash before it is built.
"""

from __future__ import annotations

import collections
import operator
import pathlib
import warnings
from collections.abc import Callable
from typing import Any

from . import bounds
from .errors import CodecError, CodecWarning
from .wire import Decoder, Encoder, dec_int, dec_list, dec_str, enc_list, tag


def _enc_path(e: Encoder, v: pathlib.PurePath) -> Any:
    return tag("path", cls=type(v).__name__, v=str(v))


_PATH_CLASSES = {
    cls.__name__: cls
    for cls in (pathlib.PurePosixPath, pathlib.PureWindowsPath, pathlib.PosixPath, pathlib.WindowsPath)
}


def _dec_path(d: Decoder, obj: dict[str, Any]) -> pathlib.PurePath:
    name = obj["cls"]
    cls = _PATH_CLASSES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise CodecError(f"unknown path class {name!r}")
    try:
        return cls(dec_str(obj["v"]))
    except NotImplementedError:
        pure = pathlib.PureWindowsPath if "Windows" in name else pathlib.PurePosixPath
        warnings.warn(
            f"a {name} cannot exist on this system; decoded it as {pure.__name__}", CodecWarning, stacklevel=2
        )
        return pure(dec_str(obj["v"]))


def _dec_dict(x: Any) -> dict[Any, Any]:
    if type(x) is not dict:
        raise CodecError(f"expected a mapping, got {type(x).__name__}")
    return x


def _dec_pairs(d: Decoder, obj: dict[str, Any]) -> dict[Any, Any]:
    """A dict sent as [key, value] pairs, checked at C speed: its keys may be anything hashable."""
    pairs = dec_list(obj["v"])
    if pairs and (set(map(type, pairs)) != {list} or set(map(len, pairs)) != {2}):
        raise CodecError("dict entry is not a [key, value] pair")
    bounds.keys_within("dict", list(map(operator.itemgetter(0), pairs)))
    return dict(pairs)


ENCODERS: dict[type, Callable[[Encoder, Any], Any]] = {
    list: enc_list,
    dict: lambda e, v: e.items(v),
    tuple: lambda e, v: tag("tuple", v=enc_list(e, v)),
    set: lambda e, v: tag("set", v=enc_list(e, list(v), "{{item {}}}")),
    frozenset: lambda e, v: tag("frozenset", v=enc_list(e, list(v), "{{item {}}}")),
    range: lambda e, v: tag("range", v=[e.enc(v.start), e.enc(v.stop), e.enc(v.step)]),
    collections.OrderedDict: lambda e, v: tag("odict", v=e.items(v)),
    collections.Counter: lambda e, v: tag("counter", v=e.items(v)),
    collections.deque: lambda e, v: tag("deque", v=enc_list(e, list(v)), maxlen=v.maxlen),
    **dict.fromkeys(_PATH_CLASSES.values(), _enc_path),
}

DECODERS: dict[str, Callable[[Decoder, dict[str, Any]], Any]] = {
    "dict": _dec_pairs,
    "tuple": lambda d, o: tuple(dec_list(o["v"])),
    "set": lambda d, o: set(bounds.keys_within("set", dec_list(o["v"]))),
    "frozenset": lambda d, o: frozenset(bounds.keys_within("frozenset", dec_list(o["v"]))),
    "range": lambda d, o: range(*(dec_int(p) for p in dec_list(o["v"])[:3])),
    "path": _dec_path,
    "odict": lambda d, o: collections.OrderedDict(_dec_dict(o["v"])),
    "counter": lambda d, o: collections.Counter(_dec_dict(o["v"])),
    "deque": lambda d, o: collections.deque(dec_list(o["v"]), maxlen=o["maxlen"]),
}
