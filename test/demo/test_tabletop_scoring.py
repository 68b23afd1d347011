"""``sam3-agent demo`` scored against the tabletop sample's ground truth (pure)."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_demo import sample, tabletop_scoring
from sam3_agent_demo.report import DemoReport


@pytest.fixture(scope="module")
def truth():
    return sample.load_ground_truth(sample.default_sample_dir())


def _result(truth, frame, status="succeeded", position=None, **extra):
    stamp = int(truth.stamps_ns[frame])
    masks = [{"id": 1, "bbox": [1, 2, 3, 4], "centroid": [2, 3], "position": position}]
    return {"status": status, "stamp": {"sec": stamp // 10**9, "nanosec": stamp % 10**9},
            "masks": masks if status == "succeeded" else [], "timings": {"total_s": 0.1},
            **extra}


def test_a_correct_answer_scores_iou_and_3d_error(truth):
    outcome = tabletop_scoring.QueryOutcome("the leftmost blue object", None, "blue_box")
    xyz = truth.position(20, "blue_box") + np.array([0.003, 0.0, 0.004])
    result = _result(truth, 20, position=dict(zip("xyz", xyz.tolist())))
    tabletop_scoring.score_outcome(outcome, result, truth, truth.mask(20, "blue_box"))
    assert outcome.correct and outcome.iou == 1.0 and outcome.frame_index == 20
    assert outcome.position_error_cm == pytest.approx(0.5)
    line = tabletop_scoring.format_outcome(outcome, "q-1")
    assert "OK" in line and "IoU 1.000" in line and "3D error 0.50 cm" in line


def test_the_wrong_object_is_not_correct(truth):
    outcome = tabletop_scoring.QueryOutcome("the leftmost blue object", None, "blue_box")
    tabletop_scoring.score_outcome(outcome, _result(truth, 20), truth,
                                   truth.mask(20, "blue_cylinder"))
    assert not outcome.correct and outcome.iou == 0.0 and "below 0.8" in outcome.problem
    assert "WRONG" in tabletop_scoring.format_outcome(outcome, "q-1")


def test_absent_object_wants_no_mask_and_stamps_must_be_bag_frames(truth):
    absent = tabletop_scoring.QueryOutcome("the purple object", None, None)
    tabletop_scoring.score_outcome(absent, _result(truth, 60, status="no_mask"), truth, None)
    assert absent.correct
    wrong = tabletop_scoring.QueryOutcome("the purple object", None, None)
    tabletop_scoring.score_outcome(wrong, _result(truth, 60), truth, truth.mask(60, "red_box"))
    assert not wrong.correct and "expected no_mask" in wrong.problem
    off_frame = tabletop_scoring.QueryOutcome("the leftmost blue object", None, "blue_box")
    result = _result(truth, 20)
    result["stamp"]["nanosec"] += 1
    tabletop_scoring.score_outcome(off_frame, result, truth, truth.mask(20, "blue_box"))
    assert not off_frame.correct and "not the stamp of a frame" in off_frame.problem


def test_summary():
    outcomes = [tabletop_scoring.QueryOutcome("a", None, "x", result_count=1, correct=True,
                                              latency_s=0.2, iou=0.95, position_error_cm=0.4),
                tabletop_scoring.QueryOutcome("b", "id-b", None)]
    lines = tabletop_scoring.format_summary(DemoReport(outcomes=outcomes, wall_s=12.0))
    assert "queries answered: 1/2" in lines and "wall time: 12.0 s" in lines
    assert any(line.startswith("correct vs ground truth: 1/2") for line in lines)
    assert lines[-1].startswith("watch it: sam3-agent console")  # the closing hint


def test_the_summary_says_which_backends_answered(truth):
    offline = {"llm": "offline", "segmenter": "color"}
    outcomes = []
    for backends in (offline, offline, {"llm": "openai", "segmenter": "sam3"}):
        outcome = tabletop_scoring.QueryOutcome("the purple object", None, None)
        tabletop_scoring.score_outcome(outcome, _result(truth, 60, status="no_mask",
                                                        backends=backends), truth, None)
        outcomes.append(outcome)
    assert outcomes[0].backends == offline
    lines = [line for line in tabletop_scoring.format_summary(DemoReport(outcomes))
             if line.startswith("backends:")]
    assert lines == ["backends: llm offline, segmenter color (built-in demo backends: these "
                     "answers are not from a model)", "backends: llm openai, segmenter sam3"]


def _box_json(center, sizes, yaw_deg):
    half = np.radians(yaw_deg) / 2
    return {"center": dict(zip("xyz", map(float, center))), "size": dict(zip("xyz", sizes)),
            "orientation": {"x": 0.0, "y": 0.0, "z": float(np.sin(half)),
                            "w": float(np.cos(half))}}


def test_the_box_is_scored_against_the_true_box_of_the_frame(truth):
    """red_box: 0.15 x 0.10 m, turned -8 degrees; a box 2 cm off or turned 20 degrees misses."""
    centre = truth.true_box(20, "red_box").center
    lines = {}
    for label, box in (("good", _box_json(centre, (0.153, 0.102, 0.0), -8.5)),
                       ("shifted", _box_json(np.add(centre, [0.02, 0, 0]), (0.15, 0.1, 0.0), -8)),
                       ("turned", _box_json(centre, (0.15, 0.1, 0.0), 12.0))):
        outcome = tabletop_scoring.QueryOutcome("the largest red object", "r", "red_box")
        result = _result(truth, 20)
        result["masks"][0]["box"] = box
        tabletop_scoring.score_outcome(outcome, result, truth, truth.mask(20, "red_box"))
        lines[label] = (outcome, tabletop_scoring.format_outcome(outcome, "r"))
    good, line = lines["good"]
    assert good.box_on_target and good.box_center_error_cm == pytest.approx(0.0, abs=1e-6)
    assert good.box_size_error_pct == pytest.approx([2.0, 2.0])
    assert good.box_angle_error_deg == pytest.approx(0.5)
    assert "box error centre 0.00 cm, sizes +2.0/+2.0 %, angle 0.5 deg (on target)" in line
    assert lines["shifted"][0].box_center_error_cm == pytest.approx(2.0)
    assert lines["turned"][0].box_angle_error_deg == pytest.approx(20.0)
    assert "OFF TARGET" in lines["turned"][1] and not lines["shifted"][0].box_on_target
    summary = tabletop_scoring.format_summary(DemoReport([good, lines["turned"][0]]))
    assert "3D boxes on target: 1/2 (centre 1 cm, sizes 10 %, long-axis angle 10 deg)" in summary


def test_an_answer_without_a_box_says_why(truth):
    outcome = tabletop_scoring.QueryOutcome("the largest red object", "r", "red_box")
    result = _result(truth, 20)
    result["masks"][0].update(box=None, box_error="no camera_info received on /camera_info")
    tabletop_scoring.score_outcome(outcome, result, truth, truth.mask(20, "red_box"))
    assert outcome.box_on_target is False  # a missing box is a miss, not left out (issue 33)
    assert "no box: no camera_info received" in tabletop_scoring.format_outcome(outcome, "r")
    summary = tabletop_scoring.format_summary(DemoReport([outcome]))
    assert "3D boxes on target: 0/1 (centre 1 cm, sizes 10 %, long-axis angle 10 deg)" in summary
    assert "  'the largest red object': no box: no camera_info received on /camera_info" \
        in summary


def test_a_refinement_is_correct_only_on_the_frame_of_the_answer_it_refines(truth):
    refined = tabletop_scoring.QueryOutcome("the largest red object", "sample-red", "red_box")
    tabletop_scoring.score_outcome(refined, _result(truth, 40), truth, truth.mask(40, "red_box"))
    assert refined.correct

    def refinement(frame, mask_frame=None, refines="sample-red", earlier=refined):
        outcome = tabletop_scoring.QueryOutcome("no, the other one", "sample-red-other",
                                                "red_cylinder", "sample-red")
        mask = truth.mask(frame if mask_frame is None else mask_frame, "red_cylinder")
        tabletop_scoring.score_outcome(outcome, _result(truth, frame, refines=refines), truth,
                                       mask, earlier)
        return outcome

    right = refinement(40)
    assert right.correct and right.iou == 1.0
    assert "OK: truth red_cylinder, refines sample-red on its frame" in \
        tabletop_scoring.format_outcome(right, "sample-red-other")
    later = refinement(50)  # the right object, on a newer frame: not what the operator saw
    assert not later.correct and "not on the frame of the answer it refines (frame 40)" in \
        later.problem
    assert "names refines=None" in refinement(40, refines=None).problem
    assert "was not received first" in refinement(40, earlier=None).problem
    lines = tabletop_scoring.format_summary(DemoReport([refined, right, later]))
    assert ("refinements correct: 1/2 (the corrected object, answered on the frame of the answer "
            "it refines: 'no, the other one' refines sample-red, 'no, the other one' refines "
            "sample-red)") in lines


def test_the_sample_has_a_refinement_of_one_of_its_queries(truth):
    (refinement,) = [q for q in truth.queries if q["refines"] is not None]
    refined = [q for q in truth.queries if q["query_id"] == refinement["refines"]]
    assert len(refined) == 1 and refined[0]["t_s"] < refinement["t_s"]
    assert refinement["expected"] != refined[0]["expected"]
    assert '"refines": "sample-red"' in refinement["data"]
