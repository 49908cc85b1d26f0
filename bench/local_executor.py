"""Agent-style snippets timed under plain CPython `exec`, codeward's LocalExecutor and,
when installed, smolagents' LocalPythonExecutor, all in one run.

Run: python bench/local_executor.py [--repeat N]
Prints the median time of each snippet under each runner and the ratios
LocalExecutor / CPython and smolagents / LocalExecutor, then the share of the
local time spent compiling under the policy, against CPython's own `compile`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from codeward.executors import LocalExecutor
from codeward.executors.local.policy import compile_block

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


def time_runners(runners: list[Callable[[str], object]], code: str, repeat: int) -> list[float]:
    """Median seconds of each runner on `code`, the runners interleaved within every
    repetition so that load from other processes falls on all of them alike."""
    for run in runners:
        run(code)  # warm-up: imports, caches
    samples: list[list[float]] = [[] for _ in runners]
    for _ in range(repeat):
        for run, times in zip(runners, samples, strict=False):
            started = time.perf_counter()
            run(code)
            times.append(time.perf_counter() - started)
    return [statistics.median(times) for times in samples]


def cpython_runner() -> Callable[[str], object]:
    def run(code: str) -> object:
        namespace: dict[str, object] = {}
        exec(compile(code, "<snippet>", "exec"), namespace)
        return namespace

    return run


def smolagents_runner() -> Callable[[str], object] | None:
    try:
        from smolagents.local_python_executor import LocalPythonExecutor
    except ImportError:
        return None
    executor = LocalPythonExecutor(additional_authorized_imports=["json", "re", "statistics"])
    executor.send_tools({})
    return executor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    cpython = cpython_runner()
    local = LocalExecutor(timeout_seconds=120, max_operations=10**9)
    smol = smolagents_runner()
    if smol is None:
        print("smolagents: not installed (pip install smolagents to compare)")
    header = f"{'snippet':<16} {'loops':>5} {'CPython ms':>11} {'local ms':>9} {'local/CPy':>9}"
    header += f" {'smolagents ms':>14} {'smol/local':>10}" if smol else ""
    print(header)
    local_ratios, loop_speedups = [], []
    for name, (loop_heavy, raw) in SNIPPETS.items():
        code = textwrap.dedent(raw).strip()
        base, ours = time_runners([cpython, local.run], code, args.repeat)
        local_ratios.append(ours / base)
        line = (
            f"{name:<16} {'yes' if loop_heavy else 'no':>5} {base * 1e3:>11.2f} {ours * 1e3:>9.2f} {ours / base:>8.2f}x"
        )
        if smol:
            theirs, ours_again = time_runners([smol, local.run], code, args.repeat)
            line += f" {theirs * 1e3:>14.1f} {theirs / ours_again:>9.1f}x"
            if loop_heavy:
                loop_speedups.append(theirs / ours_again)
        print(line)
    print(f"median LocalExecutor / CPython: {statistics.median(local_ratios):.2f}x (target: within 3x)")
    if loop_speedups:
        print(
            f"smolagents / LocalExecutor on loop-heavy snippets: median {statistics.median(loop_speedups):.0f}x, "
            f"min {min(loop_speedups):.0f}x (target: at least 30x)"
        )
    local.close()
    print_compile_times(args.repeat)


def print_compile_times(repeat: int) -> None:
    """What compiling under the policy costs, beside CPython's `compile` of the same source."""
    print(f"{'snippet':<16} {'compile ms':>11} {'policy ms':>10} {'policy/compile':>14}")
    for name, (_, raw) in SNIPPETS.items():
        code = textwrap.dedent(raw).strip()
        runners = [
            lambda source: compile(source, "<snippet>", "exec"),
            lambda source: compile_block(source, "<snippet>"),
        ]
        base, ours = time_runners(runners, code, repeat * 10)
        print(f"{name:<16} {base * 1e3:>11.3f} {ours * 1e3:>10.3f} {ours / base:>13.1f}x")


if __name__ == "__main__":
    main()
