"""Secrets replaced by value: the forms a secret takes in what codeward writes, and what must not break."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest

from codeward import redaction
from codeward.redaction import REDACTED, mark_secret, redacted, redacted_data, url_without_secrets

CUT = "\n[... 49,979 characters of output cut ...]\n"


@pytest.fixture(autouse=True)
def forgotten_after() -> Iterator[None]:
    """The secrets these tests mark are common words: the process forgets them after each test."""
    known = set(redaction._marked)
    yield
    redaction._marked.intersection_update(known)


def test_a_secret_split_by_an_output_cut_is_redacted_on_both_sides() -> None:
    secret = "sk-live-ABCDEFGHIJ0123456789"
    mark_secret(secret)
    text = "A" * 20 + secret[:15] + CUT + secret[15:] + "B" * 20
    shown = redacted(text)
    assert secret[:15] not in shown and secret[15:] not in shown
    assert shown == "A" * 20 + REDACTED + CUT + REDACTED + "B" * 20


def test_control_text_beside_a_cut_that_is_no_secret_is_kept() -> None:
    mark_secret("sk-live-KLMNOPQRST9876543210")
    text = "plain head" + CUT + "plain tail"
    assert redacted(text) == text


def test_percent_encoded_and_basic_auth_forms_of_url_credentials_are_known() -> None:
    url_without_secrets("http://alice:p%40ssw0rd99@127.0.0.1:9/mcp?api_key=sk%2Flive%2F123456")
    basic = base64.b64encode(b"alice:p@ssw0rd99").decode()
    for form in ("p@ssw0rd99", "p%40ssw0rd99", "sk/live/123456", "sk%2Flive%2F123456", basic):
        assert redacted(f"said {form}.") == f"said {REDACTED}.", form


def test_a_secret_that_reads_like_the_records_structure_leaves_it_whole() -> None:
    mark_secret('"status"', "status")
    record = {"id": "a", "status": "success", "output": 'the "status" is fine'}
    written = json.loads(json.dumps(redacted_data(record)))
    assert written == {"id": "a", "status": "success", "output": f"the {REDACTED} is fine"}


def test_control_redacting_the_serialized_text_breaks_the_record() -> None:
    mark_secret('"steps"')
    text = redacted(json.dumps({"steps": [1]}))
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return
    raise AssertionError(f"still JSON: {text}")
