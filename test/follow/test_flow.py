"""Dense-flow propagation of masks (follow/flow.py) on controlled motions."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_ros.follow.flow import FlowTracker, flow_scale
from sam3_agent_ros.follow.tracker import MISSING, Estimate


def textured_frame(shift_x: int = 0, shift_y: int = 0, size=(240, 320)) -> tuple:
    """A smooth random texture with a bright square; both shifted by (shift_x, shift_y)."""
    height, width = size
    rng = np.random.default_rng(7)
    big = rng.integers(60, 190, (height // 8 + 8, width // 8 + 8, 3)).astype(np.uint8)
    texture = np.kron(big, np.ones((8, 8, 1), np.uint8))
    texture = np.roll(texture, (shift_y, shift_x), axis=(0, 1))[:height, :width].copy()
    mask = np.zeros((height, width), bool)
    mask[100 + shift_y:150 + shift_y, 120 + shift_x:180 + shift_x] = True
    texture[mask] = (230, 40, 40)
    return texture, mask


def iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / max(1, (a | b).sum()))


@pytest.mark.parametrize("max_side", [160, 320])
def test_a_translated_object_is_followed(max_side):
    first, mask = textured_frame()
    tracker = FlowTracker(max_side)
    tracker.reset(first)
    estimates = [Estimate(mask, 1.0)]
    for step in range(1, 6):
        frame, truth = textured_frame(4 * step, 3 * step)
        estimates = tracker.track(frame, estimates)
        assert estimates[0].seen
        assert iou(estimates[0].mask, truth) >= 0.9
    assert estimates[0].confidence >= 0.8
    assert estimates[0].mask.shape == mask.shape and estimates[0].mask.dtype == bool


def test_missing_objects_stay_missing_and_order_is_kept():
    first, mask = textured_frame()
    tracker = FlowTracker(320)
    tracker.reset(first)
    frame, truth = textured_frame(5, 0)
    out = tracker.track(frame, [MISSING, Estimate(mask, 0.7)])
    assert out[0] is MISSING
    assert iou(out[1].mask, truth) >= 0.9 and out[1].confidence <= 0.7


def test_an_object_leaving_the_view_goes_missing():
    size = (240, 320)
    first, _ = textured_frame(size=size)
    mask = np.zeros(size, bool)
    mask[100:140, 0:20] = True  # at the left border
    tracker = FlowTracker(320)
    tracker.reset(first)
    estimate = Estimate(mask, 1.0)
    for step in range(1, 7):
        frame, _ = textured_frame(-6 * step, 0, size=size)
        (estimate,) = tracker.track(frame, [estimate])
        if not estimate.seen:
            break
    assert not estimate.seen


@pytest.mark.parametrize("max_side", [160, 320])
def test_displacement_of_a_region_is_the_motion_under_it(max_side):
    first, _ = textured_frame()
    tracker = FlowTracker(max_side)
    assert tracker.displacement((120, 100, 180, 150)) == (0.0, 0.0)  # nothing tracked yet
    tracker.reset(first)
    frame, _ = textured_frame(6, -4)
    tracker.track(frame, [])
    dx, dy = tracker.displacement((120, 100, 180, 150))
    assert dx == pytest.approx(6, abs=1.0) and dy == pytest.approx(-4, abs=1.0)
    assert all(np.isfinite(tracker.displacement(box)).all() for box in
               [(0, 0, 1, 1), (310, 230, 330, 250), (-20, -20, 5, 5)])  # edges and beyond


def test_track_needs_reset_and_a_constant_size():
    frame, mask = textured_frame()
    tracker = FlowTracker(320)
    with pytest.raises(RuntimeError, match="reset"):
        tracker.track(frame, [Estimate(mask, 1.0)])
    tracker.reset(frame)
    other, _ = textured_frame(size=(200, 300))
    with pytest.raises(ValueError, match="size changed"):
        tracker.track(other, [Estimate(mask, 1.0)])


def test_flow_scale():
    assert flow_scale(480, 640, 320) == 0.5
    assert flow_scale(1080, 1920, 480) == 0.25
    assert flow_scale(100, 120, 320) == 1.0
