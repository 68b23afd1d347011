"""The scores against hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_ros.eval import metrics


def _mask(shape, *boxes):
    out = np.zeros(shape, bool)
    for x0, y0, x1, y1 in boxes:
        out[y0:y1, x0:x1] = True
    return out


def test_empty_prediction_on_empty_truth_scores_one():
    truth = np.zeros((4, 5), bool)
    assert metrics.overlap(None, truth) == (0, 0)
    assert metrics.iou(0, 0) == 1.0


def test_empty_prediction_on_full_truth_scores_zero():
    truth = np.ones((4, 5), bool)
    intersection, union = metrics.overlap(None, truth)
    assert (intersection, union) == (0, 20)
    assert metrics.iou(intersection, union) == 0.0


def test_partial_overlap():
    # prediction columns 0-3 of a 10x10 image (40 px), truth columns 2-5 (40 px): 20 shared.
    pred = _mask((10, 10), (0, 0, 4, 10))
    truth = _mask((10, 10), (2, 0, 6, 10))
    assert metrics.overlap(pred, truth) == (20, 60)
    assert metrics.iou(20, 60) == pytest.approx(1 / 3)


def test_ignore_region_leaves_both_intersection_and_union():
    pred = _mask((10, 10), (0, 0, 4, 10))  # 40 px
    truth = _mask((10, 10), (2, 0, 6, 10))  # 40 px, 20 shared
    ignore = _mask((10, 10), (0, 0, 10, 5))  # the top half
    # Only the bottom half counts: prediction 20, truth 20, shared 10 -> union 30.
    assert metrics.overlap(pred, truth, ignore) == (10, 30)


def test_prediction_only_inside_ignore_counts_nothing():
    pred = _mask((6, 6), (0, 0, 2, 2))
    truth = np.zeros((6, 6), bool)
    assert metrics.overlap(pred, truth, ignore=pred.copy()) == (0, 0)


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="differ in shape"):
        metrics.overlap(np.zeros((3, 3), bool), np.zeros((4, 3), bool))


def test_giou_is_the_mean_and_ciou_the_ratio_of_sums():
    # Sample A: 10/20, sample B: 90/100, sample C: empty/empty.
    ious = [metrics.iou(10, 20), metrics.iou(90, 100), metrics.iou(0, 0)]
    assert metrics.giou(ious) == pytest.approx((0.5 + 0.9 + 1.0) / 3)
    assert metrics.ciou([10, 90, 0], [20, 100, 0]) == pytest.approx(100 / 120)
    assert metrics.ciou([0, 0], [0, 0]) is None
    assert metrics.giou([]) is None


def test_status_key_groups_failures_by_reason_kind():
    assert metrics.status_key("succeeded", None) == "succeeded"
    assert metrics.status_key("failed", "query timed out after 120 s") == \
        metrics.status_key("failed", "query timed out after 30 s")
    assert metrics.status_key("failed", "LLM request failed: HTTP 500") == \
        "failed: LLM request failed"


def _row(id_, iou, inter, union, status="succeeded", **extra):
    row = {"id": id_, "query": id_, "status": status, "error": None, "iou": iou,
           "intersection": inter, "union": union, "rounds": 3, "llm_calls": 5,
           "prompt_tokens": 100, "completion_tokens": 10, "latency_s": 1.0, "absent": False,
           "is_sentence": None}
    row.update(extra)
    return row


def test_summarize():
    rows = [
        _row("a", 0.5, 10, 20, is_sentence=True, latency_s=1.0),
        _row("b", 0.9, 90, 100, is_sentence=False, latency_s=3.0, rounds=5),
        _row("c", 1.0, 0, 0, status="no_mask", absent=True, is_sentence=False, latency_s=2.0),
        _row("d", 1.0, 0, 0, status="failed", error="query timed out after 5 s", absent=True,
             latency_s=4.0),
        # An unreadable image: IoU 0, no intersection/union (left out of cIoU).
        _row("e", 0.0, None, None, status="failed", error="image x.jpg: no such file",
             latency_s=None, rounds=0, llm_calls=0, prompt_tokens=0, completion_tokens=0),
    ]
    s = metrics.summarize(rows)
    assert s["n"] == 5
    assert s["giou"] == pytest.approx((0.5 + 0.9 + 1 + 1 + 0) / 5)
    assert s["ciou"] == pytest.approx(100 / 120)
    # Two absent samples: one answered no_mask, one failed (not an answer).
    assert s["no_target_accuracy"] == 0.5 and s["n_absent"] == 2
    assert s["status_counts"] == {"failed: image x.jpg": 1, "failed: query timed out after N s": 1,
                                  "no_mask": 1, "succeeded": 2}
    assert s["latency_p50_s"] == pytest.approx(2.5)  # of 1, 2, 3, 4
    assert s["rounds_mean"] == pytest.approx((3 + 5 + 3 + 3 + 0) / 5)
    assert s["giou_by_is_sentence"] == {"sentence": {"n": 1, "giou": 0.5},
                                        "phrase": {"n": 2, "giou": pytest.approx(0.95)}}


def test_summarize_without_absent_or_sentence_flags():
    s = metrics.summarize([_row("a", 0.25, 1, 4)])
    assert s["no_target_accuracy"] is None and s["giou_by_is_sentence"] is None
    assert s["ciou"] == 0.25
