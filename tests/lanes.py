"""How the suite shares out its tests when run on several workers (`pytest -n auto`, the README's command).

A test file is a unit of work: its module-scoped sandboxes and kernels start once, on one worker. Every test
that uses the Docker engine or Ray is in one more unit, the engine lane, which runs on one worker in order:
those tests watch the engine as a whole (an orphan left by a killed owner until the reaper comes; the one
local Ray cluster), and a sandbox started beside them by another worker would reap the orphan they are
about to look at. The lane is named by what its files say (Docker or Ray, in any form) or by a test's
parameters (the contract's "docker" and "docker-runsc" profiles), so a new file of either kind joins it
without being listed. Units go out in order of their count of tests, the lane first.

Only the default schedule (`--dist load`, what `-n` alone means) is replaced: any other `--dist` is
xdist's own. Without pytest-xdist this module adds nothing.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any

import pytest

#: The unit every test of the engine and of Ray belongs to.
ENGINE_LANE = "engine lane"
#: More workers than this only add sandboxes fighting for memory and the engine.
MOST_WORKERS = 4

_ENGINE_WORDS = re.compile(r"docker|\bray\b", re.IGNORECASE)
_PARAMETERS = re.compile(r"\[(.*)\]$")


@functools.cache
def _file_uses_the_engine(path: str) -> bool:
    try:
        return bool(_ENGINE_WORDS.search(Path(path).read_text(encoding="utf-8")))
    except OSError:
        return False


def unit_of(nodeid: str, rootdir: Path) -> str:
    """The unit of work `nodeid` belongs to: the engine lane, or its file."""
    file = nodeid.split("::", 1)[0]
    parameters = _PARAMETERS.search(nodeid)
    profiles = parameters.group(1).split("-") if parameters else []
    if "docker" in profiles or _file_uses_the_engine(str(rootdir / file)):
        return ENGINE_LANE
    return file


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # the count the user set, as xdist reads it
    return max(1, min(os.cpu_count() or 1, MOST_WORKERS))


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class LaneScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid, config.rootpath)

    return LaneScheduling(config, log)
