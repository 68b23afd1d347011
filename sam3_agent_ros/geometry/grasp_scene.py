"""One answer's grasp scene in one call (ROS-free): every mask's box reaching its support, the
labelled cloud around the target and the target's grasps, in the colour camera's frame. What
the node's 3D step and ``sam3-agent run --depth`` run after the masks' boxes (CONTRACTS §12);
``bench/grasp_scene.py`` times it.

``grasp_scene(masks, boxes, depth_m, k, selected=..., mask_ids=...)``: ``boxes`` are the masks'
measured boxes (``box.fit_box`` / the result JSON's ``box``; None: a mask without). Each mask
with a box gets its support and reaching box (``support.reach_support``; the other masks are
left out of its ring), the selected masks first; the first plane found is tried first for the
others. The target is the first selected mask with a reaching box: the crop
around its reaching box gives the cloud (``scene_cloud.scene_points``, labelled with the
selected masks' ids) and its grasps are checked against the support, the other masks'
reaching boxes (their measured boxes where their support failed) and the cloud.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sam3_agent_ros.geometry.box import Box3D
from sam3_agent_ros.geometry.camera_model import Intrinsics, as_intrinsics
from sam3_agent_ros.geometry.grasps import Grasps, plan_grasps
from sam3_agent_ros.geometry.scene_cloud import ScenePoints, crop_of, scene_points
from sam3_agent_ros.geometry.support import Reaching, reach_support
from sam3_agent_ros.masks import PixelBox


@dataclass(frozen=True)
class GraspScene:
    """Per mask its ``Reaching`` (None: no measured box; its reason is the box's), the
    ``target`` mask's index (None: no selected mask has a box reaching its support), the
    ``cloud`` around it and its ``grasps`` (each None without a target: ``error`` says why)."""

    reaching: tuple[Reaching | None, ...]
    target: int | None
    cloud: ScenePoints | None
    grasps: Grasps | None
    error: str | None = None


def grasp_scene(masks: Sequence[np.ndarray], boxes: Sequence[Box3D | None],
                depth_m: np.ndarray, k: Intrinsics | Sequence[float] | np.ndarray, *,
                selected: Sequence[int], mask_ids: Sequence[int],
                rgb: np.ndarray | None = None, crop_scale: float = 2.0,
                crop_min_m: float = 0.3, max_points: int = 20000, max_width: float = 0.08,
                clearance: float = 0.01, min_m: float = 0.1, max_m: float = 10.0,
                up: Sequence[float] | None = None,
                pixel_boxes: Sequence[PixelBox | None] | None = None) -> GraspScene:
    """The grasp scene of an answer (module doc). ``selected``: indices of the selected masks,
    best first; ``mask_ids``: each mask's id (the labels of ``~/labels``); ``pixel_boxes``:
    the masks' pixel boxes when known (the answer's masks carry them)."""
    if len(boxes) != len(masks) or len(mask_ids) != len(masks):
        raise ValueError(f"{len(masks)} masks, {len(boxes)} boxes, {len(mask_ids)} ids")
    intr = as_intrinsics(k)
    found: dict[int, Reaching] = {}
    known = None
    for index in [*selected, *(i for i in range(len(masks)) if i not in selected)]:
        box = boxes[index]
        if box is None or index in found:
            continue
        found[index] = reach_support(
            masks, index, depth_m, intr, box, min_m=min_m, max_m=max_m, up=up, known=known,
            pixel_box_of=pixel_boxes[index] if pixel_boxes is not None else None)
        known = known or found[index].support
    reaching = tuple(found.get(index) for index in range(len(masks)))
    target = next((i for i in selected if _reaches(reaching[i])), None)
    if target is None:
        reasons = [_reason(reaching[i]) for i in selected]
        why = "; ".join(r for r in reasons if r) or "no mask is selected"
        return GraspScene(reaching, None, None, None,
                          f"no selected mask has a box reaching its support: {why}")
    mine = reaching[target]
    assert mine is not None and mine.support is not None
    cloud = scene_points(depth_m, intr, crop_of(mine.box, crop_scale, crop_min_m),
                         [(mask_ids[i], masks[i]) for i in selected], rgb,
                         max_points=max_points, min_m=min_m, max_m=max_m)
    obstacles = [r.box for i, r in enumerate(reaching) if r is not None and i != target]
    grasps = plan_grasps(mine.box, mine.support, obstacles=obstacles, points=cloud.points,
                         labels=cloud.labels, target_label=mask_ids[target],
                         max_width=max_width, clearance=clearance, up=up)
    return GraspScene(reaching, target, cloud, grasps)


def _reaches(reaching: Reaching | None) -> bool:
    return reaching is not None and reaching.support is not None and reaching.error is None


def _reason(reaching: Reaching | None) -> str | None:
    return "no box" if reaching is None else reaching.error
