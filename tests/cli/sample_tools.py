"""Tools the command-line tests give their agents (loaded with --tools FILE.py)."""

import os

from codeward import tool


@tool
def double(x: int) -> int:
    """Doubles a number.

    Args:
        x: The number.
    """
    return 2 * x


@tool
def crash_worker(code: int) -> int:
    """Ends the host process at once: stands in for a crash (segfault, OOM kill) in a job.

    Args:
        code: The exit code.
    """
    os._exit(code)
