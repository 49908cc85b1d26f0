"""The local internet's fixtures (see `tests.egress.internet`), for every test in this folder."""

from __future__ import annotations

from tests.egress.internet import (  # noqa: F401 (fixtures are found by their name here)
    _http_origin_server,
    _https_origin_server,
    _other_origin_server,
    _tcp_echo_server,
    egress_ca,
    http_origin,
    https_origin,
    other_origin,
    tcp_echo,
)
