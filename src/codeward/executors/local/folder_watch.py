"""The local worker's working folder, measured by the host while a block runs.

The worker counts what its code writes there (`working_folder`), and refuses past the budget
with an error the code can read. That count lives in the process it limits: code that got past
the policy writes as much as it likes. So the host measures the folder too, from outside, every
`CHECK_EVERY_SECONDS` while a block runs: the space its files take on disk (a sparse file counts
what it holds, not what it claims) and how many names it holds (an empty file takes an inode).
Past `SLACK_BYTES` over the budget, or `MOST_ENTRIES` names, the worker is killed and the
block's error says why; between blocks too, since a thread the code left running writes as well. Between two looks a worker can write what the disk takes in a quarter of a second:
that, and the slack, is how far past its budget a folder can go.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Callable

__all__ = ["CHECK_EVERY_SECONDS", "MOST_ENTRIES", "FolderWatch", "empty_folder", "folder_usage"]

#: How often the host measures the folder while a block runs.
CHECK_EVERY_SECONDS = 0.25
#: The most names the folder may hold (files and folders, at any depth); a look stops counting past it.
MOST_ENTRIES = 100_000
#: What the host allows past the worker's own budget before it steps in (the worker refuses first).
SLACK_BYTES = 64 * 2**20


def folder_usage(folder: str, most_entries: int = MOST_ENTRIES) -> tuple[int, int]:
    """The bytes `folder`'s files take on disk and the names it holds (no link followed), the count
    stopping once it passes `most_entries`."""
    used, entries = 0, 0
    pending = [folder]
    while pending and entries <= most_entries:
        try:
            with os.scandir(pending.pop()) as found:
                for entry in found:
                    entries += 1
                    if entries > most_entries:
                        break
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    used += info.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
        except OSError:
            continue
    return used, entries


class FolderWatch:
    """Measures a worker's working folder against its budget from the host, for the worker's life
    (a thread the code left running between blocks writes too); `stop(reason)` once it is over.
    One thread of the host's looks at every folder being watched, however many workers run."""

    def __init__(
        self, folder: str, most_bytes: int, stop: Callable[[str], None], most_entries: int | None = None
    ) -> None:
        self.folder = folder
        self.most_bytes = most_bytes + SLACK_BYTES
        self.most_entries = MOST_ENTRIES if most_entries is None else most_entries
        self._stop = stop
        self.next_look = time.monotonic() + CHECK_EVERY_SECONDS
        _WATCHER.add(self)

    def overrun(self) -> str | None:
        """Why the folder is past what it may hold, or None."""
        used, entries = folder_usage(self.folder, self.most_entries)
        if entries > self.most_entries:
            return (
                f"its working folder holds more than {self.most_entries:,} files and folders, the most it may; "
                "write fewer, larger files"
            )
        if used > self.most_bytes:
            return (
                f"its working folder takes {used:,} bytes on disk, past its budget of {self.most_bytes:,}; "
                "write less, or collect and remove files between blocks (ex.files)"
            )
        return None

    def look(self) -> bool:
        """Measure once; stop the worker and return False if the folder is past its budget. A large
        folder is looked at less often, so that measuring never takes more than half the time."""
        started = time.monotonic()
        reason = self.overrun()
        if reason is not None:
            self._stop(reason)
            return False
        now = time.monotonic()
        self.next_look = now + max(CHECK_EVERY_SECONDS, 2 * (now - started))
        return True

    def close(self) -> None:
        _WATCHER.remove(self)


def empty_folder(folder: str) -> None:
    """Remove what `folder` holds, never following a link (one is removed as itself)."""
    with contextlib.suppress(OSError), os.scandir(folder) as found:
        for entry in list(found):
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)


class _Watcher:
    """The one thread that looks at every watched folder when its turn comes; started with the first."""

    def __init__(self) -> None:
        self._watches: set[FolderWatch] = set()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def add(self, watch: FolderWatch) -> None:
        with self._changed:
            self._watches.add(watch)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="codeward-folder-watch", daemon=True)
                self._thread.start()

    def remove(self, watch: FolderWatch) -> None:
        with self._changed:
            self._watches.discard(watch)

    def _run(self) -> None:
        while True:
            with self._changed:
                due = [watch for watch in self._watches if watch.next_look <= time.monotonic()]
                soonest = min((watch.next_look for watch in self._watches), default=None)
            for watch in due:
                with self._changed:
                    if watch not in self._watches:  # closed meanwhile
                        continue
                if not watch.look():
                    self.remove(watch)
            pause = CHECK_EVERY_SECONDS if soonest is None else max(0.01, soonest - time.monotonic())
            time.sleep(min(pause, CHECK_EVERY_SECONDS))


_WATCHER = _Watcher()
