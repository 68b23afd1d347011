"""frames/targets.py and frames/transform.py: a mask's position and box moved into target_frame
(hand-computed), the fields the result gains, and the transform's own math."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sam3_agent_ros.frames import Transform
from sam3_agent_ros.frames.targets import target_entry, transform_box, transform_position

HALF = math.sqrt(0.5)
# Optical frame -> base_link for a camera looking along base x: z forward = base x,
# x right = base -y, y down = base -z; mounted at (0.1, 0, 0.5).
OPTICAL_TO_BASE = Transform((0.1, 0.0, 0.5), (-0.5, 0.5, -0.5, 0.5))
BOX = {"center": {"x": 0.0, "y": 0.0, "z": 1.0}, "size": {"x": 0.2, "y": 0.1, "z": 0.05},
       "orientation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}}


def test_a_point_ahead_of_the_camera_lands_ahead_of_the_base():
    moved = transform_position({"x": 0.2, "y": -0.1, "z": 1.0}, OPTICAL_TO_BASE)
    # base = (z, -x, -y) + mount = (1.0 + 0.1, -0.2, 0.1 + 0.5)
    assert moved == pytest.approx({"x": 1.1, "y": -0.2, "z": 0.6}, abs=1e-9)
    assert transform_position(None, OPTICAL_TO_BASE) is None


def test_a_box_moves_its_centre_and_turns_its_orientation_keeping_its_size():
    moved = transform_box(BOX, OPTICAL_TO_BASE)
    assert moved["center"] == pytest.approx({"x": 1.1, "y": 0.0, "z": 0.5}, abs=1e-9)
    assert moved["size"] == BOX["size"]
    q = moved["orientation"]
    # The box's axes were the optical axes: its orientation in base is the mount's rotation.
    assert abs(np.dot([q["x"], q["y"], q["z"], q["w"]], [-0.5, 0.5, -0.5, 0.5])) == \
        pytest.approx(1.0, abs=1e-6)


def test_the_fields_a_mask_gains():
    entry = {"position": {"x": 0.0, "y": 0.0, "z": 1.0}, "box": None}
    gained = target_entry(entry, OPTICAL_TO_BASE, "base_link")
    assert gained == {"target": {"frame_id": "base_link",
                                 "position": {"x": 1.1, "y": 0.0, "z": 0.5}, "box": None}}
    assert "target" not in entry  # the camera-frame fields stay as they were
    failed = target_entry(entry, None, "base_link", "frame 'base_link' is unknown")
    assert failed == {"target": None, "target_error": "frame 'base_link' is unknown"}


def test_inverse_composition_and_matrix_round_trip():
    t = Transform((1.0, 2.0, 3.0), (0.0, 0.0, HALF, HALF))  # 90 deg about z
    np.testing.assert_allclose(t.apply_points([[1.0, 0.0, 0.0]]), [[1.0, 3.0, 3.0]], atol=1e-12)
    np.testing.assert_allclose((t * t.inverse()).matrix(), np.eye(4), atol=1e-12)
    np.testing.assert_allclose(Transform.from_matrix(t.matrix()).matrix(), t.matrix(), atol=1e-12)
    position, orientation = t.apply_pose((0, 0, 0), (0.0, 0.0, HALF, HALF))
    np.testing.assert_allclose(position, [1, 2, 3])
    np.testing.assert_allclose(abs(orientation[2]), 1.0, atol=1e-12)  # 180 deg about z


def test_a_quaternion_that_is_not_unit_is_normalised_and_bad_ones_refused():
    np.testing.assert_allclose(Transform((0, 0, 0), (0, 0, 0, 2.0)).rotation, [0, 0, 0, 1])
    with pytest.raises(ValueError, match="4 finite numbers"):
        Transform((0, 0, 0), (0, 0, 1))


def test_a_mask_without_a_position_has_no_target_and_says_why():
    """CONTRACTS §11: never a target object whose position is null (a planner testing
    ``if target:`` took it for one); the reason is the camera frame's, named."""
    entry = {"position": None, "position_error": "no depth frame within "
             "depth.max_stamp_diff_s=0.05 s of the colour frame (nearest is 3.200 s away)",
             "box": None, "box_error": "same"}
    gained = target_entry(entry, OPTICAL_TO_BASE, "base_link")
    assert gained == {"target": None, "target_error": "no 3D position in the colour frame: no "
                      "depth frame within depth.max_stamp_diff_s=0.05 s of the colour frame "
                      "(nearest is 3.200 s away)"}
    assert target_entry({"position": None}, OPTICAL_TO_BASE, "base_link")["target_error"] == \
        "no 3D position in the colour frame: no position"
