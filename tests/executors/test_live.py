"""`LiveOutput`: what reaches an `on_output` callback, whatever the sandbox sends."""

from __future__ import annotations

import time

import pytest

from codeward.executors.live import BlockStops, LiveOutput, display_text


def test_no_more_than_the_limit_reaches_the_callback_in_all():
    heard: list[tuple[str, str]] = []
    live = LiveOutput(lambda stream, text: heard.append((stream, text)), 10)
    for piece in ("12345", "", "6789", "abcdef", "more"):
        live("stdout", piece)
    assert heard == [("stdout", "12345"), ("stdout", "6789"), ("stdout", "a")]
    assert not live.wanted


def test_a_callback_that_raises_gets_nothing_more_and_its_error_is_kept():
    calls: list[str] = []

    def fail(stream: str, text: str) -> None:
        calls.append(text)
        raise BrokenPipeError("gone")

    live = LiveOutput(fail, 100)
    live("stdout", "one")
    live("stdout", "two")
    assert calls == ["one"] and not live.wanted
    with pytest.raises(BrokenPipeError, match="gone"):
        live.raise_failure()


def test_text_of_the_codes_own_str_class_arrives_as_plain_str_without_running_its_methods():
    class Loud(str):
        def __len__(self) -> int:
            raise AssertionError("its method ran on the host")

        def __getitem__(self, index: object) -> str:
            raise AssertionError("its method ran on the host")

    heard: list[object] = []
    LiveOutput(lambda stream, text: heard.append(text), 4)("stdout", Loud("hello"))
    assert heard == ["hell"] and type(heard[0]) is str


def test_nothing_is_delivered_without_a_callback_and_anything_but_text_is_dropped():
    LiveOutput(None, 10)("stdout", "ignored")
    heard: list[str] = []
    live = LiveOutput(lambda stream, text: heard.append(text), 10)
    live("stdout", b"bytes")  # type: ignore[arg-type]
    assert heard == []


def test_a_display_shows_as_its_plain_text_or_its_kind():
    assert display_text({"text/plain": "<Figure>", "image/png": "..."}) == "<Figure>\n"
    assert display_text({"image/png": "..."}) == "[image/png]\n"


def test_a_stop_is_sent_again_while_its_block_runs_and_never_between_blocks():
    sent: list[int] = []
    stops = BlockStops(again=0.05)
    stops.interrupt()  # nothing runs
    with stops.running(lambda: sent.append(1)):
        stops.interrupt()
        time.sleep(0.3)
    count = len(sent)
    assert count >= 3, "sent at once, then again while the block ran"
    time.sleep(0.2)
    with stops.running(lambda: sent.append(2)):
        time.sleep(0.2)
    assert len(sent) == count, "the next block is never stopped by an earlier ask"
