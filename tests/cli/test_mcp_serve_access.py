"""Who may call `codeward mcp serve --http`: attacks on a real server subprocess, each beside its control.

An attack is a request a stranger could send (no token, a wrong one, a rebinding page's Host or
Origin); its control sends the same request with that rule relaxed, and shows what the rule stops:
the stranger's code runs with the operator's tools.
"""

from __future__ import annotations

import json
import signal
import subprocess
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.cli.conftest import SAMPLE_TOOLS
from tests.cli.test_mcp_serve import http_session, run_python, start_http_server

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "stranger", "version": "1"}},
}


@contextmanager
def http_server(folder: Path, *args: str, **env: str) -> Iterator[tuple[str, str | None, str]]:
    """A local `mcp serve --http 0 --tools SAMPLE` server: its URL, printed token and stderr, stopped at the end."""
    server, url, token = start_http_server(folder, "local", "--tools", SAMPLE_TOOLS, *args, **env)
    try:
        yield url, token, (folder / "http-server.log").read_text()
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def opening(url: str, **headers: str) -> httpx2.Response:
    """What the server answers a session's opening request carrying `headers`."""
    sent = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json", **headers}
    return httpx2.post(url, content=json.dumps(INITIALIZE), headers=sent, timeout=30)


def calls_the_tool(url: str, token: str | None) -> str:
    """What a client sending `token` reads back from code that calls the operator's tool."""

    async def scenario() -> str:
        async with http_session(url, token) as session:
            text, failed = await run_python(session, "double(x=21)")
            assert not failed, text
            return text

    return anyio.run(scenario)


def test_a_request_without_the_token_or_with_a_wrong_one_is_refused(tmp_path: Path) -> None:
    with http_server(tmp_path) as (url, token, log):
        assert token is not None and log.count(token) == 1, log
        assert opening(url).status_code == 401
        assert opening(url, Authorization=f"Bearer {token[:-1]}x").status_code == 401
        assert opening(url, Authorization=token).status_code == 401
        assert opening(url.replace("/mcp", "/elsewhere")).status_code == 401
        with pytest.raises(BaseException):  # noqa: B017 - the SDK's client fails in a task group
            calls_the_tool(url, None)
        assert opening(url, Authorization=f"Bearer {token}").status_code == 200
        assert calls_the_tool(url, token) == "Last output from code snippet:\n42"


def test_control_without_a_token_any_local_account_calls_the_operators_tools(tmp_path: Path) -> None:
    with http_server(tmp_path, "--no-auth") as (url, token, log):
        assert token is None and "--no-auth" in log, log
        assert calls_the_tool(url, None) == "Last output from code snippet:\n42"


def test_the_token_can_come_from_the_environment_and_is_then_not_printed(tmp_path: Path) -> None:
    chosen = "a-token-the-operator-chose-0123456789"
    with http_server(tmp_path, CODEWARD_MCP_TOKEN=chosen) as (url, token, log):
        assert token is None and chosen not in log, log
        assert opening(url, Authorization="Bearer another").status_code == 401
        assert calls_the_tool(url, chosen) == "Last output from code snippet:\n42"


INHERITED = textwrap.dedent(
    '''
    import subprocess, sys
    from codeward import tool

    @tool
    def inherited(name: str) -> str:
        """What a program the server starts finds in its environment under a name.

        Args:
            name: The variable's name.
        """
        shown = f"import os; print(os.environ.get({name!r}, 'absent'))"
        return subprocess.run([sys.executable, "-c", shown], capture_output=True, text=True).stdout.strip()
    '''
)


def test_a_token_from_the_environment_is_not_inherited_by_what_the_server_starts(tmp_path: Path) -> None:
    """Control: another variable of the server's environment is inherited, as the token would be."""
    (tmp_path / "inherited.py").write_text(INHERITED)
    chosen = "a-token-the-operator-chose-0123456789"
    served = http_server(tmp_path, "--tools", "inherited.py", CODEWARD_MCP_TOKEN=chosen, OTHER_VARIABLE="inherited")

    async def scenario(url: str) -> None:
        async with http_session(url, chosen) as session:
            assert await run_python(session, "inherited(name='CODEWARD_MCP_TOKEN')") == (
                "Last output from code snippet:\nabsent",
                False,
            )
            assert await run_python(session, "inherited(name='OTHER_VARIABLE')") == (
                "Last output from code snippet:\ninherited",
                False,
            )

    with served as (url, _, _):
        anyio.run(scenario, url)


def test_no_auth_is_refused_on_an_address_other_hosts_reach(codeward: Any) -> None:
    refused = codeward("mcp", "serve", "--http", "0", "--host", "0.0.0.0", "--no-auth", timeout=60)
    assert refused.returncode == 2
    said = " ".join(refused.stderr.split())
    assert "--no-auth" in said and "loopback --host" in said and "CODEWARD_MCP_TOKEN" in said, refused.stderr


def test_a_wildcard_address_is_served_with_the_token(tmp_path: Path) -> None:
    with http_server(tmp_path, "--host", "0.0.0.0") as (url, token, _):
        loopback = url.replace("0.0.0.0", "127.0.0.1")
        assert opening(loopback).status_code == 401
        assert calls_the_tool(loopback, token) == "Last output from code snippet:\n42"


def test_a_foreign_host_header_is_refused_and_allow_host_admits_it(tmp_path: Path) -> None:
    """A rebinding page's request reaches the port under the page's name; only an allowed name passes."""
    with http_server(tmp_path) as (url, token, _):
        bearer = f"Bearer {token}"
        port = url.rsplit(":", 1)[1].split("/")[0]
        assert opening(url, Authorization=bearer, Host=f"rebind.example:{port}").status_code == 421
        assert opening(url, Authorization=bearer, Host=f"127.0.0.1:{int(port) + 1}").status_code == 421
        assert opening(url, Authorization=bearer, Host=f"localhost:{port}").status_code == 200
    with http_server(tmp_path, "--allow-host", "rebind.example") as (url, token, _):
        port = url.rsplit(":", 1)[1].split("/")[0]
        control = opening(url, Authorization=f"Bearer {token}", Host=f"rebind.example:{port}")
        assert control.status_code == 200, control.text


def test_a_foreign_origin_is_refused_and_allow_origin_admits_it(tmp_path: Path) -> None:
    """A script on another site sends its own Origin; the server's own origin passes."""
    with http_server(tmp_path) as (url, token, _):
        bearer = f"Bearer {token}"
        own = url.removesuffix("/mcp")
        assert opening(url, Authorization=bearer, Origin="http://rebind.example").status_code == 403
        assert opening(url, Authorization=bearer, Origin=own).status_code == 200
    with http_server(tmp_path, "--allow-origin", "http://rebind.example") as (url, token, _):
        control = opening(url, Authorization=f"Bearer {token}", Origin="http://rebind.example")
        assert control.status_code == 200, control.text
