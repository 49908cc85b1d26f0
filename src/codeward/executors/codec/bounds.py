"""The bounds on decoding, so that it takes time linear in the payload however the payload was made.

Each is far above what real data needs; a payload past one fails as `CodecError`, naming the bound.
The package's docstring says why each is where it is; the checks here are those that need no
knowledge of the wire format.
"""

from __future__ import annotations

import fractions
import sys
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from .errors import CodecError

MAX_PAYLOAD = 1 << 30  # characters of text and bytes of binary parts
MAX_INT_BITS = 332_193  # 10**100_000 < 2**332_193
MAX_PLAIN_INT_DIGITS = 4300  # Python's own default limit (sys.get_int_max_str_digits)
MAX_FRACTION_BITS = 4096  # the smaller of a Fraction's numerator and denominator
MAX_DECIMAL_DIGITS = 100_000
MAX_DECIMAL_EXPONENT = 100_000
DECIMAL_TEXT_ROOM = 32  # what a Decimal's text holds besides its digits: sign, point, leading zeros, exponent
MAX_SHARED_HASHES = 64  # keys of one set or dict that share a hash with another of its keys
MAX_DIMENSION = 2**63  # numpy's own bound
MAX_EMPTY_ITEMS = 1 << 16  # elements of a zero-size numpy dtype: they cost no bytes, yet iterating them would hang
# A factorized column may stand for at most this multiple of its codes' and distinct values' bytes
# (plus a little), once its text is materialized (arrow storage); the decoder refuses more.
MAX_EXPANSION = 16
EXPANSION_SLACK = 1 << 16
_HASH_MODULUS = sys.hash_info.modulus  # 2**61 - 1 on 64-bit builds: an int hashes to itself modulo this


def decoded_size(text: str | bytes | bytearray) -> int:
    """An upper estimate of the bytes the objects decoded from JSON `text` take, found at C speed.

    Decoding amplifies: ``{}`` is 3 bytes of text and a 72-byte dict, a short string 5 bytes and a
    59-byte str. So each list or dict counts 72 bytes, each string 80 (its two quotes), each item
    after a comma 32 (a float), and each character one; binary parts are held as they came.
    """
    if isinstance(text, str):
        counts = [text.count(mark) for mark in '[{",']
    else:
        counts = [text.count(mark) for mark in (b"[", b"{", b'"', b",")]
    return 72 * (counts[0] + counts[1]) + 40 * counts[2] + 32 * counts[3] + len(text)


def check_payload_size(size: int) -> None:
    if size > MAX_PAYLOAD:
        raise CodecError(f"refused a payload of {size} bytes: the codec decodes at most {MAX_PAYLOAD}")


def plain_int_parser() -> Callable[[str], int] | None:
    """What parses the JSON text's ints: None (Python's own, the fast path) where Python's limit on
    decimal digits is in force and no looser than ours; a process may set it higher, or turn it off."""
    limit = getattr(sys, "get_int_max_str_digits", lambda: 0)()  # not in Pythons before 3.10.7
    return None if 0 < limit <= MAX_PLAIN_INT_DIGITS else _parse_plain_int


def _parse_plain_int(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > MAX_PLAIN_INT_DIGITS:
        raise CodecError(
            f"refused an int of {digits} decimal digits: ints written in decimal are capped at "
            f"{MAX_PLAIN_INT_DIGITS} digits (larger ones travel in hex)"
        )
    return int(text)


def int_within(value: int) -> int:
    """An int parsed from hex, refused past the bound on its bits."""
    if value.bit_length() > MAX_INT_BITS:
        raise CodecError(
            f"refused an int of {value.bit_length()} bits: ints are capped at {MAX_INT_BITS} bits "
            "(100,000 decimal digits)"
        )
    return value


def keys_within(kind: str, keys: list[Any]) -> list[Any]:
    """The keys of a set or dict, refused when many of them share a hash.

    Each key that shares a hash costs a comparison with every other one that does as it goes into
    the set or dict, so that many such keys take time quadratic in their count. Counting distinct
    hashes cannot be flooded in turn: hashes are 64-bit ints, and an int's hash is its remainder
    modulo 2**61 - 1, which at most four 64-bit ints of one sign share.
    """
    if len(keys) <= MAX_SHARED_HASHES or _hashes_apart(keys):
        return keys
    shared = len(keys) - len(set(map(hash, keys)))
    if shared > MAX_SHARED_HASHES:
        raise CodecError(
            f"refused a {kind} of {len(keys)} keys, {shared} of which share a hash with another: at most "
            f"{MAX_SHARED_HASHES} may (keys with one hash make building it take time quadratic in their count)"
        )
    return keys


def _hashes_apart(keys: list[Any]) -> bool:
    """Whether the keys cannot share hashes (but for a pair or so), which is cheaper to know than to count:
    ints within 2**61 - 1 of zero hash to themselves (-1 as -2), and strs hash under a key random to each
    process (and under one that PYTHONHASHSEED fixes, many strs with one 64-bit hash are out of reach)."""
    kinds = set(map(type, keys))
    return kinds == {str} or (kinds == {int} and min(keys) > -_HASH_MODULUS and max(keys) < _HASH_MODULUS)


def fraction_within(numerator: int, denominator: int) -> fractions.Fraction:
    """A Fraction, refused when normalizing it would take the gcd of two large numbers."""
    if min(numerator.bit_length(), denominator.bit_length()) > MAX_FRACTION_BITS:
        raise CodecError(
            f"refused a Fraction whose numerator and denominator both have more than {MAX_FRACTION_BITS} bits "
            "(normalizing it would take their gcd, whose time grows with the product of their sizes)"
        )
    return fractions.Fraction(numerator, denominator)


def decimal_within(text: str) -> Decimal:
    """A Decimal within the digits and exponent that keep its integer value and its text bounded."""
    if len(text) > MAX_DECIMAL_DIGITS + DECIMAL_TEXT_ROOM:
        raise CodecError(
            f"refused a Decimal of {len(text)} characters: Decimals are capped at {MAX_DECIMAL_DIGITS} digits"
        )
    value = Decimal(text)
    _, digits, exponent = value.as_tuple()
    if len(digits) > MAX_DECIMAL_DIGITS or (type(exponent) is int and abs(exponent) > MAX_DECIMAL_EXPONENT):
        raise CodecError(
            f"refused a Decimal of {len(digits)} digits and exponent {exponent}: Decimals are capped at "
            f"{MAX_DECIMAL_DIGITS} digits and exponents within +-{MAX_DECIMAL_EXPONENT}"
        )
    return value


def shape_within(shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape within numpy's own bounds, so that the product of its dimensions is cheap to take."""
    if len(shape) > 64 or not all(0 <= n < MAX_DIMENSION for n in shape):
        raise CodecError("invalid array shape: at most 64 dimensions, each from 0 to 2**63 - 1")
    return shape


def check_expansion(held: int, text: int) -> None:
    """Refuse string codes whose text would outgrow the bytes that hold them."""
    if text > MAX_EXPANSION * held + EXPANSION_SLACK:
        raise CodecError(f"string codes would expand {held} bytes to {text} bytes of text")
