"""Whether an answer's best grasp clears the tabletop's true geometry (pure: no ROS).

The result JSON gives each grasp's pose and width (CONTRACTS §12); the gripper around it is the
planner's (``geometry.grasps.Gripper``, the jaws open to the width plus ``grasp.clearance_m``
each side, at most ``grasp.max_width_m``), its fingertips as deep along the approach as the
contact region the pose is the middle of: from the target's near face (its true solid) to the
pose and as far again. The scene knows every object: its true top face
(``sample.GroundTruth.true_box``: a rectangle holding the face, so a cylinder is its square)
extended down to the table by its height is a box holding the object; the table is the plane
through the faces' feet (the camera looks straight down at it). The grasp is clear when every
point of the gripper's boxes (on a ``GRID_M`` grid) is at least ``clearance_m`` /
``ALLOWANCE`` from every other object's box and above the table by as much: the other half of
the clearance is the measured boxes' error the planner works with.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from sam3_agent_demo import sample
from sam3_agent_ros.geometry.grasps import Grasp, Gripper, gripper_boxes
from sam3_agent_ros.geometry.rotations import quaternion_to_matrix

GRID_M = 0.002
ALLOWANCE = 2.0
GRIPPER = Gripper()  # the planner's default gripper


@dataclass(frozen=True)
class Solid:
    """An object's true box in the camera frame: centre, axes (columns), half extents."""

    centre: np.ndarray
    axes: np.ndarray
    half: np.ndarray

    def distances(self, points: np.ndarray) -> np.ndarray:
        outside = np.abs((points - self.centre) @ self.axes) - self.half
        return np.linalg.norm(np.maximum(outside, 0.0), axis=1)

    def reach(self, direction: np.ndarray) -> float:
        """How far the box extends from its centre along ``direction`` (a unit vector)."""
        return float(np.abs(self.axes.T @ direction) @ self.half)


def true_solids(truth: sample.GroundTruth, frame_index: int) -> dict[str, Solid]:
    """Every object's true box on that frame (module doc); {} for an older ground truth."""
    solids = {}
    heights = {o["name"]: float(o["height_m"]) for o in truth.objects if "height_m" in o}
    for name in truth.names:
        face = truth.true_box(frame_index, name)
        if face is None or name not in heights:
            continue
        normal = np.asarray(face.normal, np.float64)  # into the table (camera depth grows)
        long_axis = np.asarray(face.long_axis, np.float64)
        axes = np.column_stack([long_axis, np.cross(normal, long_axis), normal])
        height = heights[name]
        solids[name] = Solid(np.asarray(face.center) + 0.5 * height * normal, axes,
                             np.array([0.5 * face.sizes[0], 0.5 * face.sizes[1], 0.5 * height]))
    return solids


def table_depth(truth: sample.GroundTruth, frame_index: int) -> float | None:
    """The table's depth (m, camera frame) on that frame: the objects' feet, their median."""
    feet = [float(truth.position(frame_index, o["name"])[2]) + float(o["height_m"])
            for o in truth.objects if "height_m" in o and o["name"] in truth.names]
    return float(np.median(feet)) if feet else None


def grasp_of(entry: dict, target: Solid, clearance_m: float, max_width_m: float,
             gripper: Gripper = GRIPPER) -> Grasp:
    """The result JSON's grasp as the planner's gripper would hold it (module doc)."""
    pose = entry["pose"]
    px, py, pz = (float(pose["position"][k]) for k in "xyz")
    qx, qy, qz, qw = (float(pose["orientation"][k]) for k in "xyzw")
    width = float(entry["width"])
    approach = quaternion_to_matrix((qx, qy, qz, qw))[:, 0]
    behind = float((np.array([px, py, pz]) - target.centre) @ approach) + target.reach(approach)
    grip = float(np.clip(2.0 * behind, gripper.min_grip, gripper.finger_length))
    opening = min(width + 2.0 * clearance_m, max_width_m)
    return Grasp((px, py, pz), (qx, qy, qz, qw), width, float(entry.get("score", 0.0)), 0.0,
                 "", opening, grip)


def gripper_points(grasp: Grasp, gripper: Gripper = GRIPPER) -> np.ndarray:
    """(N, 3) points on a ``GRID_M`` grid filling the gripper's boxes."""
    centres, axes, halves = gripper_boxes(grasp, gripper)
    out = []
    for centre, frame, half in zip(centres, axes, halves):
        ticks = [np.linspace(-h, h, max(2, int(2 * h / GRID_M) + 1)) for h in half]
        out.append(centre + np.array(list(itertools.product(*ticks))) @ frame.T)
    return np.concatenate(out)


@dataclass(frozen=True)
class GraspCheck:
    """The best grasp against the truth: ``nearest_m`` to another object's box (inf: none),
    ``above_table_m`` (the gripper's lowest point), ``clear`` (both at least the allowance)."""

    nearest_m: float
    above_table_m: float
    clear: bool


def check_grasp(entry: dict, truth: sample.GroundTruth, frame_index: int, target: str,
                clearance_m: float, max_width_m: float) -> GraspCheck | None:
    """``entry`` (the result's best grasp) against the frame's true geometry; None when the
    ground truth has no geometry for it."""
    solids = true_solids(truth, frame_index)
    table = table_depth(truth, frame_index)
    if target not in solids or table is None:
        return None
    points = gripper_points(grasp_of(entry, solids[target], clearance_m, max_width_m))
    nearest = min((float(s.distances(points).min()) for name, s in solids.items()
                   if name != target), default=float("inf"))
    above = float(table - points[:, 2].max())
    need = clearance_m / ALLOWANCE
    return GraspCheck(nearest, above, nearest >= need and above >= need)
