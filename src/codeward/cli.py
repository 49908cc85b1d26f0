"""The `codeward` command.

Each subcommand is a ``_add_<name>`` function that declares its arguments and a
handler; the work itself lives in the modules the handlers import (lazily, so
that ``codeward batch`` does not pay for litellm, nor ``codeward demo`` for docker).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from codeward import __version__
from codeward.executors.base import ExecutorError
from codeward.terminal_text import visible, visible_text
from codeward.usage import UsageError

if TYPE_CHECKING:
    from codeward import AgentGenerationError, CodeAgent

__all__ = ["main"]


# -- demo ----------------------------------------------------------------------------


def _demo(args: argparse.Namespace, console: Console) -> int:
    from codeward import ReplayModel
    from codeward.demo import DEMO_TASK, DEMO_VARIABLES, forecast, recording_path

    console.print(
        Panel(
            "The model in this demo is a recording: a ReplayModel plays a saved run, and no language model "
            f"is called. The code it wrote runs for real in the '{args.executor}' sandbox.\n"
            "To use a real model: CodeAgent(tools=..., model=LiteLLMModel('openai/gpt-4o-mini')).",
            title="codeward demo",
            border_style="yellow",
        )
    )
    model = ReplayModel(recording_path())
    with _agent(tools=[forecast], model=model, executor=args.executor) as agent:
        result = agent.run(DEMO_TASK, additional_args=dict(DEMO_VARIABLES), return_full_result=True)
    usage = result.token_usage
    console.print(
        f"\n[bold]Answer:[/bold] {escape(visible(str(result.output)))}\n"
        f"[dim]{result.state} · {len(agent.memory.action_steps())} steps · "
        f"{result.timing.duration:.2f} s · {usage.total_tokens} tokens (estimated by the recording)[/dim]"
    )
    return 0 if result.state == "success" else 1


def _add_demo(commands: Any) -> None:
    demo = commands.add_parser("demo", help="run a built-in multi-step task with a recorded model")
    demo.add_argument("--executor", default="local", help="the sandbox to run the code in (default: local)")
    demo.set_defaults(handler=_demo)


# -- run -------------------------------------------------------------------------------


def _agent(**settings: Any) -> CodeAgent:
    """The agent the options describe; options it refuses, or a sandbox that cannot start (no engine,
    no key), are for the user to fix, not faults of codeward's."""
    from codeward import CodeAgent

    try:
        return CodeAgent(**settings)
    except (ValueError, ExecutorError) as error:
        raise UsageError(
            f"the agent could not be set up with the {settings.get('executor')!r} sandbox: {error}"
        ) from error


def _model_id(given: str | None) -> str:
    from codeward.platform.model_ids import check_model_id, default_model_id, no_model_message

    model_id = given or default_model_id()
    if model_id is None:
        raise UsageError(no_model_message())
    return check_model_id(model_id)


def _variables(options: list[str]) -> dict[str, Any]:
    from codeward.value_files import load_value_file, parse_var_option

    parsed = [parse_var_option(option) for option in options]
    return {name: load_value_file(path) for name, path in parsed}


def _run(args: argparse.Namespace, console: Console) -> int:
    from codeward import AgentGenerationError, AgentLogger, LogLevel
    from codeward.json_values import plain
    from codeward.platform.model_ids import resolve_model
    from codeward.platform.run_files import save_run
    from codeward.platform.tool_specs import load_tool_specs

    model_id = _model_id(args.model)
    tools = load_tool_specs(args.tools)
    variables = _variables(args.var)
    logger = AgentLogger(LogLevel.OFF if args.json else LogLevel.INFO, console)
    with (
        contextlib.ExitStack() as servers,
        _agent(
            tools=tools + _mcp_tools(args.mcp, servers, args.mcp_env),
            model=resolve_model(model_id),
            executor=args.executor,
            executor_kwargs=_host_tools_on_e2b(args),
            additional_authorized_imports=args.imports or None,
            max_steps=args.max_steps,
            logger=logger,
        ) as agent,
    ):
        try:
            result = agent.run(args.task, additional_args=variables or None, return_full_result=True)
        except AgentGenerationError as error:
            return _model_failed(error, console)
    if args.save:
        warning = save_run(
            agent.memory,
            args.save,
            tool_specs=args.tools,
            variables=variables,
            executor=args.executor,
            authorized_imports=args.imports,
            variable_files=args.var,
        )
        if warning:
            console.print(f"[yellow]warning:[/yellow] {escape(visible(warning))}", highlight=False)
    if args.json:
        payload = result.to_dict() | {"output": plain(result.output)}
        sys.stdout.write(json.dumps(payload, default=str) + "\n")
    else:
        usage = result.token_usage
        console.print(
            f"[dim]{result.state} · {len(agent.memory.action_steps())} steps · "
            f"{result.timing.duration:.2f} s · {usage.total_tokens} tokens[/dim]"
        )
    return 0 if result.state == "success" else 1


def _mcp_tools(commands: list[str], servers: contextlib.ExitStack, env_names: list[str]) -> list[Any]:
    """The tools of each `--mcp` server, started here (on the host) and stopped when `servers` closes;
    a server started as a command gets the `--mcp-env` variables, and of the host's environment only those."""
    if env_names and not commands:
        raise UsageError("--mcp-env passes variables to --mcp servers: name a server with --mcp")
    if not commands:
        return []
    from codeward.mcp import MCPToolError, MCPTools
    from codeward.mcp.tools import served_over_http  # after the line above, which names the extra if missing

    env = _mcp_env(env_names)
    tools: list[Any] = []
    for command in commands:
        try:
            tools += servers.enter_context(MCPTools(command, env=None if served_over_http(command) else env))
        except (MCPToolError, ValueError) as error:
            raise UsageError(f"--mcp {command!r}: {error}") from error
    return tools


def _host_tools_on_e2b(args: argparse.Namespace) -> dict[str, Any] | None:
    """`--mcp` servers run on the host, so on e2b (whose default ships tools into the sandbox) their
    tools are called there: the one setting under which they can work at all."""
    return {"tools_mode": "host"} if args.mcp and args.executor == "e2b" else None


def _mcp_env(names: list[str]) -> dict[str, str]:
    """The host's variables `--mcp-env` names, each of which must be set."""
    missing = [name for name in names if name not in os.environ]
    if missing:
        raise UsageError(
            f"--mcp-env {', '.join(missing)}: not set in this environment; set it before running, or drop the option"
        )
    return {name: os.environ[name] for name in names}


def _add_mcp_env(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mcp-env",
        action="append",
        default=[],
        metavar="NAME",
        help="a variable of this environment to pass to the --mcp servers started as commands, which get "
        "no other (repeatable)",
    )


def _model_failed(error: AgentGenerationError, console: Console) -> int:
    """A model that cannot be called as set up (no key, unknown model) is a setup step, exit 2;
    one that failed on the way (rate limits, outages past their retries) is a failed run, exit 1."""
    from codeward.platform.models import ModelSetupError

    if isinstance(error.__cause__, ModelSetupError):
        raise UsageError(f"the model cannot be called: {error.__cause__}") from error
    console.print(visible_text(error.message, style="bold red"), highlight=False)
    return 1


def _add_model_options(parser: argparse.ArgumentParser, executor_help: str) -> None:
    parser.add_argument(
        "--model",
        metavar="ID",
        help="a litellm model id, replay:RUN.json or script:RESPONSES.yaml (default: $CODEWARD_MODEL)",
    )
    parser.add_argument("--executor", default="local", metavar="NAME", help=executor_help)
    parser.add_argument(
        "--tools",
        action="append",
        default=[],
        metavar="SPEC",
        help="tools to give the agent: module:attr, module, or file.py[:attr] (repeatable)",
    )


def _add_import_option(parser: argparse.ArgumentParser) -> None:
    """`--import`, as `run` and `mcp serve` take it: the sandbox's imports are the command line's to widen."""
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="a module the code may import, beyond the defaults (repeatable; pkg.* for a package)",
    )


def _add_run(commands: Any) -> None:
    run = commands.add_parser("run", help="run one task with a code agent, showing its steps")
    run.add_argument("task", help="what the agent should do")
    _add_model_options(run, "the sandbox to run the code in (default: local)")
    _add_import_option(run)
    run.add_argument(
        "--var",
        action="append",
        default=[],
        metavar="NAME=@FILE",
        help="a variable for the code, read from .json, .csv, .parquet or .npy (repeatable)",
    )
    run.add_argument(
        "--max-steps", type=int, default=20, metavar="N", help="steps before the model must answer (default 20)"
    )
    run.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="COMMAND",
        help="an MCP server to start on the host, as a shell line or an http(s) URL; its tools join --tools (repeatable)",
    )
    _add_mcp_env(run)
    run.add_argument("--json", action="store_true", help="print the run's result as JSON instead of the steps")
    run.add_argument("--save", metavar="RUN.json", help="save the run, for codeward replay or --model replay:RUN.json")
    run.set_defaults(handler=_run)


# -- batch -------------------------------------------------------------------------------


def _batch(args: argparse.Namespace, console: Console) -> int:
    from codeward.batch.display import BatchProgress, summary_table
    from codeward.batch.jobs import JobDefaults, load_jobs
    from codeward.batch.runner import BatchOptions, run_batch
    from codeward.platform.model_ids import default_model_id

    if args.concurrency is not None and args.concurrency < 1:
        raise UsageError(f"--concurrency must be at least 1, got {args.concurrency}")
    if args.env and args.ray is None:
        raise UsageError("--env sends variables to the tasks of a Ray cluster: use it with --ray")
    if (args.job_cpus is not None or args.job_memory is not None) and args.ray is None:
        raise UsageError("--job-cpus and --job-memory are what each job asks of a Ray cluster: use them with --ray")
    defaults = JobDefaults(
        model=args.model or default_model_id(),
        executor=args.executor,
        runtime=args.runtime,
        tools=args.tools,
        mcp=args.mcp,
        max_steps=args.max_steps,
        allow_imports=args.allow_job_imports,
        allow_executors=args.allow_job_executors,
    )
    jobs = load_jobs(args.jobs, defaults)
    if args.cancel_grace <= 0:
        raise UsageError(f"--cancel-grace must be a positive number of seconds, got {args.cancel_grace}")
    runs = Path(args.runs) if args.runs else None
    options = BatchOptions(
        _batch_file(args.out, runs, "results.jsonl"),
        None if args.no_audit else _batch_file(args.audit, runs, "audit.jsonl"),
        args.concurrency or (0 if args.ray is not None else 2),  # 0: as many as the Ray cluster has CPUs
        args.cancel_grace,
        runs,
        not args.no_warm_pool,
    )
    with BatchProgress(console) as progress:
        outcome = run_batch(jobs, options, progress, backend=_batch_backend(args))
    if outcome.dropped_bytes:
        console.print(f"[yellow]cut a torn last line ({outcome.dropped_bytes} bytes) left by an earlier crash[/yellow]")
    for renderable in summary_table(outcome):
        console.print(renderable)
    where = f"results: {options.results}" + (f" · audit: {options.audit}" if options.audit else "")
    console.print(visible_text(where, style="dim"), highlight=False)
    if outcome.interrupted:
        console.print("[yellow]interrupted: run the same command again to finish the remaining jobs[/yellow]")
        return 130
    return 1 if outcome.failed else 0


def _batch_backend(args: argparse.Namespace) -> Any:
    """Worker processes here, or tasks on a Ray cluster (``--ray [ADDRESS]``; imported only then)."""
    if args.ray is None:
        from codeward.batch.runner import ProcessPool

        return ProcessPool()
    try:
        from codeward.batch.ray_backend import RayBackend
    except ImportError as error:
        raise UsageError(f"--ray needs Ray ({error}): pip install 'codeward[ray]'") from None
    cpus = 1.0 if args.job_cpus is None else args.job_cpus
    if not cpus > 0:
        raise UsageError(f"--job-cpus must be a positive number of CPUs, got {args.job_cpus}")
    memory = None if args.job_memory is None else _size_in_bytes(args.job_memory, "--job-memory")
    address = None if args.ray == _LOCAL_RAY else args.ray
    return RayBackend(address, env=args.env, num_cpus=cpus, memory=memory)


_LOCAL_RAY = "local"
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def _size_in_bytes(text: str, option: str) -> int:
    """``2g``, ``512m``, ``1.5GiB`` or a number of bytes, as Docker's limits are written."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", text, re.IGNORECASE)
    size = int(float(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]) if match else 0
    if size <= 0:
        raise UsageError(f"{option} must be a size such as 2g or 512m, got {text!r}")
    return size


def _batch_file(given: str | None, runs: Path | None, name: str) -> Path:
    """A batch's results or audit file: where the user said, else beside the saved runs, else here."""
    return Path(given) if given else (runs or Path()) / name


def _add_batch(commands: Any) -> None:
    batch = commands.add_parser("batch", help="run many jobs, each in a sandbox of its own; results survive crashes")
    batch.add_argument("jobs", metavar="JOBS", help="a .yaml or .jsonl file of jobs (id, task, ...)")
    _add_model_options(batch, "the sandbox for jobs that name none (default: local)")
    batch.add_argument(
        "--concurrency",
        type=int,
        metavar="N",
        help="jobs running at once (default 2; with --ray, the cluster's CPUs)",
    )
    batch.add_argument(
        "--ray",
        nargs="?",
        const=_LOCAL_RAY,
        metavar="ADDRESS",
        help="run each job as a task on a Ray cluster: auto, ray://HOST:10001, or none to start a local "
        "cluster for the run (needs codeward[ray])",
    )
    batch.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME",
        help="with --ray: send this environment variable (a model key) to the tasks (repeatable); "
        "nothing else of this shell's environment is sent",
    )
    batch.add_argument(
        "--job-cpus",
        type=float,
        metavar="N",
        help="with --ray: the CPUs each job asks the cluster for (default 1)",
    )
    batch.add_argument(
        "--job-memory",
        metavar="SIZE",
        help="with --ray: the memory each job asks the cluster for, such as 2g (default: none asked)",
    )
    batch.add_argument(
        "--out", help="results, one JSON line per finished job (default results.jsonl, in --runs DIR if given)"
    )
    batch.add_argument("--audit", help="one JSON line per code block run (default audit.jsonl, in --runs DIR if given)")
    batch.add_argument("--no-audit", action="store_true", help="write no audit file")
    batch.add_argument(
        "--runs",
        metavar="DIR",
        help="save each job's run as DIR/ID.json, for codeward replay; the results and audit files go there too",
    )
    batch.add_argument(
        "--no-warm-pool",
        action="store_true",
        help="docker jobs: start each container when its job starts, not while the previous job runs",
    )
    batch.add_argument(
        "--runtime",
        metavar="NAME",
        help="docker jobs: the container runtime, such as runsc for gVisor (default: Docker's); "
        "a job may ask for runsc itself, never for a runtime that confines less",
    )
    batch.add_argument("--max-steps", type=int, default=20, metavar="N", help="for jobs that set none (default 20)")
    batch.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="COMMAND",
        help="an MCP server, as a shell line or an http(s) URL, started by each worker for its whole life; "
        "its tools join --tools, and jobs select them by name (repeatable; a jobs file cannot name one)",
    )
    batch.add_argument(
        "--allow-job-imports",
        action="store_true",
        help="let jobs name imports beyond the defaults in their authorized_imports ('*' included): "
        "trust the jobs file first",
    )
    batch.add_argument(
        "--allow-job-executors",
        action="store_true",
        help="let jobs choose a sandbox that confines less than --executor (jupyter, or local under docker) "
        "and set its executor_kwargs beyond lower limits: trust the jobs file first",
    )
    batch.add_argument(
        "--cancel-grace",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="how long a cancelled or timed-out job may take to close its sandbox before "
        "its worker is killed (default 5)",
    )
    batch.set_defaults(handler=_batch)


# -- replay -------------------------------------------------------------------------------


def _replay(args: argparse.Namespace, console: Console) -> int:
    from codeward.platform.replay import replay_run
    from codeward.platform.tool_specs import load_tool_specs

    with contextlib.ExitStack() as servers:
        report = replay_run(
            args.run,
            executor=args.executor,
            tools=load_tool_specs(args.tools) + _mcp_tools(args.mcp, servers, args.mcp_env),
            variables=_variables(args.var),
            authorized_imports=args.imports,
            as_recorded=args.as_recorded,
        )
    shown = escape(visible(report.render()))  # the recording's text, from a file that may be a stranger's
    if report.ok:
        console.print(f"[green]replay passed:[/green] {shown}", highlight=False)
        return 0
    console.print(f"[red]replay failed:[/red] {shown}", highlight=False)
    return 1


def _add_replay(commands: Any) -> None:
    replay = commands.add_parser(
        "replay",
        help="re-run a saved run's code in a fresh sandbox and compare",
        description="The run file's record of its executor, tools, variables and imports is a hint: "
        "the replay uses only what these flags give, and names the flags a run needs before running it.",
    )
    replay.add_argument("run", metavar="RUN.json", help="a run saved with codeward run --save or agent.memory.save")
    replay.add_argument("--executor", metavar="NAME", help="the sandbox (default: local)")
    replay.add_argument(
        "--tools",
        action="append",
        default=[],
        metavar="SPEC",
        help="the tools: module:attr, module, file.py[:attr] (repeatable; never read from the run file)",
    )
    replay.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="COMMAND",
        help="an MCP server to start on the host, as a shell line or an http(s) URL; its tools join --tools "
        "(repeatable; never started from the run file, even with --as-recorded)",
    )
    _add_mcp_env(replay)
    replay.add_argument(
        "--var",
        action="append",
        default=[],
        metavar="NAME=@FILE",
        help="a variable to add to (or replace in) the values the run saved",
    )
    replay.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="a module the code may import on the local sandbox, beyond the defaults (repeatable)",
    )
    replay.add_argument(
        "--as-recorded",
        action="store_true",
        help="also take what the run file records: its tools (imported: trust the file first), variable "
        "files inside its folder, and its executor unless that runs code unconfined (jupyter)",
    )
    replay.set_defaults(handler=_replay)


# -- doctor -------------------------------------------------------------------------------


def _doctor(args: argparse.Namespace, console: Console) -> int:
    from codeward.doctor import run_checks

    for check in run_checks():
        mark = "[green]✓[/green]" if check.ok else "[yellow]✗[/yellow]"
        console.print(f"{mark} [bold]{escape(check.name)}[/bold]: {escape(check.detail)}", highlight=False)
        if check.fix:  # escaped: "codeward[docker]" is a pip extra, not rich markup
            console.print(f"    [dim]→ {escape(check.fix)}[/dim]", highlight=False)
    return 0


def _add_doctor(commands: Any) -> None:
    doctor = commands.add_parser("doctor", help="what is installed and reachable, and how to fix what is not")
    doctor.set_defaults(handler=_doctor)


# -- images and sandboxes (docker) -------------------------------------------------------------


def _require_docker_extra(command: str) -> None:
    """A missing docker extra is named with the pip line that installs it, not as a bare import error."""
    from codeward.executors.base import import_with_extra

    import_with_extra("codeward.executors.docker.sandbox", needed_by=command, extra="docker")


def _images_build(args: argparse.Namespace, console: Console) -> int:
    import logging

    _require_docker_extra("codeward images build")
    from codeward.executors.docker.images import IMAGE_REPOSITORY, build_image, content_label, engine_client, find_image

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    client = engine_client()
    found = None if args.force else find_image(client)
    image = found or build_image(client, base=args.base)
    state = "current, not rebuilt" if found else "built"
    console.print(f"{IMAGE_REPOSITORY}:{content_label()} ({state}) {image.short_id}", highlight=False)
    return 0


def _add_images(commands: Any) -> None:
    images = commands.add_parser("images", help="the docker sandbox image")
    actions = images.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = actions.add_parser("build", help="build the sandbox image, unless a current one exists")
    build.add_argument(
        "--base",
        default="auto",
        help="'auto' (python:3.12-slim where a registry answers, else a Debian base made by debootstrap), "
        "'debian', or an image name",
    )
    build.add_argument("--force", action="store_true", help="rebuild even when a current image exists")
    build.set_defaults(handler=_images_build)


def _sandboxes(args: argparse.Namespace, console: Console) -> int:
    from rich.table import Table

    _require_docker_extra(f"codeward sandboxes {args.action}")
    from codeward.executors.docker.images import engine_client
    from codeward.executors.docker.sandbox import OWNER_PID_LABEL, list_sandboxes, owner_alive, reap_orphans

    client = engine_client()
    if args.action == "prune":
        removed = reap_orphans(client)
        names = f": {', '.join(removed)}" if removed else ""
        console.print(visible_text(f"removed {len(removed)} sandbox(es) whose owner is gone{names}"))
        return 0
    table = Table("container", "status", "owner pid", "owner", "created")
    for container in list_sandboxes(client):
        labels = container.labels
        table.add_row(
            visible_text(container.name or ""),
            visible_text(container.status),
            visible_text(labels.get(OWNER_PID_LABEL, "?")),
            "running" if owner_alive(labels) else "gone (prune removes it)",
            visible_text(container.attrs.get("Created", "")[:19]),
        )
    console.print(table if table.row_count else "no codeward sandboxes on this engine")
    return 0


def _add_sandboxes(commands: Any) -> None:
    sandboxes = commands.add_parser("sandboxes", help="the docker sandboxes codeward started")
    actions = sandboxes.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("ls", help="list codeward's containers and whether their owner still runs").set_defaults(
        handler=_sandboxes
    )
    actions.add_parser("prune", help="remove containers whose owner process is gone").set_defaults(handler=_sandboxes)


# -- mcp serve -------------------------------------------------------------------------------


def _mcp_serve(args: argparse.Namespace, console: Console) -> int:
    from codeward.executors.base import executor_class, import_with_extra
    from codeward.platform.tool_specs import load_tool_specs

    server = import_with_extra("codeward.mcp.server", needed_by="codeward mcp serve", extra="mcp")
    try:
        executor_class(args.executor)  # a wrong name or a missing extra is told now, not at the first call
    except ValueError as error:
        raise UsageError(str(error)) from error
    if args.idle_timeout <= 0:
        raise UsageError(f"--idle-timeout must be a positive number of seconds, got {args.idle_timeout}")
    options = server.ServeOptions(args.executor, load_tool_specs(args.tools), args.imports, args.idle_timeout)
    if args.http is None:
        server.serve_stdio(options)
    else:
        server.serve_http(options, args.host, args.http)
    return 0


def _add_mcp(commands: Any) -> None:
    mcp = commands.add_parser("mcp", help="codeward as an MCP server")
    actions = mcp.add_subparsers(dest="action", metavar="ACTION", required=True)
    serve = actions.add_parser(
        "serve",
        help="offer run_python and reset to MCP clients, each session in a sandbox of its own",
        description="Serves MCP on stdin and stdout, or over streamable HTTP with --http. Each client "
        "session gets its own sandbox, started on its first run_python and closed when the session ends.",
    )
    serve.add_argument("--executor", default="local", metavar="NAME", help="the sandbox (default: local)")
    serve.add_argument(
        "--tools",
        action="append",
        default=[],
        metavar="SPEC",
        help="tools the code can call: module:attr, module, or file.py[:attr] (repeatable)",
    )
    _add_import_option(serve)
    serve.add_argument(
        "--http", type=int, metavar="PORT", help="serve streamable HTTP at /mcp on PORT (0: a free one, printed)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="the address --http listens on (default: 127.0.0.1)")
    serve.add_argument(
        "--idle-timeout",
        type=float,
        default=1800.0,
        metavar="SECONDS",
        help="close a session's sandbox after this long without a call (default 1800)",
    )
    serve.set_defaults(handler=_mcp_serve, console_to_stderr=True)


# -- view ----------------------------------------------------------------------------------


def _view(args: argparse.Namespace, console: Console) -> int:
    from codeward.view import open_view, write_view

    if (args.run is None) == (args.runs is None):
        raise UsageError(
            "codeward view takes a saved run (codeward view RUN.json) or a batch's folder "
            "(codeward view --runs DIR), one of the two"
        )
    page = write_view(args.run or args.runs, args.out, batch=args.runs is not None)
    console.print(visible_text(f"wrote {page}"), highlight=False)
    if args.open and not open_view(page):
        console.print(visible_text(f"no browser could be started here; open {page.resolve().as_uri()} yourself"))
    return 0


def _add_view(commands: Any) -> None:
    view = commands.add_parser("view", help="write a saved run, or a batch's folder, as one HTML page")
    view.add_argument("run", nargs="?", metavar="RUN.json", help="a run saved with codeward run --save")
    view.add_argument("--runs", metavar="DIR", help="a batch's folder (codeward batch --runs DIR) instead of a run")
    view.add_argument(
        "-o", "--out", metavar="FILE.html", help="where to write the page (default: RUN.html, or DIR/index.html)"
    )
    view.add_argument("--open", action="store_true", help="open the page in the web browser once written")
    view.set_defaults(handler=_view)


# -- the command -----------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="codeward", description="Agents that act by writing Python, in a sandbox.")
    parser.add_argument("--version", action="version", version=f"codeward {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in (
        _add_demo,
        _add_run,
        _add_batch,
        _add_replay,
        _add_view,
        _add_doctor,
        _add_images,
        _add_sandboxes,
        _add_mcp,
    ):
        add(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    # stdout is for data: --json's result, or the MCP protocol itself
    console = Console(stderr=bool(getattr(args, "json", False) or getattr(args, "console_to_stderr", False)))
    try:
        _instrument_if_asked()
        return int(args.handler(args, console))
    except (UsageError, ImportError, FileNotFoundError) as error:  # the input, or a setup step the user must take
        console.print(f"[bold red]error:[/bold red] {escape(visible(str(error)))}", highlight=False)
        return 2
    except KeyboardInterrupt:  # the sandbox was closed on the way out (agents are context managers)
        console.print("[yellow]interrupted[/yellow]")
        return 130
    except Exception as error:  # a fault of codeward's own, or of a sandbox mid-run: never passed off as bad input
        log = _keep_traceback()
        console.print(
            f"[bold red]codeward failed:[/bold red] {escape(visible(f'{type(error).__name__}: {error}'))}\n"
            f"the traceback is in {escape(str(log))}; if this looks like a bug, please report it with that file",
            highlight=False,
        )
        return 1


def _instrument_if_asked() -> None:
    """``CODEWARD_OTEL=1`` sends traces where the ``OTEL_EXPORTER_OTLP_*`` variables say (batch workers inherit it)."""
    if os.environ.get("CODEWARD_OTEL") == "1":
        from codeward.telemetry import instrument

        instrument()


def _keep_traceback() -> Path:
    """Write the exception being handled to a file of its own, and return the file's path."""
    import tempfile
    import traceback

    handle, name = tempfile.mkstemp(prefix="codeward-failure-", suffix=".log")
    with open(handle, "w", encoding="utf-8") as log:
        traceback.print_exc(file=log)
    return Path(name)


if __name__ == "__main__":
    sys.exit(main())
