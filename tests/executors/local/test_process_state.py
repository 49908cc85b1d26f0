"""numpy's and pandas' process-wide state, in the host's own process: what the code sets there is
its own, from block to block, and never the host's.

Attacks on the host's process with their own controls (the protection switched off in this test
process, which the unsandboxed harness cannot show: it runs each block in a copy of the process).
"""

from __future__ import annotations

from typing import Any

import pytest

from codeward.executors.base import ExecutionError
from codeward.executors.local import LocalExecutor, crossing, guards, imports, interpreter
from codeward.executors.local.limits import BudgetSpentOutsideRun, make_tick

np = pytest.importorskip("numpy")
pd = pytest.importorskip("pandas")

pytestmark = pytest.mark.timeout(120)

INSTALL = """
import numpy as np
import pandas as pd
seen = []
def grab(x):
    seen.append(x)
    return "%.2f" % x
def on_error(kind, flag):
    seen.append("fp-error:" + kind)
pd.set_option("display.float_format", grab)
pd.set_option("display.max_rows", 7)
np.set_printoptions(formatter={"float_kind": grab})
np.seterrcall(on_error)
np.seterr(all="call")
"""


def _hosts_work() -> None:
    """The host's own data, never given to the code."""
    str(pd.DataFrame({"salary": [987654.32]}))
    str(np.array([3.14159]))
    np.float64(1.0) / np.float64(0.0)


def _host_settings() -> tuple[Any, ...]:
    return np.geterr()["divide"], np.geterrcall(), pd.get_option("display.float_format"), np.get_printoptions()


@pytest.fixture
def host_settings_restored():
    saved = np.geterr(), np.geterrcall(), np.get_printoptions()
    yield
    np.seterr(**saved[0])
    np.seterrcall(saved[1])
    np.set_printoptions(**saved[2])
    pd.reset_option("display.float_format")
    pd.reset_option("display.max_rows")


def test_settings_the_code_makes_never_reach_the_hosts_work(monkeypatch, host_settings_restored):
    before = _host_settings()
    with monkeypatch.context() as shared:
        shared.setattr(crossing.CodeSettings, "run", lambda self, action: action())  # control
        shared.setattr(interpreter, "_BETWEEN_BLOCKS", make_tick(10**9, BudgetSpentOutsideRun))  # and may run
        with LocalExecutor(isolation="in_process", authorized_imports=["numpy", "pandas"]) as ex:
            ex.run(INSTALL)
            _hosts_work()
            assert 987654.32 in ex.run("seen").output, "control: the code's formatter saw the host's data"
    np.seterr(all="warn", under="ignore")
    np.seterrcall(None)
    np.set_printoptions(formatter=None)
    pd.reset_option("display.float_format")
    pd.reset_option("display.max_rows")
    before = _host_settings()

    with LocalExecutor(isolation="in_process", authorized_imports=["numpy", "pandas"]) as ex:
        ex.run(INSTALL)
        assert _host_settings() == before
        with pytest.warns(RuntimeWarning):
            _hosts_work()
        assert ex.run("seen").output == []
        # The code's settings are its own from block to block, as in a worker.
        kept = (
            "[np.geterr()['divide'], pd.get_option('display.max_rows'), pd.get_option('display.float_format') is grab]"
        )
        assert ex.run(kept).output == ["call", 7, True]
    assert pd.get_option("display.max_rows") == 60


def test_the_same_settings_hold_in_a_worker():
    code = (
        INSTALL + "np.float64(1.0) / np.float64(0.0)\n[np.geterr()['divide'], pd.get_option('display.max_rows'), seen]"
    )
    outputs = []
    for isolation in ("in_process", "process"):
        with LocalExecutor(isolation=isolation, authorized_imports=["numpy", "pandas"]) as ex:
            outputs.append(ex.run(code).output)
    assert outputs[0] == outputs[1] == ["call", 7, ["fp-error:divide by zero"]]


def test_pandas_first_loaded_by_the_code_goes_back_to_its_defaults():
    """A library the host had not loaded: its options go back to their defaults after the block."""
    import subprocess
    import sys

    probe = (
        "from codeward.executors.local import LocalExecutor\n"
        "ex = LocalExecutor(isolation='in_process', authorized_imports=['pandas'])\n"
        "ex.run(\"import pandas as pd\\npd.set_option('display.max_rows', 7)\")\n"
        "import pandas as pd\n"
        "print(pd.get_option('display.max_rows'), ex.run(\"pd.get_option('display.max_rows')\").output)\n"
    )
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert shown.stdout.split() == ["60", "7"]


def test_a_libraries_own_table_cannot_be_changed_by_the_code(monkeypatch):
    """numpy's C code reads dtype names in numpy.sctypeDict: a write there changed the host's
    float64 arrays into float16 ones."""
    attack = "import numpy as np\nnp.sctypeDict['float64'] = np.float16"
    with monkeypatch.context() as writable:
        writable.setattr(imports, "_read_only", lambda value: value)  # control
        with LocalExecutor(isolation="in_process", authorized_imports=["numpy"]) as ex:
            try:
                ex.run(attack)
                assert np.array([123456.789], dtype="float64").dtype == np.float16, "control: the host's dtype changed"
            finally:
                np.sctypeDict["float64"] = np.float64
    with LocalExecutor(isolation="in_process", authorized_imports=["numpy"]) as ex:
        with pytest.raises(ExecutionError, match="does not support item assignment"):
            ex.run(attack)
        with pytest.raises(ExecutionError, match="has no attribute 'update'"):
            ex.run("np.sctypeDict.update({'float64': np.float16})")
        assert ex.run("np.sctypeDict['float64'] is np.float64").output is True
    assert np.array([123456.789], dtype="float64").dtype == np.float64


def test_numpy_global_random_state_is_the_codes_own(monkeypatch):
    """Seeded by the code, the host's global random state would give the host draws the code chose."""
    attack = "import numpy as np\nnp.random.seed(1234)"
    expected = np.random.RandomState(1234).randint(0, 10**6, 5).tolist()
    with monkeypatch.context() as shared:
        shared.setattr(guards, "private_numpy_random", dict)  # control
        with LocalExecutor(isolation="in_process", authorized_imports=["numpy"]) as ex:
            ex.run(attack)
            assert np.random.randint(0, 10**6, 5).tolist() == expected, "control: the code chose the host's draws"
    with LocalExecutor(isolation="in_process", authorized_imports=["numpy"]) as ex:
        ex.run(attack)
        assert np.random.randint(0, 10**6, 5).tolist() != expected
        assert ex.run("np.random.randint(0, 10**6, 5).tolist()").output == expected  # the code's own state
        with pytest.raises(ExecutionError, match="global random state"):
            ex.run("np.random.get_bit_generator()")


#: Settings numpy and pandas keep on objects of their modules: (the change, what the host sees, undo).
MODULE_SETTINGS = {
    "masked-print": (
        "np.ma.masked_print_option.set_display('HACKED')",
        lambda: str(np.ma.masked_array([1, 2], mask=[0, 1])),
        lambda: np.ma.masked_print_option.set_display("--"),
    ),
    "polynomial-style": (
        "np.polynomial.set_default_printstyle('ascii')",
        lambda: str(np.polynomial.Polynomial([1, 2])),
        lambda: np.polynomial.set_default_printstyle("unicode"),
    ),
    "plot-params": (
        "pd.plotting.plot_params['x_compat'] = True",
        lambda: pd.plotting.plot_params["x_compat"],
        lambda: pd.plotting.plot_params.reset(),
    ),
}


@pytest.mark.parametrize(("change", "seen", "undo"), MODULE_SETTINGS.values(), ids=MODULE_SETTINGS.keys())
def test_a_setting_kept_on_a_library_module_is_refused(change, seen, undo):
    before = seen()
    try:
        exec(change, {"np": np, "pd": pd})  # control: plain Python changes what the host sees
        assert seen() != before, "control: the setting is the host's"
    finally:
        undo()
    assert seen() == before
    with (
        LocalExecutor(isolation="in_process", authorized_imports=["numpy", "pandas"]) as ex,
        pytest.raises(ExecutionError, match="a setting of the whole process"),
    ):
        ex.run("import numpy as np\nimport pandas as pd\n" + change)
    assert seen() == before
