"""How a model call is retried, and what the user is told while it is.

`LiteLLMModel` retries what may pass (rate limits, timeouts, lost connections, 5xx) with
tenacity, and this module gives it tenacity's settings. Before each retry tenacity's
``before_sleep`` hook logs one warning on this module's logger (``codeward`` prints it on
stderr) that says what failed and how long the wait is; past the last try its
``retry_error_callback`` raises one sentence with the cause, such as ``could not reach the
model at http://127.0.0.1:9/v1 after 3 tries: connection refused``. litellm's own retries
are turned off (``num_retries=0``), so every try is one of these.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Iterator
from typing import Any

__all__ = ["MAX_WAIT", "TRANSIENT_ERRORS", "cause_of", "provider_says", "retrying", "where_of"]

log = logging.getLogger(__name__)

#: litellm's error classes (by name) for failures that may pass, and so are retried.
TRANSIENT_ERRORS = (
    "RateLimitError",
    "Timeout",
    "APIConnectionError",
    "ServiceUnavailableError",
    "InternalServerError",
)

#: The longest wait before one retry, in seconds.
MAX_WAIT = 60.0

# The endpoint a request names, cut off the model's base URL.
_ENDPOINT = re.compile(r"/(?:chat/completions|completions|messages|responses|generate|api/chat)/?$")


def retrying(
    model_id: str, api_base: str | None, max_retries: int, retry_wait: float, fail: type[Exception]
) -> dict[str, Any]:
    """tenacity's settings for a model call: transient failures retried `max_retries` times, the
    n-th wait drawn at random below ``retry_wait * 2**(n-1)`` seconds (at most `MAX_WAIT`), each
    retry told on the log, and `fail` raised with the cause when the tries run out."""
    from tenacity import RetryCallState, retry_if_exception, stop_after_attempt, wait_random_exponential

    tries = max_retries + 1

    def before_sleep(state: RetryCallState) -> None:
        error = _error_of(state)
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        log.warning(
            "model call failed: %s; try %d of %d in %.2f s",
            _what_failed(error, model_id, api_base),
            state.attempt_number + 1,
            tries,
            wait,
        )

    def give_up(state: RetryCallState) -> Any:
        error = _error_of(state)
        raise fail(_gave_up(error, model_id, api_base, state.attempt_number)) from error

    return {
        "retry": retry_if_exception(lambda error: type(error).__name__ in TRANSIENT_ERRORS),
        "wait": wait_random_exponential(multiplier=retry_wait, max=MAX_WAIT),
        "stop": stop_after_attempt(tries),
        "before_sleep": before_sleep,
        "retry_error_callback": give_up,
    }


def _error_of(state: Any) -> BaseException:
    error = state.outcome.exception() if state.outcome is not None else None
    return error if error is not None else RuntimeError("the model call failed")


def _what_failed(error: BaseException, model_id: str, api_base: str | None) -> str:
    """One failed try, as the retry line says it."""
    where = where_of(error, api_base)
    if _unreachable(error) is not None:
        return f"could not reach {where or repr(model_id)} ({cause_of(error)})"
    return f"{where or repr(model_id)} answered {cause_of(error)}"


def _gave_up(error: BaseException, model_id: str, api_base: str | None, tries: int) -> str:
    """The sentence a call that ran out of tries raises."""
    where = where_of(error, api_base)
    model = f"the model at {where}" if where else f"the model {model_id!r}"
    after = f"after {tries} {'try' if tries == 1 else 'tries'}"
    if _unreachable(error) is not None:
        return f"could not reach {model} {after}: {cause_of(error)}"
    return f"{model} still failed {after}: {cause_of(error)}"


def _chain(error: BaseException) -> Iterator[BaseException]:
    """The error and those it was raised from or during, outermost first."""
    seen: set[int] = set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ if link.__cause__ is not None else link.__context__


def _unreachable(error: BaseException) -> str | None:
    """Why no answer came at all (refused, unresolved, timed out...), or None if the server answered."""
    for link in _chain(error):
        if isinstance(link, socket.gaierror):
            return f"the host name does not resolve ({link.strerror})"
        if isinstance(link, TimeoutError) or "Timeout" in type(link).__name__:
            return "timed out"
        if isinstance(link, OSError) and (link.errno or link.strerror):
            # by its number: asyncio's refusals say "Connect call failed (...)" where sockets say "Connection refused"
            said = os.strerror(link.errno) if link.errno and link.errno > 0 else str(link.strerror)
            return said[:1].lower() + said[1:]
    if any(type(link).__name__ == "APIConnectionError" for link in _chain(error)):
        return "no connection"
    return None


def cause_of(error: BaseException) -> str:
    """The cause of a failed try in a few words: ``connection refused``, ``timed out``, ``429: rate limited``."""
    unreachable = _unreachable(error)
    if unreachable is not None:
        return unreachable
    status = getattr(error, "status_code", None)
    said = provider_says(error)
    return f"{status}: {said}" if status else said


def where_of(error: BaseException, api_base: str | None) -> str | None:
    """The base URL the call went to: the one given, else the one the innermost request named.

    litellm's own errors carry a stand-in request (the provider's public URL), so the innermost
    one, made by the HTTP client, is the one that says where the call really went.
    """
    if api_base:
        return api_base.rstrip("/")
    url = None
    for link in _chain(error):
        try:
            request = getattr(link, "request", None)
        except RuntimeError:  # httpx's errors raise when they were made without a request
            request = None
        if request is not None and getattr(request, "url", None) is not None:
            url = str(request.url)
    if url is None:
        return None
    return _ENDPOINT.sub("", url.split("?", 1)[0])


def provider_says(error: BaseException) -> str:
    """The first line of a litellm error, without the class names litellm repeats in front of it."""
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return re.sub(r"^(?:litellm\.\w+: |\w+(?:Error|Exception)(?: -|:) )+", "", first).strip()
