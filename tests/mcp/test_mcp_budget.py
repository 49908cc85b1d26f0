"""An MCP server's answer draws from a budget: one over it fails its call with a clear error, the
host never holds more than a small multiple of the budget, and the server's next calls answer.

Measured in a fresh process (its peak resident memory, VmHWM from the kernel), against a real server
over stdio and over streamable HTTP.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from codeward.mcp import MCPToolError, MCPTools
from tests.mcp.test_mcp_tools import ROOT, SERVER, TOKEN, http_server  # noqa: F401 (a fixture)
from tests.mcp_server import SECRET_VARIABLE

LIMIT = 1_000_000
HUGE = 100_000_000


def test_an_answer_over_the_budget_fails_its_call_and_the_next_call_answers() -> None:
    with MCPTools(SERVER, env={SECRET_VARIABLE: "s"}, cwd=str(ROOT), max_message_bytes=LIMIT) as tools:
        by_name = {tool.name: tool for tool in tools}
        with pytest.raises(MCPToolError, match=f"over {LIMIT} bytes"):
            by_name["blob"](size=2 * LIMIT)
        assert by_name["blob"](size=1000) == "x" * 1000
        assert by_name["add"](2, 3) == 5


def test_over_http_an_answer_over_the_budget_fails_its_call(http_server: str) -> None:  # noqa: F811
    with MCPTools(http_server, headers={"Authorization": f"Bearer {TOKEN}"}, max_message_bytes=LIMIT) as tools:
        by_name = {tool.name: tool for tool in tools}
        with pytest.raises(MCPToolError):
            by_name["blob"](size=2 * LIMIT)
        assert by_name["add"](2, 3) == 5


def test_a_bad_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="max_message_bytes must be a positive number of bytes"):
        MCPTools(SERVER, max_message_bytes=0)


_MEASURE = textwrap.dedent(
    r"""
    import json, re, sys
    from codeward.mcp import MCPToolError, MCPTools

    def peak_kib():  # this process's own high-water mark: ru_maxrss would carry its parent's across exec
        with open("/proc/self/status") as status:
            return int(re.search(r"VmHWM:\s+(\d+)", status.read()).group(1))

    limit = int(sys.argv[1])
    with MCPTools([sys.executable, "-m", "tests.mcp_server"], env={"MCP_TEST_SECRET": "s"},
                  max_message_bytes=limit, timeout=120) as tools:
        tool = {tool.name: tool for tool in tools}[sys.argv[3]]
        before = peak_kib()
        try:
            tool(int(sys.argv[2]))
            outcome = "answered"
        except MCPToolError as error:
            outcome = str(error)
        grown = peak_kib() - before
    print(json.dumps({"outcome": outcome, "grown_kib": grown}))
    """
)


def _measured(limit: int, size: int, tool: str = "blob") -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(limit), str(size), tool],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(Path(ROOT) / "src") + os.pathsep + str(ROOT)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_a_100_mb_answer_costs_the_host_a_small_multiple_of_the_budget() -> None:
    measured = _measured(LIMIT, HUGE)
    assert "over" in str(measured["outcome"])
    assert int(measured["grown_kib"]) < 50 * 1024  # the budget is 1 MB; the host may not grow by 50 MB


def test_control_with_a_budget_past_the_answer_the_host_holds_it_several_times() -> None:
    """30 MB, not 100: past the budget the SDK's reading is quadratic in a line's length, and 100 MB
    does not arrive within the call's two minutes (a harm of its own)."""
    measured = _measured(4 * HUGE, 30_000_000)
    assert measured["outcome"] == "answered"
    assert int(measured["grown_kib"]) > 30_000_000 // 1024  # at least the whole answer, held at once


def test_an_answer_of_many_small_objects_is_refused_within_the_byte_budget() -> None:
    """300,000 empty objects are about 2 MB on the wire: under a 4 MB budget in bytes, over it in objects."""
    measured = _measured(4 * LIMIT, 300_000, "empties")
    assert "lists and objects" in str(measured["outcome"])
    assert int(measured["grown_kib"]) < 50 * 1024


def test_control_the_same_answer_under_a_byte_budget_alone_costs_the_host_far_more_than_its_bytes() -> None:
    measured = _measured(1000 * LIMIT, 300_000, "empties")
    assert measured["outcome"] == "answered"
    assert int(measured["grown_kib"]) > 40 * 1024  # twenty times the bytes it came in
