"""Agent-style snippets timed under plain CPython `exec`, codeward's LocalExecutor in both
isolation modes, pydantic-monty and, when installed, smolagents' LocalPythonExecutor, all in one run.

Run: python bench/local_executor.py [--repeat N] [--snippets FILE ...] [--only-snippets]
(extras: pip install 'codeward[bench]')
Prints medians and the ratios that the targets speak of, each measured in this run,
interleaved so that load from other processes falls on every runner alike:
- an agent's tiny step (`x = 2 + 3`, `print(x)`, `final_answer(x)`), the tiny block an agent pays at
  every step, end to end, process mode against Monty (target: within 1.5x), and the least block
  (`x = 1`) beside it, against Monty too, with no target: on it Monty takes about what a bare
  round trip between two Python processes does; beside them two floors on this machine
  (`worker_floors`): the block's text sent to a bare child process over a socket pair and echoed
  back (`pipe`), which no worker's round trip can beat, and a bare worker in Python that does the
  least it can (`bare_worker`: a JSON header each way, a cached compile, `exec`);
- each snippet: process mode against Monty (median at most 1.0x, none over 1.5x), against
  CPython (median within 3x), smolagents against process mode on loop-heavy ones (at least 30x);
- the tiny block again, each runner idle for half a second first, as before each of an agent's
  steps (its caches, and the worker's CPU, gone cold);
- construction to first result, `LocalExecutor()` then `.run("1")`, against starting
  `python -c pass` (both in ms: the ratio depends on how fast the interpreter itself starts);
- a 1-million-row DataFrame sent as a variable and read by `len(df)`, against
  `pickle.dumps` + `pickle.loads` of the same frame (under 3x);
- the share of the time spent compiling under the policy, against CPython's own `compile`.
Monty runs in a `MontySession` (`Monty()` pool, `pool.checkout()`, `session.feed_run`): its
documented REPL path, where a session's globals persist between feeds as an agent's do. A
snippet Monty refuses (it runs a subset of Python) is shown as n/a with its reason.
Nothing here asserts on time: targets are printed as met or missed.

Your own snippets: ``--snippets FILE`` (repeatable) times the snippets of FILE beside the built-in
ones, the same way (``--only-snippets``: only those, with the tiny blocks, idle or not; no start-up,
DataFrame or compile sections). FILE is Python source cut into snippets by header lines::

    ### parse_rows
    rows = [line.split(",") for line in text.splitlines()]
    len(rows)
    ### score loops
    total = 0
    for i in range(10_000):
        total += i % 7
    total

A line ``### NAME`` starts a snippet named NAME, and the lines up to the next header are its code
(a last expression is its value, as in an agent's block); the word ``loops`` after the name marks
it loop-heavy (it counts towards the smolagents ratio). A file without a header line is one
snippet, named after the file. Each snippet runs as one block in a fresh namespace for CPython and
in the same long-lived executor for the sandboxes, as the built-in ones do; `final_answer` is
defined in every runner.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import pickle
import re
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from worker_floors import Runner, bare_worker_runner, pipe_runner  # beside this file

from codeward.executors import LocalExecutor
from codeward.executors.local.block_compiler import compile_block
from codeward.tools import FinalAnswerTool

LIMITS = {"timeout_seconds": 120, "max_operations": 10**9}
#: What the sandboxes of the snippet runs may import besides the default list: a data snippet's libraries,
#: as the user who runs such code allows them (Monty and smolagents cannot import them at all: n/a).
DATA_IMPORTS = ("numpy", "pandas")
TINY = "x = 1"
TINY_FINAL = "x = 2 + 3\nprint(x)\nfinal_answer(x)"
#: A header line of a snippets file (see the module): ``### name`` and, maybe, ``loops``.
HEADER = re.compile(r"^###[ \t]+(\S+)[ \t]*(loops)?[ \t]*$", re.MULTILINE)
FRAME_ROWS = 1_000_000
#: How long each runner sits idle before the tiny block of the idle section.
IDLE_SECONDS = 0.5

SNIPPETS: dict[str, tuple[bool, str]] = {
    # name: (loop-heavy, code)
    "loop_sum": (
        True,
        """
        total = 0
        for i in range(20000):
            if i % 3 == 0:
                total += i * i
        total
    """,
    ),
    "while_loop": (
        True,
        """
        n, steps = 27, 0
        for start in range(1, 300):
            n = start
            while n != 1:
                n = n // 2 if n % 2 == 0 else 3 * n + 1
                steps += 1
        steps
    """,
    ),
    "string_building": (
        True,
        """
        words = []
        for i in range(5000):
            words.append(f"item-{i:05d}".upper())
        text = ",".join(words)
        len(text.split(",")), text[:20]
    """,
    ),
    "dict_counting": (
        True,
        """
        counts = {}
        text = "the quick brown fox jumps over the lazy dog " * 400
        for word in text.split():
            counts[word] = counts.get(word, 0) + 1
        sorted(counts.items(), key=lambda kv: -kv[1])[:3]
    """,
    ),
    "comprehensions": (
        False,
        """
        squares = [x * x for x in range(20000)]
        evens = {x: x // 2 for x in squares if x % 2 == 0}
        total = sum(v for v in evens.values())
        total
    """,
    ),
    "functions": (
        True,
        """
        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)
        fib(18)
    """,
    ),
    "classes": (
        True,
        """
        class Account:
            def __init__(self, owner):
                self.owner = owner
                self.balance = 0
            def deposit(self, amount):
                self.balance += amount
                return self.balance
        accounts = [Account(f"u{i}") for i in range(200)]
        for step in range(20):
            for account in accounts:
                account.deposit(step)
        sum(a.balance for a in accounts)
    """,
    ),
    "stdlib_calls": (
        False,
        """
        import json, re, statistics
        rows = [{"id": i, "name": f"n{i}", "score": (i * 37) % 100} for i in range(2000)]
        blob = json.dumps(rows)
        parsed = json.loads(blob)
        ids = re.findall(r'"id": (\\d+)', blob)
        statistics.mean(r["score"] for r in parsed), len(ids)
    """,
    ),
}


class Unsupported(Exception):
    """The runner cannot run this code at all (Monty's subset of Python): reported as n/a."""


def time_runners(runners: dict[str, Runner], code: str, repeat: int) -> tuple[dict[str, float], dict[str, str]]:
    """Median seconds of each runner on `code`, the runners interleaved within every repetition;
    and, for the runners that refused the code at warm-up, why."""
    refused: dict[str, str] = {}
    for name, run in runners.items():
        try:
            run(code)  # warm-up: imports, caches
        except Unsupported as why:
            refused[name] = str(why)
        except Exception as error:  # a snippet of yours this runner cannot run: said, not timed
            refused[name] = f"{type(error).__name__}: {(str(error).splitlines() or [''])[0]}"
    live = {name: run for name, run in runners.items() if name not in refused}
    samples: dict[str, list[float]] = {name: [] for name in live}
    for _ in range(repeat):
        for name, run in live.items():
            started = time.perf_counter()
            run(code)
            samples[name].append(time.perf_counter() - started)
    return {name: statistics.median(times) for name, times in samples.items()}, refused


def load_snippets(path: Path) -> dict[str, tuple[bool, str]]:
    """The snippets of a file (see the module for its format): name -> (loop-heavy, code)."""
    text = path.read_text(encoding="utf-8")
    headers = list(HEADER.finditer(text))
    if not headers:
        return {path.stem: (False, text.strip())}
    snippets: dict[str, tuple[bool, str]] = {}
    for header, following in zip(headers, [*headers[1:], None], strict=True):
        code = text[header.end() : following.start() if following else len(text)].strip("\n")
        name = header.group(1)
        if name in snippets:
            raise SystemExit(f"{path}: two snippets are named {name!r}; give each a name of its own")
        snippets[name] = (header.group(2) is not None, textwrap.dedent(code).strip())
    return snippets


def final_answer(value: object) -> object:
    return value


def cpython_runner() -> Runner:
    def run(code: str) -> object:
        namespace: dict[str, object] = {"final_answer": final_answer}
        with contextlib.redirect_stdout(io.StringIO()):  # the sandboxes keep what is printed too
            exec(compile(code, "<snippet>", "exec"), namespace)
        return namespace

    return run


def monty_runner(stack: contextlib.ExitStack) -> Runner | None:
    """One Monty session for the whole run, kept open like an agent's REPL, with no cap on its calls."""
    try:
        from pydantic_monty import Monty, MontyRuntimeError, MontySyntaxError
    except ImportError:
        return None
    # its default of 1000 external calls and lookups a checkout would end the tiny blocks' 1000 runs
    session = stack.enter_context(stack.enter_context(Monty()).checkout(limits={"max_suspensions": 10**9}))

    def run(code: str) -> object:
        try:
            return session.feed_run(
                code, external_lookup={"final_answer": final_answer}, print_callback=lambda stream, text: None
            )
        except (MontyRuntimeError, MontySyntaxError) as error:
            raise Unsupported(error.display(format="type-msg").splitlines()[-1]) from None

    return run


def smolagents_runner() -> Runner | None:
    try:
        from smolagents.local_python_executor import LocalPythonExecutor
    except ImportError:
        return None
    executor = LocalPythonExecutor(additional_authorized_imports=["json", "re", "statistics"])
    executor.send_tools({})

    return executor


def verdict(value: float, limit: float, *, at_least: bool = False) -> str:
    met = value >= limit if at_least else value <= limit
    return "met" if met else "MISSED"


def ratio(times: dict[str, float], top: str, bottom: str) -> float | None:
    return times[top] / times[bottom] if top in times and bottom in times else None


def cell(value: float | None, width: int, unit: str = "") -> str:
    if value is None:
        return f"{'n/a':>{width}}"
    digits = 1 if unit == "x" and value >= 10 else 2
    return f"{value:>{width - len(unit)}.{digits}f}{unit}"


COLUMNS = ("cpython", "process", "in_process", "monty", "smolagents")
#: (numerator, denominator, label) of each ratio column.
RATIOS = (
    ("process", "cpython", "proc/CPy"),
    ("in_process", "cpython", "inproc/CPy"),
    ("process", "monty", "proc/Monty"),
    ("smolagents", "process", "smol/proc"),
)


def print_header() -> None:
    names = "".join(f"{name + ' ms':>14}" for name in COLUMNS)
    ratios = "".join(f"{label:>12}" for _, _, label in RATIOS)
    print(f"{'snippet':<16}{'loops':>6}{names}{ratios}")


def print_row(name: str, loops: str, times: dict[str, float]) -> None:
    names = "".join(cell(times[c] * 1e3 if c in times else None, 14) for c in COLUMNS)
    ratios = "".join(cell(ratio(times, top, bottom), 12, "x") for top, bottom, _ in RATIOS)
    print(f"{name:<16}{loops:>6}{names}{ratios}")


def bench_snippets(
    runners: dict[str, Runner], floors: dict[str, Runner], snippets: dict[str, tuple[bool, str]], repeat: int
) -> None:
    print(f"\n== tiny blocks end to end ({repeat * 20} repetitions) and agent-style snippets ({repeat})")
    print_header()
    tiny, _ = time_runners({**runners, **floors}, TINY, repeat * 20)
    print_row("tiny", "-", tiny)
    step, _ = time_runners({**runners, **floors}, TINY_FINAL, repeat * 20)
    print_row("tiny_final", "-", step)
    print_floor({"tiny": tiny, "tiny_final": step})
    rows, refused_by = [], {}
    for name, (loop_heavy, raw) in snippets.items():
        times, refused = time_runners(runners, textwrap.dedent(raw).strip(), repeat)
        print_row(name, "yes" if loop_heavy else "no", times)
        rows.append((loop_heavy, times))
        refused_by.update({f"{name} ({runner})": why for runner, why in refused.items()})
    for where, why in refused_by.items():
        print(f"  n/a {where}: {why}")
    print_snippet_targets(tiny, step, rows)


def bench_after_idle(runners: dict[str, Runner], repeat: int) -> None:
    """The tiny block after each runner sat idle for `IDLE_SECONDS`, as an agent's every step comes
    after the model's answer: what the sections above time back to back, warm, is what a scripted
    model's run or a loop of blocks pays; this is what a step pays. Idle, a process's memory goes
    cold in the CPU's caches, and a worker's CPU may sleep, so this measures the machine as much as
    the runners: the more of its memory a block touches, the more it pays."""
    samples: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(repeat):
        for name, run in runners.items():
            time.sleep(IDLE_SECONDS)
            started = time.perf_counter()
            run(TINY)
            samples[name].append(time.perf_counter() - started)
    times = {name: statistics.median(values) for name, values in samples.items()}
    print(f"\n== the tiny block after {IDLE_SECONDS:g} s idle, as an agent's step ({repeat} repetitions)")
    print_header()
    print_row("tiny, idle", "-", times)
    line = ", ".join(
        f"{top} / {bottom} {value:.2f}x"
        for top, bottom in (("process", "monty"), ("in_process", "monty"), ("process", "cpython"))
        if (value := ratio(times, top, bottom)) is not None
    )
    print(f"after idle: {line}")


def print_floor(rows: dict[str, dict[str, float]]) -> None:
    """What a tiny block costs in a worker beyond the floors (see `worker_floors`): a bare round trip
    between two processes, and a worker in Python that does the least it can."""
    for name, times in rows.items():
        floor, bare, process, inside = times["pipe"], times["bare_worker"], times["process"], times["in_process"]
        line = (
            f"{name}: floor (its text to a bare child process and back) {floor * 1e3:.3f} ms; a bare Python worker "
            f"{bare * 1e3:.3f} ms; process {process * 1e3:.3f} ms = {process / floor:.0f}x the floor and "
            f"{process / bare:.1f}x the bare worker; in_process {inside * 1e3:.3f} ms, so the worker's round trip "
            f"adds {(process - inside) * 1e3:.3f} ms"
        )
        if "monty" in times:
            monty = times["monty"]
            line += (
                f"; Monty {monty * 1e3:.3f} ms ({monty / floor:.0f}x the floor, the bare worker {bare / monty:.2f}x it)"
            )
            # the floor and the interpreter's own block are paid in any worker: what 1.5x Monty leaves the wire
            left = 1.5 * monty - floor - inside
            line += (
                f"; 1.5x Monty leaves the protocol of both sides {left * 1e3:.3f} ms beyond the floor and in_process"
            )
        print(line)


def print_snippet_targets(
    tiny: dict[str, float], step: dict[str, float], rows: list[tuple[bool, dict[str, float]]]
) -> None:
    versus_monty = [r for _, times in rows if (r := ratio(times, "process", "monty")) is not None]
    versus_cpython = [r for _, times in rows if (r := ratio(times, "process", "cpython")) is not None]
    step_ratio, tiny_ratio = ratio(step, "process", "monty"), ratio(tiny, "process", "monty")
    bare_ratio = ratio(tiny, "bare_worker", "monty")
    if step_ratio is not None and tiny_ratio is not None and bare_ratio is not None:
        print(
            f"agent's tiny step process / Monty: {step_ratio:.2f}x (target: within 1.5x) {verdict(step_ratio, 1.5)}; "
            f"x = 1 alone: {tiny_ratio:.2f}x (no target: the bare Python worker's is {bare_ratio:.2f}x)"
        )
    if versus_monty:
        middle, worst = statistics.median(versus_monty), max(versus_monty)
        print(
            f"snippets process / Monty over {len(versus_monty)} Monty runs: median {middle:.2f}x "
            f"(target: at most 1.0x) {verdict(middle, 1.0)}, worst {worst:.2f}x (target: none over 1.5x) "
            f"{verdict(worst, 1.5)}"
        )
    if versus_cpython:
        middle = statistics.median(versus_cpython)
        print(f"snippets process / CPython: median {middle:.2f}x (target: within 3x) {verdict(middle, 3.0)}")
    speedups = [r for loops, times in rows if loops and (r := ratio(times, "smolagents", "process")) is not None]
    if speedups:
        print(
            f"smolagents / process on loop-heavy snippets: median {statistics.median(speedups):.0f}x, "
            f"min {min(speedups):.1f}x (target: at least 30x) {verdict(min(speedups), 30, at_least=True)}"
        )


def time_startups(starts: dict[str, Callable[[contextlib.ExitStack], object]], repeat: int) -> dict[str, float]:
    """Median seconds from nothing to each start's first result; what it leaves on the stack
    (closing the executor) is undone after the clock stops. One warm-up round first."""
    samples: dict[str, list[float]] = {name: [] for name in starts}
    for round_ in range(repeat + 1):
        for name, start in starts.items():
            with contextlib.ExitStack() as stack:
                started = time.perf_counter()
                start(stack)
                if round_:
                    samples[name].append(time.perf_counter() - started)
    return {name: statistics.median(times) for name, times in samples.items()}


def local_start(isolation: str) -> Callable[[contextlib.ExitStack], object]:
    def start(stack: contextlib.ExitStack) -> object:
        executor = stack.enter_context(contextlib.closing(LocalExecutor(isolation=isolation)))
        return executor.run("1")

    return start


def monty_start(stack: contextlib.ExitStack) -> object:
    from pydantic_monty import Monty

    return stack.enter_context(stack.enter_context(Monty()).checkout()).feed_run("1")


def bench_startup(repeat: int) -> None:
    """Construction to first result on a fresh executor, against starting a bare interpreter."""
    starts: dict[str, Callable[[contextlib.ExitStack], object]] = {
        "python -c pass": lambda _: subprocess.run([sys.executable, "-c", "pass"], check=True),
        "process": local_start("process"),
        "in_process": local_start("in_process"),
    }
    with contextlib.suppress(ImportError):
        import pydantic_monty  # noqa: F401

        starts["monty pool+session"] = monty_start
    times = time_startups(starts, repeat)
    share = times["process"] / times["python -c pass"]
    print(f"\n== construction to first result: LocalExecutor() then .run('1'), closed after ({repeat} repetitions)")
    print("".join(f"{name + ' ms':>22}" for name in times) + f"{'process/python':>16}")
    print("".join(f"{t * 1e3:>22.1f}" for t in times.values()) + f"{share:>15.2f}x")
    # a ratio to the interpreter's own start says little where that start is fast: give both in ms
    print(
        f"startup: a worker's first result in {times['process'] * 1e3:.0f} ms, "
        f"{share:.2f}x this machine's `python -c pass` ({times['python -c pass'] * 1e3:.0f} ms)"
    )


def make_frame() -> Any:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "id": np.arange(FRAME_ROWS, dtype=np.int64),
            "price": rng.random(FRAME_ROWS),
            "change": rng.standard_normal(FRAME_ROWS),
            "ticker": pd.array([f"T{i % 5000:04d}" for i in range(FRAME_ROWS)], dtype="str"),
        }
    )


def bench_dataframe(repeat: int) -> None:
    """A big DataFrame handed to the code as a variable, against pickling it there and back."""
    try:
        frame = make_frame()
    except ImportError:
        print("\n== DataFrame: numpy/pandas not installed (pip install 'codeward[bench]')")
        return
    executors = {iso: LocalExecutor(isolation=iso, **LIMITS) for iso in ("process", "in_process")}

    def send(executor: LocalExecutor) -> Runner:
        def run(code: str) -> object:
            executor.send_variables({"df": frame})
            return executor.run(code)

        return run

    runners: dict[str, Runner] = {"pickle": lambda _: pickle.loads(pickle.dumps(frame))}
    runners.update({iso: send(executor) for iso, executor in executors.items()})
    times, _ = time_runners(runners, "len(df)", repeat)
    for executor in executors.values():
        executor.close()
    megabytes = frame.memory_usage(deep=True).sum() / 1e6
    print(f"\n== {FRAME_ROWS:,}-row DataFrame (int64, 2 float64, str; {megabytes:.0f} MB): send_variables + len(df)")
    print("".join(f"{name + ' ms':>16}" for name in times) + f"{'process/pickle':>16}{'in_proc/pickle':>16}")
    share, inside = times["process"] / times["pickle"], times["in_process"] / times["pickle"]
    print("".join(f"{t * 1e3:>16.1f}" for t in times.values()) + f"{share:>15.2f}x{inside:>15.3f}x")
    print(f"DataFrame process / pickle round trip: {share:.2f}x (target: under 3x) {verdict(share, 3.0)}")


def print_compile_times(repeat: int) -> None:
    """What compiling under the policy costs, beside CPython's `compile` of the same source."""
    print(f"\n== compiling under the policy ({repeat * 10} repetitions)")
    print(f"{'snippet':<16} {'compile ms':>11} {'policy ms':>10} {'policy/compile':>14}")
    runners: dict[str, Runner] = {
        "compile": lambda source: compile(source, "<snippet>", "exec"),
        "policy": lambda source: compile_block(source, "<snippet>"),
    }
    for name, (_, raw) in SNIPPETS.items():
        times, _ = time_runners(runners, textwrap.dedent(raw).strip(), repeat * 10)
        base, ours = times["compile"], times["policy"]
        print(f"{name:<16} {base * 1e3:>11.3f} {ours * 1e3:>10.3f} {ours / base:>13.1f}x")


def print_versions(process: LocalExecutor) -> None:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for package in ("pydantic-monty", "smolagents", "pandas"):
        try:
            found.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            found.append(f"{package}: not installed (pip install 'codeward[bench]')")
    layers = ", ".join(process.missing_layers) or "none"
    print(f"Python {sys.version.split()[0]}; {'; '.join(found)}; worker confinement layers missing: {layers}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="repetitions per measurement (default 15)")
    parser.add_argument(
        "--snippets", type=Path, action="append", default=[], metavar="FILE", help="time the snippets of FILE too"
    )
    parser.add_argument(
        "--only-snippets", action="store_true", help="time only the tiny blocks and the --snippets files' snippets"
    )
    args = parser.parse_args()
    snippets = {} if args.only_snippets else dict(SNIPPETS)
    for path in args.snippets:
        for name, snippet in load_snippets(path).items():
            if name in snippets:
                raise SystemExit(f"{path}: the snippet name {name!r} is taken; rename it")
            snippets[name] = snippet
    with contextlib.ExitStack() as stack:
        process = LocalExecutor(DATA_IMPORTS, **LIMITS)
        stack.callback(process.close)
        in_process = LocalExecutor(DATA_IMPORTS, isolation="in_process", **LIMITS)
        stack.callback(in_process.close)
        for executor in (process, in_process):
            executor.send_tools({"final_answer": FinalAnswerTool()})
        runners: dict[str, Runner] = {"cpython": cpython_runner(), "process": process.run, "in_process": in_process.run}
        optional = {"monty": monty_runner(stack), "smolagents": smolagents_runner()}
        runners.update({name: run for name, run in optional.items() if run is not None})
        process.run("1")
        print_versions(process)
        floors = {"pipe": pipe_runner(stack), "bare_worker": bare_worker_runner(stack)}
        bench_snippets(runners, floors, snippets, args.repeat)
        bench_after_idle(runners, max(1, args.repeat // 2))  # each repetition idles every runner first
    if args.only_snippets:
        return
    bench_startup(args.repeat)
    bench_dataframe(args.repeat)
    print_compile_times(args.repeat)


if __name__ == "__main__":
    main()
