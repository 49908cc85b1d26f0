"""Which public callables of the allowed modules reach code execution, the machine, or the process's life.

The sandbox trusts no allowed library to keep its rules. This audit lists every public
function, class and public method of the default allow-list (and of numpy and pandas when
installed), walks its bytecode for what it calls, following the Python functions it calls
through its globals up to `DEPTH` calls deep, and flags those that reach a name in
`DANGEROUS_NAMES`, `DANGEROUS_ATTRIBUTES` or `PROCESS_ATTRIBUTES`, that import a module
outside the standard library and the allowed ones, or that set attributes on their arguments. For each flagged callable it asks the sandbox
itself (a `LocalExecutor` in process) what the code gets: ``refused``, ``replaced`` (another
object than the library's) or ``through``.

`REVIEWED` holds the flagged callables of the default allow-list that go through on
purpose, each with its reason; `tests/security/test_local_library_trust.py` fails when a
flagged default callable goes through without one. Run it to see the whole table:

    python -m tests.security.audit_allowed_modules [--all]   # --all adds numpy and pandas
"""

from __future__ import annotations

import dis
import importlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from types import CodeType, FunctionType, MethodType, ModuleType
from typing import Any

from codeward.executors import LocalExecutor
from codeward.executors.local.imports import DEFAULT_AUTHORIZED_IMPORTS

#: Builtins and globals whose call turns data into code, or reads or writes any attribute by name.
DANGEROUS_NAMES = frozenset({"exec", "eval", "compile", "getattr", "setattr", "__import__", "subprocess"})
#: Attributes (``module.name``) that import by name, end the process or run commands.
DANGEROUS_ATTRIBUTES = frozenset({"import_module", "exit", "_exit", "system", "Popen", "run_module"})
#: Attributes of the host process's own state, flagged on whatever object they are read (``sys`` is often
#: imported inside the function): a command-line entry point reads the host's arguments and stdin.
PROCESS_ATTRIBUTES = frozenset({"argv", "stdin"})
#: How many calls deep the walk follows Python functions (``dataclass`` reaches ``exec`` at 4).
DEPTH = 5
DATA_LIBRARIES = ("numpy", "pandas")
_ALLOWED_TOPS = frozenset(name.split(".")[0] for name in DEFAULT_AUTHORIZED_IMPORTS) | set(DATA_LIBRARIES)

#: Flagged callables of the default allow-list that the sandbox lets through, and why that is safe.
REVIEWED: dict[str, str] = {
    "collections.namedtuple": "eval()s source only from names it checks first (exact str, identifier, no keyword, no leading '_'), with no builtins",
    "functools.namedtuple": "collections.namedtuple, re-exported",
    "statistics.namedtuple": "collections.namedtuple, re-exported",
    "typing.NamedTuple": "builds its class with collections.namedtuple, which checks the names",
    "copy.copy": "reads the copy protocol's special names and sets the copied state on the new object only",
    "copy.deepcopy": "as copy.copy",
    "dataclasses.fields": "returns the Field records (whose attributes the code reads through the guards)",
    "dataclasses.replace": "reads the init fields by their names and calls the class with them",
    "functools.cache": "functools.lru_cache without a size",
    "functools.lru_cache": "the real update_wrapper copies the wrapped function's special names onto a new cache object",
    "functools.recursive_repr": "copies four special names of the wrapped function onto a new function",
    "typing.ForwardRef": "compile()s the text as an expression to check it, never runs it; get_type_hints is replaced",
    "typing.ForwardRef.__init__": "as typing.ForwardRef",
    "typing.get_overloads": "reads typing's registry, which the sandbox's overload no longer writes",
}
if sys.version_info >= (3, 13):  # what 3.13 adds, or reaches by another route
    REVIEWED.update(
        {
            "dataclasses.recursive_repr": "functools.recursive_repr, re-exported",
            "re.RegexFlag": "an enum: making a member from a value reads the enum's own members",
            "typing.is_protocol": "reads whether a class is marked a protocol, and gives a bool",
            "typing.get_protocol_members": "reads a protocol class's member names, and gives them as str",
        }
    )


@dataclass(frozen=True)
class Finding:
    """One flagged callable: what it reaches (and through which function), and what the sandbox does."""

    name: str
    reaches: tuple[str, ...]
    verdict: str = "?"


def public_callables(module: ModuleType) -> Iterator[tuple[str, Any]]:
    """``module.name`` and ``module.Class.method`` for every public callable the module holds."""
    for name in sorted(dir(module)):
        if name.startswith("_"):
            continue
        value = getattr(module, name, None)
        if isinstance(value, ModuleType) or not callable(value):
            continue
        yield f"{module.__name__}.{name}", value
        if isinstance(value, type):
            for attribute, member in sorted(vars(value).items()):
                if not attribute.startswith("_") or attribute in ("__init__", "__call__", "__new__"):
                    member = getattr(member, "__func__", member)
                    if callable(member):
                        yield f"{module.__name__}.{name}.{attribute}", member


def reached(value: Any) -> tuple[str, ...]:
    """The dangerous names `value`'s code reaches, each as ``name (via function)``."""
    found: dict[str, str] = {}
    seen: set[int] = set()
    for function in _entry_functions(value):
        _walk(function, 0, found, seen)
    return tuple(sorted(f"{name} (via {via})" for name, via in found.items()))


def _entry_functions(value: Any) -> list[FunctionType]:
    value = value.__func__ if isinstance(value, MethodType) else value
    if isinstance(value, FunctionType):
        return [value]
    if isinstance(value, type):
        members = [
            getattr(vars(value).get(name), "__func__", vars(value).get(name)) for name in ("__init__", "__new__")
        ]
        return [member for member in members if isinstance(member, FunctionType)]
    call = getattr(type(value), "__call__", None)  # noqa: B004  # the method itself, to walk its code
    return [call] if isinstance(call, FunctionType) else []


def _walk(function: FunctionType, depth: int, found: dict[str, str], seen: set[int]) -> None:
    if id(function.__code__) in seen:
        return
    seen.add(id(function.__code__))
    if depth == 0:
        _argument_writes(function, found)
    for code in _codes(function.__code__):
        previous: Any = None
        instructions = list(dis.get_instructions(code))
        for index, instruction in enumerate(instructions):
            name = instruction.argval
            if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                if name in DANGEROUS_NAMES:
                    found.setdefault(name, function.__qualname__)
                previous = function.__globals__.get(name, None)
                if depth < DEPTH and isinstance(previous, FunctionType):
                    _walk(previous, depth + 1, found, seen)
                continue
            relative = index >= 2 and instructions[index - 2].argval != 0  # the level, loaded two before
            if instruction.opname == "IMPORT_NAME" and not relative and _foreign_import(name, function):
                found.setdefault(f"import {name}", function.__qualname__)
            if instruction.opname in ("LOAD_ATTR", "LOAD_METHOD") and name in PROCESS_ATTRIBUTES:
                found.setdefault(f"sys.{name}", function.__qualname__)
            if instruction.opname in ("LOAD_ATTR", "LOAD_METHOD") and isinstance(previous, ModuleType):
                target = getattr(previous, name, None)
                if name in DANGEROUS_ATTRIBUTES:
                    found.setdefault(f"{previous.__name__}.{name}", function.__qualname__)
                if depth < DEPTH and isinstance(target, FunctionType):
                    _walk(target, depth + 1, found, seen)
            previous = None


def _argument_writes(function: FunctionType, found: dict[str, str]) -> None:
    """``argument.name = value`` in `function`'s own body: a decorator that writes onto what it is given
    (``typing.final``) changes a host class when given one. A method's ``self`` is its own object."""
    code = function.__code__
    parameters = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    if "." in function.__qualname__:
        parameters = parameters[1:]
    previous = None
    for instruction in dis.get_instructions(code):
        if instruction.opname == "STORE_ATTR" and previous is not None and previous.argval in parameters:
            found.setdefault(f"{previous.argval}.{instruction.argval} = ...", function.__qualname__)
        previous = instruction


def _foreign_import(name: str, function: FunctionType) -> bool:
    """An import, inside a function, of a module outside the standard library, the allowed modules and the
    function's own package (numpy.test imports pytest when called): the audit cannot see what it runs."""
    top = name.split(".")[0]
    own = str(function.__globals__.get("__name__", "")).split(".")[0]
    return bool(top) and top not in (own, *_ALLOWED_TOPS) and top not in sys.stdlib_module_names


def _codes(code: CodeType) -> Iterator[CodeType]:
    """`code` and the code objects nested in it (closures, comprehensions, inner classes)."""
    yield code
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            yield from _codes(constant)


def verdicts(names: list[str]) -> dict[str, str]:
    """What the sandbox's code gets for each dotted name: refused, replaced or through."""
    tops = sorted({name.split(".")[0] for name in names})
    code = "".join(f"import {top}\n" for top in tops) + _LOOKUP.replace("TOPS", ", ".join(f"{t!r}: {t}" for t in tops))
    with LocalExecutor(isolation="in_process", authorized_imports=tops) as executor:
        executor.send_variables({"names": names})
        got: dict[str, Any] = executor.run(code).output
    return {name: _verdict(_resolve(name), got[name]) for name in names}


#: The block that reads each name as the model's code would, attribute by attribute.
_LOOKUP = """
tops = {TOPS}
result = {}
for dotted in names:
    parts = dotted.split('.')
    value = tops[parts[0]]
    try:
        for part in parts[1:]:
            value = getattr(value, part)
    except Exception as error:
        result[dotted] = 'refused: ' + str(error)
    else:
        result[dotted] = value
result
"""


def _resolve(dotted: str) -> Any:
    parts = dotted.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            value: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for part in parts[split:]:
            value = getattr(value, part)
        return value
    raise LookupError(dotted)


def _verdict(original: Any, got: Any) -> str:
    if isinstance(got, str) and got.startswith("refused: "):
        return "refused"
    if got is original or getattr(got, "__func__", None) is original or got == original:
        return "through"
    return "replaced"


def audit(modules: list[str]) -> list[Finding]:
    """The flagged callables of `modules`, with the sandbox's verdict on each."""
    flagged: dict[str, tuple[str, ...]] = {}
    for module_name in modules:
        module = importlib.import_module(module_name)
        for name, value in public_callables(module):
            reaches = reached(value)
            if reaches:
                flagged[name] = reaches
    judged = verdicts(list(flagged))
    return [Finding(name, reaches, judged[name]) for name, reaches in flagged.items()]


def unreviewed(findings: list[Finding]) -> list[Finding]:
    """Flagged callables the sandbox lets through with no reason in `REVIEWED`."""
    return [finding for finding in findings if finding.verdict == "through" and finding.name not in REVIEWED]


def main(argv: list[str]) -> int:
    modules = list(DEFAULT_AUTHORIZED_IMPORTS)
    if "--all" in argv:
        modules += [name for name in DATA_LIBRARIES if importlib.util.find_spec(name) is not None]
    findings = audit(modules)
    for finding in findings:
        reason = REVIEWED.get(finding.name, "")
        print(f"{finding.verdict:8} {finding.name}: {', '.join(finding.reaches)}" + (f"  [{reason}]" if reason else ""))
    missing = unreviewed([finding for finding in findings if finding.name.split(".")[0] not in DATA_LIBRARIES])
    print(f"\n{len(findings)} flagged, {len(missing)} through without a review", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
