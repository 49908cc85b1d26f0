"""Granting numpy or pandas grants data work, not the file system, pickle or eval."""

from __future__ import annotations

from pathlib import Path

import pytest

from codeward.executors.base import ExecutionError
from codeward.executors import LocalExecutor

np = pytest.importorskip("numpy")
pd = pytest.importorskip("pandas")

DATA = ["numpy", "pandas"]


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret.csv"
    path.write_text("a,b\n1,2\n")
    return path


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


@pytest.mark.parametrize(
    "code",
    [
        "import pandas as pd\npd.read_csv('SECRET')",
        "import pandas as pd\npd.read_json('SECRET')",
        "import pandas as pd\npd.io.parsers.read_csv('SECRET')",
        "import pandas as pd\npd.DataFrame({'a': [1]}).to_csv('OUT')",
        "import pandas as pd\npd.DataFrame({'a': [1]}).to_string(buf='OUT')",
        "import numpy as np\nnp.load('SECRET')",
        "import numpy as np\nnp.fromfile('SECRET')",
        "import numpy as np\nnp.loadtxt('SECRET')",
        "import numpy as np\nnp.save('OUT', np.arange(3))",
        "import numpy as np\nnp.arange(3).tofile('OUT')",
        "import numpy as np\nnp.memmap('OUT', mode='w+', shape=(3,))",
        "import numpy as np\nnp.lib.npyio.DataSource()",
        "import pandas as pd\npd.read_csv('http://127.0.0.1:9/x.csv')",
    ],
    ids=lambda c: c.split("\n")[1][:40],
)
def test_file_routes_are_refused_without_allowed_paths(code, secret, tmp_path):
    out = tmp_path / "written.bin"
    with LocalExecutor(authorized_imports=DATA) as ex, pytest.raises(ExecutionError) as info:
        ex.run(code.replace("SECRET", str(secret)).replace("OUT", str(out)))
    assert "not allowed" in info.value.message or "not available" in info.value.message
    assert not out.exists()


@pytest.mark.parametrize(
    "code",
    [
        "import pandas as pd\npd.read_pickle('PICKLE')",
        "import pandas as pd\npd.DataFrame({'a': [1]}).to_pickle('OUT')",
        "import pandas as pd\npd.io.pickle.read_pickle('PICKLE')",
        "import pandas as pd\npd.compat.pickle_compat.loads(b'x')",
        "import numpy as np\nnp.load('PICKLE', allow_pickle=True)",
        "import numpy as np\nnp.lib.format.read_array",
        "import numpy as np\nnp.arange(3).dumps()",
        "import pandas as pd\npd.eval('1 + 1')",
        "import pandas as pd\npd.DataFrame({'a': [1]}).query('a > 0')",
        "import pandas as pd\npd.DataFrame({'a': [1]}).eval('a + 1')",
        "import pandas as pd\npd.DataFrame({'a': [1]}).style",
        "import numpy as np\nnp.ctypeslib",
        "import numpy as np\nnp.os",
        "import pandas as pd\npd.read_clipboard()",
    ],
    ids=lambda c: c.split("\n")[1][:40],
)
def test_pickle_eval_and_os_routes_stay_refused_with_allowed_paths(code, tmp_path):
    payload = tmp_path / "evil.pkl"
    pd.DataFrame({"a": [1]}).to_pickle(payload)
    with LocalExecutor(authorized_imports=DATA, allowed_paths=[tmp_path]) as ex, pytest.raises(ExecutionError):
        ex.run(code.replace("PICKLE", str(payload)).replace("OUT", str(tmp_path / "o.pkl")))
    assert not (tmp_path / "o.pkl").exists()


def test_allowed_paths_open_a_workspace_and_only_it(tmp_path, secret):
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
        for outside in (str(secret), str(workspace / ".." / "secret.csv"), "/etc/passwd"):
            with pytest.raises(ExecutionError) as info:
                ex.run(f"pd.read_csv({outside!r})")
            assert "only paths inside" in info.value.message


def test_symlink_out_of_the_workspace_is_refused(tmp_path, secret):
    workspace = tmp_path / "work"
    workspace.mkdir()
    (workspace / "link.csv").symlink_to(secret)
    with LocalExecutor(authorized_imports=DATA, allowed_paths=[workspace]) as ex, pytest.raises(ExecutionError) as info:
        ex.run(f"import pandas as pd\npd.read_csv({str(workspace / 'link.csv')!r})")
    assert "only paths inside" in info.value.message


def test_numpy_and_pandas_do_not_lead_to_os(attack):
    attack("import numpy as np\nnp.lib.npyio.os.system('touch CANARY')", authorized_imports=DATA)
    attack("import pandas as pd\npd.io.common.os.system('touch CANARY')", authorized_imports=DATA)
