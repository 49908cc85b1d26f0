"""Binary parts beside the codec's text: large buffers as raw bytes, for a channel that carries them."""

from __future__ import annotations

import pytest

from codeward.executors import codec

np = pytest.importorskip("numpy")
pd = pytest.importorskip("pandas")


def test_large_buffers_go_beside_the_text_and_come_back_exact():
    frame = pd.DataFrame({"a": np.arange(50_000), "b": np.linspace(0, 1, 50_000)})
    values = {"frame": frame, "blob": bytes(range(256)) * 1000, "small": b"ab", "array": np.eye(300)}
    parts: list = []
    text = codec.encode_variables(values, parts=parts)
    assert parts and len(text) < 5_000, "the buffers left the text"
    back = codec.decode_variables(text, parts=[bytes(part) for part in parts])
    assert back["frame"].equals(frame) and back["blob"] == values["blob"] and back["small"] == b"ab"
    assert type(back["blob"]) is bytes and np.array_equal(back["array"], values["array"])
    back["array"][0, 0] = 5.0  # decoded arrays are the code's own, writable


def test_without_parts_the_text_alone_still_carries_everything():
    array = np.arange(100_000)
    assert np.array_equal(codec.loads(codec.dumps(array)), array)


@pytest.mark.parametrize(
    ("parts", "words"),
    [(None, "did not come with it"), ([], "did not come with it"), ([b"\0" * 8], "needs")],
    ids=["no-parts", "too-few", "wrong-size"],
)
def test_parts_that_do_not_match_the_text_are_refused(parts, words):
    text = codec.dumps(np.arange(100_000), parts=[])
    with pytest.raises(codec.CodecError, match=words):
        codec.loads(text, parts=parts)


@pytest.mark.parametrize(
    "payload",
    [
        '[{"$": "part", "i": 0}, {"$": "part", "i": 0}]',
        '{"$": "part", "i": "0"}',
        '{"$": "part", "i": -1}',
        '{"$": "part", "i": 7}',
    ],
    ids=["used-twice", "index-not-int", "negative", "out-of-range"],
)
def test_a_forged_part_reference_is_refused(payload):
    with pytest.raises(codec.CodecError):
        codec.loads(payload, parts=[b"x" * 10])
