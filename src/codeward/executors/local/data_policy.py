"""Granting numpy or pandas grants data work, not the machine.

Their routes to the file system (``np.load``, ``pd.read_csv``, ``df.to_csv``),
to pickle (``pd.read_pickle``, ``np.load(allow_pickle=True)``), to code
evaluation (``pd.eval``, ``df.query``) and to templating (``df.style``) are
refused. With `allowed_paths`, the file routes work for paths inside those
folders only; pickle and evaluation stay refused whatever the paths.

Beyond the names, three rules catch the routes no list names:

- *Where a function comes from.* Anything whose code lives in a module that
  reads or writes files (``pandas.io.*``, numpy's npyio, format and datasource
  modules, `pd.show_versions`) is refused wherever it is reached
  (``pd.io.common.get_handle``, ``pd.io.stata.StataWriter``,
  ``np.lib.npyio.NpzFile``), except the vetted entry points above. numpy and
  pandas rewrite ``__module__`` for their public API, so the origin is read
  from the code's globals.
- *Functions named by strings.* pandas looks a string given as a function up
  with ``getattr`` (``s.apply('to_csv', args=(path,))``, ``s.agg('_mgr')``,
  ``pivot_table(aggfunc=...)``). The methods that do (``apply``, ``agg``,
  ``aggregate``, ``transform``, ``pipe``, ``pivot_table``, ``crosstab``) check
  every name in their function argument, nested in lists, tuples and dicts,
  as the attribute guard would check it, and pass pandas a fresh copy of it.
- *Methods read from a class.* ``pd.DataFrame.to_csv(df, path)`` and
  ``super().to_csv(path)`` are vetted like ``df.to_csv``.

pandas' plotting backend, chosen by name (``plot(backend=...)``, the
``plotting.backend`` option), imports and calls any installed module: only
the default is allowed. Registering accessors and extension types would
change the host's pandas classes, and is refused.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FunctionType, MethodType
from typing import Any

from codeward.executors.files.beneath import path_text
from codeward.executors.local.forbidden import FORBIDDEN_ATTRIBUTES
from codeward.executors.local.imports import SandboxViolation
from codeward.executors.local.library_trust import vet_library_function

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
    "pandas.io.common",
    "pandas.core.computation",
    "pandas.util._print_versions",
)

# Modules whose code reads or writes files: what is defined there is refused
# wherever it is found, except the file functions below (checked on their paths)
# and _PURE_ENTRY_POINTS.
_FILE_ORIGINS = (
    "pandas.io",
    "pandas.util._print_versions",
    "numpy.lib._npyio_impl",
    "numpy.lib.npyio",
    "numpy.lib._datasource",
    "numpy.lib.format",
    "numpy.lib._format_impl",
    "numpy._core.memmap",
)
_PURE_ENTRY_POINTS = frozenset({"json_normalize"})

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
        "show_versions",
        "config_prefix",  # rebinds pandas' option functions for the whole process
        "dump",  # numpy.ma's pickle functions (numpy < 2)
        "dumps",
        "loads",
    }
)
#: Module functions whose names start so change pandas' classes for the whole host.
_REGISTERING = "register_"
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
# Methods and functions that take functions by name, and the parameters that hold them.
_DISPATCH_METHODS = frozenset({"apply", "agg", "aggregate", "transform", "pipe", "pivot_table"})
_DISPATCH_FUNCTIONS = frozenset({"pivot_table", "crosstab"})
_FUNCTION_PARAMETERS = ("func", "aggfunc", "arg")
_NAMED_AGGREGATION = frozenset({"agg", "aggregate"})
_MAX_NESTING = 8

# pandas' plotting backend is a module name, imported and called.
_PLOTTING = frozenset({"plot", "hist", "boxplot"})
_DEFAULT_BACKENDS = (None, "matplotlib")
_OPTION_SETTERS = frozenset({"set_option", "option_context"})
_REFUSED_OPTIONS = frozenset({"plotting.backend"})
_OPTION_WRAPPER = ("pandas._config.config", "DictWrapper")

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

    attribute_names = _ALWAYS_REFUSED_METHODS | _FILE_METHODS | _DISPATCH_METHODS | _PLOTTING

    def __init__(self, allowed_paths: Sequence[str | Path] | None) -> None:
        if isinstance(allowed_paths, (str, Path)):
            raise TypeError("allowed_paths is a list of folders, e.g. ['./workspace']")
        self.roots = [Path(os.path.realpath(Path(p).expanduser())) for p in allowed_paths or ()]
        #: type -> check run before the code sets an attribute or item on an object of it.
        self.write_checks: dict[type, Callable[[Any], None]] = {}
        #: `(obj, name, value) -> value` as the attribute guard gives it; set by the guards.
        self.attribute_guard: Callable[[Any, str, Any], Any] | None = None
        self._accessors: dict[type, type] = {}

    # Module attributes ----------------------------------------------------
    def vet_module_attribute(self, module_name: str, attribute: str, value: Any) -> Any:
        if module_name.split(".")[0] not in _LIBRARIES:
            return value
        self._watch_options()
        value = vet_library_function(f"{module_name}.{attribute}", value)
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
        if attribute == "as_strided":
            raise SandboxViolation(
                f"{module_name}.as_strided is not available in the sandbox: it reads memory outside the array; "
                "use numpy.lib.stride_tricks.sliding_window_view"
            )
        if attribute.startswith(_REGISTERING) and callable(value):
            raise SandboxViolation(f"{module_name}.{attribute} would change pandas for the whole host")
        if attribute in _FILE_FUNCTIONS and callable(value):
            return self.on_paths(f"{module_name}.{attribute}", value)
        if target or isinstance(value, _PLAIN):
            return value
        if _file_origin(_origin(value)) and attribute not in _PURE_ENTRY_POINTS:
            raise SandboxViolation(
                f"{module_name}.{attribute} is not available in the sandbox: it reads or writes files. "
                "Use pd.read_csv, df.to_csv and the like, on paths inside allowed_paths"
            )
        if attribute in _DISPATCH_FUNCTIONS and callable(value):
            return self.dispatching(f"{module_name}.{attribute}", value, None)
        if attribute in _OPTION_SETTERS and callable(value):
            return self.checked_options(f"{module_name}.{attribute}", value)
        if callable(value) and _origin(value).startswith("pandas.plotting"):
            return self.checked_plotting(value)
        return value

    # Methods of data objects ---------------------------------------------
    def vet_attribute(self, obj: Any, name: str, value: Any) -> Any:
        holder = obj.__self__ if type(obj) is super else obj  # type: ignore[attr-defined]
        library = _library_class(holder if isinstance(holder, type) else type(holder))
        if library is None:
            return value
        if name in _ALWAYS_REFUSED_METHODS:
            raise SandboxViolation(
                f".{name} is not available in the sandbox: it pickles, evaluates code or renders templates"
            )
        from_class = isinstance(holder, type)
        if name in _FILE_METHODS and callable(value):
            if from_class:
                raise SandboxViolation(
                    f"{library.__name__}.{name} read from the class is not available in the sandbox; "
                    f"call it on the object (x.{name}(...))"
                )
            return self.on_paths(f".{name}", value)
        if callable(value) and _file_origin(_origin(value)) and not _file_origin(_origin(library)):
            raise SandboxViolation(
                f".{name} of a {library.__name__!r} is not available in the sandbox: it reaches files"
            )
        if library.__module__.split(".")[0] != "pandas" or not callable(value):
            return value
        if name in _DISPATCH_METHODS:
            return self.dispatching(f".{name}", value, None if from_class else holder)
        if name in _PLOTTING:
            return self.checked_plotting(value)
        return value

    # Functions named by strings ---------------------------------------------
    def dispatching(self, label: str, function: Callable[..., Any], receiver: Any) -> Callable[..., Any]:
        """`function`, checking the functions it is given by name before pandas looks them up."""
        signature = _signature(function)

        @functools.wraps(function)
        def checked(*args: Any, **kwargs: Any) -> Any:
            if signature is None:
                raise SandboxViolation(f"{label} is not available in the sandbox")
            bound = signature.bind_partial(*args, **kwargs)  # a wrong call is the TypeError pandas would raise
            arguments = bound.arguments
            target = receiver if receiver is not None else arguments.get("self")
            given = False
            for name in _FUNCTION_PARAMETERS:
                if name in arguments:
                    given = given or arguments[name] is not None
                    arguments[name] = self.function_spec(label, arguments[name], target, 0)
            if not given and label.rsplit(".", 1)[-1] in _NAMED_AGGREGATION:
                for parameter in signature.parameters.values():
                    if parameter.kind is inspect.Parameter.VAR_KEYWORD and parameter.name in arguments:
                        arguments[parameter.name] = {
                            key: self.named_aggregation(label, spec, target)
                            for key, spec in arguments[parameter.name].items()
                        }
            return function(*bound.args, **bound.kwargs)

        return checked

    def named_aggregation(self, label: str, spec: Any, target: Any) -> Any:
        """``output=('column', function)`` or ``output=function``: the function is checked, never the column."""
        if isinstance(spec, tuple) and len(spec) == 2:
            return (spec[0], self.function_spec(label, spec[1], target, 1))
        return self.function_spec(label, spec, target, 0)

    def function_spec(self, label: str, spec: Any, target: Any, depth: int) -> Any:
        """A copy of `spec` (a function, a name, or lists, tuples and dicts of them) with every name checked.

        pandas gets the copy: the code cannot change it between the check and the lookup."""
        if depth > _MAX_NESTING:
            raise SandboxViolation(f"{label}: functions nested too deeply")
        if isinstance(spec, str):
            name = str.__str__(spec)  # a str subclass cannot show the check another name
            self.check_function_name(label, name, target)
            return name
        if isinstance(spec, list):
            return [self.function_spec(label, item, target, depth + 1) for item in list.__iter__(spec)]
        if isinstance(spec, tuple):
            return tuple(self.function_spec(label, item, target, depth + 1) for item in tuple.__iter__(spec))
        if isinstance(spec, dict):
            return {key: self.function_spec(label, item, target, depth + 1) for key, item in dict.items(spec)}
        from pandas.api.types import is_dict_like, is_list_like

        if is_list_like(spec) or is_dict_like(spec):
            raise SandboxViolation(f"{label}: give several functions as a list, a tuple or a dict")
        return spec

    def check_function_name(self, label: str, name: str, target: Any) -> None:
        """Refuse a name pandas would look up that the attribute guard would not give the code."""
        if name.startswith("_") or name in FORBIDDEN_ATTRIBUTES:
            raise SandboxViolation(f"{label}({name!r}): the attribute {name!r} is not available in the sandbox")
        if name in _ALWAYS_REFUSED_METHODS or name in _ALWAYS_REFUSED:
            raise SandboxViolation(f"{label}({name!r}) is not available in the sandbox")
        if name in _FILE_METHODS or name in _FILE_FUNCTIONS:
            raise SandboxViolation(f"{label}({name!r}): file functions are not called by name here; call it directly")
        if target is not None and self.attribute_guard is not None:
            value = _read(target, name)
            if value is not _MISSING and self.attribute_guard(target, name, value) is not value:
                raise SandboxViolation(f"{label}({name!r}) is not available in the sandbox")
        numpy = sys.modules.get("numpy")
        value = _read(numpy, name) if numpy is not None else _MISSING
        if value is not _MISSING and self.vet_module_attribute("numpy", name, value) is not value:
            raise SandboxViolation(f"{label}({name!r}) is not available in the sandbox")

    # Plotting and options ---------------------------------------------------
    def checked_plotting(self, value: Any) -> Any:
        """pandas' plotting (``df.plot``, its accessor class, ``df.hist``...) with the default backend only."""
        if isinstance(value, type):
            return self._checked_accessor(value)
        if not isinstance(value, (FunctionType, MethodType)):  # an accessor: the same, checking its calls
            checked_accessor: Any = object.__new__(self._checked_accessor(type(value)))
            checked_accessor.__dict__.update(vars(value))
            return checked_accessor
        signature = _signature(value)

        @functools.wraps(value)
        def checked(*args: Any, **kwargs: Any) -> Any:
            _check_backend(kwargs)
            if signature is not None:
                try:
                    _check_backend(signature.bind_partial(*args, **kwargs).arguments)
                except TypeError:
                    pass  # the call raises its own
            return value(*args, **kwargs)

        return checked

    def _checked_accessor(self, base: type) -> type:
        accessor = self._accessors.get(base)
        if accessor is not None:
            return accessor

        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            _check_backend(kwargs)
            return base.__call__(self, *args, **kwargs)

        namespace: dict[str, Any] = {"__call__": call, "__module__": base.__module__, "__doc__": base.__doc__}
        if hasattr(base, "__getattr__"):  # groupby's .plot makes its methods in __getattr__

            def method(self: Any, name: str) -> Any:
                found = base.__getattr__(self, name)
                if not callable(found):
                    return found

                def checked(*args: Any, **kwargs: Any) -> Any:
                    _check_backend(kwargs)
                    return found(*args, **kwargs)

                return checked

            namespace["__getattr__"] = method
        accessor = self._accessors[base] = type(base.__name__, (base,), namespace)
        return accessor

    def checked_options(self, label: str, function: Callable[..., Any]) -> Callable[..., Any]:
        """`pd.set_option` and `pd.option_context`, refusing the options that import modules by name."""

        @functools.wraps(function)
        def checked(*args: Any, **kwargs: Any) -> Any:
            keys = list(args[0]) if len(args) == 1 and isinstance(args[0], dict) else list(args[::2])
            for key in keys:
                _check_option(label, key)
            return function(*args, **kwargs)

        return checked

    def _watch_options(self) -> None:
        """Writes to ``pd.options.plotting`` go through the same check as `set_option`."""
        config = sys.modules.get(_OPTION_WRAPPER[0])
        wrapper = getattr(config, _OPTION_WRAPPER[1], None)
        if isinstance(wrapper, type) and wrapper not in self.write_checks:
            self.write_checks[wrapper] = _check_option_write

    # Paths ---------------------------------------------------------------
    def on_paths(self, label: str, function: Callable[..., Any]) -> Callable[..., Any]:
        """`function`, checking every path argument against `allowed_paths` first."""

        @functools.wraps(function)
        def checked(*args: Any, **kwargs: Any) -> Any:
            if args:  # the function gets the very text that was checked, never the code's object
                args = (self.check_path(label, args[0]), *args[1:])
            for key in _PATH_KEYWORDS:
                if key in kwargs:
                    kwargs[key] = self.check_path(label, kwargs[key])
            if kwargs.get("allow_pickle"):
                raise SandboxViolation(f"{label}(allow_pickle=True) is not available in the sandbox: pickles run code")
            if label.endswith(("load", "save")):
                kwargs["allow_pickle"] = False
            return function(*args, **kwargs)

        return checked

    def check_path(self, label: str, candidate: Any) -> Any:
        """`candidate` checked against `allowed_paths`: a path comes back as the plain text that was
        checked (`beneath.path_text`), for the function to use; other objects come back as they are."""
        if candidate is None:
            return None
        if not isinstance(candidate, (str, bytes, bytearray, os.PathLike)):
            if hasattr(candidate, "fileno"):
                raise SandboxViolation(f"{label}: real file objects are not available in the sandbox")
            return candidate  # an object of the code's own (an in-memory buffer)
        text = path_text(candidate)
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
        return text


_PLAIN = (str, bytes, int, float, bool, type(None), tuple, frozenset, complex, dict, list)
_MISSING = object()


def _read(obj: Any, name: str) -> Any:
    try:
        return getattr(obj, name)
    except AttributeError:  # pandas raises its own error for a missing name when it looks it up
        return _MISSING


def _signature(function: Callable[..., Any]) -> inspect.Signature | None:
    """`function`'s signature; its function's is computed once (a bound method drops the first parameter)."""
    underlying = function.__func__ if isinstance(function, MethodType) else function
    try:
        signature = _function_signature(underlying)
    except TypeError:  # unhashable: not worth keeping
        signature = _function_signature.__wrapped__(underlying)
    if underlying is function:
        return signature
    if signature is None:
        return None
    return signature.replace(parameters=tuple(signature.parameters.values())[1:])


@functools.lru_cache(maxsize=512)
def _function_signature(function: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(function)
    except (TypeError, ValueError):
        return None


def _origin(value: Any) -> str:
    """The module whose code `value` runs: a function's globals, which numpy and pandas do not
    rewrite as they rewrite ``__module__`` for their public API."""
    if isinstance(value, MethodType):
        value = value.__func__
    if isinstance(value, functools.partial):
        value = value.func
    if isinstance(value, FunctionType):
        name = value.__globals__.get("__name__")
        return name if isinstance(name, str) else ""
    if not isinstance(value, type):
        module = getattr(type(value), "__module__", None) if not callable(value) else _module_of(value)
        return module if isinstance(module, str) else ""
    for item in vars(value).values():
        item = item.fget if isinstance(item, property) else getattr(item, "__func__", item)
        if isinstance(item, FunctionType):
            return _origin(item)
    module = value.__module__
    return module if isinstance(module, str) else ""


def _module_of(value: Any) -> Any:
    try:
        module = value.__module__
    except Exception:  # an object whose __getattr__ raises
        module = None
    return module if isinstance(module, str) else type(value).__module__


def _file_origin(module: str) -> bool:
    return any(module == origin or module.startswith(origin + ".") for origin in _FILE_ORIGINS)


def _library_class(cls: type) -> type | None:
    """The first numpy or pandas class in `cls`'s MRO (the code's own subclasses included)."""
    for klass in cls.__mro__:
        module = klass.__module__
        if isinstance(module, str) and module.split(".")[0] in _LIBRARIES:
            return klass
    return None


def _check_backend(kwargs: dict[str, Any]) -> None:
    backend = kwargs.get("backend")
    if backend not in _DEFAULT_BACKENDS:
        raise SandboxViolation(f"plotting backend {backend!r}: only pandas' default backend is available here")


def _check_option(label: str, key: Any) -> None:
    if type(key) is not str:
        raise SandboxViolation(f"{label}: option names are plain strings")
    from pandas._config import config

    try:
        resolved = config._get_single_key(key)
    except Exception:  # an unknown or ambiguous name: pandas raises its own error
        return
    if resolved in _REFUSED_OPTIONS:
        raise SandboxViolation(f"{label}({key!r}): the option {resolved!r} imports modules by name")


def _check_option_write(wrapper: Any) -> None:
    """A write to ``pd.options...``: pandas sets ``prefix.name`` as a pattern, so only the wrappers
    pandas made (holding its own option tree) may be written, and not the refused options'."""
    from pandas._config import config

    prefix = object.__getattribute__(wrapper, "prefix")
    node: Any = config._global_config
    for part in prefix.split(".") if prefix else ():
        node = node.get(part) if isinstance(node, dict) else None
    if node is None or object.__getattribute__(wrapper, "d") is not node or not isinstance(prefix, str):
        raise SandboxViolation("only pd.options and its sections can be set in the sandbox")
    if any(option.rsplit(".", 1)[0] == prefix for option in _REFUSED_OPTIONS):
        raise SandboxViolation(f"pd.options.{prefix}: these options import modules by name")


def _refused_module(name: str) -> bool:
    return any(name == refused or name.startswith(refused + ".") for refused in _REFUSED_MODULES) or ("pickle" in name)
