"""The built-in demo: a recorded model solves a small multi-step task in a real sandbox.

The task uses `additional_args` and a tool, and the recording includes a
mistake the model recovers from, so one run shows the whole lifecycle.

`recording.json` was made from the responses in `script.yaml`, on the local
executor, from this folder:

    codeward run "$(python -c 'from codeward.demo import DEMO_TASK; print(DEMO_TASK)')" \
        --model script:script.yaml --tools codeward.demo:forecast \
        --var cities=@cities.json --save recording.json

Re-record it so when the observations the sandbox gives change on purpose; a
test replays it on every run, so any other change is caught.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from codeward.tools import tool

__all__ = ["DEMO_TASK", "DEMO_VARIABLES", "forecast", "recording_path"]

DEMO_TASK = (
    "Which of the given cities will be warmest tomorrow, and how many degrees warmer is it than the coldest of them?"
)
DEMO_VARIABLES: dict[str, Any] = {
    "cities": json.loads(resources.files("codeward.demo").joinpath("cities.json").read_text(encoding="utf-8"))
}

_FORECASTS: dict[str, dict[str, float | str]] = {
    "Oslo": {"high": 3.5, "low": -2.0, "sky": "snow"},
    "Rome": {"high": 16.0, "low": 8.5, "sky": "clear"},
    "Cairo": {"high": 24.5, "low": 14.0, "sky": "clear"},
    "Lima": {"high": 22.0, "low": 17.5, "sky": "cloudy"},
}


@tool
def forecast(city: str) -> dict[str, float | str]:
    """Tomorrow's forecast for a city (the demo's built-in table, not a live service).

    Args:
        city: The city's name, e.g. "Rome".
    """
    if city not in _FORECASTS:
        raise KeyError(f"no forecast for {city!r}; known cities: {', '.join(_FORECASTS)}")
    return dict(_FORECASTS[city])


def recording_path() -> Path:
    """The saved run the demo's ReplayModel plays."""
    return Path(str(resources.files("codeward.demo").joinpath("recording.json")))
