"""The one 3D step (CONTRACTS §9, §11): a frame's masks measured on the frame's world and moved
into ``target_frame``, before anything is built. Answers (``measurement.measure_answer``), follow
updates and concept passes all call ``measure_3d``; what it returns stays typed until the result
JSON is written (``Located.json_fields``, once per answer).

ROS-free. A depth source is any object with ``measure(frame, masks, pixels_to=None) -> [the
result JSON's 3D fields]``: the node's ``ros/depth.DepthTargets`` (which finds the frame's depth
frame and camera model and hands them to a ``PreparedDepth``), or a ``PreparedDepth`` itself for
one depth image (``sam3-agent run --depth``). Its fields are typed once, here. The world of the
frame (``frame_world.Frame.world``: the depth frame, camera model and transform bound when its
query took the frame) is the depth source's and ``frame_world.target_of``'s to read: a follow
update's or a concept pass's frame has none bound, and its transform is looked up at its stamp.

``measure_3d`` never raises: a failing depth source becomes the same reason on every mask.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from sam3_agent_ros.config import DepthConfig
from sam3_agent_ros.core.ports import HasMask, Logger
from sam3_agent_ros.core.types import Frame
from sam3_agent_ros.geometry.camera_model import Intrinsics
from sam3_agent_ros.geometry.measure import PixelSink, measure_masks
from sam3_agent_ros.geometry.measurement import Measurement
from sam3_agent_ros.pipeline.frame_world import target_of
from sam3_agent_ros.pipeline.target_frame import (
    TargetFrame,
    TargetFrameRequest,
    moved_measurement,
    target_fields,
)


class DepthSource(Protocol):
    def measure(self, frame: Frame, masks: list[HasMask],
                pixels_to: PixelSink | None = None) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class MaskView:
    """An array seen as an object with ``.mask`` (what a depth source measures)."""

    mask: np.ndarray


@dataclass(frozen=True)
class PreparedDepth:
    """One frame's depth at the colour resolution and its intrinsics, ready to measure masks
    on; ``reason`` set when there is none usable, then every mask gets it as its error."""

    depth_m: np.ndarray | None
    intrinsics: Intrinsics | None
    reason: str | None
    cfg: DepthConfig | None

    def prepared(self, frame: Frame) -> PreparedDepth:
        """Itself (as ``ros/depth.DepthTargets.prepared``: the grasp scene reads the depth)."""
        return self

    def measure(self, frame: Frame, masks: list[HasMask],
                pixels_to: PixelSink | None = None) -> list[dict[str, Any]]:
        """Each mask's 3D fields (``geometry.measure.measure_masks``); a mask whose shape is not
        the frame's gets the reason instead."""
        if self.reason is not None or self.depth_m is None or self.intrinsics is None:
            reason = self.reason or "no depth"
            return [Measurement.missing(reason).to_json() for _ in masks]
        shape = (frame.height, frame.width)
        fitting = [k for k, mask in enumerate(masks) if mask.mask.shape == shape]
        found = dict(zip(fitting, measure_masks([masks[k].mask for k in fitting], self.depth_m,
                                                self.intrinsics, self.cfg, pixels_to)))
        return [found[k] if k in found else Measurement.missing(
                    f"mask shape {mask.mask.shape} differs from the frame {shape}").to_json()
                for k, mask in enumerate(masks)]


@dataclass
class Located:
    """A frame's masks in 3D. ``measurements``: one per mask, in the colour camera's frame (None
    for a mask not given: an object not visible on a follow update). ``target``: with
    ``target_frame`` set and something measured, the transform at the frame's stamp (or the
    reason there is none); ``moved``: the measurements moved with it (None without its
    transform); ``fields``: each mask's ``target`` / ``target_error`` (the result JSON's)."""

    measurements: list[Measurement | None]
    target: TargetFrame | None = None
    moved: list[Measurement | None] | None = None
    fields: list[dict[str, Any] | None] | None = None

    @property
    def output_frame_id(self) -> str | None:
        return self.target.frame_id if self.target is not None else None

    @property
    def output_measurements(self) -> list[Measurement | None] | None:
        """In the output frame (``target_frame`` when set, else the camera's); None when the
        transform is missing (publish no pose)."""
        return list(self.measurements) if self.target is None else self.moved

    def json_fields(self) -> list[dict[str, Any]]:
        """Each mask's 3D fields of the result JSON (camera frame, and its ``target`` with
        ``target_frame`` set): written once, from the typed values."""
        out = []
        for k, measurement in enumerate(self.measurements):
            entry = (measurement or Measurement.missing(None)).to_json()
            if self.fields is not None and self.fields[k] is not None:
                entry.update(self.fields[k] or {})
            out.append(entry)
        return out


def _measured(depth: DepthSource, frame: Frame, masks: list[HasMask], logger: Logger | None,
              pixels_to: PixelSink | None) -> list[Measurement]:
    try:
        found = depth.measure(frame, masks, pixels_to)
        return [Measurement.from_json(fields) for fields in found]
    except Exception as exc:  # noqa: BLE001 (the 3D step must never break an answer)
        if logger is not None:
            logger.warning(f"depth: locating the masks failed: {exc}")
        reason = f"3D step failed: {type(exc).__name__}: {exc}"
        return [Measurement.missing(reason) for _ in masks]


def measure_3d(depth: DepthSource | None, frame: Frame | None,
               masks: Sequence[np.ndarray | None], target_frame: TargetFrameRequest | None = None,
               logger: Logger | None = None, pixels_to: PixelSink | None = None,
               look_up_without_masks: bool = False) -> Located:
    """Measure ``masks`` (None: an object not visible) on ``frame``'s depth, then, with
    ``target_frame``, look the frame's transform up once (its world's when bound,
    ``frame_world.target_of``) and move every measurement with it. Nothing is measured without
    depth or pixels; the transform is looked up only when a mask was measured (or
    ``look_up_without_masks``: an answer that found none still names its frame)."""
    out: list[Measurement | None] = [None] * len(masks)
    if depth is None or frame is None or frame.image.size == 0:
        return Located(out)
    given = [(k, mask) for k, mask in enumerate(masks) if mask is not None]
    if given:
        found = _measured(depth, frame, [MaskView(mask) for _, mask in given], logger,
                          pixels_to)
        for (k, _), measurement in zip(given, found):
            out[k] = measurement
    if target_frame is None or not (given or look_up_without_masks):
        return Located(out)
    target = target_of(target_frame, frame)
    fields = [target_fields(m, target) if m is not None else None for m in out]
    moved = None
    if target.ok:  # the result JSON's values, as measurements (one transform per mask)
        moved = [moved_measurement(m, target, f) if m is not None else None
                 for m, f in zip(out, fields)]
    return Located(out, target, moved, fields)
