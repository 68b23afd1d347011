"""The look-alike bookkeeping of follow mode (follow/lookalikes.py), without a session."""

from __future__ import annotations

import numpy as np

from sam3_agent_ros.follow.lookalikes import MAX_LOOKALIKES, LookAlike, remembered, without
from sam3_agent_ros.follow.redetect import Redetection
from sam3_agent_ros.follow.tracker import MISSING, Estimate


def _square(x: int, y: int, side: int = 4, shape: tuple[int, int] = (60, 200)) -> Estimate:
    mask = np.zeros(shape, bool)
    mask[y:y + side, x:x + side] = True
    return Estimate(mask=mask, confidence=1.0)


def test_remembered_keeps_the_nearest_forgets_the_old_and_is_bounded():
    old = [LookAlike.detected(_square(10, 10), now_s=0.0), LookAlike.detected(_square(30, 10),
                                                                              now_s=0.0)]
    unmatched = [_square(20 + 12 * i, 40) for i in range(MAX_LOOKALIKES + 3)]
    found = Redetection(objects=[], lookalikes=[_square(12, 10), MISSING], unmatched=unmatched)
    kept = remembered(old, found, now_s=2.0, timeout_s=1.5, anchors=[(14.0, 12.0)])
    assert len(kept) == MAX_LOOKALIKES
    assert kept[0].x == 12.0 and kept[0].detected_s == 2.0  # found again: its new place
    assert all(a.detected_s == 2.0 for a in kept)  # the one not found again is forgotten
    xs = [a.x for a in kept[1:]]
    assert xs == sorted(xs)  # nearest to the anchor first


def test_without_takes_the_lookalikes_pixels_out_of_a_mask():
    estimate = _square(10, 10, side=10)
    other = LookAlike.detected(_square(15, 10, side=10), now_s=0.0)
    placed = other.placed(estimate.mask.shape)
    assert placed is not None
    left = without(estimate, [placed])
    assert left.mask.sum() == 50 and left.box == (10, 10, 15, 20)
    assert without(estimate, []) is estimate
