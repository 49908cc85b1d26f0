"""Tools the command-line tests give their agents (loaded with --tools FILE.py)."""

import os
import time

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


@tool
def stubborn_wait(seconds: float) -> str:
    """Waits, ignoring every attempt to interrupt it: a host tool stuck in a call that cannot be cancelled.

    Args:
        seconds: How long to wait.
    """
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            time.sleep(0.05)
        except BaseException:
            pass
    return "done"


@tool
def touch(name: str) -> str:
    """Creates an empty file in the current folder, so a test can see that the code got this far.

    Args:
        name: The file's name.
    """
    open(name, "w").close()
    return name
