"""numpy and pandas routes to files and internals that no name list catches.

pandas looks functions given by name up with ``getattr`` (``s.apply('to_csv', ...)``,
``s.agg('_mgr')``), where no guard runs; methods read from a class, a ``super()`` or
the code's own subclass skipped the vetting ``df.to_csv`` gets; and whole modules
(``pd.io.common``, ``pd.io.stata``, numpy's npyio) open files through functions
and classes with other names. Each test shows the routes refused, then the
ordinary use of the same feature still working.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codeward.executors import LocalExecutor

np = pytest.importorskip("numpy")
pd = pytest.importorskip("pandas")

DATA = {"authorized_imports": ["numpy", "pandas"]}
FRAME = "import pandas as pd\ndf = pd.DataFrame({'k': ['a', 'a', 'b'], 'v': [1.0, 2.0, 3.0]})\n"


def run(code: str, isolation: str = "in_process", **options: Any) -> Any:
    with LocalExecutor(isolation=isolation, **DATA, **options) as executor:
        return executor.run(code).output


# Functions named by strings -------------------------------------------------------
NAMED = {
    "series-apply-writes": "pd.Series([1]).apply('to_csv', args=('CANARY',))",
    "frame-apply-writes": "try:\n    df.apply('to_csv', args=('CANARY',))\nexcept AttributeError:\n    pass  # written",
    "agg-private": "pd.Series([1]).agg('_mgr')",
    "getattribute-unwraps-to_csv": "pd.Series([1]).apply('__getattribute__', args=('to_csv',))('CANARY')",
    "nested-in-dict-and-list": "df.agg({'v': ['sum', '_mgr']})",
    "tuple-of-names": "pd.Series([1]).agg(('sum', '_mgr'))",
    "groupby-apply": "df.groupby('k').apply('_selected_obj')",
    "groupby-agg": "df.groupby('k').agg('__getattribute__', '_selected_obj')",
    "rolling-agg": "df.v.rolling(1).agg('_selected_obj')",
    "expanding-agg": "df.v.expanding().agg('_selected_obj')",
    "resample-agg": "pd.Series([1], index=pd.date_range('2024', periods=1)).resample('D').agg('_selected_obj')",
    "pivot_table-aggfunc": "pd.pivot_table(df, values='v', index='k', aggfunc='_selected_obj')",
    "pivot_table-method": "df.pivot_table(values='v', index='k', aggfunc='_selected_obj')",
    "crosstab-aggfunc": "pd.crosstab(df.k, df.k, values=df.v, aggfunc='_selected_obj')",
    "unbound-apply": "pd.Series.apply(pd.Series([1]), 'to_csv', args=('CANARY',))",
}


@pytest.mark.parametrize("call", NAMED.values(), ids=NAMED.keys())
def test_functions_named_by_strings_are_checked_as_attributes(call, attack):
    """pandas resolves a string with getattr: private internals, or to_csv unwrapped."""
    attack(FRAME + call, **DATA)


def test_names_in_str_subclasses_and_list_like_objects_are_checked(attack):
    """A str subclass could show the check another name; an object of the code's own
    could list other names to pandas than to the check: pandas gets a checked copy."""
    attack(
        FRAME + "class Name(str):\n    def startswith(self, *args):\n        return False\n"
        "pd.Series([1]).agg(Name('_mgr'))",
        **DATA,
    )
    attack(
        FRAME + "class Names:\n    def __iter__(self):\n        return iter(['_mgr'])\n"
        "    def __len__(self):\n        return 1\npd.Series([1]).agg(Names())",
        **DATA,
    )
    code = FRAME + (
        "import numpy as np\nout = [df.agg('sum').v, df.groupby('k').v.agg(['mean', 'max']).values.tolist(),\n"
        "    df.groupby('k').agg(total=('v', 'sum'), n=pd.NamedAgg(column='v', aggfunc='count')).values.tolist(),\n"
        "    df.groupby('k').v.agg(top='max').values.tolist(), df.v.apply(len if False else abs).tolist(),\n"
        "    df.v.transform('cumsum').tolist(), df.groupby('k').v.transform('cumsum').tolist(),\n"
        "    pd.pivot_table(df, values='v', index='k', aggfunc=['sum']).values.tolist(),\n"
        "    pd.crosstab(df.k, df.k, values=df.v, aggfunc='sum').fillna(0).values.tolist(),\n"
        "    df.v.rolling(2).agg('sum').fillna(0).tolist(), df.agg({'v': ['min', 'max']}).v.tolist(),\n"
        "    df.v.agg('sqrt').tolist()[0], pd.Series(['ab']).apply(len).tolist(), df.pipe(len),\n"
        "    int(df.groupby('k').apply(str).size)]\nout"
    )
    assert run(code) == [
        6.0,
        [[1.5, 2.0], [3.0, 3.0]],
        [[3.0, 2], [3.0, 1]],
        [[2.0], [3.0]],
        [1.0, 2.0, 3.0],
        [1.0, 3.0, 6.0],
        [1.0, 3.0, 3.0],
        [[3.0], [3.0]],
        [[3.0, 0.0], [0.0, 3.0]],
        [0.0, 3.0, 5.0],
        [1.0, 3.0],
        1.0,
        [2],
        3,
        2,
    ]


# Methods read from a class, a super() or a subclass -----------------------------------
FROM_CLASSES = {
    "class": "pd.DataFrame.to_csv(df, 'CANARY')",
    "type-of": "type(df).to_csv(df, 'CANARY')",
    "numpy-class": "import numpy as np\nnp.ndarray.tofile(np.arange(3), 'CANARY')",
    "own-subclass": "class Mine(pd.DataFrame):\n    pass\nMine({'a': [1]}).to_csv('CANARY')",
    "super": "class Mine(pd.DataFrame):\n    def save(self):\n        return super().to_csv('CANARY')\n"
    "Mine({'a': [1]}).save()",
    "pipe-keyword": "pd.Series([1]).pipe((pd.Series.to_csv, 'self'), path_or_buf='CANARY')",
    "methodcaller": "import operator\ndf.pipe(operator.methodcaller('to_csv', 'CANARY'))",
    "computed-name": "getattr(df, 'to_' + 'csv')('CANARY')",
}


@pytest.mark.parametrize("code", FROM_CLASSES.values(), ids=FROM_CLASSES.keys())
def test_file_methods_reached_around_the_object_are_vetted(code, attack):
    attack(FRAME + code, **DATA)
    assert run(FRAME + "class Mine(pd.DataFrame):\n    pass\nMine({'a': [1]}).to_csv(index=False)") == "a\n1\n"


# File access outside the name lists -----------------------------------------------------
@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret.csv"
    path.write_text("a,b\n1,2\n")
    np.savez(tmp_path / "secret.npz", a=np.arange(3))
    return path


UNNAMED = {
    "io-common-get_handle": "pd.io.common.get_handle('CANARY', 'w').handle.close()",
    "io-json-to_json": "pd.io.json.to_json('CANARY', df)",
    "io-formats-save_to_buffer": "pd.io.formats.format.save_to_buffer('x', buf='CANARY')",
    "io-stata-writer": "pd.io.stata.StataWriter('CANARY', pd.DataFrame({'a': [1.0]})).write_file()",
    "io-parsers-reader": "pd.io.parsers.TextFileReader('SECRET.csv').read()",
    "formatter-re-exported": "f = pd.core.generic.DataFrameFormatter(df)\n"
    "pd.core.generic.DataFrameRenderer(f).to_string(buf='CANARY')",
    "npyio-NpzFile": "import numpy as np\nnp.lib.npyio.NpzFile('SECRET.npz')['a']",
    "show_versions": "pd.show_versions(as_json='CANARY')",
}


@pytest.mark.parametrize("code", UNNAMED.values(), ids=UNNAMED.keys())
def test_file_access_is_refused_by_where_the_code_comes_from(code, secret, attack):
    """pandas.io and numpy's npyio open files under many names: refused wherever they are found."""
    attack(FRAME + code, replace={"SECRET": str(secret.with_suffix(""))}, **DATA)
    assert run("import pandas as pd\npd.json_normalize([{'a': {'b': 1}}]).columns.tolist()") == ["a.b"]


# Host-wide state: plotting backends, accessors, dataclass fields ------------------------
BACKENDS = {
    "set_option": "pd.set_option('plotting.backend', 'mpmath')",
    "set_option-pattern": "pd.set_option('backend', 'mpmath')",
    "option_context": "with pd.option_context('plotting.backend', 'mpmath'):\n    pass",
    "options-attribute": "pd.options.plotting.backend = 'mpmath'",
    "own-options-wrapper": "setattr(type(pd.options)({'ing.backend': 1}, 'plot'), 'ing.backend', 'mpmath')",
    "plot-keyword": "try:\n    df.plot(backend='mpmath')\nexcept TypeError:\n    pass  # mpmath.plot was called",
    "groupby-plot": "try:\n    df.groupby('k').plot.line(backend='mpmath')\nexcept TypeError:\n    pass",
    "accessor-class": "try:\n    pd.plotting.PlotAccessor(df)(backend='mpmath')\nexcept TypeError:\n    pass",
}


@pytest.mark.parametrize("code", BACKENDS.values(), ids=BACKENDS.keys())
def test_plotting_backends_cannot_import_and_call_modules(code, attack):
    """A backend is a module name: pandas imports it and calls its plot() with the code's arguments
    (mpmath, which the test extra installs, has one)."""
    attack(FRAME + code, **DATA)
    assert run(FRAME + "pd.set_option('display.max_rows', 5)\npd.options.display.max_columns = 5\n1") == 1


def test_accessors_cannot_be_registered_on_the_hosts_classes(attack):
    """register_dataframe_accessor('sum') replaces DataFrame.sum for every frame the host makes."""
    attack(
        FRAME + "class Fake:\n    def __init__(self, frame):\n        pass\n"
        "pd.api.extensions.register_dataframe_accessor('sum')(Fake)",
        **DATA,
    )
    assert not isinstance(pd.DataFrame.sum, type)


def test_dataclass_fields_cannot_be_renamed(attack):
    """asdict and replace read every field's name with getattr, where no guard runs."""
    attack(
        "import dataclasses\n@dataclasses.dataclass\nclass P:\n    x: int = 1\n"
        "dataclasses.fields(P)[0].name = '__class__'\ndataclasses.asdict(P())['__class__']"
    )
    code = "import dataclasses\n@dataclasses.dataclass\nclass P:\n    x: int = 1\n(dataclasses.fields(P)[0].name, dataclasses.asdict(P(2)))"
    assert run(code) == ("x", {"x": 2})


@pytest.mark.parametrize(
    "code",
    [
        "import numpy as np\nnp.lib.stride_tricks.as_strided(np.zeros(1), shape=(64,), strides=(8,)).tolist()",
        "from numpy.lib.stride_tricks import as_strided\nimport numpy as np\nas_strided(np.zeros(1), (64,), (8,))",
    ],
    ids=["attribute", "from-import"],
)
def test_arrays_cannot_read_memory_outside_themselves(code, attack):
    """as_strided trusts its strides: in process, what lies past the array is the host's memory."""
    error = attack(code, authorized_imports=["numpy", "numpy.*"])
    assert "sliding_window_view" in error.message
