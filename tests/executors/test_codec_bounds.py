"""Hostile payloads decode in time linear in their size, or are refused naming the bound they break.

A sandbox can write whatever payload it likes. These tests play such a sandbox: first against
the codec, with payloads that kept the host busy for 20 s and more before the bounds; then end to
end against a jupyter kernel (and a docker container, in tests/executors/docker), where the
sandbox's code makes its own codec send them as a tool's argument and as its last value. The
time bounds are functional ones, far above what a refusal takes and far below what the attacks did.
"""

from __future__ import annotations

import inspect
import json
import random
import sys
import time
from collections.abc import Iterator
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest

from codeward.executors.base import ExecutionError, ExecutionTimeout, Executor
from codeward.executors.codec import CodecError, bounds, decoding_deadline, dumps, loads
from codeward.executors.jupyter import JupyterExecutor
from codeward.executors.kernel.session import KernelSession
from codeward.platform.tools import tool
from tests.shared_sandbox import SharedSandbox
from tests.timing import busy_allowance, busy_seconds

#: Ints k * COLLIDING for k = 1, 2, ... all hash alike (to 0): an int's hash is its remainder modulo this.
COLLIDING = sys.hash_info.modulus
#: What a refusal, or a payload within the bounds, may take on a busy machine (a second on a quiet
#: one, where a refusal takes under 0.3 s): the attacks took 18 s to 52 s.
SECONDS = busy_seconds(1.0)


def big(bits: int, seed: int = 0) -> dict[str, str]:
    """A tagged int of exactly `bits` bits, as the encoder writes large ints."""
    return {"$": "int", "hex": hex(random.Random(seed).getrandbits(bits) | 1 << (bits - 1))}


def colliding(count: int) -> list[int]:
    return [k * COLLIDING for k in range(1, count + 1)]


def timed_loads(text: str, **options: Any) -> Any:
    """`loads`; once it has returned or refused (a `CodecError`, which the caller checks), that it took
    under `SECONDS`. Any other failure is reported as it is."""
    started = time.perf_counter()
    try:
        decoded = loads(text, **options)
    except CodecError:
        took = time.perf_counter() - started
        assert took < SECONDS, f"refused, but after {took:.2f} s"
        raise
    took = time.perf_counter() - started
    assert took < SECONDS, f"decoded, but after {took:.2f} s"
    return decoded


HOSTILE = {
    "Fraction of two 6-million-bit ints": (
        {"$": "fraction", "v": [big(6_000_000, 1), big(6_000_000, 2)]},
        "refused an int of 6000000 bits: ints are capped at 332193 bits",
    ),
    "Fraction of two 300,000-bit ints": (
        {"$": "fraction", "v": [big(300_000, 1), big(300_000, 2)]},
        "refused a Fraction whose numerator and denominator both have more than 4096 bits",
    ),
    "int of 6 million bits": (big(6_000_000), "refused an int of 6000000 bits"),
    "set of 60,000 ints with one hash": (
        {"$": "set", "v": colliding(60_000)},
        "refused a set of 60000 keys, 59999 of which share a hash with another: at most 64 may",
    ),
    "frozenset of 60,000 ints with one hash": (
        {"$": "frozenset", "v": colliding(60_000)},
        "refused a frozenset of 60000 keys, 59999 of which share a hash",
    ),
    "dict of 60,000 keys with one hash": (
        {"$": "dict", "v": [[k, None] for k in colliding(60_000)]},
        "refused a dict of 60000 keys, 59999 of which share a hash",
    ),
    "dict of one key 60,000 times": (
        {"$": "dict", "v": [[COLLIDING, None]] * 60_000},
        "refused a dict of 60000 keys, 59999 of which share a hash",
    ),
    "Decimal with exponent 10**9": (
        {"$": "decimal", "v": "1E+1000000000"},
        r"refused a Decimal of 1 digits and exponent 1000000000: .* exponents within \+-100000",
    ),
    "Decimal of a million digits": (
        {"$": "decimal", "v": "9" * 1_000_000},
        "refused a Decimal of 1000000 characters: Decimals are capped at 100000 digits",
    ),
    "array of 64 dimensions of 300,000 bits": (
        {"$": "nd", "dtype": "<f8", "shape": [big(300_000)] * 64, "order": "C", "b64": ""},
        "invalid array shape: at most 64 dimensions, each from 0 to 2\\*\\*63 - 1",
    ),
}


@pytest.mark.parametrize("tree, message", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_payload_is_refused_quickly_naming_its_bound(tree: Any, message: str) -> None:
    text = json.dumps(tree)
    with pytest.raises(CodecError, match=message):
        timed_loads(text)


@pytest.mark.parametrize("depth", [2_000, 200_000])
def test_deep_nesting_is_refused_quickly(depth: int) -> None:
    with pytest.raises(CodecError, match="nested too deeply"):
        timed_loads('{"$":"set","v":[' * depth + "]}" * depth)


def test_a_long_decimal_int_is_refused_whatever_pythons_own_limit() -> None:
    """Python caps decimal ints at 4,300 digits by default, but a process may lift its limit: ours holds then."""
    with pytest.raises(CodecError, match="4300 digits"):
        timed_loads("1" * 100_000)
    previous = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        with pytest.raises(CodecError, match=r"refused an int of 100000 decimal digits: .* capped at 4300 digits"):
            timed_loads("[1, -" + "9" * 100_000 + "]")
        assert timed_loads(f"[-{'9' * 4300}]") == [-(10**4300 - 1)]
    finally:
        sys.set_int_max_str_digits(previous)


def test_the_total_size_counts_text_and_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounds, "MAX_PAYLOAD", 1000)
    assert loads("[" + "1," * 400 + "1]") == [1] * 401
    with pytest.raises(CodecError, match="refused a payload of 1203 bytes: the codec decodes at most 1000"):
        loads("[" + "1," * 600 + "1]")
    with pytest.raises(CodecError, match="refused a payload of 1018 bytes"):
        loads('{"$":"part","i":0}', parts=[b"x" * 1000])


#: Values at the bounds, which must still arrive exactly.
AT_THE_BOUNDS = {
    "int of 100,000 digits": -(10**100_000 - 1),
    "int of 332,193 bits": 2**332_193 - 1,
    "Fraction with a 4096-bit term": Fraction(2**332_000 + 1, 2**4095 + 3),
    "Decimal of 100,000 digits, exponent 100,000": Decimal("9" * 100_000 + "E+100000"),
    "Decimal of 100,000 digits, exponent -100,000": Decimal("-" + "9" * 100_000 + "E-100000"),
    "set of 10,000 ints, 65 of them with one hash": set(colliding(64)) | set(range(10_000)),
    "dict of 1,000 tuple keys": {(i, str(i)): i for i in range(1_000)},
    "set of -1 and -2, which hash alike, and others": set(range(-100, 100)),
}


@pytest.mark.parametrize("value", AT_THE_BOUNDS.values(), ids=AT_THE_BOUNDS.keys())
def test_values_at_the_bounds_round_trip(value: Any) -> None:
    decoded = timed_loads(dumps(value))
    assert decoded == value and type(decoded) is type(value)


def test_just_past_the_bounds_is_refused() -> None:
    with pytest.raises(CodecError, match="refused an int of 332194 bits"):
        loads(dumps(2**332_193))
    with pytest.raises(CodecError, match="more than 4096 bits"):
        loads(dumps(Fraction(2**5000 + 1, 2**4096 + 1)))
    with pytest.raises(CodecError, match="exponent 100001"):
        loads(dumps(Decimal("1E+100001")))
    with pytest.raises(CodecError, match="66 keys, 65 of which share a hash"):
        loads(dumps(set(colliding(66))))


def test_payloads_of_worst_case_values_within_the_bounds_decode_at_ordinary_speed() -> None:
    """Within the bounds, the worst costs stay linear: here 4 MB of the largest Fractions the bounds allow,
    and sets of 64 keys with one hash, in the time of an ordinary payload of that size."""
    fractions_text = json.dumps([{"$": "fraction", "v": [big(332_193, i), big(4096, i)]} for i in range(40)])
    sets_text = json.dumps([{"$": "set", "v": colliding(64)}] * 2_000)
    assert len(timed_loads(fractions_text)) == 40
    assert len(timed_loads(sets_text)) == 2_000


def test_a_decoding_deadline_stops_a_decode_that_outlasts_it() -> None:
    text = dumps([{1}] * 5_000)
    with decoding_deadline(time.monotonic() - 1), pytest.raises(CodecError, match="ran past the time limit"):
        loads(text)
    with decoding_deadline(time.monotonic() + 60):
        assert len(loads(text)) == 5_000
    assert len(loads(text)) == 5_000  # outside the block, no deadline


@pytest.mark.parametrize("digits", [1, 4_299], ids=["small-ints", "long-ints"])
def test_a_decoding_deadline_stops_a_payload_of_ints_alone(digits: int) -> None:
    """No object for the hook to count: the ints' own parser looks at the clock (300 MB of 4,299-digit
    ints held the host 10 s past a 3 s deadline before it did)."""
    text = "[" + ",".join(["9" * digits] * 5_000) + "]"
    with decoding_deadline(time.monotonic() - 1), pytest.raises(CodecError, match="ran past the time limit"):
        loads(text)
    with decoding_deadline(time.monotonic() + 60):
        assert len(loads(text)) == 5_000
    assert len(loads(text)) == 5_000


# ------------------------------------------------------------------------- end to end

#: The sandbox's side of the attacks: a class whose instances its codec encodes as the JSON tree
#: they hold, so the model's code sends the host any payload it writes.
HOSTILE_SANDBOX = """
import random, sys

class Raw:
    def __init__(self, tree):
        self.tree = tree

sys.modules["_codeward_codec.wire"].ENCODERS[Raw] = lambda encoder, raw: raw.tree

def big(bits, seed):
    return {"$": "int", "hex": hex(random.Random(seed).getrandbits(bits) | 1 << (bits - 1))}

HOSTILE = {
    "fraction": Raw({"$": "fraction", "v": [big(6_000_000, 1), big(6_000_000, 2)]}),
    "set": Raw({"$": "set", "v": [k * (2**61 - 1) for k in range(1, 60_001)]}),
    # Within every bound, but 50 MB of one-item sets take the host seconds past the time limit to decode.
    "slow": Raw([{"$": "set", "v": [1]}] * 2_500_000),
}
"""

#: What the host says of each, in the sandbox's error or in the executor's.
REFUSALS = {
    "fraction": "refused an int of 6000000 bits",
    "set": "refused a set of 60000 keys, 59999 of which share a hash",
    "slow": "decoding the payload ran past the time limit",
}

#: The time limit of the executors under attack.
TIME_LIMIT = 3.0
#: How long a kernel sandbox's code has to stop once interrupted at its limit, before a restart.
INTERRUPT_GRACE = inspect.signature(KernelSession).parameters["interrupt_grace"].default


@tool
def echo(value: Any) -> Any:
    """Returns its argument.

    Args:
        value: anything
    """
    return value


def prepare(executor: Executor) -> Executor:
    executor.send_tools({"echo": echo})
    executor.run(HOSTILE_SANDBOX)
    return executor


def assert_a_hostile_tool_argument_comes_back_as_an_error(executor: Executor, name: str, slack: float = 2.0) -> None:
    """The request is refused; one that is refused only for taking past the time limit to decode
    ends the block as the time limit does, since the block's time is spent by then (on a busy machine
    the sandbox may still be encoding it then, past the interrupt's grace, and is restarted, as any
    code that outlives it). The sandbox goes on; then the time, against `within(slack)`.

    `slack` is how long past the limit the call may return on a quiet machine: decoding's half second,
    then the interrupt (a kernel's slow case once took 1.05 s past the limit)."""
    started = time.perf_counter()
    code = (
        f"try:\n    echo(HOSTILE[{name!r}])\n"
        "except Exception as error:\n    said = f'{type(error).__name__}: {error}'\n"
        "said"
    )
    if name == "slow":
        # Either the refusal reached the code before the cell's own interrupt did, or the interrupt won.
        try:
            said = executor.run(code).output
        except ExecutionTimeout:
            pass
        else:
            assert said.startswith("ToolCallError: ") and REFUSALS[name] in said
    else:
        said = executor.run(code).output
        assert said.startswith("ToolCallError: ") and REFUSALS[name] in said
    took = time.perf_counter() - started
    assert executor.run("1 + 1").output == 2
    # The slow case may end as code that outlives the interrupt does: after its grace, by a restart.
    allowed = within(slack) + (INTERRUPT_GRACE if name == "slow" else 0)
    assert took < allowed, f"{took:.2f} s, past {allowed:.2f} s"


def assert_a_hostile_last_value_fails_cleanly(executor: Executor, name: str, slack: float = 1.0) -> None:
    """The value is refused and the sandbox goes on; then the time, against `within(slack)`. The slow
    case's 60 MB may reach the host only after the limit on a busy machine: its message is then read
    and scanned past the limit before decoding refuses it at once, so what a harmless value of the
    same size costs, measured in the same run, is allowed on top."""
    started = time.perf_counter()
    refused = f"the sandbox sent a value codeward refuses: {REFUSALS[name]}"
    if name == "slow":
        # On a busy machine the sandbox may still be encoding its 60 MB when the block's time runs out.
        refused += f"|the code ran past its time limit of {TIME_LIMIT:g} s"
    with pytest.raises(ExecutionError, match=refused):
        executor.run(f"HOSTILE[{name!r}]")
    took = time.perf_counter() - started
    assert executor.run("len(HOSTILE)").output == len(REFUSALS), "the sandbox lost its state"
    allowed = within(slack) + (harmless_value_of_the_slow_size(executor) if name == "slow" else 0)
    assert took < allowed, f"{took:.2f} s, past {allowed:.2f} s"


def harmless_value_of_the_slow_size(executor: Executor) -> float:
    """Seconds for the sandbox to send the host a str as large as the slow payload, which it decodes at
    once: twice a str of half its size, which leaves room in the cell's output budget for the cell's own."""
    half = len(json.dumps([{"$": "set", "v": [1]}])) * 2_500_000 // 2
    started = time.perf_counter()
    assert len(executor.run(f"'x' * {half}").output) == half
    return 2 * (time.perf_counter() - started)


def within(slack: float) -> float:
    """What a hostile call may take on a busy machine: the time limit, which the clock keeps whatever
    the load, and `slack`, a quiet machine's time past it, as slowed as a busy machine slows it."""
    return busy_allowance(TIME_LIMIT, slack)


@pytest.fixture(scope="module")
def _shared_kernel() -> Iterator[SharedSandbox[Executor]]:
    with JupyterExecutor(timeout_seconds=TIME_LIMIT) as executor:
        yield SharedSandbox(executor, prepare)


@pytest.fixture
def kernel(_shared_kernel: SharedSandbox[Executor]) -> Executor:
    """The module's kernel, with `HOSTILE` defined (again, if a neighbour's test lost it)."""
    return _shared_kernel.ready()


@pytest.mark.parametrize("name", REFUSALS)
def test_a_kernel_sandbox_calling_a_tool_with_a_hostile_argument_gets_an_error_back(
    kernel: Executor, name: str
) -> None:
    assert_a_hostile_tool_argument_comes_back_as_an_error(kernel, name)


@pytest.mark.parametrize("name", REFUSALS)
def test_a_kernel_sandbox_whose_last_value_is_hostile_fails_cleanly(kernel: Executor, name: str) -> None:
    assert_a_hostile_last_value_fails_cleanly(kernel, name)
