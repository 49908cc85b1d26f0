"""Which modules, and which objects in them, the model's code can reach.

Modules reach the code only as *proxies*: fresh module objects that hold the
vetted public attributes of the real module, filled in on first use, so later
reads run at C speed. A proxy refuses private names, refuses modules that are
not allowed (``statistics.sys``, ``numpy.os``...), and refuses functions and
objects that belong to the machine (`os.system`, `sys.modules`, `builtins.open`)
wherever they were re-exported, unless their own module was allowed by name.

`authorized_imports` entries: ``"json"`` allows that module and the submodules
it exposes as attributes (``numpy`` gives ``numpy.random``); ``"pkg.*"`` also
allows ``import pkg.anything``; ``"*"`` allows every module (an explicit choice:
it includes ``os`` and ``subprocess``).
"""

from __future__ import annotations

import builtins
import dis
import functools
import importlib
import sys
from collections.abc import Callable, Iterable
from types import CodeType, FrameType, MappingProxyType, ModuleType, TracebackType
from typing import Any

from codeward.wall_events import note

__all__ = [
    "DEFAULT_AUTHORIZED_IMPORTS",
    "REFUSED",
    "ImportGate",
    "Refused",
    "SandboxViolation",
    "checked_import_entries",
    "machine_modules_named",
]

_IMPORT_NAME = dis.opmap["IMPORT_NAME"]
_REAL_IMPORT = builtins.__import__

#: Standard modules for data work that reach neither the machine nor the
#: interpreter. Not here on purpose: decimal and fractions (their arithmetic
#: is not size-capped), enum and abc (classes built from dicts can carry any
#: special method), calendar (global settings), queue (blocks forever),
#: uuid (runs system commands), pprint (writes to the host's stdout).
DEFAULT_AUTHORIZED_IMPORTS: tuple[str, ...] = (
    "base64",
    "bisect",
    "cmath",
    "collections",
    "collections.abc",
    "copy",
    "dataclasses",
    "datetime",
    "difflib",
    "functools",
    "hashlib",
    "heapq",
    "itertools",
    "json",
    "math",
    "numbers",
    "operator",
    "random",
    "re",
    "statistics",
    "string",
    "textwrap",
    "time",
    "typing",
    "unicodedata",
)

# Modules whose functions and objects are refused wherever they are found,
# unless the module itself is allowed by name (or "*").
_MACHINE_MODULES = (
    "os",
    "posix",
    "nt",
    "sys",
    "subprocess",
    "shutil",
    "socket",
    "io",
    "_io",
    "pickle",
    "_pickle",
    "marshal",
    "importlib",
    "signal",
    "gc",
    "inspect",
    "threading",
    "_thread",
    "atexit",
    "tempfile",
    "pathlib",
    "ctypes",
    "_ctypes",
    "multiprocessing",
    "runpy",
    "code",
    "codeop",
    "pty",
    "resource",
    "faulthandler",
    "mmap",
    "select",
    "shelve",
    "sqlite3",
    "webbrowser",
    "zipimport",
    "pkgutil",
)
_DANGEROUS_BUILTINS = (
    "open",
    "eval",
    "exec",
    "compile",
    "__import__",
    "input",
    "breakpoint",
    "globals",
    "locals",
    "vars",
    "help",
    "exit",
    "quit",
    "getattr",
    "setattr",
    "delattr",
    "memoryview",
    "__build_class__",
)
_MACHINE_TOPS = frozenset(name.lstrip("_") for name in _MACHINE_MODULES)
_PLAIN_VALUES = (str, bytes, int, float, bool, type(None), tuple, frozenset, complex)
_INTERNAL_TYPES = (FrameType, TracebackType, CodeType)


class SandboxViolation(PermissionError):
    """The code reached for something the sandbox does not give.

    Each one made while a block runs is noted as one of the block's events (wall "policy"), even
    when the code catches it: `what` says what was refused, in short (else the message's first clause).
    """

    def __init__(self, message: str, *, what: str | None = None) -> None:
        super().__init__(message)
        note("policy", what if what is not None else _first_clause(message))


def _first_clause(message: str) -> str:
    return message.split(". ", 1)[0].split("; ", 1)[0]


def _machine_objects() -> dict[int, tuple[Any, str]]:
    """id -> (object, owning module) for every non-trivial object of the machine modules."""
    found: dict[int, tuple[Any, str]] = {}
    for name in _MACHINE_MODULES:
        module = sys.modules.get(name)
        if module is None:
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
        for value in vars(module).values():
            if isinstance(value, (ModuleType, *_PLAIN_VALUES)):
                continue
            if callable(value) and _top(getattr(value, "__module__", None)) not in _MACHINE_TOPS:
                continue  # a re-export, such as pickle's copy of itertools.islice
            found.setdefault(id(value), (value, name))
    for name in _DANGEROUS_BUILTINS:
        value = getattr(builtins, name, None)
        if value is not None:
            found[id(value)] = (value, "builtins")
    found.pop(id(builtins.print), None)
    return found


_MACHINE: dict[int, tuple[Any, str]] = {}


def machine_objects() -> dict[int, tuple[Any, str]]:
    """The registry of refused objects, built once per process on first use."""
    if not _MACHINE:
        _MACHINE.update(_machine_objects())
    return _MACHINE


#: Per-module replacements: module name -> {attribute: replacement}. A
#: replacement of `REFUSED` refuses the attribute with `reason`.
Overrides = Callable[[str], dict[str, Any]]
REFUSED = object()


class Refused:
    """A replacement that refuses the attribute and says why, in words the model can act on."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


class ImportGate:
    """The allow-list, the proxies it hands out, and the vetting of reached values."""

    def __init__(
        self,
        authorized_imports: Iterable[str],
        overrides: Overrides,
        extra_vet: Callable[[str, str, Any], Any] | None = None,
    ) -> None:
        entries = checked_import_entries(authorized_imports)
        self.everything = "*" in entries
        self.exact = {entry for entry in entries if not entry.endswith("*")}
        self.trees = {entry[:-2] for entry in entries if entry.endswith(".*")}
        self.overrides = overrides
        self.extra_vet = extra_vet
        self.machine = machine_objects()
        self._proxies: dict[str, ModuleType] = {}
        self.proxy_ids: set[int] = set()

    # The allow-list -----------------------------------------------------
    def allows_by_name(self, name: str) -> bool:
        """`import name` is allowed: listed exactly, under a listed 'pkg.*', or '*'."""
        if self.everything or name in self.exact:
            return True
        return any(name == tree or name.startswith(tree + ".") for tree in self.trees)

    def allows_as_attribute(self, name: str) -> bool:
        """A module reached as an attribute: allowed by name, or a submodule of an allowed package."""
        if self.allows_by_name(name):
            return True
        top = name.split(".")[0]
        return name != top and self.allows_by_name(top) and name.split(".")[0] not in _MACHINE_MODULES

    def refusal(self, name: str) -> SandboxViolation:
        allowed = ", ".join(sorted(self.exact | {t + ".*" for t in self.trees})) or "none"
        return SandboxViolation(
            f"import of {name!r} is not allowed. Allowed modules: {allowed}. "
            "The user can allow more with authorized_imports.",
            what=f"import of {name}",
        )

    # The import statement ------------------------------------------------
    def import_module(
        self,
        name: str,
        globals: Any = None,
        locals: Any = None,
        fromlist: tuple[str, ...] | None = (),
        level: int = 0,
    ) -> ModuleType:
        """Replaces `__import__` for the model's code.

        It judges the model's import statements only. C code that the block calls looks
        `__import__` up in the running frame's builtins too, so numpy's first ``a.sum()``
        asks it for ``numpy._core._methods``: such an import is the library's own, made
        for its C caller (which reads the module from ``sys.modules``, never showing it to
        the code), and runs as the interpreter would.
        """
        caller = sys._getframe(1)
        if caller.f_code.co_code[caller.f_lasti] != _IMPORT_NAME:
            return _REAL_IMPORT(name, globals, locals, fromlist, level)
        if level or not isinstance(name, str) or any(p.startswith("_") for p in name.split(".")):
            raise SandboxViolation(f"import of {name!r} is not allowed", what=f"import of {name}")
        if not self.allows_by_name(name):
            raise self.refusal(name)
        try:
            module = importlib.import_module(name)
        except ImportError as error:
            raise ImportError(f"no module named {name!r} is installed here") from error
        if fromlist:
            proxy = self.proxy(module)
            for item in fromlist:
                if item == "*" or item.startswith("_"):
                    raise SandboxViolation(
                        f"'from {name} import {item}' is not allowed", what=f"import of {name}.{item}"
                    )
                try:
                    getattr(proxy, item)  # resolves (and vets) now, so no fallback reaches sys.modules
                except AttributeError as error:  # as CPython says it, but where the module lives
                    message = f"cannot import name {item!r} from {name!r} (unknown location)"
                    raise ImportError(message, name=name) from error
            return proxy
        top = name.split(".")[0]
        return self.proxy(importlib.import_module(top))

    # Proxies -------------------------------------------------------------
    def proxy(self, module: ModuleType) -> ModuleType:
        """The sandbox's view of `module`, one per module name."""
        name = module.__name__
        existing = self._proxies.get(name)
        if existing is not None:
            return existing
        proxy = ModuleType(name, module.__doc__)
        overrides = self.overrides(name)
        full = self.allows_by_name(name) or self.allows_as_attribute(name)

        def resolve(attribute: str) -> Any:
            if attribute.startswith("__") and attribute.endswith("__"):
                # Special names the code cannot ask for: absent, as the host's own lookups
                # (repr reads __file__, copy reads __deepcopy__) expect of a plain module.
                raise AttributeError(f"module {name!r} has no attribute {attribute!r}", name=attribute, obj=proxy)
            if attribute.startswith("_"):
                raise SandboxViolation(
                    f"{name}.{attribute} is private and not available in the sandbox",
                    what=f"attribute {name}.{attribute}",
                )
            if attribute in overrides:
                value = overrides[attribute]
                if value is REFUSED:
                    raise SandboxViolation(
                        f"{name}.{attribute} is not available in the sandbox", what=f"attribute {name}.{attribute}"
                    )
                if type(value) is Refused:
                    raise SandboxViolation(
                        f"{name}.{attribute} is not available in the sandbox: {value.reason}",
                        what=f"attribute {name}.{attribute}",
                    )
            else:
                missing: str | None = None
                try:
                    value = getattr(module, attribute)
                except AttributeError as error:
                    missing = str(error)  # the error itself carries the real module (.obj, its context)
                if missing is not None:
                    raise AttributeError(missing, name=attribute, obj=proxy)  # out here, it has no context
                if not full and not isinstance(value, ModuleType):
                    raise self.refusal(name)
                value = _read_only(self.vet_module_attribute(name, attribute, value))
            proxy.__dict__[attribute] = value
            return value

        proxy.__dict__["__getattr__"] = resolve
        self._proxies[name] = proxy
        self.proxy_ids.add(id(proxy))
        return proxy

    def vet_module_attribute(self, module_name: str, attribute: str, value: Any) -> Any:
        if self.extra_vet is not None:
            value = self.extra_vet(module_name, attribute, value)
        return self.vet(value)

    # Vetting every value the code reaches ---------------------------------
    def vet(self, value: Any) -> Any:
        """Return `value` if the code may hold it (modules as proxies); raise otherwise.

        The common case, an ordinary object, costs a type check and a set lookup.
        """
        kind = type(value)
        if kind is ModuleType:
            if id(value) in self.proxy_ids:
                return value
            if self.allows_as_attribute(value.__name__):
                return self.proxy(value)
            raise self.refusal(value.__name__)
        if kind in _INTERNAL_TYPES:
            raise SandboxViolation(f"{kind.__name__} objects are interpreter internals and not available")
        entry = self.machine.get(id(value))
        if entry is not None and entry[0] is value and not self.allows_by_name(entry[1]):
            label = getattr(value, "__name__", kind.__name__)
            raise SandboxViolation(
                f"{label!r} belongs to the module {entry[1]!r}, which is not available in the sandbox"
            )
        return value


def _read_only(value: Any) -> Any:
    """A module's own table as the code sees it: one it cannot change. numpy's C code reads the
    dtype names in `numpy.sctypeDict`; a registry changed by the code would change the host."""
    kind = type(value)
    if kind is dict:
        return MappingProxyType(value)
    if kind is list:
        return tuple(value)
    if kind is set:
        return frozenset(value)
    return value


def _top(module_name: object) -> str:
    return module_name.split(".")[0].lstrip("_") if isinstance(module_name, str) else ""


def checked_import_entries(authorized_imports: Iterable[str]) -> list[str]:
    """The allow-list's entries, or a ValueError that names the ones that are not module names."""
    entries = [str(entry).strip() for entry in authorized_imports]
    bad = [entry for entry in entries if not _valid_entry(entry)]
    if bad:
        raise ValueError(f"authorized_imports entries must be module names, 'pkg.*' or '*'; got {bad!r}")
    return entries


def machine_modules_named(entries: Iterable[str]) -> list[str]:
    """The entries that name a module of the machine (`os`, `sys`, `subprocess`, `builtins`...): named,
    it is given whole, its functions too, and `builtins` gives `eval`, `exec` and `globals()`, which run
    code the policy never compiled."""
    machine = {*_MACHINE_TOPS, "builtins"}
    return [entry for entry in entries if entry != "*" and _top(entry.removesuffix(".*")).lstrip("_") in machine]


@functools.lru_cache(maxsize=4096)
def _valid_entry(entry: str) -> bool:
    """Cached: every executor checks the same few hundred default entries as it starts."""
    if entry == "*":
        return True
    name = entry.removesuffix(".*")
    return bool(name) and all(part.isidentifier() for part in name.split("."))
