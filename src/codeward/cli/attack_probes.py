"""`codeward doctor --attack`: real attempts to get out of a sandbox, each judged on the host.

A probe is data and a check: the code a sandbox runs (through its executor's ordinary `run`), and a
judge that decides on the host whether it got through. The judge never takes the sandbox's word that
it was refused: the sandbox is a stranger. It looks at what the host can see for itself (the file the
probe meant to write, the listener it meant to reach, the process it meant to kill, the secret it
meant to bring back) and at what came back only to find a secret the code could not have known.

What the probes aim at is `attack_bait.Bait`. The probes of the local policy's classic escapes
(frames, subclasses, format strings) run on the local executor only; the others run on every one.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from codeward.cli.attack_bait import Bait, Listener, ProcessCount, own_peak_memory
from codeward.executors.base import ExecutionError, Executor, ExecutorError, SandboxError

__all__ = ["PROBES", "Outcome", "Probe", "Verdict", "memory_limit", "run_probes"]

#: How many processes the fork probe tries to start: past the docker sandbox's limit (256), and bounded.
FORK_ATTEMPTS = 320
#: How many of them the host may miss (started late, or stopped early on a busy machine) and still
#: count them as having got through: more than the docker sandbox's limit lets live either way.
FORK_SLACK = 16
#: How far past the memory limit the memory probe asks for.
MEMORY_MARGIN = 256 * 1024**2
#: The limit the memory probe goes past where the sandbox names none (jupyter: there is none).
DEFAULT_MEMORY_LIMIT = 1024**3
#: How much the doctor's own memory may grow while the probes run before the host counts as harmed.
HOST_MEMORY_GROWTH = 512 * 1024**2


@dataclass
class Outcome:
    """What a probe's block gave back: every text the sandbox sent, and how the block ended."""

    text: str
    ended: str  # "finished", "failed" (an error in the code) or "died" (the sandbox itself)

    @classmethod
    def of(cls, executor: Executor, code: str) -> Outcome:
        """Run `code` in `executor`, and keep what came back whatever it was."""
        try:
            done = executor.run(code)
        except SandboxError as error:
            return cls(f"{error.message}\n{error.logs}", "died")
        except ExecutionError as error:
            return cls(f"{error.message}\n{error.logs}\n{error.traceback}", "failed")
        except ExecutorError as error:  # refused by the executor on the way (a value it would not carry back)
            return cls(f"{error.message}\n{error.logs}", "failed")
        return cls(f"{done.output!r}\n{done.logs}", "finished")


@dataclass
class Verdict:
    """One probe's result: `held` True, False (`detail` says what got through) or None (not probed, `detail` says why)."""

    name: str
    held: bool | None
    detail: str = ""


@dataclass(frozen=True)
class Probe:
    """An attempt (`code`, written for the bait) and its judge: None when it held, else what got through."""

    name: str
    attempt: str
    code: Callable[[Bait, int], str]
    judge: Callable[[Outcome, Bait, int], str | None]
    #: The executors it is run on (None: all); on the others it is left out.
    executors: frozenset[str] | None = None
    #: Why it cannot be probed here, or None when it can.
    unprobed: Callable[[Bait], str | None] = field(default=lambda bait: None)
    before: Callable[[Bait], None] = field(default=lambda bait: None)


def _secret_back(outcome: Outcome, bait: Bait, what: str) -> str | None:
    return what if bait.secret in outcome.text else None


def _written(bait: Bait, probe: str, how: str) -> str | None:
    path = bait.written(probe)
    return f"{how} and wrote {path} on the host" if path.exists() else None


_READ = """
print(open({path!r}).read())
"""

_WRITE = """
with open({path!r}, "w") as handle:
    handle.write("written from the sandbox")
"""

_ENVIRONMENT = """
import os
wanted = "CODEWARD_DOCTOR_SECRET_"  # what it prints is kept small: a sandbox's output may be cut
print([value for name, value in os.environ.items() if name.startswith(wanted)])
for pid in ({pid}, {child}):
    try:
        with open(f"/proc/{{pid}}/environ", "rb") as handle:
            print([entry for entry in handle.read().split(b"\\0") if entry.startswith(wanted.encode())])
    except OSError as error:
        print(pid, type(error).__name__)
"""

_SHELL = """
command = "echo ran > {path}; cat {secret}"
ran = []
try:
    import subprocess
    print(subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, timeout=10).stdout)
    ran.append("subprocess")
except Exception as error:
    print("subprocess:", type(error).__name__)
try:
    import os
    ran.append(f"os.system gave {{os.system(command)}}")
except Exception as error:
    print("os.system:", type(error).__name__)
print("ran:", ran)
"""

_CONNECT = """
import socket
connection = socket.create_connection(({host!r}, {port}), timeout=3)
connection.sendall(b"from the sandbox")
connection.close()
"""

_SIGNAL = """
import os, signal
os.kill({pid}, signal.SIGKILL)
"""

_FORK = """
import os, signal, time
children = []
stopped = None
try:
    for _ in range({attempts}):
        pid = os.fork()
        if pid == 0:
            try:
                time.sleep(30)
            finally:
                os._exit(0)
        children.append(pid)
except OSError as error:
    stopped = error
finally:
    time.sleep(1)  # long enough for the host to count them, on a busy machine too
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    for pid in children:
        os.waitpid(pid, 0)
print("forked", len(children), "stopped by", repr(stopped))
"""

_MEMORY = """
block = b"\\x01" * {size}
print("allocated", len(block) // 1024**2, "MiB")
"""

# The escapes of the local policy: each reaches `os` its own way and writes a host path with it.
_WRITE_WITH_OS = """
fd = found.open({path!r}, found.O_WRONLY | found.O_CREAT, 0o600)
found.write(fd, b"escaped")
found.close(fd)
"""

_FIND_OS_IN_FRAMES = """
found = None
while frame is not None and found is None:
    given = frame.f_globals.get("__builtins__")
    importer = given.get("__import__") if isinstance(given, dict) else getattr(given, "__import__", None)
    if importer is not None:
        found = importer("os")
    frame = frame.f_back
"""

_GENERATOR_FRAME = (
    """
def climb():
    yield walker.gi_frame.f_back
walker = climb()
frame = next(walker)
"""
    + _FIND_OS_IN_FRAMES
    + _WRITE_WITH_OS
)

_GETFRAME = (
    """
import sys
frame = sys._getframe(0)
"""
    + _FIND_OS_IN_FRAMES
    + _WRITE_WITH_OS
)

_FUNCTION_INTERNALS = (
    """
function = lambda: 0
code = function.__code__
rebuilt = type(function)(code, function.__globals__)
given = rebuilt.__globals__["__builtins__"]
found = (given["__import__"] if isinstance(given, dict) else given.__import__)("os")
"""
    + _WRITE_WITH_OS
)

_SUBCLASSES = (
    """
found = None
for kind in ().__class__.__base__.__subclasses__():
    if kind.__name__ == "_wrap_close":
        names = kind.__init__.__globals__
        class Found: pass
        found = Found()
        found.open, found.write, found.close = names["open"], names["write"], names["close"]
        found.O_WRONLY, found.O_CREAT = names["O_WRONLY"], names["O_CREAT"]
"""
    + _WRITE_WITH_OS
)

_FORMAT = """
import json
print("{0.__globals__[codecs].sys.modules[os].environ}".format(json.dumps))
"""

_FORMAT_MAP = """
import json
print("{f.__globals__[codecs].sys.modules[os].environ}".format_map({"f": json.dumps}))
"""


def _environment_back(outcome: Outcome, bait: Bait) -> str | None:
    if bait.env_secret in outcome.text:
        return f"read {bait.env_name}, a secret in the environment of the doctor and the process it started"
    if "environ({" in outcome.text:
        return "reached os.environ"
    return None


def _escape(name: str, attempt: str, code: str) -> Probe:
    return Probe(
        name,
        attempt,
        lambda bait, _: code.format(path=str(bait.written(name))),
        lambda outcome, bait, _: _written(bait, name, f"reached os through {attempt}"),
        executors=frozenset({"local"}),
    )


def _fork_judge(outcome: Outcome, bait: Bait, _: int) -> str | None:
    if bait.extra_processes >= FORK_ATTEMPTS - FORK_SLACK:
        return f"started {bait.extra_processes} processes at once on this machine (the host counted them)"
    if f"forked {FORK_ATTEMPTS} " in outcome.text:
        return f"started all {FORK_ATTEMPTS} processes it tried"
    return None


def _fork_before(bait: Bait) -> None:
    bait.processes = ProcessCount()


def _memory_judge(outcome: Outcome, bait: Bait, limit: int) -> str | None:
    grown = own_peak_memory() - bait.memory_at_start
    if grown > HOST_MEMORY_GROWTH:
        return f"the host's own memory grew by {grown // 1024**2} MiB"
    asked = (limit + MEMORY_MARGIN) // 1024**2
    if f"allocated {asked} MiB" in outcome.text:
        return f"allocated {asked} MiB, past the {limit // 1024**2} MiB limit"
    if outcome.ended == "finished":
        return "the block ran to its end: nothing stopped the allocation"
    return None


def _listener(outcome: Outcome, listener: Listener | None, what: str) -> str | None:
    peers = listener.connected() if listener is not None else []
    return f"connected to {what} {listener.host}:{listener.port}" if peers and listener is not None else None


def _killed(outcome: Outcome, bait: Bait, _: int) -> str | None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        bait.child.wait(0.5)
    return (
        f"killed process {bait.child.pid}, which the doctor started on the host"
        if bait.child.poll() is not None
        else None
    )


PROBES: tuple[Probe, ...] = (
    Probe(
        "read a host file",
        "open a file the doctor wrote outside the sandbox",
        lambda bait, _: _READ.format(path=str(bait.secret_file)),
        lambda outcome, bait, _: _secret_back(outcome, bait, f"read the secret in {bait.secret_file}"),
    ),
    Probe(
        "write outside",
        "write a file outside the sandbox",
        lambda bait, _: _WRITE.format(path=str(bait.written("write"))),
        lambda outcome, bait, _: _written(bait, "write", "opened a host path for writing"),
    ),
    Probe(
        "read the host's environment",
        "read os.environ, and /proc/PID/environ of the doctor and of a process it started",
        lambda bait, _: _ENVIRONMENT.format(pid=bait.pid, child=bait.child.pid),
        lambda outcome, bait, _: _environment_back(outcome, bait),
    ),
    Probe(
        "exec a shell",
        "run /bin/sh through subprocess and os.system",
        lambda bait, _: _SHELL.format(path=bait.written("shell"), secret=bait.secret_file),
        lambda outcome, bait, _: (
            _written(bait, "shell", "ran a shell")
            or _secret_back(outcome, bait, "ran a shell that read the host's file")
        ),
    ),
    Probe(
        "open a socket",
        "connect to a listener on the host's loopback address",
        lambda bait, _: _CONNECT.format(host=bait.loopback.host, port=bait.loopback.port),
        lambda outcome, bait, _: _listener(outcome, bait.loopback, "the host's loopback listener"),
    ),
    Probe(
        "reach the network",
        "connect to a listener on an address of the host a networked sandbox could reach",
        lambda bait, _: _CONNECT.format(host=bait.network.host, port=bait.network.port) if bait.network else "",
        lambda outcome, bait, _: _listener(outcome, bait.network, "the host's listener at"),
        unprobed=lambda bait: (
            None
            if bait.network
            else "no address of this machine stands for the network here (for e2b, E2B's cloud decides it)"
        ),
    ),
    Probe(
        "signal the host",
        "os.kill a process the doctor started on the host",
        lambda bait, _: _SIGNAL.format(pid=bait.child.pid),
        _killed,
    ),
    _escape("escape through a generator's frame", "gi_frame.f_back.f_globals", _GENERATOR_FRAME),
    _escape("escape through sys._getframe", "sys._getframe(0).f_globals", _GETFRAME),
    _escape("escape through a function's code", "(lambda: 0).__code__ and __globals__", _FUNCTION_INTERNALS),
    _escape("escape through subclasses", "().__class__.__base__.__subclasses__()", _SUBCLASSES),
    Probe(
        "escape through str.format",
        "'{0.__globals__[...]}'.format(...)",
        lambda bait, _: _FORMAT,
        lambda outcome, bait, _: _environment_back(outcome, bait),
        executors=frozenset({"local"}),
    ),
    Probe(
        "escape through str.format_map",
        "'{f.__globals__[...]}'.format_map(...)",
        lambda bait, _: _FORMAT_MAP,
        lambda outcome, bait, _: _environment_back(outcome, bait),
        executors=frozenset({"local"}),
    ),
    Probe(
        "fork past the pids limit",
        f"start {FORK_ATTEMPTS} processes at once (then stop them)",
        lambda bait, _: _FORK.format(attempts=FORK_ATTEMPTS),
        _fork_judge,
        before=_fork_before,
    ),
    Probe(
        "allocate past the memory limit",
        "fill a block of memory past the limit",
        lambda bait, limit: _MEMORY.format(size=limit + MEMORY_MARGIN),
        _memory_judge,
    ),
)


def run_probes(executor: Executor, bait: Bait, limit: int, probes: tuple[Probe, ...] = PROBES) -> Iterator[Verdict]:
    """Run each probe that applies to the bait's executor, in turn, and judge it on the host; `limit`
    is the memory limit (in bytes) the memory probe goes past."""
    for probe in probes:
        if probe.executors is not None and bait.executor_name not in probe.executors:
            continue
        why_not = probe.unprobed(bait)
        if why_not:
            yield Verdict(probe.name, None, why_not)
            continue
        probe.before(bait)
        code = probe.code(bait, limit)
        outcome = Outcome.of(executor, code)
        if bait.processes is not None:
            bait.extra_processes = bait.processes.close()
            bait.processes = None
        got_through = probe.judge(outcome, bait, limit)
        yield Verdict(probe.name, got_through is None, got_through or "")


def memory_limit(executor: Executor) -> int:
    """The memory limit the executor's sandbox runs under, as far as the host knows it (1 GiB where none is known)."""
    given = getattr(executor, "max_memory_bytes", None)
    if isinstance(given, int):
        return given
    hardening = getattr(getattr(executor, "spec", None), "hardening", None)
    if hardening is not None:
        from codeward.executors.docker.hardening import size_in_bytes

        found = size_in_bytes(hardening.mem_limit)
        if found:
            return found
    return DEFAULT_MEMORY_LIMIT
