"""`codeward batch`: many jobs, each in a sandbox of its own, in worker processes here or on a Ray cluster."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from codeward.cli.options import (
    add_egress_options,
    add_model_options,
    add_mount_option,
    egress_settings,
    mount_settings,
)
from codeward.cli.output import notes_console, print_table
from codeward.terminal_text import visible_text
from codeward.usage import UsageError

__all__ = ["add_parser"]


def _batch(args: argparse.Namespace, console: Console) -> int:
    from codeward.batch.display import BatchProgress, summary_table
    from codeward.batch.jobs import JobDefaults
    from codeward.batch.preflight import settled_jobs
    from codeward.batch.runner import BatchOptions, run_batch
    from codeward.platform.model_ids import default_model_id

    if args.concurrency is not None and args.concurrency < 1:
        raise UsageError(f"--concurrency must be at least 1, got {args.concurrency}")
    if args.max_steps < 1:
        raise UsageError(f"--max-steps must be at least 1, got {args.max_steps}")
    if args.env and args.ray is None:
        raise UsageError("--env sends variables to the tasks of a Ray cluster: use it with --ray")
    if (args.job_cpus is not None or args.job_memory is not None) and args.ray is None:
        raise UsageError("--job-cpus and --job-memory are what each job asks of a Ray cluster: use them with --ray")
    if args.egress is not None and args.executor != "docker":
        raise UsageError(
            f"--egress is for docker jobs, and jobs here run in the {args.executor!r} sandbox unless they say: "
            "use --executor docker"
        )
    egress = egress_settings("docker", args.egress, args.egress_header)
    if args.mounts and args.executor != "docker":
        raise UsageError(
            f"--mount is for docker jobs, and jobs here run in the {args.executor!r} sandbox unless they say: "
            "use --executor docker"
        )
    mounts = mount_settings("docker", args.mounts).get("mounts", {})
    if args.runtime is not None and args.executor != "docker":
        raise UsageError(_runtime_without_docker(args.runtime, args.executor))
    defaults = JobDefaults(
        model=args.model or default_model_id(),
        executor=args.executor,
        runtime=args.runtime,
        tools=args.tools,
        mcp=args.mcp,
        max_steps=args.max_steps,
        allow_imports=args.allow_job_imports,
        allow_executors=args.allow_job_executors,
        egress=egress.get("egress"),
        egress_headers=egress.get("egress_headers", {}),
        allow_egress=args.allow_job_egress,
        mounts=mounts,
        allow_mounts=args.allow_job_mounts,
        collect_outputs=args.collect_outputs,
    )
    # on this machine, or a Ray cluster started for the run, the jobs' model keys are this environment's
    keys = args.ray in (None, _LOCAL_RAY)
    jobs = settled_jobs(args.jobs, defaults, _model_option(args.model), keys)
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
        args.retry,
    )
    notes = notes_console()
    with BatchProgress(notes) as progress:
        outcome = run_batch(jobs, options, progress, backend=_batch_backend(args))
    if outcome.dropped_bytes:
        notes.print(f"[yellow]cut a torn last line ({outcome.dropped_bytes} bytes) left by an earlier crash[/yellow]")
    for renderable in summary_table(outcome):
        print_table(console, renderable)
    where = f"results: {options.results}" + (f" · audit: {options.audit}" if options.audit else "")
    console.print(visible_text(where, style="dim"), highlight=False, soft_wrap=True)
    if outcome.interrupted:
        notes.print("[yellow]interrupted: run the same command again to finish the remaining jobs[/yellow]")
        return 130
    return 1 if outcome.failed else 0


def _runtime_without_docker(runtime: str, executor: str) -> str:
    """Why --runtime is refused without --executor docker, and what to pass instead."""
    from codeward.executors.docker.gvisor import GVISOR

    said = (
        f"--runtime applies only to docker sandboxes, and jobs here run in the {executor!r} sandbox unless they say: "
        f"pass --executor docker to run them in docker under {runtime} (a job that chooses another sandbox "
        "runs without it)"
    )
    if runtime == GVISOR:
        said += (
            f"; or, to put only the jobs that choose docker under gVisor, give each runtime: {GVISOR} in the jobs file"
        )
    return said


def _model_option(given: str | None) -> str:
    """Where the model of jobs that name none came from, as a fault names it."""
    import os

    from codeward.platform.model_ids import MODEL_ENV

    if given:
        return "--model"
    return MODEL_ENV if os.environ.get(MODEL_ENV, "").strip() else "the default model (from the provider key set)"


def _batch_backend(args: argparse.Namespace) -> Any:
    """Worker processes here, or tasks on a Ray cluster (``--ray [ADDRESS]``; imported only then)."""
    if args.ray is None:
        from codeward.batch.process_pool import ProcessPool

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


def _size_in_bytes(text: str, option: str) -> int:
    """``2g``, ``512m``, ``1.5GiB`` or a number of bytes, as Docker's limits are written."""
    from codeward.executors.docker.hardening import size_in_bytes

    size = size_in_bytes(text) or 0
    if size <= 0:
        raise UsageError(f"{option} must be a size such as 2g or 512m, got {text!r}")
    return size


def _batch_file(given: str | None, runs: Path | None, name: str) -> Path:
    """A batch's results or audit file: where the user said, else beside the saved runs, else here."""
    return Path(given) if given else (runs or Path()) / name


def add_parser(commands: Any) -> None:
    batch = commands.add_parser("batch", help="run many jobs, each in a sandbox of its own; results survive crashes")
    batch.add_argument("jobs", metavar="JOBS", help="a .yaml or .jsonl file of jobs (id, task, ...)")
    add_model_options(batch, "the sandbox for jobs that name none (default: local)")
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
        "--retry",
        choices=("failed", "error", "all"),
        help="run again the jobs already in the results file whose latest attempt did not succeed, as their next "
        "attempt (the earlier line is kept): failed = max_steps_error, timeout or error; error = error only; "
        "all = any status but success. A job that succeeded is never run again",
    )
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
    add_egress_options(batch, "each docker job's sandbox")
    batch.add_argument(
        "--allow-job-egress",
        action="store_true",
        help="let jobs name hosts beyond --egress in their egress list, and headers of their own in "
        "egress_headers (values as written: a jobs file never reads this environment): trust the jobs file first",
    )
    add_mount_option(batch, "each docker job's sandbox")
    batch.add_argument(
        "--allow-job-mounts",
        action="store_true",
        help="let docker jobs show host paths to their sandbox in executor_kwargs.mounts (a relative source "
        "is inside the jobs file's folder; each is checked as --mount is): trust the jobs file first",
    )
    batch.add_argument(
        "--collect-outputs",
        action="store_true",
        help="each job's agent collects the files its code writes under outputs/: their names in the results, "
        "their bytes in the job's run file (--runs)",
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
