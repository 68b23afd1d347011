"""A mask's 3D fields of the result JSON moved into ``target_frame`` (CONTRACTS §9).

``target_entry(entry, transform, frame_id)`` takes one mask's ``position`` / ``box`` (colour
camera frame, as measure_mask gives them) and returns what the mask gains: ``{"target":
{"frame_id", "position", "box"}}``, or ``{"target": None, "target_error": reason}`` when there is
no transform or the mask has no position (never a ``target`` whose position is null). The
camera-frame fields are never changed. A box keeps its size; its centre and orientation move.
"""

from __future__ import annotations

from typing import Any

from sam3_agent_ros.frames.transform import Transform

POSITION_DECIMALS = 5  # as the camera-frame fields (geometry.measure)
QUATERNION_DECIMALS = 6


def _named(values: Any, keys: str, places: int) -> dict[str, float]:
    return {key: round(float(value), places) + 0.0 for key, value in zip(keys, values)}


def transform_position(position: dict[str, float] | None,
                       transform: Transform) -> dict[str, float] | None:
    """``{"x", "y", "z"}`` in the source frame -> the same point in the target frame."""
    if position is None:
        return None
    return _named(transform.apply_point((position["x"], position["y"], position["z"])), "xyz",
                  POSITION_DECIMALS)


def transform_box(box: dict[str, dict[str, float]] | None,
                  transform: Transform) -> dict[str, dict[str, float]] | None:
    """``{"center", "size", "orientation"}`` -> the same box in the target frame."""
    if box is None:
        return None
    c, q = box["center"], box["orientation"]
    centre, orientation = transform.apply_pose((c["x"], c["y"], c["z"]),
                                               (q["x"], q["y"], q["z"], q["w"]))
    return {"center": _named(centre, "xyz", POSITION_DECIMALS),
            "size": dict(box["size"]),
            "orientation": _named(orientation, "xyzw", QUATERNION_DECIMALS)}


def target_entry(entry: dict[str, Any], transform: Transform | None, frame_id: str,
                 reason: str = "") -> dict[str, Any]:
    """The fields one mask of the result gains with ``target_frame`` set (see module doc)."""
    if transform is None:
        return {"target": None, "target_error": reason or "no transform"}
    if entry.get("position") is None:  # never a target whose position is null (CONTRACTS §11)
        why = entry.get("position_error") or "no position"
        return {"target": None, "target_error": f"no 3D position in the colour frame: {why}"}
    return {"target": {"frame_id": frame_id,
                       "position": transform_position(entry.get("position"), transform),
                       "box": transform_box(entry.get("box"), transform)}}
