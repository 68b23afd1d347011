"""The result JSON's 3D fields of the masks: their points and boxes (ROS-free). The pixels with
valid depth they come from are handed to a ``PixelSink`` between the masks' sampling and their
box fits: the target's points are read from those, not again."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from sam3_agent_ros.geometry.box import fit_sampled_box
from sam3_agent_ros.geometry.camera_model import Intrinsics, as_intrinsics
from sam3_agent_ros.geometry.locate import (
    MaskDepth,
    MaskPixels,
    locate_sampled,
    sample_mask_depth,
)

POSITION_DECIMALS = 5  # 10 micrometres, in the result JSON


class PixelSink(Protocol):
    """Takes the masks' pixels with valid depth (None: a mask without) once every mask of an
    answer is sampled and before any box is fitted: the target's points are read from them
    there, while the 3D step has them in the caches (``pipeline.measurement``)."""

    def take(self, pixels: Sequence[MaskPixels | None], intrinsics: Intrinsics) -> None: ...


def measure_masks(masks: Sequence[np.ndarray], depth_m: np.ndarray,
                  k: Intrinsics | Sequence[float] | np.ndarray, cfg: Any,
                  pixels_to: PixelSink | None = None) -> list[dict[str, Any]]:
    """Each mask's 3D fields (``measure_mask``), every mask sampled first: ``pixels_to`` (when
    given) takes their pixels before the boxes are fitted."""
    intr = as_intrinsics(k)
    sampled = [sample_mask_depth(mask, depth_m, cfg.erode_px, cfg.min_m, cfg.max_m,
                                 cfg.min_valid_pixels, cfg.statistic)[:2] for mask in masks]
    if pixels_to is not None:
        pixels_to.take([found for found, _ in sampled], intr)
    return [_measured(found, reason, intr, cfg) for found, reason in sampled]


def measure_mask(mask: np.ndarray, depth_m: np.ndarray,
                 k: Intrinsics | Sequence[float] | np.ndarray, cfg: Any) -> dict[str, Any]:
    """The result JSON's 3D fields of one mask (interface §5, §8b): ``position`` (or None and
    ``position_error``), ``position_spread_m``, ``box`` (or None and ``box_error``). ``cfg``
    holds the ``depth.*`` settings (``config.DepthConfig``): erode_px, min_m, max_m,
    min_valid_pixels, statistic. The node (``ros/depth.py``) and ``sam3-agent run --depth`` both
    measure through ``measure_masks``, so they give the same numbers for the same pixels."""
    return measure_masks([mask], depth_m, k, cfg)[0]


def _measured(sampled: MaskDepth | None, reason: str | None, intr: Intrinsics,
              cfg: Any) -> dict[str, Any]:
    if sampled is None:
        return {"position": None, "position_error": reason, "box": None, "box_error": reason}
    located = locate_sampled(sampled, intr)
    if located.position is None or located.spread_m is None:  # a sampled mask has both
        raise AssertionError("locate_sampled gave no position")
    if not all(math.isfinite(c) for c in (*located.position, located.spread_m)):
        reason = (f"the 3D step gave a non-finite position {located.position} (check the "
                  "camera_info and the depth image): no 3D rather than a wrong one")
        return {"position": None, "position_error": reason, "box": None, "box_error": reason}
    x, y, z = (round(float(c), POSITION_DECIMALS) for c in located.position)
    extras: dict[str, Any] = {"position": {"x": x, "y": y, "z": z}, "position_error": None,
                              "position_spread_m": round(float(located.spread_m),
                                                         POSITION_DECIMALS)}
    boxed = fit_sampled_box(sampled, intr, cfg.min_valid_pixels)
    box = boxed.box.to_json(POSITION_DECIMALS) if boxed.box is not None else None
    if box is not None and not all(math.isfinite(v) for part in box.values()
                                   for v in part.values()):
        extras["box"], extras["box_error"] = None, "the box fit gave non-finite values"
        return extras
    extras["box"] = box
    extras["box_error"] = boxed.error
    return extras
