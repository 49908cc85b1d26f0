"""The worker's confinement, attacked in plain Python (no policy) in a fresh interpreter.

Each attack runs twice: after `confine(...)` it must fail, and without it (the control) it must
succeed, so that a test can tell a layer that holds from an attack that could never have worked.
A test skips only when this machine lacks the layer it needs, with the reason `missing_layers()`
gives.
"""

from __future__ import annotations

import ctypes.util
import errno
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from codeward.executors.local import confinement

SRC = Path(confinement.__file__).resolve().parents[3]
MISSING = confinement.missing_layers()

SCRIPT = """
import errno, os, sys
from pathlib import Path
from codeward.executors.local import confinement
WRITABLE, OUTSIDE = Path(sys.argv[1]), Path(sys.argv[2])
{setup}
if {confined}:
    failed = confinement.confine(
        read_paths=confinement.interpreter_read_paths(),
        write_paths=[WRITABLE],
        max_memory_bytes=1 << 30,
        strict={strict},
    )
    print("FAILED", failed)
"""
#: Runs the attack's `{body}` and prints its outcome: "OUTCOME ok", or the error it raised.
ATTACK = """
def attack():
{body}

try:
    attack()
except BaseException as exc:
    print("OUTCOME", type(exc).__name__, exc)
else:
    print("OUTCOME ok")
"""


def run(tmp_path: Path, body: str, *, confined: bool = True, setup: str = "", strict: bool = False) -> str:
    """Run `body` in a fresh interpreter, confined or not; return its stdout."""
    writable, outside = tmp_path / "writable", tmp_path / "outside"
    for folder in (writable, outside):
        folder.mkdir(exist_ok=True)
    (outside / "secret.txt").write_text("secret")
    code = (SCRIPT + ATTACK).format(setup=setup, confined=confined, strict=strict, body=textwrap.indent(body, "    "))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", code, str(writable), str(outside)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=writable,
    )
    assert "OUTCOME" in done.stdout, done.stdout + done.stderr
    return done.stdout


def outcome(stdout: str) -> str:
    """The attack's outcome: "ok", or the name of the exception it raised."""
    line = next(line for line in stdout.splitlines() if line.startswith("OUTCOME"))
    return line.split()[1]


def needs(layer: str) -> None:
    if layer in MISSING:
        pytest.skip(f"this machine cannot apply {layer}: {MISSING[layer]}")


# (name, code, the outcome once confined, the layer that stops it)
ATTACKS = [
    ("os_system", 'assert os.system("true") == 0', "AssertionError", "seccomp"),
    ("subprocess", 'import subprocess\nsubprocess.run(["true"], check=True)', "PermissionError", "seccomp"),
    ("fork", "pid = os.fork()\nif pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)", "PermissionError", "seccomp"),
    ("socket", "import socket\nsocket.socket().close()", "PermissionError", "seccomp"),
    ("socketpair", "import socket\nfor end in socket.socketpair():\n    end.close()", "PermissionError", "seccomp"),
    ("signal_parent", "os.kill(os.getppid(), 0)", "PermissionError", "seccomp"),
    ("signal_group", "os.kill(0, 0)", "PermissionError", "seccomp"),
    (
        "renice_parent",
        "ppid = os.getppid()\nos.setpriority(os.PRIO_PROCESS, ppid, os.getpriority(os.PRIO_PROCESS, ppid))",
        "PermissionError",
        "seccomp",
    ),
    ("chown", 'f = WRITABLE / "f"\nf.write_text("x")\nos.chown(f, 1234, 1234)', "PermissionError", "no_new_privs"),
    ("shared_memory", "import mmap\nmmap.mmap(-1, 1 << 30).close()", "PermissionError", "seccomp"),
    ("read_outside", 'assert (OUTSIDE / "secret.txt").read_text() == "secret"', "PermissionError", "landlock"),
    ("write_outside", '(OUTSIDE / "new.txt").write_text("x")', "PermissionError", "landlock"),
    ("etc_passwd", 'open("/etc/passwd").read()', "PermissionError", "landlock"),
    ("host_environ", 'open(f"/proc/{os.getppid()}/environ", "rb").read()', "PermissionError", "landlock"),
    (
        "raise_memory_limit",
        "import resource\nresource.setrlimit(resource.RLIMIT_DATA, (resource.RLIM_INFINITY,) * 2)",
        "ValueError",
        "rlimits",
    ),
    ("memfd", 'fd = os.memfd_create("held")\nos.ftruncate(fd, 1 << 30)', "PermissionError", "seccomp"),
    (
        "stack_mapping_beyond_the_memory_limit",  # MAP_GROWSDOWN: a stack, which RLIMIT_DATA does not count
        (
            "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.mmap.restype = ctypes.c_void_p\n"
            "libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]\n"
            "if libc.mmap(None, 3_000_000_000, 3, 0x122, -1, 0) == 2**64 - 1:\n    raise OSError(ctypes.get_errno(), 'mmap')"
        ),
        "PermissionError",
        "seccomp",
    ),
    (
        "shared_writable_file_mapping",
        'import mmap\nf = open(WRITABLE / "m", "w+b")\nf.truncate(1 << 20)\nmmap.mmap(f.fileno(), 1 << 20).close()',
        "PermissionError",
        "seccomp",
    ),
    (
        "kernel_signals_parent",
        "import fcntl\nr, w = os.pipe()\nfcntl.fcntl(r, fcntl.F_SETOWN, os.getppid())",
        "PermissionError",
        "seccomp",
    ),
    ("kernel_signal_choice", "import fcntl\nr, w = os.pipe()\nfcntl.fcntl(r, 10, 9)", "PermissionError", "seccomp"),
    (
        "clear_parent_death_signal",
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nif libc.prctl(1, 0, 0, 0, 0):\n    raise OSError(ctypes.get_errno(), 'prctl')",
        "PermissionError",
        "seccomp",
    ),
    (
        "lock_a_readable_file",
        "import fcntl\nwith open(os.__file__) as f:\n    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)",
        "PermissionError",
        "seccomp",
    ),
    (
        "read_the_parents_limits",
        "import resource\nresource.prlimit(os.getppid(), resource.RLIMIT_NOFILE)",
        "OSError",
        "seccomp",
    ),
    ("chmod_outside", 'os.chmod(OUTSIDE / "secret.txt", 0o666)', "PermissionError", "seccomp"),
    ("touch_outside", 'os.utime(OUTSIDE / "secret.txt", (0, 0))', "PermissionError", "seccomp"),
    (
        "unlisted_system_call",
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nif libc.personality(0xFFFFFFFF) < 0:\n    raise OSError(ctypes.get_errno(), 'personality')",
        "OSError",
        "seccomp",
    ),
    ("numpy_3_gb", "import numpy\nnumpy.ones(400_000_000)", "MemoryError", "rlimits"),
    ("bytes_3_gb", '(0).to_bytes(3_000_000_000, "big")', "MemoryError", "rlimits"),
]

# What the worker must still do once confined: the same outcome with or without confinement.
WORK = [
    (
        "own_files",
        'f = WRITABLE / "a.txt"\nf.write_text("hi")\nf.rename(WRITABLE / "b.txt")\nassert (WRITABLE / "b.txt").read_text() == "hi"\n(WRITABLE / "b.txt").unlink()\n(WRITABLE / "d").mkdir()',
    ),
    (
        "threads",
        "import threading\nseen = []\nts = [threading.Thread(target=seen.append, args=(i,)) for i in range(8)]\nfor t in ts:\n    t.start()\nfor t in ts:\n    t.join()\nassert sorted(seen) == list(range(8))",
    ),
    (
        "numpy_pandas",
        "import numpy, pandas\nassert numpy.ones(10).sum() == 10\nassert pandas.DataFrame({'a': [1, 2]}).a.sum() == 3\nassert (numpy.ones((200, 200)) @ numpy.ones((200, 200)))[0, 0] == 200",
    ),
    (
        "files_through_pandas_and_a_read_only_map",
        "import numpy, pandas\npandas.DataFrame({'a': [1, 2]}).to_csv(WRITABLE / 'a.csv', index=False)\nassert pandas.read_csv(WRITABLE / 'a.csv', memory_map=True).a.sum() == 3\nnumpy.arange(4).tofile(WRITABLE / 'n.bin')\nassert numpy.memmap(WRITABLE / 'n.bin', dtype=int, mode='r').sum() == 6",
    ),
    (
        "sleep_and_time",
        "import time, datetime\nstart = time.monotonic()\ntime.sleep(0.01)\nassert time.monotonic() > start\ndatetime.datetime.now()",
    ),
    (
        "own_limits",
        "import resource\nresource.getrlimit(resource.RLIMIT_NOFILE)\nresource.prlimit(os.getpid(), resource.RLIMIT_DATA)",
    ),
    ("signal_self", "os.kill(os.getpid(), 0)"),
    ("nice_self", "os.nice(1)\nos.setpriority(os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, 0))"),
    ("a_few_megabytes", "assert len(bytearray(50_000_000)) == 50_000_000"),
]


@pytest.fixture(autouse=True)
def _linux_only() -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("the layers are Linux's: elsewhere only resource limits apply")


@pytest.mark.parametrize(("name", "body", "refused", "layer"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_attack_fails_once_confined(tmp_path: Path, name: str, body: str, refused: str, layer: str) -> None:
    needs(layer)
    if name.startswith("numpy"):
        pytest.importorskip("numpy")
    stdout = run(tmp_path, body)
    assert f"FAILED {sorted(MISSING, key=confinement.LAYERS.index)}" in stdout
    assert outcome(stdout) == refused, stdout


@pytest.mark.parametrize(("name", "body", "refused", "layer"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_attack_succeeds_without_confinement(tmp_path: Path, name: str, body: str, refused: str, layer: str) -> None:
    if name.startswith("numpy"):
        pytest.importorskip("numpy")
    if name in ("raise_memory_limit", "chown") and os.geteuid() != 0:
        pytest.skip("only root may do this, confined or not")
    assert outcome(run(tmp_path, body, confined=False)) == "ok"


@pytest.mark.parametrize("confined", [True, False], ids=["confined", "control"])
@pytest.mark.parametrize(("name", "body"), WORK, ids=[w[0] for w in WORK])
def test_ordinary_work_goes_on(tmp_path: Path, name: str, body: str, confined: bool) -> None:
    if name == "numpy_pandas":
        pytest.importorskip("pandas")
    stdout = run(tmp_path, body, confined=confined)
    assert ("FAILED" in stdout) == confined
    assert outcome(stdout) == "ok", stdout


NOTHING_APPLIED = """
import resource
try:
    confinement.confine(read_paths=[], write_paths=[], max_memory_bytes=1 << 30, strict=True)
except confinement.ConfinementError as exc:
    print("REFUSED", exc)
assert resource.getrlimit(resource.RLIMIT_DATA)[0] != 1 << 30
assert open("/etc/passwd").read()
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
"""


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        (
            "confinement._landlock_abi = lambda: -errno.ENOSYS",
            "landlock: the kernel has no Landlock (Linux 5.13+ needed)",
        ),
        ("sys.modules['pyseccomp'] = None", "seccomp: the pyseccomp package is not installed: pip install"),
    ],
    ids=["landlock", "seccomp"],
)
def test_strict_refuses_a_missing_layer_before_applying_anything(tmp_path: Path, setup: str, reason: str) -> None:
    stdout = run(tmp_path, NOTHING_APPLIED, confined=False, setup=setup)
    assert f"REFUSED the worker cannot be confined as required ({reason}" in stdout
    assert outcome(stdout) == "ok", stdout


@pytest.mark.parametrize(
    "setup",
    ["import threading\nthreading.Thread(target=threading.Event().wait, daemon=True).start()", "import numpy"],
    ids=["thread", "numpy"],
)
def test_confine_refuses_to_start_after_threads(tmp_path: Path, setup: str) -> None:
    if setup == "import numpy":
        pytest.importorskip("numpy")
    body = """
print("THREADS", len(os.listdir("/proc/self/task")))
try:
    confinement.confine(read_paths=[], write_paths=[], max_memory_bytes=None, strict=False)
except confinement.ConfinementError as exc:
    print("REFUSED", exc)
assert open("/etc/passwd").read()
"""
    stdout = run(tmp_path, body, confined=False, setup=setup)
    if "THREADS 1\n" in stdout:
        pytest.skip("this numpy's BLAS starts no thread when it loads")
    assert "REFUSED confine() must run before any thread starts" in stdout
    assert outcome(stdout) == "ok", stdout


def test_without_strict_the_other_layers_still_apply(tmp_path: Path) -> None:
    needs("seccomp")
    body = 'assert open("/etc/passwd").read()\nos.fork()'
    stdout = run(tmp_path, body, setup="confinement._landlock_abi = lambda: -errno.ENOSYS")
    assert "FAILED ['landlock']" in stdout
    assert outcome(stdout) == "PermissionError", stdout


def test_missing_layers_names_known_layers_with_reasons() -> None:
    assert set(MISSING) <= set(confinement.LAYERS)
    assert all(isinstance(reason, str) and reason for reason in MISSING.values())
    assert "rlimits" not in MISSING


@pytest.mark.parametrize(
    ("code", "words"),
    [(errno.ENOSYS, "Linux 5.13+ needed"), (errno.EOPNOTSUPP, "lsm= boot parameter"), (errno.EPERM, "refused here")],
)
def test_missing_landlock_says_why(monkeypatch: pytest.MonkeyPatch, code: int, words: str) -> None:
    monkeypatch.setattr(confinement, "_landlock_abi", lambda: -code)
    assert words in confinement.missing_layers()["landlock"]


def test_missing_libseccomp_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ctypes.util.find_library
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None if name == "seccomp" else real(name))
    monkeypatch.delitem(sys.modules, "pyseccomp", raising=False)
    assert confinement.missing_layers()["seccomp"] == "libseccomp is not installed: apt-get install libseccomp2"


def test_elsewhere_than_linux_only_resource_limits_apply(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    reasons = confinement.missing_layers()
    assert reasons == dict.fromkeys(["no_new_privs", "seccomp", "landlock"], confinement.NOT_LINUX)


def test_interpreter_read_paths_cover_the_interpreter_and_nothing_private() -> None:
    paths = confinement.interpreter_read_paths()
    assert Path(sys.prefix) in paths
    assert all(path.exists() for path in paths)
    assert not any(path in (Path("/proc"), Path("/etc"), Path("/etc/passwd"), Path("/")) for path in paths)
