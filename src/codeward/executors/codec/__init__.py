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
was made (`bounds`). Each is far above what real data needs; a payload past one fails as
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

The package's modules: `wire` is the format itself (the tag, the JSON text, base64 blobs
and binary parts, the encoding and decoding passes, the decoding deadline) and dispatches
through tables that the families of types fill here: `scalars` (numbers and binary data),
`containers`, `times`, `classes`, and, never imported until a value of theirs is met,
`arrays` (numpy), `frames` (pandas) and `images` (PIL). `bounds` holds the bounds above,
`errors` the two exceptions.

The modules are also executed as source inside sandboxes where codeward is not installed,
as the package ``_codeward_codec`` (`source` gives their texts and the loader): they import
only the standard library and one another (relatively) at top level, and numpy, pandas and
PIL only when a value of theirs is met.
"""

from __future__ import annotations

from . import arrays, classes, containers, frames, images, scalars, times, wire
from .classes import register_class, restore_loaded_classes
from .errors import CodecError, CodecWarning
from .wire import (
    NOT_LITERAL,
    decode_variables,
    decoding_deadline,
    decoding_memory,
    dumps,
    encode_variables,
    literal_text,
    literal_value,
    loads,
)

__all__ = [
    "NOT_LITERAL",
    "CodecError",
    "CodecWarning",
    "decode_variables",
    "decoding_deadline",
    "decoding_memory",
    "dumps",
    "encode_variables",
    "literal_text",
    "literal_value",
    "loads",
    "register_class",
    "restore_loaded_classes",
]

# Each family of types puts its encoders and decoders in the wire's tables (see `wire`).
_FAMILIES = (scalars, containers, times, classes, arrays, frames, images)
wire.DECODERS.update({tag: decode for family in _FAMILIES for tag, decode in family.DECODERS.items()})
wire.ENCODERS.update({**scalars.ENCODERS, **containers.ENCODERS, **times.ENCODERS})
wire.encode_instance = classes.enc_instance
wire.LIBRARY_ENCODERS.update(numpy=arrays.encode, pandas=frames.encode, PIL=images.encode)
