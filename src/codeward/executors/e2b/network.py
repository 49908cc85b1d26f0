"""`egress=` on e2b: the allow-list becomes E2B's own network rules for the sandbox.

E2B's SDK takes ``Sandbox.create(network={"allow_out": [...], "deny_out": [...]})``:
each ``allow_out`` entry is a CIDR block, an IP address or a domain name
(``"example.com"``, ``"*.example.com"``), allowed entries win over denied ones,
and ``deny_out`` takes CIDR blocks and IP addresses only. So an allow-list is
``deny_out=["0.0.0.0/0"]`` plus the entries in ``allow_out``, enforced by E2B's
infrastructure outside the sandbox.

What those rules cannot say is refused here, naming the entry, rather than
widened or dropped: a port (an E2B rule opens every port of what it names),
IPv6 (the deny-all rule is IPv4's ``0.0.0.0/0``), and headers to add to
requests (codeward's header-adding proxy runs beside docker sandboxes only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from codeward.egress.policy import DEFAULT_PORTS, parse_rule

__all__ = ["ALL_TRAFFIC", "network_rules"]

#: E2B's "all traffic" (the SDK's `e2b.sandbox.network.ALL_TRAFFIC`).
ALL_TRAFFIC = "0.0.0.0/0"
_DOCKER = 'executor="docker" with egress=[...]'


def network_rules(
    egress: Sequence[str] | None, egress_headers: Mapping[str, Any] | None
) -> dict[str, list[str]] | None:
    """The SDK's ``network=`` option for `egress` (None: no rules, the sandbox's own setting holds).

    ``egress=[]`` denies all outbound traffic. Raises `ValueError` naming what E2B's rules cannot express.
    """
    if egress_headers:
        raise ValueError(
            "egress_headers is not supported on e2b: codeward adds headers in a proxy it runs beside docker "
            "sandboxes, and an E2B sandbox's traffic leaves from E2B's infrastructure, not through codeward. "
            f"Use {_DOCKER} and egress_headers={{...}}, or give the sandbox the credential with envs= "
            "(the code can then read it)"
        )
    if egress is None:
        return None
    if isinstance(egress, (str, bytes)) or not isinstance(egress, Sequence):
        raise ValueError(f"egress must be a list of hosts, IP addresses or CIDR blocks, got {egress!r}")
    allowed: list[str] = []
    for entry in egress:
        rule = _rule(entry)
        if rule not in allowed:
            allowed.append(rule)
    rules = {"deny_out": [ALL_TRAFFIC]}
    if allowed:
        rules["allow_out"] = allowed
    return rules


def _rule(entry: object) -> str:
    """One egress entry as an E2B ``allow_out`` entry, or `ValueError` saying why it cannot be one."""
    rule = parse_rule(entry)  # the same reading of an entry as on docker
    if rule.network is not None and rule.network.version != 4:
        raise ValueError(
            f"egress entry {entry!r} is IPv6, and codeward passes E2B IPv4 rules only: its deny-all rule is "
            f"{ALL_TRAFFIC}, so what an IPv6 rule would do there is not known. Use an IPv4 address or a host "
            f"name, or {_DOCKER}"
        )
    if rule.ports != DEFAULT_PORTS:
        host = rule.text.rsplit(":", 1)[0]
        raise ValueError(
            f"egress entry {entry!r} names a port, and E2B's network rules have none: a rule for {host!r} would "
            f"open every port on it. Give {host!r} alone to allow all its ports, or use {_DOCKER} to allow "
            "only some"
        )
    if rule.network is None:
        return str(rule.name)
    network = rule.network
    return str(network.network_address) if network.prefixlen == network.max_prefixlen else str(network)
