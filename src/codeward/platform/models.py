"""Models: the one place that talks to a language model.

`LiteLLMModel` reaches every provider through litellm; `ScriptedModel` and
`ReplayModel` play fixed or recorded responses, which is how tests, CI and
offline users drive an agent without a provider.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codeward.effects import offload
from codeward.handed_files import read_handed
from codeward.json_values import read_json
from codeward.platform.model_retries import MAX_WAIT, provider_says, retrying
from codeward.wording import a

if TYPE_CHECKING:
    from codeward.tools import Tool

__all__ = [
    "ChatMessage",
    "ChatMessageStreamDelta",
    "LiteLLMModel",
    "Model",
    "ModelError",
    "ModelSetupError",
    "ReplayModel",
    "ScriptedModel",
    "TokenUsage",
    "ToolCall",
    "setup_problem",
]

ROLES = ("system", "user", "assistant")


@dataclass
class TokenUsage:
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens)

    def to_dict(self) -> dict[str, int]:
        return {**asdict(self), "total_tokens": self.total_tokens}


@dataclass
class ToolCall:
    """One call the model asked for: a tool by name, or the code a code agent runs."""

    name: str
    arguments: Any
    id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:12]}")

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class ChatMessage:
    """A message to or from the model. `content` is text, or a list of parts when images ride along."""

    role: str
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[ToolCall] | None = None
    token_usage: TokenUsage | None = None
    finish_reason: str | None = None  # why the model stopped ("stop", "length", "tool_calls"), where it said

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.get("text", "") for part in self.content if part.get("type") == "text")
        return self.content or ""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.token_usage:
            data["token_usage"] = self.token_usage.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChatMessage:
        calls = data.get("tool_calls")
        usage = data.get("token_usage")
        return cls(
            role=data.get("role", "assistant"),
            content=data.get("content"),
            tool_calls=[
                ToolCall(c["function"]["name"], c["function"]["arguments"], c.get("id") or f"call_{i}")
                for i, c in enumerate(calls)
            ]
            if calls
            else None,
            token_usage=TokenUsage(usage["input_tokens"], usage["output_tokens"]) if usage else None,
        )


@dataclass
class ChatMessageStreamDelta:
    """A piece of a streamed answer; the agent joins them into one `ChatMessage`."""

    content: str | None = None
    tool_calls: list[ToolCall] | None = None
    token_usage: TokenUsage | None = None
    finish_reason: str | None = None


class ModelError(RuntimeError):
    """The model could not answer (exhausted script, unreachable provider, bad response)."""


class ModelSetupError(ModelError):
    """The model cannot answer as it is set up: no key, a refused key, an unknown model, a refused request.

    Retrying will not fix any of these, so it is raised at the first failure, saying what to change,
    instead of after minutes of backoff.
    """


class Model:
    """The interface agents call. Subclasses implement `generate`; streaming is optional."""

    model_id: str = "model"
    supports_streaming: bool = False

    def generate(
        self,
        messages: Sequence[ChatMessage],
        stop_sequences: list[str] | None = None,
        tools_to_call_from: list[Tool] | None = None,
        **kwargs: Any,
    ) -> ChatMessage:
        raise NotImplementedError

    def generate_stream(
        self,
        messages: Sequence[ChatMessage],
        stop_sequences: list[str] | None = None,
        tools_to_call_from: list[Tool] | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatMessageStreamDelta]:
        message = self.generate(messages, stop_sequences, tools_to_call_from, **kwargs)
        yield ChatMessageStreamDelta(message.text(), message.tool_calls, message.token_usage, message.finish_reason)

    async def agenerate(
        self,
        messages: Sequence[ChatMessage],
        stop_sequences: list[str] | None = None,
        tools_to_call_from: list[Tool] | None = None,
        **kwargs: Any,
    ) -> ChatMessage:
        """`generate`, awaited (`arun` asks this): here, `generate` in the shared bounded pool of
        threads; a model with an async client overrides it and holds no thread while it waits."""
        return await offload(lambda: self.generate(messages, stop_sequences, tools_to_call_from, **kwargs))

    async def agenerate_stream(
        self,
        messages: Sequence[ChatMessage],
        stop_sequences: list[str] | None = None,
        tools_to_call_from: list[Tool] | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatMessageStreamDelta]:
        """`generate_stream`, awaited: here, each delta read in the shared pool of threads."""
        deltas = iter(self.generate_stream(messages, stop_sequences, tools_to_call_from, **kwargs))
        while (delta := await offload(next, deltas, None)) is not None:
            yield delta

    def __call__(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        return self.generate(messages, **kwargs)


def apply_stop_sequences(text: str, stop_sequences: list[str] | str | None) -> str:
    """Cut the text at the first stop sequence, as a provider's API does (a lone string is one
    sequence there, as OpenAI's `stop` takes it, never its letters)."""
    for stop in [stop_sequences] if isinstance(stop_sequences, str) else stop_sequences or ():
        index = text.find(stop)
        if index != -1:
            text = text[:index]
    return text


def estimate_tokens(characters: int) -> int:
    """About four characters a token: a stand-in count for models that report none."""
    return max(1, (characters + 3) // 4) if characters else 0


class ScriptedModel(Model):
    """Plays the given responses in order, whatever it is asked.

    A response is a string (the assistant's text), a `ChatMessage`, or a dict
    ``{"content": ..., "tool_calls": [{"name": ..., "arguments": ...}]}``. Token
    counts are estimated from the text (four characters a token). Every call's
    messages are kept in `calls`, so tests can check what the model was shown.
    """

    model_id = "scripted"
    supports_streaming = True

    def __init__(self, responses: Sequence[str | ChatMessage | dict[str, Any]]) -> None:
        if isinstance(responses, (str, bytes)) or not isinstance(responses, Sequence):
            raise TypeError(
                "ScriptedModel takes a list of responses, e.g. ScriptedModel(['<code>final_answer(1)</code>'])"
            )
        self.responses = [self._to_message(r, i) for i, r in enumerate(responses)]
        self.calls: list[list[ChatMessage]] = []
        self._lock = threading.Lock()

    @staticmethod
    def _to_message(response: Any, index: int) -> ChatMessage:
        if isinstance(response, ChatMessage):
            return response
        if isinstance(response, str):
            return ChatMessage("assistant", response)
        if isinstance(response, dict):
            calls = [
                ToolCall(c["name"], c.get("arguments", {}), c.get("id") or f"call_{index}_{j}")
                for j, c in enumerate(response.get("tool_calls") or [])
            ]
            return ChatMessage("assistant", response.get("content"), calls or None)
        raise TypeError(
            f"scripted response {index} is {a(type(response).__name__)}; use a string, a ChatMessage or a dict"
        )

    def generate(
        self,
        messages: Sequence[ChatMessage],
        stop_sequences: list[str] | None = None,
        tools_to_call_from: list[Tool] | None = None,
        **kwargs: Any,
    ) -> ChatMessage:
        with self._lock:
            index = len(self.calls)
            if index >= len(self.responses):
                raise ModelError(
                    f"{type(self).__name__} has no response left: it holds {len(self.responses)} "
                    f"and was asked for number {index + 1}; add responses or lower max_steps"
                )
            self.calls.append(list(messages))
        scripted = self.responses[index]
        content = scripted.content
        if isinstance(content, str):
            content = apply_stop_sequences(content, stop_sequences)
        prompt_chars = sum(len(m.text()) for m in messages)
        usage = TokenUsage(
            estimate_tokens(prompt_chars), estimate_tokens(len(content) if isinstance(content, str) else 0)
        )
        return ChatMessage(
            "assistant", content, scripted.tool_calls, usage, "tool_calls" if scripted.tool_calls else "stop"
        )

    async def agenerate(self, messages: Sequence[ChatMessage], *args: Any, **kwargs: Any) -> ChatMessage:
        """A scripted answer takes no time: given at once, on the loop."""
        return self.generate(messages, *args, **kwargs)

    async def agenerate_stream(
        self, messages: Sequence[ChatMessage], *args: Any, **kwargs: Any
    ) -> AsyncIterator[ChatMessageStreamDelta]:
        for delta in self.generate_stream(messages, *args, **kwargs):
            yield delta

    def generate_stream(
        self,
        messages: Sequence[ChatMessage],
        stop_sequences: list[str] | None = None,
        tools_to_call_from: list[Tool] | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatMessageStreamDelta]:
        message = self.generate(messages, stop_sequences, tools_to_call_from, **kwargs)
        pieces = re.findall(r"\S*\s*", message.text()) or [""]
        for piece in pieces:
            if piece:
                yield ChatMessageStreamDelta(content=piece)
        yield ChatMessageStreamDelta(
            tool_calls=message.tool_calls, token_usage=message.token_usage, finish_reason=message.finish_reason
        )


class ReplayModel(ScriptedModel):
    """Plays the model messages of a saved run (`agent.memory.save(path)`), in order."""

    model_id = "replay"

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        try:
            record = read_json(read_handed(path))  # a saved run may sit among links, or be too large to read
        except FileNotFoundError:
            raise FileNotFoundError(f"no saved run at {path}; save one with agent.memory.save(path)") from None
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not a saved run: invalid JSON ({error})") from None
        steps = record.get("steps") if isinstance(record, dict) else None
        if not isinstance(steps, list):
            raise ValueError(f"{path} is not a saved run: it has no 'steps' list")
        outputs = [s["model_output_message"] for s in steps if s.get("model_output_message")]
        if not outputs:
            raise ValueError(f"{path} holds no model messages to replay")
        super().__init__([ChatMessage.from_dict(m) for m in outputs])
        self.path = path


class LiteLLMModel(Model):
    """Any provider litellm knows (`"openai/gpt-4o-mini"`, `"anthropic/..."`, `"ollama/..."`).

    Rate limits and transient failures are retried `max_retries` times with exponential backoff
    and jitter (the first wait below `retry_wait` seconds, each next one's bound doubled), each
    retry logged as a warning that says what failed and the wait; past the last try the call
    raises `ModelError` with the cause. `requests_per_minute` spaces calls out for providers with a quota.
    """

    supports_streaming = True

    def __init__(
        self,
        model_id: str,
        api_base: str | None = None,
        api_key: str | None = None,
        *,
        max_retries: int = 5,
        retry_wait: float = 1.0,
        requests_per_minute: float | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(model_id, str) or not model_id.strip():
            raise ValueError("LiteLLMModel needs a model id such as 'openai/gpt-4o-mini'")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be a whole number, 0 or more, got {max_retries!r}")
        if isinstance(retry_wait, bool) or not isinstance(retry_wait, (int, float)) or not 0 <= retry_wait <= MAX_WAIT:
            raise ValueError(f"retry_wait must be a number of seconds from 0 to {MAX_WAIT:g}, got {retry_wait!r}")
        self.model_id = model_id
        self.api_base = api_base
        self.api_key = api_key
        self.max_retries = max_retries
        self.retry_wait = float(retry_wait)
        self.kwargs = kwargs
        self._interval = 60.0 / requests_per_minute if requests_per_minute else 0.0
        self._next_call = 0.0
        self._pace_lock = threading.Lock()

    def _completion_kwargs(
        self, messages: Sequence[ChatMessage], stop_sequences: list[str] | None, tools: list[Tool] | None
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "max_retries": 0,  # the HTTP client's retries would be silent: every try is one of `_retrying`'s
            "model": self.model_id,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            **self.kwargs,
        }
        if stop_sequences:
            kwargs["stop"] = stop_sequences
        if tools:
            kwargs["tools"] = [tool.to_json_schema() for tool in tools]
            kwargs["tool_choice"] = "required"
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key:
            kwargs["api_key"] = self.api_key
        return kwargs

    def _slot_delay(self) -> float:
        """How long this call waits for its turn under `requests_per_minute` (0 without a limit)."""
        if not self._interval:
            return 0.0
        with self._pace_lock:
            now = time.monotonic()
            delay = self._next_call - now
            self._next_call = max(now, self._next_call) + self._interval
        return max(0.0, delay)

    def _retrying(self) -> dict[str, Any]:
        """tenacity's settings, the same for a call and an awaited one: transient failures only, each retry told."""
        return retrying(self.model_id, self.api_base, self.max_retries, self.retry_wait, ModelError)

    def _call(self, **kwargs: Any) -> Any:
        from tenacity import Retrying

        litellm = _litellm()
        for attempt in Retrying(**self._retrying()):
            with attempt:
                if delay := self._slot_delay():
                    time.sleep(delay)
                try:
                    return litellm.completion(**kwargs)
                except Exception as error:
                    if (setup := self._setup_failure(litellm, error, kwargs)) is None:
                        raise  # retried if it may pass
                    raise setup from error
        raise AssertionError("unreachable")  # pragma: no cover

    async def _acall(self, **kwargs: Any) -> Any:
        from tenacity import AsyncRetrying

        litellm = _litellm()
        async for attempt in AsyncRetrying(**self._retrying()):
            with attempt:
                if delay := self._slot_delay():
                    await asyncio.sleep(delay)
                try:
                    return await litellm.acompletion(**kwargs)
                except Exception as error:
                    if (setup := self._setup_failure(litellm, error, kwargs)) is None:
                        raise  # retried if it may pass
                    raise setup from error
        raise AssertionError("unreachable")  # pragma: no cover

    def _setup_failure(self, litellm: Any, error: Exception, kwargs: dict[str, Any]) -> ModelSetupError | None:
        """A `ModelSetupError` saying what to change, for a failed request that retrying cannot fix."""
        return _setup_error(litellm, error, self.model_id, key_given=bool(self.api_key or kwargs.get("api_key")))

    def generate(
        self,
        messages: Sequence[ChatMessage],
        stop_sequences: list[str] | None = None,
        tools_to_call_from: list[Tool] | None = None,
        **kwargs: Any,
    ) -> ChatMessage:
        return _message_of(
            self._call(**self._completion_kwargs(messages, stop_sequences, tools_to_call_from), **kwargs)
        )

    async def agenerate(
        self,
        messages: Sequence[ChatMessage],
        stop_sequences: list[str] | None = None,
        tools_to_call_from: list[Tool] | None = None,
        **kwargs: Any,
    ) -> ChatMessage:
        """`generate` through litellm's async client (`acompletion`): no thread waits on the provider."""
        request = self._completion_kwargs(messages, stop_sequences, tools_to_call_from)
        return _message_of(await self._acall(**request, **kwargs))

    def generate_stream(
        self,
        messages: Sequence[ChatMessage],
        stop_sequences: list[str] | None = None,
        tools_to_call_from: list[Tool] | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatMessageStreamDelta]:
        request = self._completion_kwargs(messages, stop_sequences, tools_to_call_from)
        for chunk in self._call(**request, **_STREAMING, **kwargs):
            yield from _deltas_of(chunk)

    async def agenerate_stream(
        self,
        messages: Sequence[ChatMessage],
        stop_sequences: list[str] | None = None,
        tools_to_call_from: list[Tool] | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatMessageStreamDelta]:
        request = self._completion_kwargs(messages, stop_sequences, tools_to_call_from)
        async for chunk in await self._acall(**request, **_STREAMING, **kwargs):
            for delta in _deltas_of(chunk):
                yield delta


_STREAMING = {"stream": True, "stream_options": {"include_usage": True}}


def _litellm() -> Any:
    # codeward does not use litellm's price table: keep its import from fetching one over the network
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True  # else every failed attempt prints litellm's help banner
    return litellm


def _message_of(response: Any) -> ChatMessage:
    choice = response.choices[0].message
    calls = [ToolCall(c.function.name, _parse_arguments(c.function.arguments), c.id) for c in (choice.tool_calls or [])]
    usage = getattr(response, "usage", None)
    return ChatMessage(
        "assistant",
        choice.content,
        calls or None,
        TokenUsage(usage.prompt_tokens, usage.completion_tokens) if usage else None,
        getattr(response.choices[0], "finish_reason", None),
    )


def _deltas_of(chunk: Any) -> Iterator[ChatMessageStreamDelta]:
    usage = getattr(chunk, "usage", None)
    if usage:
        yield ChatMessageStreamDelta(token_usage=TokenUsage(usage.prompt_tokens, usage.completion_tokens))
    if chunk.choices and chunk.choices[0].delta and chunk.choices[0].delta.content:
        yield ChatMessageStreamDelta(content=chunk.choices[0].delta.content)
    if chunk.choices and getattr(chunk.choices[0], "finish_reason", None):
        yield ChatMessageStreamDelta(finish_reason=chunk.choices[0].finish_reason)


_MISSING_KEY = re.compile(r"missing\b.{0,40}\b(credentials|api[ _-]?key)", re.IGNORECASE)


def _setup_error(litellm: Any, error: Exception, model_id: str, *, key_given: bool) -> ModelSetupError | None:
    """`error` as the setup step it calls for, or None for a failure that may pass (rate limit, timeout, 5xx).

    A missing key is told by its message: litellm reports it as a 500 for OpenAI and as a connection
    error for Gemini, which would otherwise be retried.
    """
    said = provider_says(error)
    status = getattr(error, "status_code", None)
    if _MISSING_KEY.search(str(error)) and not key_given:
        return ModelSetupError(_no_key(litellm, model_id))
    if isinstance(error, (litellm.AuthenticationError, litellm.PermissionDeniedError)):
        where = "the api_key given" if key_given else _key_names(litellm, model_id)
        return ModelSetupError(f"the provider refused the key for {model_id!r} ({status}: {said}); check {where}")
    if isinstance(error, litellm.BadRequestError) and not getattr(error, "llm_provider", None):
        return ModelSetupError(_no_provider(model_id))
    if isinstance(error, litellm.NotFoundError):
        return ModelSetupError(f"the provider has no model {model_id!r} ({status}: {said}); check the model's name")
    if isinstance(error, (litellm.BadRequestError, litellm.UnprocessableEntityError)):
        return ModelSetupError(f"the provider refused the request for {model_id!r} ({status}: {said})")
    return None


def setup_problem(model_id: str, *, keys: bool = True) -> ModelSetupError | None:
    """What stops a litellm `model_id` from being called as this environment is set up, found without
    calling it (as a batch settles before its first job): a provider litellm does not know, or, with `keys`,
    no API key in the environment for a provider that takes one. The error is the one the first call would
    raise; None when neither is so. Credentials other than an API key (AWS, Google, a local server's
    address) are left to the call: they have other homes than the environment.
    """
    litellm = _litellm()
    try:
        litellm.get_llm_provider(model_id)
    except Exception:  # litellm's BadRequestError, or a ValueError for an id it cannot read
        return ModelSetupError(_no_provider(model_id))
    if not keys:
        return None
    try:
        missing = litellm.validate_environment(model_id).get("missing_keys") or []
    except Exception:  # an id litellm cannot check: the call will say
        return None
    if any(str(name).endswith("API_KEY") for name in missing):
        return ModelSetupError(_no_key(litellm, model_id))
    return None


def _no_key(litellm: Any, model_id: str) -> str:
    return f"no API key for {model_id!r}: set {_key_names(litellm, model_id)}"


def _no_provider(model_id: str) -> str:
    return (
        f"litellm knows no provider for the model id {model_id!r}: write PROVIDER/MODEL, such as "
        "openai/gpt-4o-mini or anthropic/claude-3-5-haiku-latest (see https://docs.litellm.ai/docs/providers)"
    )


def _key_names(litellm: Any, model_id: str) -> str:
    """The environment variable(s) that hold the key for `model_id`'s provider, as litellm reads them."""
    try:
        missing = litellm.validate_environment(model_id).get("missing_keys") or []
        provider = litellm.get_llm_provider(model_id)[1]
    except Exception:  # an id litellm cannot place names no variable
        missing, provider = [], ""
    if missing:
        return " or ".join(missing)
    return f"{provider.upper()}_API_KEY" if provider else "the provider's API key"


def _parse_arguments(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return read_json(arguments)
        except json.JSONDecodeError:
            return arguments
    return arguments
