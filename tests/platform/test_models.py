"""Models: scripted, replayed, and litellm against a real OpenAI-protocol server on loopback."""

from __future__ import annotations

import json
import threading
import time

import pytest

from codeward import ChatMessage, LiteLLMModel, ModelError, ReplayModel, ScriptedModel
from codeward.platform.models import ModelSetupError
from tests.platform.openai_server import ChatServer

USER = [ChatMessage("user", "Say hello")]


def test_scripted_model_plays_in_order_cuts_at_stop_sequences_and_counts_tokens():
    model = ScriptedModel(["one <code>x</code> tail", "two"])
    first = model.generate(USER, stop_sequences=["</code>"])
    assert first.content == "one <code>x"
    assert first.token_usage.input_tokens > 0 and first.token_usage.output_tokens > 0
    assert model.generate(USER).content == "two"
    assert model.calls == [USER, USER]


def test_a_lone_stop_string_is_one_sequence_as_providers_take_it():
    model = ScriptedModel(["one <code>x</code> tail"])
    assert model.generate(USER, stop_sequences="</code>").content == "one <code>x"  # not cut at its "<"


def test_scripted_model_says_when_it_runs_out():
    model = ScriptedModel(["only"])
    model.generate(USER)
    with pytest.raises(ModelError, match="holds 1 and was asked for number 2"):
        model.generate(USER)


def test_scripted_model_refuses_a_bare_string():
    with pytest.raises(TypeError, match="list of responses"):
        ScriptedModel("final_answer(1)")


def test_replay_model_explains_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no saved run"):
        ReplayModel(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="invalid JSON"):
        ReplayModel(bad)
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"steps": [{"type": "task", "task": "t"}]}))
    with pytest.raises(ValueError, match="no model messages"):
        ReplayModel(empty)


def test_litellm_model_talks_to_an_openai_compatible_server():
    with ChatServer(["Hello there <code>stop here"]) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.url, api_key="test-key")
        message = model.generate(USER, stop_sequences=["<code>"])
    assert message.content.strip() == "Hello there"
    assert (message.token_usage.input_tokens, message.token_usage.output_tokens) == (11, 7)
    assert server.requests[0]["messages"] == [{"role": "user", "content": "Say hello"}]
    assert server.requests[0]["stop"] == ["<code>"]


@pytest.mark.parametrize("status", [429, 500, 503])
def test_litellm_model_retries_rate_limits_and_outages_with_backoff(monkeypatch, status):
    """Two failures that may pass, then an answer: three requests, with a wait before each retry."""
    waits: list[float] = []
    real_sleep = time.sleep
    caller = threading.get_ident()

    def recorded_sleep(seconds: float) -> None:
        if threading.get_ident() == caller:
            waits.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", recorded_sleep)
    with ChatServer(["finally"], fail_first=2, fail_status=status) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.url, api_key="k", num_retries=0)
        message = model.generate(USER)
    assert message.content == "finally"
    assert len(server.requests) == 3
    assert len(waits) == 2 and all(0 < wait <= 60 for wait in waits), waits


def test_litellm_model_streams_deltas_and_usage():
    with ChatServer(["one two three"]) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.url, api_key="k")
        deltas = list(model.generate_stream(USER))
    assert "".join(d.content or "" for d in deltas) == "one two three"
    assert any(d.token_usage and d.token_usage.output_tokens == 7 for d in deltas)


def test_litellm_model_needs_a_model_id():
    with pytest.raises(ValueError, match="needs a model id"):
        LiteLLMModel("")


@pytest.mark.parametrize(
    "status, says",
    [
        (401, r"the provider refused the key for 'openai/no-such-model' \(401: Incorrect API key provided"),
        (400, r"the provider refused the request for 'openai/no-such-model' \(400: Invalid value"),
        (404, r"the provider has no model 'openai/no-such-model' \(404: The model `no-such-model` does not exist"),
    ],
)
def test_litellm_model_fails_at_once_on_what_retrying_cannot_fix(status, says, capfd):
    with ChatServer([], fail_first=10, fail_status=status) as server:
        model = LiteLLMModel("openai/no-such-model", api_base=server.url, api_key="wrong-key", num_retries=0)
        with pytest.raises(ModelSetupError, match=says):
            model.generate(USER)
    assert len(server.requests) == 1
    assert "Give Feedback" not in "".join(capfd.readouterr())  # litellm's banner, once per attempt


def test_litellm_model_without_a_key_names_the_variable_to_set(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with ChatServer(["never sent"]) as server:
        model = LiteLLMModel("openai/gpt-4o-mini", api_base=server.url, num_retries=0)
        with pytest.raises(ModelSetupError, match=r"no API key for 'openai/gpt-4o-mini': set OPENAI_API_KEY$"):
            model.generate(USER)
    assert server.requests == []


def test_litellm_model_refuses_a_model_id_with_no_provider_at_once():
    with pytest.raises(ModelSetupError, match="litellm knows no provider for the model id 'foo:bar'"):
        LiteLLMModel("foo:bar", num_retries=0).generate(USER)
