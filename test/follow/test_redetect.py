"""Re-detection: optimal assignment, association gates and swaps, the redetect tracker."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from sam3_agent_ros.core.errors import SegmenterError
from sam3_agent_ros.core.types import Mask
from sam3_agent_ros.follow.redetect import (
    Gates,
    RedetectTracker,
    assign,
    associate,
    detect,
)
from sam3_agent_ros.follow.tracker import MISSING, Estimate
from sam3_agent_ros.masks import pixel_box
from test.fakes.segmenters import BoxSegmenter, WrongShapeSegmenter

SHAPE = (200, 300)


def box_mask(x0, y0, x1, y1) -> np.ndarray:
    mask = np.zeros(SHAPE, bool)
    mask[y0:y1, x0:x1] = True
    return mask


def detection(x0, y0, x1, y1, score=0.9) -> Mask:
    return Mask.from_array(box_mask(x0, y0, x1, y1), score, (x0, y0, x1, y1))


def brute_force_cost(cost: np.ndarray) -> float:
    rows, cols = cost.shape
    if rows <= cols:
        return min(sum(cost[r, c] for r, c in zip(range(rows), perm))
                   for perm in itertools.permutations(range(cols), rows))
    return brute_force_cost(cost.T)


@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (2, 4), (4, 2), (5, 5)])
def test_assign_is_optimal(shape):
    rng = np.random.default_rng(sum(shape))
    for _ in range(20):
        cost = rng.uniform(0.0, 10.0, shape)
        pairs = assign(cost)
        assert len(pairs) == min(shape)
        assert len({r for r, _ in pairs}) == len({c for _, c in pairs}) == len(pairs)
        assert sum(cost[r, c] for r, c in pairs) == pytest.approx(brute_force_cost(cost))


def test_assign_beats_greedy():
    cost = np.array([[1.0, 2.0], [1.1, 10.0]])  # greedy takes (0, 0) and pays 11
    assert assign(cost) == [(0, 1), (1, 0)]


def test_assign_edge_cases():
    assert assign(np.zeros((0, 3))) == []
    assert assign(np.zeros((2, 0))) == []
    with pytest.raises(ValueError):
        assign(np.zeros(3))


def test_association_follows_swapped_detection_order():
    predicted = [box_mask(20, 20, 60, 60), box_mask(200, 100, 240, 140)]
    detections = [detection(204, 102, 244, 142), detection(23, 21, 63, 61)]
    matches = associate(predicted, detections, SHAPE, Gates())
    assert {i: j for i, (j, _) in matches.items()} == {0: 1, 1: 0}
    assert all(iou > 0.7 for _, iou in matches.values())


def test_association_of_two_crossing_objects_uses_the_optimal_pairing():
    # Object 0 overlaps both detections, object 1 only the first: a greedy match of object 0
    # to its best detection would leave object 1 unmatched.
    predicted = [box_mask(40, 40, 80, 80), box_mask(20, 40, 60, 80)]
    detections = [detection(30, 40, 70, 80), detection(56, 40, 96, 80)]
    matches = associate(predicted, detections, SHAPE, Gates(min_iou=0.1, max_shift=0.0))
    assert {i: j for i, (j, _) in matches.items()} == {0: 1, 1: 0}


def test_association_gates():
    predicted = [box_mask(20, 20, 40, 40), None]
    far = detection(250, 150, 270, 170)
    assert associate(predicted, [far], SHAPE, Gates()) == {}
    # No overlap but a centroid within max_shift of the diagonal (0.1 * 360 px = 36 px).
    near = detection(45, 20, 65, 40)
    assert associate(predicted, [near], SHAPE, Gates(min_iou=0.1, max_shift=0.1)) == \
        {0: (0, 0.0)}
    assert associate(predicted, [near], SHAPE, Gates(min_iou=0.1, max_shift=0.05)) == {}


def test_more_followed_objects_than_detections():
    predicted = [box_mask(20, 20, 40, 40), box_mask(100, 100, 140, 140), box_mask(200, 20, 240, 60)]
    matches = associate(predicted, [detection(102, 101, 142, 141)], SHAPE, Gates())
    assert list(matches) == [1]


def frame() -> np.ndarray:
    return np.zeros((*SHAPE, 3), np.uint8)


def test_redetect_tracker_matches_and_reports_missing():
    segmenter = BoxSegmenter({"blue": [(203, 100, 243, 140, 0.8), (22, 20, 62, 60, 0.6)]})
    tracker = RedetectTracker(segmenter, "blue", Gates())
    previous = [Estimate(box_mask(20, 20, 60, 60), 1.0),
                Estimate(box_mask(200, 100, 240, 140), 1.0),
                Estimate(box_mask(120, 150, 140, 170), 1.0)]
    out = tracker.track(frame(), previous)
    assert segmenter.calls == ["blue"]
    assert pixel_box(out[0].mask) == (22, 20, 62, 60)
    assert pixel_box(out[1].mask) == (203, 100, 243, 140)
    assert out[2] is MISSING
    # score * (0.5 + 0.5 * IoU): below the score, above half of it.
    assert 0.3 < out[0].confidence < 0.6 and 0.4 < out[1].confidence < 0.8


def test_a_look_alike_keeps_its_detection_from_a_vanished_object_beside_it():
    # The followed object (x 20..60) is gone; its look-alike (x 70..110) is within the shift
    # gate of its prediction (51 px <= 0.2 * 360 px), so without the look-alike's own row the
    # gates alone hand it the object's identity.
    segmenter = BoxSegmenter({"blue": [(71, 20, 111, 60, 0.9), (200, 120, 240, 160, 0.8)]})
    tracker = RedetectTracker(segmenter, "blue", Gates(min_iou=0.1, max_shift=0.2))
    previous = [Estimate(box_mask(20, 20, 60, 60), 1.0)]
    assert pixel_box(tracker.track(frame(), previous)[0].mask) == (71, 20, 111, 60)
    found = tracker.redetect(frame(), previous, [box_mask(70, 20, 110, 60)])
    assert found.objects == [MISSING]
    assert pixel_box(found.lookalikes[0].mask) == found.lookalikes[0].box == (71, 20, 111, 60)
    assert [e.box for e in found.unmatched] == [(200, 120, 240, 160)]


def test_redetect_reports_unmatched_look_alikes_and_detections():
    segmenter = BoxSegmenter({"blue": [(22, 20, 62, 60, 0.9)]})
    tracker = RedetectTracker(segmenter, "blue", Gates())
    found = tracker.redetect(frame(), [Estimate(box_mask(20, 20, 60, 60), 1.0)],
                             [box_mask(200, 100, 240, 140)])
    assert pixel_box(found.objects[0].mask) == (22, 20, 62, 60)
    assert found.lookalikes == [MISSING] and found.unmatched == []


def test_detect_validates_segmenter_output():
    with pytest.raises(SegmenterError, match="shape"):
        detect(WrongShapeSegmenter(), frame(), "blue")
    assert detect(BoxSegmenter({}), frame(), "blue") == []
