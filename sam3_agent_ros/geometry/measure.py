"""The result JSON's 3D fields of one mask: its point and its box (ROS-free), and the pixels
with valid depth they came from (the target's points are taken from those, not again)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sam3_agent_ros.geometry.box import fit_sampled_box
from sam3_agent_ros.geometry.camera_model import Intrinsics, as_intrinsics
from sam3_agent_ros.geometry.locate import MaskPixels, locate_sampled, sample_mask_depth

POSITION_DECIMALS = 5  # 10 micrometres, in the result JSON


@dataclass(frozen=True)
class MeasuredMask:
    """One mask's 3D step: ``fields``, the result JSON's 3D fields (``measure_mask``);
    ``pixels``, the mask's pixels with valid depth that gave them (None when there were too
    few), with ``intrinsics``, the colour camera's (``target_points.points_of`` reads them)."""

    fields: dict[str, Any]
    pixels: MaskPixels | None = None
    intrinsics: Intrinsics | None = None


def measure_mask(mask: np.ndarray, depth_m: np.ndarray,
                 k: Intrinsics | Sequence[float] | np.ndarray, cfg: Any) -> dict[str, Any]:
    """The result JSON's 3D fields of one mask (interface §5, §8b): ``position`` (or None and
    ``position_error``), ``position_spread_m``, ``box`` (or None and ``box_error``). ``cfg``
    holds the ``depth.*`` settings (``config.DepthConfig``): erode_px, min_m, max_m,
    min_valid_pixels, statistic. The node (``ros/depth.py``) and ``sam3-agent run --depth`` both
    call it (``measure_mask_pixels``), so they give the same numbers for the same pixels."""
    return measure_mask_pixels(mask, depth_m, k, cfg).fields


def measure_mask_pixels(mask: np.ndarray, depth_m: np.ndarray,
                        k: Intrinsics | Sequence[float] | np.ndarray, cfg: Any) -> MeasuredMask:
    """``measure_mask``'s fields with the pixels they were measured from."""
    intr = as_intrinsics(k)
    sampled, reason, _ = sample_mask_depth(mask, depth_m, cfg.erode_px, cfg.min_m, cfg.max_m,
                                           cfg.min_valid_pixels, cfg.statistic)
    if sampled is None:
        return MeasuredMask({"position": None, "position_error": reason, "box": None,
                             "box_error": reason})
    located = locate_sampled(sampled, intr)
    if located.position is None or located.spread_m is None:  # a sampled mask has both
        raise AssertionError("locate_sampled gave no position")
    x, y, z = (round(float(c), POSITION_DECIMALS) for c in located.position)
    extras: dict[str, Any] = {"position": {"x": x, "y": y, "z": z}, "position_error": None,
                              "position_spread_m": round(float(located.spread_m),
                                                         POSITION_DECIMALS)}
    boxed = fit_sampled_box(sampled, intr, cfg.min_valid_pixels)
    extras["box"] = boxed.box.to_json(POSITION_DECIMALS) if boxed.box is not None else None
    extras["box_error"] = boxed.error
    return MeasuredMask(extras, sampled, intr)
