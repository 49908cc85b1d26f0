"""`codeward doctor`: what is installed and reachable, and what to do about what is not.

Every check is quick and offline (the Docker engine is the only thing contacted,
over its local socket). A part that is not set up (an extra, a key) is a – line saying how
to get it; a part that is broken (a check that crashed, an engine DOCKER_HOST names that
does not answer) is a ✗ line, never a traceback, and the command then exits 1, so that a
script can tell a sound machine from one with something to fix. What a check needs is imported when it
runs, so the command's help loads none of it.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from codeward.cli.output import notes_console
from codeward.executors.base import Executor, available_executors, executor_class, install_line
from codeward.usage import UsageError
from codeward.wording import counted

if TYPE_CHECKING:
    from codeward.cli.attack_probes import Verdict

__all__ = ["Check", "add_parser", "run_checks"]

#: The label every codeward sandbox image carries (set by the image builder).
IMAGE_LABEL = "codeward.content"


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    #: A part a user may do without (an extra, a key, a layer this kernel lacks): not set up, it is
    #: shown as "–" and the command still succeeds; anything else that fails is broken (✗, exit 1).
    optional: bool = False


def _python() -> list[Check]:
    from codeward import __version__

    return [Check("codeward", True, f"{__version__} on Python {platform.python_version()} ({sys.executable})")]


def _executors() -> list[Check]:
    checks = []
    for name in available_executors():
        try:
            executor_class(name)
        except ImportError as error:
            checks.append(Check(f"executor {name}", False, "cannot be imported", str(error), optional=True))
        else:
            checks.append(Check(f"executor {name}", True, "importable"))
    return checks


def _local_confinement() -> list[Check]:
    """The layers that confine the local executor's worker here; missing ones run it with fewer walls."""
    from codeward.executors.local.confinement import LAYERS, missing_layers

    missing = missing_layers()
    checks = []
    for layer in LAYERS:
        if layer in missing:
            fix = "the worker runs without it (confinement='auto'); confinement='strict' refuses to start"
            checks.append(Check(f"local {layer}", False, missing[layer], fix, optional=True))
        else:
            checks.append(Check(f"local {layer}", True, "confines the local executor's worker"))
    return checks


def _docker() -> list[Check]:
    try:
        import docker
    except ImportError:
        return [Check("docker", False, "the docker SDK is not installed", install_line("docker"), optional=True)]
    try:
        client = docker.from_env(timeout=3)
        version = client.version().get("Version", "?")
    except Exception as error:
        return [
            Check(
                "docker engine",
                False,
                f"not reachable ({type(error).__name__})",
                "start the engine (Debian: apt-get install -y docker.io && dockerd &), or set DOCKER_HOST",
                optional=not os.environ.get("DOCKER_HOST"),  # an engine the user pointed at is meant to be there
            )
        ]
    images = client.images.list(filters={"label": IMAGE_LABEL})
    tags = ", ".join(tag for image in images for tag in image.tags) or f"{len(images)} untagged"
    return [
        Check("docker engine", True, f"version {version}, reachable"),
        Check(
            "sandbox images",
            bool(images),
            tags if images else "none built yet",
            "" if images else "build one with: codeward images build",
            optional=True,
        ),
        _gvisor(client.info().get("Runtimes") or {}),
    ]


def _gvisor(runtimes: dict[str, Any]) -> Check:
    """Whether `runtime="runsc"` would start codeward's kernel under gVisor on this engine.

    A runsc registered without the flags the kernel's ipc sockets need starts containers whose
    kernel never answers, so its flags are checked, not just its name.
    """
    from codeward.executors.docker.gvisor import GVISOR, runtime_problem

    name = f"docker gVisor ({GVISOR})"
    problem = runtime_problem(runtimes, GVISOR)
    if problem:
        return Check(name, False, f"{problem.detail}: runtime='runsc' is refused", problem.fix, optional=True)
    flags = " ".join(runtimes[GVISOR].get("runtimeArgs") or [])
    return Check(name, True, f"registered ({flags}): runtime='runsc' starts codeward's kernel")


def _egress() -> list[Check]:
    """Whether a docker sandbox can be given an egress list here: the proxy's mitmdump is found."""
    from codeward.egress.proxy import EgressUnavailable, mitmdump_path

    try:
        found = mitmdump_path()
    except EgressUnavailable as error:
        return [Check("egress proxy", False, str(error), "codeward egress install", optional=True)]
    return [Check("egress proxy", True, f"mitmdump at {found}: docker sandboxes may take --egress")]


def _kernels() -> list[Check]:
    try:
        from jupyter_client.kernelspec import KernelSpecManager
    except ImportError:
        return [
            Check("jupyter kernels", False, "jupyter_client is not installed", install_line("jupyter"), optional=True)
        ]
    specs = KernelSpecManager().find_kernel_specs()
    if not specs:
        return [
            Check(
                "jupyter kernels",
                False,
                "no kernel installed",
                "pip install ipykernel && python -m ipykernel install --user",
                optional=True,
            )
        ]
    return [Check("jupyter kernels", True, ", ".join(sorted(specs)))]


def _e2b() -> list[Check]:
    try:
        import e2b_code_interpreter  # noqa: F401
    except ImportError:
        return [Check("e2b", False, "e2b-code-interpreter is not installed", install_line("e2b"), optional=True)]
    if not os.environ.get("E2B_API_KEY"):
        return [Check("e2b", False, "E2B_API_KEY is not set", "export E2B_API_KEY=... (from e2b.dev)", optional=True)]
    return [Check("e2b", True, "E2B_API_KEY is set")]


def _models() -> list[Check]:
    from codeward.platform.model_ids import MODEL_ENV, PROVIDER_KEYS

    checks = []
    chosen = os.environ.get(MODEL_ENV)
    checks.append(
        Check(
            MODEL_ENV,
            bool(chosen),
            chosen or "not set",
            "" if chosen else f"export {MODEL_ENV}=openai/gpt-4o-mini, or pass --model",
            optional=True,
        )
    )
    present = [key for key in PROVIDER_KEYS if os.environ.get(key)]
    checks.append(
        Check(
            "provider keys",
            bool(present),
            ", ".join(present) or "none set",
            ""
            if present
            else "export OPENAI_API_KEY=... (or another provider's key); offline, use "
            "--model replay:RUN.json or script:RESPONSES.yaml, or try: codeward demo",
            optional=True,
        )
    )
    return checks


_SECTIONS: list[Callable[[], list[Check]]] = [
    _python,
    _executors,
    _local_confinement,
    _docker,
    _egress,
    _kernels,
    _e2b,
    _models,
]


def run_checks() -> list[Check]:
    """Every check, in the order shown; a check that crashes is reported, not raised."""
    checks: list[Check] = []
    for section in _SECTIONS:
        try:
            checks.extend(section())
        except Exception as error:
            checks.append(
                Check(section.__name__.strip("_"), False, f"the check failed: {type(error).__name__}: {error}")
            )
    return checks


def _doctor(args: argparse.Namespace, console: Console) -> int:
    checks = run_checks()
    for check in checks:
        mark = "[green]✓[/green]" if check.ok else "[dim]–[/dim]" if check.optional else "[red]✗[/red]"
        console.print(f"{mark} [bold]{escape(check.name)}[/bold]: {escape(check.detail)}", highlight=False)
        if check.fix:  # escaped: "codeward[docker]" is a pip extra, not rich markup
            console.print(f"    [dim]→ {escape(check.fix)}[/dim]", highlight=False)
    broken = sum(not check.ok and not check.optional for check in checks)
    if broken:
        console.print(f"{broken} of {counted(len(checks), 'check')} failed", highlight=False)
    return 1 if broken else 0


def _attack(args: argparse.Namespace, console: Console) -> int:
    """`doctor --attack`: the probes run in the chosen sandbox, a line each; exit 0 only when all held."""
    from codeward.cli.attack_bait import Bait
    from codeward.cli.attack_probes import PROBES, memory_limit, run_probes

    name = args.executor or "local"
    settings: dict[str, Any] = {}
    if args.runtime is not None:
        if name != "docker":
            raise UsageError(
                f"--runtime chooses a docker sandbox's runtime; the {name!r} sandbox has none: add --executor docker"
            )
        settings["runtime"] = args.runtime
    notes = notes_console()
    if name == "jupyter":
        notes.print(
            "[yellow]note:[/yellow] a Jupyter kernel is not a sandbox: it runs as you, with your files, "
            "processes and network; the probes show what code run there can do"
        )
    with Bait(name) as bait:  # set up first: the sandbox starts with the secret already in this environment
        tally = _Tally(console)
        with _attacked_sandbox(name, settings) as executor:
            limit = memory_limit(executor)
            tally.show(run_probes(executor, bait, limit))
        if name == "local":  # the policy refused all; the kernel's own walls are probed without it
            from codeward.cli.attack_confined import ConfinedPython

            confined = ConfinedPython(max_memory_bytes=limit)
            with confined:
                if confined.missing:
                    notes.print(
                        "[yellow]note:[/yellow] the local worker's confinement lacks here: "
                        f"{escape(', '.join(confined.missing))} (codeward doctor says why)"
                    )
                everywhere = tuple(probe for probe in PROBES if probe.executors is None)
                tally.show(run_probes(confined, bait, limit, everywhere), CONFINEMENT_ALONE)
    where = f"the {name} sandbox" + (f" under {args.runtime}" if args.runtime else "")
    if tally.got_through:
        not_a_sandbox = "; a Jupyter kernel is not a sandbox: use docker or local" if name == "jupyter" else ""
        console.print(
            f"{tally.got_through} of {counted(tally.held + tally.got_through, 'probe')} got through "
            f"{escape(where)}{not_a_sandbox}",
            highlight=False,
            soft_wrap=True,
        )
        return 1
    console.print(
        f"all {counted(tally.held, 'probe')} held in {escape(where)} on this machine", highlight=False, soft_wrap=True
    )
    return 0


#: What the names of the probes run against the local worker's confinement alone begin with.
CONFINEMENT_ALONE = "confinement alone: "


class _Tally:
    """The probes' lines as their verdicts come, and how many held and got through."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.held = self.got_through = 0

    def show(self, verdicts: Iterable[Verdict], prefix: str = "") -> None:
        for verdict in verdicts:
            label = f"[bold]{escape(prefix + verdict.name)}[/bold]"
            if verdict.held:
                self.held += 1
                line = f"[green]✓[/green] {label}: held"
            elif verdict.held is None:
                line = f"[dim]–[/dim] {label}: not probed: {escape(verdict.detail)}"
            else:
                self.got_through += 1
                line = f"[red]✗[/red] {label}: got through: {escape(verdict.detail)}"
            self.console.print(line, highlight=False, soft_wrap=True)


def _attacked_sandbox(name: str, settings: dict[str, Any]) -> Executor:
    """The sandbox the probes attack, as `name` starts by default; one that cannot start is for the user to fix."""
    from codeward.executors.base import ExecutorError, create_executor

    try:
        return create_executor(name, **settings)
    except (ValueError, ExecutorError) as error:
        raise UsageError(f"the {name!r} sandbox could not be started for --attack: {error}") from error


def _run(args: argparse.Namespace, console: Console) -> int:
    if args.attack:
        return _attack(args, console)
    if args.executor is not None or args.runtime is not None:
        raise UsageError("--executor and --runtime choose the sandbox that --attack probes: add --attack")
    return _doctor(args, console)


def add_parser(commands: Any) -> None:
    from codeward.cli.options import add_executor_option

    doctor = commands.add_parser("doctor", help="what is installed and reachable, and how to fix what is not")
    doctor.add_argument(
        "--attack",
        action="store_true",
        help="run a set of real escape attempts inside a sandbox (files, environment, shell, sockets, network, "
        "signals, processes, memory) and show, for each, that it held or what got through; exits 1 unless all held",
    )
    add_executor_option(doctor, "with --attack: the sandbox to probe (default local)", default=None)
    doctor.add_argument(
        "--runtime", metavar="NAME", help="with --attack --executor docker: the container runtime, such as runsc"
    )
    doctor.set_defaults(handler=_run)
