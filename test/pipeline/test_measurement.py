"""The 3D step of an answer: measured before anything is built, the same way for every output."""

from __future__ import annotations

import numpy as np

from sam3_agent_ros.core.types import Frame, Mask, QueryStatus, Result
from sam3_agent_ros.geometry.measurement import NO_POSITION, BoxValue, Measurement
from sam3_agent_ros.pipeline.measurement import measure_answer
from sam3_agent_ros.pipeline.three_d import PreparedDepth, measure_3d
from test.pipeline.depth_doubles import MEASURED, CountingDepth


def answer(status=QueryStatus.SUCCEEDED, pixels=True) -> Result:
    image = np.zeros((4, 6, 3) if pixels else (0, 0, 3), np.uint8)
    found = status == QueryStatus.SUCCEEDED
    masks = [Mask.from_array(np.ones((4, 6), bool), 0.9, (0, 0, 6, 4))] if found else []
    return Result("q", "a box", status, masks=masks, frame=Frame(image=image, frame_id="cam"))


def test_a_measurement_gives_its_json_back_as_it_came():
    assert Measurement.from_json(MEASURED).to_json() == MEASURED
    missing = Measurement.missing("no depth frame")
    assert missing.to_json() == {"position": None, "position_error": "no depth frame",
                                 "box": None, "box_error": "no depth frame"}
    assert Measurement.missing(None).position_error == NO_POSITION
    assert Measurement.from_json(MEASURED).box == BoxValue((0.1, -0.2, 0.9), (0.2, 0.1, 0.05),
                                                           (0.0, 0.0, 0.0, 1.0))


def test_the_answer_is_measured_into_the_result_json_before_anything_is_built():
    result = answer()
    measured = measure_answer(result, CountingDepth(MEASURED))
    assert measured.measurements == [Measurement.from_json(MEASURED)]
    assert result.to_json()["masks"][0]["position"] == MEASURED["position"]


def test_no_3d_step_without_depth_for_a_failure_or_without_pixels():
    depth = CountingDepth(MEASURED)
    assert measure_answer(answer(), None).measurements is None
    assert measure_answer(answer(QueryStatus.FAILED), depth).measurements is None
    assert measure_answer(answer(pixels=False), depth).measurements is None
    assert depth.calls == 0
    assert measure_answer(answer(QueryStatus.NO_MASK), depth).measurements == []


def test_a_failing_depth_source_becomes_the_same_reason_on_every_mask():
    frame = Frame(image=np.zeros((4, 6, 3), np.uint8))
    located = measure_3d(CountingDepth(fail=True), frame,
                         [np.ones((4, 6), bool)] * 2).measurements
    assert len(located) == 2 and all(m.position is None for m in located)
    assert all("depth exploded" in m.position_error and m.box_error == m.position_error
               for m in located)


def test_a_follow_update_measures_only_the_visible_objects():
    frame = Frame(image=np.zeros((4, 6, 3), np.uint8))
    depth = CountingDepth(MEASURED)
    measured = measure_3d(depth, frame, [None, np.ones((4, 6), bool)]).measurements
    assert measured[0] is None and measured[1].position == (0.1, -0.2, 0.9)
    assert measure_3d(depth, frame, [None]).measurements == [None] and depth.calls == 1


def test_one_depth_image_is_measured_as_the_node_does_or_says_why_not():
    frame = Frame(image=np.zeros((4, 6, 3), np.uint8))
    unusable = PreparedDepth(None, None, "unusable camera model", cfg=None)
    assert unusable.measure(frame, [object()]) == [Measurement.missing(
        "unusable camera model").to_json()]
