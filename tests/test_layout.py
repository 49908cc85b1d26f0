"""The package's shape, checked from its source: module sizes, the direction of imports, no loops.

A layout rule that only lives in a document drifts; these tests read every module under
``src/codeward`` (imports inside functions included, since a lazy import is still a
dependency) and fail naming the module that breaks a rule.
"""

from __future__ import annotations

import ast
import re
import tomllib
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src"
PACKAGE = SOURCE / "codeward"
MAX_LINES = 800


@cache
def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name, for its ``__init__``)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if "sandbox_images" in path.parts:
            continue
        parts = list(path.relative_to(SOURCE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _lazy_facade(tree: ast.Module) -> set[int]:
    """The nodes of a package's module-level ``__getattr__``: it imports a submodule only when a name
    is first asked for, so the submodule may import the package without a loop at import time."""
    return {
        id(node)
        for function in tree.body
        if isinstance(function, ast.FunctionDef) and function.name == "__getattr__"
        for node in ast.walk(function)
    }


def _imported(name: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    known = modules()
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name in known]
    if node.level:
        base = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    submodules = [f"{module}.{alias.name}" for alias in node.names if f"{module}.{alias.name}" in known]
    if len(submodules) == len(node.names):  # `from package import module, ...`: the modules are what it needs
        return submodules
    return [module, *submodules] if module in known else submodules


@cache
def imports() -> dict[str, frozenset[str]]:
    """Which of the package's modules each module imports, anywhere in its body."""
    graph = {}
    for name, path in modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        is_package = path.name == "__init__.py"
        skipped = _lazy_facade(tree) if is_package else set()
        found: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skipped:
                found.update(_imported(name, is_package, node))
        found.discard(name)
        graph[name] = frozenset(found)
    return graph


def _cycles(graph: dict[str, frozenset[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    advanced = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_checks_see_the_whole_package() -> None:
    """A walk that found nothing would pass every rule below."""
    graph = imports()
    assert len(graph) > 100
    assert "codeward.tools" in graph["codeward.platform.agents"]
    assert "codeward.executors.base" in graph["codeward.executors.local.executor"]


def test_the_cycle_finder_finds_a_loop() -> None:
    graph = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset({"a"})}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({**graph, "c": frozenset()}) == []


def test_no_module_is_over_800_lines() -> None:
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these modules, each over {MAX_LINES} lines: {long}"


def test_no_two_modules_import_each_other() -> None:
    assert _cycles(dict(imports())) == []


def test_the_sandboxes_stand_below_the_platform() -> None:
    """Someone who only wants a sandbox sees one direction of dependency: executors never import the platform."""
    upward = {
        name: sorted(target for target in targets if target.startswith("codeward.platform"))
        for name, targets in imports().items()
        if name.startswith("codeward.executors")
    }
    assert {name: targets for name, targets in upward.items() if targets} == {}


@pytest.mark.parametrize(
    ("lower", "upper"),
    [
        ("codeward.tools", "codeward.platform"),
        ("codeward.tracing", "codeward.platform"),
        ("codeward.platform", "codeward.cli"),
        ("codeward.platform", "codeward.batch"),
        ("codeward.platform", "codeward.view"),
        ("codeward.executors", "codeward.cli"),
        ("codeward.executors", "codeward.batch"),
    ],
)
def test_the_layers_point_one_way(lower: str, upper: str) -> None:
    climbing = {
        name: sorted(t for t in targets if t == upper or t.startswith(upper + "."))
        for name, targets in imports().items()
        if name == lower or name.startswith(lower + ".")
    }
    assert {name: targets for name, targets in climbing.items() if targets} == {}


def test_the_executors_package_holds_few_loose_modules() -> None:
    loose = sorted(path.name for path in (PACKAGE / "executors").glob("*.py"))
    assert len(loose) <= 6, f"group these into packages: {loose}"


def test_the_batch_runner_names_no_backend_module() -> None:
    """Backends are found by name through the registry, so the runner imports none of them."""
    assert not {t for t in imports()["codeward.batch.runner"] if t in ("codeward.batch.ray_backend",)}
    assert "codeward.batch.runner" not in imports()["codeward.batch.ray_backend"]


def test_all_installs_every_extra() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (everything,) = extras["all"]
    named = set(re.fullmatch(r"codeward\[(.*)\]", everything).group(1).split(","))  # type: ignore[union-attr]
    assert named == set(extras) - {"all", "test", "lint", "bench"}


def _readme_layout() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return readme[readme.index("### Layout") :]


def test_the_readme_layout_names_every_package_and_module() -> None:
    layout = _readme_layout()
    packages = sorted(path.name for path in PACKAGE.rglob("*") if (path / "__init__.py").is_file())
    missing = [name for name in packages if f"{name}/" not in layout]
    assert not missing, f"the README's layout section does not name these packages: {missing}"
    stems = sorted({path.stem for path in modules().values()} - {"__init__", "__main__"})
    missing = [stem for stem in stems if not re.search(rf"\b{stem}\b", layout)]
    assert not missing, f"the README's layout section does not name these modules: {missing}"


def test_every_module_the_readme_layout_names_exists() -> None:
    named = set(re.findall(r"\b(\w+)\.py\b", _readme_layout()))
    existing = {path.stem for path in ROOT.glob("src/codeward/**/*.py")} | {
        path.stem for path in ROOT.glob("tests/*.py")
    }
    assert named - existing == set()
