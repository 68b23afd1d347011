"""locate_mask on synthetic scenes of known geometry (scenes.py): the 3D point of a mask
within 1 cm, through holes, noise, flying pixels, other resolutions and bleeding masks."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_ros.geometry.camera_model import scale_intrinsics
from sam3_agent_ros.geometry.depth_image import depth_to_metres
from sam3_agent_ros.geometry.locate import locate_mask
from test.geometry.scenes import BOXES, CENTRED, OFF_CENTRE, TABLE_Z, error_cm, render


@pytest.mark.parametrize("name", list(BOXES))
def test_32fc1_positions_within_1cm(scene, name):
    depth, masks = scene
    located = locate_mask(masks[name], depth_to_metres(depth, "32FC1"), CENTRED)
    assert located.error is None
    assert error_cm(located.position, BOXES[name]) < 1.0
    assert located.valid_pixels > 100


@pytest.mark.parametrize("name", list(BOXES))
def test_16uc1_millimetres_within_1cm(scene, name):
    depth, masks = scene
    depth_mm = np.round(depth * 1000).astype(np.uint16)
    located = locate_mask(masks[name], depth_to_metres(depth_mm, "16UC1"), CENTRED)
    assert error_cm(located.position, BOXES[name]) < 1.0


def test_nan_and_zero_holes_are_ignored(scene):
    depth, masks = scene
    rng = np.random.default_rng(0)
    holed = depth.copy()
    holed[rng.random(depth.shape) < 0.3] = np.nan
    holed[rng.random(depth.shape) < 0.2] = 0.0
    holed[200:230, 300:330] = np.nan  # a big hole in the centre box
    for name, box in BOXES.items():
        located = locate_mask(masks[name], holed, CENTRED)
        assert error_cm(located.position, box) < 1.0, name
        assert located.valid_pixels < masks[name].sum()


def test_sensor_noise_and_flying_pixels(scene):
    depth, masks = scene
    rng = np.random.default_rng(1)
    noisy = depth + rng.normal(0.0, 0.003, depth.shape).astype(np.float32)
    flying = rng.random(depth.shape) < 0.02
    noisy[flying] = rng.uniform(0.2, 0.8, int(flying.sum()))
    for statistic in ("median", "trimmed_mean", "min_cluster"):
        for name, box in BOXES.items():
            located = locate_mask(masks[name], noisy, CENTRED, statistic=statistic)
            assert error_cm(located.position, box) < 1.0, (statistic, name)
            assert 0.001 < located.spread_m < 0.02


def test_depth_at_half_resolution_is_scaled(scene):
    _, masks = scene
    half = scale_intrinsics(CENTRED, (640, 480), (320, 240))
    depth_half, _ = render(half, 320, 240)
    for name, box in BOXES.items():
        located = locate_mask(masks[name], depth_half, CENTRED)
        assert error_cm(located.position, box) < 1.0, name


def test_off_centre_principal_point():
    depth, masks = render(OFF_CENTRE)
    for name, box in BOXES.items():
        located = locate_mask(masks[name], depth, OFF_CENTRE)
        assert error_cm(located.position, box) < 1.0, name
        # The wrong principal point moves the point by centimetres: the test can fail.
        wrong = locate_mask(masks[name], depth, CENTRED)
        assert error_cm(wrong.position, box) > 1.0, name


def test_mask_bleeding_onto_the_table_needs_min_cluster(scene):
    depth, masks = scene
    box = BOXES["centre"]
    bled = masks["centre"].copy()
    ys, xs = np.nonzero(bled)
    bled[ys.min() - 60:ys.max() + 60, xs.min() - 60:xs.max() + 60] = True  # mostly table
    assert error_cm(locate_mask(bled, depth, CENTRED, statistic="min_cluster").position, box) < 1.0
    assert error_cm(locate_mask(bled, depth, CENTRED, statistic="median").position, box) > 5.0


def test_large_mask_on_the_table_plane(scene):
    depth, _ = scene
    rng = np.random.default_rng(2)
    noisy = depth + rng.normal(0.0, 0.004, depth.shape).astype(np.float32)
    table = np.ones(depth.shape, bool)
    for statistic in ("median", "trimmed_mean", "min_cluster"):
        located = locate_mask(table, noisy, CENTRED, statistic=statistic)
        assert located.position[2] == pytest.approx(TABLE_Z, abs=0.002), statistic
        assert located.spread_m == pytest.approx(0.004, abs=0.001)
        assert located.valid_pixels > 300_000


def test_too_few_pixels_gives_reason(scene):
    depth, _ = scene
    mask = np.zeros(depth.shape, bool)
    mask[240, 320:325] = True
    located = locate_mask(mask, depth, CENTRED)
    assert located.position is None
    assert located.error == "too few valid depth pixels (5 < 20)"
    assert located.valid_pixels == 5


def test_mask_entirely_on_holes_gives_reason(scene):
    depth, masks = scene
    holed = depth.copy()
    holed[masks["left"]] = np.nan
    located = locate_mask(masks["left"], holed, CENTRED)
    assert located.position is None
    assert "no valid depth" in located.error
    zeroed = depth.copy()
    zeroed[masks["left"]] = 0.0
    assert locate_mask(masks["left"], zeroed, CENTRED).position is None


def test_depth_outside_range_is_invalid(scene):
    depth, masks = scene
    located = locate_mask(masks["centre"], depth, CENTRED, min_m=0.1, max_m=0.5)
    assert located.position is None and "[0.1, 0.5] m" in located.error


def test_empty_mask(scene):
    depth, _ = scene
    located = locate_mask(np.zeros(depth.shape, bool), depth, CENTRED)
    assert located.position is None and located.error == "empty mask"


def test_thin_mask_falls_back_to_the_uneroded_mask(scene):
    depth, _ = scene
    mask = np.zeros(depth.shape, bool)
    mask[100:103, 100:200] = True  # 3 px high: erosion by 3 px empties it
    located = locate_mask(mask, depth, CENTRED, erode_px=3)
    assert located.position is not None
    assert located.position[2] == pytest.approx(TABLE_Z, abs=1e-6)
    assert located.position[1] == pytest.approx((101 - CENTRED.cy) / CENTRED.fy, abs=1e-6)


def test_intrinsics_forms_agree(scene):
    depth, masks = scene
    matrix = [[600.0, 0, 319.5], [0, 600.0, 239.5], [0, 0, 1]]
    a = locate_mask(masks["left"], depth, matrix).position
    b = locate_mask(masks["left"], depth, (600.0, 600.0, 319.5, 239.5)).position
    c = locate_mask(masks["left"], depth, np.asarray(matrix).ravel()).position
    assert a == b == c


def test_unknown_statistic_raises(scene):
    depth, masks = scene
    with pytest.raises(ValueError, match="statistic"):
        locate_mask(masks["left"], depth, CENTRED, statistic="mean")


def test_scene_module_ground_truth():
    """Cross-check with the shared synthetic scenes (demo/sam3_agent_demo/scene.py)."""
    from sam3_agent_demo.scene import render_scene

    frame = render_scene(depth_noise_m=0.002)
    k = frame.intrinsics
    depth_mm = np.clip(np.rint(frame.depth_m * 1000), 0, 65535).astype(np.uint16)
    for name, truth in frame.positions.items():
        for depth in (frame.depth_m, depth_to_metres(depth_mm, "16UC1")):
            located = locate_mask(frame.masks[name], depth, k.K)
            error = np.linalg.norm(np.asarray(located.position) - np.asarray(truth))
            assert error < 0.01, (name, error)
