"""Granting numpy or pandas grants data work, not the machine.

Their routes to the file system (``np.load``, ``pd.read_csv``, ``df.to_csv``),
to pickle (``pd.read_pickle``, ``np.load(allow_pickle=True)``), to code
evaluation (``pd.eval``, ``df.query``) and to templating (``df.style``) are
refused. With `allowed_paths`, the file routes work for paths inside those
folders only; pickle and evaluation stay refused whatever the paths.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from codeward.executors.local.imports import SandboxViolation

__all__ = ["DataPolicy"]

_LIBRARIES = ("numpy", "pandas")

# Modules of these libraries that unpickle, reach the OS or run code.
_REFUSED_MODULES = (
    "numpy.ctypeslib",
    "numpy.f2py",
    "numpy.distutils",
    "numpy.lib.format",
    "numpy.testing",
    "pandas.compat",
    "pandas.io.pickle",
    "pandas.io.clipboards",
    "pandas.io.clipboard",
    "pandas.io.pytables",
    "pandas.io.sql",
    "pandas.io.formats.style",
    "pandas.core.computation",
)

# Module-level functions: refused always, or allowed on paths inside allowed_paths.
_ALWAYS_REFUSED = frozenset(
    {
        "read_pickle",
        "to_pickle",
        "eval",
        "read_clipboard",
        "read_sql",
        "read_sql_query",
        "read_sql_table",
        "read_gbq",
        "read_hdf",
        "HDFStore",
        "DataSource",
        "memmap",
        "ExcelWriter",
        "ExcelFile",
        "read_html",
        "read_xml",
        "set_eng_float_format",
    }
)
_FILE_FUNCTIONS = frozenset(
    {
        "load",
        "save",
        "savez",
        "savez_compressed",
        "fromfile",
        "loadtxt",
        "savetxt",
        "genfromtxt",
        "fromregex",
        "read_csv",
        "read_table",
        "read_fwf",
        "read_json",
        "read_excel",
        "read_parquet",
        "read_feather",
        "read_orc",
        "read_sas",
        "read_spss",
        "read_stata",
    }
)

# Methods of arrays, frames and series.
_ALWAYS_REFUSED_METHODS = frozenset(
    {
        "to_pickle",
        "to_clipboard",
        "to_sql",
        "to_hdf",
        "query",
        "eval",
        "style",
        "dump",
        "dumps",
    }
)
_FILE_METHODS = frozenset(
    {
        "to_csv",
        "to_json",
        "to_html",
        "to_latex",
        "to_markdown",
        "to_string",
        "to_excel",
        "to_parquet",
        "to_feather",
        "to_stata",
        "to_xml",
        "to_orc",
        "tofile",
    }
)
_PATH_KEYWORDS = (
    "file",
    "fname",
    "filename",
    "filepath_or_buffer",
    "path",
    "path_or_buf",
    "path_or_buffer",
    "buf",
    "io",
    "excel_writer",
    "fid",
)


class DataPolicy:
    """The numpy/pandas rules of one executor, with its `allowed_paths`."""

    attribute_names = _ALWAYS_REFUSED_METHODS | _FILE_METHODS

    def __init__(self, allowed_paths: Sequence[str | Path] | None) -> None:
        if isinstance(allowed_paths, (str, Path)):
            raise TypeError("allowed_paths is a list of folders, e.g. ['./workspace']")
        self.roots = [Path(os.path.realpath(Path(p).expanduser())) for p in allowed_paths or ()]

    # Module attributes ----------------------------------------------------
    def vet_module_attribute(self, module_name: str, attribute: str, value: Any) -> Any:
        if module_name.split(".")[0] not in _LIBRARIES:
            return value
        target = getattr(value, "__name__", "") if isinstance(value, type(os)) else ""
        if target and _refused_module(target):
            raise SandboxViolation(f"{target} is not available in the sandbox (file, pickle or code access)")
        if _refused_module(getattr(value, "__module__", None) or ""):
            raise SandboxViolation(f"{module_name}.{attribute} is not available in the sandbox")
        if attribute in _ALWAYS_REFUSED:
            raise SandboxViolation(
                f"{module_name}.{attribute} is not available in the sandbox: it reads pickles, "
                "reaches the network or the clipboard, or evaluates code"
            )
        if attribute in _FILE_FUNCTIONS and callable(value):
            return self.on_paths(f"{module_name}.{attribute}", value)
        return value

    # Methods of data objects ---------------------------------------------
    def vet_attribute(self, obj: Any, name: str, value: Any) -> Any:
        owner = type(obj).__module__ or ""
        if owner.split(".")[0] not in _LIBRARIES:
            return value
        if name in _ALWAYS_REFUSED_METHODS:
            raise SandboxViolation(
                f".{name} is not available in the sandbox: it pickles, evaluates code or renders templates"
            )
        if name in _FILE_METHODS and callable(value):
            return self.on_paths(f".{name}", value)
        return value

    # Paths ---------------------------------------------------------------
    def on_paths(self, label: str, function: Callable[..., Any]) -> Callable[..., Any]:
        """`function`, checking every path argument against `allowed_paths` first."""

        @functools.wraps(function)
        def checked(*args: Any, **kwargs: Any) -> Any:
            candidates = [args[0]] if args else []
            candidates += [kwargs[key] for key in _PATH_KEYWORDS if key in kwargs]
            for candidate in candidates:
                self.check_path(label, candidate)
            if kwargs.get("allow_pickle"):
                raise SandboxViolation(f"{label}(allow_pickle=True) is not available in the sandbox: pickles run code")
            if label.endswith(("load", "save")):
                kwargs["allow_pickle"] = False
            return function(*args, **kwargs)

        return checked

    def check_path(self, label: str, candidate: Any) -> None:
        if candidate is None:
            return
        if isinstance(candidate, bytes):
            candidate = os.fsdecode(candidate)
        if not isinstance(candidate, (str, os.PathLike)):
            if hasattr(candidate, "fileno"):
                raise SandboxViolation(f"{label}: real file objects are not available in the sandbox")
            return  # an object of the code's own (an in-memory buffer)
        text = os.fspath(candidate)
        if "://" in text:
            raise SandboxViolation(f"{label}: URLs are not allowed; the sandbox has no network")
        if not self.roots:
            raise SandboxViolation(
                f"{label}({text!r}): file access is not allowed. The user can name workspace "
                "folders with allowed_paths=[...]"
            )
        real = Path(os.path.realpath(Path(text).expanduser()))
        if not any(real == root or root in real.parents for root in self.roots):
            folders = ", ".join(str(root) for root in self.roots)
            raise SandboxViolation(f"{label}({text!r}): only paths inside {folders} are allowed")


def _refused_module(name: str) -> bool:
    return any(name == refused or name.startswith(refused + ".") for refused in _REFUSED_MODULES) or ("pickle" in name)
