"""`codeward demo`: a built-in multi-step task, its model a recording, its code run for real in a sandbox."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.panel import Panel

from codeward.cli.options import add_executor_option, make_agent
from codeward.cli.output import literal
from codeward.cli.run import steps_taken
from codeward.wording import counted

__all__ = ["add_parser"]


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
    with make_agent(tools=[forecast], model=model, executor=args.executor) as agent:
        result = agent.run(DEMO_TASK, additional_args=dict(DEMO_VARIABLES), return_full_result=True)
    usage = result.token_usage
    console.print(
        f"\n[bold]Answer:[/bold] {literal(str(result.output))}\n"
        f"[dim]{result.state} · {counted(steps_taken(agent.memory), 'step')} · "
        f"{result.timing.duration:.2f} s · {counted(usage.total_tokens, 'token')} (estimated by the recording)[/dim]"
    )
    return 0 if result.state == "success" else 1


def add_parser(commands: Any) -> None:
    demo = commands.add_parser("demo", help="run a built-in multi-step task with a recorded model")
    add_executor_option(demo, "the sandbox to run the code in (default: local)")
    demo.set_defaults(handler=_demo)
