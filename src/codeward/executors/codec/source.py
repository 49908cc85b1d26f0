"""The codec's modules as source texts, and the loader that makes them a package inside a sandbox.

A kernel sandbox (jupyter, e2b) need not have codeward installed: the host sends it the codec's
source, and `LOADER` turns that into the package ``_codeward_codec`` with its submodules, whose
relative imports of one another then resolve as in an installed package. The host's side of
this module is not sent: it reads files, which a sandbox does not have.
"""

from __future__ import annotations

import functools
from pathlib import Path

# Each module after the ones it imports; the package's ``__init__`` last, as it imports them all.
LOAD_ORDER = (
    "errors",
    "bounds",
    "pieces",
    "wire",
    "scalars",
    "containers",
    "times",
    "classes",
    "arrays",
    "frames",
    "images",
    "__init__",
)


@functools.cache
def module_sources() -> tuple[tuple[str, str], ...]:
    """The (module name, source text) of each module the codec needs in a sandbox, in `LOAD_ORDER`."""
    folder = Path(__file__).parent
    return tuple((name, (folder / f"{name}.py").read_text(encoding="utf-8")) for name in LOAD_ORDER)


# Defines ``load_codec(name, sources)``, which makes `module_sources()` the package `name` and returns
# it. It keeps to old syntax, like the codec's own modules: a sandbox's Python may be older than the host's.
LOADER = """
import sys, types
from importlib.machinery import ModuleSpec

def load_codec(name, sources):
    package = sys.modules.get(name)
    if package is not None and getattr(package, "_codeward_source", None) == sources:  # a pooled sandbox may have it already
        return package
    package = _codec_module(name, name, is_package=True)
    for module_name, source in sources:
        module = package if module_name == "__init__" else _codec_module(name + "." + module_name, name)
        exec(compile(source, "<" + module.__name__ + ">", "exec"), module.__dict__)
        if module is not package:
            setattr(package, module_name, module)
    package._codeward_source = sources  # set last: a load that failed half way is made again
    return package

def _codec_module(full_name, package_name, is_package=False):
    module = types.ModuleType(full_name)
    module.__spec__ = ModuleSpec(full_name, None, is_package=is_package)
    module.__package__ = package_name
    if is_package:
        module.__path__ = []
    sys.modules[full_name] = module
    return module
"""
