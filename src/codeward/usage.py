"""Top-level because every layer raises its error: executors, platform, batch, view and the command.

What a user handed the command line was wrong: a file, an option, an id.

Every such error derives from `UsageError`, so that `codeward` can tell bad input
(one line that says what to fix, exit 2) from a fault of its own (exit 1, with the
traceback kept in a file). A warning about what the user passed points at the user's
line (`user_stacklevel`).
"""

from __future__ import annotations

import os
import sys

__all__ = ["UsageError", "user_stacklevel"]

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


class UsageError(ValueError):
    """Bad input from the user; the message says what was wrong and what to do."""


def user_stacklevel() -> int:
    """The ``stacklevel`` for a warning about what the user passed, given by the function that warns:
    the first frame outside codeward, so the warning names the user's line however deep in codeward
    it was found (``create_executor``, ``CodeAgent`` and the command all reach the same check)."""
    frame = sys._getframe(1)  # the function that warns: level 1
    level = 1
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level
