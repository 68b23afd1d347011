"""``sam3-agent run --depth``: the camera model is checked against the colour image as on ROS
(issue 25): one that does not fit gives no position and no box, the reason in the result JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest

from test.test_cli import EXAMPLE, OFFLINE, _example_depth_files, sam3_agent


@pytest.mark.parametrize(("model_args", "fragment"), [
    (["--camera-info", "WRONG_SIZE"],
     "camera_info is for 1280x720 images but the colour frame is 640x480"),
    (["--camera-info", "ONE_PIXEL"], "camera_info is for 1x1 images"),
    (["--intrinsics", "1e-9,600,320,240"], "fx=1e-09 px is implausible"),
    (["--intrinsics", "0,0,320,240"], "focal lengths must be positive"),
    (["--intrinsics", "nan,600,320,240"], "fx is nan"),
    (["--intrinsics", "600,600,900,240"], "principal point (900, 240) lies outside"),
])
def test_a_camera_model_that_does_not_fit_gives_no_position(tmp_path, model_args, fragment):
    png, _ = _example_depth_files(tmp_path)
    k = "[600, 0, 320, 0, 600, 240, 0, 0, 1]"
    (tmp_path / "wrong_size.yaml").write_text(f"width: 1280\nheight: 720\nk: {k}\n")
    (tmp_path / "one_pixel.yaml").write_text(f"width: 1\nheight: 1\nk: {k}\n")
    paths = {"WRONG_SIZE": str(tmp_path / "wrong_size.yaml"),
             "ONE_PIXEL": str(tmp_path / "one_pixel.yaml")}
    proc = sam3_agent("run", "--image", str(EXAMPLE), "--query", "the largest red object",
                      *OFFLINE, "--depth", str(png), *[paths.get(a, a) for a in model_args])
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "succeeded" and result["masks"], result
    for mask in result["masks"]:
        assert mask["position"] is None and mask["box"] is None, mask
        assert mask["position_error"].startswith("unusable camera model (--")
        assert fragment in mask["position_error"], mask
        assert mask["box_error"] == mask["position_error"]


def test_a_binned_camera_info_maps_to_the_image(tmp_path):
    """The full-resolution calibration of a camera binned 2x2 to the image's 640x480."""
    png, _ = _example_depth_files(tmp_path)
    binned = tmp_path / "binned.yaml"
    binned.write_text("width: 1280\nheight: 960\nbinning_x: 2\nbinning_y: 2\n"
                      "k: [1200, 0, 640, 0, 1200, 480, 0, 0, 1]\n")
    runs = [json.loads(sam3_agent("run", "--image", str(EXAMPLE), "--query",
                                  "the largest red object", *OFFLINE, "--depth", str(png),
                                  *args).stdout)["masks"][0]
            for args in (["--camera-info", str(binned)], ["--intrinsics", "600,600,320,240"])]
    assert runs[0]["position"] is not None
    assert runs[0]["position"] == runs[1]["position"]


def test_ctrl_c_on_run_exits_130_with_the_cancelled_result(tmp_path):
    """As ``ask`` does (issue 33: run exited 1): the query is cancelled, its one result printed,
    the status a shell gives a process ended by SIGINT. The offline planner thinks 30 s a call
    (llm.offline_think_s), so the query is still running when Ctrl-C comes."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from test.test_cli import ROOT

    run = subprocess.Popen(
        [sys.executable, "-m", "sam3_agent_ros.cli", "run", "--image", str(EXAMPLE), "--query",
         "the largest red object", *OFFLINE, "-p", "llm.offline_think_s:=30"],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        for line in run.stderr:  # until the query runs (its first status line)
            if '"phase": "thinking"' in line:
                break
        run.send_signal(signal.SIGINT)
        started = time.monotonic()
        stdout, stderr = run.communicate(timeout=20)
        assert time.monotonic() - started < 10  # not the planner's 30 s
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 130, (run.returncode, stderr)
    result = json.loads(stdout)
    assert result["status"] == "cancelled" and "interrupted" in result["error"], result


def test_run_out_without_depth_removes_an_earlier_points_ply(tmp_path):
    """issue 33: --out DIR held the points.ply of an earlier run with --depth."""
    png, _ = _example_depth_files(tmp_path)
    out = tmp_path / "answer"
    query = ["run", "--image", str(EXAMPLE), "--query", "the largest red object", *OFFLINE,
             "--out", str(out)]
    with_depth = sam3_agent(*query, "--depth", str(png), "--intrinsics", "600,600,320,240")
    assert with_depth.returncode == 0 and (out / "points.ply").exists(), with_depth.stderr
    without = sam3_agent(*query)
    assert without.returncode == 0, without.stderr
    assert not (out / "points.ply").exists()
    assert {p.name for p in out.iterdir()} >= {"overlay.png", "mask.png", "answer.json"}


def _ply_labels(path) -> tuple[list[str], np.ndarray]:
    """The property names of a binary PLY and its ``label`` column."""
    data = path.read_bytes()
    header, _, body = data.partition(b"end_header\n")
    lines = header.decode().splitlines()
    names = [line.split()[-1] for line in lines if line.startswith("property")]
    count = next(int(line.split()[-1]) for line in lines if line.startswith("element vertex"))
    layout = np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("red", "u1"), ("green", "u1"),
                       ("blue", "u1"), ("label", "<u4")])
    return names, np.frombuffer(body, layout, count)["label"]


def test_run_with_depth_writes_the_grasp_scene(tmp_path):
    """issue 36: boxes reaching the table, the support, the target's grasps in the result and
    DIR/scene.ply (x y z rgb label); a later run without depth leaves no scene.ply behind."""
    png, _ = _example_depth_files(tmp_path)
    out = tmp_path / "answer"
    query = ["run", "--image", str(EXAMPLE), "--query", "the smallest object", *OFFLINE,
             "--out", str(out)]
    run = sam3_agent(*query, "--depth", str(png), "--intrinsics", "600,600,320,240")
    assert run.returncode == 0, run.stderr
    mask = json.loads(run.stdout)["masks"][0]
    assert mask["support"]["normal"]["z"] < -0.99, mask  # the table faces the camera
    assert mask["box"]["size"]["z"] > 0.02, mask  # the box reaches down to the table
    assert mask["grasps"] and mask.get("grasp_error") is None, mask
    best = mask["grasps"][0]
    assert set(best) == {"pose", "width", "score"} and set(best["pose"]) == {
        "position", "orientation"}
    assert 0 < best["width"] <= 0.08 and 0 < best["score"] <= 1
    names, labels = _ply_labels(out / "scene.ply")
    assert names == ["x", "y", "z", "red", "green", "blue", "label"]
    assert set(np.unique(labels)) == {0, 1}  # background and the one selected mask
    without = sam3_agent(*query)
    assert without.returncode == 0, without.stderr
    assert not (out / "scene.ply").exists() and not (out / "points.ply").exists()


def test_run_without_a_fitting_side_says_why_there_is_no_grasp(tmp_path):
    png, _ = _example_depth_files(tmp_path)
    run = sam3_agent("run", "--image", str(EXAMPLE), "--query", "the largest red object",
                     *OFFLINE, "--depth", str(png), "--intrinsics", "600,600,320,240")
    assert run.returncode == 0, run.stderr
    mask = json.loads(run.stdout)["masks"][0]
    assert mask["grasps"] == [] and "grasp.max_width_m" in mask["grasp_error"], mask


def test_scene_disabled_gives_no_scene_fields_and_no_scene_ply(tmp_path):
    png, _ = _example_depth_files(tmp_path)
    out = tmp_path / "answer"
    run = sam3_agent("run", "--image", str(EXAMPLE), "--query", "the smallest object", *OFFLINE,
                     "-p", "scene.enabled:=false", "--depth", str(png), "--intrinsics",
                     "600,600,320,240", "--out", str(out))
    assert run.returncode == 0, run.stderr
    mask = json.loads(run.stdout)["masks"][0]
    assert "support" not in mask and "grasps" not in mask and "box" in mask
    assert (out / "points.ply").exists() and not (out / "scene.ply").exists()


def test_a_run_with_depth_but_no_target_leaves_no_scene_ply(tmp_path):
    png, _ = _example_depth_files(tmp_path)
    out = tmp_path / "answer"
    depth = ["--depth", str(png), "--intrinsics", "600,600,320,240", "--out", str(out)]
    first = sam3_agent("run", "--image", str(EXAMPLE), "--query", "the smallest object",
                       *OFFLINE, *depth)
    assert first.returncode == 0 and (out / "scene.ply").exists(), first.stderr
    nothing = sam3_agent("run", "--image", str(EXAMPLE), "--query", "the purple object",
                         *OFFLINE, *depth)
    assert nothing.returncode == 0 and json.loads(nothing.stdout)["status"] == "no_mask"
    assert not (out / "scene.ply").exists()
