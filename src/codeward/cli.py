"""The `codeward` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.panel import Panel

from codeward import __version__

__all__ = ["main"]


def _demo(args: argparse.Namespace, console: Console) -> int:
    from codeward import CodeAgent, ReplayModel
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
    with CodeAgent(tools=[forecast], model=model, executor=args.executor) as agent:
        result = agent.run(DEMO_TASK, additional_args=dict(DEMO_VARIABLES), return_full_result=True)
    usage = result.token_usage
    console.print(
        f"\n[bold]Answer:[/bold] {result.output}\n"
        f"[dim]{result.state} · {len(agent.memory.action_steps())} steps · "
        f"{result.timing.duration:.2f} s · {usage.total_tokens} tokens (estimated by the recording)[/dim]"
    )
    return 0 if result.state == "success" else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="codeward", description="Agents that act by writing Python, in a sandbox.")
    parser.add_argument("--version", action="version", version=f"codeward {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser("demo", help="run a built-in multi-step task with a recorded model")
    demo.add_argument("--executor", default="local", help="the sandbox to run the code in (default: local)")
    demo.set_defaults(handler=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    console = Console()
    try:
        return int(args.handler(args, console))
    except (ValueError, ImportError, FileNotFoundError) as error:
        console.print(f"[bold red]error:[/bold red] {error}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
