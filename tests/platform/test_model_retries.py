"""A model call that fails and is retried says so at each retry, and gives up with the cause in one sentence.

Real litellm calls, to a loopback port nothing listens on (refused at once) or to a server that
answers with an outage; the waits are made small through the model's own retry settings.
"""

from __future__ import annotations

import asyncio
import logging
import re

import pytest

from codeward import ChatMessage, LiteLLMModel, ModelError
from tests.platform.openai_server import ChatServer, closed_port

USER = [ChatMessage("user", "Say hello")]
RETRY_LINE = re.compile(r"model call failed: (.+); try (\d+) of (\d+) in (\d+\.\d\d) s$")


def retry_lines(caplog: pytest.LogCaptureFixture) -> list[re.Match[str]]:
    said = [record.getMessage() for record in caplog.records if record.name.startswith("codeward")]
    matches = [RETRY_LINE.match(line) for line in said]
    assert all(matches), said
    return [match for match in matches if match]


@pytest.mark.parametrize("awaited", [False, True], ids=["call", "awaited"])
def test_an_unreachable_model_says_each_retry_and_gives_up_naming_where_and_why(caplog, awaited):
    caplog.set_level(logging.WARNING)
    base = f"http://127.0.0.1:{closed_port()}/v1"
    model = LiteLLMModel("openai/gpt-4o-mini", api_base=base, api_key="k", max_retries=2, retry_wait=0.05)
    with pytest.raises(ModelError) as raised:
        if awaited:
            asyncio.run(model.agenerate(USER))
        else:
            model.generate(USER)
    assert str(raised.value) == f"could not reach the model at {base} after 3 tries: connection refused"
    lines = retry_lines(caplog)
    assert [(m[1], m[2], m[3]) for m in lines] == [
        (f"could not reach {base} (connection refused)", "2", "3"),
        (f"could not reach {base} (connection refused)", "3", "3"),
    ]
    assert float(lines[0][4]) <= 0.05 and float(lines[1][4]) <= 0.1  # the n-th wait is below retry_wait * 2**(n-1)


def test_each_try_is_one_request_so_each_retry_line_is_one_more_request(caplog):
    """litellm's HTTP client retries nothing of its own: it would wait unseen between the lines."""
    caplog.set_level(logging.WARNING)
    with ChatServer([], fail_first=10, fail_status=503) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.url, api_key="k", max_retries=2, retry_wait=0.01)
        with pytest.raises(ModelError) as raised:
            model.generate(USER)
    assert len(server.requests) == 3
    assert str(raised.value) == f"the model at {server.url} still failed after 3 tries: 503: the engine is overloaded"
    assert [m[1] for m in retry_lines(caplog)] == [f"{server.url} answered 503: the engine is overloaded"] * 2


def test_no_retries_gives_up_after_the_one_try(caplog):
    caplog.set_level(logging.WARNING)
    base = f"http://127.0.0.1:{closed_port()}/v1"
    with pytest.raises(ModelError, match=r"after 1 try: connection refused$"):
        LiteLLMModel("openai/gpt-4o-mini", api_base=base, api_key="k", max_retries=0).generate(USER)
    assert retry_lines(caplog) == []


@pytest.mark.parametrize(
    "settings", [{"max_retries": -1}, {"max_retries": 1.5}, {"retry_wait": -1}, {"retry_wait": 61}]
)
def test_retry_settings_out_of_range_are_refused(settings):
    with pytest.raises(ValueError, match=r"max_retries must be|retry_wait must be"):
        LiteLLMModel("openai/gpt-4o-mini", **settings)
