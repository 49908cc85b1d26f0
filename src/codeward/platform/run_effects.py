"""What an agent's run waits on, each an `effects.Effect`: the model's answer, and the sandbox.

The run's lifecycle (`agents`, `code_agent`) is written once, as generators; it yields these where
it waits, and `run` does them by blocking while `arun` awaits them, so the same steps, errors,
callbacks and spans come either way. Awaited, the model is asked through its async calls
(`Model.agenerate`), the sandbox through its executor's (`Executor.arun`), and a block's output
comes as events from the loop with no thread between.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Generator
from typing import Any

from codeward.effects import Effect, Finished, StreamingEffect
from codeward.executors.base import CodeOutput, Executor, run_block
from codeward.executors.live import OutputCallback, heard_by_all
from codeward.platform.live_blocks import BlockOutputDelta, streamed_block
from codeward.platform.models import ChatMessage, ChatMessageStreamDelta, Model, TokenUsage, ToolCall

__all__ = ["BlockRun", "LiveBlock", "ModelAnswer", "ModelDeltas", "SandboxSend"]


class ModelAnswer(Effect):
    """The model's whole answer: `generate`, or `agenerate` where the model has it."""

    def __init__(self, model: Model, messages: list[ChatMessage], kwargs: dict[str, Any]) -> None:
        self.model, self.messages, self.kwargs = model, messages, kwargs

    def call(self) -> ChatMessage:
        return self.model.generate(self.messages, **self.kwargs)

    async def acall(self) -> ChatMessage:
        asking = getattr(self.model, "agenerate", None)
        if asking is None:  # a model written before async (any object with `generate`)
            return await Model.agenerate(self.model, self.messages, **self.kwargs)
        answer: ChatMessage = await asking(self.messages, **self.kwargs)
        return answer


class _Answer:
    """A streamed answer put together from its deltas."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.usage = TokenUsage()
        self.calls: list[ToolCall] = []
        self.finish_reason: str | None = None

    def add(self, delta: ChatMessageStreamDelta) -> ChatMessageStreamDelta:
        self.parts.append(delta.content or "")
        self.usage += delta.token_usage or TokenUsage()
        self.calls.extend(delta.tool_calls or [])
        self.finish_reason = delta.finish_reason or self.finish_reason
        return delta

    def message(self) -> ChatMessage:
        return ChatMessage("assistant", "".join(self.parts), self.calls or None, self.usage, self.finish_reason)


class ModelDeltas(ModelAnswer, StreamingEffect):
    """The model's answer as it comes: each delta an event, the whole message the result."""

    def stream(self) -> Generator[ChatMessageStreamDelta, None, ChatMessage]:
        answer = _Answer()
        for delta in self.model.generate_stream(self.messages, **self.kwargs):
            yield answer.add(delta)
        return answer.message()

    async def astream(self) -> AsyncIterator[Any]:
        answer = _Answer()
        streaming = getattr(self.model, "agenerate_stream", None)
        deltas = (
            streaming(self.messages, **self.kwargs)
            if streaming is not None
            else Model.agenerate_stream(self.model, self.messages, **self.kwargs)
        )
        async for delta in deltas:
            yield answer.add(delta)
        yield Finished(answer.message())

    call = StreamingEffect.call
    acall = StreamingEffect.acall


class SandboxSend(Effect):
    """Variables or tools into the sandbox: `send_variables` / `send_tools`, or their awaited twins."""

    def __init__(self, executor: Executor, what: str, items: dict[str, Any]) -> None:
        self.executor, self.what, self.items = executor, what, items

    def call(self) -> None:
        getattr(self.executor, f"send_{self.what}")(self.items)

    async def acall(self) -> None:
        await getattr(self.executor, f"asend_{self.what}")(self.items)


class BlockRun(Effect):
    """One block in the sandbox: `run`, or `arun`; `on_output` hears its output as it comes."""

    def __init__(self, executor: Executor, code: str, on_output: OutputCallback | None) -> None:
        self.executor, self.code, self.on_output = executor, code, on_output

    def call(self) -> CodeOutput:
        return run_block(self.executor, self.code, self.on_output)

    async def acall(self) -> CodeOutput:
        return await self.executor.arun(self.code, self.on_output)


class LiveBlock(BlockRun, StreamingEffect):
    """A block whose output is also the run's events (`BlockOutputDelta`), for `stream=True`. A
    consumer that stops reading stops the block (blocking: `interrupt()`; awaited: a cancel)."""

    def stream(self) -> Generator[BlockOutputDelta, None, CodeOutput]:
        shown = self.on_output
        return streamed_block(
            lambda put: run_block(self.executor, self.code, heard_by_all(shown, put)), self.executor.interrupt
        )

    async def astream(self) -> AsyncIterator[Any]:
        pieces: asyncio.Queue[BlockOutputDelta] = asyncio.Queue()
        shown = self.on_output

        def put(stream: str, text: str) -> None:
            pieces.put_nowait(BlockOutputDelta(stream, text))

        running = asyncio.ensure_future(self.executor.arun(self.code, heard_by_all(shown, put)))
        waiting: asyncio.Future[BlockOutputDelta] | None = None
        try:
            while not (running.done() and pieces.empty()):
                waiting = asyncio.ensure_future(pieces.get())
                await asyncio.wait([waiting, running], return_when=asyncio.FIRST_COMPLETED)
                if waiting.done():
                    yield waiting.result()
                waiting.cancel()
        finally:
            if waiting is not None:
                waiting.cancel()
            if not running.done():  # the consumer went away, or was cancelled: so is the block
                running.cancel()
                with contextlib.suppress(BaseException):
                    await running
        yield Finished(running.result())

    call = StreamingEffect.call
    acall = StreamingEffect.acall
