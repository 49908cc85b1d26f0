"""The host's side of the worker's seccomp filter: the host answers each refused system call itself.

Where the kernel and libseccomp allow it, the worker's filter sends the calls it refuses to a
listener (``SECCOMP_RET_USER_NOTIF``) rather than answering EPERM at once; the worker hands the
listener to the host, over a socket of its own, right after loading the filter and before any of
the code runs. A thread of the host's receives each call, counts it by its system call's name, and
answers EPERM, so that the code sees what it saw before and the host knows what was refused, from
the kernel rather than from the worker's word.

Nothing is weakened: the kernel never runs a call sent to a listener unless the answer says to
continue, and this host never says so. A listener nobody holds any more (the host closed it, or
died) makes the kernel answer ENOSYS: still refused. What the code can do is make many refused
calls: each waits for the host's answer, so the code's own time runs, and the host's thread takes
at most `MOST_PER_SECOND` a second, so that such code spends the host's CPU at a bounded rate.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import socket
import struct
import threading
import time
from collections import Counter
from typing import Any

from codeward.executors.base import BlockEvent
from codeward.wall_events import EventLedger

__all__ = ["MOST_PER_SECOND", "SeccompNotices", "listener_fd", "notify_supported"]

# struct seccomp_notif (80 bytes) and struct seccomp_notif_resp (24 bytes), and their ioctls:
# _IOWR('!', 0, struct seccomp_notif) and _IOWR('!', 1, struct seccomp_notif_resp).
_NOTIF = struct.Struct("=QIIiIQ6Q")
_RESPONSE = struct.Struct("=QqiI")
_RECEIVE = (3 << 30) | (_NOTIF.size << 16) | (ord("!") << 8) | 0
_SEND = (3 << 30) | (_RESPONSE.size << 16) | (ord("!") << 8) | 1

#: The refused calls the host answers a second, at most; past that the worker waits its turn.
MOST_PER_SECOND = 5000
#: How long the host waits for the worker to hand over its listener (it does so while it starts).
HANDOVER_SECONDS = 60.0


def notify_supported() -> bool:
    """Whether this libseccomp and kernel give a filter a listener (libseccomp's API level 5 and on)."""
    try:
        import pyseccomp

        return pyseccomp.get_api() >= 5 and hasattr(pyseccomp._libseccomp, "seccomp_notify_fd")
    except Exception:  # an old binding or library: no listener, the filter answers EPERM itself
        return False


def listener_fd(built: Any) -> int:
    """The listener of a loaded filter (libseccomp's `seccomp_notify_fd`; pyseccomp has no name for it)."""
    import pyseccomp

    fd = int(pyseccomp._libseccomp.seccomp_notify_fd(built._filter))
    if fd < 0:
        raise OSError(-fd, "the seccomp filter has no listener")
    return fd


class SeccompNotices:
    """Receives the worker's listener on `handover` and answers its refused calls; `take()` gives
    the calls refused since the last `take()`, as events of the wall "seccomp"."""

    def __init__(self, handover: socket.socket) -> None:
        self._handover = handover
        self._counts: Counter[int] = Counter()
        self._lock = threading.Lock()
        self._wake_read, self._wake_write = os.pipe()
        self.listening = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="codeward-seccomp-notices", daemon=True)
        self._thread.start()

    def take(self) -> list[BlockEvent]:
        with self._lock:
            if not self._counts:  # the usual block, twice a block: nothing to build
                return []
            counts, self._counts = self._counts, Counter()
        ledger = EventLedger()  # at most MAX_EVENTS system calls by name, the rest in one more
        for number, count in counts.items():
            ledger.record("seccomp", _name(number), count)
        return ledger.events()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_write, b"x")
        with contextlib.suppress(OSError):
            self._handover.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)
        for fd in (self._wake_read, self._wake_write):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _serve(self) -> None:
        listener = self._receive_listener()
        if listener is None:
            return
        self.listening.set()
        try:
            self._answer_all(listener)
        finally:
            os.close(listener)  # calls still waiting now get ENOSYS: refused all the same

    def _receive_listener(self) -> int | None:
        try:
            self._handover.settimeout(HANDOVER_SECONDS)
            _, fds, _, _ = socket.recv_fds(self._handover, 1, 1)
        except OSError:
            return None
        finally:
            self._handover.close()  # one listener, received before the code ran: nothing more is taken
        return fds[0] if fds else None

    def _answer_all(self, listener: int) -> None:
        poller = select.poll()
        poller.register(listener, select.POLLIN)
        poller.register(self._wake_read, select.POLLIN)
        window, answered = time.monotonic(), 0
        while True:
            ready = dict(poller.poll())
            if self._wake_read in ready or ready.get(listener, 0) & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                return
            notice = bytearray(_NOTIF.size)
            try:
                fcntl.ioctl(listener, _RECEIVE, notice)
            except OSError as error:
                if error.errno in (errno.ENOENT, errno.EINTR):  # the caller was interrupted meanwhile
                    continue
                return
            number, _, _, syscall, _, _, *_ = _NOTIF.unpack(notice)
            with self._lock:
                self._counts[syscall] += 1
            with contextlib.suppress(OSError):  # ENOENT: the call was interrupted, and is asked again
                fcntl.ioctl(listener, _SEND, bytearray(_RESPONSE.pack(number, 0, -errno.EPERM, 0)))
            answered += 1
            if answered >= MOST_PER_SECOND:
                time.sleep(max(0.0, window + 1.0 - time.monotonic()))
                window, answered = time.monotonic(), 0


_NAMES: dict[int, str] = {}


def _name(number: int) -> str:
    """The system call's name on this machine, as libseccomp knows it; its number otherwise."""
    if number not in _NAMES and len(_NAMES) < 1024:
        try:
            import pyseccomp

            named = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, number)
            _NAMES[number] = named.decode("ascii", "replace") if named else f"system call {number}"
        except (ImportError, OSError, ValueError):
            _NAMES[number] = f"system call {number}"
    return _NAMES.get(number, f"system call {number}")
