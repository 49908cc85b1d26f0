"""What the policy cannot stop, the worker contains: single C calls that hang, crash or allocate.

Each of these is one line of ordinary-looking code that no guard sees (the work happens inside
one C call), so in the host's own process it would hang, crash or swell the user's program.
In a worker, the hang is killed a second after the time limit, the crash and the memory
blow-up end in the worker, the host's memory does not move, and the executor goes on with a
new worker. They run in the worker only: in process they would take the test run down with them.
"""

from __future__ import annotations

import os
import time

import pytest

from codeward.executors import LocalExecutor
from codeward.executors.base import ExecutionError, SandboxError
from codeward.executors.local.process import GRACE_SECONDS
from codeward.executors.local.watchdog import resident_bytes
from tests.security.conftest import SANDBOX_OFF

pytestmark = pytest.mark.timeout(120)

worker_only = pytest.mark.parametrize("isolation", ["off"] if SANDBOX_OFF else ["process"])

#: What one test may let the host grow by: the attacks below would grow it by gigabytes.
HOST_GROWTH = 200 * 1024**2

HANGS = {
    "iter-int-sentinel": "any(iter(int, 1))",
    "counter-elements": "import collections\nany(collections.Counter({0: 10**15}).elements())",
    "pbkdf2": "import hashlib\nhashlib.pbkdf2_hmac('sha256', b'x', b'y', 10**9)",
}


@worker_only
@pytest.mark.parametrize("code", HANGS.values(), ids=HANGS.keys())
def test_a_c_call_that_never_returns_is_killed_a_second_after_the_limit(code, attack):
    started = time.monotonic()
    error = attack(code, control="exhausts", timeout_seconds=1, max_operations=10**15)
    if not SANDBOX_OFF:
        assert isinstance(error, SandboxError) and "time limit" in error.message and "lost" in error.message
        assert time.monotonic() - started < 1 + GRACE_SECONDS + 8, "the control and the attack took too long"


@worker_only
def test_a_segfault_in_c_ends_the_worker_not_the_host(attack):
    error = attack("x = iter([1])\nfor i in range(1_000_000):\n    x = map(abs, x)\nnext(x)", control="crashes")
    if not SANDBOX_OFF:
        assert isinstance(error, SandboxError) and "SIGSEGV" in error.message


BLOW_UPS = {
    "to-bytes": "(0).to_bytes(3_000_000_000, 'big')",
    "operator-mul": "import operator\noperator.mul('a', 3_000_000_000)",
    "bytearray-ljust": "bytearray(b'a').ljust(3_000_000_000)",
    "join-repeated": "s = 'a' * 9_000_000\n''.join([s] * 300)",
    "translate": "s = 'a' * 9_000_000\ns.translate({97: 'b' * 3000})",
    "re-sub-empty": "import re\nre.sub('', 'x' * 10**6, 'a' * 3000)",
}


@worker_only
@pytest.mark.parametrize("code", BLOW_UPS.values(), ids=BLOW_UPS.keys())
def test_one_call_that_allocates_gigabytes_fails_in_the_worker(code, attack):
    before = resident_bytes()
    error = attack(code, control="exhausts", max_value_size=10**12, timeout_seconds=10)
    if not SANDBOX_OFF:
        assert error.message.startswith("the code grew memory by more than the worker's") or isinstance(
            error, SandboxError
        ), error.message
        assert resident_bytes() - before < HOST_GROWTH


@pytest.mark.skipif(SANDBOX_OFF, reason="needs the worker")
def test_the_memory_cap_holds_across_blocks_and_the_host_does_not_grow():
    pytest.importorskip("numpy")
    before = resident_bytes()
    with LocalExecutor(authorized_imports=["numpy"], max_memory_bytes=1 << 30) as executor:
        executor.run("import numpy as np")
        with pytest.raises(ExecutionError) as info:
            for block in range(4):  # 480 MB each, all kept: the third cannot fit in 1 GiB
                executor.run(f"a{block} = np.ones(60_000_000)")
        assert info.value.error_type == "MemoryError" and block == 2
        assert executor.run("float(a0[0] + a1[-1])").output == 2.0, "what fitted is kept"
        assert resident_bytes() - before < HOST_GROWTH


@pytest.mark.skipif(SANDBOX_OFF, reason="needs the worker")
def test_numpy_asking_for_gigabytes_fails_in_the_worker():
    pytest.importorskip("numpy")
    before = resident_bytes()
    with LocalExecutor(authorized_imports=["numpy"]) as executor:
        with pytest.raises(ExecutionError) as info:
            executor.run("import numpy as np\nnp.ones(400_000_000)")
        assert info.value.error_type == "MemoryError"
        assert executor.run("np.ones(3).tolist()").output == [1.0, 1.0, 1.0]
    assert resident_bytes() - before < HOST_GROWTH


@pytest.mark.skipif(SANDBOX_OFF, reason="needs the worker")
def test_a_backtracking_regex_is_stopped_off_the_main_thread():
    """The CPU timer that interrupts C code works only on the main thread; a host that runs the
    executor from another thread (a web server's worker) relies on the worker's own main thread."""
    import threading

    outcome: list[BaseException] = []

    def run() -> None:
        with LocalExecutor(timeout_seconds=1) as executor:
            try:
                executor.run("import re\nre.match('(a+)+$', 'a' * 40 + 'b')")
            except (ExecutionError, SandboxError) as error:
                outcome.append(error)

    started = time.monotonic()
    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert outcome and "limit" in str(outcome[0]) and time.monotonic() - started < 10


# The operating system's layers, tested with the policy out of the way ---------------------------
# With authorized_imports=["*"] the model's code holds the real os, socket and io modules: only
# the worker's confinement stands between them and the machine. Each attack has its control:
# the same code in a worker with confinement="none" does the harm.

OS_ATTACKS = {
    "shell": ("import os\nos.system('touch CANARY') == 0", True),
    "subprocess": ("import subprocess\nsubprocess.run(['touch', 'CANARY'])\n'ran'", "ran"),
    "socket": ("import socket\nsocket.socket().close()\n'ran'", "ran"),
    "read-outside": ("import io\nio.open(SECRET_FILE).read()", "host secret"),
    "write-outside": ("import io\nio.open('CANARY', 'w').close()\n'ran'", "ran"),
    "host-environment": ("import os\nos.environ.get('CODEWARD_TEST_' + 'KEY', 'absent')", "host secret"),
    "host-environ-file": ("import io, os\nb'PATH=' in io.open(f'/proc/{os.getppid()}/environ', 'rb').read()", True),
    "signal-the-host": ("import os\nos.kill(os.getppid(), 0)\n'ran'", "ran"),
    "fork": ("import os\npid = os.fork()\nif pid == 0:\n    os.abort()\nos.waitpid(pid, 0)\n'ran'", "ran"),
}


@pytest.mark.skipif(SANDBOX_OFF, reason="needs the worker")
@pytest.mark.parametrize(("code", "harm"), OS_ATTACKS.values(), ids=OS_ATTACKS.keys())
def test_the_confined_worker_refuses_the_machine_with_the_policy_open(code, harm, tmp_path, monkeypatch):
    canary, secret = tmp_path / "pwned", tmp_path / "secret.txt"
    secret.write_text("host secret")
    monkeypatch.setenv("CODEWARD_TEST_KEY", "host secret")
    code = code.replace("CANARY", str(canary)).replace("SECRET_FILE", repr(str(secret)))
    with LocalExecutor(authorized_imports=["*"], confinement="none", env=dict(os.environ)) as unconfined:
        assert unconfined.run(code).output == harm, "broken attack: it does no harm without confinement"
    canary.unlink(missing_ok=True)
    with LocalExecutor(authorized_imports=["*"]) as executor:
        assert executor.missing_layers == []
        try:
            outcome = executor.run(code).output
        except ExecutionError as error:
            outcome = error.error_type
        assert outcome != harm and not canary.exists(), f"confinement let it through: {outcome!r}"
        assert executor.run("1 + 1").output == 2


@pytest.mark.skipif(SANDBOX_OFF, reason="needs the worker")
def test_allowed_paths_are_the_folders_the_confined_worker_can_write(tmp_path):
    inside, outside = tmp_path / "work", tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    code = "import io\nwith io.open({!r}, 'w') as f:\n    f.write('x')\n'wrote'"
    with LocalExecutor(authorized_imports=["*"], allowed_paths=[inside]) as executor:
        assert executor.run(code.format(str(inside / "a.txt"))).output == "wrote"
        with pytest.raises(ExecutionError) as info:
            executor.run(code.format(str(outside / "a.txt")))
        assert info.value.error_type == "PermissionError"
    assert (inside / "a.txt").read_text() == "x" and not (outside / "a.txt").exists()
