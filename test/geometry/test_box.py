"""The oriented box (fit_box) against scenes of known geometry: the sample
bag's tabletop, the rotated scene (turned and leaning top faces) of demo/sam3_agent_demo/scene.py,
and scenes.py's boxes whose side walls are in view.

Targets (issue 19): centre within 1 cm, the two largest sizes within 10 %, the in-plane angle of
the long axis within 10 degrees."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from sam3_agent_demo.scene import box_errors
from sam3_agent_ros.geometry.box import Box3D, fit_box
from sam3_agent_ros.geometry.depth_image import depth_to_metres
from test.geometry.scenes import BOXES, CENTRED, SCENES, TABLE_Z, render

CASES = [(scene, obj.name) for scene, built in SCENES.items() for obj in built.objects]


def errors_of(frame, name, boxed):
    box = boxed.box
    assert box is not None, boxed.error
    return box_errors(frame.true_box(name), box.center, box.size, box.rotation)


def assert_a_proper_box(box: Box3D) -> None:
    quaternion = np.array(box.orientation)
    assert np.linalg.norm(quaternion) == pytest.approx(1.0, abs=1e-9)
    rotation = box.rotation
    assert np.linalg.det(rotation) == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_allclose(rotation.T @ rotation, np.eye(3), atol=1e-9)
    assert box.size[0] >= box.size[1] >= box.size[2] >= 0.0
    assert rotation[:, 2] @ np.asarray(box.center) > 0  # box z away from the camera
    assert rotation[0, 0] >= 0  # box x to the image's right


@pytest.mark.parametrize(("scene", "name"), CASES)
def test_boxes_meet_the_targets_from_millimetre_depth(frames, scene, name):
    frame = frames[scene]
    depth = depth_to_metres(frame.depth_mm(), "16UC1")  # as a RealSense sends it
    boxed = fit_box(frame.masks[name], depth, frame.intrinsics.K)
    assert_a_proper_box(boxed.box)
    errors = errors_of(frame, name, boxed)
    assert errors.within(center_cm=1.0, size_pct=10.0, angle_deg=10.0), errors.describe()
    truth = frame.true_box(name)
    if truth.ambiguous:  # a triangle: any of its rectangles, but on its face
        assert abs((np.asarray(boxed.box.center) - truth.center) @ truth.normal) < 0.005
    assert boxed.box.size[2] < 0.003  # a top face alone has no visible thickness
    normal = boxed.box.rotation[:, 2]
    assert math.degrees(math.acos(min(1.0, abs(normal @ truth.normal)))) < 3.0


def test_the_accuracy_check_can_fail(frames):
    """A box turned 30 degrees, 2 cm off, 20 % large: every target is missed."""
    frame = frames["rotated"]
    boxed = fit_box(frame.masks["flat_box"], frame.depth_m, frame.intrinsics.K)
    box = boxed.box
    turn = np.array([[math.cos(0.52), -math.sin(0.52), 0], [math.sin(0.52), math.cos(0.52), 0],
                     [0, 0, 1]])
    wrong = box_errors(frame.true_box("flat_box"), np.asarray(box.center) + [0.02, 0, 0],
                       np.asarray(box.size) * 1.2, turn @ box.rotation)
    assert wrong.center_cm == pytest.approx(2.0, abs=0.1)
    assert min(wrong.size_pct) > 15 and wrong.angle_deg > 25
    assert not wrong.within()


def _spoiled(frame, seed, noise_m=0.003, spill_px=3):
    """Sensor trouble: 3 mm noise, 20 % holes, 2 % flying pixels in front, and every mask
    spilling 3 px onto the table around it."""
    rng = np.random.default_rng(seed)
    depth = frame.depth_m + rng.normal(0.0, noise_m, frame.depth_m.shape).astype(np.float32)
    depth[rng.random(depth.shape) < 0.2] = 0.0
    flying = rng.random(depth.shape) < 0.02
    depth[flying] = rng.uniform(0.2, 0.8, int(flying.sum()))
    masks = {name: frame.spilled_mask(name, spill_px) if spill_px else frame.masks[name]
             for name in frame.masks}
    return depth, masks


@pytest.mark.parametrize("scene", list(SCENES))
def test_boxes_are_robust_to_noise_holes_outliers_and_masks_spilling_onto_the_table(
        frames, scene):
    frame = frames[scene]
    depth, masks = _spoiled(frame, seed=len(scene))
    for name in frame.masks:
        obj = frame.scene.object(name)
        if obj.height < 0.05:
            continue  # a face within ~3 cm of the table joins it across a spilled edge
        boxed = fit_box(masks[name], depth, frame.intrinsics.K)
        assert_a_proper_box(boxed.box)
        errors = errors_of(frame, name, boxed)
        assert errors.within(), (name, errors.describe())
        assert boxed.box.size[2] < 0.01, name  # the noise is not taken for thickness


@pytest.mark.parametrize("scene", list(SCENES))
def test_noisy_depth_does_not_tilt_the_plane(frames, scene):
    """1 cm noise along the rays (a far stereo camera): the plane is fitted in inverse depth,
    where the noise does not tilt it; every box stays on target."""
    frame = frames[scene]
    depth, masks = _spoiled(frame, seed=3, noise_m=0.01, spill_px=0)
    for name in frame.masks:
        boxed = fit_box(masks[name], depth, frame.intrinsics.K)
        errors = errors_of(frame, name, boxed)
        assert errors.within(), (name, errors.describe())
        normal = boxed.box.rotation[:, 2]
        assert abs(normal @ frame.true_box(name).normal) > math.cos(math.radians(3.0)), name


def test_a_face_near_the_table_joins_it_when_the_mask_spills(frames):
    """The limit the test above steps around: a 3 cm high cylinder whose mask spills onto the
    table gets a box reaching down to the table (its visible thickness), still centred in x, y."""
    frame = frames["tabletop"]
    depth, masks = _spoiled(frame, seed=5)
    boxed = fit_box(masks["red_cylinder"], depth, frame.intrinsics.K)
    truth = frame.true_box("red_cylinder")
    assert boxed.box.size[2] > 0.015
    offset = np.asarray(boxed.box.center) - truth.center
    assert np.linalg.norm(offset[:2]) < 0.01


def test_visible_side_walls_give_the_box_its_thickness():
    """Ray-cast boxes: straight below the camera only the top is seen (no thickness); off to the
    side a wall is seen too, and the box reaches down along it."""
    depth, masks = render(CENTRED)
    for name, truth in BOXES.items():
        box = fit_box(masks[name], depth, CENTRED).box
        assert_a_proper_box(box)
        footprint = sorted([truth.x1 - truth.x0, truth.y1 - truth.y0], reverse=True)
        # The axis nearest the camera's z is the top face's normal; the other two its sides.
        rotation = box.rotation
        across = int(np.argmax(np.abs(rotation[2])))
        sides = [box.size[i] for i in range(3) if i != across]
        np.testing.assert_allclose(sides, footprint, rtol=0.1)
        centre = np.asarray(box.center)
        assert centre[:2] == pytest.approx([(truth.x0 + truth.x1) / 2, (truth.y0 + truth.y1) / 2],
                                           abs=0.01)
        visible = box.size[across]
        top = TABLE_Z - truth.height
        assert centre[2] == pytest.approx(top + visible / 2, abs=0.002)
        if name == "centre":
            assert visible < 0.002
        else:  # a wall in view: most of its height
            assert visible > 0.7 * truth.height, (name, visible)


def test_the_plane_is_the_dominant_face_not_a_compromise_with_the_walls():
    depth, masks = render(CENTRED)
    box = fit_box(masks["bottom_right"], depth, CENTRED).box  # two walls in view
    normal = box.rotation[:, int(np.argmax(np.abs(box.rotation[2])))]
    assert abs(normal[2]) > math.cos(math.radians(2.0))


def test_an_axis_aligned_flat_box_has_the_identity_orientation():
    depth, masks = render(CENTRED)
    box = fit_box(masks["centre"], depth, CENTRED).box
    np.testing.assert_allclose(box.orientation, (0.0, 0.0, 0.0, 1.0), atol=1e-6)
    assert box.size[:2] == pytest.approx((0.1, 0.08), rel=0.03)


def test_fitting_is_repeatable(frames):
    frame = frames["rotated"]
    depth, masks = _spoiled(frame, seed=1)
    first = fit_box(masks["leaning_box"], depth, frame.intrinsics.K)
    assert fit_box(masks["leaning_box"], depth.copy(), frame.intrinsics.K) == first


def test_masks_without_a_surface_give_reasons():
    depth, masks = render(CENTRED)
    empty = fit_box(np.zeros(depth.shape, bool), depth, CENTRED)
    assert (empty.box, empty.error) == (None, "empty mask")
    few = np.zeros(depth.shape, bool)
    few[240, 320:325] = True
    assert fit_box(few, depth, CENTRED).error == "too few valid depth pixels (5 < 20)"
    line = np.zeros(depth.shape, bool)
    line[240, 100:200] = True  # one row of the table: a line of points
    boxed = fit_box(line, depth, CENTRED, erode_px=0)
    assert boxed.box is None and "do not span a surface" in boxed.error
    holes = depth.copy()
    holes[masks["left"]] = np.nan
    assert "no valid depth" in fit_box(masks["left"], holes, CENTRED).error
    with pytest.raises(ValueError, match="statistic"):
        fit_box(masks["left"], depth, CENTRED, statistic="mean")


def test_the_footprint_from_each_rows_end_pixels_is_the_footprint_of_all_pixels():
    """The rectangle and the extents come from the face's convex hull alone, and the hull's
    pixels are among each row's first and last (box._RayPixels.row_ends): seen through a
    tilted plane (a homography), rotated rectangles, ellipses and a ragged blob give the same
    footprint from those as from every pixel."""
    from sam3_agent_ros.geometry.box import _footprint, _RayPixels
    from sam3_agent_ros.geometry.locate import sample_mask_depth

    rng = np.random.default_rng(4)
    height, width = 240, 320
    v, u = np.mgrid[0:height, 0:width]
    depth = (1.0 + 0.001 * (u - width / 2) + 0.0005 * (v - height / 2)).astype(np.float32)
    shapes = []
    for angle in (0.0, 0.3, 1.1):
        rect = np.zeros((height, width), np.uint8)
        corners = cv2.boxPoints(((160.0, 120.0), (150.0, 60.0), np.degrees(angle)))
        cv2.fillPoly(rect, [corners.astype(np.int32)], 1)
        shapes.append(rect.astype(bool))
    shapes.append(((u - 150) / 90.0) ** 2 + ((v - 110) / 40.0) ** 2 <= 1.0)
    shapes.append(shapes[-1] & (rng.random((height, width)) < 0.7))
    axis_u, axis_v = np.array([1.0, 0.0, 0.1]), np.array([0.0, 1.0, 0.05])
    for mask in shapes:
        sampled = sample_mask_depth(mask, depth, 0, 0.1, 10.0, 20, "median")[0]
        pixels = _RayPixels.of(sampled.crop & sampled.valid, sampled, CENTRED)
        flat = [pixels.dot(axis_u) / pixels.dot(np.array([0.0, 0.2, 1.0])),
                pixels.dot(axis_v) / pixels.dot(np.array([0.0, 0.2, 1.0]))]
        everything = _footprint(flat, np.arange(len(pixels)))
        rims = _footprint(flat, pixels.row_ends())
        assert len(pixels.row_ends()) < len(pixels) / 10
        for (d1, e1, m1), (d2, e2, m2) in zip(everything, rims, strict=True):
            np.testing.assert_allclose(d1, d2, atol=1e-9)
            assert e1 == pytest.approx(e2, abs=1e-9) and m1 == pytest.approx(m2, abs=1e-9)
