"""What `ex.files`, live output (`run(code, on_output=...)`) and `interrupt()` cost, per executor.

Measures, in one run, on each executor asked for (local, jupyter, docker, and e2b against the local
server that speaks E2B's protocol, `tests/e2b_server`), each against a baseline timed in the same run:

- `ex.files.write` and `ex.files.read` of `--sizes` MiB (random bytes), in MB/s (10^6 bytes),
  against the same bytes written and read as a plain file on the host (`Path.write_bytes` and
  `read_bytes` in a temporary folder, no fsync). For docker also against the Docker SDK's own
  `container.put_archive` / `get_archive` (the `docker cp` path) of the same file into and out of
  the same container. The engine refuses that path into the sandbox's working folder (the root is
  read-only and the folder is a tmpfs the engine cannot see), so the docker sandbox also gets a
  writable host folder mounted at /bench, and both ex.files and the archive API move the file to
  and from there; ex.files into the working folder is printed too.
- `ex.files.list` of a folder of `--files` files, and `ex.files.exists` of one of them: ms per
  call, against a trivial cell, `ex.run("1")`, on the same executor (what a block costs), calls
  interleaved.
- live output: the time from `ex.run` being called to the first `on_output` call, for
  ``print('a', flush=True); time.sleep(1)``; and a block printing `--lines` lines, run with a
  callback (that counts its calls) and without, interleaved: the ratio is what delivery costs.
- `interrupt()`: the time from `interrupt()` (called from another thread, 0.1 s after the
  block's first output, so the block is in its sleep) to `run` raising `ExecutionError`
  ("KeyboardInterrupt"), for a block that sleeps 30 s.

Prints medians (the machine is shared and its load varies: read the ratios) with their ratios
side by side. The file budget is raised for the run (`FileBudget(per_sandbox=...)`), since the
repeats move more than the default 1 GiB a sandbox; the per-call budget (32 MiB) is kept.

    python bench/files_and_output.py [--executors local,jupyter,docker,e2b] [--sizes 1,16]
        [--repeats 5] [--calls 50] [--files 1000] [--lines 10000] [--interrupts 5] [--runtime runsc]

The defaults take about a minute here (a two-core machine); an executor whose engine or SDK is missing is skipped
with a line saying why.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import statistics
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from codeward.executors import ExecutionError, Executor
from codeward.executors.files import FileBudget

MB = 1e6
#: One line of the files table: label, size, MB/s measured, MB/s of the baseline, the baseline's name.
Row = tuple[str, int, float, float, str]
SLEEP_ONCE = "import time\nprint('a', flush=True)\ntime.sleep(1)"
SLEEPER = "import time\nprint('sleeping', flush=True)\ntime.sleep(30)"
# Makes `count` small files in `folder` from inside a kernel sandbox (the local executor's policy
# has no `os`: its folder is on the host, filled from here).
MAKE_FILES = """
import os
os.makedirs({folder!r}, exist_ok=True)
for _i in range({count}):
    with open(os.path.join({folder!r}, f"f{{_i:05d}}.txt"), "w") as _f:
        _f.write("x")
"""


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def throughput(size: int, samples: list[float]) -> float:
    return size / MB / statistics.median(samples)


# -- the executors ---------------------------------------------------------------------------


@contextmanager
def opened(name: str, args: argparse.Namespace, bench_folder: str) -> Iterator[Executor]:
    """The executor `name`, closed (its container removed, its server stopped) on the way out."""
    with ExitStack() as stack:
        if name == "local":
            from codeward.executors import LocalExecutor

            executor: Executor = LocalExecutor(timeout_seconds=120)
        elif name == "jupyter":
            from codeward.executors import JupyterExecutor

            executor = JupyterExecutor(timeout_seconds=120)
        elif name == "docker":
            from codeward.executors import DockerExecutor, Mount

            executor = DockerExecutor(
                timeout_seconds=120,
                runtime=args.runtime,
                mem_limit="2g",  # a 16 MiB file crosses the kernel as text, a few copies at once
                mounts={"/bench": Mount(bench_folder, mode="rw")},
            )
        elif name == "e2b":
            from codeward.executors import E2BExecutor
            from tests.e2b_server import E2BServer

            server = stack.enter_context(E2BServer())
            executor = E2BExecutor(timeout_seconds=120, connection=server.connection)
        else:
            raise ValueError(f"unknown executor {name!r}")
        stack.enter_context(executor)
        executor.files.budget = FileBudget(per_sandbox=1 << 40)  # type: ignore[attr-defined]
        executor.run("1")  # warm up: a worker or kernel that starts lazily, the first imports
        yield executor


# -- 1. ex.files.write and read --------------------------------------------------------------


def archive_of(name: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def from_archive(chunks: Iterator[bytes]) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(b"".join(chunks)), mode="r") as tar:
        member = tar.next()
        assert member is not None
        extracted = tar.extractfile(member)
        assert extracted is not None
        return extracted.read()


def measure_files(name: str, executor: Executor, sizes: list[int], args: argparse.Namespace) -> list[Row]:
    """Rows (label, size, MB/s measured, MB/s of the baseline, baseline's name)."""
    rows = []
    host = Path(tempfile.mkdtemp(prefix="bench-files-host-"))
    container = executor.sandbox.container if name == "docker" else None  # type: ignore[attr-defined]
    try:
        for size in sizes:
            rows += measure_size(executor, container, host, size, args.repeats)
    finally:
        for path in host.iterdir():
            path.unlink()
        host.rmdir()
    return rows


def measure_size(executor: Executor, container: Any, host: Path, size: int, repeats: int) -> list[Row]:
    """`measure_files`' rows for one size; `container` is the docker sandbox's, or None."""
    data = os.urandom(size)
    tar = archive_of("blob.bin", data) if container is not None else b""
    samples: dict[str, list[float]] = {}

    def sample(key: str, action: Callable[[], object]) -> None:
        samples.setdefault(key, []).append(timed(action))

    for _ in range(repeats):  # interleaved, so each side sees the same load
        sample("host write", lambda: (host / "blob.bin").write_bytes(data))
        sample("host read", lambda: (host / "blob.bin").read_bytes())
        sample("files write", lambda: executor.files.write("blob.bin", data))
        sample("files read", lambda: executor.files.read("blob.bin"))
        if container is not None:
            sample("files write /bench", lambda: executor.files.write("/bench/files.bin", data))
            sample("files read /bench", lambda: executor.files.read("/bench/files.bin"))
            sample("archive write /bench", lambda: container.put_archive("/bench", tar))
            sample("archive read /bench", lambda: from_archive(container.get_archive("/bench/blob.bin")[0]))
    assert executor.files.read("blob.bin") == data
    if container is not None:
        assert executor.files.read("/bench/files.bin") == data
        assert from_archive(container.get_archive("/bench/blob.bin")[0]) == data
    mb = {key: throughput(size, times) for key, times in samples.items()}
    rows = []
    for op in ("write", "read"):
        rows.append((f"ex.files.{op}", size, mb[f"files {op}"], mb[f"host {op}"], "host file"))
        if container is not None:
            archive = "put_archive" if op == "write" else "get_archive"
            rows.append(
                (f"ex.files.{op} (/bench)", size, mb[f"files {op} /bench"], mb[f"archive {op} /bench"], archive)
            )
    executor.files.remove("blob.bin")
    if container is not None:
        executor.files.remove("/bench/files.bin")
    return rows


# -- 2. list and exists ----------------------------------------------------------------------


def measure_listing(name: str, executor: Executor, args: argparse.Namespace) -> dict[str, float]:
    folder = "many"
    if name == "local":
        target = Path(executor.files.folder) / folder  # type: ignore[attr-defined]
        target.mkdir()
        for index in range(args.files):
            (target / f"f{index:05d}.txt").write_text("x")
    else:
        executor.run(MAKE_FILES.format(folder=folder, count=args.files))
    names = executor.files.list(folder)
    assert len(names) == args.files, len(names)
    one = f"{folder}/f{args.files // 2:05d}.txt"
    listed, existed, cells = [], [], []
    for _ in range(args.calls):
        listed.append(timed(lambda: executor.files.list(folder)))
        existed.append(timed(lambda: executor.files.exists(one)))
        cells.append(timed(lambda: executor.run("1")))
    return {"list": median_ms(listed), "exists": median_ms(existed), "cell": median_ms(cells)}


# -- 3. live output --------------------------------------------------------------------------


def measure_live(executor: Executor, args: argparse.Namespace) -> dict[str, float]:
    firsts = [first_output(executor) for _ in range(args.interrupts)]
    printer = f"for line in range({args.lines}):\n    print(line)"
    calls = [0]

    def count(stream: str, text: str) -> None:
        calls[0] += 1

    executor.run(printer)  # warm up
    with_callback, without = [], []
    for _ in range(args.repeats):
        without.append(timed(lambda: executor.run(printer)))
        calls[0] = 0
        with_callback.append(timed(lambda: executor.run(printer, on_output=count)))
    return {
        "first": median_ms(firsts),
        "with": median_ms(with_callback),
        "without": median_ms(without),
        "calls": calls[0],
    }


def first_output(executor: Executor) -> float:
    """Seconds from `run` being called to the first `on_output` call."""
    arrivals: list[float] = []
    started = time.perf_counter()
    executor.run(SLEEP_ONCE, on_output=lambda stream, text: arrivals.append(time.perf_counter()))
    assert arrivals, "no output was delivered"
    return arrivals[0] - started


# -- 4. interrupt ----------------------------------------------------------------------------


def measure_interrupt(executor: Executor, args: argparse.Namespace) -> float:
    return median_ms([interrupted(executor) for _ in range(args.interrupts)])


def interrupted(executor: Executor) -> float:
    """Seconds from `interrupt()`, sent 0.1 s after the sleeping block's first output, to `run` raising."""
    sleeping = threading.Event()
    sent: list[float] = []

    def stop() -> None:
        sleeping.wait(60)
        time.sleep(0.1)
        sent.append(time.perf_counter())
        executor.interrupt()

    stopper = threading.Thread(target=stop, daemon=True)
    stopper.start()
    try:
        executor.run(SLEEPER, on_output=lambda stream, text: sleeping.set())
    except ExecutionError as error:
        raised = time.perf_counter()
        assert error.error_type == "KeyboardInterrupt", error.error_type
    else:
        raise AssertionError("the sleeping block was not interrupted")
    stopper.join()
    executor.run("1")  # the executor stays usable
    return raised - sent[0]


# -- the report ------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--executors", default="local,jupyter,docker,e2b", help="comma-separated")
    parser.add_argument("--sizes", default="1,16", help="file sizes in MiB, comma-separated (at most 32)")
    parser.add_argument("--repeats", type=int, default=5, help="writes and reads per size; printing blocks per side")
    parser.add_argument("--calls", type=int, default=50, help="list, exists and trivial cells, each")
    parser.add_argument("--files", type=int, default=1000, help="files in the listed folder")
    parser.add_argument("--lines", type=int, default=10_000, help="lines the printing block prints")
    parser.add_argument("--interrupts", type=int, default=5, help="interrupts, and first-output measures")
    parser.add_argument("--runtime", help="the docker container runtime, such as runsc (default: Docker's)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    sizes = [int(size) << 20 for size in args.sizes.split(",")]
    began = time.perf_counter()

    results: dict[str, dict[str, Any]] = {}
    bench_folder = tempfile.mkdtemp(prefix="bench-files-mount-")
    os.chmod(bench_folder, 0o777)  # the sandbox's user writes there
    try:
        for name in args.executors.split(","):
            try:
                with opened(name, args, bench_folder) as executor:
                    results[name] = {
                        "files": measure_files(name, executor, sizes, args),
                        "listing": measure_listing(name, executor, args),
                        "live": measure_live(executor, args),
                        "interrupt": measure_interrupt(executor, args),
                    }
            except (ImportError, OSError) as error:
                print(f"{name}: skipped ({type(error).__name__}: {error})")
            except Exception as error:
                if type(error).__name__ in ("SandboxImageError", "DockerException", "RuntimeUnusable"):
                    print(f"{name}: skipped ({type(error).__name__}: {error})")
                    continue
                raise
    finally:
        for path in Path(bench_folder).iterdir():
            path.unlink()
        os.rmdir(bench_folder)

    print(
        f"medians of repeats on a shared machine (read the ratios); {args.repeats} writes/reads per size, "
        f"{args.calls} list/exists/cells, {args.interrupts} interrupts; runtime {args.runtime or 'runc'} for docker"
    )
    print("\n1. ex.files write/read, MB/s (10^6 bytes), against a baseline in the same run")
    print(f"  {'executor':<9}{'operation':<24}{'MiB':>5}{'ex.files':>11}{'baseline':>11}  {'(which)':<13}{'ratio':>7}")
    for name, result in results.items():
        for label, size, ours, base, which in result["files"]:
            print(f"  {name:<9}{label:<24}{size >> 20:>5}{ours:>11.1f}{base:>11.1f}  {which:<13}{ours / base:>6.2f}x")

    print(f"\n2. ex.files.list ({args.files} files) and exists, ms per call, against ex.run('1')")
    print(f"  {'executor':<9}{'run(1)':>9}{'list':>9}{'exists':>9}{'list/run':>10}{'exists/run':>11}")
    for name, result in results.items():
        row = result["listing"]
        print(
            f"  {name:<9}{row['cell']:>9.2f}{row['list']:>9.2f}{row['exists']:>9.2f}"
            f"{row['list'] / row['cell']:>9.2f}x{row['exists'] / row['cell']:>10.2f}x"
        )

    print(f"\n3. live output: ms to the first on_output; a block printing {args.lines:,} lines, ms")
    print(
        f"  {'executor':<9}{'first':>9}{'no callback':>13}{'callback':>10}{'ratio':>8}{'calls':>7}  interrupt -> raise ms"
    )
    for name, result in results.items():
        live = result["live"]
        print(
            f"  {name:<9}{live['first']:>9.1f}{live['without']:>13.1f}{live['with']:>10.1f}"
            f"{live['with'] / live['without']:>7.2f}x{live['calls']:>7}  {result['interrupt']:>10.1f}"
        )
    print(f"\ntotal {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
