"""The executor registry and the package face."""

from __future__ import annotations

import subprocess
import sys

import pytest

import codeward.executors as executors
from codeward.executors.base import install_line


def test_each_registered_executor_class_is_importable_from_the_package():
    for name in executors.available_executors():
        cls = executors.executor_class(name)
        assert getattr(executors, cls.__name__) is cls
        assert cls.name == name


def test_an_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'NopeExecutor'"):
        executors.NopeExecutor  # noqa: B018


def test_importing_the_package_loads_no_sandbox_sdk():
    code = (
        "import sys, codeward, codeward.executors, codeward.platform.foreign_tools\n"
        "model = codeward.ScriptedModel(['<code>\\nfinal_answer(1)\\n</code>'])\n"
        "with codeward.CodeAgent(tools=[], model=model, verbosity_level=-1) as agent:\n"
        "    assert agent.run('One.') == 1\n"
        "optional = ('e2b', 'docker', 'jupyter_client', 'litellm', 'smolagents', 'langchain_core', 'opentelemetry')\n"
        "print(sorted(m for m in optional if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_neither_codeward_nor_its_help_imports_the_mcp_sdk():
    """MCP is an optional extra: only using `codeward.mcp.MCPTools` (or `--mcp`) imports it."""
    code = (
        "import sys, runpy, codeward, codeward.mcp\nsys.argv = ['codeward', '--help']\n"
        "try:\n    runpy.run_module('codeward.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')), file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip() == "[]"


def test_mcp_tools_without_the_sdk_name_the_extra():
    code = "import sys\nsys.modules['mcp'] = None\nfrom codeward.mcp import MCPTools"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0
    assert "codeward.mcp needs the package 'mcp'" in done.stderr and install_line("mcp") in done.stderr


def test_the_e2b_executor_needs_no_jupyter_client():
    code = (
        "import sys\nsys.modules['jupyter_client'] = None\nsys.modules['zmq'] = None\n"
        "from codeward.executors import E2BExecutor\nprint(E2BExecutor.name)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "e2b"


def test_the_public_names_import_without_any_sandbox_sdk_and_name_their_extra_when_used():
    """On a base install (the SDKs hidden), the package face imports; a SandboxPool or an executor
    whose extra is missing fails only when made, with the pip line that installs the extra."""
    code = (
        "import sys\nfor m in ('docker', 'jupyter_client', 'zmq', 'e2b', 'e2b_code_interpreter'):\n"
        "    sys.modules[m] = None\n"
        "from codeward.executors import SandboxPool, LocalExecutor, DockerExecutor, JupyterExecutor, CodeOutput, codec\n"
        "print(LocalExecutor().run('1 + 1').output)\n"
        "for make in (lambda: SandboxPool(size=1), DockerExecutor, JupyterExecutor):\n"
        "    try:\n        make()\n    except ImportError as error:\n        print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    result, pool, docker_executor, jupyter_executor = done.stdout.strip().splitlines()
    assert result == "2"
    assert "SandboxPool needs the package 'docker'" in pool and install_line("docker") in pool
    assert "the 'docker' executor needs the package" in docker_executor and install_line("docker") in docker_executor
    assert install_line("jupyter") in jupyter_executor


def test_docker_executor_and_pool_are_the_same_classes_from_every_name():
    import codeward.executors.docker as docker_package
    from codeward.executors.docker.pool import SandboxPool

    assert executors.SandboxPool is SandboxPool is docker_package.SandboxPool
    assert docker_package.DockerExecutor is executors.DockerExecutor
