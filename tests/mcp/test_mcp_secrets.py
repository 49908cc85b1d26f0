"""What an MCP server is given (its URL's credentials, headers, env) is known to be secret: it
is never shown in an error, and never saved with a run."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from codeward.mcp import MCPToolError, MCPTools
from codeward.mcp import tools as mcp_tools
from codeward.redaction import redacted
from tests.cli.conftest import write_script

PASSWORD = "pw-3b9e7c1d5f"
KEY = "key-8a6c4e2b0d"
HEADER = "hdr-1f3e5d7c9b"


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _url() -> str:
    return f"http://ann:{PASSWORD}@127.0.0.1:{_closed_port()}/mcp?api_key={KEY}&region=eu"


def test_a_failed_connection_names_the_server_without_its_credentials() -> None:
    with pytest.raises(MCPToolError) as refused:
        MCPTools(_url(), headers={"X-Api-Key": HEADER})
    said = str(refused.value)
    assert "127.0.0.1" in said and "region=eu" in said
    assert PASSWORD not in said and KEY not in said
    assert redacted(f"{PASSWORD} {KEY} {HEADER}") == "[redacted] [redacted] [redacted]"


def test_a_server_started_as_a_command_has_its_env_values_known() -> None:
    value = "env-6d4b2f0e8c"
    mcp_tools._server(["true"], {"SERVICE_PASSWORD": value}, None, None)
    assert redacted(f"leaked {value}") == "leaked [redacted]"


def test_control_without_hiding_the_url_the_error_shows_its_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcp_tools, "url_without_secrets", lambda url: url)
    monkeypatch.setattr(mcp_tools, "mark_secret", lambda *values: None)
    password = "pw-0a9b8c7d6e"  # one the test above has not made known
    with pytest.raises(MCPToolError) as refused:
        MCPTools(f"http://ann:{password}@127.0.0.1:{_closed_port()}/mcp")
    assert password in str(refused.value)


def _run_with_unreachable_server(password: str, folder: Path, capsys: pytest.CaptureFixture[str]) -> str:
    from codeward.cli import main

    model = write_script(folder / "model.yaml", "final_answer(1)")
    url = f"http://ann:{password}@127.0.0.1:{_closed_port()}/mcp"
    assert main(["run", "Add.", "--model", model, "--mcp", url]) == 2
    said = capsys.readouterr()
    assert said.out == ""  # an error is told on stderr, leaving stdout to results
    return said.err


def test_the_commands_error_names_the_server_without_its_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    said = _run_with_unreachable_server("pw-2c4e6a8b0d", tmp_path, capsys)
    assert "cannot connect" in said and "pw-2c4e6a8b0d" not in said


def test_control_without_redaction_the_commands_error_shows_the_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from codeward.cli import output

    monkeypatch.setattr(output, "redacted", lambda text: text)
    assert "pw-1b3d5f7a9c" in _run_with_unreachable_server("pw-1b3d5f7a9c", tmp_path, capsys)
