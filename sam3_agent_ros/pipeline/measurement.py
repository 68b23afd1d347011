"""The 3D step of an answer: each mask's ``Measurement``, computed before anything is built.

A depth source is any object with ``locate(frame, masks) -> [result JSON 3D fields]`` (the node's
``ros/depth.DepthTargets``, or ``StillDepth`` for one depth image: ``sam3-agent run --depth``).
``locate`` never raises: a failure becomes the same reason on every mask. ``measure_answer``
fills ``result.mask_extras`` (so the result JSON) and returns the typed ``Answer`` every output
reads: a per-answer value a new output needs (a transform, say) is computed here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from sam3_agent_ros.core.types import Frame, QueryStatus, Result
from sam3_agent_ros.geometry.measure import measure_mask
from sam3_agent_ros.geometry.measurement import Measurement


class DepthSource(Protocol):
    def locate(self, frame: Frame, masks: list[Any]) -> list[dict[str, Any]]: ...


@dataclass
class Answer:
    """One query's answer as every output reads it. ``measurements``: one per mask of
    ``result.masks`` when the 3D step ran (depth on, an answer with pixels), else None."""

    result: Result
    measurements: list[Measurement] | None = None


@dataclass(frozen=True)
class MaskView:
    """An array seen as an object with ``.mask`` (what a depth source measures)."""

    mask: np.ndarray


@dataclass(frozen=True)
class StillDepth:
    """One depth image at the colour resolution (``sam3-agent run --depth``): ``reason`` set
    when it cannot be used, then every mask gets it as its error."""

    depth_m: Any
    intrinsics: Any
    reason: str | None
    cfg: Any

    def locate(self, frame: Frame, masks: list[Any]) -> list[dict[str, Any]]:
        if self.reason is not None:
            return [Measurement.missing(self.reason).to_json() for _ in masks]
        return [measure_mask(mask.mask, self.depth_m, self.intrinsics, self.cfg)
                for mask in masks]


def locate(depth: DepthSource, frame: Frame, masks: Sequence[Any],
           logger: Any = None) -> list[Measurement]:
    """Per-mask measurements from ``depth.locate``; never raises: a failure becomes a
    ``position_error`` for every mask."""
    try:
        return [Measurement.from_json(extra) for extra in depth.locate(frame, list(masks))]
    except Exception as exc:  # noqa: BLE001 (the 3D step must never break an answer)
        if logger is not None:
            logger.warning(f"depth: locating the masks failed: {exc}")
        return [Measurement.missing(f"3D step failed: {type(exc).__name__}: {exc}")
                for _ in masks]


def is_answered(result: Result) -> bool:
    """An answer that has masks to show (or none found): images and 3D go out for it."""
    frame = result.frame
    return (result.status in (QueryStatus.SUCCEEDED, QueryStatus.NO_MASK)
            and frame is not None and frame.image.size > 0)


def measure_answer(result: Result, depth: DepthSource | None, logger: Any = None) -> Answer:
    """The typed answer of ``result``: with depth and an answer with pixels, every mask is
    measured and its 3D fields go into ``result.mask_extras`` (the result JSON)."""
    if depth is None or not is_answered(result):
        return Answer(result)
    assert result.frame is not None
    measurements = locate(depth, result.frame, result.masks, logger)
    result.mask_extras = [measurement.to_json() for measurement in measurements]
    return Answer(result, measurements)


def measure_visible(depth: DepthSource, frame: Frame, masks: Sequence[np.ndarray | None],
                    logger: Any = None) -> list[Measurement | None]:
    """A follow update's measurements: one per object, None for one not visible."""
    visible = [(k, mask) for k, mask in enumerate(masks) if mask is not None]
    located = locate(depth, frame, [MaskView(mask) for _, mask in visible], logger) \
        if visible else []
    out: list[Measurement | None] = [None] * len(masks)
    for (k, _), measurement in zip(visible, located):
        out[k] = measurement
    return out
