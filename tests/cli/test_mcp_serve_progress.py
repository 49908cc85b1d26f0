"""`codeward mcp serve` sends a block's output as it comes, as progress notifications on the call
that asked for them (the protocol's progress token), over stdio and over streamable HTTP."""

from __future__ import annotations

import fcntl
import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession

from tests.cli.conftest import children, command, command_env
from tests.cli.test_mcp_serve import (
    EXECUTORS,
    engine,
    http_session,
    run_python,
    start_http_server,
    stdio_session,
    wait_until,
)

__all__ = ["engine"]  # the fixture, used by name

F_SETPIPE_SZ = 1031  # fcntl's, for a small pipe
PRINT_SLEEP_PRINT = "import time\nprint('first', flush=True)\ntime.sleep(2)\nprint('second')\n'done'"


async def call_hearing_progress(session: ClientSession, code: str) -> tuple[list[tuple[float, float, str]], float, str]:
    """The notifications heard (when, progress, message), when the answer came, and its text."""
    heard: list[tuple[float, float, str]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append((time.monotonic(), progress, message or ""))

    result = await session.call_tool("run_python", {"code": code}, progress_callback=on_progress)
    answered = time.monotonic()
    return heard, answered, "".join(getattr(block, "text", "") for block in result.content)


def assert_first_line_came_early(heard: list[tuple[float, float, str]], answered: float, text: str) -> None:
    assert "first" in text and "second" in text and "done" in text, text
    assert heard and heard[0][2].startswith("first"), heard
    assert answered - heard[0][0] >= 1.5, (answered - heard[0][0], heard)
    assert "".join(message for _, _, message in heard) == "first\nsecond\n"
    progress = [value for _, value, _ in heard]
    assert progress == sorted(progress) and len(set(progress)) == len(progress), progress


@EXECUTORS
def test_a_blocks_first_line_reaches_a_stdio_client_before_the_block_ends(
    tmp_path: Path, executor: str, engine: Any
) -> None:
    async def scenario() -> None:
        async with stdio_session(tmp_path, "--executor", executor) as session:
            assert_first_line_came_early(*await call_hearing_progress(session, PRINT_SLEEP_PRINT))
            # control: a call without a progress token is answered the same and hears nothing
            text, failed = await run_python(session, PRINT_SLEEP_PRINT)
            assert not failed and "first\nsecond" in text

    anyio.run(scenario)


def test_a_blocks_first_line_reaches_an_http_client_before_the_block_ends(tmp_path: Path) -> None:
    server, url, token = start_http_server(tmp_path, "local")
    try:

        async def scenario() -> None:
            async with http_session(url, token) as session:
                assert_first_line_came_early(*await call_hearing_progress(session, PRINT_SLEEP_PRINT))

        anyio.run(scenario)
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_block_printing_a_character_at_a_time_sends_few_notifications(tmp_path: Path) -> None:
    code = "for i in range(20000):\n    print('x', end='', flush=True)\n'done'"

    async def scenario() -> list[tuple[float, float, str]]:
        async with stdio_session(tmp_path, "--executor", "local") as session:
            heard, _, text = await call_hearing_progress(session, code)
            assert "done" in text
            return heard

    heard = anyio.run(scenario)
    sent = "".join(message for _, _, message in heard)
    assert sent == "x" * 20000
    assert len(heard) < 100, len(heard)  # gathered for a tenth of a second, not one message a character


def test_a_client_that_asked_for_progress_and_stopped_reading_still_has_its_sandbox_closed(tmp_path: Path) -> None:
    """The last notification of a call waits a moment for a client that stopped reading, not forever:
    the server's end (SIGTERM, as a client ends it) still closes the session's sandbox."""
    server = subprocess.Popen(
        command("mcp", "serve"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=command_env(),
        cwd=tmp_path,
    )
    try:
        fcntl.fcntl(server.stdout.fileno(), F_SETPIPE_SZ, 4096)  # type: ignore[union-attr]

        def send(message: dict[str, Any]) -> None:
            server.stdin.write((json.dumps(message) + "\n").encode())  # type: ignore[union-attr]
            server.stdin.flush()  # type: ignore[union-attr]

        info = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "deaf", "version": "1"}}
        send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": info})
        assert "result" in json.loads(server.stdout.readline())  # type: ignore[union-attr]
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for n in range(3):  # output enough to fill the pipe the client no longer reads
            params = {"name": "run_python", "arguments": {"code": "for i in range(400):\n    print('x' * 120)"}}
            send(
                {
                    "jsonrpc": "2.0",
                    "id": 10 + n,
                    "method": "tools/call",
                    "params": {**params, "_meta": {"progressToken": n}},
                }
            )
        assert wait_until(lambda: len(children(server.pid)) > 0, 20)  # the session's sandbox (its worker)
        time.sleep(3)
        server.send_signal(signal.SIGTERM)
        assert wait_until(lambda: not children(server.pid), 15), children(server.pid)
    finally:
        server.kill()
        server.wait()
