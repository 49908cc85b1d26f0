"""Top-level because the command, the batch and the platform's replay all read these files.

Variables read from files: ``--var NAME=@FILE`` and a batch job's ``"@file"`` values.

The file's suffix says how to read it: ``.json`` (any JSON value), ``.csv`` and
``.parquet`` (a pandas DataFrame), ``.npy`` (a NumPy array, never unpickled).
"""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from codeward.executors.settings import taken_name
from codeward.json_values import read_json
from codeward.redaction import mark_secrets_in
from codeward.usage import UsageError

__all__ = ["READERS", "ValueFileError", "check_value_file", "load_value_file", "mark_private_file", "parse_var_option"]


class ValueFileError(UsageError):
    """A variable file that cannot be read; the message names the file and the fix."""


def _json(path: Path) -> Any:
    try:
        return read_json(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueFileError(f"{path} is not valid JSON: {error}") from None


def _csv(path: Path) -> Any:
    import pandas

    return pandas.read_csv(path)


def _parquet(path: Path) -> Any:
    import pandas

    try:
        return pandas.read_parquet(path)
    except ImportError as error:
        raise ValueFileError(f"reading {path} needs a parquet engine: pip install pyarrow ({error})") from None


def _npy(path: Path) -> Any:
    import numpy

    try:
        return numpy.load(path, allow_pickle=False)
    except ValueError as error:
        raise ValueFileError(f"{path} holds Python objects, which codeward does not unpickle: {error}") from None


#: Suffix -> reader. One table, so the error for an unknown suffix lists what works.
READERS: dict[str, Callable[[Path], Any]] = {".json": _json, ".csv": _csv, ".parquet": _parquet, ".npy": _npy}


def check_value_file(path: Path) -> Path:
    """Refuse a missing file or an unknown suffix before anything runs."""
    if path.suffix.lower() not in READERS:
        raise ValueFileError(
            f"{path}: cannot read {path.suffix or 'a file without suffix'}; use one of {', '.join(READERS)}"
        )
    if not path.is_file():
        raise ValueFileError(f"{path}: no such file")
    return path


def load_value_file(path: Path) -> Any:
    """The file's value; one that only its owner may read holds a secret, never written out."""
    check_value_file(path)
    value = READERS[path.suffix.lower()](path)
    if _private(path):
        mark_secrets_in(value)
    return value


def mark_private_file(path: Path) -> None:
    """Mark a private file's value as secret before another process loads it (a batch job's worker),
    so that what this process writes of the job (results, audit) never holds it. A file that
    cannot be read is left to the loader, which says why."""
    if _private(path):
        try:
            load_value_file(path)
        except (ValueError, OSError):
            pass


def _private(path: Path) -> bool:
    return not path.stat().st_mode & stat.S_IROTH


def parse_var_option(option: str, base_dir: Path | None = None) -> tuple[str, Path]:
    """Split ``NAME=@FILE`` into the name and the file's path."""
    name, sep, ref = option.partition("=")
    if not sep or not ref.startswith("@") or len(ref) < 2:
        raise ValueFileError(f"--var {option!r}: write NAME=@FILE, e.g. --var sales=@sales.csv")
    if (reason := taken_name(name)) is not None:
        raise ValueFileError(f"--var {option!r}: the name {name!r} {reason}; choose another")
    path = Path(ref[1:]).expanduser()
    if base_dir is not None and not path.is_absolute():
        path = base_dir / path
    return name, check_value_file(path)
