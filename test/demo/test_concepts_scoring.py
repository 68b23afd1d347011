"""The demo's standing-concepts run scored against the tabletop sample's ground truth (pure)."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_demo import concepts_scoring as scoring
from sam3_agent_demo import sample
from sam3_agent_demo.report import DemoReport
from sam3_agent_demo.tabletop_scoring import format_summary

IDS = {"blue_box": 1, "blue_cylinder": 2, "red_box": 3, "red_cylinder": 4}


@pytest.fixture(scope="module")
def truth():
    return sample.load_ground_truth(sample.default_sample_dir())


def perfect_pass(truth, frame: int, ids: dict[str, int] = IDS):
    labels = np.zeros(truth.labels.shape[1:], np.uint16)
    detections = []
    for name, instance_id in ids.items():
        labels[truth.mask(frame, name)] = instance_id
        detections.append({"concept": f"{name.split('_')[0]} object", "id": instance_id})
    return detections, labels, int(truth.stamps_ns[frame])


def test_objects_of_a_concept_are_those_of_its_colour(truth):
    assert scoring.objects_of("blue object", truth.names) == ["blue_box", "blue_cylinder"]
    assert scoring.objects_of("purple thing", truth.names) == []


def test_every_object_found_once_with_stable_ids_is_right(truth):
    outcome = scoring.ConceptsOutcome()
    for frame in (3, 40, 90):
        outcome.frames.append(scoring.score_frame(*perfect_pass(truth, frame), truth,
                                                  outcome.concepts))
    assert outcome.ok and outcome.right_frames == 3
    assert outcome.ids == {name: [i] for name, i in IDS.items()}
    lines = scoring.format_concepts(outcome)
    assert "right vs ground truth: 3/3 frames" in lines[1]
    assert "4/4 on 3 frame(s)" in lines[2] and "(0 id change(s) over the run)" in lines[3]


def test_a_missed_object_an_extra_detection_and_an_id_change_are_wrong(truth):
    detections, labels, stamp = perfect_pass(truth, 10)
    missing = scoring.score_frame(detections[1:], labels, stamp, truth, scoring.DEMO_CONCEPTS)
    assert not missing.right and missing.compact() == "3/4"
    extra = scoring.score_frame(detections + [{"concept": "red object", "id": 9}], labels,
                                stamp, truth, scoring.DEMO_CONCEPTS)
    assert not extra.right and extra.compact() == "4/4 +1"
    no_labels = scoring.score_frame(detections, None, stamp, truth, scoring.DEMO_CONCEPTS)
    assert not no_labels.right
    outcome = scoring.ConceptsOutcome(frames=[
        scoring.score_frame(*perfect_pass(truth, 10), truth, scoring.DEMO_CONCEPTS),
        scoring.score_frame(*perfect_pass(truth, 11, dict(IDS, blue_box=7)), truth,
                            scoring.DEMO_CONCEPTS)])
    assert outcome.right_frames == 2 and not outcome.ok  # blue_box changed its id
    assert outcome.ids["blue_box"] == [1, 7]
    not_a_frame = scoring.score_frame([], None, 123, truth, scoring.DEMO_CONCEPTS)
    assert not_a_frame.frame_index is None and not not_a_frame.right


def test_the_demo_report_fails_and_says_so_when_the_concepts_are_wrong(truth):
    report = DemoReport(concepts=scoring.ConceptsOutcome(problem="no pass arrived"))
    assert not report.ok and report.to_json()["concepts"]["problem"] == "no pass arrived"
    assert any("problem: no pass arrived" in line for line in format_summary(report))
    assert DemoReport().to_json()["concepts"] is None
