"""The batch page's charts as geometry: bars and segments in SVG units, drawn by the template.

Computed here, not in the page's script, so the page draws without running anything and the
charts can be checked as numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from codeward.view.batches import JobRow
from codeward.wording import counted

__all__ = ["Bar", "DurationChart", "Segment", "duration_chart", "time_segments"]

#: The most jobs the duration chart draws a bar for: the slowest ones.
MOST_BARS = 200
WIDTH = 960.0
HEIGHT = 200.0
#: The parts of the time bar, in order: what the results record, then the rest of the jobs' time.
PARTS = ("model", "sandbox", "tools", "setup")


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    state: str
    label: str
    #: The file name of the job's page.
    page: str


@dataclass(frozen=True)
class DurationChart:
    bars: list[Bar]
    longest: float
    caption: str


@dataclass(frozen=True)
class Segment:
    part: str
    seconds: float
    x: float
    width: float


def duration_chart(jobs: list[JobRow]) -> DurationChart:
    """A bar per job (the slowest `MOST_BARS`, slowest first), its height its duration, coloured by state."""
    timed = sorted((job for job in jobs if job.duration is not None), key=lambda job: -(job.duration or 0.0))
    shown = timed[:MOST_BARS]
    longest = max((job.duration or 0.0 for job in shown), default=0.0)
    caption = (
        f"the {len(shown)} slowest of {len(timed)} jobs" if len(timed) > len(shown) else counted(len(shown), "job")
    )
    if not shown or longest <= 0:
        return DurationChart([], longest, caption)
    step = WIDTH / len(shown)
    bars = []
    for index, job in enumerate(shown):
        height = max(1.0, (job.duration or 0.0) / longest * HEIGHT)
        label = f"{job.id}: {job.duration:.2f} s, {job.state}"
        bars.append(Bar(index * step, HEIGHT - height, max(1.0, step * 0.8), height, job.state, label, job.page))
    return DurationChart(bars, longest, caption)


def time_segments(totals: dict[str, float]) -> list[Segment]:
    """One bar across the chart's width, cut into each part's share of the time."""
    whole = sum(totals.get(part, 0.0) for part in PARTS)
    segments, x = [], 0.0
    for part in PARTS:
        seconds = totals.get(part, 0.0)
        width = seconds / whole * WIDTH if whole > 0 else 0.0
        segments.append(Segment(part, seconds, x, width))
        x += width
    return segments
