"""E2B's SDK calls as effects (`codeward.effects`): made with the sync SDK when blocking, awaited with
the async one (`AsyncSandbox`) when awaited, so the executor's logic is written once, as steps.

One sandbox is reached through `SandboxHandles`, which holds the handle its caller started with and
makes the other one from the same fields when first needed (no request: both SDKs reach a sandbox by
its id, domain and tokens alone). So an executor created by `acreate` serves `run`, and one created
by the constructor serves `arun` with E2B's own async client, never a thread per waiting call.

A call's callbacks (the lines a cell prints) are steps too: blocking, each is driven in place;
awaited, each is awaited on the event loop, so a host tool the sandbox asks for runs there.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator
from typing import Any

import httpx
from e2b import RateLimitException
from e2b_code_interpreter import AsyncSandbox, Sandbox

from codeward.effects import Effect, Steps, awaited, blocking

__all__ = ["RETRYABLE", "Pause", "SandboxHandles", "SdkCall", "Started", "retried"]

#: Errors on which a request that runs no code is tried again: the request never reached E2B, or E2B said "later".
RETRYABLE = (httpx.TransportError, ConnectionError, RateLimitException)
#: How often such a request is tried, and the longest pause between two tries (seconds).
_ATTEMPTS = 4
_MOST_PAUSE = 4.0

#: A callback of the SDK's (a printed line, a result), as steps, or plain if it never waits.
Handler = Callable[[Any], "Steps[None] | None"]


class SandboxHandles:
    """One sandbox, reached by the sync SDK for blocking calls and by the async SDK for awaited ones."""

    def __init__(self, sandbox: Sandbox | AsyncSandbox) -> None:
        self._sync = sandbox if isinstance(sandbox, Sandbox) else None
        self._async = sandbox if isinstance(sandbox, AsyncSandbox) else None
        self.sandbox_id: str = sandbox.sandbox_id

    def blocking(self) -> Sandbox:
        if self._sync is None:
            self._sync = _twin(Sandbox, self._async)
        return self._sync

    def awaiting(self) -> AsyncSandbox:
        if self._async is None:
            self._async = _twin(AsyncSandbox, self._sync)
        return self._async


def _twin(kind: type[Any], handle: Any) -> Any:
    """A handle of the other SDK on the same sandbox, built from the fields the SDK connects with."""
    fields = ("sandbox_id", "sandbox_domain", "traffic_access_token", "connection_config")
    return kind(
        envd_version=handle._envd_version,
        envd_access_token=handle._envd_access_token,
        **{field: getattr(handle, field) for field in fields},
    )


class SdkCall(Effect):
    """``sandbox.<method>(*args, **kwargs)`` (a dotted method, e.g. ``files.write``): blocking with
    the sync SDK, awaited with the async one. `handlers` are callbacks given as steps."""

    def __init__(
        self,
        handles: SandboxHandles,
        method: str,
        *args: Any,
        handlers: dict[str, Handler] | None = None,
        **kwargs: Any,
    ) -> None:
        self.handles, self.method, self.args, self.kwargs = handles, method, args, kwargs
        self.handlers = handlers or {}

    def call(self) -> Any:
        driven = {name: _driven_blocking(handler) for name, handler in self.handlers.items()}
        return _method(self.handles.blocking(), self.method)(*self.args, **self.kwargs, **driven)

    async def acall(self) -> Any:
        driven = {name: _driven_awaited(handler) for name, handler in self.handlers.items()}
        return await _method(self.handles.awaiting(), self.method)(*self.args, **self.kwargs, **driven)


def _method(sandbox: Any, dotted: str) -> Any:
    target = sandbox
    for name in dotted.split("."):
        target = getattr(target, name)
    return target


def _driven_blocking(handler: Handler) -> Callable[[Any], None]:
    def in_place(item: Any) -> None:
        steps = handler(item)
        if isinstance(steps, Generator):
            blocking(steps)

    return in_place


def _driven_awaited(handler: Handler) -> Callable[[Any], Any]:
    async def on_loop(item: Any) -> None:
        steps = handler(item)
        if isinstance(steps, Generator):
            await awaited(steps)

    return on_loop


class Started(Effect):
    """``Sandbox.<how>(**kwargs)`` (``create`` or ``connect``): the new sandbox's handles."""

    def __init__(self, how: str, *args: Any, **kwargs: Any) -> None:
        self.how, self.args, self.kwargs = how, args, kwargs

    def call(self) -> SandboxHandles:
        return SandboxHandles(getattr(Sandbox, self.how)(*self.args, **self.kwargs))

    async def acall(self) -> SandboxHandles:
        return SandboxHandles(await getattr(AsyncSandbox, self.how)(*self.args, **self.kwargs))


class Pause(Effect):
    """Wait `seconds`: sleeping when blocking, `asyncio.sleep` when awaited."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def call(self) -> None:
        time.sleep(self.seconds)

    async def acall(self) -> None:
        await asyncio.sleep(self.seconds)


def retried(make: Callable[[], Effect]) -> Steps[Any]:
    """The effect `make()` returns, tried again with growing pauses on `RETRYABLE` errors: only for
    requests that cannot have run any code."""
    for attempt in range(_ATTEMPTS):
        try:
            return (yield make())
        except RETRYABLE:
            if attempt == _ATTEMPTS - 1:
                raise
        yield Pause(min(_MOST_PAUSE, 0.5 * 2**attempt))
    raise AssertionError("unreachable: the last attempt returns or raises")
