"""The 3D step of an answer: each mask's ``Measurement``, computed before anything is built.

A depth source is any object with ``measure(frame, masks, pixels_to=None) -> [the result JSON's
3D fields]`` (``geometry.measure``; the pixels they come from go to ``pixels_to`` between the
masks' sampling and their box fits; the node's
``ros/depth.DepthTargets``, or ``StillDepth`` for one depth image: ``sam3-agent run --depth``).
``locate`` never raises: a failure becomes the same reason on every mask. ``measure_answer``
fills ``result.mask_extras`` (so the result JSON) and returns the typed ``Answer`` every output
reads: a per-answer value a new output needs is computed here too. With ``target_frame`` set
(a ``TargetFrameRequest``), the transform at the colour frame's stamp is looked up once per answer
(``pipeline.target_frame``), each mask's JSON gains ``target`` / ``target_error`` (CONTRACTS §9)
and the ``Answer`` carries it; asked for the target's points (``cloud_max_points``), the cloud
too, in the output frame: sampled by a ``CloudSampler`` inside the 3D step, while the pixels
are in the caches, placed once the transform is known.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from sam3_agent_ros.config import DepthConfig
from sam3_agent_ros.core.ports import HasMask, Logger
from sam3_agent_ros.core.types import Frame, QueryStatus, Result
from sam3_agent_ros.geometry.camera_model import Intrinsics
from sam3_agent_ros.geometry.measure import PixelSink, measure_masks
from sam3_agent_ros.geometry.measurement import Measurement, posed_indices
from sam3_agent_ros.geometry.target_points import TargetPoints
from sam3_agent_ros.pipeline.frame_world import target_of
from sam3_agent_ros.pipeline.target_frame import (
    CloudSampler,
    TargetFrame,
    TargetFrameRequest,
    cloud_of,
    lookup_target,
    moved_measurement,
    moved_measurements,
    target_fields,
)


class DepthSource(Protocol):
    def measure(self, frame: Frame, masks: list[HasMask],
                pixels_to: PixelSink | None = None) -> list[dict[str, Any]]: ...


@dataclass
class Answer:
    """One query's answer as every output reads it. ``measurements``: one per mask of
    ``result.masks`` when the 3D step ran (depth on, an answer with pixels), else None, in the
    colour camera's frame. ``target``: with ``target_frame`` set and a measured answer, its
    transform (or the reason there is none), and ``moved``: the measurements moved with it
    (``measure_answer`` moves each mask once, for the result JSON and the messages alike).
    ``points``: the target's cloud when asked for, in the output frame (None when not asked,
    not possible, or the transform is missing)."""

    result: Result
    measurements: list[Measurement] | None = None
    target: TargetFrame | None = None
    points: TargetPoints | None = None
    moved: list[Measurement] | None = None  # in target_frame (None without its transform)

    @property
    def output_frame_id(self) -> str:
        """The frame the 3D outputs are published in: ``target_frame`` or the colour frame."""
        if self.target is not None:
            return self.target.frame_id
        frame = self.result.frame
        return frame.frame_id if frame is not None else ""

    @property
    def output_measurements(self) -> list[Measurement] | None:
        """The measurements in the output frame; None without a 3D step or when the transform
        into ``target_frame`` is missing (then no 3D output is published for this answer)."""
        if self.measurements is None:
            return None
        return list(self.measurements) if self.target is None else self.moved

    @property
    def target_error(self) -> str:
        """Why the 3D outputs are not in ``target_frame`` for this answer, or for some of its
        masks ("" when every mask has its target; always "" without ``target_frame``)."""
        if self.target is None:
            return ""
        if not self.target.ok:
            return self.target.reason
        missing = [f"mask {k}: {m.position_error or 'no position'}"
                   for k, m in enumerate(self.measurements or (), start=1)
                   if m.position is None]
        return ("no 3D position in the colour frame for " + "; ".join(missing)
                if missing else "")

    @property
    def missing_3d(self) -> str | None:
        """Why this answer, which wanted 3D (the 3D step ran on its masks), lacks some: the
        first mask without a position (or without its target in ``target_frame``), with how
        many lack it; None when every mask has its 3D or none was wanted."""
        if self.measurements is None or not self.measurements:
            return None
        count = len(self.measurements)
        if self.target is not None and not self.target.ok:
            return f"no 3D in '{self.target.frame_id}': {self.target.reason}"
        lacking = [(k, m) for k, m in enumerate(self.measurements, start=1)
                   if m.position is None]
        if not lacking:
            return None
        k, first = lacking[0]
        return (f"{len(lacking)} of {count} mask(s) without a 3D position (mask {k}: "
                f"{first.position_error or 'no position'})")


@dataclass(frozen=True)
class MaskView:
    """An array seen as an object with ``.mask`` (what a depth source measures)."""

    mask: np.ndarray


@dataclass(frozen=True)
class StillDepth:
    """One depth image at the colour resolution (``sam3-agent run --depth``): ``reason`` set
    when it cannot be used, then every mask gets it as its error."""

    depth_m: np.ndarray
    intrinsics: Intrinsics
    reason: str | None
    cfg: DepthConfig

    def measure(self, frame: Frame, masks: list[HasMask],
                pixels_to: PixelSink | None = None) -> list[dict[str, Any]]:
        if self.reason is not None:
            return [Measurement.missing(self.reason).to_json() for _ in masks]
        return measure_masks([mask.mask for mask in masks], self.depth_m, self.intrinsics,
                             self.cfg, pixels_to)


def measured(depth: DepthSource, frame: Frame, masks: Sequence[HasMask],
             logger: Logger | None = None,
             pixels_to: PixelSink | None = None) -> list[dict[str, Any]]:
    """``depth.measure``; never raises: a failure becomes a ``position_error`` for every mask."""
    try:
        return depth.measure(frame, list(masks), pixels_to)
    except Exception as exc:  # noqa: BLE001 (the 3D step must never break an answer)
        if logger is not None:
            logger.warning(f"depth: locating the masks failed: {exc}")
        reason = f"3D step failed: {type(exc).__name__}: {exc}"
        return [Measurement.missing(reason).to_json() for _ in masks]


def locate(depth: DepthSource, frame: Frame, masks: Sequence[HasMask],
           logger: Logger | None = None) -> list[Measurement]:
    """Per-mask measurements (``measured``'s fields, typed); never raises."""
    return [Measurement.from_json(m) for m in measured(depth, frame, masks, logger)]


def is_answered(result: Result) -> bool:
    """An answer that has masks to show (or none found): images and 3D go out for it."""
    frame = result.frame
    return (result.status in (QueryStatus.SUCCEEDED, QueryStatus.NO_MASK)
            and frame is not None and frame.image.size > 0)


def measure_answer(result: Result, depth: DepthSource | None, logger: Logger | None = None,
                   target_frame: TargetFrameRequest | None = None,
                   cloud_max_points: int | None = None) -> Answer:
    """The typed answer of ``result``: with depth and an answer with pixels, every mask is
    measured and its 3D fields go into ``result.mask_extras`` (the result JSON). With
    ``target_frame``, the transform at the colour frame's stamp (one lookup) and each mask's
    ``target`` / ``target_error``. With ``cloud_max_points`` (somebody wants the points), the
    target's cloud, at most that many points."""
    if depth is None or not is_answered(result):
        return Answer(result)
    frame = result.frame
    assert frame is not None
    sampler = (CloudSampler(frame.image, cloud_max_points)
               if cloud_max_points is not None and result.masks else None)
    found = measured(depth, frame, result.masks, logger, sampler)
    measurements = [Measurement.from_json(m) for m in found]
    extras = [measurement.to_json() for measurement in measurements]
    target = target_of(target_frame, frame) if target_frame is not None else None
    moved = None
    if target is not None:
        fields = [target_fields(measurement, target) for measurement in measurements]
        for extra, added in zip(extras, fields):
            extra.update(added)
        if target.ok:  # the result JSON's values, as measurements (one transform per mask)
            moved = [moved_measurement(m, target, added) for m, added in zip(measurements, fields)]
    result.mask_extras = extras
    # Which masks ~/target and ~/targets are (the poses published for this answer: none when
    # the transform into target_frame is missing), by mask id.
    published = measurements if target is None else moved
    posed = posed_indices(published) if published is not None else []
    result.extra["target_mask_id"] = posed[0] + 1 if posed else None
    result.extra["targets_mask_ids"] = [k + 1 for k in posed]
    points = None
    # The cloud is the measured masks' pixels: none when no mask has a position (none had
    # pixels, or the 3D step failed after handing them over).
    if sampler is not None and any(m.position is not None for m in measurements):
        try:
            points = cloud_of(sampler, target)
        except Exception as exc:  # noqa: BLE001 (the cloud must never break an answer)
            sampler.error = f"{type(exc).__name__}: {exc}"
        if sampler.error and logger is not None:
            logger.warning(f"depth: the target's points failed: {sampler.error}")
    return Answer(result, measurements, target, points, moved)


@dataclass
class Visible:
    """A follow update's 3D step: ``measurements`` (camera frame, one per object, None for one
    not visible), ``target`` (the transform at this frame's stamp, with ``target_frame`` set)."""

    measurements: list[Measurement | None]
    target: TargetFrame | None = None

    @property
    def output_frame_id(self) -> str | None:
        return self.target.frame_id if self.target is not None else None

    @property
    def output_measurements(self) -> list[Measurement | None] | None:
        """In the output frame; None when the transform is missing (publish no pose)."""
        return moved_measurements(self.measurements, self.target)


def measure_visible_in(depth: DepthSource, frame: Frame, masks: Sequence[np.ndarray | None],
                       logger: Logger | None = None, target_frame: TargetFrameRequest | None = None
                       ) -> Visible:
    """``measure_visible`` and, with ``target_frame``, the transform at ``frame``'s stamp."""
    measurements = measure_visible(depth, frame, masks, logger)
    if target_frame is None or not any(m is not None for m in measurements):
        return Visible(measurements)
    return Visible(measurements, lookup_target(target_frame, frame))


def measure_visible(depth: DepthSource, frame: Frame, masks: Sequence[np.ndarray | None],
                    logger: Logger | None = None) -> list[Measurement | None]:
    """A follow update's measurements: one per object, None for one not visible."""
    visible = [(k, mask) for k, mask in enumerate(masks) if mask is not None]
    located = locate(depth, frame, [MaskView(mask) for _, mask in visible], logger) \
        if visible else []
    out: list[Measurement | None] = [None] * len(masks)
    for (k, _), measurement in zip(visible, located):
        out[k] = measurement
    return out
