"""Published escapes of in-process Python sandboxes, replayed against the local executor.

Sources: smolagents' LocalPythonExecutor advisories and issues (CVE-2025-5120,
CVE-2025-9959, the str.format field-path bypass, the ctypes escape, the
Windows nt.system alias), and the format-string chains reported against other
agent sandboxes. Each must fail with a clear error and leave the host untouched.
"""

from __future__ import annotations

import pytest

# A limit that failed would leave the code running: the per-test timeout turns that
# into a failure, so no test measures time itself.
pytestmark = pytest.mark.timeout(60)


def test_format_field_path_walks_class_hierarchy(attack):
    """smolagents PR 2271: '{0.__class__.__bases__[0].__subclasses__}'.format('a')."""
    error = attack("'{0.__class__.__bases__[0].__subclasses__}'.format('a')")
    assert "__class__" in error.message


def test_format_field_path_through_function_globals_to_os(attack):
    """Format-string chain from a module function's globals to os.environ."""
    attack("import json\n'{0.__globals__[codecs].open.__globals__[sys].modules[os].environ}'.format(json.dumps)")


def test_format_payload_built_at_run_time(attack):
    """The same chain, with the field assembled from pieces so no literal shows it."""
    attack("import json\nfield = '{0.' + '__glob' + 'als__}'\nfield.format(json.dumps)")


def test_format_map_payload(attack):
    attack("import json\n'{f.__globals__}'.format_map({'f': json.dumps})")


def test_getattr_on_builtins_name(attack):
    """getattr(__builtins__, 'open'): the name itself is refused."""
    attack("getattr(__builtins__, 'open')('CANARY', 'w')")


def test_aliased_import_and_getattr(attack):
    """import socket as s; getattr(s, 'socket')()."""
    attack("import socket as s\ngetattr(s, 'socket')()")


def test_posix_system_alias(attack):
    """smolagents issue 2232: os.system lives in posix (nt on Windows)."""
    attack("import posix\nposix.system('touch CANARY')")


def test_system_reached_as_a_re_export(attack):
    """A machine function re-exported by an allowed module is refused wherever it is found."""
    attack("import time\ntime.sleep.__self__")


@pytest.mark.parametrize("module", ["os", "subprocess", "shutil", "pty", "multiprocessing", "runpy", "code"])
def test_machine_modules_are_not_importable_by_default(module, attack):
    error = attack(f"import {module}")
    assert f"import of {module!r} is not allowed" in error.message


@pytest.mark.parametrize(
    "code",
    [
        "class S(str):\n    pass\nS('{0.__class__}').format(1)",
        "class S(str):\n    pass\nS.format('{0.__class__}', 1)",
        "import operator\noperator.methodcaller('format', 1)('{0.__class__}')",
        "import operator\noperator.attrgetter('format')('{0.__class__}')(1)",
        "import functools\nfunctools.reduce(getattr, ['format'], '{0.__class__}')(1)",
        "f = getattr(str, 'format')\nf('{0.__class__}', 1)",
    ],
    ids=["subclass-method", "subclass-class", "methodcaller", "attrgetter", "reduce-getattr", "getattr-str"],
)
def test_format_reached_indirectly_still_refuses_private_fields(code, attack):
    error = attack(code)
    assert "__class__" in error.message
