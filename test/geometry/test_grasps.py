"""Parallel-jaw grasps (geometry.grasps) on the tabletop of known geometry
(sam3_agent_demo.block_scene): a tall target with a segmented neighbour 1.5 cm on one side and
one nobody segmented 1.5 cm on the other, an oblique camera, depth with 2 mm noise in
millimetres. The fingers and palm of every grasp are checked against the true blocks and the
table (not the estimates the planner used)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from sam3_agent_demo.block_scene import INTRINSICS, Block, Tabletop, close_pair
from sam3_agent_ros.geometry.box import Box3D, fit_box
from sam3_agent_ros.geometry.grasps import Gripper, gripper_boxes, plan_grasps
from sam3_agent_ros.geometry.scene_cloud import crop_of, scene_points
from sam3_agent_ros.geometry.support import Support, reach_support

TARGET_ID = 5
SEGMENTED = ("target", "neighbour", "flat")


def measured(scene: Tabletop, noise_m: float = 0.002):
    depth, masks = scene.render()
    rng = np.random.default_rng(1)
    noisy = np.round((depth + rng.normal(0.0, noise_m, depth.shape)) * 1000.0) / 1000.0
    noisy = np.where(depth > 0, noisy, 0.0).astype(np.float32)
    names = [name for name in SEGMENTED if name in scene.blocks]
    selected = [masks[name] for name in names]
    reached = []
    for index in range(len(names)):
        box = fit_box(selected[index], noisy, INTRINSICS).box
        result = reach_support(selected, index, noisy, INTRINSICS, box)
        assert result.error is None, result.error
        reached.append(result)
    cloud = scene_points(noisy, INTRINSICS, crop_of(reached[0].box),
                         [(TARGET_ID, selected[0])])
    return reached, cloud


@pytest.fixture(scope="module")
def pair():
    scene = close_pair()
    return (scene, *measured(scene))


def plan(reached, cloud, with_points=True, **options):
    return plan_grasps(reached[0].box, reached[0].support,
                       obstacles=[r.box for r in reached[1:]],
                       points=cloud.points if with_points else None, labels=cloud.labels,
                       target_label=TARGET_ID, **options)


def true_clearance(scene: Tabletop, grasp, skip=("target",)):
    """(nearest block distance, lowest height above the table) of the grasp's gripper boxes,
    sampled on a 2 mm grid, in the world (the true geometry)."""
    centres, axes, halves = gripper_boxes(grasp)
    to_world = scene.camera.world_from_camera()
    nearest, lowest = np.inf, np.inf
    for centre, frame, half in zip(centres, axes, halves):
        ticks = [np.linspace(-h, h, max(2, int(2 * h / 0.002) + 1)) for h in half]
        local = np.array(list(itertools.product(*ticks)))
        camera = centre + local @ frame.T
        world = camera @ to_world[:3, :3].T + to_world[:3, 3]
        lowest = min(lowest, float(world[:, 2].min()))
        for name, block in scene.blocks.items():
            if name in skip:
                continue
            inside = np.abs((world - block.centre()) @ block.rotation()) - np.asarray(
                block.size) / 2
            nearest = min(nearest, float(np.linalg.norm(np.maximum(inside, 0), axis=1).min()))
    return nearest, lowest


def world_axes(scene, grasp):
    return scene.camera.world_from_camera()[:3, :3] @ grasp.rotation


def test_the_only_grasp_between_the_neighbours_closes_across_them_from_above(pair):
    scene, reached, cloud = pair
    found = plan(reached, cloud)
    assert found.error is None, found.error
    assert len(found.grasps) == 1 and found.candidates == 6
    best = found.grasps[0]
    axes = world_axes(scene, best)
    assert axes[:, 0] == pytest.approx((0.0, 0.0, -1.0), abs=0.05)  # x: the approach, down
    assert abs(axes[1, 1]) > 0.99  # y: closing across the target's y side (0.05 m)
    assert best.width == pytest.approx(0.05, abs=0.005)
    assert best.opening <= 0.08 and best.clearance >= 0.01


def test_no_grasp_enters_a_neighbour_or_the_table(pair):
    scene, reached, cloud = pair
    for with_points in (True, False):
        for grasp in plan(reached, cloud, with_points).grasps:
            nearest, lowest = true_clearance(scene, grasp,
                                             () if with_points else ("target", "unsegmented"))
            assert nearest > 0.005, (grasp, nearest)
            assert lowest > 0.005, (grasp, lowest)
            # Nor the target itself: the jaws open around it.
            inside = true_clearance(scene, grasp, tuple(n for n in scene.blocks
                                                        if n != "target"))[0]
            assert inside > 0.0


def test_a_neighbour_nobody_segmented_still_blocks(pair):
    scene, reached, cloud = pair
    from_minus_x = [g for g in plan(reached, cloud, with_points=False).grasps
                    if world_axes(scene, g)[0, 0] > 0.9]  # approaching along +x
    assert from_minus_x, "without its points the side grasp from -x fits"
    assert true_clearance(scene, from_minus_x[0], ("target",))[0] < 0.01  # it is in the way
    assert not [g for g in plan(reached, cloud).grasps if world_axes(scene, g)[0, 0] > 0.9]


def test_the_neighbours_box_blocks_without_its_points(pair):
    """The segmented neighbour's points are out of the cloud: its box alone blocks."""
    scene, reached, cloud = pair
    mine = cloud.labels == TARGET_ID
    found = plan_grasps(reached[0].box, reached[0].support, obstacles=[r.box for r in reached[1:]],
                        points=cloud.points[mine], labels=cloud.labels[mine],
                        target_label=TARGET_ID)
    assert not [g for g in found.grasps if world_axes(scene, g)[0, 0] < -0.9]  # from +x
    assert not [g for g in found.grasps if abs(world_axes(scene, g)[0, 1]) > 0.9
                and g.kind == "top"]  # top-down closing across x


def test_alone_every_candidate_fits_best_from_above():
    scene = Tabletop({"target": Block(0.0, 0.0, (0.06, 0.05, 0.10))})
    reached, cloud = measured(scene)
    found = plan(reached, cloud)
    assert found.error is None and len(found.grasps) == found.candidates == 6
    kinds = [g.kind for g in found.grasps]
    assert kinds[:2] == ["top", "top"] and set(kinds[2:]) == {"side"}
    scores = [g.score for g in found.grasps]
    assert scores == sorted(scores, reverse=True) and 0 < scores[-1] <= scores[0] <= 1
    for grasp in found.grasps:
        nearest, lowest = true_clearance(scene, grasp, ())
        assert nearest > 0.0 and lowest > 0.005


def test_reasons_when_none_fits(pair):
    _, reached, cloud = pair
    wide = plan(reached, cloud, max_width=0.04)
    assert wide.grasps == () and "grasp.max_width_m" in wide.error and wide.candidates == 0
    blocked = plan(reached, cloud, clearance=0.04)
    assert blocked.grasps == () and blocked.candidates > 0
    assert "every candidate grasp" in blocked.error and "grasp.clearance_m" in blocked.error
    table = Support((0.0, 0.0, -1.0), 1.0, band=0.005)
    flat = Box3D((0.0, 0.0, 0.994), (0.05, 0.04, 0.012), (0.0, 0.0, 0.0, 1.0))
    too_flat = plan_grasps(flat, table)
    assert too_flat.grasps == () and "too flat" in too_flat.error
    assert plan_grasps(flat, table, gripper=Gripper(min_grip=0.001)).grasps


def test_the_pose_convention_and_the_json(pair):
    scene, reached, cloud = pair
    best = plan(reached, cloud).grasps[0]
    rotation = best.rotation
    np.testing.assert_allclose(rotation.T @ rotation, np.eye(3), atol=1e-9)
    assert np.linalg.det(rotation) == pytest.approx(1.0)
    assert rotation[:, 0] @ np.asarray(reached[0].support.normal) < -0.99
    world = best.moved(scene.camera.world_from_camera())
    np.testing.assert_allclose(world.rotation, world_axes(scene, best), atol=1e-9)
    assert world.position[2] == pytest.approx(0.08, abs=0.01)  # mid-contact: 6-10 cm up
    data = best.to_json()
    assert set(data) == {"pose", "width", "score"}
    assert set(data["pose"]) == {"position", "orientation"}
    assert set(data["pose"]["orientation"]) == {"x", "y", "z", "w"}
