"""One mask's 3D measurement as a typed value: its position and box, or why not.

``measure.measure_mask`` (and the node's depth step) give the result JSON's 3D fields of a mask;
``Measurement.from_json`` reads them once into this value, so every consumer (the result JSON,
``~/target(s)``, ``~/markers``, the action's ``MaskInfo``, the concepts' detections) reads
typed fields, never dict keys. ``to_json`` gives the fields back exactly as they came.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NO_POSITION = "no position"  # the reason of a mask without 3D when nothing better is known

Vec3 = tuple[float, float, float]
Quat = tuple[float, float, float, float]  # x, y, z, w


@dataclass(frozen=True)
class BoxValue:
    """An oriented box in the camera frame: centre (m), size (m, x/y/z), orientation (xyzw)."""

    center: Vec3
    size: Vec3
    orientation: Quat

    def to_json(self) -> dict[str, dict[str, float]]:
        return {"center": dict(zip("xyz", self.center)), "size": dict(zip("xyz", self.size)),
                "orientation": dict(zip("xyzw", self.orientation))}


@dataclass(frozen=True)
class Measurement:
    """A mask's 3D fields (interface §5, §8b). ``position`` None: ``position_error`` says why;
    ``box`` None: ``box_error`` says why."""

    position: Vec3 | None = None
    position_error: str | None = None
    position_spread_m: float | None = None
    box: BoxValue | None = None
    box_error: str | None = None

    @classmethod
    def missing(cls, reason: str | None) -> Measurement:
        """No position and no box, for the same reason."""
        reason = reason or NO_POSITION
        return cls(position_error=reason, box_error=reason)

    @classmethod
    def from_json(cls, extra: Mapping[str, Any]) -> Measurement:
        """The value of ``measure_mask``'s fields (missing keys: None)."""
        position, box = extra.get("position"), extra.get("box")
        spread = extra.get("position_spread_m")
        return cls(
            position=_vec3(position) if position else None,
            position_error=extra.get("position_error"),
            position_spread_m=float(spread) if spread is not None else None,
            box=BoxValue(_vec3(box["center"]), _vec3(box["size"]),
                         _quaternion(box["orientation"])) if box else None,
            box_error=extra.get("box_error"))

    def to_json(self) -> dict[str, Any]:
        """The result JSON's 3D fields of the mask (``position_spread_m`` only with a
        position)."""
        out: dict[str, Any] = {
            "position": dict(zip("xyz", self.position)) if self.position is not None else None,
            "position_error": self.position_error}
        if self.position is not None and self.position_spread_m is not None:
            out["position_spread_m"] = self.position_spread_m
        out["box"] = self.box.to_json() if self.box is not None else None
        out["box_error"] = self.box_error
        return out


def _vec3(values: Mapping[str, Any]) -> tuple[float, float, float]:
    return float(values["x"]), float(values["y"]), float(values["z"])


def _quaternion(values: Mapping[str, Any]) -> tuple[float, float, float, float]:
    return float(values["x"]), float(values["y"]), float(values["z"]), float(values["w"])


def posed_indices(measurements: Sequence[Measurement | None]) -> list[int]:
    """The rule of ``~/target`` and ``~/targets`` (interface.md): the indices, in result order,
    of the masks that have a position (each such mask has a pose: its box's, else its position
    with the identity orientation). ``~/targets`` holds one pose per index, in this order;
    ``~/target`` is the first (the best mask that has a position); the result JSON names them by
    mask id (``target_mask_id``, ``targets_mask_ids``)."""
    return [k for k, m in enumerate(measurements) if m is not None and m.position is not None]
