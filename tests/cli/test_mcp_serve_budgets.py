"""What the clients of one `codeward mcp serve --http` may hold: sessions, calls waiting, worker threads.

Each budget is attacked on a real server subprocess by clients on distinct loopback addresses
(127.0.0.2, 127.0.0.3, ...: a client is an address), beside a control where that budget is wide
enough not to bite, which shows the harm it stops: one client locks the others out or keeps
them waiting.
"""

from __future__ import annotations

import json
import os
import threading
import time
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import httpx2
from mcp.shared.exceptions import MCPError

from tests.cli.conftest import SRC
from tests.cli.test_mcp_serve import http_session, run_python
from tests.cli.test_mcp_serve_access import INITIALIZE, http_server
from tests.timing import busy_allowance

A, B, C = "127.0.0.2", "127.0.0.3", "127.0.0.4"
TWO_THREADS = ("--threads", "2", "--sessions-per-client", "4")  # room for A's two sessions and B's one


def refusal(error: BaseException) -> str:
    """The MCP error's text inside the exception groups the SDK's client raises it in."""
    if isinstance(error, MCPError):
        return str(error)
    if isinstance(error, BaseExceptionGroup):
        return " ".join(refusal(inner) for inner in error.exceptions)
    return ""


async def refused_opening(url: str, token: str | None, source: str) -> str:
    """The text a session's opening from `source` is refused with ('' if it opened)."""
    try:
        async with http_session(url, token, source):
            return ""
    except BaseException as error:  # an MCPError inside the client's task groups
        if not refusal(error):
            raise
        return refusal(error)


def test_sessions_beyond_a_clients_budget_or_the_servers_are_refused(tmp_path: Path) -> None:
    async def scenario(url: str, token: str | None) -> None:
        async with AsyncExitStack() as held:
            for _ in range(2):
                await held.enter_async_context(http_session(url, token, A))
            said = await refused_opening(url, token, A)
            assert "already holds 2 sessions" in said and "--sessions-per-client" in said, said
            other = await held.enter_async_context(http_session(url, token, B))  # another client still gets in
            assert await run_python(other, "1 + 1") == ("Last output from code snippet:\n2", False)
            said = await refused_opening(url, token, C)
            assert "already holds 3 sessions" in said and "--max-sessions" in said, said
        assert await refused_opening(url, token, A) == ""  # ended sessions give their room back

    with http_server(tmp_path, "--sessions-per-client", "2", "--max-sessions", "3") as (url, token, _):
        anyio.run(scenario, url, token)


def test_control_without_a_per_client_budget_one_client_locks_the_others_out(tmp_path: Path) -> None:
    async def scenario(url: str, token: str | None) -> None:
        async with AsyncExitStack() as held:
            for _ in range(3):
                await held.enter_async_context(http_session(url, token, A))
            said = await refused_opening(url, token, B)
            assert "--max-sessions" in said, said

    with http_server(tmp_path, "--sessions-per-client", "3", "--max-sessions", "3") as (url, token, _):
        anyio.run(scenario, url, token)


def test_a_session_gives_its_room_back_when_deleted_or_timed_out(tmp_path: Path) -> None:
    """The room is free as soon as the client deletes its session; one left open holds it until the idle timeout."""
    args = ("--sessions-per-client", "1", "--idle-timeout", "1")
    with http_server(tmp_path, *args) as (url, token, _):
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Authorization": f"Bearer {token}",
        }
        transport = httpx2.HTTPTransport(local_address=A)
        with httpx2.Client(transport=transport, headers=headers, timeout=30) as stranger:
            opened = stranger.post(url, content=json.dumps(INITIALIZE))
            assert opened.status_code == 200
            assert stranger.post(url, content=json.dumps(INITIALIZE)).status_code == 503
            ended = stranger.delete(url, headers={"mcp-session-id": opened.headers["mcp-session-id"]})
            assert ended.status_code < 400
            assert stranger.post(url, content=json.dumps(INITIALIZE)).status_code == 200
            assert stranger.post(url, content=json.dumps(INITIALIZE)).status_code == 503
            time.sleep(busy_allowance(1, 0.6))  # the idle timeout, the server's look and the session's close
            assert stranger.post(url, content=json.dumps(INITIALIZE)).status_code == 200


def calls_at_once(url: str, token: str | None, count: int) -> list[tuple[str, float]]:
    """`count` calls of one session sent at once, each sleeping a second: what each answered, and when."""

    async def scenario() -> list[tuple[str, float]]:
        answers: list[tuple[str, float]] = []
        async with http_session(url, token, A) as session:
            await run_python(session, "import time")
            start = time.monotonic()

            async def call() -> None:
                text, _ = await run_python(session, "time.sleep(1)\n'slept'")
                answers.append((text, time.monotonic() - start))

            async with anyio.create_task_group() as calls:
                for _ in range(count):
                    calls.start_soon(call)
        return sorted(answers, key=lambda answer: answer[1])

    return anyio.run(scenario)


def test_calls_beyond_the_running_one_and_those_waiting_are_refused_at_once(tmp_path: Path) -> None:
    with http_server(tmp_path, "--waiting-calls", "1") as (url, token, _):
        answers = calls_at_once(url, token, 4)
    refused = [(text, when) for text, when in answers if "--waiting-calls" in text]
    first_slept = min(when for text, when in answers if "slept" in text)
    # at once: before the running call's second of sleep is over, whatever a busy machine adds to each
    assert len(refused) == 2 and all(when < first_slept for _, when in refused), answers
    assert "a call running and 1 waiting" in refused[0][0], refused
    assert [text for text, _ in answers if "slept" in text] == ["Last output from code snippet:\nslept"] * 2


def test_control_without_a_waiting_budget_calls_pile_up(tmp_path: Path) -> None:
    with http_server(tmp_path, "--waiting-calls", "10") as (url, token, _):
        answers = calls_at_once(url, token, 4)
    assert all("slept" in text for text, _ in answers), answers
    assert answers[-1][1] > 3.5, answers  # the last waited for the three before it


def answer_time_beside_a_busy_client(url: str, token: str | None) -> float:
    """How long client B's quick call takes while client A keeps two sessions in slow calls."""

    async def scenario() -> float:
        async with (
            http_session(url, token, A) as first,
            http_session(url, token, A) as second,
            http_session(url, token, B) as other,
        ):
            await run_python(other, "0")  # B's sandbox is started before A gets busy
            async with anyio.create_task_group() as busy:
                for session in (first, second):
                    busy.start_soon(run_python, session, "import time\ntime.sleep(4)")
                await anyio.sleep(1.5)  # A's sandboxes start and their calls hold the threads
                start = time.monotonic()
                assert await run_python(other, "1 + 1") == ("Last output from code snippet:\n2", False)
                return time.monotonic() - start

    return anyio.run(scenario)


def test_one_clients_slow_calls_leave_threads_for_the_others(tmp_path: Path) -> None:
    with http_server(tmp_path, *TWO_THREADS, "--threads-per-client", "1") as (url, token, _):
        assert answer_time_beside_a_busy_client(url, token) < 1.5


def test_control_without_a_per_client_thread_budget_one_client_takes_them_all(tmp_path: Path) -> None:
    with http_server(tmp_path, *TWO_THREADS, "--threads-per-client", "2") as (url, token, _):
        assert answer_time_beside_a_busy_client(url, token) > 1.5


def _foreign_calls(url: str, token: str | None, owner: str, caller: str, sessions: int = 4) -> float:
    """Seconds for `caller` to run a 2 s call in each of `owner`'s sessions at once (the session ids are sent as is)."""
    base = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }

    def client(source: str) -> httpx2.Client:
        return httpx2.Client(timeout=120, transport=httpx2.HTTPTransport(local_address=source))

    def call(http: httpx2.Client, session: str, code: str, number: int) -> None:
        sent = {"jsonrpc": "2.0", "id": number, "method": "tools/call"}
        sent["params"] = {"name": "run_python", "arguments": {"code": code}}
        http.post(url, json=sent, headers={**base, "mcp-session-id": session}).raise_for_status()

    opened = []
    with client(owner) as http:
        for _ in range(sessions):
            answer = http.post(url, content=json.dumps(INITIALIZE), headers=base)
            session = answer.headers["mcp-session-id"]
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            http.post(url, json=initialized, headers={**base, "mcp-session-id": session})
            call(http, session, "import time", 2)  # the sandbox is started before the clock runs
            opened.append(session)
    with client(caller) as http:
        start = time.monotonic()
        calls = [threading.Thread(target=call, args=(http, s, "time.sleep(2)", 3)) for s in opened]
        for thread in calls:
            thread.start()
        for thread in calls:
            thread.join()
        return time.monotonic() - start


def test_calls_sent_to_a_session_from_another_address_count_against_the_client_that_opened_it(
    tmp_path: Path,
) -> None:
    options = ("--threads-per-client", "2", "--sessions-per-client", "4")
    with http_server(tmp_path, *options) as (url, token, _):
        assert _foreign_calls(url, token, A, "127.0.0.99") > 3.5  # two at a time, as from A itself


def test_control_charged_to_the_sending_address_a_client_takes_more_threads_than_its_share(tmp_path: Path) -> None:
    patched = tmp_path / "patched"
    patched.mkdir()
    (patched / "sitecustomize.py").write_text(
        "from codeward.mcp import budgets\nbudgets.Budgets.owner = lambda self, session_id: None\n"
    )
    options = ("--threads-per-client", "2", "--sessions-per-client", "4")
    with http_server(tmp_path, *options, PYTHONPATH=f"{patched}{os.pathsep}{SRC}") as (url, token, _):
        assert _foreign_calls(url, token, A, "127.0.0.99") < 3.5  # all four at once
