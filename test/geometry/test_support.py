"""Boxes that reach their support (geometry.support) on a tabletop of known geometry
(sam3_agent_demo.block_scene): an oblique camera, objects of known heights, a segmented
neighbour 1.5 cm from the target and one nobody segmented 1.5 cm on its other side, depth as a
camera sends it (millimetres, 2 mm noise). Targets (issue 36): heights within 1 cm, the table's
plane within 2 degrees and 1 cm."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sam3_agent_demo.block_scene import INTRINSICS, close_pair
from sam3_agent_ros.geometry.box import fit_box
from sam3_agent_ros.geometry.support import Support, fit_support, reach_support, reaching_box

SEGMENTED = ("target", "neighbour", "flat")


@pytest.fixture(scope="module")
def tabletop():
    scene = close_pair()
    depth, masks = scene.render()
    rng = np.random.default_rng(0)
    noisy = np.round((depth + rng.normal(0.0, 0.002, depth.shape)) * 1000.0) / 1000.0
    noisy[depth == 0] = 0.0
    return scene, noisy.astype(np.float32), [masks[name] for name in SEGMENTED]


def reached(tabletop, index):
    _, depth, masks = tabletop
    boxed = fit_box(masks[index], depth, INTRINSICS)
    assert boxed.box is not None, boxed.error
    return boxed.box, reach_support(masks, index, depth, INTRINSICS, boxed.box)


@pytest.mark.parametrize("index", range(len(SEGMENTED)))
def test_boxes_reach_the_table_with_the_objects_heights(tabletop, index):
    scene, _, _ = tabletop
    measured, result = reached(tabletop, index)
    assert result.error is None, result.error
    truth = scene.blocks[SEGMENTED[index]]
    assert measured.size[2] < truth.height - 0.01  # the measured box alone falls short
    assert abs(result.box.size[2] - truth.height) < 0.01
    normal, distance = scene.table_in_camera()
    angle = math.degrees(math.acos(min(1.0, float(np.asarray(result.support.normal) @ normal))))
    assert angle < 2.0
    assert abs(result.support.distance - distance) < 0.01
    # The box stands on the table: its z axis along the normal, its bottom face on the plane.
    rotation = result.box.rotation
    assert abs(rotation[:, 2] @ normal) > math.cos(math.radians(2.0))
    assert rotation[:, 2] @ np.asarray(result.box.center) > 0
    assert np.linalg.det(rotation) == pytest.approx(1.0, abs=1e-9)
    bottom = np.asarray(result.box.center) - 0.5 * result.box.size[2] * (-rotation[:, 2])
    assert abs(bottom @ normal + distance) < 0.01
    # The footprint: the true one within 1.5 cm a side, its centre within 1.5 cm.
    assert abs(result.box.size[0] - max(truth.size[:2])) < 0.015
    assert abs(result.box.size[1] - min(truth.size[:2])) < 0.015
    true_centre = scene.corners_in_camera(SEGMENTED[index]).mean(axis=0)
    assert np.linalg.norm(np.asarray(result.box.center) - true_centre) < 0.015


def test_the_plane_in_another_frame_is_the_table(tabletop):
    scene, _, _ = tabletop
    _, result = reached(tabletop, 0)
    world = result.support.moved(scene.camera.world_from_camera())
    np.testing.assert_allclose(world.normal, (0.0, 0.0, 1.0), atol=0.02)
    assert abs(world.distance) < 0.01
    assert set(world.to_json()) == {"normal", "distance"}
    assert set(world.to_json()["normal"]) == {"x", "y", "z"}


def test_a_neighbour_nobody_segmented_fills_the_ring_and_the_table_still_wins(tabletop):
    """Without the other masks' pixels excluded, the segmented neighbour and the unsegmented one
    stand in the target's ring; the plane is still the table (RANSAC below the object)."""
    scene, depth, masks = tabletop
    box = fit_box(masks[0], depth, INTRINSICS).box
    support = fit_support(masks[:1], 0, depth, INTRINSICS, box)
    assert isinstance(support, Support), support
    normal, distance = scene.table_in_camera()
    assert abs(support.distance - distance) < 0.01
    assert float(np.asarray(support.normal) @ normal) > math.cos(math.radians(2.0))


def test_no_depth_around_the_object_is_a_reason(tabletop):
    _, depth, masks = tabletop
    box = fit_box(masks[0], depth, INTRINSICS).box
    holes = np.where(masks[0], depth, 0.0).astype(np.float32)
    result = reach_support(masks, 0, holes, INTRINSICS, box)
    assert result.support is None and "too few depth points around" in result.error
    assert result.box == box  # the measured box, unchanged


def test_a_plane_above_the_object_is_refused(tabletop):
    """The object in a pit: everything around it is nearer the camera than its top."""
    _, depth, masks = tabletop
    box = fit_box(masks[0], depth, INTRINSICS).box
    pit = np.where(masks[0], depth, np.float32(0.3)).astype(np.float32)
    result = reach_support(masks, 0, pit, INTRINSICS, box)
    assert result.support is None and "no support plane below the object" in result.error


def test_a_known_up_refuses_a_wall(tabletop):
    scene, depth, masks = tabletop
    box = fit_box(masks[0], depth, INTRINSICS).box
    to_camera = scene.camera.camera_from_world()[:3, :3]
    sideways = to_camera @ np.array([1.0, 0.0, 0.0])  # gravity said to point along the table
    result = reach_support(masks, 0, depth, INTRINSICS, box, up=sideways)
    assert result.support is None and result.error
    upright = reach_support(masks, 0, depth, INTRINSICS, box,
                            up=to_camera @ np.array([0.0, 0.0, 1.0]))
    assert upright.error is None


def test_a_box_below_its_support_is_a_reason():
    support = Support((0.0, 0.0, -1.0), 1.0)  # the table at z = 1, seen from above
    from sam3_agent_ros.geometry.box import Box3D
    below = Box3D((0.0, 0.0, 1.2), (0.1, 0.1, 0.01), (0.0, 0.0, 0.0, 1.0))
    assert "does not stand above" in reaching_box(below, support)
    above = reaching_box(Box3D((0.0, 0.0, 0.9), (0.1, 0.05, 0.0), (0.0, 0.0, 0.0, 1.0)),
                         support)
    assert above.size == pytest.approx((0.1, 0.05, 0.1))
    assert above.center == pytest.approx((0.0, 0.0, 0.95))
