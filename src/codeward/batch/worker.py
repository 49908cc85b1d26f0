"""A batch worker process: runs jobs one at a time, each in a sandbox of its own.

The parent (`codeward.batch.pool`) starts workers with ``python -m
codeward.batch.worker FD [--audit FILE] [--runs DIR]``. Jobs arrive as lines on stdin (value-codec JSON);
events go back as JSON lines on the inherited file descriptor FD, so nothing
the job prints can be mistaken for a message.

Cancelling: the parent writes ``{"cancel": ID}`` on stdin; the worker signals
itself (SIGUSR1) so that `JobCancelled` is raised in the job even while it waits
in a system call, and unwinds through the agent, which closes its sandbox. A worker whose parent is gone (stdin closed)
cancels its job and exits, so a killed batch leaves no worker behind.

The ``--mcp`` servers a job's tools come from are the worker's own (`MCPServers`): each
started at the first job that needs it and stopped when the worker exits; a worker that is
killed takes them with it (the parent-death signal `MCPTools` sets).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import queue
import signal
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TextIO

from codeward import tracing
from codeward.batch.jobs import file_reference

__all__ = ["JobCancelled", "MCPServers", "cancellation", "main", "run_job", "unrecordable", "uses_egress"]


class JobCancelled(KeyboardInterrupt):
    """The parent cancelled the job (Ctrl-C, a timeout, or the parent is gone).

    A KeyboardInterrupt, because that is what every layer already lets through:
    the agent's loop does not record it as a step error, `except Exception` in
    the model's code does not catch it, and a sandbox stops the code it runs.
    """


class _Cancellation:
    """Which jobs the parent cancelled, and whether the running job may be interrupted now.

    Cancels arrive on stdin naming a job id (read by another thread), so a late
    cancel meant for a finished job can never hit the next one; the signal only
    wakes the main thread, which checks the id.
    """

    def __init__(self) -> None:
        self.current: str | None = None
        self.cancelled: set[str] = set()
        self.everything = False  # the parent is gone
        self.enabled = False

    def requested(self) -> bool:
        return self.everything or self.current in self.cancelled

    def request(self, job_id: str | None) -> None:
        if job_id is None:
            self.everything = True
        else:
            self.cancelled.add(job_id)
        if self.current is not None and self.requested():
            os.kill(os.getpid(), signal.SIGUSR1)

    def on_signal(self, signum: int, frame: Any) -> None:
        if self.enabled and self.requested():
            raise JobCancelled()

    def check(self, *step: Any) -> None:
        """A step callback: stop between steps even if a sandbox swallowed the signal's exception."""
        if self.enabled and self.requested():
            raise JobCancelled()

    @contextmanager
    def interruptible(self) -> Iterator[None]:
        """Let a cancel interrupt the job's own work, never the closing of its sandbox."""
        if self.requested():
            raise JobCancelled()
        self.enabled = True
        try:
            yield
        finally:
            self.enabled = False


#: This process's job cancelling: what a pool worker's stdin or a Ray task's watcher asks for.
cancellation = _Cancellation()


def _variables(job: dict[str, Any]) -> dict[str, Any]:
    from codeward.value_files import load_value_file

    given = job["additional_args"]
    reference = file_reference(given)
    if reference is not None:
        loaded = load_value_file(Path(reference))
        if not isinstance(loaded, dict):
            raise ValueError(f"{reference} must hold a JSON object of variables, not {type(loaded).__name__}")
        return loaded
    variables = {}
    for name, value in given.items():
        reference = file_reference(value)
        if reference is not None:
            variables[name] = load_value_file(Path(reference))
        else:
            variables[name] = value[1:] if isinstance(value, str) and value.startswith("@@") else value
    return variables


def _sandbox(agent: Any) -> dict[str, Any]:
    executor = agent.executor
    return {"executor": executor.name, "id": getattr(executor, "sandbox_id", None), "worker_pid": os.getpid()}


class JobPools(Protocol):
    """Where a job's docker sandbox comes from: a worker's `WarmPools`, or a Ray node's (`ray_nodes.NodePools`)."""

    def executor_kwargs(self, executor: str, kwargs: dict[str, Any]) -> dict[str, Any]: ...


def pool_settings(kwargs: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A docker job's sandbox settings (what its pool's sandboxes must be like), as a key and a dict, and the rest."""
    from codeward.executors.docker.pool import SandboxPool

    settings = {key: kwargs[key] for key in SandboxPool.SANDBOX_SETTINGS if key in kwargs}
    rest = {name: value for name, value in kwargs.items() if name not in settings}
    return json.dumps(settings, sort_keys=True, default=str), settings, rest


def uses_egress(kwargs: dict[str, Any]) -> bool:
    """Whether a docker job's sandbox has an egress list (its proxy is a process of the one that starts it)."""
    return kwargs.get("egress") is not None


#: Different sandbox settings kept warm at once: past this, the least recently used pool is closed,
#: so a job file of many settings cannot fill a machine with idle sandboxes.
MAX_WARM_SETTINGS = 4


class WarmPools:
    """Sandboxes started ahead of the next job, for executors that can (docker).

    One `SandboxPool` of `size` sandboxes per set of sandbox settings, for the last
    `MAX_WARM_SETTINGS` sets used: while a job runs, the next job's container starts.
    A worker keeps one sandbox per pool; a Ray node's actor as many as its docker slots.
    A used container is removed, never reused.
    """

    def __init__(self, enabled: bool, size: int = 1) -> None:
        self.enabled = enabled
        self.size = size
        self._pools: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()  # a node's actor serves several tasks at once

    def pool(self, settings: dict[str, Any]) -> Any:
        """The pool for these settings, started on first use; the least recently used past the limit is closed."""
        from codeward.executors import SandboxPool

        key = json.dumps(settings, sort_keys=True, default=str)
        with self._lock:
            pool = self._pools.pop(key, None) or SandboxPool(size=self.size, **settings)
            self._pools[key] = pool
            evicted = self._pools.popitem(last=False)[1] if len(self._pools) > MAX_WARM_SETTINGS else None
        if evicted is not None:
            evicted.close()
        return pool

    def executor_kwargs(self, executor: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        if not self.enabled or executor != "docker" or "pool" in kwargs:
            return kwargs
        _, settings, rest = pool_settings(kwargs)
        return {**rest, "pool": self.pool(settings)}

    def close(self) -> None:
        with self._lock:
            pools = list(self._pools.values())
            self._pools.clear()
        for pool in pools:
            pool.close()


class MCPServers:
    """A worker's ``--mcp`` servers, each started once and kept for the worker's whole life.

    Kept rather than started per job: a server's start costs as much as a short job, and the
    worker is the process the server must die with, whatever ends it.
    """

    def __init__(self) -> None:
        self._started: dict[str, Any] = {}

    def tools(self, commands: list[str]) -> list[Any]:
        """The tools of these servers, starting any not started yet."""
        tools: list[Any] = []
        for command in commands:
            if command not in self._started:
                from codeward.mcp import MCPTools

                self._started[command] = MCPTools(command)
            tools += self._started[command].tools
        return tools

    def close(self) -> None:
        for server in self._started.values():
            server.close()
        self._started.clear()


def _selected_tools(tools: list[Any], names: list[str]) -> list[Any]:
    """The command line's tools the job selected by name (all of them when it names none)."""
    return [tool for tool in tools if not names or tool.name in names]


def run_job(
    job: dict[str, Any],
    audit: Any | None,
    announce: Callable[[dict[str, Any] | None], None] | None = None,
    runs: Path | None = None,
    pools: JobPools | None = None,
    servers: MCPServers | None = None,
    runs_kept_in: Path | None = None,
) -> dict[str, Any]:
    """Run one job to its result record: failures and cancellation are statuses, not exceptions.

    With `runs`, the job's run is saved there too, ready for `codeward replay` (its paths relative to
    `runs_kept_in`, where the run file is moved to when that is not `runs`). The job's
    ``--mcp`` servers come from `servers`, which outlive the job; without it, the job starts
    its own and stops them when it ends.
    """
    if servers is None:
        own = MCPServers()
        try:
            return run_job(job, audit, announce, runs, pools, own, runs_kept_in)
        finally:
            own.close()
    from codeward.batch.audit import AuditingExecutor, BlockTimes, iso_time
    from codeward.json_values import carry
    from codeward.platform.code_agent import CodeAgent
    from codeward.platform.model_ids import resolve_model
    from codeward.platform.run_files import run_file, save_run
    from codeward.platform.tool_specs import load_tool_specs

    started = time.time()
    result: dict[str, Any] = {"id": job["id"], "status": "error", "output": None}
    agent = None
    variables: dict[str, Any] = {}
    times = BlockTimes(audit.append if audit is not None else None)
    start_seconds = None
    try:
        with cancellation.interruptible():
            tools = load_tool_specs(job["tools"]) + servers.tools(job.get("mcp") or [])
            starting = time.perf_counter()
            agent = CodeAgent(
                tools=_selected_tools(tools, job.get("tool_names") or []),
                model=resolve_model(job["model"]),
                executor=job["executor"],
                executor_kwargs=pools.executor_kwargs(job["executor"], job["executor_kwargs"] or {}) or None
                if pools is not None
                else job["executor_kwargs"] or None,
                additional_authorized_imports=job["authorized_imports"] or None,
                max_steps=job["max_steps"],
                verbosity_level=-1,
                step_callbacks=[cancellation.check],
                collect_outputs=bool(job.get("collect_outputs")),
            )
            start_seconds = round(time.perf_counter() - starting, 4)  # the agent's sandbox, started or taken warm
        try:
            agent.executor = AuditingExecutor(
                agent.executor,
                job["id"],
                lambda: agent.step_number,
                times.record,
                announce if audit is not None else None,
                job.get("attempt", 1),
            )
            with cancellation.interruptible():
                variables = _variables(job)
                run = agent.run(job["task"], additional_args=variables or None, return_full_result=True)
        finally:
            agent.close()
            if runs is not None:
                save_run(
                    agent.memory,
                    run_file(runs, job["id"]),
                    tool_specs=job["tools"],
                    variables=variables,
                    executor=job["executor"],
                    authorized_imports=job["authorized_imports"],
                    kept_in=runs_kept_in,
                )
        result["status"] = run.state
        result["output"], description = carry(run.output)
        if description:
            result["output_description"] = description
    except JobCancelled:
        result["status"] = "cancelled"
    except Exception as error:
        result["error"] = f"{type(error).__name__}: {error}"
    if agent is not None:
        result["steps"] = len(agent.memory.action_steps())
        result["token_usage"] = agent.memory.token_usage().to_dict()
        usage = agent.memory.block_usage()  # what the job's code blocks cost in their sandbox, in all
        result["usage"] = usage.to_dict() if usage is not None else None
        result["sandbox"] = _sandbox(agent)
        result["step_errors"] = sum(step.error is not None for step in agent.memory.action_steps())
        result["time"] = {**times.split(agent.memory), "start_seconds": start_seconds}
        if job.get("collect_outputs"):  # their names and sizes: the bytes are in the run file (--runs)
            result["artifacts"] = [
                {"name": a.name, "size": a.size, "media_type": a.media_type, "step": step.step_number}
                for step in agent.memory.action_steps()
                for a in step.artifacts
            ]
    result["model"] = job["model"]
    result["attempt"] = job.get("attempt", 1)
    result["started_at"] = iso_time(started)
    result["duration_seconds"] = round(time.time() - started, 4)
    return result


def _read_stdin(jobs: queue.Queue[dict[str, Any] | None]) -> None:
    """Jobs and cancels from the parent; end of input (closed, or the parent died) cancels all and stops."""
    from codeward.executors.codec import loads

    for line in sys.stdin:
        if not line.strip():
            continue
        message = loads(line)
        if "cancel" in message:
            cancellation.request(str(message["cancel"]))
        else:
            jobs.put(message)
    jobs.put(None)
    cancellation.request(None)


def unrecordable(result: dict[str, Any], error: Exception) -> dict[str, Any]:
    """What is recorded for a job whose result cannot be written: that job's error, so the batch goes on."""
    return {
        "id": str(result.get("id")),
        "status": "error",
        "output": None,
        "error": f"the job's result could not be recorded: {type(error).__name__}: {error}",
        "model": str(result.get("model")),
        "attempt": result.get("attempt") if isinstance(result.get("attempt"), int) else 1,
    }


_SENDING = threading.Lock()  # the job's thread and the exporter's both send (a log line from either)


def _send(channel: TextIO, event: dict[str, Any]) -> None:
    with _SENDING:
        channel.write(json.dumps(event, default=str) + "\n")
        channel.flush()


class _Relay(logging.Handler):
    """codeward's warnings in this worker (a model call's retries, traces not sent), sent to the
    parent to show, since this process's stderr is kept only to explain its death."""

    def __init__(self, channel: TextIO) -> None:
        super().__init__(logging.WARNING)
        self.channel = channel

    def emit(self, record: logging.LogRecord) -> None:
        try:
            _send(self.channel, {"event": "log", "id": cancellation.current, "message": record.getMessage()})
        except (OSError, ValueError):  # the parent is gone, or the channel closed at exit: nobody to tell
            pass


def _send_result(channel: TextIO, job_id: str, result: dict[str, Any]) -> None:
    """The job's result; one that JSON cannot hold (a key of no JSON type, nesting too deep) as its error."""
    try:
        _send(channel, {"event": "done", "id": job_id, "result": result})
    except (TypeError, ValueError, RecursionError) as error:
        _send(channel, {"event": "done", "id": job_id, "result": unrecordable(result, error)})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codeward.batch.worker")
    parser.add_argument("channel", type=int, help="the file descriptor to send events on")
    parser.add_argument("--audit", type=Path, help="the audit file to append a line per code block to")
    parser.add_argument("--runs", type=Path, help="a folder to save each job's run in")
    parser.add_argument("--no-warm-pool", action="store_true", help="start each job's sandbox when the job starts")
    args = parser.parse_args(argv)
    if os.environ.get("CODEWARD_OTEL") == "1":  # each job a trace of its own, sent where OTEL_EXPORTER_OTLP_* say
        from codeward.telemetry import instrument

        instrument()
    signal.signal(signal.SIGUSR1, cancellation.on_signal)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to decide on
    channel = os.fdopen(args.channel, "w", encoding="utf-8")
    logging.getLogger("codeward").addHandler(_Relay(channel))
    audit = None
    if args.audit is not None:
        from codeward.batch.jsonl import JsonlAppender

        audit = JsonlAppender(args.audit, shared=True)
    jobs: queue.Queue[dict[str, Any] | None] = queue.Queue()
    threading.Thread(target=_read_stdin, args=(jobs,), daemon=True).start()
    pools = WarmPools(enabled=not args.no_warm_pool)
    servers = MCPServers()
    try:
        while (job := jobs.get()) is not None:
            cancellation.current = job["id"]
            _send(channel, {"event": "started", "id": job["id"]})
            announce = lambda block: _send(channel, {"event": "block", "record": block})  # noqa: E731
            with tracing.span("codeward.job", {tracing.JOB_ID: str(job["id"])}) as span:
                result = run_job(job, audit, announce, args.runs, pools, servers)
                span.set({"codeward.job.status": str(result["status"])})
            tracing.flush()  # a worker may be killed after any job: its finished jobs' spans are sent by then
            cancellation.current = None
            _send_result(channel, job["id"], result)
    finally:
        pools.close()
        servers.close()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # the parent is gone: nobody to report to
        os._exit(1)
