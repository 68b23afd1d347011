"""A depth source double for the pipeline's tests: the same 3D fields for every mask."""

from __future__ import annotations

BOX = {"center": {"x": 0.1, "y": -0.2, "z": 0.9}, "size": {"x": 0.2, "y": 0.1, "z": 0.05},
       "orientation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}}
MEASURED = {"position": {"x": 0.1, "y": -0.2, "z": 0.9}, "position_error": None,
            "position_spread_m": 0.01, "box": BOX, "box_error": None}


class CountingDepth:
    """``measure`` gives ``extras`` (default ``MEASURED``) for every mask, or raises with
    ``fail``; ``calls`` counts the calls."""

    def __init__(self, extras=None, fail=False):
        self.extras = MEASURED if extras is None else extras
        self.fail, self.calls = fail, 0

    def measure(self, frame, masks, pixels_to=None):
        self.calls += 1
        if self.fail:
            raise RuntimeError("depth exploded")
        return [dict(self.extras) for _ in masks]
