"""camera_model: a camera_info turns into the colour image's intrinsics only when it fits it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sam3_agent_ros.geometry.camera_model import (
    CalibrationHistory,
    CameraModel,
    CameraModelError,
    Intrinsics,
    as_intrinsics,
    image_intrinsics,
    scale_intrinsics,
)
from test.geometry.scenes import CENTRED

K = (600.0, 600.0, 319.5, 239.5)
VGA = (640, 480)


def model(k=K, width=640, height=480, **kwargs) -> CameraModel:
    return CameraModel.from_values(k, width, height, **kwargs)


def test_a_fitting_model_gives_its_intrinsics():
    assert image_intrinsics(model(), VGA) == Intrinsics(*K)
    # No size said (--intrinsics): only the values are checked.
    assert image_intrinsics(CameraModel(Intrinsics(*K)), VGA) == Intrinsics(*K)


@pytest.mark.parametrize(("width", "height"), [(1280, 720), (1280, 960), (320, 240), (1, 1),
                                               (0, 0), (640, 481)])
def test_another_size_is_refused_not_scaled(width, height):
    with pytest.raises(CameraModelError, match=f"camera_info is for {width}x{height} images but "
                                               "the colour frame is 640x480"):
        image_intrinsics(model(width=width, height=height), VGA)


def test_binning_maps_the_full_resolution_calibration():
    full = (1200.0, 1200.0, 639.0, 479.0)  # calibrated at 1280x960
    got = image_intrinsics(model(full, 1280, 960, binning_x=2, binning_y=2), VGA)
    assert got == Intrinsics(600.0, 600.0, 319.5, 239.5)
    with pytest.raises(CameraModelError, match="binning 2x2.*after roi/binning: 640x480.*"
                                               "colour frame is 320x240"):
        image_intrinsics(model(full, 1280, 960, binning_x=2, binning_y=2), (320, 240))
    # binning 0 is binning 1
    assert image_intrinsics(model(binning_x=0, binning_y=1), VGA) == Intrinsics(*K)


def test_roi_maps_a_window_of_the_sensor():
    full = (1200.0, 1200.0, 639.5, 479.5)  # a 1280x960 sensor; a 640x480 window at (320, 240)
    got = image_intrinsics(model(full, 1280, 960, roi=(320, 240, 640, 480)), VGA)
    assert got == Intrinsics(1200.0, 1200.0, 319.5, 239.5)
    binned = image_intrinsics(model(full, 1280, 960, binning_x=2, binning_y=2,
                                    roi=(0, 0, 1280, 960)), VGA)
    assert binned == Intrinsics(600.0, 600.0, 319.75, 239.75)
    with pytest.raises(CameraModelError, match="roi 640x480\\+320\\+240"):
        image_intrinsics(model(full, 1280, 960, roi=(320, 240, 640, 480)), (1280, 960))


@pytest.mark.parametrize(("k", "fragment"), [
    ((math.nan, 600, 319.5, 239.5), "fx is nan, not a number"),
    ((600, math.inf, 319.5, 239.5), "fy is inf, not a number"),
    ((600, 600, math.nan, 239.5), "cx is nan"),
    ((0, 0, 0, 0), "focal lengths must be positive.*uncalibrated"),
    ((-600, 600, 319.5, 239.5), "focal lengths must be positive"),
    ((1e-9, 600, 319.5, 239.5), "fx=1e-09 px is implausible"),
    ((600, 1.0, 319.5, 239.5), "fy=1 px is implausible for an image 480 px high"),
    ((1e7, 600, 319.5, 239.5), "fx=1e\\+07 px is implausible"),
    ((600, 600, 700, 239.5), "principal point \\(700, 239.5\\) lies outside the 640x480"),
    ((600, 600, 319.5, -5), "principal point"),
])
def test_unusable_values_are_refused(k, fragment):
    with pytest.raises(CameraModelError, match=fragment):
        image_intrinsics(model(k), VGA)


def test_the_plausible_range_holds_real_cameras():
    for k in ((385.0, 385.0, 320.0, 240.0),  # RealSense D435 depth-like wide lens
              (1400.0, 1400.0, 320.0, 240.0),  # a narrow lens
              (160.0, 160.0, 320.0, 240.0)):  # about 127 degrees: a wide-angle webcam
        assert image_intrinsics(model(k), VGA).fx == k[0]


def test_a_nine_value_k_is_read_row_major():
    k9 = [600.0, 0.0, 319.5, 0.0, 610.0, 239.5, 0.0, 0.0, 1.0]
    assert image_intrinsics(model(k9), VGA) == Intrinsics(600.0, 610.0, 319.5, 239.5)


def test_history_applies_a_change_from_its_own_stamp_on():
    history = CalibrationHistory()
    first, second = model(), model((650.0, 650.0, 319.5, 239.5))
    for stamp in (100, 200, 300):  # a static camera at its frame rate: one entry
        history.add(stamp, first)
    assert len(history) == 1
    history.add(400, second)
    assert history.at(300) == (first, None)
    assert history.at(399) == (first, None)
    assert history.at(400) == (second, None)
    assert history.at(10**12) == (second, None)
    assert history.at(50) == (first, None)  # before the first: the earliest calibration known


def test_history_static_calibration_and_resets():
    history = CalibrationHistory()
    assert history.at(5) == (None, "no camera_info received")
    history.add(10**9, model())
    assert history.at(1) == (model(), None)  # the only one: a static calibration
    history.add(2 * 10**9, model(width=1, height=1))
    history.add(0, model((700.0, 700.0, 319.5, 239.5)))  # stamp 0: starts again, applies always
    assert len(history) == 1 and history.at(5 * 10**9)[0].k.fx == 700.0


def test_history_is_bounded_and_says_when_the_frame_is_too_old():
    history = CalibrationHistory(max_kept=3)
    for i in range(10):
        history.add(1000 + i, model((600.0 + i, 600.0, 319.5, 239.5)))
    assert len(history) == 3
    assert history.at(1009)[0].k.fx == 609.0
    got, reason = history.at(5)
    assert got is None and "oldest camera_info kept" in reason


def test_nan_models_are_one_calibration():
    history = CalibrationHistory()
    for stamp in range(5):
        history.add(stamp, model((math.nan, 600.0, 319.5, 239.5)))
    assert len(history) == 1


@pytest.mark.parametrize("bad", [(0, 600, 320, 240), (600, 600, 320), [[0.0] * 3] * 3,
                                 (600, np.nan, 320, 240)])
def test_bad_intrinsics_raise(bad):
    with pytest.raises(ValueError, match="intrinsics"):
        as_intrinsics(bad)


def test_scale_intrinsics_keeps_pixel_centres():
    half = scale_intrinsics((600, 600, 319.5, 239.5), (640, 480), (320, 240))
    assert half == Intrinsics(300.0, 300.0, 159.5, 119.5)
    with pytest.raises(ValueError):
        scale_intrinsics(CENTRED, (0, 480), (320, 240))
