"""Follow-mode scoring against the moving sample's ground truth (pure)."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_demo import moving_sample, sample
from sam3_agent_demo.follow_scoring import (
    FollowOutcome,
    format_outcome,
    lost_bound_s,
    score_follow,
)


@pytest.fixture(scope="module")
def truth():
    return sample.load_ground_truth(moving_sample.default_dir())


def status(truth, index, state="tracking", objects=1, reason=None):
    stamp = int(truth.stamps_ns[index])
    return {"query_id": "f", "state": state, "frame": {"sec": stamp // 10**9,
                                                       "nanosec": stamp % 10**9},
            "latency_ms": 4.0, "objects": [{"id": 1}] * objects, "reason": reason}


def outcome(ends="lost"):
    made = FollowOutcome("f", "the leftmost blue object", "blue_box", ends)
    made.answer = "succeeded"
    return made


def test_perfect_following_until_lost_in_time(truth):
    leaves = 63
    statuses = [status(truth, i) for i in range(10, 70)] + [status(truth, 72, "lost")]
    masks = {int(truth.stamps_ns[i]): truth.mask(i, "blue_box") for i in range(10, 70)}
    targets = {int(truth.stamps_ns[i]): truth.position(i, "blue_box") + [0.003, 0, 0.004]
               for i in range(10, 70)}
    scored = outcome()
    score_follow(scored, statuses, masks, targets, truth, int(truth.stamps_ns[leaves]), 1.0)
    assert scored.ok, scored.problems
    assert scored.frames == 60 and len(scored.ious) == leaves - 10 and scored.mean_iou == 1.0
    assert scored.mean_error_cm == pytest.approx(0.5)
    assert scored.lost_delay_s == pytest.approx(0.9)
    lines = format_outcome(scored)
    assert "IoU mean 1.000" in lines[0] and lines[-1].strip() == "OK"


def test_misses_late_loss_and_wrong_endings_are_problems(truth):
    statuses = [status(truth, i, objects=0) for i in range(10, 20)]
    statuses += [status(truth, 80, "lost"), status(truth, 81, "stopped")]
    scored = outcome()
    score_follow(scored, statuses, {}, {}, truth, int(truth.stamps_ns[63]), 1.0)
    assert scored.ious == [0.0] * 10
    text = "; ".join(scored.problems)
    assert "mean IoU 0.000 < 0.85" in text and "2 final statuses" in text
    assert "after the object left the view" in text

    stopped_wanted = outcome(ends="stopped")
    score_follow(stopped_wanted, [status(truth, 10), status(truth, 11, "lost")],
                 {int(truth.stamps_ns[10]): truth.mask(10, "blue_box")}, {}, truth, None, 1.0)
    assert stopped_wanted.problems == ["ended lost, expected stopped"]

    failed = outcome()
    failed.answer = "failed"
    score_follow(failed, [], {}, {}, truth, None, 1.0)
    assert failed.problems == ["the query ended failed"]


def test_a_wrong_3d_point_and_a_foreign_stamp_are_reported(truth):
    bad = status(truth, 10)
    bad["frame"]["nanosec"] += 1
    statuses = [status(truth, 10), bad, status(truth, 11, "stopped")]
    stamp = int(truth.stamps_ns[10])
    scored = outcome(ends="stopped")
    score_follow(scored, statuses, {stamp: truth.mask(10, "blue_box")},
                 {stamp: truth.position(10, "blue_box") + np.array([0.05, 0, 0])}, truth,
                 None, 1.0)
    assert scored.errors_cm == [pytest.approx(5.0)]
    assert any("3D error 5.00 cm > 2.0 cm" in p for p in scored.problems)
    assert any("not a frame of the bag" in p for p in scored.problems)


@pytest.fixture(scope="module")
def grasp_truth():
    return sample.load_ground_truth(moving_sample.GRASP.default_dir())


def grasp_outcome():
    made = FollowOutcome("g", "the leftmost blue object", "blue_box", "lost")
    made.answer, made.gone, made.look_alike = "succeeded", "taken away", "blue_twin"
    return made


def test_taken_away_lost_within_timeout_plus_a_redetection_and_never_the_look_alike(
        grasp_truth):
    truth, removed = grasp_truth, moving_sample.GRASP.sequence.removed_at
    bound = lost_bound_s("taken away", 1.0, 1.0)
    assert bound == 2.0 and lost_bound_s("left the view", 1.0, 1.0) == 1.0
    tracked = range(5, removed + 5)  # five tracking frames after it went (flow, unconfirmed)
    statuses = [status(truth, i) for i in tracked] + [status(truth, removed + 19, "lost")]
    masks = {int(truth.stamps_ns[i]): truth.mask(min(i, removed - 1), "blue_box")
             for i in tracked}
    scored = grasp_outcome()
    score_follow(scored, statuses, masks, {}, truth, int(truth.stamps_ns[removed]), bound)
    assert scored.ok, scored.problems
    assert len(scored.ious) == removed - 5 and scored.mean_iou == 1.0  # away: not scored
    assert scored.max_lookalike_iou == 0.0 and len(scored.lookalike_ious) == len(tracked)
    assert scored.lost_delay_s == pytest.approx(1.9)
    lines = format_outcome(scored)
    assert "IoU with the look-alike blue_twin max 0.000" in lines[0]
    assert "1.90 s after the object was taken away" in lines[-2]

    switched = grasp_outcome()
    masks[int(truth.stamps_ns[removed + 1])] = truth.mask(removed + 1, "blue_twin")
    late = statuses[:-1] + [status(truth, removed + 21, "lost")]
    score_follow(switched, late, masks, {}, truth, int(truth.stamps_ns[removed]), bound)
    text = "; ".join(switched.problems)
    assert "a followed mask is the look-alike blue_twin (IoU 1.000 > 0.05)" in text
    assert "lost 2.1 s after the object was taken away (expected within 2 s)" in text
