"""Follow mode's vocabulary: the states, the sources, the values a session hands back (one
followed object on one frame, one update) and what a session offers its caller."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

# States (``FollowUpdate.state``, ``~/follow/status`` "state").
TRACKING = "tracking"
LOST = "lost"
STOPPED = "stopped"

# Sources: what placed the masks of an update (``FollowUpdate.source``, "source").
SOURCE_FLOW = "flow"
SOURCE_REDETECT = "redetect"


def starting_source(mode: str) -> str:
    """The source of a session in ``follow.mode`` before its first update: ``flow`` in flow
    mode, else ``redetect``."""
    return SOURCE_FLOW if mode == "flow" else SOURCE_REDETECT


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


class Session(Protocol):
    """What the follow thread drives: ``FollowSession`` (and stand-ins in tests)."""

    @property
    def mode(self) -> str:
        """``follow.mode`` of the session: ``flow`` or ``redetect``."""
        ...

    def update(self, frame_rgb: np.ndarray, now_s: float) -> FollowUpdate:
        """Follow the objects onto the next frame, taken at ``now_s`` seconds (never less than
        the previous call's)."""
        ...

    def stop(self) -> FollowUpdate:
        """End following (idempotent); the ``stopped`` update."""
        ...
