"""The local internet, checked from the host: each origin answers, records, bounds and refuses as the egress tests
rely on it to."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.egress.internet import MAX_BODY, MAX_BYTES, Origin, TcpEcho, wait_for

#: Follows no redirect: the test reads the 302 itself.
_NO_REDIRECTS = urllib.request.build_opener(
    type("NoRedirect", (urllib.request.HTTPRedirectHandler,), {"redirect_request": lambda *args: None})
)


def fetch(url: str, *, data: bytes | None = None, headers: dict[str, str] | None = None, **kwargs: Any) -> Any:
    request = urllib.request.Request(url, data=data, headers=headers or {})
    return urllib.request.urlopen(request, timeout=10, **kwargs)


def test_echo_answers_what_arrived_and_the_origin_records_it(http_origin: Origin) -> None:
    assert http_origin.requests == []
    headers = {"Authorization": "Bearer origin-test-token", "X-Codeward-Test": "yes"}
    with fetch(http_origin.url("/echo?x=1"), data=b"twelve bytes", headers=headers) as response:
        echoed = json.load(response)
    assert echoed["method"] == "POST" and echoed["path"] == "/echo?x=1" and echoed["body_length"] == 12
    assert echoed["headers"]["Authorization"] == "Bearer origin-test-token"
    assert echoed["headers"]["Host"] == f"127.0.0.1:{http_origin.port}"
    [arrived] = http_origin.requests
    assert (arrived.method, arrived.path, arrived.body_length) == ("POST", "/echo?x=1", 12)
    assert arrived.header("authorization") == "Bearer origin-test-token"
    assert arrived.header("X-Absent") is None


def test_each_test_starts_with_an_empty_record(http_origin: Origin) -> None:
    assert http_origin.requests == []  # the previous test's requests were cleared


def test_redirect_answers_302_to_the_url_given(http_origin: Origin, other_origin: Origin) -> None:
    target = other_origin.url("/echo")
    with pytest.raises(urllib.error.HTTPError) as answer:
        _NO_REDIRECTS.open(http_origin.url(f"/redirect?to={target}"), timeout=10)
    assert answer.value.code == 302 and answer.value.headers["Location"] == target
    assert other_origin.requests == []
    with fetch(http_origin.url(f"/redirect?to={target}")) as response:  # followed, it lands on the other origin
        assert json.load(response)["path"] == "/echo"
    assert [request.path for request in other_origin.requests] == ["/echo"]
    assert http_origin.port != other_origin.port


def test_a_redirect_that_would_split_headers_is_refused(http_origin: Origin) -> None:
    with pytest.raises(urllib.error.HTTPError) as answer:
        fetch(http_origin.url("/redirect?to=http://x/%0d%0aSet-Cookie:%20a=b"))
    assert answer.value.code == 400


def test_bytes_sends_n_bytes_and_caps_n(http_origin: Origin) -> None:
    with fetch(http_origin.url("/bytes?n=100000")) as response:
        assert len(response.read()) == 100_000
    connection = http.client.HTTPConnection("127.0.0.1", http_origin.port, timeout=10)
    connection.request("HEAD", "/bytes?n=999999999999")
    assert int(connection.getresponse().getheader("Content-Length")) == MAX_BYTES
    connection.close()


def test_slow_answers_after_the_seconds_asked(http_origin: Origin) -> None:
    started = time.monotonic()
    with fetch(http_origin.url("/slow?seconds=0.3")) as response:
        assert json.load(response) == {"slept": 0.3}
    assert time.monotonic() - started >= 0.3


def test_a_body_past_the_bound_is_refused_unread(http_origin: Origin) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", http_origin.port, timeout=10)
    connection.putrequest("POST", "/echo")
    connection.putheader("Content-Length", str(MAX_BODY + 1))
    connection.endheaders()
    assert connection.getresponse().status == 413
    connection.close()
    [arrived] = http_origin.requests
    assert arrived.body_length == 0


def test_a_chunked_body_is_read_and_counted(http_origin: Origin) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", http_origin.port, timeout=10)
    connection.request("PUT", "/echo", body=iter([b"abc", b"defg"]), encode_chunked=True)
    assert json.load(connection.getresponse())["body_length"] == 7
    connection.close()


def test_the_origin_is_no_proxy(http_origin: Origin) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", http_origin.port, timeout=10)
    connection.request("CONNECT", "example.com:443")
    assert connection.getresponse().status == 405
    connection.close()
    assert [request.method for request in http_origin.requests] == ["CONNECT"]


def test_origins_listen_on_the_loopback_interface_only(
    http_origin: Origin, other_origin: Origin, https_origin: Origin, tcp_echo: TcpEcho
) -> None:
    for server in (http_origin, other_origin, https_origin, tcp_echo):
        assert server.host == "127.0.0.1"
    assert len({http_origin.port, other_origin.port, https_origin.port, tcp_echo.port}) == 4


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
def test_https_is_trusted_with_the_test_ca_for_its_names(https_origin: Origin, host: str) -> None:
    context = ssl.create_default_context(cafile=https_origin.ca_file)
    with fetch(https_origin.url("/echo", host=host), headers={"X-Over": "tls"}, context=context) as response:
        assert json.load(response)["headers"]["X-Over"] == "tls"
    assert https_origin.requests[-1].header("x-over") == "tls"
    assert https_origin.ca_pem.startswith("-----BEGIN CERTIFICATE-----")


def test_https_names_origin_test_in_its_certificate(https_origin: Origin) -> None:
    context = ssl.create_default_context(cadata=https_origin.ca_pem)
    with (
        socket.create_connection(("127.0.0.1", https_origin.port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="origin.test") as tls,  # verified against the name
    ):
        names = [value for kind, value in tls.getpeercert()["subjectAltName"] if kind == "DNS"]
    assert names == ["localhost", "origin.test"]


def test_https_is_refused_without_the_test_ca_and_for_other_names(https_origin: Origin) -> None:
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        fetch(https_origin.url("/echo"), context=ssl.create_default_context())
    context = ssl.create_default_context(cafile=https_origin.ca_file)
    with (
        socket.create_connection(("127.0.0.1", https_origin.port), timeout=10) as raw,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        context.wrap_socket(raw, server_hostname="pypi.org")
    assert https_origin.requests == []  # no request got through a failed handshake
    with fetch(https_origin.url("/echo"), context=context) as response:  # and the origin still serves
        assert response.status == 200


def test_plain_http_to_the_https_origin_gets_no_answer(https_origin: Origin) -> None:
    with pytest.raises((http.client.HTTPException, OSError)):
        fetch(f"http://127.0.0.1:{https_origin.port}/echo")
    assert https_origin.requests == []


def test_tcp_echo_sends_back_what_arrives(tcp_echo: TcpEcho) -> None:
    payload = b"not http at all\x00\x01" * 1000
    with socket.create_connection((tcp_echo.host, tcp_echo.port), timeout=10) as connection:
        connection.sendall(payload)
        received = b""
        while len(received) < len(payload):
            chunk = connection.recv(65536)
            assert chunk, "the echo server closed early"
            received += chunk
    assert received == payload
    assert wait_for(lambda: len(tcp_echo.connections) == 1)


def test_a_plain_http_origin_has_no_ca(http_origin: Origin) -> None:
    with pytest.raises(AttributeError, match="no CA"):
        http_origin.ca_file  # noqa: B018
