"""Calibration as depth_image_proc / image_geometry read it (issue 34): P for rectified
streams (K only where P is all zero), D undoing a raw stream's lens (plumb_bob,
rational_polynomial, equidistant), non-finite K/P/D and half-set ROIs refused."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from sam3_agent_ros.config import DepthConfig
from sam3_agent_ros.geometry.camera_model import (
    CameraModel,
    CameraModelError,
    Intrinsics,
    image_intrinsics,
)
from sam3_agent_ros.geometry.lens import distortion_problem, undistortion_map
from sam3_agent_ros.geometry.locate import mask_pixels
from sam3_agent_ros.geometry.measure import measure_masks
from sam3_agent_ros.geometry.target_points import points_of

VGA = (640, 480)
K = (600.0, 600.0, 319.5, 239.5)
K_VALUES = [600.0, 0.0, 319.5, 0.0, 600.0, 239.5, 0.0, 0.0, 1.0]
# A rectified stream's P (what image_proc publishes beside the raw K): another focal length and
# principal point, as after rectification with alpha 0.
P_VALUES = [560.0, 0.0, 330.0, 0.0, 0.0, 560.0, 230.0, 0.0, 0.0, 0.0, 1.0, 0.0]
PLUMB_BOB = (-0.28, 0.09, 0.001, -0.0005, -0.015)
RATIONAL = (-0.2, 0.05, 0.001, 0.0005, 0.0, 0.1, 0.02, 0.001)
EQUIDISTANT = (0.05, -0.01, 0.002, -0.0005)


def shared(**kwargs) -> CameraModel:
    """The usual camera_info of a driver: K raw, P rectified, D the lens."""
    values = {"width": 640, "height": 480, "p": P_VALUES, "d": PLUMB_BOB,
              "distortion_model": "plumb_bob", **kwargs}
    return CameraModel.from_values(K_VALUES, **values)


def test_a_rectified_stream_is_measured_with_p_not_k():
    # The shared camera_info (K raw, P rectified) on a rectified stream came out 6.3 cm off.
    assert image_intrinsics(shared(), VGA) == Intrinsics(560.0, 560.0, 330.0, 230.0)
    # K only where P is all zero (or absent).
    assert image_intrinsics(shared(p=[0.0] * 12), VGA) == Intrinsics(*K)
    assert image_intrinsics(CameraModel.from_values(K_VALUES, 640, 480), VGA) == Intrinsics(*K)
    # ROI and binning apply to P as to K.
    binned = shared(width=1280, height=960, binning_x=2, binning_y=2,
                    p=[2 * v if i != 10 else v for i, v in enumerate(P_VALUES)])
    assert image_intrinsics(binned, VGA) == Intrinsics(560.0, 560.0, 330.0, 230.0)


def test_a_raw_stream_is_measured_with_k_and_its_lens():
    intr = image_intrinsics(shared(), VGA, rectified=False)
    assert (intr.fx, intr.fy, intr.cx, intr.cy) == K
    assert intr.lens is not None and intr.lens.u.shape == (480, 640)
    # No distortion: nothing to undo.
    assert image_intrinsics(shared(d=[0.0] * 5), VGA, rectified=False).lens is None


@pytest.mark.parametrize(("field", "value", "fragment"), [
    ("d", (math.nan, 0, 0, 0, 0), "D holds nan"),
    ("d", (0.1, math.inf, 0, 0, 0), "D holds inf"),
    ("p", [math.nan] + P_VALUES[1:], "P holds nan"),
    ("p", P_VALUES[:5], "P has 5 values"),
])
def test_non_finite_d_or_p_are_refused_with_the_reason(field, value, fragment):
    for rectified in (True, False):
        with pytest.raises(CameraModelError, match=fragment):
            image_intrinsics(shared(**{field: value}), VGA, rectified=rectified)


@pytest.mark.parametrize("roi", [(100, 0, 540, 0), (100, 0, 0, 480), (0, 40, 0, 0),
                                 (-5, 0, 640, 480), (100, 0, 640, 480)])
def test_an_roi_that_is_not_all_or_nothing_is_refused(roi):
    # (100, 0, 540, 0) shifted cx by 100 px while the size check ignored it: 15.8-17.6 cm off.
    with pytest.raises(CameraModelError, match="roi"):
        image_intrinsics(shared(roi=roi), VGA)


def test_unsupported_or_misshapen_distortion_is_refused_only_when_used():
    assert distortion_problem("plumb_bob", ()) is None
    assert distortion_problem("fancy", (0.0, 0.0)) is None  # all zero: no distortion
    assert "not supported" in (distortion_problem("fancy", (0.1,)) or "")
    assert "takes 4" in (distortion_problem("equidistant", PLUMB_BOB) or "")
    odd = shared(d=(0.1,), distortion_model="fancy")
    assert image_intrinsics(odd, VGA) == Intrinsics(560.0, 560.0, 330.0, 230.0)
    with pytest.raises(CameraModelError, match="depth.rectified is false but .*not supported"):
        image_intrinsics(odd, VGA, rectified=False)


def distort(model: str, d, ideal: np.ndarray) -> np.ndarray:
    """Ideal pinhole pixels of K -> the raw pixels the lens makes of them (OpenCV's models)."""
    fx, fy, cx, cy = K
    matrix = np.array([[fx, 0, cx], [0, fy, cy], [0, 0, 1.0]])
    normalised = np.stack([(ideal[:, 0] - cx) / fx, (ideal[:, 1] - cy) / fy,
                           np.ones(len(ideal))], axis=1).reshape(-1, 1, 3)
    if model == "equidistant":
        return cv2.fisheye.projectPoints(normalised, np.zeros(3), np.zeros(3), matrix,
                                         np.array(d))[0].reshape(-1, 2)
    return cv2.projectPoints(normalised, np.zeros(3), np.zeros(3), matrix,
                             np.array(d))[0].reshape(-1, 2)


@pytest.mark.parametrize(("model", "d"), [("plumb_bob", PLUMB_BOB),
                                          ("rational_polynomial", RATIONAL),
                                          ("equidistant", EQUIDISTANT)])
def test_the_map_inverts_each_distortion_model(model, d):
    lens = undistortion_map(K, model, d, VGA)
    assert lens is not None
    rows, cols = np.mgrid[40:440:37, 40:600:41]
    rows, cols = rows.ravel(), cols.ravel()
    ideal = np.stack(lens.at(rows, cols), axis=1)
    raw_again = distort(model, d, ideal)
    np.testing.assert_allclose(raw_again, np.stack([cols, rows], axis=1), atol=2e-3)


def test_a_mask_on_a_raw_stream_is_located_where_its_rays_go():
    # A square patch on a plane 1 m away, seen through a barrel lens near the image corner.
    fx, fy, cx, cy = K
    lens = undistortion_map(K, "plumb_bob", PLUMB_BOB, VGA)
    assert lens is not None
    x = (lens.u.astype(np.float64) - cx) / fx  # each raw pixel's ray (x/z, y/z)
    y = (lens.v.astype(np.float64) - cy) / fy
    mask = (x > 0.30) & (x < 0.40) & (y > 0.20) & (y < 0.28)
    depth = np.ones((480, 640), np.float32)
    cfg = DepthConfig(erode_px=0, min_valid_pixels=20)
    raw = image_intrinsics(shared(), VGA, rectified=False)
    found = measure_masks([mask], depth, raw, cfg)[0]["position"]
    assert math.dist((found["x"], found["y"], found["z"]), (0.35, 0.24, 1.0)) < 0.002
    # Read as if rectified with K, the same pixels are centimetres off.
    naive = measure_masks([mask], depth, Intrinsics(*K), cfg)[0]["position"]
    assert math.dist((naive["x"], naive["y"], naive["z"]), (0.35, 0.24, 1.0)) > 0.02
    # The box and the cloud read the same undistorted rays.
    box = measure_masks([mask], depth, raw, cfg)[0]["box"]
    assert box is not None and abs(box["center"]["x"] - 0.35) < 0.003
    pixels = mask_pixels(mask, depth, 0, 0.1, 10.0, 1)[0]
    cloud = points_of([pixels], raw, max_points=100_000).points
    assert abs(float(cloud[:, 0].min()) - 0.30) < 0.002
    assert abs(float(cloud[:, 0].max()) - 0.40) < 0.002
