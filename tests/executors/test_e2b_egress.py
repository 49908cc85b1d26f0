"""`egress=` on e2b: the allow-list reaches E2B's API as the sandbox's network rules, and what they cannot say is refused.

The SDK leaves debug mode here (`E2BServer.cloud_connection`), so it asks the
local protocol server's API for the sandbox as it asks E2B's, and the create
request's body is what E2B would receive.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from codeward.executors.e2b import E2BExecutor
from tests.e2b_server import E2BServer

DEBUG = {"debug": True}


@pytest.fixture(scope="module")
def server() -> Iterator[E2BServer]:
    with E2BServer() as running:
        yield running


def created(server: E2BServer, **kwargs: Any) -> tuple[dict[str, Any], tuple[str, ...] | None]:
    """The body of the create request an executor built with `kwargs` sends (after it ran a cell there), and its
    `egress`."""
    before = len(server.created)
    executor = E2BExecutor(connection=server.cloud_connection, timeout_seconds=5, **kwargs)
    try:
        assert executor.run("6 * 7").output == 42
    finally:
        executor.close()
    assert server.sandbox is None, "close() kills the sandbox the executor created"
    server.replace()
    assert len(server.created) == before + 1
    return server.created[-1], executor.egress


def created_with(server: E2BServer, **kwargs: Any) -> dict[str, Any]:
    return created(server, **kwargs)[0]


def test_an_allow_list_arrives_as_e2b_network_rules_in_the_create_request(server: E2BServer) -> None:
    body, egress = created(server, egress=["pypi.org", "*.Example.com", "10.0.0.5", "10.0.0.0/8", "pypi.org"])
    assert body["network"] == {
        "allowOut": ["pypi.org", "*.example.com", "10.0.0.5", "10.0.0.0/8"],
        "denyOut": ["0.0.0.0/0"],
    }
    assert egress == ("pypi.org", "*.example.com", "10.0.0.5", "10.0.0.0/8")
    # E2B's allow_internet_access=False is itself a deny-all: the rules alone say what is allowed
    assert "allow_internet_access" not in body


def test_an_empty_allow_list_denies_all_outbound_traffic(server: E2BServer) -> None:
    body = created_with(server, egress=[])
    assert body["network"] == {"denyOut": ["0.0.0.0/0"]}
    assert body["allow_internet_access"] is False


def test_without_egress_the_create_request_carries_no_rules(server: E2BServer) -> None:
    body = created_with(server)
    assert "network" not in body
    assert body["allow_internet_access"] is False
    assert created_with(server, allow_internet_access=True)["allow_internet_access"] is True


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ("api.example.com:443", "names a port, and E2B's network rules have none"),
        ("10.0.0.5:8080", "a rule for '10.0.0.5' would open every port on it"),
        ("2001:db8::1", "is IPv6"),
        ("[2001:db8::1]:443", "is IPv6"),
        ("2001:db8::/32", "is IPv6"),
        ("https://pypi.org/simple", "neither a host name"),
        ("user@pypi.org", "neither a host name"),
        ("*", "neither a host name"),
        ("pypi..org", "neither a host name"),
        ("10.0.0.0/33", "neither a host name"),
    ],
)
def test_an_entry_e2b_cannot_express_is_refused_by_name(server: E2BServer, entry: str, reason: str) -> None:
    before = len(server.created)
    with pytest.raises(ValueError, match="egress entry") as refused:
        E2BExecutor(connection=server.cloud_connection, egress=["pypi.org", entry])
    assert repr(entry) in str(refused.value) and reason in str(refused.value)
    assert len(server.created) == before, "no sandbox is asked for"


def test_a_port_refusal_says_what_to_do_instead() -> None:
    with pytest.raises(ValueError, match=r"Give 'api.example.com' alone .* executor=\"docker\" with egress="):
        E2BExecutor(connection=DEBUG, egress=["api.example.com:443"])


def test_egress_headers_are_refused_on_e2b_with_the_reason(server: E2BServer) -> None:
    before = len(server.created)
    headers = {"api.example.com": {"Authorization": "Bearer secret-token"}}
    with pytest.raises(ValueError, match="egress_headers is not supported on e2b") as refused:
        E2BExecutor(connection=server.cloud_connection, egress=["api.example.com"], egress_headers=headers)
    message = str(refused.value)
    assert "E2B's infrastructure" in message and 'executor="docker"' in message
    assert "secret-token" not in message
    assert len(server.created) == before


@pytest.mark.parametrize("egress", ["pypi.org", b"pypi.org", 42, ["pypi.org", None]])
def test_egress_that_is_not_a_list_of_strings_is_refused(egress: Any) -> None:
    with pytest.raises(ValueError, match="egress"):
        E2BExecutor(connection=DEBUG, egress=egress)


def test_egress_and_allow_internet_access_true_contradict_each_other() -> None:
    with pytest.raises(ValueError, match="pass one of them"):
        E2BExecutor(connection=DEBUG, egress=["pypi.org"], allow_internet_access=True)


def test_egress_is_refused_for_a_sandbox_it_did_not_create() -> None:
    with pytest.raises(ValueError, match="keeps the network rules it was created with"):
        E2BExecutor(connection=DEBUG, egress=["pypi.org"], sandbox_id="sandbox-made-elsewhere")
