"""The egress list's rules, read as a user writes them: what each entry opens, and what stays refused."""

from __future__ import annotations

import pytest

from codeward.egress.policy import PYPI, EgressPolicy, parse_policy


def allowed(policy: EgressPolicy, host: str, port: int) -> bool:
    return policy.refusal(host, port) is None


def test_a_name_opens_ports_80_and_443_only() -> None:
    policy = parse_policy(["pypi.org"])
    assert allowed(policy, "pypi.org", 443) and allowed(policy, "PyPI.org.", 80)
    assert not allowed(policy, "pypi.org", 8080)
    assert not allowed(policy, "evil-pypi.org", 443) and not allowed(policy, "pypi.org.evil.com", 443)


def test_a_wildcard_opens_names_below_it_and_not_the_domain() -> None:
    policy = parse_policy(["*.example.com"])
    assert allowed(policy, "api.example.com", 443) and allowed(policy, "a.b.example.com", 443)
    assert not allowed(policy, "example.com", 443)
    assert not allowed(policy, "badexample.com", 443)


def test_a_port_opens_that_port_alone() -> None:
    policy = parse_policy(["api.example.com:8443"])
    assert allowed(policy, "api.example.com", 8443)
    assert not allowed(policy, "api.example.com", 443)


def test_addresses_are_reached_only_when_listed() -> None:
    policy = parse_policy(["10.0.0.0/8", "192.168.1.5:8080", "[::1]:9000"])
    assert allowed(policy, "10.2.3.4", 443) and not allowed(policy, "10.2.3.4", 22)
    assert allowed(policy, "192.168.1.5", 8080) and not allowed(policy, "192.168.1.6", 8080)
    assert allowed(policy, "::1", 9000)
    assert not allowed(parse_policy(["pypi.org"]), "151.101.0.223", 443)  # a name's address is not the name


def test_a_resolved_address_must_be_public_unless_listed() -> None:
    policy = parse_policy(["localhost:8000"])
    for private in ("127.0.0.1", "10.0.0.1", "169.254.169.254", "172.17.0.1", "::1", "fd00:ec2::254", "100.64.0.1"):
        assert policy.address_refusal(private, 8000) is not None, private
    assert policy.address_refusal("151.101.0.223", 8000) is None
    # IPv6 forms that lead to an IPv4 host through a gateway (NAT64, 6to4, Teredo) are refused unless listed.
    for carried in ("::ffff:127.0.0.1", "64:ff9b::a9fe:a9fe", "2002:7f00:1::2", "64:ff9b::97e5:df", "2001:0:4136::1"):
        assert policy.address_refusal(carried, 8000) is not None, carried
    listed = parse_policy(["localhost:8000", "127.0.0.1:8000"])
    assert listed.address_refusal("127.0.0.1", 8000) is None
    assert listed.address_refusal("::ffff:127.0.0.1", 8000) is None  # the same host, as IPv6 writes it
    assert listed.address_refusal("127.0.0.1", 8001) is not None
    # Listing an IPv4 address opens no IPv6 address that carries it.
    for carrier in ("2002:7f00:1::2", "64:ff9b::7f00:1"):
        assert listed.refusal(carrier, 8000) is not None and listed.address_refusal(carrier, 8000) is not None


def test_headers_go_to_a_listed_name_and_port() -> None:
    policy = parse_policy(
        ["api.example.com", "other.example.com:8443"],
        {"api.example.com": {"Authorization": "Bearer k"}, "other.example.com:8443": {"X-Key": "v"}},
    )
    assert policy.headers_for("API.example.com", 443) == {"Authorization": "Bearer k"}
    assert policy.headers_for("api.example.com", 8443) == {}
    assert policy.headers_for("other.example.com", 8443) == {"X-Key": "v"}
    assert policy.headers_for("pypi.org", 443) == {}


@pytest.mark.parametrize(
    ("egress", "headers", "says"),
    [
        ("pypi.org", None, "list of hosts"),
        (["pypi.org/simple"], None, "neither a host name"),
        (["https://pypi.org"], None, "do not belong"),
        (["*"], None, "neither a host name"),
        (["*.com"], None, "top-level domain"),
        (["pypi.org:0"], None, "valid port"),
        (["pypi.org:http"], None, "valid port"),
        ([""], None, "must be a host"),
        ([42], None, "must be a host"),
        (["pypi.org"], {"api.example.com": {"X": "1"}}, "does not allow"),
        (["10.0.0.1"], {"10.0.0.1": {"X": "1"}}, "listed name"),
        (["*.example.com"], {"*.example.com": {"X": "1"}}, "not to a wildcard"),
        (["a.example.com"], {"a.example.com": {"Bad Name": "1"}}, "header name"),
        (["a.example.com"], {"a.example.com": {"X": "1\r\nEvil: 2"}}, "one-line"),
        (["a.example.com"], {"a.example.com": {"Host": "b.example.com"}}, "belongs to the request"),
        (["a.example.com"], {"a.example.com": "Bearer k"}, "must map"),
    ],
)
def test_bad_entries_say_what_is_wrong(egress: object, headers: object, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_policy(egress, headers)  # type: ignore[arg-type]


def test_the_policy_crosses_to_the_proxy_whole() -> None:
    policy = parse_policy([*PYPI, "10.0.0.0/8:5000"], {"pypi.org": {"X-Token": "t0ken-value"}})
    assert EgressPolicy.from_json(policy.to_json()) == policy
    assert parse_policy([]).closed and not policy.closed
