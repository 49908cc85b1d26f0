"""`codeward mcp serve` driven by the mcp SDK's own client, as an MCP client would drive it.

Over stdio each session is a server process of its own; over streamable HTTP several sessions
share one `--http 0` server. Each session keeps its own state in its own sandbox, and a session
that ends leaves nothing running: with docker, its container is gone.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import TextContent

from codeward.executors.base import install_line
from tests.cli.conftest import SAMPLE_TOOLS, SRC, alive, children, command, command_env
from tests.cli.test_terminal_text import docker_engine
from tests.timing import busy_allowance

# "docker" is a parameter value so that CI's hook fails these tests instead of skipping them.
EXECUTORS = pytest.mark.parametrize("executor", ["local", "docker"])
SESSION_LABEL = "codeward.session"
OWNER_PID_LABEL = "codeward.owner.pid"


@pytest.fixture
def engine(executor: str) -> Any:
    """The docker engine for a docker test (a skip without one, a failure under CI); None for the others."""
    return docker_engine()[0] if executor == "docker" else None


@asynccontextmanager
async def stdio_session(folder: Path, *args: str) -> AsyncIterator[ClientSession]:
    """A client session with a `codeward mcp serve ARGS` process of its own, its stderr kept in folder."""
    params = StdioServerParameters(
        command=sys.executable, args=command("mcp", "serve", *args)[1:], env=command_env(), cwd=str(folder)
    )
    with (folder / "server-stderr.log").open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


@asynccontextmanager
async def http_session(url: str, token: str | None, source: str | None = None) -> AsyncIterator[ClientSession]:
    """A client session on an HTTP server, sending `token` (if any) from the local address `source` (if given)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    transport = httpx2.AsyncHTTPTransport(local_address=source) if source is not None else None
    timeout = httpx2.Timeout(30, read=300)
    async with (
        httpx2.AsyncClient(headers=headers, transport=transport, timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def run_python(session: ClientSession, code: str) -> tuple[str, bool]:
    """What the client's model would read back, and whether the call failed."""
    result = await session.call_tool("run_python", {"code": code})
    return "".join(block.text for block in result.content if isinstance(block, TextContent)), result.is_error


def our_containers(client: Any) -> dict[str, str]:
    """The codeward containers started by this test's processes: id -> owner pid."""
    ours = {str(pid) for pid in children(os.getpid())}
    found = client.containers.list(all=True, filters={"label": SESSION_LABEL})
    return {c.id: c.labels.get(OWNER_PID_LABEL, "") for c in found if c.labels.get(OWNER_PID_LABEL) in ours}


def wait_until(condition: Callable[[], bool], seconds: float = 20) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def remaining(client: Any, ids: set[str]) -> set[str]:
    """Which of the containers `ids` still exist."""
    return {c.id for c in client.containers.list(all=True, filters={"label": SESSION_LABEL})} & ids


@EXECUTORS
def test_two_stdio_sessions_keep_separate_state_and_reset_forgets_it(
    tmp_path: Path, executor: str, engine: Any
) -> None:
    async def scenario() -> None:
        serve = ("--executor", executor)
        async with stdio_session(tmp_path, *serve) as first, stdio_session(tmp_path, *serve) as second:
            assert await run_python(first, "x = 1\nprint('set')\nx") == (
                "Execution logs:\nset\n\nLast output from code snippet:\n1",
                False,
            )
            text, failed = await run_python(second, "x")
            assert failed and "NameError" in text, text
            assert await run_python(first, "x + 1") == ("Last output from code snippet:\n2", False)
            await first.call_tool("reset", {})
            text, failed = await run_python(first, "x")
            assert failed and "NameError" in text, text

    anyio.run(scenario)


@EXECUTORS
def test_an_error_returns_what_was_printed_and_the_sandbox_traceback(
    tmp_path: Path, executor: str, engine: Any
) -> None:
    async def scenario() -> None:
        async with stdio_session(tmp_path, "--executor", executor) as session:
            text, failed = await run_python(
                session, "def inner():\n    raise ValueError('bad value')\nprint('before')\ninner()"
            )
            assert failed
            assert text.startswith("Execution logs:\nbefore\n"), text
            assert "Traceback" in text and "inner" in text and "ValueError: bad value" in text, text
            assert await run_python(session, "final_answer(6 * 7)") == ("Final answer: 42", False)

    anyio.run(scenario)


def test_an_endless_loop_tells_the_client_the_limit_and_why(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with stdio_session(tmp_path) as session:
            text, failed = await run_python(session, "while True:\n    pass")
            assert failed
            assert "more than 10,000,000 operations" in text and "look for an endless loop" in text, text

    anyio.run(scenario)


@EXECUTORS
def test_tools_given_with_tools_are_callable_from_run_python(tmp_path: Path, executor: str, engine: Any) -> None:
    async def scenario() -> None:
        async with stdio_session(tmp_path, "--executor", executor, "--tools", SAMPLE_TOOLS) as session:
            assert await run_python(session, "double(x=21)") == ("Last output from code snippet:\n42", False)

    anyio.run(scenario)


def test_import_widens_what_the_local_sandbox_may_import(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with stdio_session(tmp_path) as plain, stdio_session(tmp_path, "--import", "fractions") as widened:
            text, failed = await run_python(plain, "import fractions")
            assert failed and "fractions" in text, text
            assert await run_python(widened, "import fractions\nfractions.Fraction(1, 3) * 3") == (
                "Last output from code snippet:\n1",
                False,
            )

    anyio.run(scenario)


@pytest.mark.parametrize("executor", ["docker"])
def test_ending_a_stdio_session_removes_its_container(tmp_path: Path, executor: str, engine: Any) -> None:
    async def scenario() -> set[str]:
        async with stdio_session(tmp_path, "--executor", "docker") as session:
            await run_python(session, "x = 1")
            started = set(our_containers(engine))
        return started

    started = anyio.run(scenario)
    assert len(started) == 1, started
    assert wait_until(lambda: not remaining(engine, started)), remaining(engine, started)


def start_http_server(
    folder: Path, executor: str, *args: str, **env: str
) -> tuple[subprocess.Popen[bytes], str, str | None]:
    """A `codeward mcp serve --http 0` process, the URL it says it serves at, and the token it printed (if any)."""
    log = folder / "http-server.log"
    with log.open("wb") as stderr:
        server = subprocess.Popen(
            command("mcp", "serve", "--http", "0", "--executor", executor, *args),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=command_env(**env),
            cwd=folder,
        )
    found: list[str] = []

    def announced() -> bool:
        found.extend(re.findall(r"http://[^ ]+:\d+/mcp", log.read_text()))
        return bool(found) or server.poll() is not None

    wait_until(announced, 30)
    assert found, log.read_text()
    wait_until(lambda: "token" in log.read_text(), 2)
    tokens = re.findall(r"Bearer TOKEN\): (\S+)", log.read_text())
    return server, found[0], tokens[0] if tokens else None


@EXECUTORS
def test_http_sessions_of_one_server_keep_separate_state_and_end_alone(
    tmp_path: Path, executor: str, engine: Any
) -> None:
    server, url, token = start_http_server(tmp_path, executor)
    try:
        staying = anyio.run(two_http_sessions, url, token, engine)
        workers = children(server.pid)
        server.send_signal(signal.SIGTERM)  # uvicorn shuts down, then ends by the signal it caught
        assert server.wait(timeout=30) in (0, -signal.SIGTERM), (tmp_path / "http-server.log").read_text()
        assert not [pid for pid in workers if alive(pid)]
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    if engine is not None:  # the server's shutdown closed the session still open
        assert wait_until(lambda: not remaining(engine, staying)), remaining(engine, staying)


async def two_http_sessions(url: str, token: str | None, engine: Any) -> set[str]:
    """Two sessions on one server: separate state; the first ends alone. Returns the second's containers."""
    async with http_session(url, token) as staying:
        async with http_session(url, token) as leaving:
            assert await run_python(leaving, "x = 1\nx") == ("Last output from code snippet:\n1", False)
            text, failed = await run_python(staying, "x")
            assert failed and "NameError" in text, text
            before = set(our_containers(engine)) if engine is not None else set()
        if engine is not None:
            assert len(before) == 2, before
            assert await anyio.to_thread.run_sync(wait_until, lambda: len(remaining(engine, before)) == 1)
        assert await run_python(staying, "y = 2\ny") == ("Last output from code snippet:\n2", False)
        return remaining(engine, before) if engine is not None else set()


def test_a_sandbox_idle_past_the_timeout_is_closed_and_the_next_call_says_so(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with stdio_session(tmp_path, "--idle-timeout", "1") as session:
            await run_python(session, "x = 1")
            # the timeout, then the server's look (every quarter of it) and the sandbox's close, slowed by a busy machine
            await anyio.sleep(busy_allowance(1, 0.6))
            text, failed = await run_python(session, "x")
            assert failed and "idle for 1 s and was closed" in text and "NameError" in text, text

    anyio.run(scenario)


def test_without_the_mcp_extra_serve_names_it_and_help_still_works(tmp_path: Path) -> None:
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "mcp.py").write_text("raise ModuleNotFoundError('hidden for this test', name=__name__)\n")
    env = command_env(PYTHONPATH=os.pathsep.join([str(hidden), SRC]))
    for args in (("--help",), ("mcp", "serve", "--help")):
        helped = subprocess.run(command(*args), capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
        assert helped.returncode == 0, helped.stderr
    served = subprocess.run(command("mcp", "serve"), capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert served.returncode == 2, served.stderr
    assert install_line("mcp") in served.stderr.replace("\n", "")


@pytest.mark.parametrize("executor", ["docker"])
def test_a_server_killed_mid_session_leaves_no_container(tmp_path: Path, executor: str, engine: Any) -> None:
    """SIGKILL runs none of the server's cleanup: the sandbox's watchdog removes its container."""
    server, url, token = start_http_server(tmp_path, executor)

    async def scenario() -> set[str]:
        async with http_session(url, token) as session:
            await run_python(session, "x = 1")
            started = set(our_containers(engine))
            server.kill()
            server.wait()
            return started

    try:
        started = anyio.run(scenario)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert len(started) == 1, started
    assert wait_until(lambda: not remaining(engine, started), 10), remaining(engine, started)
