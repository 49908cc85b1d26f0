"""What the host computes from the code's objects runs under the block's limits, not after them.

An exception's text is the code's own ``__str__`` (or the ``__repr__`` of what it carries). Computed
once the block's watch was off, with only the budget left for the host's own calls, a text that never
ends held the host 12 s past a 2 s limit in process. It is now computed under a block's limits.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from codeward.executors.base import ExecutionError
from tests.security.conftest import SANDBOX_OFF, _check_control, sandbox

pytestmark = pytest.mark.timeout(120)

ENDLESS = "class Endless(Exception):\n    def __str__(self):\n        while True:\n            pass\n"
CARRIED = "class Held:\n    def __repr__(self):\n        while True:\n            pass\n"


@pytest.mark.parametrize(
    ("definition", "control", "attack"),
    [
        (ENDLESS, "str(Endless())", "raise Endless()"),
        (CARRIED, "str(ValueError(Held(), 1))", "raise ValueError(Held(), 1)"),
    ],
    ids=["own-str", "carried-repr"],
)
def test_an_exception_text_that_never_ends_is_cut_at_the_limit(
    isolation: str, definition: str, control: str, attack: str, tmp_path: Path
) -> None:
    if not SANDBOX_OFF:
        _check_control(definition + control, tmp_path / "canary", "exhausts", (False, {}, []))
    with sandbox(isolation=isolation, timeout_seconds=1, max_operations=10**12) as executor:
        executor.run("None")  # the worker's start, seconds on a busy machine, is not the text's to count
        started = time.monotonic()
        with pytest.raises(ExecutionError) as info:
            executor.run(definition + attack)
        assert time.monotonic() - started < 1 + 1 + 3, "the text ran past a second block's limit"
        assert "ran past the sandbox's limits" in info.value.message
        assert executor.run("1 + 1").output == 2
