"""`blocking`, the driver every sync `run` of a local worker goes through: it does plain effects
itself and hands the rest to `events`, and either way the generator sees the same values and errors."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from codeward.effects import Effect, StreamingEffect, blocking, events


class Value(Effect):
    def __init__(self, value: Any) -> None:
        self.value = value

    def call(self) -> Any:
        if isinstance(self.value, BaseException):
            raise self.value
        return self.value


class Pieces(StreamingEffect):
    """Streams `pieces` as events, then returns their number."""

    def __init__(self, *pieces: str) -> None:
        self.pieces = pieces

    def stream(self) -> Generator[Any, None, Any]:
        yield from self.pieces
        return len(self.pieces)


def steps(log: list[str]) -> Generator[Any, Any, str]:
    try:
        first = yield Value(1)
        try:
            yield Value(ValueError("the effect failed"))
        except ValueError as error:
            log.append(f"caught {error}")
        counted = yield Pieces()
        second = yield Value(2)
        return f"{first}+{second}, {counted} pieces"
    finally:
        log.append("closed")


def test_plain_effects_values_and_errors_reach_the_generator_as_events_gives_them():
    for drive in (blocking, lambda s: _returned(events(s))):
        log: list[str] = []
        assert drive(steps(log)) == "1+2, 0 pieces"
        assert log == ["caught the effect failed", "closed"]


def test_a_streaming_effect_after_plain_ones_is_driven_and_its_result_sent():
    def streaming() -> Generator[Any, Any, Any]:
        got = yield Value("a")
        counted = yield Pieces()
        return got, counted, (yield Value("b"))

    assert blocking(streaming()) == ("a", 0, "b")


@pytest.mark.parametrize("event", ["an event", Pieces("printed")])
def test_an_event_is_refused_and_the_generator_closed(event):
    log: list[str] = []

    def yielding() -> Generator[Any, Any, None]:
        try:
            yield Value(1)
            yield event
            log.append("went on")
        finally:
            log.append("closed")

    with pytest.raises(TypeError, match="effect-only generator yielded the event"):
        blocking(yielding())
    assert log == ["closed"]


def _returned(driver: Generator[Any, Any, Any]) -> Any:
    try:
        item = next(driver)
    except StopIteration as stop:
        return stop.value
    raise AssertionError(f"an event: {item!r}")
