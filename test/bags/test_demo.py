"""The demo's scoring (pure) and its behaviour when the node cannot start."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from sam3_agent_ros.bags import demo, sample
from sam3_agent_ros.ros.dds import loopback_env
from test.bags.test_e2e_bag import REPO_ROOT, run_demo_cli


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
    outcome = demo.QueryOutcome("the leftmost blue object", None, "blue_box")
    xyz = truth.position(20, "blue_box") + np.array([0.003, 0.0, 0.004])
    result = _result(truth, 20, position=dict(zip("xyz", xyz.tolist())))
    demo.score_outcome(outcome, result, truth, truth.mask(20, "blue_box"))
    assert outcome.correct and outcome.iou == 1.0 and outcome.frame_index == 20
    assert outcome.position_error_cm == pytest.approx(0.5)
    line = demo.format_outcome(outcome, "q-1")
    assert "OK" in line and "IoU 1.000" in line and "3D error 0.50 cm" in line


def test_the_wrong_object_is_not_correct(truth):
    outcome = demo.QueryOutcome("the leftmost blue object", None, "blue_box")
    demo.score_outcome(outcome, _result(truth, 20), truth, truth.mask(20, "blue_cylinder"))
    assert not outcome.correct and outcome.iou == 0.0 and "below 0.8" in outcome.problem
    assert "WRONG" in demo.format_outcome(outcome, "q-1")


def test_absent_object_wants_no_mask_and_stamps_must_be_bag_frames(truth):
    absent = demo.QueryOutcome("the purple object", None, None)
    demo.score_outcome(absent, _result(truth, 60, status="no_mask"), truth, None)
    assert absent.correct
    wrong = demo.QueryOutcome("the purple object", None, None)
    demo.score_outcome(wrong, _result(truth, 60), truth, truth.mask(60, "red_box"))
    assert not wrong.correct and "expected no_mask" in wrong.problem
    off_frame = demo.QueryOutcome("the leftmost blue object", None, "blue_box")
    result = _result(truth, 20)
    result["stamp"]["nanosec"] += 1
    demo.score_outcome(off_frame, result, truth, truth.mask(20, "blue_box"))
    assert not off_frame.correct and "not the stamp of a frame" in off_frame.problem


def test_summary_and_helpers():
    outcomes = [demo.QueryOutcome("a", None, "x", result_count=1, correct=True, latency_s=0.2,
                                  iou=0.95, position_error_cm=0.4),
                demo.QueryOutcome("b", "id-b", None)]
    lines = demo.format_summary(demo.DemoReport(outcomes=outcomes, wall_s=12.0))
    assert "queries answered: 1/2" in lines and "wall time: 12.0 s" in lines
    assert any(line.startswith("correct vs ground truth: 1/2") for line in lines)
    padded = np.array([[0, 255, 0, 9], [255, 0, 0, 9]], np.uint8)  # step 4, width 3
    assert demo.mono8_to_mask(2, 3, 4, padded.tobytes()).tolist() == [[False, True, False],
                                                                       [True, False, False]]
    args = demo.node_arguments([Path("a.yaml"), Path("b.yaml")], ["llm.model:=m"])
    assert args[:5] == ["--ros-args", "--params-file", "a.yaml", "--params-file", "b.yaml"]
    assert "image:=" + sample.COLOR_TOPIC in args and "llm.model:=m" in args


@pytest.mark.ros
def test_demo_fails_fast_and_shows_why_when_the_node_cannot_start(tmp_path):
    env = dict(os.environ)
    env.update(loopback_env())
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)
    process = run_demo_cli(["--out", str(tmp_path), "-p",
                            "segmenter.backend:=no_such_module:factory"], env, timeout_s=90)
    assert process.returncode == 1
    assert "the node did not start" in process.stdout
    assert "no_such_module" in process.stdout  # the node log's tail is shown
    assert (tmp_path / "report.json").is_file()


def test_a_second_demo_on_the_same_output_directory_is_refused(tmp_path):
    import fcntl
    import io

    with open(tmp_path / ".demo.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        printed = io.StringIO()
        assert demo.run_demo(demo.DemoOptions(out_dir=tmp_path), out=printed) == 1
    assert "another demo is writing to" in printed.getvalue()
    assert not (tmp_path / "report.json").exists()
