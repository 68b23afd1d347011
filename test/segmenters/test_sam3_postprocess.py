"""Post-processing of SAM 3 detections on synthetic arrays (no torch)."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_ros.segmenters.postprocess import (
    clip_boxes,
    filter_detections,
    greedy_overlap_removal,
)

H, W = 40, 60


def rect(y0: int, y1: int, x0: int, x1: int) -> np.ndarray:
    mask = np.zeros((H, W), bool)
    mask[y0:y1, x0:x1] = True
    return mask


def run(masks, scores, boxes=None, *, conf=0.5, overlap=0.8, area=1):
    masks = np.stack(masks) if masks else np.zeros((0, H, W), bool)
    scores = np.asarray(scores, float)
    if boxes is None:
        boxes = np.tile([0.0, 0.0, 10.0, 10.0], (len(scores), 1))
    return filter_detections(masks, scores, boxes, confidence_threshold=conf,
                             overlap_threshold=overlap, min_mask_area=area)


def test_sorted_by_descending_score_with_matching_boxes():
    masks = [rect(0, 10, 0, 10), rect(20, 30, 20, 30), rect(0, 5, 40, 50)]
    boxes = np.array([[0, 0, 10, 10], [20, 20, 30, 30], [40, 0, 50, 5]], float)
    out = run(masks, [0.6, 0.9, 0.7], boxes)
    np.testing.assert_allclose(out.scores, [0.9, 0.7, 0.6])
    np.testing.assert_allclose(out.boxes[0], [20, 20, 30, 30])
    assert out.masks[0][25, 25] and not out.masks[0][5, 5]
    assert out.masks.dtype == bool and out.masks.shape == (3, H, W)
    assert out.scores.dtype == np.float64 and out.boxes.shape == (3, 4)


def test_confidence_threshold_is_inclusive():
    out = run([rect(0, 10, 0, 10), rect(20, 30, 20, 30)], [0.5, 0.49], conf=0.5)
    np.testing.assert_allclose(out.scores, [0.5])


def test_min_mask_area_drops_small_and_empty_masks():
    out = run([rect(0, 2, 0, 2), rect(10, 20, 10, 20), np.zeros((H, W), bool)],
              [0.9, 0.8, 0.95], area=5, conf=0.0)
    np.testing.assert_allclose(out.scores, [0.8])
    # min_mask_area 0 still drops empty masks (a mask without pixels is no object)
    out = run([np.zeros((H, W), bool), rect(0, 1, 0, 1)], [0.9, 0.8], area=0, conf=0.0)
    np.testing.assert_allclose(out.scores, [0.8])


def test_overlap_removal_keeps_the_higher_score():
    big = rect(0, 20, 0, 20)
    almost_same = rect(0, 20, 0, 19)  # IoU 0.95 with big
    separate = rect(25, 35, 30, 40)
    out = run([almost_same, big, separate], [0.7, 0.9, 0.8], overlap=0.8)
    np.testing.assert_allclose(out.scores, [0.9, 0.8])
    assert out.masks[0].sum() == big.sum()


def test_overlap_threshold_is_compared_strictly_and_one_disables():
    a = rect(0, 10, 0, 10)
    b = rect(0, 10, 5, 15)  # IoU = 50 / 150 = 1/3
    assert len(run([a, b], [0.9, 0.8], overlap=1 / 3).scores) == 2
    assert len(run([a, b], [0.9, 0.8], overlap=0.3).scores) == 1
    assert len(run([a, a], [0.9, 0.8], overlap=1.0).scores) == 2


def test_removal_is_greedy_against_kept_masks_only():
    # IoU(a, b) = 90/110 = 0.82, IoU(b, c) = 0.82, IoU(a, c) = 80/120 = 0.67.
    # b is dropped by a; c is compared with a only (b was not kept), so c stays.
    a, b, c = rect(0, 10, 0, 10), rect(0, 10, 1, 11), rect(0, 10, 2, 12)
    out = run([a, b, c], [0.9, 0.8, 0.7], overlap=0.7)
    np.testing.assert_allclose(out.scores, [0.9, 0.7])
    masks = np.stack([c, b, a])
    areas = masks.reshape(3, -1).sum(1)
    assert greedy_overlap_removal(masks, areas, np.array([2, 1, 0]), 0.7) == [2, 0]


def test_disjoint_extents_are_never_compared_as_overlapping():
    out = run([rect(0, 5, 0, 5), rect(30, 35, 50, 55)], [0.9, 0.8], overlap=0.0)
    assert len(out.scores) == 2


def test_nan_scores_are_dropped_and_empty_input_gives_empty_output():
    out = run([rect(0, 5, 0, 5), rect(10, 15, 10, 15)], [np.nan, 0.9])
    np.testing.assert_allclose(out.scores, [0.9])
    out = run([], [])
    assert out.masks.shape == (0, H, W) and out.scores.shape == (0,) and out.boxes.shape == (0, 4)


def test_sam3_layout_n_1_h_w_is_accepted():
    masks = np.stack([rect(0, 5, 0, 5)])[:, None]
    out = filter_detections(masks, [0.9], [[0, 0, 5, 5]], confidence_threshold=0.5,
                            overlap_threshold=0.8, min_mask_area=1)
    assert out.masks.shape == (1, H, W)


def test_inconsistent_shapes_raise_value_error():
    with pytest.raises(ValueError, match="2 masks but 1 scores"):
        filter_detections(np.zeros((2, H, W), bool), [0.9], np.zeros((2, 4)),
                          confidence_threshold=0.5, overlap_threshold=0.8, min_mask_area=1)
    with pytest.raises(ValueError, match=r"\(N, H, W\)"):
        filter_detections(np.zeros((H, W), bool), [0.9], np.zeros((1, 4)),
                          confidence_threshold=0.5, overlap_threshold=0.8, min_mask_area=1)


def test_boxes_are_clipped_to_the_frame():
    boxes = clip_boxes(np.array([[-5, -1, 70, 50], [np.nan, 3, np.inf, 4]]), H, W)
    np.testing.assert_allclose(boxes, [[0, 0, W, H], [0, 3, W, 4]])
