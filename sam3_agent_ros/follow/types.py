"""The values a follow session hands back: one followed object on one frame, one update."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

TRACKING = "tracking"
LOST = "lost"
STOPPED = "stopped"

SOURCE_FLOW = "flow"
SOURCE_REDETECT = "redetect"


class FollowError(ValueError):
    """Bad input to a follow session (no masks, mismatched sizes, a frame that is not RGB)."""


@dataclass(frozen=True)
class FollowedObject:
    """One followed object on one frame.

    ``index`` is the object's position in the masks the session was started with (stable across
    frames, so labels keep their meaning while another object is out of view).
    """

    mask: np.ndarray  # (H, W) bool at the frame's resolution
    bbox: tuple[float, float, float, float]  # x0, y0, x1, y1 pixels
    centroid: tuple[float, float]  # u, v pixels
    confidence: float  # [0, 1]
    index: int = 0


@dataclass(frozen=True)
class FollowUpdate:
    """What one frame (or ``stop()``) produced.

    ``objects`` holds the followed objects visible on this frame (empty when lost or stopped).
    ``error`` is set when the session stopped on bad input (e.g. the frame size changed); the
    session then stays ``stopped``.
    """

    state: str  # "tracking" | "lost" | "stopped"
    source: str  # "flow" | "redetect"
    objects: list[FollowedObject] = field(default_factory=list)
    reground: bool = False
    error: str | None = None
