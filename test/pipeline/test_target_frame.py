"""The TF step of an answer (issue 27): the transform AT THE COLOUR FRAME'S STAMP, the masks moved
into target_frame, the reason when it is missing, the target's points. Pure, with fake ports."""

from __future__ import annotations

import dataclasses

import numpy as np

from sam3_agent_ros.config import DepthConfig
from sam3_agent_ros.core.types import Frame, Mask, QueryStatus, Result
from sam3_agent_ros.frames import Transform
from sam3_agent_ros.pipeline.measurement import measure_answer
from sam3_agent_ros.pipeline.target_frame import TargetFrameRequest
from sam3_agent_ros.pipeline.three_d import PreparedDepth, measure_3d
from test.pipeline.depth_doubles import CountingDepth

STAMP = (12, 500_000_000)
STAMP_NS = 12_500_000_000


class StampedTransforms:
    """A different transform per stamp: only the one at the frame's stamp is right."""

    def __init__(self, by_stamp):
        self.by_stamp, self.calls = by_stamp, []

    def lookup(self, target, source, stamp_ns, timeout_s):
        self.calls.append((target, source, stamp_ns, timeout_s))
        if stamp_ns in self.by_stamp:
            return self.by_stamp[stamp_ns], ""
        return None, (f"no transform from '{source}' to '{target}' at {stamp_ns}: frame "
                      f"'{target}' is unknown; newest stamp seen 3.0 s; known frames: opt")


def shifted(x):
    return Transform(np.array([x, 0.0, 0.0]), np.array([0.0, 0.0, 0.0, 1.0]))


def answer(masks=2) -> Result:
    image = np.zeros((4, 6, 3), np.uint8)
    found = [Mask.from_array(np.ones((4, 6), bool), 0.9, (0, 0, 6, 4)) for _ in range(masks)]
    frame = Frame(image=image, stamp_sec=STAMP[0], stamp_nanosec=STAMP[1], frame_id="opt")
    return Result("q", "a box", QueryStatus.SUCCEEDED, masks=found, frame=frame)


def test_the_transform_at_the_colour_frames_stamp_is_used_once_per_answer():
    transforms = StampedTransforms({STAMP_NS: shifted(1.0), STAMP_NS + 10**9: shifted(5.0)})
    request = TargetFrameRequest("base_link", transforms, timeout_s=0.3)
    measured = measure_answer(answer(), CountingDepth(), target_frame=request)
    assert transforms.calls == [("base_link", "opt", STAMP_NS, 0.3)]  # once, at the stamp
    extra = measured.result.to_json()["masks"][0]
    assert extra["position"] == {"x": 0.1, "y": -0.2, "z": 0.9}  # camera frame kept
    assert extra["target"]["frame_id"] == "base_link"
    assert extra["target"]["position"] == {"x": 1.1, "y": -0.2, "z": 0.9}
    assert extra["target"]["box"]["center"] == {"x": 1.1, "y": -0.2, "z": 0.9}
    assert measured.output_frame_id == "base_link" and measured.target_error == ""
    moved = measured.output_measurements
    assert moved is not None and len(moved) == 2
    assert moved[0].position == (1.1, -0.2, 0.9) and moved[0].box.center == (1.1, -0.2, 0.9)


def test_a_missing_transform_names_the_frames_and_leaves_no_target_frame_outputs():
    transforms = StampedTransforms({STAMP_NS + 10**9: shifted(5.0)})  # only a later one
    measured = measure_answer(answer(), CountingDepth(),
                              target_frame=TargetFrameRequest("base_link", transforms))
    extra = measured.result.to_json()["masks"][1]
    assert extra["target"] is None
    assert "'opt'" in extra["target_error"] and "'base_link'" in extra["target_error"]
    assert extra["position"] == {"x": 0.1, "y": -0.2, "z": 0.9}  # 2D + camera 3D still out
    assert measured.output_measurements is None  # no pose in base_link for this answer
    assert "'base_link'" in measured.target_error


def test_a_failing_transform_source_or_no_frame_id_is_a_reason_never_a_crash():
    class Broken:
        def lookup(self, *args):
            raise RuntimeError("tf exploded")

    measured = measure_answer(answer(1), CountingDepth(),
                              target_frame=TargetFrameRequest("base_link", Broken()))
    assert "tf exploded" in measured.result.to_json()["masks"][0]["target_error"]
    result = answer(1)
    result.frame = dataclasses.replace(result.frame, frame_id="")
    measured = measure_answer(result, CountingDepth(),
                              target_frame=TargetFrameRequest("base_link", Broken()))
    assert "no frame_id" in measured.target_error


def test_without_target_frame_the_outputs_stay_in_the_colour_frame():
    measured = measure_answer(answer(1), CountingDepth())
    assert "target" not in measured.result.to_json()["masks"][0]
    assert measured.output_frame_id == "opt"
    assert measured.output_measurements[0].position == (0.1, -0.2, 0.9)


def test_a_follow_update_uses_the_transform_at_its_own_frames_stamp():
    later = Frame(image=np.zeros((4, 6, 3), np.uint8), stamp_sec=13, stamp_nanosec=500_000_000,
                  frame_id="opt")
    transforms = StampedTransforms({STAMP_NS: shifted(1.0), STAMP_NS + 10**9: shifted(5.0)})
    visible = measure_3d(CountingDepth(), later, [np.ones((4, 6), bool), None],
                         target_frame=TargetFrameRequest("base_link", transforms))
    assert visible.output_frame_id == "base_link"
    moved = visible.output_measurements
    assert moved[0].position == (5.1, -0.2, 0.9) and moved[1] is None
    transforms.by_stamp.clear()
    missing = measure_3d(CountingDepth(), later, [np.ones((4, 6), bool)],
                         target_frame=TargetFrameRequest("base_link", transforms))
    assert missing.output_measurements is None and "base_link" in missing.target.reason


def test_the_targets_points_are_computed_when_asked_bounded_and_moved():
    depth_m = np.full((4, 6), 2.0, np.float32)
    still = PreparedDepth(depth_m, (10.0, 10.0, 3.0, 2.0), None, DepthConfig(erode_px=0))
    assert measure_answer(answer(1), still).points is None  # not asked: not computed
    plain = measure_answer(answer(1), still, cloud_max_points=10).points
    assert plain is not None and 0 < len(plain) <= 10
    assert np.allclose(plain.points[:, 2], 2.0)
    transforms = StampedTransforms({STAMP_NS: shifted(1.0)})
    moved = measure_answer(answer(1), still, cloud_max_points=10,
                           target_frame=TargetFrameRequest("base_link", transforms)).points
    assert np.allclose(moved.points, plain.points + np.array([1.0, 0.0, 0.0], np.float32))
    transforms.by_stamp.clear()
    assert measure_answer(answer(1), still, cloud_max_points=10,
                          target_frame=TargetFrameRequest("base_link", transforms)).points is None


def test_a_cloud_that_cannot_be_made_is_logged_and_the_answer_still_comes_out():
    depth_m = np.full((4, 6), 2.0, np.float32)
    still = PreparedDepth(depth_m, (10.0, 10.0, 3.0, 2.0), None, DepthConfig(erode_px=0))
    grey = answer(1)
    grey.frame = dataclasses.replace(grey.frame, image=np.zeros((4, 6), np.uint8))  # not RGB

    class Lines:
        def __init__(self):
            self.warnings = []

        def warning(self, line):
            self.warnings.append(line)

        info = error = debug = warning

    logger = Lines()
    measured = measure_answer(grey, still, logger, cloud_max_points=10)
    assert measured.points is None
    assert measured.measurements[0].position is not None  # the 3D step went on
    assert any("the target's points failed" in line and "rgb must be" in line
               for line in logger.warnings)


def test_no_cloud_when_the_3d_step_fails_after_handing_the_pixels_over():
    depth_m = np.full((4, 6), 2.0, np.float32)
    still = PreparedDepth(depth_m, (10.0, 10.0, 3.0, 2.0), None, DepthConfig(erode_px=0))

    class FailsAfterSampling:
        def measure(self, frame, masks, pixels_to=None):
            still.measure(frame, masks, pixels_to)  # the sink has the pixels now
            raise RuntimeError("box fit exploded")

    measured = measure_answer(answer(1), FailsAfterSampling(), cloud_max_points=10)
    assert "3D step failed" in measured.measurements[0].position_error
    assert measured.points is None
    assert measure_answer(answer(1), still, cloud_max_points=10).points is not None


def test_a_mask_without_a_position_has_no_target_and_the_action_says_why():
    """CONTRACTS §11: with the transform found but no position for a mask, that mask has
    ``"target": null`` and a non-empty ``target_error`` (never a target object with a null
    position), its moved measurement has no position, and the answer's target_error (the
    action's) names the mask and the reason."""
    transforms = StampedTransforms({STAMP_NS: shifted(1.0)})
    request = TargetFrameRequest("base_link", transforms)
    reason = "no depth frame within depth.max_stamp_diff_s=0.05 s of the colour frame"

    class HalfMeasured:
        def measure(self, frame, masks, pixels_to=None):
            missing = {"position": None, "position_error": reason, "box": None,
                       "box_error": reason}
            return [missing, dict(CountingDepth().extras)][:len(masks)]

    measured = measure_answer(answer(2), HalfMeasured(), target_frame=request)
    first, second = measured.result.to_json()["masks"]
    assert first["target"] is None
    assert first["target_error"] == f"no 3D position in the colour frame: {reason}"
    assert second["target"]["position"] == {"x": 1.1, "y": -0.2, "z": 0.9}
    assert measured.moved is not None and measured.moved[0].position is None
    assert measured.target_error == f"no 3D position in the colour frame for mask 1: {reason}"
    assert measured.missing_3d == f"1 of 2 mask(s) without a 3D position (mask 1: {reason})"


def strict_json(text: str):
    """json.loads that refuses NaN / Infinity, as JSON.parse and every strict parser do."""
    import json

    def refuse(word):
        raise ValueError(f"not JSON: {word}")

    return json.loads(text, parse_constant=refuse)


def test_a_transform_that_overflows_gives_no_target_with_the_reason():
    # Two finite links of 1e308 composed to inf: ~/target x = inf, 'succeeded', and the result
    # text held a bare Infinity (issue 34). Whatever the source, the transform is checked.
    from sam3_agent_ros.core import finite_json

    overflowing = shifted(1e308) * shifted(1e308)
    skewed = Transform._made(np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0]), np.diag([1, 1, 2.0]))
    for bad, words in ((overflowing, "not finite"), (skewed, "not a rotation")):
        transforms = StampedTransforms({STAMP_NS: bad})
        measured = measure_answer(answer(1), CountingDepth(),
                                  target_frame=TargetFrameRequest("base_link", transforms),
                                  cloud_max_points=100)
        extra = measured.result.to_json()["masks"][0]
        assert extra["target"] is None and words in extra["target_error"]
        assert measured.output_measurements is None  # no ~/target, ~/targets, ... at all
        assert measured.points is None
        strict_json(finite_json.dumps(measured.result.to_json()))


def test_no_json_the_node_writes_holds_a_non_finite_number():
    from sam3_agent_ros.core import finite_json

    result = answer(1)
    result.mask_extras = [{"position": {"x": float("inf"), "y": 0.0, "z": float("nan")}}]
    text = finite_json.dumps(result.to_json())
    parsed = strict_json(text)
    assert parsed["masks"][0]["position"] == {"x": None, "y": 0.0, "z": None}
    assert finite_json.non_finite_paths(result.to_json()) == ["masks[0].position.x",
                                                             "masks[0].position.z"]
