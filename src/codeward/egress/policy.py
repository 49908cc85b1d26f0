"""What a sandbox may reach: the allow-list's rules and the headers the host adds for a host.

Standard library only: the proxy runs in mitmproxy's own environment and loads this
file by its path, so the host and the proxy read a policy with the same code.

The rules, in the words the README uses:
- a name (`pypi.org`) or a wildcard (`*.example.com`: any name below it, not the name
  itself) allows that name on ports 80 and 443; `name:port` allows that one port;
- an IP address, a CIDR range or `address:port` (`[v6]:port`) allows those addresses,
  on ports 80 and 443 unless a port is given;
- a name is resolved by the proxy, and each address it resolves to must be public, or
  listed itself: a name that leads to a private, loopback, link-local or metadata
  address is refused unless that address is in the list too.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "DEFAULT_PORTS",
    "PYPI",
    "EgressPolicy",
    "Rule",
    "as_address",
    "normal_host",
    "parse_policy",
    "parse_rule",
    "split_host_port",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: The ports an entry without one allows.
DEFAULT_PORTS = (80, 443)
#: The Python Package Index, as pip reaches it: the index and the files it links to.
PYPI = ("pypi.org", "files.pythonhosted.org")
_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_MAX_ENTRIES = 1000
_MAX_HEADER_BYTES = 8192


@dataclass(frozen=True)
class Rule:
    """One entry of the allow-list, parsed: a name pattern or a network, and the ports it opens."""

    text: str
    name: str | None = None  # lower case; "*.example.com" for a wildcard
    network: IPNetwork | None = None
    ports: tuple[int, ...] = DEFAULT_PORTS

    def allows_name(self, host: str, port: int) -> bool:
        if self.name is None or port not in self.ports:
            return False
        if self.name.startswith("*."):
            return host.endswith(self.name[1:]) and len(host) > len(self.name) - 1
        return host == self.name

    def allows_address(self, address: IPAddress, port: int) -> bool:
        return self.network is not None and port in self.ports and address in self.network


@dataclass(frozen=True)
class EgressPolicy:
    """The rules and the added headers of one sandbox; immutable, so a change is a new policy."""

    rules: tuple[Rule, ...] = ()
    #: host or host:port, as the user keyed it (lower case), to the headers added to its requests.
    headers: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @property
    def closed(self) -> bool:
        return not self.rules

    def refusal(self, host: str, port: int) -> str | None:
        """Why a request to `host:port` is refused before any lookup, or None when the list allows it."""
        address = as_address(host)
        if address is not None:
            if any(rule.allows_address(address, port) for rule in self.rules):
                return None
            return f"{_show(host, port)} is not on the sandbox's egress list (an address must be listed itself)"
        if any(rule.allows_name(normal_host(host), port) for rule in self.rules):
            return None
        return f"{_show(host, port)} is not on the sandbox's egress list"

    def address_refusal(self, address: str, port: int) -> str | None:
        """Why a resolved address may not be reached on `port`, or None: private ones must be listed themselves."""
        parsed = as_address(address)
        if parsed is None:
            return f"{address!r} is not an IP address"
        if any(rule.allows_address(parsed, port) for rule in self.rules):
            return None
        if _public(parsed):
            return None
        return f"{address} is a private, loopback, link-local or reserved address that the egress list does not name"

    def headers_for(self, host: str, port: int) -> dict[str, str]:
        """The headers the host adds to a request to `host:port` (a `host:port` key wins over a `host` one)."""
        host = normal_host(host)
        added = dict(self.headers.get(host, {})) if port in DEFAULT_PORTS else {}
        added.update(self.headers.get(f"{host}:{port}", {}))
        return added

    def to_json(self) -> str:
        """What the host sends the proxy: the entries as given and the headers (secrets: never written to disk)."""
        return json.dumps({"egress": [rule.text for rule in self.rules], "headers": self.headers})

    @classmethod
    def from_json(cls, text: str) -> EgressPolicy:
        data = json.loads(text)
        return parse_policy(data["egress"], data["headers"])


def parse_policy(egress: Iterable[str] | None, headers: Mapping[str, Mapping[str, str]] | None = None) -> EgressPolicy:
    """Check the user's entries and headers; a `ValueError` names what is wrong and what to write instead."""
    if isinstance(egress, (str, bytes)):
        raise ValueError(f"egress must be a list of hosts, such as ['pypi.org'], not the single string {egress!r}")
    entries = list(egress or ())
    if len(entries) > _MAX_ENTRIES:
        raise ValueError(f"egress lists {len(entries)} entries; at most {_MAX_ENTRIES} are allowed")
    rules = tuple(parse_rule(entry) for entry in entries)
    policy = EgressPolicy(rules)
    checked: dict[str, dict[str, str]] = {}
    for key, values in (headers or {}).items():
        target = _header_key(key, policy)
        checked[target] = _checked_headers(key, values)
    return EgressPolicy(rules, checked)


def normal_host(host: str) -> str:
    """A host name as rules compare it: lower case, without a final dot."""
    return host.strip().lower().rstrip(".")


def parse_rule(entry: object) -> Rule:
    """One entry of the list, checked; a `ValueError` says what is wrong with it."""
    if not isinstance(entry, str) or not entry.strip():
        raise ValueError(f"an egress entry must be a host such as 'pypi.org' or '10.0.0.0/8', got {entry!r}")
    text = entry.strip()
    if "://" in text or any(mark in text for mark in "?#@ \\"):
        raise _unreadable(entry)
    host, ports = _split_port(text)
    try:
        network = ipaddress.ip_network(host, strict=False)
    except ValueError:
        network = None
    if network is not None:
        return Rule(text, network=network, ports=ports)
    name = normal_host(host)
    labels = name[2:].split(".") if name.startswith("*.") else name.split(".")
    if not name or len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise _unreadable(entry)
    if name.startswith("*.") and len(labels) < 2:
        raise ValueError(f"egress entry {entry!r} opens a whole top-level domain; name the domain, as '*.example.com'")
    return Rule(text, name=name, ports=ports)


def _unreadable(entry: str) -> ValueError:
    return ValueError(
        f"egress entry {entry!r} is neither a host name (like 'pypi.org' or '*.example.com'), an IP address nor "
        "a CIDR block (like '10.0.0.0/8'), with ':port' for a port other than 80 and 443; a URL's scheme, path "
        "or credentials do not belong in it"
    )


def _split_port(text: str) -> tuple[str, tuple[int, ...]]:
    """The host part of an entry and the ports it opens."""
    host, port = split_host_port(text)
    return host, DEFAULT_PORTS if port is None else (port,)


def split_host_port(text: str) -> tuple[str, int | None]:
    """`host`, `host:port`, `[v6]:port`, `v6` and `cidr` alike: the host part and the port given, if any.

    The proxy reads Host headers with it too, so an entry and a request name a port the same way.
    """
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if not rest:
            return host, None
        if not rest.startswith(":"):
            raise ValueError(f"egress entry {text!r}: write an IPv6 address with a port as '[address]:port'")
        return host, _port(text, rest[1:])
    if text.count(":") == 1:
        host, _, port = text.partition(":")
        return host, _port(text, port)
    return text, None


def _port(entry: str, text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"egress entry {entry!r} has no valid port (1 to 65535) after ':'")
    return int(text)


def _header_key(key: object, policy: EgressPolicy) -> str:
    if not isinstance(key, str):
        raise ValueError(f"egress_headers is keyed by host or 'host:port', got {key!r}")
    host, ports = _split_port(key.strip())
    allowed = [port for port in ports if policy.refusal(host, port) is None]
    if "*" in host:
        raise ValueError(f"egress_headers names {key!r}: headers go to one named host, not to a wildcard's names")
    if not allowed or as_address(host) is not None:
        raise ValueError(
            f"egress_headers names {key!r}, which the egress list does not allow as a host name: headers are "
            "added only for a listed name (add it to egress=[...])"
        )
    return normal_host(host) + (f":{ports[0]}" if ports != DEFAULT_PORTS else "")


def _checked_headers(key: str, values: object) -> dict[str, str]:
    if not isinstance(values, Mapping):
        raise ValueError(f"egress_headers[{key!r}] must map header names to values, got {type(values).__name__}")
    checked: dict[str, str] = {}
    for name, value in values.items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise ValueError(f"egress_headers[{key!r}] has {name!r}, which is not an HTTP header name")
        if name.lower() in {"host", "content-length", "transfer-encoding", "connection", "upgrade"}:
            raise ValueError(f"egress_headers[{key!r}] may not set {name!r}: it belongs to the request itself")
        if not isinstance(value, str) or any(ch in value for ch in "\r\n\0"):
            raise ValueError(f"egress_headers[{key!r}][{name!r}] must be a one-line string")
        if len(name) + len(value) > _MAX_HEADER_BYTES:
            raise ValueError(f"egress_headers[{key!r}][{name!r}] is longer than {_MAX_HEADER_BYTES} bytes")
        checked[name] = value
    return checked


def as_address(host: str) -> IPAddress | None:
    """`host` as an IP address (an IPv4-mapped IPv6 address as the IPv4 one it is), or None for a name."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


#: IPv6 ranges that lead to an IPv4 host through a gateway: never taken for the IPv4 address they carry.
_CARRIERS = tuple(ipaddress.ip_network(net) for net in ("64:ff9b::/96", "64:ff9b:1::/48", "2002::/16", "2001::/32"))


def _public(address: IPAddress) -> bool:
    """Public, and not a translation to somewhere else (NAT64, 6to4, Teredo), which only listing may open."""
    if isinstance(address, ipaddress.IPv6Address) and any(address in carrier for carrier in _CARRIERS):
        return False
    return address.is_global and not address.is_multicast


def _show(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
