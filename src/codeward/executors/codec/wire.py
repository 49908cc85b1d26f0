"""The wire format: tagged JSON text, its binary blobs and parts, and the passes that write and read it.

A value that JSON cannot hold exactly becomes an object ``{"$": tag, ...}``; the encoder finds the
function that writes it by the value's exact type (`ENCODERS`), by its kind of class (`encode_instance`)
or by the library that defines it (`LIBRARY_ENCODERS`), and the decoder the function that reads it
back by its tag (`DECODERS`). The families of types fill those tables when the package is imported;
this module knows none of them, only JSON's own types, ints and binary data.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import contextvars
import json
import math
import os
import pickle
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from . import bounds, pieces
from .errors import CodecError

TAG = "$"
_PICKLE_HINT = (
    "convert it to a carried type, or, for a sandbox you trust, pass allow_pickle=True "
    "to send it pickled (host to sandbox only: the host never unpickles sandbox output)"
)
# Ints this large travel as hex: every Python parses that, whatever its
# int-to-decimal-string digit limit (the lowest settable limit is 640 digits).
INT_LIMIT = 2**2000


class Refused(Exception):
    """Internal: a value cannot be encoded; `path` grows as the error unwinds."""

    def __init__(self, value: Any, reason: str = "") -> None:
        super().__init__(reason)
        self.type = type(value)
        self.reason = reason
        self.path: list[str] = []


# --------------------------------------------------------------------- literals
# A block's most usual values (None, a bool, a small int) have JSON's own text, the same as `dumps`
# writes and `loads` reads: written and read here without the encoder's and decoder's passes.

_LITERALS: dict[str, Any] = {"null": None, "true": True, "false": False}
_LITERAL_INT = re.compile(r"-?(?:0|[1-9][0-9]{0,17})")  # at most 18 digits: nothing in it to bound
_QUICK_INT = 1 << 64
#: What `literal_value` gives for a text that is not one of the literals.
NOT_LITERAL: Any = object()


def literal_text(value: Any) -> str | None:
    """`dumps(value)` for None, a bool or an int under 2**64 (exactly those types); None for any other value."""
    kind = type(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is int and -_QUICK_INT < value < _QUICK_INT:
        return str(value)
    return None


def literal_value(text: str) -> Any:
    """`loads(text)` for JSON's literals and ints of at most 18 digits; `NOT_LITERAL` for any other text."""
    if len(text) > 19:
        return NOT_LITERAL
    if text in _LITERALS:
        return _LITERALS[text]
    return int(text) if _LITERAL_INT.fullmatch(text) else NOT_LITERAL


# --------------------------------------------------------------------- public API


def dumps(value: Any, *, allow_pickle: bool = False, parts: list[Any] | None = None) -> str:
    """Encode one value as JSON text; raise `CodecError` if it cannot be carried.

    Given a `parts` list, large binary buffers (array data, image pixels) are appended to it
    instead of going into the text as base64, for a channel that can carry raw bytes beside
    the text; `loads` then needs the same parts, in order.
    """
    encoder = Encoder(allow_pickle, parts)
    return encoder.text(encoder.run(value, "value"))


def loads(text: str, *, allow_pickle: bool = False, parts: Sequence[Any] | None = None, in_pieces: bool = False) -> Any:
    """Decode JSON text made by `dumps`; pickled parts are refused unless ``allow_pickle``.

    A payload past one of the decoding bounds (see the package's docstring) fails as `CodecError`.
    ``in_pieces`` parses a large text a piece at a time (`pieces`): slower, but a thread decoding it
    lets the others run, where the whole text would hold them all.
    """
    if not isinstance(text, (str, bytes, bytearray)):
        raise CodecError(f"loads expects JSON text, got {type(text)!r}")
    bounds.check_payload_size(len(text) + sum(map(len, parts or ())))
    allowance = _MEMORY.get()
    if allowance is not None and (decoded := bounds.decoded_size(text)) > allowance:
        raise CodecError(
            f"refused a payload that would take about {decoded:,} bytes once decoded, more than the "
            f"{allowance:,} bytes allowed; send large data as arrays or DataFrames, which carry as raw bytes"
        )
    decoder = Decoder(allow_pickle, parts)
    if isinstance(text, str) and len(text) >= _CUT_AT:
        text = decoder.cut_blobs(text)
    options: dict[str, Any] = {
        "object_hook": decoder.hook,
        "parse_constant": _bad_constant,
        "parse_int": decoder.int_parser(),
    }
    try:
        if in_pieces and len(text) > pieces.PIECE:
            if not isinstance(text, str):
                text = text.decode(json.detect_encoding(text), "surrogatepass")
            return pieces.parse(text, json.JSONDecoder(**options), decoder.journal, decoder.deadline)
        return json.loads(text, **options)
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


@contextlib.contextmanager
def decoding_memory(allowance: int | None) -> Iterator[None]:
    """Within the block, `loads` refuses text whose decoded objects would take more than `allowance`
    bytes (estimated before decoding: `bounds.decoded_size`), however small the text."""
    token = _MEMORY.set(allowance)
    try:
        yield
    finally:
        _MEMORY.reset(token)


def encode_variables(variables: dict[str, Any], *, allow_pickle: bool = False, parts: list[Any] | None = None) -> str:
    """Encode a name -> value mapping; an error names the variable, its type and the opt-in."""
    if not isinstance(variables, dict):
        raise CodecError(f"variables must be a dict of name -> value, got {type(variables)!r}")
    encoder = Encoder(allow_pickle, parts)
    out = {}
    for name, value in variables.items():
        if type(name) is not str:
            raise CodecError(f"variable names must be str, got {name!r} ({type(name)!r})")
        out[name] = encoder.run(value, f"variable {name!r}")
    return encoder.text(out if TAG not in out else tag("dict", v=[[k, v] for k, v in out.items()]))


def decode_variables(text: str, *, allow_pickle: bool = False, parts: Sequence[Any] | None = None) -> dict[str, Any]:
    """Decode what `encode_variables` made, checking that it is a name -> value mapping."""
    variables = loads(text, allow_pickle=allow_pickle, parts=parts)
    if not isinstance(variables, dict) or not all(type(k) is str for k in variables):
        raise CodecError("payload does not hold a mapping of variable names to values")
    return variables


# ----------------------------------------------------------------------- encoding


# ensure_ascii keeps lone surrogates exact (as \\udxxx escapes) and the text pure ASCII.
_JSON = json.JSONEncoder(ensure_ascii=True, allow_nan=False, check_circular=False, separators=(",", ":"))
# Base64 texts longer than this skip the JSON encoder's character scan (see `Encoder.blob`).
SPLICE_AT = 1 << 16


def tag(tag: str, /, **fields: Any) -> dict[str, Any]:
    return {TAG: tag, **fields}


class Encoder:
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
        if self.parts is not None and len(data) >= SPLICE_AT:
            self.parts.append(data)
            return tag("part", i=len(self.parts) - 1)  # type: ignore[return-value]
        text = base64.b64encode(data).decode("ascii")
        if len(text) < SPLICE_AT:
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
        except Refused as exc:
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
            return v if -INT_LIMIT < v < INT_LIMIT else tag("int", hex=hex(v))
        encode = ENCODERS.get(t)
        if encode is not None:
            return encode(self, v)
        return self.enc_other(v)

    def enc_other(self, v: Any) -> Any:
        """A value whose exact type has no encoder: by its kind of class, else by the library defining it."""
        encoded = encode_instance(self, v)
        if encoded is not None:
            return encoded
        encode = LIBRARY_ENCODERS.get((type(v).__module__ or "").partition(".")[0])
        if encode is not None:
            return encode(self, v)
        return self.fallback(v)

    def fallback(self, v: Any, reason: str = "") -> Any:
        """Pickle what cannot be carried when opted in, else refuse."""
        if not self.allow_pickle:
            raise Refused(v, reason)
        try:
            return tag("pickle", b64=self.blob(pickle.dumps(v, protocol=4)))
        except Exception as exc:
            raise Refused(v, f"pickling it failed: {exc}") from None

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
            except Refused as exc:
                exc.path.append(fmt.format(i))
                raise
        return out

    def items(self, mapping: dict[Any, Any], fmt: str = "[{!r}]") -> Any:
        """A dict: a JSON object when its keys are plain str, else a list of pairs."""
        plain = TAG not in mapping and set(map(type, mapping)) <= {str}
        if plain and is_plain(mapping.values()):
            return mapping
        out: Any = {} if plain else []
        enc = self.enc
        for k, x in mapping.items():
            key = k if plain else self.key(k)
            t = type(x)
            try:
                ex = x if t is str or t is bool or x is None else enc(x)
            except Refused as exc:
                exc.path.append(fmt.format(k))
                raise
            if plain:
                out[k] = ex
            else:
                out.append([key, ex])
        return out if plain else tag("dict", v=out)

    def key(self, k: Any) -> Any:
        try:
            return self.enc(k)
        except Refused as exc:
            exc.path.append(f"<key {k!r}>")
            raise


JSON_SCALARS = frozenset({str, bool, type(None), int, float})


def is_plain(values: Any, kinds: set[type] | None = None) -> bool:
    """True when every item is a JSON scalar that needs no tag, so the container is sent as is.

    Checked with C-level loops (map, set, all, min, max), which keeps plain data near `json` speed;
    `kinds` is the set of the items' types, when the caller has it already.
    """
    kinds = set(map(type, values)) if kinds is None else kinds
    if not kinds <= JSON_SCALARS:
        return False
    if float in kinds:
        floats = values if len(kinds) == 1 else [x for x in values if type(x) is float]
        if not all(map(math.isfinite, floats)):
            return False
    if int in kinds:
        ints = values if len(kinds) == 1 else [x for x in values if type(x) is int]
        return min(ints) > -INT_LIMIT and max(ints) < INT_LIMIT
    return True


def enc_list(e: Encoder, v: list[Any], fmt: str = "[{}]", kinds: set[type] | None = None) -> Any:
    """A list as it goes: itself when plain, else its items encoded."""
    return v if is_plain(v, kinds) else e.each(v, fmt)


# What writes a value, by its exact type; filled by the families of types (see the package).
ENCODERS: dict[type, Callable[[Encoder, Any], Any]] = {}


def _no_instance(e: Encoder, v: Any) -> Any:
    """What `encode_instance` is until the package sets the classes family's: no kind of class is carried."""
    return None


# What writes an instance of a kind of class (an enum member, a dataclass instance...), or gives None for any
# other value: one function, not a table, as every value without an exact-type encoder goes through it.
encode_instance: Callable[[Encoder, Any], Any] = _no_instance
# What writes a value of a third-party library, by the library's top-level module name, so that
# the codec never imports numpy, pandas or PIL just to check a value's type.
LIBRARY_ENCODERS: dict[str, Callable[[Encoder, Any], Any]] = {}


# ----------------------------------------------------------------------- decoding


def _bad_constant(name: str) -> Any:
    raise CodecError(f"payload holds the bare JSON constant {name}; the codec tags non-finite floats")


# When decoding must stop (see `decoding_deadline`), looked at once every `_DEADLINE_STRIDE + 1` objects.
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("codeward_decoding_deadline", default=None)
_DEADLINE_STRIDE = 0x3FF
# How many bytes the decoded objects may take (see `decoding_memory`); None: no bound but the payload's.
_MEMORY: contextvars.ContextVar[int | None] = contextvars.ContextVar("codeward_decoding_memory", default=None)

# Texts this long have their large base64 strings cut out before JSON parsing (see `Decoder.cut_blobs`).
_CUT_AT = 1 << 20
_BLOB_KEY = '"b64":"'


class Decoder:
    """One decoding pass: `hook` turns each tagged JSON object (innermost first) into its value."""

    def __init__(self, allow_pickle: bool, parts: Sequence[Any] | None = None) -> None:
        self.allow_pickle = allow_pickle
        self.blobs: list[str | None] = []
        self.marker = ""
        self.parts = list(parts) if parts is not None else None
        self.deadline = _DEADLINE.get()
        self.objects = 0
        self.journal = pieces.Journal()

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
            if end - begin >= SPLICE_AT and find("\\", begin, end) < 0:
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

    def int_parser(self) -> Callable[[str], int] | None:
        """What parses the text's ints; under a deadline, one that looks at the clock as `hook` does.

        A payload of ints alone holds no object for `hook` to count, and an int written in decimal
        costs tens of nanoseconds a digit: 300 MB of them held the host for seconds past the deadline.
        """
        plain = bounds.plain_int_parser()
        deadline = self.deadline
        if deadline is None:
            return plain
        parse = plain or int
        count = 0

        def watched(text: str) -> int:
            nonlocal count
            count += 1
            if not count & _DEADLINE_STRIDE and time.monotonic() > deadline:
                raise CodecError("decoding the payload ran past the time limit of the code that sent it")
            return parse(text)

        return watched

    def hook(self, obj: dict[str, Any]) -> Any:
        self.objects += 1
        if not self.objects & _DEADLINE_STRIDE and self.deadline is not None and time.monotonic() > self.deadline:
            raise CodecError("decoding the payload ran past the time limit of the code that sent it")
        if self.marker and "b64" in obj:
            self.restore_blob(obj)
        if TAG not in obj:
            return obj
        tag = obj[TAG]
        decode = DECODERS.get(tag) if isinstance(tag, str) else None
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
        blob = self.journal.take(self.blobs, index)
        if blob is None:
            raise CodecError("payload uses one binary part twice")
        obj["b64"] = blob

    def part(self, obj: dict[str, Any]) -> Any:
        """A buffer that came beside the text as raw bytes, handed out once."""
        index = obj["i"]
        if self.parts is None or type(index) is not int or not 0 <= index < len(self.parts):
            raise CodecError(f"payload refers to binary part {index!r}, which did not come with it")
        part = self.journal.take(self.parts, index)
        if part is None:
            raise CodecError("payload uses one binary part twice")
        return part

    def unpickle(self, obj: dict[str, Any]) -> Any:
        if not self.allow_pickle:
            raise CodecError(
                "payload holds a pickled value; refused because allow_pickle is False "
                "(never pass allow_pickle=True for data that came out of a sandbox)"
            )
        return pickle.loads(unb64(obj["b64"]))


# What reads a tagged object back, by its tag; the families of types add theirs (see the package).
DECODERS: dict[str, Callable[[Decoder, dict[str, Any]], Any]] = {
    "part": Decoder.part,
    "pickle": lambda d, o: d.unpickle(o),
}


# ------------------------------------------- reading the fields of a tagged object


_STRICT_BASE64 = {"strict_mode": True} if sys.version_info >= (3, 11) else {}


def unb64(text: Any) -> bytes:
    if isinstance(text, (bytes, memoryview)):  # a part that came beside the text (see `Decoder.part`)
        return text  # type: ignore[return-value]
    if not isinstance(text, str):
        raise CodecError("binary payload is not a base64 string")
    return binascii.a2b_base64(text, **_STRICT_BASE64)


def dec_int(x: Any) -> int:
    if type(x) is int:
        return x
    if isinstance(x, dict) and x.get(TAG) == "int":
        return dec_big_int(x)
    raise CodecError(f"expected an int, got {type(x).__name__}")


def dec_big_int(obj: dict[str, Any]) -> int:
    text = obj["hex"]
    if not isinstance(text, str):
        raise CodecError("big int is not a hex string")
    return bounds.int_within(int(text, 16))


def dec_list(x: Any) -> list[Any]:
    if type(x) is not list:
        raise CodecError(f"expected a list, got {type(x).__name__}")
    return x


def dec_str(x: Any) -> str:
    if type(x) is not str:
        raise CodecError(f"expected a string, got {type(x).__name__}")
    return x


def dec_strings(x: Any, *, missing: bool = False) -> list[str | None]:
    """A list of strings (and None where ``missing``), checked at C speed."""
    if not set(map(type, dec_list(x))) <= ({str, type(None)} if missing else {str}):
        raise CodecError("expected a list of strings")
    return x  # type: ignore[no-any-return]


def dec_shape(x: Any) -> tuple[int, ...]:
    """An array's or image's shape, within numpy's own bounds."""
    return bounds.shape_within(tuple(dec_int(n) for n in dec_list(x)))


def import_library(name: str) -> Any:
    """Import a fixed third-party module a payload's tag needs (never a name from the payload)."""
    if not importable(name):
        raise CodecError(f"payload holds a {name} value, but {name} cannot be imported here")
    return sys.modules[name]


def importable(name: str) -> bool:
    try:
        __import__(name)
    except ImportError:
        return False
    return True
