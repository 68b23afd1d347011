"""The one pixel-box helper, the box-limited mask IoU and the box-limited nearest resize."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_ros.masks import overlap_iou, pixel_box, resize_mask, resize_mask_with_box


def rect(shape, x0, y0, x1, y1) -> np.ndarray:
    mask = np.zeros(shape, bool)
    mask[y0:y1, x0:x1] = True
    return mask


def test_pixel_box_is_exclusive_and_tight_on_any_shape():
    mask = np.zeros((50, 80), bool)
    for row in range(10, 30):  # a triangle
        mask[row, 20:20 + (row - 9)] = True
    ys, xs = np.nonzero(mask)
    assert pixel_box(mask) == (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1) == (20, 10, 40, 30)
    assert pixel_box(rect((40, 60), 10, 3, 12, 7)) == (10, 3, 12, 7)
    assert pixel_box(rect((40, 60), 0, 0, 60, 40)) == (0, 0, 60, 40)  # touching every edge


def test_pixel_box_of_an_empty_mask_is_none():
    assert pixel_box(np.zeros((10, 10), bool)) is None
    assert pixel_box(np.zeros((0, 0), bool)) is None


@pytest.mark.parametrize("convert", [
    lambda m: m.astype(np.uint8) * 255,  # a 0/255 image
    lambda m: np.asfortranarray(m),  # not C-contiguous
    lambda m: np.stack([m, ~m])[0],  # a view into a stack
], ids=["uint8", "fortran", "view"])
def test_pixel_box_reads_other_layouts_the_same(convert):
    mask = rect((30, 40), 5, 6, 17, 21)
    assert pixel_box(convert(mask)) == (5, 6, 17, 21)


def test_overlap_iou_reads_only_the_overlap_of_the_boxes():
    shape = (40, 60)
    a, b, c = rect(shape, 0, 0, 10, 10), rect(shape, 5, 0, 15, 10), rect(shape, 50, 30, 60, 40)
    box, area = pixel_box, lambda m: int(m.sum())
    assert overlap_iou(a, box(a), area(a), b, box(b), area(b)) == pytest.approx(50 / 150)
    assert overlap_iou(a, box(a), area(a), a, box(a), area(a)) == 1.0
    assert overlap_iou(a, box(a), area(a), c, box(c), area(c)) == 0.0
    assert overlap_iou(a, None, 0, c, box(c), area(c)) == 0.0


def test_resize_mask_reads_only_the_box_and_equals_a_whole_frame_nearest_resize():
    mask = rect((100, 160), 30, 20, 91, 67)
    mask[40:50, 50:60] = False  # a hole
    rows = ((np.arange(50) + 0.5) * 2).astype(int)
    cols = ((np.arange(80) + 0.5) * 2).astype(int)
    expected = mask[np.ix_(rows, cols)]
    assert np.array_equal(resize_mask(mask, (50, 80)), expected)
    assert np.array_equal(resize_mask(mask, (50, 80), pixel_box(mask)), expected)
    # Only the box is read: pixels outside a (deliberately too small) box stay out.
    assert not resize_mask(mask, (50, 80), (30, 20, 40, 30))[20:, 30:].any()
    assert not resize_mask(np.zeros((100, 160), bool), (50, 80)).any()
    resized, box = resize_mask_with_box(mask, (50, 80))
    assert np.array_equal(resized, expected) and box == pixel_box(expected)
    thin = np.zeros((100, 160), bool)
    thin[10, 20:40] = True  # one row the even rows miss
    assert resize_mask_with_box(thin, (50, 80))[1] is None
