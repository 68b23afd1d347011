"""The grasp scene of a ``sam3-agent run --depth`` answer (CONTRACTS §12), ROS-free.

``run_grasp_scene`` runs ``geometry.grasp_scene`` on the run's one depth image and intrinsics
(the camera frame: the CLI has no ``target_frame``), with the ``scene.*``, ``grasp.*`` and
``depth.*`` parameters: every mask of the answer is selected (ids 1..n, the ids of
``~/labels``), the first that reaches its support is the target. ``scene_fields`` gives the
result JSON's fields per mask: ``box`` (the box reaching its support), ``support`` or null
with ``support_error``, and on the target (the first mask without one) ``grasps`` or ``[]``
with ``grasp_error``. ``add_scene_fields`` merges them into ``result.mask_extras`` unless the
3D step already wrote a ``support`` there (the node's wiring: then its fields stand).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sam3_agent_ros.config import Config
from sam3_agent_ros.core.types import Result
from sam3_agent_ros.geometry.box import Box3D
from sam3_agent_ros.geometry.camera_model import Intrinsics
from sam3_agent_ros.geometry.grasp_scene import GraspScene, grasp_scene
from sam3_agent_ros.geometry.measurement import BoxValue, Measurement

SCENE_FILE = "scene.ply"


def _box3d(box: BoxValue | None) -> Box3D | None:
    if box is None:
        return None
    return Box3D(box.center, box.size, box.orientation)


def run_grasp_scene(result: Result, measurements: Sequence[Measurement] | None,
                    depth_m: np.ndarray | None, intrinsics: Intrinsics | None,
                    config: Config) -> GraspScene | None:
    """The answer's grasp scene, or None when ``scene.enabled`` is false, there is no depth or
    no mask, or the 3D step measured nothing (``measurements`` None)."""
    frame = result.frame
    if (not config.scene.enabled or measurements is None or depth_m is None
            or intrinsics is None or frame is None or not result.masks):
        return None
    masks = [mask.mask for mask in result.masks]
    boxes = [_box3d(m.box) for m in measurements]
    return grasp_scene(
        masks, boxes, depth_m, intrinsics, selected=list(range(len(masks))),
        mask_ids=list(range(1, len(masks) + 1)), rgb=frame.image,
        crop_scale=config.scene.crop_scale, crop_min_m=config.scene.crop_min_m,
        max_points=config.depth.cloud_max_points, max_width=config.grasp.max_width_m,
        clearance=config.grasp.clearance_m, min_m=config.depth.min_m,
        max_m=config.depth.max_m, pixel_boxes=[mask.pixel_box for mask in result.masks])


def scene_fields(scene: GraspScene) -> list[dict[str, Any]]:
    """Each mask's grasp-scene fields of the result JSON (module doc)."""
    out: list[dict[str, Any]] = []
    for reaching in scene.reaching:
        if reaching is None:  # no measured box: its box_error says why
            out.append({"support": None, "support_error": "no 3D box"})
        elif reaching.support is None or reaching.error is not None:
            out.append({"support": None, "support_error": reaching.error or "no support"})
        else:
            out.append({"box": reaching.box.to_json(), "support": reaching.support.to_json()})
    if out:
        where = scene.target if scene.target is not None else 0
        grasps = scene.grasps
        if grasps is not None and grasps.grasps:
            out[where]["grasps"] = [grasp.to_json() for grasp in grasps.grasps]
        else:
            out[where]["grasps"] = []
            out[where]["grasp_error"] = (grasps.error if grasps is not None and grasps.error
                                         else scene.error or "no grasp fits")
    return out


def add_scene_fields(result: Result, scene: GraspScene) -> bool:
    """Merge ``scene_fields`` into ``result.mask_extras``; False (nothing changed) when the 3D
    step already gave some mask a ``support``."""
    extras = result.mask_extras
    if any("support" in entry or "support_error" in entry for entry in extras):
        return False
    while len(extras) < len(result.masks):
        extras.append({})
    for entry, fields in zip(extras, scene_fields(scene)):
        entry.update(fields)
    return True
