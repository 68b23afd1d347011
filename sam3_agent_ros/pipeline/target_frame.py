"""The TF step of an answer (CONTRACTS §9): the transform into ``target_frame`` at the colour
frame's stamp, the masks' measurements moved into it, and the target's point cloud.

ROS-free. A transform source is any object with ``lookup(target_frame, source_frame, stamp_ns,
timeout_s)`` returning either ``(Transform | None, reason)`` or an object with ``.transform`` and
``.reason`` (``ros.tf_listener.create_tf_source(node)``'s ``TfLookup``). The lookup is made once
per answer (or follow update) AT THE COLOUR FRAME'S STAMP, never for the latest transform: a camera
on a moving arm is taken where it was when the image was captured. When it fails the
``TargetFrame`` carries the reason (the frames, the newest stamp seen, the known frames) and the
builders publish no pose in ``target_frame`` for that answer: never a silent wrong pose.

The target's cloud is read from the pixels the 3D step measures the masks from, handed over
between its sampling and its box fits (``CloudSampler``), and moved with the same transform.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from sam3_agent_ros.core.types import Frame, stamp_ns
from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.frames import Transform
from sam3_agent_ros.frames.targets import target_entry
from sam3_agent_ros.frames.transform import transform_problem
from sam3_agent_ros.geometry.camera_model import Intrinsics
from sam3_agent_ros.geometry.locate import MaskPixels
from sam3_agent_ros.geometry.measurement import Measurement
from sam3_agent_ros.geometry.target_points import GridSamples, TargetPoints, sample_grid

FRAME_CHARS = 120  # a frame name in a reason (outside text: escaped and clipped)


class Transforms(Protocol):
    def lookup(self, target_frame: str, source_frame: str, stamp_ns: int,
               timeout_s: float) -> Any: ...


@dataclass(frozen=True)
class TargetFrameRequest:
    """What the TF step needs: ``target_frame`` (non-empty), the source of transforms and how
    long one lookup may wait (``tf.timeout_s``)."""

    frame_id: str
    transforms: Transforms
    timeout_s: float = 0.2


@dataclass(frozen=True)
class TargetFrame:
    """The transform of one answer into ``frame_id`` (``p_target = transform p_colour``) at the
    colour frame's ``stamp_ns``, or, when ``transform`` is None, ``reason`` says what is
    missing."""

    frame_id: str
    source_frame: str
    stamp_ns: int
    transform: Transform | None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.transform is not None


def _stamp_text(ns: int) -> str:
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d} s"


def _unpack(found: Any) -> tuple[Transform | None, str]:
    if not isinstance(found, tuple) and hasattr(found, "transform"):
        return found.transform, str(getattr(found, "reason", "") or "")
    transform, reason = found
    return transform, str(reason or "")


def lookup_target(request: TargetFrameRequest, frame: Frame) -> TargetFrame:
    """The transform from ``frame``'s frame into ``request.frame_id`` at ``frame``'s stamp.
    Never raises: a failing source becomes the reason."""
    return lookup_target_at(request, frame.frame_id,
                            stamp_ns(frame.stamp_sec, frame.stamp_nanosec))


def lookup_target_at(request: TargetFrameRequest, source: str, stamp: int,
                     timeout_s: float | None = None) -> TargetFrame:
    """``lookup_target`` for a frame named ``source`` stamped ``stamp`` (ns), waiting at most
    ``timeout_s`` (None: ``request.timeout_s``; 0: what the buffer holds now)."""
    target = request.frame_id
    wait_s = request.timeout_s if timeout_s is None else timeout_s

    def missing(why: str = "") -> str:
        prefix = (f"no transform from '{for_log(source, FRAME_CHARS)}' to "
                  f"'{for_log(target, FRAME_CHARS)}' at {_stamp_text(stamp)}")
        return f"{prefix}: {why}" if why else prefix

    if not source:
        return TargetFrame(target, source, stamp, None, missing(
            "the colour frame has no frame_id (set the camera's frame_id, e.g. "
            "camera_color_optical_frame)"))
    if source.lstrip("/") == target.lstrip("/"):
        return TargetFrame(target, source, stamp, Transform.identity())
    try:
        transform, reason = _unpack(request.transforms.lookup(target, source, stamp, wait_s))
    except Exception as exc:  # noqa: BLE001 (a TF failure must never break an answer)
        transform, reason = None, missing(f"lookup failed: {type(exc).__name__}: "
                                          f"{for_log(exc, FRAME_CHARS)}")
    if transform is None:
        return TargetFrame(target, source, stamp, None, reason or missing())
    # Any source's transform (tf2, our buffer, a plugin) is checked: a non-finite or non-rigid
    # one gives no pose in target_frame for this answer, with the reason (CONTRACTS §11).
    problem = (transform_problem(transform) if isinstance(transform, Transform)
               else "the transform source returned no Transform")
    if problem is not None:
        return TargetFrame(target, source, stamp, None, missing(problem))
    return TargetFrame(target, source, stamp, transform)


def target_fields(measurement: Measurement, target: TargetFrame) -> dict[str, Any]:
    """What one mask of the result JSON gains: ``target`` (or None) and ``target_error``."""
    return target_entry(measurement.to_json(), target.transform, target.frame_id,
                        target.reason)


def moved_measurement(measurement: Measurement, target: TargetFrame,
                      fields: dict[str, Any] | None = None) -> Measurement:
    """``measurement`` in ``target.frame_id`` (the same values as the result JSON's
    ``target``: ``fields``, its ``target_fields`` when already computed); its errors unchanged.
    ``target`` must have a transform."""
    found = fields if fields is not None else target_fields(measurement, target)
    entry = found["target"]
    if entry is None:  # no position to move: no target, for the reason the JSON gives
        return Measurement.missing(found.get("target_error"))
    return Measurement.from_json({"position": entry["position"], "box": entry["box"],
                                  "position_error": measurement.position_error,
                                  "position_spread_m": measurement.position_spread_m,
                                  "box_error": measurement.box_error})


class CloudSampler:
    """A ``geometry.measure.PixelSink``: the target's points read from the masks' pixels when
    the 3D step hands them over (``target_points.sample_grid``), placed in the output frame by
    ``cloud_of`` once the transform is known. Never raises into the 3D step: a failure is kept
    in ``error``."""

    def __init__(self, rgb: np.ndarray | None, max_points: int) -> None:
        self.rgb = rgb
        self.max_points = max_points
        self.samples: GridSamples | None = None
        self.intrinsics: Intrinsics | None = None
        self.error = ""

    def take(self, pixels: Sequence[MaskPixels | None], intrinsics: Intrinsics) -> None:
        try:
            self.samples = sample_grid(pixels, self.rgb, max_points=self.max_points)
            self.intrinsics = intrinsics
        except Exception as exc:  # noqa: BLE001 (the cloud must never break an answer)
            self.error = f"{type(exc).__name__}: {exc}"


def cloud_of(sampler: CloudSampler, target: TargetFrame | None) -> TargetPoints | None:
    """The sampled points in the output frame; None when no mask had pixels with valid depth
    or the transform is missing."""
    samples, intrinsics = sampler.samples, sampler.intrinsics
    if samples is None or intrinsics is None or samples.sets == 0:
        return None
    if target is not None and target.transform is None:
        return None
    return samples.place(intrinsics, target.transform if target is not None else None)
