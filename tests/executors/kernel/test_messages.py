"""A kernel's messages are a stranger's: code in the sandbox reaches the kernel's own session and can
send any message. One past twice the output budget is refused by the host's socket before it is
held; a large one of nested lists is refused by its count of lists and dicts before it grows the
host; and awaited, a large message is parsed off the event loop. Each test first shows the harm with
its rule taken away inside the test. A local jupyter kernel: the host's reading is the same for a
docker container's.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from codeward.executors import JupyterExecutor
from codeward.executors.base import SandboxError
from codeward.executors.kernel import messages, session
from tests.executors.awaiting import Heartbeat
from tests.executors.kernel.test_output_budget import BUDGET
from tests.memory import peak_growth
from tests.timing import busy_seconds

pytestmark = [pytest.mark.timeout(300), pytest.mark.skipif(sys.platform != "linux", reason="a local kernel")]

MiB = 2**20
#: Sends one stream message through the kernel's own session, bypassing what its print would do.
SEND = (
    "k = get_ipython().kernel\n"
    "k.session.send(k.iopub_socket, 'stream', {{'name': 'stdout', 'text': 'x', 'junk': {junk}}}, "
    "parent=k.get_parent())\n"
    "import time\ntime.sleep(0.5)\n'sent'"
)
#: Five million empty lists in 15 MB, under the socket's bound: 350 MB of lists once parsed.
NESTED = SEND.format(junk="[[]] * 5_000_000")
#: A 120 MB string: far past the socket's bound, which is twice the 8 MiB budget and a megabyte; held
#: unbounded, even one copy of it is more than twice what the bounded host may grow.
HUGE = SEND.format(junk="'y' * (120 * 2**20)")


def _jupyter() -> JupyterExecutor:
    return JupyterExecutor(max_output_bytes=BUDGET, timeout_seconds=60)


def test_a_message_of_nested_lists_is_refused_by_its_count(monkeypatch):
    with monkeypatch.context() as control:  # control: any number of lists
        control.setattr(messages, "MAX_CONTAINERS", 10**9)
        with _jupyter() as executor, peak_growth() as growth:
            executor.run("1")
            executor.run(NESTED)
        assert growth() > 200 * MiB, f"control: the host grew by only {growth() / MiB:.0f} MiB"
    with _jupyter() as executor:
        executor.run("kept = 1")
        with peak_growth() as growth, pytest.raises(SandboxError, match="more than 100,000 lists and dicts"):
            executor.run(NESTED)
        assert growth() < 80 * MiB, f"the host grew by {growth() / MiB:.0f} MiB"
        assert executor.run("1 + 1").output == 2


def test_a_message_past_the_bound_is_refused_before_it_is_held(monkeypatch):
    with monkeypatch.context() as control:  # control: no bound on a message's size
        control.setattr(session, "bound", lambda context, most: None)
        with _jupyter() as executor, peak_growth() as growth:
            executor.run("1")
            executor.run(HUGE)
        assert growth() > 100 * MiB, f"control: the host grew by only {growth() / MiB:.0f} MiB"
    with _jupyter() as executor, peak_growth() as growth:
        executor.run("1")
        assert executor.run(HUGE).output == "sent"  # the message is dropped; the reply still comes
        assert growth() < 50 * MiB, f"the host grew by {growth() / MiB:.0f} MiB"
        assert executor.run("1 + 1").output == 2


#: A display of JSON (a plot's spec) holding five million floats, which the C parser reads through
#: without letting go, and nothing the garbage collector tracks: 50 MB, parsed while the loop waits.
DISPLAYS = (
    "from IPython.display import publish_display_data\n"
    "publish_display_data({'application/json': {'x': [i * 0.5 for i in range(5_000_000)]}})\n'shown'"
)


def test_a_large_message_is_parsed_off_the_loop(monkeypatch):
    async def held(executor: JupyterExecutor) -> tuple[float, object]:
        await executor.arun("0")
        beat = Heartbeat()
        result = await executor.arun(DISPLAYS)
        return await beat.stop(), result.output

    with monkeypatch.context() as control:  # control: every message parsed where it is read
        control.setattr(messages.pieces, "PIECE", 2**40)
        with JupyterExecutor(timeout_seconds=60) as executor:
            on_the_loop, output = asyncio.run(held(executor))
        assert output == "shown"
        # harm: the loop held past the 200 ms that agents on one loop are held to
        assert on_the_loop > 0.2, f"control: parsing on the loop held it only {on_the_loop:.3f} s"
    with JupyterExecutor(timeout_seconds=60) as executor:
        late, output = asyncio.run(held(executor))
    assert output == "shown"
    # the bound agents on one loop are held to, as a busy machine stretches it; and well under the control's
    assert late < min(busy_seconds(0.2), on_the_loop / 2), f"the loop was held {late:.3f} s ({on_the_loop:.3f} s)"


def test_a_large_message_nested_too_deeply_is_refused_as_one_that_does_not_parse():
    """The session ends a kernel whose message raises ValueError; a RecursionError would escape it."""
    with pytest.raises(ValueError, match="nested too deeply"):
        messages._unpack(b"[" * 100_000 + b"]" * 100_000)
