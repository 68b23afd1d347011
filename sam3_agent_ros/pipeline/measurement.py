"""An answer's 3D: the ``Answer`` every output reads, made by ``measure_answer`` before anything
is built.

``measure_answer`` runs the one 3D step (``three_d.measure_3d``) on the answer's masks: each
mask's typed ``Measurement``, and with ``target_frame`` set (a ``TargetFrameRequest``) the
transform at the colour frame's stamp, looked up once per answer (``pipeline.target_frame``), and
each mask moved into it (CONTRACTS §9). It writes the masks' 3D fields into
``result.mask_extras`` (so the result JSON) once, from the typed values; a per-answer value a new
output needs is computed here too. Asked for the target's points (``cloud_max_points``), the
cloud too, in the output frame: sampled by a ``CloudSampler`` inside the 3D step, while the
pixels are in the caches, placed once the transform is known.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sam3_agent_ros.config import GraspConfig, SceneConfig
from sam3_agent_ros.core.ports import Logger
from sam3_agent_ros.core.types import Frame, Mask, QueryStatus, Result
from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.geometry.measurement import Measurement, posed_indices
from sam3_agent_ros.geometry.target_points import TargetPoints
from sam3_agent_ros.pipeline.answer_scene import AnswerScene, SceneStep, answer_scene
from sam3_agent_ros.pipeline.target_frame import (
    CloudSampler,
    TargetFrame,
    TargetFrameRequest,
    cloud_of,
    moved_measurement,
    target_fields,
)
from sam3_agent_ros.pipeline.three_d import DepthSource, Located, measure_3d


@dataclass(frozen=True)
class SceneRequest:
    """What an answer's grasp scene needs (CONTRACTS §12: ``scene.*``, ``grasp.*`` and the most
    points of its cloud, ``depth.cloud_max_points``); ``neighbours(frame)``: the standing
    concepts' detections on the answer's frame (``concept_neighbours``; None: none)."""

    scene: SceneConfig = SceneConfig()
    grasp: GraspConfig = GraspConfig()
    max_points: int = 20000
    neighbours: Callable[[Frame], Sequence[Mask]] | None = None


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
    scene: AnswerScene | None = None  # in the output frame (None: not asked, or no transform)

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


def is_answered(result: Result) -> bool:
    """An answer that has masks to show (or none found): images and 3D go out for it."""
    frame = result.frame
    return (result.status in (QueryStatus.SUCCEEDED, QueryStatus.NO_MASK)
            and frame is not None and frame.image.size > 0)


def measure_answer(result: Result, depth: DepthSource | None, logger: Logger | None = None,
                   target_frame: TargetFrameRequest | None = None,
                   cloud_max_points: int | None = None,
                   scene: SceneRequest | None = None) -> Answer:
    """The typed answer of ``result``: with depth and an answer with pixels, every mask is
    measured and its 3D fields go into ``result.mask_extras`` (the result JSON). With
    ``target_frame``, the transform at the colour frame's stamp (one lookup) and each mask's
    ``target`` / ``target_error``. With ``cloud_max_points`` (somebody wants the points), the
    target's cloud, at most that many points. With ``scene`` (``scene.enabled``), the grasp
    scene (``answer_scene``): the boxes reach their support before anything is written."""
    if depth is None or not is_answered(result):
        return Answer(result)
    frame = result.frame
    assert frame is not None
    sampler = (CloudSampler(frame.image, cloud_max_points)
               if cloud_max_points is not None and result.masks else None)
    located = measure_3d(depth, frame, [mask.mask for mask in result.masks], target_frame,
                         logger, sampler, look_up_without_masks=True)
    measurements = [m or Measurement.missing(None) for m in located.measurements]
    moved = ([m or Measurement.missing(None) for m in located.moved]
             if located.moved is not None else None)
    target = located.target
    grasp = None
    scene_error = None
    if scene is not None and scene.scene.enabled and result.masks:
        located, grasp, scene_error = _with_scene(result, located, depth, scene, logger)
        measurements = [m or Measurement.missing(None) for m in located.measurements]
        moved = ([m or Measurement.missing(None) for m in located.moved]
                 if located.moved is not None else None)
    result.mask_extras = located.json_fields()  # the result JSON's 3D fields, written once
    if scene_error is not None:  # asked for and failed: the reason stands where the fields would
        for k, entry in enumerate(result.mask_extras):
            entry.update({"support": None, "support_error": scene_error})
            if k == 0:
                entry.update({"grasps": [], "grasp_error": scene_error})
    if grasp is not None:
        for k, (entry, extra) in enumerate(zip(result.mask_extras, grasp.fields)):
            entry.update(extra)
            if grasp.target_fields is not None and isinstance(entry.get("target"), dict):
                entry["target"].update(grasp.target_fields[k])
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
    return Answer(result, measurements, target, points, moved,
                  grasp.scene if grasp is not None else None)


def _with_scene(result: Result, located: Located, depth: DepthSource, request: SceneRequest,
                logger: Logger | None) -> tuple[Located, SceneStep | None, str | None]:
    """``located`` with the selected masks' boxes reaching their support (moved with the same
    transform) and the grasp scene; unchanged and None when it cannot run: a depth source
    that prepares no depth image (no reason), or the scene failed (a warning and the reason:
    the answer goes out without it, the reason in its fields)."""
    prepared = getattr(depth, "prepared", None)
    if not callable(prepared):
        return located, None, None
    try:
        neighbours = (request.neighbours(result.frame)
                      if request.neighbours is not None and result.frame is not None else ())
        step = answer_scene(result, [m or Measurement.missing(None) for m in located.measurements],
                            prepared(result.frame), located.target, request.scene,
                            request.grasp, request.max_points, neighbours)
    except Exception as exc:  # noqa: BLE001 (the grasp scene must never break an answer)
        reason = f"the grasp scene failed: {type(exc).__name__}: {for_log(str(exc), 200)}"
        if logger is not None:
            logger.warning(f"depth: {reason}")
        return located, None, reason
    target = located.target
    if target is None:
        return Located(list(step.reached)), step, None
    fields = [target_fields(m, target) for m in step.reached]
    moved = ([moved_measurement(m, target, f) for m, f in zip(step.reached, fields)]
             if target.ok else None)
    return Located(list(step.reached), target, list(moved) if moved is not None else None,
                   list(fields)), step, None
