"""`codeward egress install`: mitmproxy, in an environment of its own, for docker sandboxes' egress proxies."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path
from typing import Any

from rich.console import Console

from codeward.cli.output import literal, notes_console
from codeward.usage import UsageError

__all__ = ["add_parser"]


def _install(args: argparse.Namespace, console: Console) -> int:
    from codeward.egress.proxy import MITMPROXY_REQUIREMENT, default_proxy_home, install_proxy

    home = Path(args.home) if args.home else default_proxy_home()
    notes_console().print(f"installing {MITMPROXY_REQUIREMENT} into {literal(str(home))} ...")
    try:
        mitmdump = install_proxy(home)
    except (OSError, subprocess.CalledProcessError) as error:
        raise UsageError(f"mitmproxy could not be installed into {home}: {error}") from error
    console.print(f"mitmdump: {literal(str(mitmdump))}", highlight=False, soft_wrap=True)
    if args.home:
        notes_console().print(
            f"[dim]not codeward's usual place: export CODEWARD_MITMDUMP={literal(str(mitmdump))}[/dim]", highlight=False
        )
    return 0


def _where(args: argparse.Namespace, console: Console) -> int:
    from codeward.egress.proxy import EgressUnavailable, mitmdump_path

    try:
        console.print(literal(mitmdump_path()), highlight=False, soft_wrap=True)
    except EgressUnavailable as error:
        raise UsageError(str(error)) from error
    return 0


def add_parser(commands: Any) -> None:
    egress = commands.add_parser("egress", help="the proxy that lets a docker sandbox reach the hosts it lists")
    actions = egress.add_subparsers(dest="action", metavar="ACTION", required=True)
    install = actions.add_parser(
        "install",
        help="install mitmproxy, which --egress needs, in an environment of its own",
        description="mitmproxy pins libraries that codeward's other extras need newer, so it gets a virtual "
        "environment of its own (by default under $XDG_CACHE_HOME/codeward/egress-proxy), where codeward "
        "finds it; CODEWARD_MITMDUMP names another mitmdump instead.",
    )
    install.add_argument("--home", metavar="DIR", help="where to make the environment (default: codeward's own place)")
    install.set_defaults(handler=_install)
    where = actions.add_parser("where", help="print the mitmdump codeward runs: CODEWARD_MITMDUMP, its own, or PATH's")
    where.set_defaults(handler=_where)
