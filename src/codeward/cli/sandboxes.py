"""`codeward images` and `codeward sandboxes`: the docker sandbox image, and the containers codeward started.

Both need the docker extra, imported only when one of them runs and named with its pip line
when missing.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from codeward.cli.output import print_table
from codeward.terminal_text import visible_text

__all__ = ["add_parser"]


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
    from codeward.executors.docker.owners import OWNER_PID_LABEL, list_sandboxes, owner_alive, reap_orphans

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
    if table.row_count:
        print_table(console, table)
    else:
        console.print("no codeward sandboxes on this engine")
    return 0


def _add_sandboxes(commands: Any) -> None:
    sandboxes = commands.add_parser("sandboxes", help="the docker sandboxes codeward started")
    actions = sandboxes.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("ls", help="list codeward's containers and whether their owner still runs").set_defaults(
        handler=_sandboxes
    )
    actions.add_parser("prune", help="remove containers whose owner process is gone").set_defaults(handler=_sandboxes)


def add_parser(commands: Any) -> None:
    """Both commands, as the help lists them: the image first, then the containers started from it."""
    _add_images(commands)
    _add_sandboxes(commands)
