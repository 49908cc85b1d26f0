"""The sandbox trusts no allowed library to keep its rules.

Each attack goes through a function of an allowed module that would turn data into code
(`dataclasses` writes field names into source), change the host for every caller
(``ABC.register``, decorators that write onto a host class), run pytest in the sandbox's
process (numpy's and pandas' test runners), or end the host (a library's `SystemExit`).
The harness shows each harm without the sandbox first. The ordinary uses of the same
functions, and the audit of the allowed modules (`audit_allowed_modules`), are tested in
``tests/executors/local/test_library_trust.py``: they pass with or without a sandbox.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from tests.security.conftest import in_process_only

# dataclasses writes field names into code ------------------------------------------
#: A TypedDict may have any keys; update_wrapper copies its annotations onto the code's class,
#: and dataclass writes them into the source of __eq__, run with the real builtins.
INJECTED_FIELD = (
    "import typing, dataclasses, functools\n"
    "X = typing.TypedDict('X', {NAME: int})\n"
    "class C:\n"
    "    pass\n"
    "functools.update_wrapper(C, X, updated=())\n"
    "dataclasses.dataclass(C, init=False, repr=False)\n"
    "C() == C()\n"
)


def test_field_names_written_into_code_are_refused(attack):
    error = attack(INJECTED_FIELD.replace("NAME", '''"__class__,open('CANARY', 'w').close()"'''))
    assert "field name" in error.message and "public identifier" in error.message


# Decorators that write onto what they are given --------------------------------------
@pytest.mark.parametrize(
    ("decorate", "changed"),
    [
        ("dataclasses.dataclass(json.JSONEncoder)", "'JSONEncoder(' in repr(json.JSONEncoder())"),
        ("typing.final(json.JSONEncoder)", "getattr(json.JSONEncoder, '__final__', False)"),
        ("typing.no_type_check(json.JSONEncoder)", "getattr(json.JSONEncoder, '__no_type_check__', False)"),
        ("typing.abstractmethod(json.dumps)", "getattr(json.dumps, '__isabstractmethod__', False)"),
        ("numbers.abstractmethod(json.loads)", "getattr(json.loads, '__isabstractmethod__', False)"),
    ],
    ids=lambda text: text.split("(")[0],
)
def test_decorators_do_not_rewrite_host_classes_and_functions(decorate, changed, attack):
    code = f"import dataclasses, json, numbers, typing\n{decorate}\nif {changed}:\n    open('CANARY', 'w').close()\n"
    error = attack(code)
    assert "belongs to the host" in error.message


def test_total_ordering_does_not_rewrite_host_classes(attack):
    """numbers.Real defines __lt__ and __le__ only: total_ordering would add __gt__ and __ge__ to it."""
    error = attack(
        "import functools, numbers\nfunctools.total_ordering(numbers.Real)\n"
        "if '__gt__' in getattr(numbers.Real, '__dict__'):\n    open('CANARY', 'w').close()"
    )
    assert "belongs to the host" in error.message


def test_typing_metaclass_and_registry_functions_are_refused(attack):
    for name in ("NamedTupleMeta", "no_type_check_decorator", "clear_overloads"):
        error = attack(f"import typing\ntyping.{name}\nopen('CANARY', 'w').close()")
        assert f"typing.{name} is not available" in error.message


# ABC.register changes isinstance() for the whole host ---------------------------------
@pytest.mark.parametrize(
    "register",
    [
        "typing.Sequence.register(C)",
        "typing.Hashable.register(C)",
        "collections.abc.Sequence.register(C)",
        "getattr(collections.abc.Sequence, 'regis' + 'ter')(C)",
        "numbers.Number.register(C)",
    ],
    ids=lambda text: text.split("(")[0],
)
def test_registering_with_host_abcs_is_refused(register, attack):
    code = (
        "import collections.abc, numbers, typing\nclass C:\n    pass\n"
        f"{register}\n"
        "if isinstance(C(), (collections.abc.Sequence, collections.abc.Hashable, numbers.Number)):\n"
        "    open('CANARY', 'w').close()\n"
    )
    error = attack(code)
    assert "isinstance() for the whole host" in error.message


def test_abcmeta_register_itself_is_refused(attack):
    error = attack(
        "import abc, collections.abc\nclass C:\n    pass\nabc.ABCMeta.register(collections.abc.Sized, C)\n"
        "open('CANARY', 'w').close()",
        authorized_imports=["abc", "collections.abc"],
    )
    assert "isinstance() for the whole host" in error.message


# numpy's and pandas' test runners run pytest in the sandbox's process --------------------
RUNNERS = {
    "numpy.test": "import numpy\nnumpy.test(extra_argv=['--debug=CANARY', '-p', 'no:cacheprovider'], tests=['/no'])",
    "numpy.linalg.test": (
        "import numpy\nnumpy.linalg.test(extra_argv=['--debug=CANARY', '-p', 'no:cacheprovider'], tests=['/no'])"
    ),
    "pandas.test": "import pandas\npandas.test(extra_args=['--debug=CANARY', '-p', 'no:cacheprovider', '/no'])",
}


def _writes_outside(code: str, tmp_path: Path) -> bool:
    """The control, run in a child Python (pytest inside this one would disturb the run): the
    runner writes pytest's debug log where the code says."""
    target = tmp_path / "control-debug.log"
    subprocess.run([sys.executable, "-c", code.replace("CANARY", str(target))], capture_output=True, timeout=120)
    return target.exists()


@pytest.mark.parametrize("runner", list(RUNNERS))
def test_library_test_runners_are_refused(runner, attack, tmp_path):
    pytest.importorskip("numpy")
    pytest.importorskip("pandas")
    code = RUNNERS[runner]
    error = attack(code, control=lambda: _writes_outside(code, tmp_path), authorized_imports=["numpy", "pandas"])
    assert f"{runner} is not available" in error.message and "pytest" in error.message


def test_numpy_info_does_not_import_modules_by_name(attack, canary, tmp_path, monkeypatch):
    """``numpy.info(toplevel=name)`` imports the module named: here one whose import writes the canary."""
    pytest.importorskip("numpy")
    folder = tmp_path / "modules"
    folder.mkdir()
    (folder / "codeward_import_canary.py").write_text(f"open({str(canary)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(folder))
    code = "import numpy\nnumpy.info('x', toplevel='codeward_import_canary')\nwritten = 'CANARY'"  # named: the control must write it
    error = attack(code, authorized_imports=["numpy"])
    assert "imports any module by name" in error.message


# A library's SystemExit ends the block, not the host ---------------------------------------
def library_that_exits(code: int = 3) -> None:
    """Stands for a library function that calls sys.exit (as pandas.test does)."""
    raise SystemExit(code)


@in_process_only
def test_a_librarys_system_exit_does_not_end_the_host(attack):
    error = attack("leave()", variables={"leave": library_that_exits}, control="stops")
    assert "SystemExit(3)" in error.message and "end the process" in error.message


@pytest.mark.parametrize("code", ["exit(0)", "quit()", "import sys\nsys.exit(0)"])
def test_the_codes_own_exit_is_not_reachable(code, attack):
    attack(code, control="stops")


def test_command_line_entry_points_are_refused(attack, monkeypatch):
    """base64.main parses the host's argv: given an option it does not know, it sets the host's
    sys.stdout to stderr and calls sys.exit."""
    monkeypatch.setattr(sys, "argv", ["base64", "-z"])
    error = attack("import base64\nbase64.main()", control="stops")
    assert "base64.main is not available" in error.message


@in_process_only
def test_the_code_cannot_catch_a_librarys_system_exit_to_go_on(attack):
    error = attack(
        "try:\n    leave()\nexcept BaseException:\n    pass\nleave()",
        variables={"leave": library_that_exits},
        control="stops",
    )
    assert "SystemExit" in error.message


# Functions that read by name or key read as the guards do (in process: host objects) ---------
def host_writer(path: str) -> None:
    """A host function that is no machine object the gate knows, kept in a host record's private field."""
    Path(path).write_text("written")


@dataclasses.dataclass
class HostRecord:
    _writer: Any
    label: str = "record"


@in_process_only
def test_asdict_does_not_hand_over_private_fields(attack):
    error = attack(
        "import dataclasses\ndataclasses.asdict(record)['_writer']('CANARY')",
        variables={"record": HostRecord(host_writer)},
    )
    assert "'_writer' is private" in error.message


@in_process_only
def test_astuple_does_not_hand_over_private_fields(attack):
    error = attack(
        "import dataclasses\ndataclasses.astuple(record)[0]('CANARY')", variables={"record": HostRecord(host_writer)}
    )
    assert "'_writer' is private" in error.message


@in_process_only
@pytest.mark.parametrize("read", ["operator.itemgetter(0)(h.fs)", "operator.getitem(h.fs, 0)"])
def test_operator_item_readers_vet_what_they_read(read, attack):
    """A list held by a host object's attribute is the host's as it is (a list given as a variable
    is vetted as it crosses); an item read from it is vetted, by whichever reader."""
    holder = types.SimpleNamespace(fs=[os.system])
    error = attack(f"import operator\n{read}('touch CANARY')", variables={"h": holder})
    assert "'system' belongs to the module 'os'" in error.message
