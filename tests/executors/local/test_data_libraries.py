"""numpy and pandas in the local executor: data work runs, and a workspace opens to file functions."""

from __future__ import annotations

import pytest

from codeward.executors import LocalExecutor

np = pytest.importorskip("numpy")
pd = pytest.importorskip("pandas")

DATA = ["numpy", "pandas"]


def test_data_work_runs():
    with LocalExecutor(authorized_imports=DATA) as ex:
        out = ex.run(
            "import numpy as np\nimport pandas as pd\n"
            "df = pd.DataFrame({'a': [1, 2, 3], 'b': [4, 5, 6]})\n"
            "df['c'] = df.a * df.b\ndf.columns = ['x', 'y', 'z']\n"
            "arr = np.arange(6).reshape(2, 3)\n"
            "(int(df.z.sum()), df.groupby(df.x > 1).y.mean().tolist(), float(np.linalg.norm([3, 4])), "
            "int(arr.T.sum()), float(np.random.default_rng(0).random() < 1), df.to_csv(index=False), "
            "df.to_dict('list'))"
        ).output
    assert out[:5] == (32, [4.0, 5.5], 5.0, 15, 1.0)
    assert out[5].startswith("x,y,z") and out[6]["x"] == [1, 2, 3]


def test_allowed_paths_open_the_workspace_to_file_functions(tmp_path):
    workspace = tmp_path / "work"
    workspace.mkdir()
    (workspace / "in.csv").write_text("a,b\n1,2\n3,4\n")
    with LocalExecutor(authorized_imports=DATA, allowed_paths=[workspace]) as ex:
        total = ex.run(
            f"import pandas as pd\nimport numpy as np\ndf = pd.read_csv({str(workspace / 'in.csv')!r})\n"
            f"df.to_csv({str(workspace / 'out.csv')!r}, index=False)\n"
            f"np.save({str(workspace / 'arr.npy')!r}, np.arange(3))\n"
            f"int(df.a.sum()) + int(np.load({str(workspace / 'arr.npy')!r}).sum())"
        ).output
    assert total == 7 and (workspace / "out.csv").exists()


def test_a_module_proxy_reads_as_a_module_on_the_host():
    """repr() looks __file__ up; a proxy answers special names as absent, never with a refusal."""
    with LocalExecutor(authorized_imports=DATA, isolation="in_process") as ex:
        proxy = ex.run("import numpy as np\nnp").output
        assert ex.run("import numpy as np\nrepr(np)").output == "<module 'numpy'>"
    assert repr(proxy) == "<module 'numpy'>"
    assert not hasattr(proxy, "__file__") and getattr(proxy, "__deepcopy__", None) is None
