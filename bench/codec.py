"""How fast the value codec carries typical values, against baselines measured in the same run.

Baselines: `pickle` (what the codec replaces for untrusted output: the codec is typed JSON
and walks values in Python, so it is slower by design), and a floor for what any codec must
do: `json` for plain JSON data (the codec adds its type walk on top), and the base64 copy that
any text transport needs for arrays (`base64(arr.tobytes())`). Columns: median milliseconds,
the codec's time as a multiple of each baseline, and the codec's payload size over pickle's.

Run: python bench/codec.py [--repeat N]
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import json
import pickle
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import numpy as np
import pandas as pd

from codeward.executors.codec import dumps, loads


def interleaved_medians(fns: list[Callable[[], Any]], repeat: int) -> list[float]:
    """Median seconds of each function, timed in turn in every round so that load on a shared
    machine weighs on all of them alike."""
    for fn in fns:
        fn()  # warm up
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, spent in zip(fns, times, strict=False):
            start = time.perf_counter()
            fn()
            spent.append(time.perf_counter() - start)
    return [statistics.median(spent) for spent in times]


def cases() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    records = [
        {"id": i, "name": f"user{i}", "score": i * 0.5, "tags": ["a", "b"], "active": i % 2 == 0} for i in range(10_000)
    ]
    return {
        "JSON records (10k dicts)": records,
        "ints (100k)": list(range(100_000)),
        "mixed types (10k tuples)": [(i, dt.date(2020, 1, 1 + i % 28), {i, -i}, b"x") for i in range(10_000)],
        "float64 array (1M)": rng.standard_normal(1_000_000),
        "DataFrame (100k x 5)": pd.DataFrame(
            {
                "i": np.arange(100_000),
                "f": rng.standard_normal(100_000),
                "s": pd.array([f"s{i % 100}" for i in range(100_000)], dtype="str"),
                "c": pd.Categorical(rng.choice(["x", "y", "z"], 100_000)),
                "t": pd.date_range("2020", periods=100_000, freq="s", tz="UTC"),
            }
        ),
        # The frame bench/local_executor.py sends to its worker: int64 ids, float64s, and a
        # pandas "str" column of 5000 tickers (sent as codes into them).
        "DataFrame (1M x 4, tickers)": pd.DataFrame(
            {
                "id": np.arange(1_000_000, dtype=np.int64),
                "price": rng.random(1_000_000),
                "change": rng.standard_normal(1_000_000),
                "ticker": pd.array([f"T{i % 5000:04d}" for i in range(1_000_000)], dtype="str"),
            }
        ),
        # Strings that do not repeat: sent as one UTF-8 buffer and each item's length.
        "str Series (1M distinct)": pd.Series([f"user-{i}@example.com" for i in range(1_000_000)], dtype="str"),
        "object Series (100k str)": pd.Series([f"k{i % 100}" for i in range(100_000)], dtype=object),
    }


def baseline(value: Any) -> tuple[str, Callable[[], Any], Callable[[], Any]] | None:
    if isinstance(value, np.ndarray):
        text = base64.b64encode(value.tobytes()).decode()
        return (
            "base64 copy",
            lambda: base64.b64encode(value.tobytes()).decode(),
            lambda: np.frombuffer(base64.b64decode(text), value.dtype),
        )
    if isinstance(value, list) and isinstance(value[0], (dict, int)):
        text = json.dumps(value)
        return "json", lambda: json.dumps(value), lambda: json.loads(text)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(
        f"{'case':28} {'op':6} {'codec ms':>9} {'pickle ms':>9} {'x pickle':>8} {'floor':>12} {'floor ms':>9} "
        f"{'x floor':>8} {'size x pickle':>13}"
    )
    for name, value in cases().items():
        text, blob = dumps(value), pickle.dumps(value, protocol=5)
        floor = baseline(value)
        ops = {
            "dumps": (
                lambda v=value: dumps(v),
                lambda v=value: pickle.dumps(v, protocol=5),
                floor[1] if floor else None,
            ),
            "loads": (lambda t=text: loads(t), lambda b=blob: pickle.loads(b), floor[2] if floor else None),
        }
        for op, (ours, theirs, floor_fn) in ops.items():
            t_ours, t_pickle, *rest = interleaved_medians(
                [ours, theirs, *([floor_fn] if floor_fn else [])], args.repeat
            )
            t_floor = rest[0] if rest else None
            floor_cols = (
                f"{floor[0]:>12} {t_floor * 1e3:9.2f} {t_ours / t_floor:8.2f}"
                if floor and t_floor
                else f"{'-':>12} {'-':>9} {'-':>8}"
            )
            print(
                f"{name:28} {op:6} {t_ours * 1e3:9.2f} {t_pickle * 1e3:9.2f} {t_ours / t_pickle:8.2f} {floor_cols} "
                f"{len(text) / len(blob):13.2f}"
            )


if __name__ == "__main__":
    main()
