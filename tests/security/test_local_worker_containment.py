"""What the policy cannot stop, the worker contains: single C calls that hang, crash or allocate.

Each of these is one line of ordinary-looking code that no guard sees (the work happens inside
one C call), so in the host's own process it would hang, crash or swell the user's program.
In a worker, the hang is killed a second after the time limit, the crash and the memory
blow-up end in the worker, the host's memory does not move, and the executor goes on with a
new worker. They run in the worker only: in process they would take the test run down with them.
"""

from __future__ import annotations

import time

import pytest

from codeward.executors.base import SandboxError
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
    error = attack("x = iter([1])\nfor i in range(200_000):\n    x = map(abs, x)\nnext(x)", control="crashes")
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
