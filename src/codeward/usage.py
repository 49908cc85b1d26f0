"""Top-level because every layer raises its error: executors, platform, batch, view and the command.

What a user handed the command line was wrong: a file, an option, an id.

Every such error derives from `UsageError`, so that `codeward` can tell bad input
(one line that says what to fix, exit 2) from a fault of its own (exit 1, with the
traceback kept in a file).
"""

from __future__ import annotations

__all__ = ["UsageError"]


class UsageError(ValueError):
    """Bad input from the user; the message says what was wrong and what to do."""
