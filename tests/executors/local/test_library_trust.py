"""The allowed libraries' checked functions in ordinary use, and the audit that finds them.

The attacks on the same functions are in ``tests/security/test_local_library_trust.py``.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from codeward.executors import LocalExecutor
from codeward.executors.base import ExecutionError
from codeward.executors.local.imports import DEFAULT_AUTHORIZED_IMPORTS
from tests.security import audit_allowed_modules

#: A class given a TypedDict's annotations, then made a dataclass: the names reach dataclasses' code generation.
DATACLASS_FROM_NAMES = (
    "import typing, dataclasses, functools\n"
    "X = typing.TypedDict('X', {NAME: int})\n"
    "class C:\n"
    "    pass\n"
    "functools.update_wrapper(C, X, updated=())\n"
    "dataclasses.dataclass(C)\n"
)


@pytest.mark.parametrize("name", ["'a b'", "'class'", "'_hidden'", "1"])
def test_field_names_that_are_not_public_identifiers_are_refused(name):
    with LocalExecutor(isolation="in_process") as executor, pytest.raises(ExecutionError) as refused:
        executor.run(DATACLASS_FROM_NAMES.replace("NAME", name))
    assert refused.value.error_type == "SandboxViolation" and "not a public identifier" in refused.value.message


def test_a_dataclass_with_typed_dict_names_that_are_identifiers_still_works():
    with LocalExecutor(isolation="in_process") as executor:
        assert executor.run(DATACLASS_FROM_NAMES.replace("NAME", "'size'") + "C(3).size").output == 3


def test_numpy_info_of_an_object_still_works():
    pytest.importorskip("numpy")
    with LocalExecutor(isolation="in_process", authorized_imports=["numpy"]) as executor:
        logs = executor.run("import numpy\nnumpy.info(numpy.add)").logs
    assert "add" in logs


# Ordinary uses keep working ----------------------------------------------------------------
ORDINARY = """
import collections, dataclasses, functools, numbers, operator, typing
from dataclasses import dataclass, field

Point = collections.namedtuple('Point', 'x y')

@dataclass(frozen=True, order=True)
class Base:
    name: str

@dataclass(frozen=True, order=True)
class Item(Base):
    count: int = 0
    tags: list = field(default_factory=list)

@functools.total_ordering
class Version:
    def __init__(self, n):
        self.n = n
    def __eq__(self, other):
        return self.n == other.n
    def __lt__(self, other):
        return self.n < other.n

@typing.final
class Leaf:
    pass

class Shape(collections.abc.Sized):
    @typing.abstractmethod
    def area(self): ...
    def __len__(self):
        return 0

class MySequence(collections.abc.Sequence):
    def __getitem__(self, i):
        return i
    def __len__(self):
        return 0

MySequence.register(Point)

@typing.overload
def double(x: int) -> int: ...
@typing.overload
def double(x: str) -> str: ...
def double(x):
    return x * 2

Movie = typing.TypedDict('Movie', {'first-name': str, 'year': int})
Pair = typing.NamedTuple('Pair', [('a', int), ('b', int)])
result = (
    Point(1, 2).y,
    dataclasses.asdict(Item('a', 2)),
    Item('a', 1) < Item('a', 2),
    Version(1) <= Version(2),
    isinstance(Point(1, 2), MySequence),
    double(3),
    Movie({'first-name': 'x', 'year': 1}),
    Pair(1, 2).b,
    isinstance(Leaf(), Leaf),
    operator.itemgetter(1, 0)((5, 6)),
    operator.itemgetter('a')({'a': 7}),
    operator.getitem([1, 2], 1),
)
result
"""


@pytest.mark.parametrize("isolation", ["process", "in_process"])
def test_ordinary_uses_of_the_checked_functions_still_work(isolation):
    with LocalExecutor(isolation=isolation) as executor:
        output: Any = executor.run(ORDINARY).output
    assert tuple(output) == (
        2,
        {"name": "a", "count": 2, "tags": []},
        True,
        True,
        True,
        6,
        {"first-name": "x", "year": 1},
        2,
        True,
        (6, 5),
        7,
        2,
    )


# The audit ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def findings() -> list[audit_allowed_modules.Finding]:
    return audit_allowed_modules.audit(list(DEFAULT_AUTHORIZED_IMPORTS))


def test_every_flagged_default_callable_is_refused_replaced_or_reviewed(findings):
    missing = audit_allowed_modules.unreviewed(findings)
    assert not missing, "flagged, let through, and not reviewed: " + "; ".join(
        f"{finding.name} reaches {', '.join(finding.reaches)}" for finding in missing
    )


def test_the_audit_finds_what_it_is_meant_to(findings):
    """It found item by item what this file attacks: dataclass's exec (now replaced), and the
    re-exported abstractmethod that writes onto its argument."""
    by_name = {finding.name: finding for finding in findings}
    if sys.version_info < (
        3,
        13,
    ):  # 3.13's dataclass runs exec from a builder's method, which the audit does not follow
        assert any(reach.startswith("exec") for reach in by_name["dataclasses.dataclass"].reaches)
    assert by_name["dataclasses.dataclass"].verdict == "replaced"
    assert by_name["dataclasses.make_dataclass"].verdict == "refused"
    assert by_name["typing.abstractmethod"].verdict == "replaced"


def test_the_reviewed_list_names_only_flagged_callables_that_go_through(findings):
    through = {finding.name for finding in findings if finding.verdict == "through"}
    assert set(audit_allowed_modules.REVIEWED) <= through
