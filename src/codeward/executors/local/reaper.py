"""The worker's end when its host ends, kept by a process in which no model code runs.

The worker ties its own life to the host's with ``PR_SET_PDEATHSIG``, but that is a setting of
the worker's, and code running in it could clear it: the seccomp filter refuses that where seccomp
loads, and this reaper holds where it does not. Beside each worker the host starts a few lines of
Python in a process of their own. The reaper holds a pidfd of the worker (that very process,
never a pid reused after it) and the read end of a pipe whose write end only the host holds: the
worker never gets it (it inherits only its socket), nor does anything else the host starts
(the host's descriptors are close-on-exec). When the host ends, by any means, SIGKILL included,
the kernel closes the write end; the reaper reads end-of-file, kills the worker, and exits. A
worker stopped by the host closes the pipe the same way, after a byte that says so.

The code's working folder outlives each worker (a replaced worker's successor finds its files), and the
host removes it when the executor closes. A host that is killed never does: a batch job killed midway
left the folder, with whatever the code wrote into it, behind in the temporary folder. So when the pipe
ends without the host's byte, the reaper also waits for the worker's end (nothing writes into the folder
after it) and removes the folder, never following a link in it.

Why beside the worker and not between host and worker (a supervisor that starts it): the worker
stays the host's own child, so its exit status (a SIGSEGV, the out-of-memory killer's SIGKILL),
its pid and the Ctrl-C the host sends it are the worker's own, read as before; the reaper is one
small interpreter with nothing of codeward's to import, started while the worker imports and confines itself.
Why not a PID namespace whose init would take the worker with it: an unprivileged one needs a user
namespace, which many containers and distributions refuse. Where pidfds are missing (Linux before
5.3, macOS) the reaper signals the pid instead.
"""

from __future__ import annotations

import os
import subprocess
import sys

from codeward.effects import Exited, Steps, blocking

__all__ = ["Reaper"]

#: The reaper's whole program, run as ``python -I -S -c``: no site, no environment, no imports of ours.
_PROGRAM = """\
import os, select, shutil, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
pid, folder = int(sys.argv[1]), sys.argv[2]
worker = None
try:
    worker = os.pidfd_open(pid)
    kill = lambda: signal.pidfd_send_signal(worker, signal.SIGKILL)
except AttributeError:
    kill = lambda: os.kill(pid, signal.SIGKILL)
except OSError:
    sys.exit(0)
released = False
while os.read(0, 512):
    released = True
try:
    kill()
except ProcessLookupError:
    pass
if released:
    sys.exit(0)
if worker is not None:
    select.select([worker], [], [], 10)
else:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
shutil.rmtree(folder, ignore_errors=True)
"""

#: How long a released reaper may take to end before it is killed itself.
_RELEASE_SECONDS = 2.0


class Reaper:
    """Kills the worker `pid` when this host process ends or `release()` is called, whichever first;
    removes `folder` (the code's working folder) when the host ended without releasing it."""

    def __init__(self, pid: int, folder: str) -> None:
        read_end, self._write_end = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _PROGRAM, str(pid), folder],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd="/",
                env={},
                start_new_session=True,  # the terminal's Ctrl-C is the host's to handle, not the reaper's
            )
        except BaseException:
            os.close(self._write_end)
            raise
        finally:
            os.close(read_end)
        self._released = False

    def release(self) -> None:
        """The worker is stopped: end the reaper (killing the worker if it was not) and wait for it."""
        blocking(self.releasing())

    def releasing(self) -> Steps[None]:
        """`release`, as steps that yield the wait for the reaper's end (`effects`)."""
        if self._released:
            return
        self._released = True
        try:
            os.write(self._write_end, b"r")  # the host lives on, and so does the folder
        except OSError:  # the reaper has gone: the worker with it, or it is killed below
            pass
        os.close(self._write_end)
        try:
            yield Exited(self.process, _RELEASE_SECONDS)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
