"""depth_image: depth messages and arrays in their ROS encodings -> metres at the colour
resolution."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_ros.geometry.depth_image import (
    depth_for_colour,
    depth_from_buffer,
    depth_to_metres,
    resize_depth_to,
)
from test.geometry.scenes import CENTRED


def test_depth_to_metres_units():
    mm = np.array([[0, 1000, 65535]], np.uint16)
    np.testing.assert_allclose(depth_to_metres(mm, "16UC1"), [[0.0, 1.0, 65.535]], rtol=1e-6)
    np.testing.assert_allclose(depth_to_metres(mm, "mono16"), [[0.0, 1.0, 65.535]], rtol=1e-6)
    metres = np.array([[np.nan, 1.25]], np.float32)
    out = depth_to_metres(metres, "32FC1")
    assert out.dtype == np.float32 and np.isnan(out[0, 0]) and out[0, 1] == 1.25
    with pytest.raises(ValueError, match="unsupported depth encoding 'rgb8'.*16UC1.*32FC1"):
        depth_to_metres(mm, "rgb8")


def test_resize_depth_is_nearest_neighbour():
    depth = np.array([[1.0, 2.0], [np.nan, 4.0]], np.float32)
    big = resize_depth_to(depth, 4, 6)
    assert big.shape == (4, 6)
    values = set(big[np.isfinite(big)].tolist())
    assert values == {1.0, 2.0, 4.0}  # no value between an edge's two sides
    assert np.isnan(big[3, 0])
    assert resize_depth_to(depth, 2, 2) is depth


@pytest.mark.parametrize("bigendian", [False, True])
def test_depth_from_buffer_with_row_padding(bigendian):
    depth_mm = np.arange(12, dtype=np.uint16).reshape(3, 4) * 100
    order = ">" if bigendian else "<"
    padded = np.zeros((3, 12), np.uint8)  # step 12 = 8 data bytes + 4 padding
    padded[:, :8] = depth_mm.astype(order + "u2").view(np.uint8).reshape(3, 8)
    out = depth_from_buffer(padded.tobytes(), 4, 3, 12, "16UC1", bigendian)
    np.testing.assert_allclose(out, depth_mm / 1000.0, rtol=1e-6)
    metres = np.full((2, 3), 1.5, np.float32)
    out = depth_from_buffer(metres.tobytes(), 3, 2, 12, "32FC1")
    np.testing.assert_array_equal(out, metres)


def test_depth_from_buffer_rejects_bad_messages():
    with pytest.raises(ValueError, match="too short"):
        depth_from_buffer(b"\x00" * 10, 4, 3, 8, "16UC1")
    with pytest.raises(ValueError, match="step 4 is smaller"):
        depth_from_buffer(b"\x00" * 24, 4, 3, 4, "16UC1")
    with pytest.raises(ValueError, match="unsupported depth encoding"):
        depth_from_buffer(b"\x00" * 24, 4, 3, 8, "bgr8")
    with pytest.raises(ValueError, match="no pixels"):
        depth_from_buffer(b"", 0, 3, 8, "16UC1")


def test_depth_for_colour_scales_and_refuses_other_aspects():
    depth = np.ones((240, 320), np.float32)
    resized, intrinsics = depth_for_colour(depth, (640, 480), (300, 300, 159.5, 119.5),
                                           (320, 240))
    assert resized.shape == (480, 640)
    assert (intrinsics.fx, intrinsics.cx) == (600.0, 319.5)
    same, kept = depth_for_colour(np.ones((480, 640), np.float32), (640, 480), CENTRED)
    assert same.shape == (480, 640) and kept == CENTRED
    with pytest.raises(ValueError, match="aspect ratio"):
        depth_for_colour(np.ones((480, 480), np.float32), (640, 480), CENTRED)
