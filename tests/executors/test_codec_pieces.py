"""A text decoded in pieces gives what the whole parse gives: the same values, the same refusals,
the same binary parts handed out once, and the same deadline."""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
import pandas as pd
import pytest

from codeward.executors import codec
from codeward.executors.codec import pieces

VALUES = {
    "int-keyed dict": {i: (i, str(i)) for i in range(20_000)},
    "records": [{"a": i, "b": f"x{i}", "c": 1.5, "d": None} for i in range(5_000)],
    "nested": {"deep": [[[[[[list(range(5_000))]]]]]], "wide": [[i] * 3 for i in range(5_000)]},
    "data": {"array": np.arange(50_000), "frame": pd.DataFrame({"x": range(5_000), "y": ["a", "b"] * 2_500})},
    "blobs": [b"y" * 5_000 for _ in range(20)] + [{"b": b"z" * 100_000}],
    "strings": ["s" * (i % 700) for i in range(3_000)],
}


def _same(value: Any, other: Any) -> bool:
    return codec.dumps(value) == codec.dumps(other)


@pytest.mark.parametrize("name", VALUES)
@pytest.mark.parametrize("with_parts", [False, True], ids=["base64", "parts"])
def test_pieces_decode_what_the_whole_parse_decodes(name, with_parts):
    parts: list[Any] | None = [] if with_parts else None
    text = codec.dumps(VALUES[name], parts=parts)
    assert len(text) > pieces.PIECE, "the text must be large enough to be walked"
    whole = codec.loads(text, parts=parts)
    assert _same(codec.loads(text, parts=parts, in_pieces=True), whole)


def test_a_text_with_whitespace_decodes_the_same():
    text = json.dumps([{"a": [1, 2, {"b": "c"}], "k": None}] * 3_000, indent=2)
    assert codec.loads(text, in_pieces=True) == codec.loads(text)


@pytest.mark.parametrize(
    "text",
    [
        "[" + "1," * 20_000 + "]",  # a trailing comma
        "[" + '"x",' * 20_000 + '"y"] extra',
        '{"a": [' + "1" * 30_000 + "]}",  # an int past Python's digit limit
        "[" + "NaN," * 10_000 + "1]",
        '{"a": ' + "[" * 20 + "0" * 20_000,  # cut off
    ],
    ids=["trailing-comma", "extra-data", "long-int", "bare-constant", "cut-off"],
)
def test_a_bad_text_is_refused_as_the_whole_parse_refuses_it(text):
    """The same refusal; a syntax error's words may differ (Python 3.13's parser has its own)."""
    with pytest.raises(codec.CodecError) as whole:
        codec.loads(text)
    with pytest.raises(codec.CodecError) as walked:
        codec.loads(text, in_pieces=True)
    syntax = "payload is not valid codec JSON"
    assert str(walked.value) == str(whole.value) or (syntax in str(walked.value) and syntax in str(whole.value))


def test_a_part_taken_by_a_failed_try_is_given_back(monkeypatch):
    """A container's first try parses its start, and the hook hands out the parts it meets there;
    when the try ends inside the container, they go back, or the walk would find them taken."""
    parts: list[Any] = []
    text = codec.dumps([np.linspace(0, 1, 20_000) + i for i in range(40)] + ["x" * pieces.PIECE], parts=parts)
    assert len(parts) == 40
    assert _same(codec.loads(text, parts=list(parts), in_pieces=True), codec.loads(text, parts=list(parts)))
    monkeypatch.setattr(pieces.Journal, "undo", lambda self, mark: None)  # control: nothing given back
    with pytest.raises(codec.CodecError, match="one binary part twice"):
        codec.loads(text, parts=list(parts), in_pieces=True)


def test_the_walk_keeps_the_decoding_deadline(monkeypatch):
    """Floats and nulls call nothing back for the hook to look at the clock: the walk does."""
    text = codec.dumps([i * 0.5 for i in range(200_000)] + [None] * 200_000)
    with codec.decoding_deadline(time.monotonic() - 1):
        with pytest.raises(codec.CodecError, match="ran past the time limit"):
            codec.loads(text, in_pieces=True)
        monkeypatch.setattr(pieces, "_past", lambda deadline: False)  # control: the walk never looks
        assert len(codec.loads(text, in_pieces=True)) == 400_000


def test_the_walk_looks_at_the_clock_while_it_goes(monkeypatch):
    """A deadline that passes midway ends the walk, however the items come (a piece at a time)."""
    text = codec.dumps([i * 0.5 for i in range(200_000)])
    looks = iter(range(10**9))
    monkeypatch.setattr(pieces, "_past", lambda deadline: next(looks) >= 5)  # the deadline passes at the 5th look
    with codec.decoding_deadline(time.monotonic() + 3600), pytest.raises(codec.CodecError, match="ran past the"):
        codec.loads(text, in_pieces=True)
    assert next(looks) < 20, "the walk went on looking after its time had passed"
