"""The worker's limits and the operating system's layers, attacked directly.

Attacks through the security harness live in tests/security (test_local_worker_containment.py);
these check what the harness cannot express: memory across blocks, a host thread, and the OS
layers with the policy opened (`authorized_imports=["*"]` hands the code the real os, socket and
io modules, so only the worker's confinement stands between them and the machine; each attack's
control is the same code in a worker with confinement="none", where it does the harm).
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from codeward.executors import LocalExecutor
from codeward.executors.base import ExecutionError, SandboxError
from codeward.executors.local.watchdog import resident_bytes

pytestmark = pytest.mark.timeout(120)

#: What one test may let the host grow by: the code below would grow it by gigabytes.
HOST_GROWTH = 200 * 1024**2


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


def test_numpy_asking_for_gigabytes_fails_in_the_worker():
    pytest.importorskip("numpy")
    before = resident_bytes()
    with LocalExecutor(authorized_imports=["numpy"]) as executor:
        with pytest.raises(ExecutionError) as info:
            executor.run("import numpy as np\nnp.ones(400_000_000)")
        assert info.value.error_type == "MemoryError"
        assert executor.run("np.ones(3).tolist()").output == [1.0, 1.0, 1.0]
    assert resident_bytes() - before < HOST_GROWTH


def test_a_backtracking_regex_is_stopped_off_the_main_thread():
    """The CPU timer that interrupts C code works only on the main thread; a host that runs the
    executor from another thread (a web server's worker) relies on the worker's own main thread."""
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


# What the worker sends back is data from a stranger ----------------------------------------------
# With the policy open, the model's code can write to the worker's socket itself and forge frames.

FORGE = (
    "import os, struct, sys\n"
    "head = HEAD\n"
    "os.write(int(sys.argv[1]), struct.pack('!IQ', len(head), BODY_SIZE) + head)\n"
    "import time\n"
    "time.sleep(5)"
)
FORGERIES = {
    "over-the-limit": ("b'{}'", 2**40, "over the limit"),
    "not-json": ("b'{not json'", 0, "does not decode"),
    "more-after-the-header": ('b\'{"op": "done"} {}\'', 0, "does not decode"),
    "not-an-object": ("b'[1, 2]'", 0, "not a dict"),
    "deeply-nested": ("b'[' * 100000 + b']' * 100000", 0, "more than plain fields"),
    "parts-that-do-not-fit": ('b\'{"op": "done", "parts": [1000000]}\'', 10, "do not fit"),
}


@pytest.mark.parametrize(("head", "body_size", "words"), FORGERIES.values(), ids=FORGERIES.keys())
def test_a_forged_frame_ends_the_worker_not_the_host(head, body_size, words):
    before = resident_bytes()
    with LocalExecutor(authorized_imports=["*"], timeout_seconds=10) as executor:
        executor.send_variables({"kept": 1})
        with pytest.raises(SandboxError, match=words):
            executor.run(FORGE.replace("HEAD", head).replace("BODY_SIZE", str(body_size)))
        assert executor.run("kept + 1").output == 2
    assert resident_bytes() - before < HOST_GROWTH
