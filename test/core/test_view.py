import cv2
import numpy as np
import pytest

from sam3_agent_ros.core.types import Mask
from sam3_agent_ros.core.view import LlmView


def mask_at(shape, box) -> Mask:
    array = np.zeros(shape, bool)
    x0, y0, x1, y1 = box
    array[y0:y1, x0:x1] = True
    return Mask.from_array(array, 0.9, box)


def test_large_frames_are_downscaled_once_and_masks_follow():
    frame = np.zeros((1080, 1920, 3), np.uint8)
    view = LlmView(frame, 1008)
    assert view.scaled and view.image.shape == (567, 1008, 3)
    assert view.image is view.image  # computed once
    mask = mask_at((1080, 1920), (960, 540, 1920, 1080))
    small = view.mask(mask)
    assert small.shape == (567, 1008) and small.dtype == bool
    assert abs(small.mean() - 0.25) < 0.01
    assert view.mask(mask) is small  # cached
    view.keep_only([])
    assert view.mask(mask) is not small


def test_small_frames_are_used_as_they_are():
    frame = np.zeros((480, 640, 3), np.uint8)
    view = LlmView(frame, 1008)
    mask = mask_at((480, 640), (10, 10, 20, 20))
    assert not view.scaled and view.image is frame and view.mask(mask) is mask.mask


def test_mask_geometry_matches_a_direct_computation():
    rng = np.random.default_rng(3)
    array = rng.random((120, 200)) > 0.7
    mask = Mask.from_array(array, 0.5, (0, 0, 200, 120))
    ys, xs = np.nonzero(array)
    assert mask.area == xs.size
    assert np.allclose(mask.centroid, (xs.mean(), ys.mean()))
    empty = Mask.from_array(np.zeros((4, 4), bool), 0.1, (0, 0, 0, 0))
    assert empty.area == 0 and np.isnan(empty.centroid[0])


@pytest.mark.parametrize("shape, max_side", [((1080, 1920), 1008), ((720, 1280), 640),
                                             ((1000, 333), 512), ((2160, 3840), 1008)])
def test_resized_masks_equal_a_whole_frame_nearest_resize(shape, max_side):
    rng = np.random.default_rng(sum(shape))
    frame = np.zeros((*shape, 3), np.uint8)
    view = LlmView(frame, max_side)
    height, width = view.image.shape[:2]
    for _ in range(5):
        array = np.zeros(shape, bool)
        y0, x0 = rng.integers(0, shape[0] - 40), rng.integers(0, shape[1] - 40)
        array[y0:y0 + rng.integers(1, 300), x0:x0 + rng.integers(1, 300)] = True
        array &= rng.random(shape) > 0.3  # ragged edges
        # Nearest neighbour over the whole frame: output pixel j samples floor((j + .5) * scale).
        rows = ((np.arange(height) + 0.5) * (shape[0] / height)).astype(int)
        cols = ((np.arange(width) + 0.5) * (shape[1] / width)).astype(int)
        expected = array[np.ix_(rows, cols)]
        opencv = cv2.resize(array.view(np.uint8), (width, height),
                            interpolation=cv2.INTER_NEAREST_EXACT).view(bool)
        # Same rule up to rounding at pixel edges (OpenCV 5: > 0.995; Ubuntu 22.04's OpenCV
        # 4.5.4 rounds its exact-nearest differently: 0.97-0.99). Our view is held to `expected`.
        assert (expected == opencv).mean() > 0.95
        for mask in (Mask.from_array(array, 0.5, (0, 0, 1, 1)),
                     Mask(array, 0.5, (0, 0, 1, 1), 1, (0.0, 0.0))):  # without a pixel box
            assert np.array_equal(view.mask(mask), expected)
