"""What a kernel sandbox sends back cannot grow the host past the cell's output budget.

Each attack runs in the real sandboxes that read a kernel's output on the host (a local
jupyter kernel, a docker container, the e2b executor against the local E2B-protocol server):
what the host keeps stays within the budget (for an image bomb, its resident memory grows by
less than the budget plus 100 MiB), the cell returns, the model is told what was dropped, and
the sandbox goes on.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from codeward.executors.base import ExecutionError, Executor
from codeward.executors.displays import Display, DisplayError
from codeward.executors.kernel.cells import OutputBudget
from codeward.platform.tools import tool
from tests.executors.contract.conftest import PROFILES, _module_missing
from tests.memory import peak_growth

pytestmark = pytest.mark.timeout(300)

MiB = 2**20
BUDGET = 8 * MiB
ROOM = 100 * MiB

#: A PNG made in the sandbox with the standard library: 13000x13000 one-bit pixels in 4 KB of
#: compressed zeros, which a decoder would expand to 169 MB.
PNG_BOMB = textwrap.dedent(
    """
    import base64, struct, zlib
    from IPython.display import publish_display_data
    def chunk(kind, data):
        return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))
    side = 13000
    packer = zlib.compressobj(9)
    row = b'\\x00' * (1 + (side + 7) // 8)
    body = b''.join(packer.compress(row) for _ in range(side)) + packer.flush()
    png = (b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', side, side, 1, 0, 0, 0, 0))
           + chunk(b'IDAT', body) + chunk(b'IEND', b''))
    bomb = base64.b64encode(png).decode()
    for _ in range(4):
        publish_display_data({'image/png': bomb})
    """
)


def resident() -> int:
    with open(f"/proc/{os.getpid()}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.fixture(scope="module")
def e2b_server_elsewhere() -> Iterator[dict[str, object]]:
    """The E2B protocol server in a process of its own, so the host's memory is the executor's alone."""
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.e2b_server", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        url = re.search(r"http://127\.0\.0\.1:\d+", server.stdout.readline())
        assert url, "the E2B protocol server did not say where it listens"
        yield {"debug": True, "sandbox_url": url.group()}
    finally:
        server.terminate()
        server.wait(timeout=30)


SANDBOXES = ["jupyter", "docker", "docker-runsc", "e2b"]
#: The budget of the display-count test: small enough that its cap is reached by displays
#: that gVisor's kernel sends at about 4 ms each, within the time limit.
COUNT_BUDGET = 1 * MiB


@contextmanager
def _sandbox(request: pytest.FixtureRequest, budget: int) -> Iterator[Executor]:
    name: str = request.param
    missing = _module_missing(name.split("-")[0]) or PROFILES[name].unavailable()
    if missing:
        pytest.skip(missing)
    settings = {"max_output_bytes": budget, "timeout_seconds": 60}
    if name == "e2b":
        from codeward.executors.base import create_executor

        connection = request.getfixturevalue("e2b_server_elsewhere")
        # Host tools, whose requests draw from the budget as on the kernel sandboxes.
        executor = create_executor("e2b", connection=connection, tools_mode="host", **settings)
    else:
        executor = PROFILES[name].make(**settings)
    with executor:
        yield executor


@pytest.fixture(params=SANDBOXES)
def sandbox(request: pytest.FixtureRequest) -> Iterator[Executor]:
    with _sandbox(request, BUDGET) as executor:
        yield executor


@pytest.fixture(params=SANDBOXES)
def small_sandbox(request: pytest.FixtureRequest) -> Iterator[Executor]:
    with _sandbox(request, COUNT_BUDGET) as executor:
        yield executor


DISPLAY_FLOOD = (
    "from IPython.display import publish_display_data\n"
    "page = 'x' * (4 * 2**20)\n"
    "for _ in range(60):\n    publish_display_data({'text/html': page})\n"
    "print('done')"
)
#: Flushed line by line: unflushed, the kernel sends the lines as one message, which is read whole.
PRINT_FLOOD = "line = 'y' * 2**20\nfor _ in range(100):\n    print(line, flush=True)"


def test_a_display_flood_is_cut_at_the_budget(sandbox: Executor) -> None:
    """240 MiB of displays: the host keeps the budget's worth, and never holds much more meanwhile."""
    if sandbox.name == "e2b":
        pytest.skip("e2b stops a cell past twice its budget: test_e2b_stops_a_flood_past_twice_the_budget")
    with peak_growth() as growth:
        result = sandbox.run(DISPLAY_FLOOD)
    assert growth() < BUDGET + ROOM
    assert 0 < len(result.displays) <= BUDGET // (4 * MiB)
    assert "output budget" in result.logs and "done" not in result.logs.split("[codeward")[-1]
    assert sandbox.run("1 + 1").output == 2


@pytest.mark.parametrize("sandbox", ["e2b"], indirect=True)
@pytest.mark.parametrize("flood", [DISPLAY_FLOOD, PRINT_FLOOD], ids=["displays", "prints"])
def test_e2b_stops_a_flood_past_twice_the_budget(sandbox: Executor, flood: str) -> None:
    """E2B's SDK holds what it reads until the call ends, so past twice the budget the cell is stopped
    (kernel sessions read a flood one message at a time and let the code run on)."""
    sandbox.run("kept = 'before'")
    with peak_growth() as growth, pytest.raises(ExecutionError) as info:
        sandbox.run(flood)
    assert growth() < 2 * BUDGET + ROOM
    assert info.value.error_type == "OutputLimitExceeded" and "twice its output budget" in info.value.message
    assert sandbox.run("kept").output == "before"


def test_a_flood_of_tiny_displays_is_cut_by_their_count(small_sandbox: Executor) -> None:
    """Paced so the host keeps up; if it falls behind anyway, the kernel drops displays, and says so."""
    result = small_sandbox.run(
        "import time\nfrom IPython.display import publish_display_data\n"
        "for n in range(6_000):\n    publish_display_data({'text/plain': 'x'})\n"
        "    if n % 20 == 0:\n        time.sleep(0.01)"
    )
    assert 0 < len(result.displays) <= COUNT_BUDGET // OutputBudget.ITEM_BYTES < 6_000
    assert "output budget" in result.logs or "its kernel dropped some of it" in result.logs
    assert small_sandbox.run("5 + 5").output == 10


def test_a_print_flood_is_cut_at_the_budget(sandbox: Executor) -> None:
    if sandbox.name == "e2b":
        pytest.skip("e2b stops a cell past twice its budget: test_e2b_stops_a_flood_past_twice_the_budget")
    result = sandbox.run(PRINT_FLOOD)
    assert "output budget" in result.logs
    assert sandbox.run("2 + 2").output == 4


def test_a_value_past_the_budget_is_a_clear_error(sandbox: Executor) -> None:
    with pytest.raises(ExecutionError) as info:
        sandbox.run("'z' * (2 * 8 * 2**20)")
    assert info.value.error_type == "OutputLimitExceeded"
    assert "output budget" in info.value.message
    assert sandbox.run("3 + 3").output == 6


def test_an_image_bomb_stays_bytes_until_asked_and_is_refused_then(sandbox: Executor) -> None:
    before = resident()
    result = sandbox.run(PNG_BOMB)
    assert resident() - before < BUDGET + ROOM
    assert len(result.displays) == 4
    shown = result.displays[0]
    assert isinstance(shown, Display) and shown.mime == "image/png" and shown.is_image
    with pytest.raises(DisplayError, match="13000x13000 pixels"):
        shown.image()
    assert sandbox.run("4 + 4").output == 8


@tool
def measure(text: str) -> int:
    """Counts characters.

    Args:
        text: what to count
    """
    return len(text)


def test_tool_requests_draw_from_the_budget(sandbox: Executor) -> None:
    sandbox.send_tools({"measure": measure})
    said = sandbox.run(
        "text = 't' * (3 * 2**20)\nsaid = []\nfor _ in range(4):\n"
        "    try:\n        said.append(measure(text))\n    except TypeError as error:\n        said.append(str(error))\n"
        "said"
    ).output
    assert said[:2] == [3 * MiB, 3 * MiB]
    assert all("past what is left of the cell's output budget" in refusal for refusal in said[2:])
    assert sandbox.run("measure('abc')").output == 3
