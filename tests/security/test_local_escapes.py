"""Attacks on the local executor: each technique in its own test, each must fail cleanly.

The payload of every attack is to create the canary file through os/subprocess
or builtins; the tests assert the attack raised a clear error and the file does
not exist. Published escapes of smolagents' LocalPythonExecutor are marked.
"""

from __future__ import annotations

import pytest

from codeward.executors import LocalExecutor

SHELL = "system('touch CANARY')"


# Dunder and underscore access, by every route ---------------------------------
@pytest.mark.parametrize(
    "code",
    [
        "().__class__.__bases__[0].__subclasses__()",
        "getattr((), '__class__')",
        "getattr(getattr((), '__cl' + 'ass__'), '__bases__')",
        "x = '__class__'\ngetattr(1, x)",
        "'{0.__class__.__base__}'.format(1)",
        "'{x.__class__}'.format_map({'x': 1})",
        "str.format('{0.__class__}', 1)",
        "import string\nstring.Formatter().format('{0.__class__}', 1)",
        "import operator\noperator.attrgetter('__class__')(1)",
        "import operator\noperator.methodcaller('__reduce_ex__', 2)(1)",
        "f'{().__class__}'",
        "def f(a):\n    pass\nsetattr(f, '__defaults__', (1,))",
        "vars()",
        "globals()",
        "__builtins__",
        "'a'.__mul__(3)",
        "{'x': 1}.__getitem__('x')",
        "getattr('%d', '__mod__')(1)",
    ],
    ids=lambda c: c[:40],
)
def test_dunder_and_underscore_access_is_refused(code, attack):
    attack(code)


def test_class_hierarchy_walk_to_popen_is_refused(attack):
    """CVE-2025-9959 (smolagents): walk object's subclasses to subprocess.Popen."""
    error = attack(
        "for c in ().__class__.__base__.__subclasses__():\n"
        "    if c.__name__ == 'Popen':\n"
        "        c(['touch', 'CANARY'])"
    )
    assert "_" in error.message


def test_type_mro_walk_is_refused(attack):
    attack("type(1).mro()[-1]")


def test_function_globals_are_refused(attack):
    """CVE-2025-5120 (smolagents): a function's globals lead to builtins and os."""
    attack("def f():\n    pass\nf.__globals__['__builtins__'].__import__('os')." + SHELL)


def test_function_code_is_refused(attack):
    attack("def f():\n    pass\ngetattr(f, '__code__')")


def test_tool_internals_are_refused(attack):
    reach = ".forward.__globals__['__builtins__']['open']('CANARY', 'w').close()"
    attack("getattr(final_answer, '_call')" + reach, tools=True)
    attack("final_answer._call" + reach, tools=True)


# Frames and tracebacks --------------------------------------------------------
def test_generator_frame_is_refused(attack):
    attack("g = (x for x in [1])\ng.gi_frame.f_builtins['open']('CANARY', 'w').close()")


def test_generator_frame_by_getattr_is_refused(attack):
    attack("g = (x for x in [1])\ngetattr(g, 'gi_frame')")


def test_traceback_frame_is_refused(attack):
    attack("try:\n    1/0\nexcept Exception as e:\n    e.__traceback__.tb_frame.f_back.f_globals")


def test_traceback_by_getattr_is_refused(attack):
    attack("try:\n    1/0\nexcept Exception as e:\n    tb = getattr(e, '__traceback__')")


def test_exception_context_is_refused(attack):
    attack("try:\n    1/0\nexcept Exception as e:\n    getattr(e, '__context__')")


def test_format_string_reaching_frames_is_refused(attack):
    attack("g = (x for x in [1])\n'{0.gi_frame.f_globals}'.format(g)")


# Reaching os / builtins / sys through allowed modules ------------------------
@pytest.mark.parametrize(
    "code",
    [
        "import random\nrandom._os." + SHELL,  # smolagents: random._os
        "import random\ngetattr(random, '_os')." + SHELL,
        "import collections\ncollections._sys.modules['os']." + SHELL,
        "import re\ngetattr(re, '_compiler')",
        "import typing\ngetattr(typing, 'sys').modules['os']." + SHELL,
        "import statistics\nstatistics.sys.modules['os']." + SHELL,
        "import typing\ntyping.sys.modules['os']." + SHELL,
        "import dataclasses\ndataclasses.sys.modules['os']." + SHELL,
        "import functools\nfunctools.reduce.__self__",
        "import json\njson.codecs.open('CANARY', 'w').close()",
        "import dataclasses\ndataclasses.inspect.stack()",
    ],
    ids=lambda c: c[:45],
)
def test_machine_modules_through_allowed_modules_are_refused(code, attack):
    attack(code)


def test_module_found_as_an_attribute_is_refused_by_name(attack):
    error = attack("import statistics\nstatistics.sys")
    assert "'sys' is not allowed" in error.message


@pytest.mark.parametrize(
    "code",
    [
        "import os\nos." + SHELL,
        "import subprocess",
        "import builtins\nbuiltins.open('CANARY', 'w')",
        "import importlib\nimportlib.import_module('os')",
        "from os import system",
        "import os.path",
        "import ctypes",  # smolagents issue 2094: ctypes escape
        "import pickle",
        "import sys",
        "import io\nio.open('CANARY', 'w')",
        "__import__('os')." + SHELL,
        "from random import _os",
        "import _thread",
        "import inspect",
        "import gc\ngc.get_objects()",
    ],
    ids=lambda c: c[:40],
)
def test_import_tricks_are_refused(code, attack):
    attack(code)


def test_eval_exec_are_absent_and_open_reaches_only_the_working_folder(attack):
    for code in ("open('CANARY', 'w').write('x')", "eval('1')", "exec('x = 1')", "compile('1', 'f', 'eval')"):
        attack(code)


def test_three_argument_type_is_refused(attack):
    error = attack("T = type('T', (), {'__del__': lambda self: None})")
    assert "type() takes one argument" in error.message


def test_string_annotations_cannot_be_evaluated_through_typing(attack):
    attack('import typing\ndef f(x: "().__class__.__base__"):\n    pass\ntyping.get_type_hints(f)')


def test_singledispatch_annotation_eval_is_refused(attack):
    attack("import functools\nfunctools.singledispatch")


def test_make_dataclass_with_special_namespace_is_refused(attack):
    attack("import dataclasses\ndataclasses.make_dataclass('X', [], namespace={'__del__': print})")


# Changing the host ------------------------------------------------------------
def test_host_modules_cannot_be_patched(attack):
    import json

    attack("import json\njson.dumps = lambda *a, **k: 'pwned'")
    assert json.dumps(1) == "1"


def test_host_classes_cannot_be_patched(attack):
    import collections

    attack("import collections\ncollections.UserDict.extra = 1")
    assert not hasattr(collections.UserDict, "extra")


def test_host_functions_cannot_be_patched(attack):
    attack("import textwrap\ntextwrap.dedent.extra = 1")


def test_model_defined_del_is_refused(attack):
    """smolagents ran an agent-defined __del__ on the host after the step."""
    error = attack("class Bomb:\n    def __del__(self):\n        open('CANARY', 'w')\nb = Bomb()\ndel b")
    assert "'__del__' is not allowed" in error.message


@pytest.mark.parametrize(
    "method", ["__getattr__", "__getattribute__", "__setattr__", "__get__", "__set_name__", "__reduce__"]
)
def test_special_methods_that_change_lookup_are_refused(method, attack):
    attack(f"class A:\n    def {method}(self, *a):\n        pass")


def test_atexit_and_threads_are_unreachable(attack):
    attack("import atexit")
    attack("import threading")


def test_async_code_is_refused(attack):
    attack("async def f():\n    pass")


def test_except_star_cannot_swallow_the_time_limit(attack):
    """except* wraps what it catches in an ExceptionGroup; the sandbox's limits inside one still stop the block."""
    code = "while True:\n    try:\n        while True:\n            pass\n    except* BaseException:\n        pass"
    attack(code, control="exhausts", timeout_seconds=0.5, max_operations=10**15)


@pytest.mark.parametrize(
    "code",
    [
        "type(int)('X', (), {'__del__': lambda self: None})",
        "type(type(1))('X', (), {})",
        "class Meta(type):\n    pass",
        "import collections\ntype(collections.abc.Sized)",
    ],
    ids=lambda c: c[:40],
)
def test_metaclasses_cannot_build_classes_with_special_methods(code, attack):
    attack(code)


def test_machine_time_zone_cannot_be_changed(attack):
    attack("import time\ntime.tzset()")


@pytest.mark.parametrize(
    "code",
    ["raise SystemExit(0)", "raise KeyboardInterrupt", "class Stop(BaseException):\n    pass\nraise Stop()"],
    ids=["SystemExit", "KeyboardInterrupt", "own-BaseException"],
)
def test_code_cannot_stop_the_host_process(code, attack):
    attack(code, control="stops")


def test_host_abstract_classes_cannot_register_host_types(attack):
    import collections.abc

    attack("import collections.abc\ncollections.abc.Mapping.register(int)")
    assert not isinstance(5, collections.abc.Mapping)


def test_a_huge_width_through_the_sandbox_formatter_is_refused(attack):
    error = attack("import string\nstring.Formatter().format('{:>2000000000}', 1)", control="exhausts")
    assert "the sandbox allows" in error.message


@pytest.mark.parametrize(
    ("make", "private"),
    [
        ("import string\nhelper = string.Formatter()", "_guards"),
        ("helper = range(10**12)", "_source"),
        ("import itertools\nhelper = itertools.count()", "gi_frame"),
    ],
    ids=["formatter", "range", "itertools"],
)
def test_sandbox_helpers_the_code_holds_expose_nothing(make, private, attack):
    """The sandbox hands the code its own versions of some objects; their insides hold host
    objects (the guards, the real iterator). The control is the helper itself, read on the host."""
    with LocalExecutor(isolation="in_process") as executor:  # the helper object itself, on the host
        helper = executor.run(make + "\nhelper").output
    attack(make + f"\ngetattr(helper, {private!r})", control=lambda: getattr(helper, private) is not None)


def test_guarded_builtin_types_hold_their_guard_out_of_reach(attack):
    """bytes, bytearray, range and type are stand-ins holding the real type and the guarded call."""
    from codeward.executors.local.builtin_types import BuiltinType, type_of

    held = BuiltinType(type, type_of)
    attack("getattr(type, '_call')('X', (), {'__del__': print})", control=lambda: held._call is type_of)
    attack("getattr(bytes, '_real')(10**12)", control=lambda: held._real is type)
