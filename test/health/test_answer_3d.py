"""The ``3D`` status (CONTRACTS §11): WARN, with the reason, while the newest answer of a query
that wanted 3D has none; present only while depth is on. Pure, with a fake clock."""

from __future__ import annotations

import numpy as np

from sam3_agent_ros.config import Config
from sam3_agent_ros.core.types import Frame, Mask, QueryStatus, Result
from sam3_agent_ros.geometry.measurement import Measurement
from sam3_agent_ros.health import recorder as health
from sam3_agent_ros.health.status import Level
from sam3_agent_ros.pipeline.measurement import Answer
from sam3_agent_ros.pipeline.target_frame import TargetFrame


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def _answer(query_id: str, measurements, target=None) -> Answer:
    masks = [Mask.from_array(np.ones((4, 4), bool), 0.9, (0, 0, 4, 4)) for _ in measurements]
    result = Result(query_id, "q", QueryStatus.SUCCEEDED, masks=masks,
                    frame=Frame(np.zeros((4, 4, 3), np.uint8)))
    return Answer(result, list(measurements), target)


def _three_d(recorder) -> list:
    params = Config.from_params({}).to_params()
    return [s for s in health.statuses(health.snapshot(recorder, params)) if s.name == "3D"]


def test_the_3d_status_warns_while_the_newest_answer_that_wanted_3d_has_none():
    clock = Clock()
    recorder = health.HealthRecorder(clock)
    assert _three_d(recorder) == []  # depth off: no such area
    recorder.camera_model_started()
    (status,) = _three_d(recorder)
    assert (status.level, status.message) == (Level.OK, "no 3D answer yet")
    slow = "no depth frame within depth.max_stamp_diff_s=0.05 s of the colour frame (nearest " \
           "is 3.200 s away)"
    recorder.answer_measured(_answer("q-1", [Measurement.missing(slow),
                                             Measurement(position=(0.1, 0.2, 0.9))]))
    clock.now += 2.0
    (status,) = _three_d(recorder)
    assert status.level == Level.WARN
    assert status.message == (f"the newest answer (q-1, 2.0 s ago) has no 3D: 1 of 2 mask(s) "
                              f"without a 3D position (mask 1: {slow})")
    assert status.values["query_id"] == "q-1"
    recorder.answer_measured(_answer("q-2", []))  # nothing measured: wanted no 3D, no change
    assert _three_d(recorder)[0].level == Level.WARN
    recorder.answer_measured(_answer("q-3", [Measurement(position=(0.1, 0.2, 0.9))]))
    (status,) = _three_d(recorder)
    assert (status.level, status.message) == (
        Level.OK, "the newest answer (q-3, 0.0 s ago) has 3D for its 1 mask(s)")
    no_tf = TargetFrame("base_link", "cam", 5, None, "no transform from 'cam' to 'base_link'")
    recorder.answer_measured(_answer("q-4", [Measurement(position=(0.1, 0.2, 0.9))], no_tf))
    (status,) = _three_d(recorder)
    assert status.level == Level.WARN and status.message.endswith(
        "has no 3D: no 3D in 'base_link': no transform from 'cam' to 'base_link'")
    recorder.camera_model_started(False)
    assert _three_d(recorder) == []
