"""An answer's grasp scene (CONTRACTS §12), inside its 3D step: every object the answer's frame
showed with a box that reaches its support, the labelled cloud around the target and the
target's grasps, in the output frame (``target_frame`` when set, else the colour camera's).

ROS-free. ``answer_scene`` runs ``geometry.grasp_scene`` on the masks of the last executed
prompt (``Result.candidates``, the selected masks among them; the selected masks alone when they
are not known) and the standing concepts' detections on the answer's frame (``neighbours``,
each that is not one of those masks already), the selected masks' boxes as the 3D step
measured them and the others' measured here on the same depth, then moves what it found with
the answer's one transform (no second lookup). It returns typed values: the selected masks'
boxes replaced by their reaching boxes (``reached``), what each selected mask gains in the
result JSON (``fields_of``) and the ``AnswerScene`` the builders read
(``ros/messages/scene.py``). Without the transform into ``target_frame`` the scene is None (no
pose in another frame, CONTRACTS §11).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sam3_agent_ros.config import GraspConfig, SceneConfig
from sam3_agent_ros.core.types import Mask, Result
from sam3_agent_ros.geometry.box import Box3D
from sam3_agent_ros.geometry.grasp_scene import GraspScene, grasp_scene
from sam3_agent_ros.geometry.grasps import Grasp
from sam3_agent_ros.geometry.measurement import BoxValue, Measurement
from sam3_agent_ros.geometry.rotations import matrix_to_quaternion
from sam3_agent_ros.geometry.scene_cloud import ScenePoints, pack_scene
from sam3_agent_ros.geometry.support import Support
from sam3_agent_ros.masks import overlap_iou
from sam3_agent_ros.pipeline.target_frame import TargetFrame
from sam3_agent_ros.pipeline.three_d import MaskView

PREFIX = "sam3_agent/"
SUPPORT_SCALE = 1.5  # the support's box: this times the target's footprint
SUPPORT_THICKNESS_M = 0.01
SAME_OBJECT_IOU = 0.5  # a standing concept's detection this close to a scene mask is that mask


@dataclass(frozen=True)
class SceneObject:
    """One collision object: its id (``sam3_agent/...``) and its box in the output frame."""

    name: str
    box: Box3D


@dataclass(frozen=True)
class AnswerScene:
    """What ``~/collision_objects``, ``~/scene/points`` and ``~/grasps`` publish, in the output
    frame: the ``objects`` (targets, obstacles, then the support), the ``cloud`` (None without
    a target), the target's ``grasps`` best first and, when there are none, ``error``."""

    objects: tuple[SceneObject, ...]
    cloud: ScenePoints | None
    grasps: tuple[Grasp, ...]
    error: str | None = None

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(obj.name for obj in self.objects)


@dataclass(frozen=True)
class SceneStep:
    """``answer_scene``'s outcome: per selected mask its measurement with the reaching box
    (``reached``) and its JSON fields in the colour frame (``fields``) and in ``target_frame``
    (``target_fields``, None without it); the ``scene`` in the output frame (None without the
    transform)."""

    reached: list[Measurement]
    fields: list[dict[str, Any]]
    target_fields: list[dict[str, Any]] | None
    scene: AnswerScene | None


def box3d(box: BoxValue | None) -> Box3D | None:
    return Box3D(box.center, box.size, box.orientation) if box is not None else None


def moved_box(box: Box3D, matrix: np.ndarray) -> Box3D:
    """``box`` in another frame (``matrix``, 4x4: this frame's points to that one's)."""
    centre = matrix[:3, :3] @ np.asarray(box.center, np.float64) + matrix[:3, 3]
    cx, cy, cz = (float(v) for v in centre)
    return Box3D((cx, cy, cz), box.size, matrix_to_quaternion(matrix[:3, :3] @ box.rotation))


def support_box(target: Box3D, support: Support) -> Box3D:
    """The support as a thin box under the target's footprint (``SUPPORT_SCALE`` times its x
    and y extents), its top face on the plane, with the target's orientation."""
    centre = np.asarray(target.center, np.float64)
    normal = np.asarray(support.normal, np.float64)
    height = float(support.heights(centre)[0])
    under = centre - normal * (height + 0.5 * SUPPORT_THICKNESS_M)
    cx, cy, cz = (float(v) for v in under)
    return Box3D((cx, cy, cz), (SUPPORT_SCALE * target.size[0], SUPPORT_SCALE * target.size[1],
                                SUPPORT_THICKNESS_M), target.orientation)


def _scene_masks(result: Result, neighbours: Sequence[Mask] = ()
                 ) -> tuple[list[Mask], list[int]]:
    """The last prompt's masks (the selected ones found among them by their pixels), then each
    of ``neighbours`` (the standing concepts' detections on the answer's frame) that is not one
    of them already, and, per selected mask of ``result``, its index there."""
    masks = list(result.candidates)
    selected = []
    for mask in result.masks:
        index = next((i for i, m in enumerate(masks) if m.mask is mask.mask), None)
        if index is None:
            masks.append(mask)
            index = len(masks) - 1
        selected.append(index)
    shape = result.frame.image.shape[:2] if result.frame is not None else None
    for neighbour in neighbours:
        if neighbour.mask.shape == shape and not any(
                _same_object(neighbour, m) for m in masks):
            masks.append(neighbour)
    return masks, selected


def _same_object(a: Mask, b: Mask) -> bool:
    """Whether two masks of one frame cover the same object (IoU at least
    ``SAME_OBJECT_IOU``)."""
    return a.mask.shape == b.mask.shape and overlap_iou(
        a.mask, a.pixel_box, a.area, b.mask, b.pixel_box, b.area) >= SAME_OBJECT_IOU


def answer_scene(result: Result, measurements: Sequence[Measurement], depth: Any,
                 target: TargetFrame | None, scene_cfg: SceneConfig, grasp_cfg: GraspConfig,
                 max_points: int, neighbours: Sequence[Mask] = ()) -> SceneStep:
    """The grasp scene of ``result`` (module doc). ``depth``: a ``three_d.PreparedDepth`` of the
    answer's frame (its ``depth_m`` and ``intrinsics``); ``measurements``: the selected masks',
    in the colour frame. Raises on a depth without values (the caller says why)."""
    frame = result.frame
    assert frame is not None
    if depth.depth_m is None or depth.intrinsics is None:
        raise ValueError(depth.reason or "no depth")
    masks, selected = _scene_masks(result, neighbours)
    boxes: list[Box3D | None] = [None] * len(masks)
    for k, index in enumerate(selected):
        boxes[index] = box3d(measurements[k].box)
    others = [i for i in range(len(masks)) if i not in selected]
    if others:
        found = depth.measure(frame, [MaskView(masks[i].mask) for i in others])
        for i, fields in zip(others, found):
            boxes[i] = box3d(Measurement.from_json(fields).box)
    ids = [0] * len(masks)
    for k, index in enumerate(selected):
        ids[index] = k + 1
    scene = grasp_scene([m.mask for m in masks], boxes, depth.depth_m, depth.intrinsics,
                        selected=selected, mask_ids=ids, rgb=frame.image,
                        crop_scale=scene_cfg.crop_scale, crop_min_m=scene_cfg.crop_min_m,
                        max_points=max_points, max_width=grasp_cfg.max_width_m,
                        clearance=grasp_cfg.clearance_m,
                        pixel_boxes=[m.pixel_box for m in masks])
    matrix = None
    if target is not None:
        matrix = target.transform.matrix() if target.transform is not None else None
    reached, fields, moved_fields = [], [], []
    for k, index in enumerate(selected):
        reaching = scene.reaching[index]
        measurement = measurements[k]
        entry: dict[str, Any] = {"support": None, "support_error": None}
        moved: dict[str, Any] = {"support": None}
        if reaching is None:
            entry["support_error"] = measurement.box_error or "no box"
        elif reaching.support is None or reaching.error is not None:
            entry["support_error"] = reaching.error or "no support"
        else:
            # the reaching box as the JSON writes every box (rounded like the measured ones)
            measurement = Measurement.from_json({**measurement.to_json(),
                                                 "box": reaching.box.to_json()})
            entry["support"] = reaching.support.to_json()
            if matrix is not None:
                moved["support"] = reaching.support.moved(matrix).to_json()
        reached.append(measurement)
        fields.append(entry)
        moved_fields.append(moved)
    _grasp_fields(scene, selected, fields, moved_fields, matrix)
    out_scene = None if target is not None and matrix is None else _moved_scene(
        scene, selected, len(result.masks), matrix)
    return SceneStep(reached, fields, moved_fields if target is not None else None, out_scene)


def _grasp_fields(scene: GraspScene, selected: list[int], fields: list[dict[str, Any]],
                  moved_fields: list[dict[str, Any]], matrix: np.ndarray | None) -> None:
    """The grasps go on the selected mask they are of (the first whose box reaches its
    support), else the first selected mask says why there are none."""
    if not selected:
        return
    k = selected.index(scene.target) if scene.target is not None else 0
    grasps = scene.grasps.grasps if scene.grasps is not None else ()
    error = (scene.grasps.error if scene.grasps is not None else scene.error) if not grasps \
        else None
    fields[k]["grasps"] = [g.to_json() for g in grasps]
    fields[k]["grasp_error"] = error
    if matrix is not None:
        moved_fields[k]["grasps"] = [g.moved(matrix).to_json() for g in grasps]


def _moved_scene(scene: GraspScene, selected: list[int], selected_count: int,
                 matrix: np.ndarray | None) -> AnswerScene:
    def out(box: Box3D) -> Box3D:
        return moved_box(box, matrix) if matrix is not None else box

    objects = []
    for k, index in enumerate(selected):
        reaching = scene.reaching[index]
        if reaching is not None:
            name = "target" if selected_count == 1 else f"target_{k + 1}"
            objects.append(SceneObject(PREFIX + name, out(reaching.box)))
    obstacles = [r for i, r in enumerate(scene.reaching) if r is not None and i not in selected]
    objects += [SceneObject(f"{PREFIX}obstacle_{n}", out(r.box))
                for n, r in enumerate(obstacles, start=1)]
    mine = scene.reaching[scene.target] if scene.target is not None else None
    if mine is not None and mine.support is not None:
        objects.append(SceneObject(PREFIX + "support", out(support_box(mine.box, mine.support))))
    cloud = scene.cloud
    if cloud is not None and matrix is not None:
        points = cloud.points.astype(np.float64) @ matrix[:3, :3].T + matrix[:3, 3]
        cloud = ScenePoints(pack_scene(points, cloud.colours, cloud.labels), cloud.step)
    grasps = scene.grasps.grasps if scene.grasps is not None else ()
    if matrix is not None:
        grasps = tuple(g.moved(matrix) for g in grasps)
    error = None if grasps else (scene.grasps.error if scene.grasps is not None
                                 else scene.error)
    return AnswerScene(tuple(objects), cloud, grasps, error)
