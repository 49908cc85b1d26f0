"""Waiting, written once: the code that waits yields what it waits on, and its caller waits.

An agent's run and the host's talk with a local worker are generators. Where one must wait (a
model's answer, a block's end, a socket that has nothing to read yet) it yields an `Effect` and is
sent the result (or thrown the exception). `blocking` and `events` do each effect by blocking, for
`run`; `awaited` and `aevents` by awaiting, for `arun`, so the event loop runs other tasks while one
waits. Anything else a generator yields is an event for whoever consumes the run. One lifecycle,
two ways to wait: the rules of a run or a block live in the generator, never in two copies.

Work that has no way to wait but blocking (a sync tool, a sync model, a third party's executor)
runs in `offload`'s bounded pool of threads when awaited: the loop never blocks on it, and a
thousand waiting agents never make a thousand threads.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # asyncio and the pools load when something awaits: the local worker imports this module too
    import asyncio
    import concurrent.futures
    import socket
    import subprocess

__all__ = [
    "OFFLOAD_THREADS",
    "Completed",
    "Effect",
    "Exited",
    "Finished",
    "Offloaded",
    "Readable",
    "Steps",
    "StreamingEffect",
    "Writable",
    "aevents",
    "awaited",
    "blocking",
    "events",
    "is_cancellation",
    "offload",
    "run_coroutine",
    "watched",
]

T = TypeVar("T")
#: A generator that yields effects (and maybe events) and returns a `T`.
Steps = Generator[Any, Any, T]

#: Threads that run blocking work for awaiting callers, shared by the whole process.
OFFLOAD_THREADS = min(32, (os.cpu_count() or 1) + 4)
_offload_pool: concurrent.futures.ThreadPoolExecutor | None = None
_offload_pool_made = threading.Lock()


class Effect:
    """Something a generator waits on: `call` blocks until it is done, `acall` awaits it."""

    def call(self) -> Any:
        raise NotImplementedError

    async def acall(self) -> Any:
        raise NotImplementedError


class StreamingEffect(Effect):
    """An effect with events while it lasts (a block's output as it prints): `stream` yields them
    and returns the result; `astream` yields them, then the result wrapped in `Finished`."""

    def stream(self) -> Generator[Any, None, Any]:
        raise NotImplementedError

    def astream(self) -> AsyncIterator[Any]:
        raise NotImplementedError

    def call(self) -> Any:
        return blocking(self.stream())

    async def acall(self) -> Any:
        async for item in self.astream():
            if isinstance(item, Finished):
                return item.value
        raise RuntimeError(f"{type(self).__name__}.astream ended without its result")


class Finished:
    """The result of a `StreamingEffect`, as the last item of its `astream`."""

    def __init__(self, value: Any) -> None:
        self.value = value


# -- drivers ---------------------------------------------------------------------------

#: No item: what `events` is given when `steps` has yielded nothing yet.
_NOTHING: Any = object()


def _advance(steps: Steps[Any], value: Any, error: BaseException | None) -> tuple[bool, Any]:
    """Send `steps` the last effect's value (or throw its error): (False, its next item), or
    (True, what it returned)."""
    try:
        return False, (steps.throw(error) if error is not None else steps.send(value))
    except StopIteration as stop:
        return True, stop.value


def events(steps: Steps[T], pending: Any = _NOTHING) -> Generator[Any, Any, T]:
    """Drive `steps` by blocking: do its effects, yield its events, return what it returns. A consumer
    that stops early (``close()``) closes `steps` too, so its ``finally`` blocks run. `pending` is an
    item `steps` has yielded already, handled first."""
    value: Any = None
    error: BaseException | None = None
    while True:
        if pending is _NOTHING:
            done, item = _advance(steps, value, error)
            if done:
                return item  # type: ignore[no-any-return]
        else:
            item, pending = pending, _NOTHING
        value = error = None
        try:
            if isinstance(item, StreamingEffect):
                value = yield from item.stream()
            elif isinstance(item, Effect):
                value = item.call()
            else:
                yield item
        except GeneratorExit:  # the consumer stopped reading
            steps.close()
            raise
        except BaseException as failure:  # the effect's, or thrown in by the consumer: it goes to `steps`
            error = failure


def blocking(steps: Steps[T]) -> T:
    """Drive `steps`, which yields effects only, by blocking; return what it returns. Plain effects are
    done here, as `events` does them, without its generator between (each of a local worker's messages
    is driven so); a streaming effect or an event goes to `events`, which does the rest."""
    value: Any = None
    error: BaseException | None = None
    while True:
        done, item = _advance(steps, value, error)
        if done:
            return item  # type: ignore[no-any-return]
        if not isinstance(item, Effect) or isinstance(item, StreamingEffect):
            break
        value = error = None
        try:
            value = item.call()
        except BaseException as failure:  # the effect's: it goes to `steps`
            error = failure
    driver = events(steps, item)
    try:
        item = next(driver)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    driver.close()
    raise TypeError(f"an effect-only generator yielded the event {item!r}")


async def aevents(steps: Steps[Any]) -> AsyncIterator[Any]:
    """Drive `steps` by awaiting: do its effects on the running loop, yield its events. Cancelling the
    task throws `CancelledError` into `steps` at its effect, so its own handlers stop what it began."""
    value: Any = None
    error: BaseException | None = None
    try:
        while True:
            done, item = _advance(steps, value, error)
            if done:
                return
            value = error = None
            try:
                if isinstance(item, StreamingEffect):
                    async with contextlib.aclosing(item.astream()) as pieces:  # type: ignore[type-var]
                        async for piece in pieces:
                            if isinstance(piece, Finished):
                                value = piece.value
                            else:
                                yield piece
                elif isinstance(item, Effect):
                    value = await item.acall()
                else:
                    yield item
            except GeneratorExit:
                raise  # the consumer stopped reading: `steps` is closed below
            except BaseException as failure:
                error = failure
    finally:
        steps.close()  # a consumer that stopped early: `steps` runs its finally blocks


async def awaited(steps: Steps[T]) -> T:
    """Drive `steps`, which yields effects only, by awaiting; return what it returns."""
    returned: list[T] = []

    def keeping() -> Steps[None]:
        returned.append((yield from steps))

    async for item in aevents(keeping()):
        raise TypeError(f"an effect-only generator yielded the event {item!r}")
    return returned[0]


def watched(steps: Steps[T], watch: Callable[[Any], None]) -> Steps[T]:
    """``yield from steps``, with `watch` called on each of its events once the consumer has it;
    its effects pass through to the driver untouched. What `watch` raises ends `steps` there."""
    value: Any = None
    error: BaseException | None = None
    while True:
        done, item = _advance(steps, value, error)
        if done:
            return item  # type: ignore[no-any-return]
        value = error = None
        try:
            value = yield item
        except GeneratorExit:
            steps.close()
            raise
        except BaseException as failure:
            error = failure
            continue
        if not isinstance(item, Effect):
            try:
                watch(item)
            except BaseException:
                steps.close()
                raise


# -- effects every generator may wait on ------------------------------------------------


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


#: Lets anything else that would run on this core run (a system without it: nothing to yield to).
_yield_core: Callable[[], None] = getattr(os, "sched_yield", lambda: None)


def _ready_within(poller: select.poll, seconds: float, deadline: float | None) -> bool:
    """Whether `poller` finds its socket ready within `seconds` (and by `deadline`) of looking
    without sleeping, the core yielded between looks."""
    end = time.monotonic() + seconds
    if deadline is not None:
        end = min(end, deadline)
    while not poller.poll(0):
        if time.monotonic() >= end:
            return False
        _yield_core()
    return True


class _Ready(Effect):
    """Wait until a socket is ready, or `deadline` (a `time.monotonic()` instant) passes; the result
    says which. Blocking waits with ``poll`` (``select`` refuses a descriptor past 1023, and a program
    with many files open gets such sockets); awaiting, with the loop's own watch on the socket.

    `spin`: seconds to look without sleeping first, blocking only. A thread that sleeps on a socket
    and is woken pays for it (its core idles, and on a virtual machine hands itself back to the
    hypervisor): tens of microseconds, most of the wait for an answer that comes within a few hundred.
    The core is yielded between looks, so anything else that would run on it still does."""

    _reading: bool

    def __init__(self, sock: socket.socket | int, deadline: float | None, spin: float = 0.0) -> None:
        self.fd = sock if isinstance(sock, int) else sock.fileno()
        self.deadline = deadline
        self.spin = spin

    def call(self) -> bool:
        poller = select.poll()
        poller.register(self.fd, select.POLLIN if self._reading else select.POLLOUT)
        if self.spin and _ready_within(poller, self.spin, self.deadline):
            return True
        left = _left(self.deadline)
        return bool(poller.poll(None if left is None else left * 1000))

    async def acall(self) -> bool:
        import asyncio

        loop = asyncio.get_running_loop()
        ready: asyncio.Future[bool] = loop.create_future()

        def mark(outcome: bool) -> None:
            if not ready.done():
                ready.set_result(outcome)

        watch, unwatch = (
            (loop.add_reader, loop.remove_reader) if self._reading else (loop.add_writer, loop.remove_writer)
        )
        watch(self.fd, mark, True)
        left = _left(self.deadline)
        # not asyncio.wait_for, which before Python 3.12 swallows a cancel that comes as the socket is ready
        timer = None if left is None else loop.call_later(left, mark, False)
        try:
            return await ready
        finally:
            unwatch(self.fd)
            if timer is not None:
                timer.cancel()


class Readable(_Ready):
    """Wait until the socket has something to read (or was closed), or the deadline passes."""

    _reading = True


class Writable(_Ready):
    """Wait until the socket takes more bytes, or the deadline passes."""

    _reading = False


class Exited(Effect):
    """Wait until a child process ends, up to `timeout` seconds; the result is its exit status, or None
    if it still runs. Awaiting watches the process's pidfd where the system has one, else polls."""

    def __init__(self, process: subprocess.Popen[Any], timeout: float) -> None:
        self.process = process
        self.timeout = timeout

    def call(self) -> int | None:
        import subprocess

        try:
            return self.process.wait(self.timeout)
        except subprocess.TimeoutExpired:
            return None

    async def acall(self) -> int | None:
        import asyncio

        deadline = time.monotonic() + self.timeout
        if self.process.poll() is not None:
            return self.process.returncode
        try:
            pidfd = os.pidfd_open(self.process.pid)
        except (AttributeError, OSError):  # no pidfd here: look every few milliseconds
            while self.process.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.005)
            return self.process.poll()
        try:
            await Readable(pidfd, deadline).acall()
        finally:
            os.close(pidfd)
        return self.process.poll()


class Completed(Effect):
    """Wait until work running in another thread (a `concurrent.futures.Future`) is done; its result."""

    def __init__(self, future: concurrent.futures.Future[Any]) -> None:
        self.future = future

    def call(self) -> Any:
        return self.future.result()

    async def acall(self) -> Any:
        import asyncio

        return await asyncio.wrap_future(self.future)


class Offloaded(Effect):
    """A blocking call: made in place when blocking, and in `offload`'s pool of threads when awaited.
    `awaited_as`, if given, is what the pool calls instead: the same work, done so that it lets the
    loop's thread run (CPU-bound C code otherwise holds the interpreter's lock from it)."""

    def __init__(self, function: Callable[..., T], *args: Any, awaited_as: Callable[..., T] | None = None) -> None:
        self.function = function
        self.args = args
        self.awaited_as = awaited_as or function

    def call(self) -> Any:
        return self.function(*self.args)

    async def acall(self) -> Any:
        return await offload(self.awaited_as, *self.args)


def offload(function: Callable[..., T], *args: Any) -> asyncio.Future[T]:
    """Run a blocking `function(*args)` in the shared pool, in the caller's context (its span, its
    settings), and await it. The pool is bounded (`OFFLOAD_THREADS`): callers past it wait their turn."""
    import asyncio
    import concurrent.futures
    import contextvars
    import functools

    global _offload_pool
    with _offload_pool_made:  # loops on several threads may offload at once
        if _offload_pool is None:
            _offload_pool = concurrent.futures.ThreadPoolExecutor(
                OFFLOAD_THREADS, thread_name_prefix="codeward-offload"
            )
    context = contextvars.copy_context()
    call = functools.partial(_in_context, context, function, *args)
    return asyncio.get_running_loop().run_in_executor(_offload_pool, call)


_offload_thread = threading.local()


def _in_context(context: Any, function: Callable[..., T], *args: Any) -> T:
    """`function(*args)` in `context`, with jupyter_core's loop for blocking calls set to this thread's
    own. jupyter_core keeps that loop in a context variable, which the copied context would carry
    from the caller's thread: two threads would then run one loop at once ("This event loop is
    already running"). Each thread of the bounded pool keeps one loop for its life."""
    jupyter_utils = sys.modules.get("jupyter_core.utils")
    borrowed = getattr(jupyter_utils, "_loop", None)
    if borrowed is not None:
        import asyncio

        loop = getattr(_offload_thread, "loop", None)
        if loop is None or loop.is_closed():
            loop = _offload_thread.loop = asyncio.new_event_loop()
        context.run(borrowed.set, loop)
    return context.run(function, *args)  # type: ignore[no-any-return]


def run_coroutine(coroutine: Awaitable[T]) -> T:
    """Run `coroutine` to its end from blocking code (an ``async def`` tool called by `run`): on a
    fresh loop, or, on a thread that already runs one, on a fresh loop in a thread of its own."""
    import asyncio
    import concurrent.futures
    import contextvars

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_awaiting(coroutine))
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="codeward-coroutine") as thread:
        context = contextvars.copy_context()
        return thread.submit(context.run, asyncio.run, _awaiting(coroutine)).result()


async def _awaiting(awaitable: Awaitable[T]) -> T:
    return await awaitable


def is_cancellation(error: BaseException) -> bool:
    """Whether `error` is the event loop cancelling the awaiting task (asyncio imported or not)."""
    asyncio = sys.modules.get("asyncio")
    return asyncio is not None and isinstance(error, asyncio.CancelledError)
