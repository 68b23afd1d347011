"""What a concept pass produces: one ``ConceptDetection`` per instance, gathered with its frame in
a ``ConceptFrame``. The JSON form is the fields of ``sam3_agent_ros/msg/ConceptDetection``
(interface §5): ``sam3-agent concepts`` prints it, the node publishes the message."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sam3_agent_ros.core.types import Frame


@dataclass(frozen=True)
class ConceptDetection:
    """One instance of one concept on one frame. ``id`` is stable across frames while the list
    of concepts is unchanged, unique among all concepts, and the instance's value in the label
    image. ``position``: ``{"x", "y", "z"}`` in metres (colour camera frame) when depth gave one;
    ``position_error`` says why not, when depth is on."""

    concept: str
    id: int
    mask: np.ndarray  # (H, W) bool
    score: float
    bbox: tuple[float, float, float, float]  # x0, y0, x1, y1 pixels
    centroid: tuple[float, float]  # u, v pixels
    area: int
    position: dict[str, float] | None = None
    position_error: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"concept": self.concept, "id": int(self.id), "score": round(float(self.score), 4),
               "bbox": [round(float(v), 1) for v in self.bbox],
               "centroid": [round(float(v), 1) for v in self.centroid], "area": int(self.area),
               "position_valid": self.position is not None, "position": self.position}
        if self.position_error is not None:
            out["position_error"] = self.position_error
        return out


@dataclass(frozen=True)
class ConceptFrame:
    """One concept pass: the frame it ran on, the list it ran with (``generation`` counts the
    lists: a change of list starts a new one, and the ids restart), the detections in the
    list's order (highest score first within a concept), and its timings in milliseconds."""

    frame: Frame
    prompts: tuple[str, ...]
    generation: int
    detections: list[ConceptDetection]
    timings_ms: dict[str, float] = field(default_factory=dict)
    untrained_weights: bool = False

    def to_json(self) -> dict[str, Any]:
        """``{"detections": [...]}`` plus the frame's header and the pass's timings."""
        out: dict[str, Any] = {
            "stamp": {"sec": self.frame.stamp_sec, "nanosec": self.frame.stamp_nanosec},
            "frame_id": self.frame.frame_id, "width": self.frame.width,
            "height": self.frame.height, "concepts": list(self.prompts),
            "detections": [d.to_json() for d in self.detections],
            "timings_ms": {k: round(v, 2) for k, v in self.timings_ms.items()}}
        if self.untrained_weights:
            out["untrained_weights"] = True
        return out
