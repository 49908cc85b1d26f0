"""Granting numpy or pandas grants data work, not the file system, pickle or eval."""

from __future__ import annotations

from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
pd = pytest.importorskip("pandas")

DATA = ["numpy", "pandas"]


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret.csv"
    path.write_text("a,b\n1,2\n")
    (tmp_path / "secret.json").write_text('{"a": [1], "b": [2]}')
    (tmp_path / "secret.txt").write_text("1 2\n3 4\n")
    np.save(tmp_path / "secret.npy", np.arange(3))
    return path


@pytest.fixture
def canary(tmp_path: Path) -> Path:
    """np.save and its kin add '.npy' to a name without it: the canary has it already."""
    return tmp_path / "pwned.npy"


@pytest.mark.parametrize(
    "code",
    [
        "import pandas as pd\npd.read_csv('SECRET.csv')",
        "import pandas as pd\npd.read_json('SECRET.json')",
        "import pandas as pd\npd.io.parsers.read_csv('SECRET.csv')",
        "import pandas as pd\npd.DataFrame({'a': [1]}).to_csv('OUT')",
        "import pandas as pd\npd.DataFrame({'a': [1]}).to_string(buf='OUT')",
        "import numpy as np\nnp.load('SECRET.npy')",
        "import numpy as np\nnp.fromfile('SECRET.csv')",
        "import numpy as np\nnp.loadtxt('SECRET.txt')",
        "import numpy as np\nnp.save('OUT', np.arange(3))",
        "import numpy as np\nnp.arange(3).tofile('OUT')",
        "import numpy as np\nnp.memmap('OUT', mode='w+', shape=(3,))",
        "import numpy as np\nnp.lib.npyio.DataSource()",
        "import pandas as pd\npd.read_csv('file://SECRET.csv')",
    ],
    ids=lambda c: c.split("\n")[1][:40],
)
def test_file_routes_are_refused_without_allowed_paths(code, secret, canary, attack):
    error = attack(code, replace={"SECRET": str(secret.with_suffix("")), "OUT": str(canary)}, authorized_imports=DATA)
    assert "not allowed" in error.message or "not available" in error.message


@pytest.mark.parametrize(
    "code",
    [
        "import pandas as pd\npd.read_pickle('PICKLE')",
        "import pandas as pd\npd.DataFrame({'a': [1]}).to_pickle('OUT')",
        "import pandas as pd\npd.io.pickle.read_pickle('PICKLE')",
        "import pandas as pd\npd.compat.pickle_compat.loads(b'\\x80\\x04K\\x01.')",
        "import numpy as np\nnp.load('PICKLE', allow_pickle=True)",
        "import numpy as np\nnp.lib.format.read_array",
        "import numpy as np\nnp.arange(3).dumps()",
        "import pandas as pd\npd.eval('1 + 1')",
        "import pandas as pd\npd.DataFrame({'a': [1]}).query('a > 0')",
        "import pandas as pd\npd.DataFrame({'a': [1]}).eval('a + 1')",
        "import pandas as pd\npd.DataFrame({'a': [1]}).style",
        "import numpy as np\nnp.ctypeslib",
        "import numpy as np\nnp.ma.core.builtins.open('CANARY', 'w').close()",
        "import pandas as pd\npd.io.clipboards.read_clipboard",
    ],
    ids=lambda c: c.split("\n")[1][:40],
)
def test_pickle_eval_and_os_routes_stay_refused_with_allowed_paths(code, tmp_path, canary, attack):
    payload = tmp_path / "evil.pkl"
    pd.DataFrame({"a": [1]}).to_pickle(payload)
    options = {"authorized_imports": DATA, "allowed_paths": [tmp_path]}
    attack(code, replace={"PICKLE": str(payload), "OUT": str(canary)}, **options)


@pytest.mark.parametrize(
    "outside",
    ["'SECRET'", "'WORK/../secret.csv'", "'/etc/passwd', sep=':', header=None"],
    ids=["sibling", "dot-dot", "etc"],
)
def test_allowed_paths_open_only_the_workspace(outside, tmp_path, secret, attack):
    workspace = tmp_path / "work"
    workspace.mkdir()
    error = attack(
        f"import pandas as pd\npd.read_csv({outside})",
        replace={"SECRET": str(secret), "WORK": str(workspace)},
        authorized_imports=DATA,
        allowed_paths=[workspace],
    )
    assert "only paths inside" in error.message


def test_symlink_out_of_the_workspace_is_refused(tmp_path, secret, attack):
    workspace = tmp_path / "work"
    workspace.mkdir()
    (workspace / "link.csv").symlink_to(secret)
    error = attack(
        f"import pandas as pd\npd.read_csv({str(workspace / 'link.csv')!r})",
        authorized_imports=DATA,
        allowed_paths=[workspace],
    )
    assert "only paths inside" in error.message


def test_numpy_and_pandas_do_not_lead_to_os(attack):
    attack("import numpy as np\nnp.f2py.os.system('touch CANARY')", authorized_imports=DATA)
    attack("import pandas as pd\npd.io.common.os.system('touch CANARY')", authorized_imports=DATA)
