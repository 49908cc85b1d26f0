"""`codeward run`: one task with a code agent, its steps shown, the run saved if asked."""

from __future__ import annotations

import argparse
import contextlib
import time
from typing import TYPE_CHECKING, Any

from rich.console import Console

from codeward.cli.options import (
    add_egress_options,
    add_import_option,
    add_mcp_env,
    add_model_options,
    add_mount_option,
    check_variable_names,
    egress_settings,
    hand_files,
    make_agent,
    mcp_tools,
    mount_settings,
    read_handed_files,
    read_variables,
)
from codeward.cli.output import literal, notes_console, print_json
from codeward.usage import UsageError
from codeward.wording import counted

if TYPE_CHECKING:
    from codeward import AgentGenerationError
    from codeward.platform.memory import AgentMemory, Timing

__all__ = ["add_parser", "steps_taken"]


def _run(args: argparse.Namespace, console: Console) -> int:
    from codeward import AgentGenerationError, AgentLogger, LogLevel
    from codeward.platform.memory import Timing
    from codeward.platform.model_ids import resolve_model
    from codeward.platform.run_files import save_run
    from codeward.platform.tool_specs import load_tool_specs

    if args.max_steps < 1:
        raise UsageError(f"--max-steps must be at least 1, got {args.max_steps}")
    model_id = _model_id(args.model)
    if args.outputs_dir is not None:
        from codeward.cli.outputs_dir import prepare_folder

        prepare_folder(args.outputs_dir)
    tools = load_tool_specs(args.tools)
    check_variable_names(args.var, tools)
    variables = read_variables(args.var)
    handed = read_handed_files(args.files)
    executor_kwargs = {
        **egress_settings(args.executor, args.egress, args.egress_header),
        **mount_settings(args.executor, args.mounts),
    }
    logger = AgentLogger(LogLevel.OFF if args.json else LogLevel.INFO, console)
    notes = notes_console()
    started = Timing()
    with contextlib.ExitStack() as servers:
        served = mcp_tools(args.mcp, servers, args.mcp_env)
        check_variable_names(args.var, served)
        with make_agent(
            tools=tools + served,
            model=resolve_model(model_id),
            executor=args.executor,
            executor_kwargs=executor_kwargs or None,
            additional_authorized_imports=args.imports or None,
            max_steps=args.max_steps,
            logger=logger,
            collect_outputs=args.collect_outputs or args.outputs_dir is not None,
        ) as agent:
            hand_files(agent, handed)
            try:
                result = agent.run(args.task, additional_args=variables or None, return_full_result=True)
            except AgentGenerationError as error:
                return _model_failed(error, agent.memory, started, args.json)
    waited = time.time() - started.start_time  # the sandbox's start and close included: what the user waited
    if args.outputs_dir is not None:
        from codeward.cli.outputs_dir import write_artifacts

        written = write_artifacts(agent.memory.action_steps(), args.outputs_dir)
        notes.print(f"[dim]{len(written)} file(s) from outputs/ written to {literal(str(args.outputs_dir))}[/dim]")
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
            notes.print(f"[yellow]warning:[/yellow] {literal(warning, one_line=True)}")
    steps = steps_taken(agent.memory)
    stopped = None if result.state == "success" else _out_of_steps(steps, args.max_steps)
    if args.json:
        print_json(_payload(result.to_dict(), None if stopped else result.output, stopped, steps))
    else:
        if stopped:
            notes.print(f"[bold yellow]stopped:[/bold yellow] {stopped}")
        usage = result.token_usage
        console.print(
            f"[dim]{result.state} · {counted(steps, 'step')} · "
            f"{waited:.2f} s · {counted(usage.total_tokens, 'token')}[/dim]"
        )
        if result.usage is not None:
            console.print(
                f"[dim]sandbox: {result.usage.wall_seconds:.2f} s running code · {result.usage.summary()}[/dim]"
            )
    return 0 if stopped is None else 1


def steps_taken(memory: AgentMemory) -> int:
    """The steps the agent ran: its action steps the model answered, less the closing call that asks an
    agent out of steps for its last word (that step runs no code and counts toward no limit)."""
    from codeward import AgentMaxStepsError

    return sum(
        step.model_output_message is not None and not isinstance(step.error, AgentMaxStepsError)
        for step in memory.action_steps()
    )


def _out_of_steps(steps: int, max_steps: int) -> str:
    return (
        f"out of steps: no final answer after {counted(steps, 'step')} (--max-steps {max_steps}); "
        "raise --max-steps, or make the task smaller"
    )


def _payload(run: dict[str, Any], output: Any, error: str | None, steps: int) -> dict[str, Any]:
    """`--json`'s object: the run as `RunResult.to_dict` gives it, its output as plain JSON (null when the run
    gave no final answer), the `error` that ended it (null on success), and the number of steps it ran."""
    from codeward.json_values import plain

    return run | {"output": plain(output), "error": error, "step_count": steps}


def _model_failed(error: AgentGenerationError, memory: AgentMemory, started: Timing, as_json: bool) -> int:
    """A model that cannot be called as set up (no key, unknown model) is a setup step, exit 2;
    one that failed on the way (rate limits, outages past their retries) is a failed run, exit 1,
    and under --json the run so far, with the error, is still the one JSON object on stdout."""
    from codeward.platform.models import ModelSetupError

    if isinstance(error.__cause__, ModelSetupError):
        raise UsageError(f"the model cannot be called: {error.__cause__}") from error
    notes_console().print(f"[bold red]error:[/bold red] {literal(error.message, one_line=True)}")
    if as_json:
        started.end_time = time.time()
        run = {
            "state": "error",
            "steps": [step.to_dict() for step in memory.steps],
            "token_usage": memory.token_usage().to_dict(),
            "timing": started.to_dict(),
            "usage": usage.to_dict() if (usage := memory.block_usage()) else None,
        }
        print_json(_payload(run, None, error.message, steps_taken(memory)))
    return 1


def _model_id(given: str | None) -> str:
    from codeward.platform.model_ids import check_model_id, default_model_id, no_model_message

    model_id = given or default_model_id()
    if model_id is None:
        raise UsageError(no_model_message())
    return check_model_id(model_id)


def add_parser(commands: Any) -> None:
    run = commands.add_parser("run", help="run one task with a code agent, showing its steps")
    run.add_argument("task", help="what the agent should do")
    add_model_options(run, "the sandbox to run the code in (default: local)")
    add_import_option(run)
    add_egress_options(run)
    add_mount_option(run)
    run.add_argument(
        "--var",
        action="append",
        default=[],
        metavar="NAME=@FILE",
        help="a variable for the code, read from .json, .csv, .parquet or .npy (repeatable)",
    )
    run.add_argument(
        "--file",
        dest="files",
        action="append",
        default=[],
        metavar="PATH[=NAME]",
        help="a file for the code to open(), written into the sandbox's working folder as NAME "
        "(its own name by default) before the run (repeatable)",
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
    add_mcp_env(run)
    run.add_argument("--json", action="store_true", help="print the run's result as JSON instead of the steps")
    run.add_argument("--save", metavar="RUN.json", help="save the run, for codeward replay or --model replay:RUN.json")
    run.add_argument(
        "--collect-outputs",
        action="store_true",
        help="collect the files the code writes under outputs/ after each step (kept with the run and --save)",
    )
    run.add_argument(
        "--outputs-dir",
        metavar="DIR",
        help="write the collected files into DIR (made if missing) under fresh names, owner-only; implies --collect-outputs",
    )
    run.set_defaults(handler=_run)
