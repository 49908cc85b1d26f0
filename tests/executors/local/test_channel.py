"""The wire's headers: written by the kept C encoder exactly as `json` writes them (or by `json`
itself where that encoder is missing), and read back only when a header is one JSON object alone."""

from __future__ import annotations

import json

import pytest

from codeward.executors.local import channel
from codeward.executors.local.channel import ChannelError

HEADERS = [
    {"op": "run", "seq": 2**61 + 5, "live": False},
    {"op": "done", "final": True, "logs": "5\n\u00e9\ud800{[\x00", "events": "", "ratio": 0.1, "none": None},
    {"op": "tools", "nested": [1, {"x": [2]}]},
    {},
]


@pytest.mark.parametrize("header", HEADERS)
def test_the_kept_encoder_writes_what_json_writes(header):
    assert channel._to_json(header) == json.dumps(header, ensure_ascii=True, allow_nan=False, separators=(",", ":"))


def test_without_the_c_encoder_json_writes_the_headers(monkeypatch):
    monkeypatch.setattr(json.encoder, "c_make_encoder", None)
    to_json = channel._json_encoder()
    assert to_json == channel._HEADER.encode
    assert [to_json(header) for header in HEADERS] == [channel._to_json(header) for header in HEADERS]


def test_a_value_json_refuses_is_refused():
    with pytest.raises(ValueError):
        channel._to_json({"x": float("nan")})
    with pytest.raises(TypeError):
        channel._to_json({"x": object()})


def _frame(head: bytes) -> bytes:
    return channel._LENGTHS.pack(len(head), 0) + head


@pytest.mark.parametrize(
    "head", [b'{"op":"done"} ', b'{"op":"done"}{}', b' {"op":"done"}', b'\xef\xbb\xbf{"op":"done"}']
)
def test_a_header_is_one_json_object_alone(head):
    with pytest.raises(ChannelError, match="does not decode"):
        channel._parse(_frame(head), len(head), True)
    assert channel._parse(_frame(b'{"op":"done"}'), 13, True)[0] == {"op": "done"}  # control
