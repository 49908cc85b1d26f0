"""The codec under attack, its error messages, and its source running where codeward is not installed.

The host decodes whatever a sandbox sends back, so these tests play the sandbox:
they hand-craft payloads that try to unpickle, import, run code, or exhaust memory.
"""

from __future__ import annotations

import ast
import base64
import collections
import dataclasses
import enum
import importlib.util
import json
import os
import pickle
import socket
import subprocess
import sys
import textwrap
import types
import uuid
import warnings
import zoneinfo
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codeward.executors import codec
from codeward.executors.codec import CodecError, CodecWarning, decode_variables, dumps, encode_variables, loads, wire
from codeward.executors.codec.source import LOAD_ORDER, LOADER, module_sources
from tests.conftest import missing
from tests.executors.test_codec import Color, Perm, Point

# -------------------------------------------------------------------- pickle


class _WritesMarker:
    """Unpickling this writes a file: proof that the pickle ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (Path.write_text, (self.marker, "pickle ran"))


def _pickle_payload(marker: Path) -> str:
    blob = base64.b64encode(pickle.dumps(_WritesMarker(marker))).decode()
    return json.dumps([1, {"nested": {"$": "pickle", "b64": blob}}])


def test_a_pickle_from_the_sandbox_is_refused_and_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with pytest.raises(CodecError, match="pickled value; refused because allow_pickle is False"):
        loads(_pickle_payload(marker))
    with pytest.raises(CodecError, match="refused"):
        decode_variables(json.dumps({"x": json.loads(_pickle_payload(marker))}))
    assert not marker.exists()
    # The same payload does run when explicitly allowed: the attack above was real.
    loads(_pickle_payload(marker), allow_pickle=True)
    assert marker.read_text() == "pickle ran"


def test_pickle_is_an_explicit_opt_in_for_what_cannot_be_carried() -> None:
    value = {"plain": (1, 2), "odd": types.SimpleNamespace(a=1)}
    text = dumps(value, allow_pickle=True)
    assert '"$":"pickle"' in text and text.count('"$":"pickle"') == 1  # only the uncarried part is pickled
    back = loads(text, allow_pickle=True)
    assert back == value
    with pytest.raises(CodecError, match="pickling it failed"):
        dumps(lambda: None, allow_pickle=True)


# ------------------------------------------------------- no imports, no code


def _write_module(folder: Path, marker: Path) -> str:
    name = f"codec_bait_{uuid.uuid4().hex}"
    (folder / f"{name}.py").write_text(
        textwrap.dedent(f"""
        import dataclasses, enum, pathlib
        pathlib.Path({str(marker)!r}).write_text("imported")
        @dataclasses.dataclass
        class Thing:
            a: int
        class Kind(enum.Enum):
            A = 1
    """)
    )
    return name


def test_a_payload_naming_an_unimported_module_does_not_import_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "imported"
    name = _write_module(tmp_path, marker)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.warns(CodecWarning, match="not registered"):
        assert loads(json.dumps({"$": "dc", "cls": f"{name}:Thing", "f": {"a": 1}})) == {"a": 1}
    with pytest.warns(CodecWarning, match="not registered"):
        assert loads(json.dumps({"$": "enum", "cls": f"{name}:Kind", "name": "A", "v": 1})) == 1
    with pytest.warns(CodecWarning, match="as a plain tuple"):
        assert loads(json.dumps({"$": "nt", "cls": f"{name}:Pair", "v": [1, 2]})) == (1, 2)
    assert name not in sys.modules and not marker.exists()


def test_a_lazily_imported_module_is_not_loaded_by_a_payload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module in sys.modules may be a lazy stub (importlib.util.LazyLoader) that runs on first attribute access."""
    marker = tmp_path / "imported"
    name = _write_module(tmp_path, marker)
    spec = importlib.util.spec_from_file_location(name, tmp_path / f"{name}.py")
    assert spec is not None and spec.loader is not None
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)  # lazy: nothing has run yet
    with pytest.warns(CodecWarning):
        loads(json.dumps({"$": "dc", "cls": f"{name}:Thing", "f": {"a": 1}}))
    assert not marker.exists()


def test_class_lookup_runs_no_module_getattr(monkeypatch: pytest.MonkeyPatch) -> None:
    """A module-level __getattr__ may import on demand (numpy and others do); the codec never calls it."""
    calls: list[str] = []
    lazy = types.ModuleType("codec_lazy_module")
    lazy.__getattr__ = lambda attr: calls.append(attr) or Point  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "codec_lazy_module", lazy)
    with pytest.warns(CodecWarning):
        loads(json.dumps({"$": "dc", "cls": "codec_lazy_module:Point", "f": {"x": 1, "y": 2}}))
    assert calls == []


@codec.register_class
@dataclasses.dataclass
class _CountsInits:
    n: int
    inits = 0

    def __post_init__(self) -> None:
        type(self).inits += 1


def test_dataclasses_are_restored_without_running_their_code() -> None:
    text = dumps(_CountsInits(5))
    before = _CountsInits.inits
    back = loads(text)
    assert type(back) is _CountsInits and back.n == 5
    assert _CountsInits.inits == before


@pytest.mark.parametrize("ref", ["os:system", "builtins:eval", "subprocess:Popen", "os:path.join", "nonsense", 7])
def test_a_payload_cannot_name_functions_or_non_dataclasses(ref: Any) -> None:
    with pytest.warns(CodecWarning, match="decoded it as a dict of its fields"):
        assert loads(json.dumps({"$": "dc", "cls": ref, "f": {"args": "id"}})) == {"args": "id"}


def test_dataclass_with_other_fields_than_the_loaded_class_decodes_as_dict() -> None:
    ref = f"{Point.__module__}:Point"
    with pytest.warns(CodecWarning):
        assert loads(json.dumps({"$": "dc", "cls": ref, "f": {"x": 1, "z": 2}})) == {"x": 1, "z": 2}
    assert loads(json.dumps({"$": "dc", "cls": ref, "f": {"x": 1, "y": 2}})) == Point(1, 2)


_MISSING_CALLS: list[Any] = []


@codec.register_class
class _Counted(enum.Flag):
    A = 1
    B = 2

    @classmethod
    def _missing_(cls, value: Any) -> Any:
        _MISSING_CALLS.append(value)
        return super()._missing_(value)


def test_enum_lookup_runs_no_code_of_the_class() -> None:
    payload = json.loads(dumps(_Counted.A))
    calls = len(_MISSING_CALLS)
    with pytest.warns(CodecWarning):  # value 3 is no member yet, and the class's own _missing_ is not asked
        assert loads(json.dumps({**payload, "name": None, "v": 3})) == 3
    assert loads(json.dumps(payload)) is _Counted.A
    assert len(_MISSING_CALLS) == calls
    assert loads(dumps(Perm.R | Perm.W)) is Perm.R | Perm.W  # combinations of plain flags still decode


def test_enum_members_decode_by_value_when_the_class_is_registered() -> None:
    ref = f"{Color.__module__}:Color"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert loads(json.dumps({"$": "enum", "cls": ref, "name": "?", "v": "red"})) is Color.RED


# ------------------------------------------- classes by name: only registered ones

STARTED_SUBPROCESSES: list[Any] = []


def _count_subprocesses(event: str, args: tuple[Any, ...]) -> None:
    if event == "subprocess.Popen":
        STARTED_SUBPROCESSES.append(args)


sys.addaudithook(_count_subprocesses)  # audit hooks stay for the process: this one only counts

_UNAME_PAYLOAD = json.dumps({"$": "nt", "cls": "platform:uname_result", "v": ["Linux", "h", "6", "#1", "x86_64", ""]})


def _use_every_way(value: Any) -> None:
    """What `batch`, `run --json` and an agent's observation do with an answer."""
    list(value), str(value), repr(value), hash(value), value == value


def test_a_standard_namedtuple_named_by_a_payload_arrives_plain_and_runs_nothing() -> None:
    """platform.uname_result runs ``uname -p`` when iterated, and its str() raises: a sandbox could name it."""
    import platform

    items = ["Linux", "h", "6", "#1", "x86_64", ""]
    before = len(STARTED_SUBPROCESSES)
    list(tuple.__new__(platform.uname_result, items))  # the class restored as the codec used to: the attack is real
    assert len(STARTED_SUBPROCESSES) == before + 1
    with pytest.warns(CodecWarning, match=r"namedtuple 'platform:uname_result' is not registered.*register_class"):
        value = loads(_UNAME_PAYLOAD)
    assert type(value) is tuple and value == tuple(items)
    _use_every_way(value)
    assert len(STARTED_SUBPROCESSES) == before + 1


_Loaded = collections.namedtuple("_Loaded", "a b")


@dataclasses.dataclass
class _LoadedRecord:
    a: int


class _LoadedKind(enum.Enum):
    A = 1


_REF = f"{__name__}:{{}}"


def test_loaded_classes_are_made_only_once_the_user_registers_them() -> None:
    payloads = {
        _Loaded: ({"$": "nt", "cls": _REF.format("_Loaded"), "v": [1, 2]}, (1, 2)),
        _LoadedRecord: ({"$": "dc", "cls": _REF.format("_LoadedRecord"), "f": {"a": 1}}, {"a": 1}),
        _LoadedKind: ({"$": "enum", "cls": _REF.format("_LoadedKind"), "name": "A", "v": 1}, 1),
    }
    for payload, plain in payloads.values():
        with pytest.warns(CodecWarning, match="not registered"):
            value = loads(json.dumps(payload))
        assert type(value) is type(plain) and value == plain
    for cls, (payload, _) in payloads.items():
        assert codec.register_class(cls) is cls
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert type(loads(json.dumps(payload))) is cls


def test_a_registered_class_restores_the_users_own_recordings() -> None:
    @codec.register_class
    @dataclasses.dataclass(frozen=True)
    class Reading:
        where: str
        values: tuple[float, ...]

    recorded = encode_variables({"reading": Reading("Oslo", (1.5, -2.0))})
    assert decode_variables(recorded) == {"reading": Reading("Oslo", (1.5, -2.0))}


@pytest.mark.parametrize("cls", [int, dict, os.system, types.SimpleNamespace, tuple, 3])
def test_only_enum_dataclass_and_namedtuple_classes_can_be_registered(cls: Any) -> None:
    with pytest.raises(TypeError, match="register_class takes"):
        codec.register_class(cls)


def test_a_dataclass_with_its_own_new_cannot_be_registered() -> None:
    @dataclasses.dataclass
    class Made:
        a: int

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            return super().__new__(cls)

    with pytest.raises(TypeError, match=r"object\.__new__"):
        codec.register_class(Made)


@codec.register_class
class _Open(enum.IntFlag):  # IntFlag keeps unknown bits when asked to make a value
    R = 4
    W = 2


@pytest.mark.parametrize("flag", [Perm, _Open])
@pytest.mark.parametrize("bits", [8, 4 | 8, -1, 2**70, 1.5])
def test_a_flag_with_bits_none_of_its_members_have_arrives_plain(flag: Any, bits: Any) -> None:
    payload = {"$": "enum", "cls": f"{flag.__module__}:{flag.__qualname__}", "name": None, "v": bits}
    with pytest.warns(CodecWarning, match="none of its members"):
        value = loads(json.dumps(payload))
    assert type(value) is type(bits) and value == bits


@pytest.mark.parametrize("flag", [Perm, _Open])
def test_a_flag_of_its_members_bits_decodes_as_their_combination(flag: Any) -> None:
    members = list(flag)
    combined = members[0] | members[1]
    payload = {"$": "enum", "cls": f"{flag.__module__}:{flag.__qualname__}", "name": None, "v": combined.value}
    assert loads(json.dumps(payload)) is combined
    assert loads(json.dumps({**payload, "v": 0})) is flag(0)


# ------------------------------------------------------------ resource limits

HUGE_CLAIMS = {
    "array shape": {"$": "nd", "dtype": "<f8", "shape": [10**6, 10**6], "order": "C", "b64": "AAAAAAAAAAA="},
    "array itemsize": {"$": "nd", "dtype": "<U999999999", "shape": [3], "b64": ""},
    "object items": {"$": "nd", "dtype": "|O", "shape": [10**12], "items": [1]},
    "zero-size items": {"$": "nd", "dtype": "|V0", "shape": [10**15], "order": "C", "b64": ""},
    "dims": {"$": "nd", "dtype": "<i1", "shape": [1] * 100, "b64": "AA=="},
    "negative shape": {"$": "nd", "dtype": "<i1", "shape": [-1], "b64": ""},
    "image size": {"$": "image", "mode": "RGBA", "size": [10**5, 10**5], "b64": "AAAA", "palette": None},
    "image width": {"$": "image", "mode": "RGBA", "size": [2**40, 0], "b64": "", "palette": None},
    "image mode": {"$": "image", "mode": "XYZ", "size": [1, 1], "b64": "AAAA", "palette": None},
    "pointer buffer": {
        "$": "nd",
        "dtype": "|O",
        "shape": [1],
        "order": "C",
        "b64": base64.b64encode(b"\x01" * 8).decode(),
    },
    "structured pointers": {
        "$": "nd",
        "dtype": {"names": ["p"], "formats": ["|O"], "offsets": [0], "titles": [None], "itemsize": 8, "aligned": False},
        "shape": [1],
        "b64": "AAAAAAAAAAA=",
    },
    "bad base64": {"$": "bytes", "b64": "not base64!"},
    "unknown tag": {"$": "eval", "v": "__import__('os')"},
    "tag not a string": {"$": ["tuple"], "v": []},
    "unhashable key": {"$": "dict", "v": [[[1, 2], 3]]},
    "unhashable member": {"$": "set", "v": [[1]]},
    "bad float": {"$": "float", "v": "1e999999"},
    "bad zone key": {"$": "tz", "tz": {"key": "../../../etc/passwd"}},
    "bad path class": {"$": "path", "cls": "os.system", "v": "x"},
    "huge fraction parts": {"$": "fraction", "v": ["1", 3]},
}


@pytest.mark.parametrize("payload", HUGE_CLAIMS.values(), ids=HUGE_CLAIMS.keys())
def test_hostile_payloads_fail_as_codec_errors(payload: Any) -> None:
    with pytest.raises(CodecError):
        loads(json.dumps(payload))


# Random JSON in the codec's shape: objects that carry a real tag with fields of random values.
_FIELDS = [
    "v",
    "b64",
    "hex",
    "cls",
    "name",
    "f",
    "tz",
    "fold",
    "key",
    "offset",
    "dtype",
    "shape",
    "order",
    "items",
    "mode",
    "size",
    "palette",
    "info",
    "index",
    "columns",
    "data",
    "codes",
    "categories",
    "ordered",
    "levels",
    "names",
    "mask",
    "storage",
    "na",
    "freq",
    "maxlen",
    "sub",
    "formats",
    "offsets",
    "titles",
    "itemsize",
    "form",
    "uniques",
    "lengths",
    "missing",
    "wire",
]
_json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False)
    | st.text(max_size=6)
    | st.sampled_from(["<f8", "|O", "T", "nan", "AAAA", "UTC", "Europe/Oslo", "P", "RGB", "H", "NA", "pyarrow"])
    | st.sampled_from(["codes", "utf8", "<i1", "<u2"])
)
_hostile = st.recursive(
    _json_leaves,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(_FIELDS), inner, max_size=5).flatmap(
            lambda fields: st.sampled_from(sorted(wire.DECODERS)).map(lambda tag: {**fields, "$": tag})
        )
    ),
    max_leaves=25,
)


@settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(_hostile)
def test_any_payload_decodes_or_fails_as_codec_error(payload: Any) -> None:
    """Whatever a sandbox sends, the host gets a value or a CodecError: never another exception."""
    text = json.dumps(payload)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CodecWarning)
        try:
            loads(text)
        except CodecError:
            pass


@pytest.mark.parametrize(
    "text",
    [
        "[" * 200_000 + "]" * 200_000,
        '{"a":' * 200_000 + "1" + "}" * 200_000,
        '{"$":"tuple","v":[' * 50_000 + "]}" * 50_000,
        "1" * 20_000,  # beyond the int-to-decimal digit limit
        "NaN",
        "[Infinity]",
        "{",
        "",
        "\x00",
    ],
    ids=[
        "deep lists",
        "deep dicts",
        "deep tags",
        "huge int literal",
        "nan literal",
        "inf literal",
        "truncated",
        "empty",
        "nul",
    ],
)
def test_malformed_or_deep_text_fails_as_codec_error(text: str) -> None:
    with pytest.raises(CodecError):
        loads(text)


def test_an_unknown_time_zone_says_what_to_install() -> None:
    with pytest.raises(CodecError, match=r"time zone 'Mars/Olympus_Mons' is unknown here.*tzdata"):
        loads(json.dumps({"$": "tz", "tz": {"key": "Mars/Olympus_Mons"}}))


def test_non_text_input_is_refused() -> None:
    with pytest.raises(CodecError, match="expects JSON text"):
        loads(None)  # type: ignore[arg-type]


def test_deep_and_cyclic_values_fail_before_anything_is_sent() -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(CodecError, match="variable 'deep': nested too deeply"):
        encode_variables({"deep": deep})
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    with pytest.raises(CodecError, match="contains itself"):
        dumps(cyclic)


# ------------------------------------------------------------- error messages


class _Text(str):
    pass


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({"cfg": {"items": [1, 2, 3, socket.socket]}}, "variable 'cfg'['items'][3]: cannot carry <class 'type'>"),
        ({"p": Point(x=[object()])}, "variable 'p'.x[0]: cannot carry <class 'object'>"),
        ({"k": {object: 1}}, "variable 'k'<key <class 'object'>>: cannot carry <class 'type'>"),
        ({"t": (1, _Text("s"))}, f"variable 't'[1]: cannot carry {_Text!r}"),
        ({"s": {1, frozenset({...})}}, "variable 's'"),
        ({"f": print}, "variable 'f': cannot carry <class 'builtin_function_or_method'>"),
    ],
)
def test_errors_name_the_variable_the_path_the_type_and_the_opt_in(variables: dict[str, Any], expected: str) -> None:
    with pytest.raises(CodecError) as caught:
        encode_variables(variables)
    assert expected in str(caught.value)
    assert "allow_pickle=True" in str(caught.value)


def test_a_socket_inside_a_config_is_named_exactly() -> None:
    with socket.socket() as sock, pytest.raises(CodecError) as caught:
        encode_variables({"cfg": {"items": [1, 2, 3, sock]}})
    assert str(caught.value).startswith("variable 'cfg'['items'][3]: cannot carry <class 'socket.socket'>")


def test_time_zones_it_cannot_carry_are_named() -> None:
    import datetime as dt

    class Custom(dt.tzinfo):
        def utcoffset(self, when: Any) -> dt.timedelta:
            return dt.timedelta(0)

    with pytest.raises(
        CodecError, match=r"value\[0\]: cannot carry <class 'datetime.datetime'> \(only datetime.timezone"
    ):
        dumps([dt.datetime(2020, 1, 1, tzinfo=Custom())])


# ------------------------------------------------------ self-contained source

#: Loads the codec as a kernel sandbox does (`bootstrap_code`): the shipped loader and sources, read from the
#: file named by the first argument (see `_shipped`), make the package ``_codeward_codec``; `ns` is its namespace.
LOAD_SCRIPT = r"""
import json, sys
shipped = json.load(open(sys.argv[1], encoding="utf-8"))
sources = tuple(tuple(module) for module in shipped["sources"])
loader = {}
exec(shipped["loader"], loader)
codec = loader["load_codec"]("_codeward_codec", sources)
ns = vars(codec)
"""

SANDBOX_SCRIPT = (
    r"""
import sys
for name in ("numpy", "pandas", "PIL", "PIL.Image", "codeward"):
    sys.modules[name] = None  # importing any of these now raises ImportError
"""
    + LOAD_SCRIPT
    + r"""
import dataclasses, decimal, fractions, uuid, datetime, zoneinfo, pathlib
@ns["register_class"]
@dataclasses.dataclass(frozen=True)
class Box:
    item: object
value = {(1, "k"): [1.5, float("nan"), -0.0, 2**3000, "\ud800", b"\x00", bytearray(b"b"), {1, 2}, frozenset({3}),
                    complex(1, -1), decimal.Decimal("NaN"), fractions.Fraction(1, 3), uuid.UUID(int=1),
                    datetime.datetime(2020, 1, 1, tzinfo=zoneinfo.ZoneInfo("Asia/Tokyo")), pathlib.PurePosixPath("/x"),
                    Box((1, 2))]}
back = ns["loads"](ns["dumps"](value))
item = back[(1, "k")]
assert type(item[-1]) is Box and item[-1] == Box((1, 2)), item[-1]
assert item[0] == 1.5 and item[1] != item[1] and str(item[2]) == "-0.0" and item[3] == 2**3000 and item[4] == "\ud800"
host = ns["decode_variables"](sys.stdin.read())
try:
    ns["loads"]('{"$":"nd","dtype":"<f8","shape":[1],"b64":"AAAAAAAAAAA="}')
except ns["CodecError"] as exc:
    numpy_error = str(exc)
assert loader["load_codec"]("_codeward_codec", sources) is codec  # a sandbox that has this codec keeps it
assert loader["load_codec"]("_codeward_codec", sources[:-1] + (("__init__", sources[-1][1] + "#"),)) is not codec
print(json.dumps({"host": repr(host), "numpy_error": numpy_error,
                  "loaded": sorted(m for m in ("numpy", "pandas", "PIL") if sys.modules.get(m) is not None)}))
"""
)


def _shipped(tmp_path: Path) -> str:
    """A file holding what `bootstrap_code` sends a sandbox of the codec: its loader and its modules' sources."""
    path = tmp_path / "codec.json"
    path.write_text(json.dumps({"loader": LOADER, "sources": module_sources()}), encoding="utf-8")
    return str(path)


def test_the_modules_import_only_the_standard_library_and_one_another_at_top_level() -> None:
    files = sorted(Path(codec.__file__).parent.glob("*.py"))
    assert sorted(LOAD_ORDER) == sorted(path.stem for path in files if path.stem != "source")  # all of them shipped
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top_level = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
        names = {alias.name.split(".")[0] for node in top_level if isinstance(node, ast.Import) for alias in node.names}
        names |= {
            node.module.split(".")[0] for node in top_level if isinstance(node, ast.ImportFrom) and not node.level
        }
        own = [node for node in top_level if isinstance(node, ast.ImportFrom) and node.level]
        assert all(node.level == 1 for node in own), path.name  # relative imports name the package's own modules
        assert {node.module or alias.name for node in own for alias in node.names} <= set(LOAD_ORDER) - {"__init__"}
        stdlib = set(sys.stdlib_module_names) | {"__future__"}
        assert names and names <= stdlib, (path.name, names - stdlib)


# Sandboxes may run another Python than the host: list more interpreters to try in this variable.
OTHER_PYTHONS = [p for p in os.environ.get("CODEWARD_TEST_PYTHONS", "").split(os.pathsep) if p]


@pytest.mark.parametrize("python", [sys.executable, *OTHER_PYTHONS])
def test_the_package_source_runs_alone_without_codeward_numpy_or_pandas(python: str, tmp_path: Path) -> None:
    host_payload = encode_variables({"cfg": {"n": (1, 2), "when": __import__("datetime").date(2020, 1, 2)}})
    result = subprocess.run(
        [python, "-I", "-c", SANDBOX_SCRIPT, _shipped(tmp_path)],
        input=host_payload,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["host"] == "{'cfg': {'n': (1, 2), 'when': datetime.date(2020, 1, 2)}}"
    assert "numpy cannot be imported here" in report["numpy_error"]
    assert report["loaded"] == []


ECHO_SCRIPT = (
    LOAD_SCRIPT
    + r"""
value = ns["loads"](sys.stdin.read())
print(ns["dumps"](value))
"""
)


def _has_data_libraries(python: str) -> bool:
    probe = subprocess.run([python, "-c", "import numpy, pandas, PIL"], capture_output=True, check=False, timeout=60)
    return probe.returncode == 0


@pytest.mark.parametrize("python", OTHER_PYTHONS or [pytest.param("", id="no-other-python")])
def test_data_values_cross_to_another_interpreter_and_back(python: str, tmp_path: Path) -> None:
    """A sandbox on another venv may have other numpy/pandas/PIL versions: values must survive both ways."""
    if not python:
        missing("set CODEWARD_TEST_PYTHONS to another interpreter with numpy, pandas and Pillow: .ci/other-pythons.sh")
    import numpy as np
    import pandas as pd
    from PIL import Image

    from tests.executors.test_codec import same

    if not _has_data_libraries(python):  # CODEWARD_TEST_PYTHONS names it: a missing library is a failure
        pytest.fail(
            f"{python} has no numpy, pandas and PIL: install them there, or leave it out of CODEWARD_TEST_PYTHONS"
        )
    frame = pd.DataFrame(
        {
            "i": np.arange(3),
            "f": [0.5, np.nan, -0.0],
            "o": pd.Series(["a", None, (1, 2)], dtype=object),
            "s": pd.array(["x", None, "z"], dtype=pd.StringDtype("python")),  # pyarrow may be missing there
            "n": pd.array([1, None, 3], dtype="Int64"),
            "c": pd.Categorical([1, 2, 1], ordered=True),
            "t": pd.date_range("2020-03-28", periods=3, freq="D", tz=zoneinfo.ZoneInfo("Europe/Oslo")),
        },
        index=pd.MultiIndex.from_arrays([[1, 1, 2], pd.Index([10, 20, 10], dtype="int16")], names=["k", ("v", 1)]),
    )
    frame.columns = pd.Index(frame.columns, dtype=object)  # pandas before 3 has no "str" dtype
    image = Image.new("P", (3, 2), 1)
    image.putpalette([0, 0, 0, 255, 0, 0])
    value = {
        "frame": frame,
        "series": pd.Series([1.5, 2.5], index=pd.date_range("2021", periods=2, freq="h"), name="x"),
        "array": np.array([(1, 2.0 + 1j, "2020-01-01")], dtype=[("a", ">i2"), ("b", "c8"), ("c", "M8[s]")]),
        "scalar": np.float16(-0.0),
        "image": image,
    }
    result = subprocess.run(
        [python, "-I", "-c", ECHO_SCRIPT, _shipped(tmp_path)],
        input=dumps(value),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert same(value, loads(result.stdout))
