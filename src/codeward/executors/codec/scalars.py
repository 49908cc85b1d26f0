"""Numbers and binary data: ints, floats, complex numbers, Decimal, Fraction, bytes and bytearray, UUID.

str, bool, None, finite floats and the ints within `wire.INT_LIMIT` are plain JSON; larger ints
go in hex, which the encoder writes itself (ints are its hot path) and this module reads back.
"""

from __future__ import annotations

import fractions
import math
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from . import bounds
from .errors import CodecError
from .wire import TAG, Decoder, Encoder, dec_big_int, dec_int, dec_list, dec_str, tag, unb64


def _enc_float(e: Encoder, v: float) -> Any:
    return v if math.isfinite(v) else tag("float", v=repr(v))


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


def _dec_fraction(obj: dict[str, Any]) -> fractions.Fraction:
    numerator, denominator = (dec_int(p) for p in dec_list(obj["v"]))
    return bounds.fraction_within(numerator, denominator)


ENCODERS: dict[type, Callable[[Encoder, Any], Any]] = {
    float: _enc_float,
    complex: lambda e, v: tag("complex", v=[_enc_float(e, v.real), _enc_float(e, v.imag)]),
    Decimal: lambda e, v: tag("decimal", v=str(v)),
    fractions.Fraction: lambda e, v: tag("fraction", v=[e.enc(v.numerator), e.enc(v.denominator)]),
    bytes: lambda e, v: tag("bytes", b64=e.blob(v)),
    bytearray: lambda e, v: tag("bytearray", b64=e.blob(v)),
    uuid.UUID: lambda e, v: tag("uuid", v=str(v)),
}

DECODERS: dict[str, Callable[[Decoder, dict[str, Any]], Any]] = {
    "int": lambda d, o: dec_big_int(o),
    "float": lambda d, o: _dec_special_float(o),
    "complex": lambda d, o: complex(*(_dec_float(p) for p in dec_list(o["v"])[:2])),
    "decimal": lambda d, o: bounds.decimal_within(dec_str(o["v"])),
    "fraction": lambda d, o: _dec_fraction(o),
    "bytes": lambda d, o: bytes(unb64(o["b64"])),
    "bytearray": lambda d, o: bytearray(unb64(o["b64"])),
    "uuid": lambda d, o: uuid.UUID(dec_str(o["v"])),
}
