"""The compact text table of the current masks that accompanies every overlay sent to the model,
so it can reason about "leftmost" or "largest" with numbers. Pure formatting and parsing."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class MaskFacts(Protocol):
    """What a table row shows of a mask: a ``types.Mask``, or an earlier answer's
    ``answers.SelectedMask`` (no pixels). Read-only: both are frozen dataclasses."""

    @property
    def score(self) -> float: ...
    @property
    def bbox(self) -> tuple[float, float, float, float]: ...
    @property
    def area(self) -> int: ...
    @property
    def centroid(self) -> tuple[float, float]: ...


HEADER = "id | score | bbox x0,y0,x1,y1 (px) | area % | centroid x,y (px)"
_NUMBERS = r"([\d.,\s-]+)"
_ROW = re.compile(rf"^\s*(\d+)\s*\|\s*([\d.]+)\s*\|{_NUMBERS}\|\s*([\d.]+)\s*\|{_NUMBERS}$")


def format_table(masks: Sequence[MaskFacts], width: int, height: int, limit: int) -> str:
    """One row per mask, ids 1..N in list order; at most ``limit`` rows (score-sorted list)."""
    total = float(width * height) or 1.0
    rows = [HEADER]
    for index, mask in enumerate(masks[:limit]):
        x0, y0, x1, y1 = (round(v) for v in mask.bbox)
        u, v = mask.centroid
        rows.append(f"{index + 1} | {mask.score:.3f} | {x0},{y0},{x1},{y1} | "
                    f"{100.0 * mask.area / total:.2f} | {u:.0f},{v:.0f}")
    if len(masks) > limit:
        rows.append(f"(+{len(masks) - limit} lower-scoring masks not listed; ids "
                    f"{limit + 1}..{len(masks)} are still valid)")
    return "\n".join(rows)


@dataclass(frozen=True)
class TableRow:
    id: int
    score: float
    bbox: tuple[float, float, float, float]
    area_percent: float
    centroid: tuple[float, float]


def parse_table(text: str) -> list[TableRow]:
    """Read the rows back from a tool result (used by the offline planner and tests)."""
    rows = []
    for line in text.splitlines():
        match = _ROW.match(line)
        if not match:
            continue
        bbox = tuple(float(v) for v in match.group(3).split(","))
        centroid = tuple(float(v) for v in match.group(5).split(","))
        if len(bbox) == 4 and len(centroid) == 2:
            rows.append(TableRow(int(match.group(1)), float(match.group(2)), bbox,
                                 float(match.group(4)), centroid))
    return rows
