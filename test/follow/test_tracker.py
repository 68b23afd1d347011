"""Mask helpers and the estimate type shared by the trackers (the pixel box: test_masks.py)."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_ros.follow.tracker import MISSING, Estimate, centroid, mask_area


def test_mask_helpers_on_a_triangle():
    mask = np.zeros((50, 80), bool)
    for row in range(10, 30):
        mask[row, 20:20 + (row - 9)] = True
    ys, xs = np.nonzero(mask)
    assert mask_area(mask) == xs.size
    assert centroid(mask) == pytest.approx((xs.mean(), ys.mean()))


def test_mask_helpers_on_an_empty_mask():
    empty = np.zeros((10, 10), bool)
    assert mask_area(empty) == 0 and centroid(empty) is None


def test_estimates():
    assert not MISSING.seen and MISSING.confidence == 0.0
    seen = Estimate(np.ones((2, 2), bool), 0.7)
    assert seen.seen and seen.trust == 1.0
