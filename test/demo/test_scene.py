"""The synthetic tabletop scenes: determinism, exact depth, masks consistent with colours."""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np
import pytest

from sam3_agent_demo.scene import (
    COLORS,
    CameraIntrinsics,
    CameraPose,
    Lighting,
    Scene,
    SceneObject,
    default_scene,
    load_ground_truth_masks,
    render_scene,
    render_sequence_frame,
    rotated_scene,
    save_ground_truth,
    true_box,
)

DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.fixture(scope="module")
def frame():
    return render_scene(seed=3)


def test_frame_shapes_and_types(frame):
    assert frame.rgb.shape == (480, 640, 3) and frame.rgb.dtype == np.uint8
    assert frame.depth_m.shape == (480, 640) and frame.depth_m.dtype == np.float32
    assert set(frame.masks) == {obj.name for obj in frame.scene.objects}
    for mask in frame.masks.values():
        assert mask.shape == (480, 640) and mask.dtype == bool and mask.sum() > 500


def test_render_is_deterministic_given_the_seed():
    first, second = render_scene(seed=11), render_scene(seed=11)
    assert np.array_equal(first.rgb, second.rgb)
    assert np.array_equal(first.depth_m, second.depth_m)
    other = render_scene(seed=12)
    assert not np.array_equal(first.rgb, other.rgb)  # the noise differs
    assert all(np.array_equal(first.masks[n], other.masks[n]) for n in first.masks)


def test_masks_are_disjoint(frame):
    total = sum(mask.astype(np.int32) for mask in frame.masks.values())
    assert total.max() == 1


def test_depth_on_object_tops_and_table_is_exact(frame):
    table = np.ones((480, 640), bool)
    for obj in frame.scene.objects:
        top = frame.masks[obj.name]
        table &= ~top
        expected = frame.scene.table_distance_m - obj.height
        assert np.abs(frame.depth_m[top] - expected).max() < 1e-3, obj.name
        assert frame.positions[obj.name][2] == pytest.approx(expected, abs=1e-9)
    assert np.abs(frame.depth_m[table] - frame.scene.table_distance_m).max() < 1e-3


def test_mask_centroid_back_projects_to_the_3d_top_centre(frame):
    k = frame.intrinsics
    for name, (x, y, z) in frame.positions.items():
        u, v = frame.centroid_px(name)
        assert (u - k.cx) * z / k.fx == pytest.approx(x, abs=0.003), name
        assert (v - k.cy) * z / k.fy == pytest.approx(y, abs=0.003), name


def test_masks_match_the_colours_drawn(frame):
    hsv = cv2.cvtColor(frame.rgb, cv2.COLOR_RGB2HSV)
    for obj in frame.scene.objects:
        pixels = hsv[frame.masks[obj.name]].astype(np.int32)
        expected = cv2.cvtColor(np.uint8([[COLORS[obj.color_name]]]), cv2.COLOR_RGB2HSV)[0, 0]
        hue_error = np.abs(pixels[:, 0] - int(expected[0]))
        hue_error = np.minimum(hue_error, 180 - hue_error)  # red wraps around 0/180
        assert np.median(hue_error) <= 3, obj.name
        assert np.median(pixels[:, 1]) > 150, obj.name  # saturated, unlike the table
    table = ~np.any(np.stack(list(frame.masks.values())), axis=0)
    assert np.median(hsv[table][:, 1]) < 60


def test_default_scene_supports_the_example_queries():
    scene = default_scene()
    by_colour: dict[str, list[SceneObject]] = {}
    for obj in scene.objects:
        by_colour.setdefault(obj.color_name, []).append(obj)
    frame = render_scene(scene)
    blues = sorted(by_colour["blue"], key=lambda o: frame.centroid_px(o.name)[0])
    assert len(blues) >= 2
    # "the leftmost blue object" is unambiguous: far apart in x.
    assert frame.centroid_px(blues[1].name)[0] - frame.centroid_px(blues[0].name)[0] > 100
    assert blues[0].name == "blue_box"
    reds = sorted(by_colour["red"], key=lambda o: frame.masks[o.name].sum())
    assert len(reds) >= 2 and frame.masks[reds[-1].name].sum() > 3 * frame.masks[reds[0].name].sum()
    assert reds[-1].name == "red_box"
    assert "green" in by_colour and "yellow" in by_colour and "purple" not in by_colour


def test_camera_motion_shifts_the_image_and_the_positions():
    still = render_scene(seed=1)
    moved = render_scene(pose=CameraPose(tx=0.01), seed=1)
    for name in still.masks:
        du = moved.centroid_px(name)[0] - still.centroid_px(name)[0]
        z = still.positions[name][2]
        assert du == pytest.approx(-0.01 * still.intrinsics.fx / z, abs=0.3), name
        assert moved.positions[name][0] == pytest.approx(still.positions[name][0] - 0.01)


def test_lighting_changes_brightness_not_masks():
    dim = render_scene(lighting=Lighting(brightness=0.8, noise_sigma=0.0))
    bright = render_scene(lighting=Lighting(brightness=1.1, noise_sigma=0.0))
    assert dim.rgb.mean() < bright.rgb.mean()
    assert all(np.array_equal(dim.masks[n], bright.masks[n]) for n in dim.masks)


def test_taller_objects_occlude_lower_ones():
    low = SceneObject("low", "red", "rectangle", (0.0, 0.0), (0.2, 0.2), 0.02)
    tall = SceneObject("tall", "blue", "circle", (0.05, 0.0), (0.1, 0.1), 0.10)
    frame = render_scene(Scene(objects=(tall, low)))
    assert not np.any(frame.masks["low"] & frame.masks["tall"])
    u, v = (round(c) for c in frame.intrinsics.project(0.05, 0.0, 0.9))
    assert frame.masks["tall"][v, u] and frame.depth_m[v, u] == pytest.approx(0.9, abs=1e-6)


def test_off_centre_principal_point():
    k = CameraIntrinsics(fx=500.0, fy=520.0, cx=300.0, cy=260.0)
    frame = render_scene(default_scene(k))
    for name, (x, y, z) in frame.positions.items():
        u, v = frame.centroid_px(name)
        assert u == pytest.approx(k.fx * x / z + k.cx, abs=0.5)
        assert v == pytest.approx(k.fy * y / z + k.cy, abs=0.5)


def test_sequence_frames_are_reproducible_and_move_slightly():
    a, b = render_sequence_frame(2.5), render_sequence_frame(2.5)
    assert np.array_equal(a.rgb, b.rgb)
    centroids = [render_sequence_frame(t).centroid_px("blue_box") for t in np.arange(0, 10, 1.0)]
    us = [c[0] for c in centroids]
    assert 3 < max(us) - min(us) < 25  # slight motion, never a jump


def test_depth_mm_and_depth_noise():
    frame = render_scene(depth_noise_m=0.002, seed=4)
    assert frame.depth_mm().dtype == np.uint16
    assert 0.001 < float(np.std(frame.depth_m[frame.masks["red_box"]])) < 0.003
    assert np.abs(frame.depth_mm().astype(np.float64) / 1000 - frame.depth_m).max() <= 0.0006


def test_bad_objects_are_rejected_clearly():
    with pytest.raises(ValueError, match="shape"):
        SceneObject("x", "red", "hexagon", (0, 0), (0.1, 0.1), 0.02)
    with pytest.raises(ValueError, match="colour"):
        SceneObject("x", "mauve", "circle", (0, 0), (0.1, 0.1), 0.02)
    with pytest.raises(ValueError, match="reaches the camera"):
        render_scene(Scene(objects=(SceneObject("x", "red", "circle", (0, 0), (0.1, 0.1), 1.5),)))


def test_ground_truth_round_trip(tmp_path, frame):
    path = tmp_path / "gt.npz"
    save_ground_truth(frame, path)
    masks = load_ground_truth_masks(path)
    assert masks.keys() == frame.masks.keys()
    assert all(np.array_equal(masks[n], frame.masks[n]) for n in masks)
    first = path.read_bytes()
    save_ground_truth(frame, path)
    assert path.read_bytes() == first  # reproducible bytes
    with np.load(path) as data:
        assert data["positions_m"].shape == (len(masks), 3)
        assert np.allclose(data["K"], frame.intrinsics.K)


def test_bundled_example_matches_the_generator():
    """data/example_tabletop.png is what scripts/make_example_image.py renders (seed 7)."""
    image = cv2.cvtColor(cv2.imread(str(DATA / "example_tabletop.png")), cv2.COLOR_BGR2RGB)
    frame = render_scene(seed=7)
    assert np.array_equal(image, frame.rgb)
    masks = load_ground_truth_masks(DATA / "example_tabletop_gt.npz")
    assert all(np.array_equal(masks[n], frame.masks[n]) for n in frame.masks)
    assert (DATA / "example_tabletop.png").stat().st_size < 500_000
    assert not math.isnan(frame.centroid_px("blue_box")[0])
    # Its depth (16-bit PNG, millimetres) and calibration, for sam3-agent run --depth.
    depth = cv2.imread(str(DATA / "example_tabletop_depth.png"), cv2.IMREAD_UNCHANGED)
    assert depth.dtype == np.uint16 and np.array_equal(depth, frame.depth_mm())
    from sam3_agent_ros.depth_files import read_camera_info

    intrinsics, size = read_camera_info(DATA / "example_tabletop_camera_info.yaml")
    k = frame.intrinsics
    assert (intrinsics.fx, intrinsics.fy, intrinsics.cx, intrinsics.cy) == (k.fx, k.fy, k.cx, k.cy)
    assert size == (k.width, k.height)


# --- tilted faces and true boxes (the 3D box's ground truth) ------------------------------------


@pytest.fixture(scope="module")
def rotated():
    return render_scene(rotated_scene())


def test_a_tilted_face_is_ray_cast_onto_its_plane(rotated):
    k = rotated.intrinsics
    for obj in rotated.scene.objects:
        truth = rotated.true_box(obj.name)
        vs, us = np.nonzero(rotated.masks[obj.name])
        z = rotated.depth_m[vs, us].astype(np.float64)
        points = np.stack([(us - k.cx) * z / k.fx, (vs - k.cy) * z / k.fy, z], axis=1)
        offsets = (points - np.asarray(rotated.positions[obj.name])) @ np.asarray(truth.normal)
        assert np.abs(offsets).max() < 1e-5, obj.name  # on the face's plane
        if obj.tilted:
            assert np.ptp(z) > 0.01, obj.name  # and not parallel to the image
        tilt = math.degrees(math.acos(truth.normal[2]))
        expected = math.degrees(math.acos(obj.tilt()[2, 2]))
        assert tilt == pytest.approx(expected, abs=1e-6)


def test_the_rotated_scene_has_disjoint_objects_between_camera_and_table(rotated):
    total = sum(mask.sum() for mask in rotated.masks.values())
    assert total == np.count_nonzero(rotated.label_image())
    for obj in rotated.scene.objects:
        depths = rotated.depth_m[rotated.masks[obj.name]]
        assert depths.min() > 0.8 and depths.max() < 1.0, obj.name
    assert any(obj.tilted for obj in rotated.scene.objects)


def test_a_face_tilted_through_the_table_is_refused():
    through = SceneObject("plank", "red", "rectangle", (0.0, 0.0), (0.3, 0.05), 0.02, 0.0,
                          (0.0, 30.0))
    with pytest.raises(ValueError, match="tilted top face"):
        render_scene(Scene(objects=(through,)))


def test_true_boxes_of_rectangles_ellipses_squares_circles_and_triangles():
    box = true_box(SceneObject("b", "red", "rectangle", (0.1, 0.2), (0.06, 0.15), 0.05, 30.0),
                   (0.1, 0.2, 0.95))
    assert box.sizes == pytest.approx((0.15, 0.06), abs=1e-6)
    assert box.center == pytest.approx((0.1, 0.2, 0.95), abs=1e-6)
    # The long side is the local y axis turned by 30 degrees: (-sin 30, cos 30), up to sign.
    assert abs(np.dot(box.long_axis, (-0.5, math.sqrt(3) / 2, 0.0))) == pytest.approx(1.0)
    assert box.normal == pytest.approx((0.0, 0.0, 1.0)) and box.symmetry_deg == 180.0
    square = true_box(SceneObject("s", "red", "rectangle", (0, 0), (0.08, 0.08), 0.05), (0, 0, 1))
    assert square.symmetry_deg == 90.0
    disc = true_box(SceneObject("c", "red", "circle", (0, 0), (0.08, 0.08), 0.05), (0, 0, 1))
    assert disc.symmetry_deg is None and disc.sizes == pytest.approx((0.08, 0.08), rel=1e-3)
    leaning = true_box(SceneObject("e", "red", "ellipse", (0, 0), (0.1, 0.06), 0.1, 0.0,
                                   (0.0, 20.0)), (0.0, 0.0, 0.9))
    assert leaning.long_axis == pytest.approx(
        (math.cos(math.radians(20)), 0.0, -math.sin(math.radians(20))), abs=1e-6) or \
        leaning.long_axis == pytest.approx(
            (-math.cos(math.radians(20)), 0.0, math.sin(math.radians(20))), abs=1e-6)
    triangle = true_box(SceneObject("t", "red", "triangle", (0, 0), (0.1, 0.1), 0.05), (0, 0, 1))
    assert triangle.ambiguous and triangle.symmetry_deg is None
