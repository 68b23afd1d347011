"""`sam3-agent concepts` as a user runs it: a subprocess, JSON on stdout, the per-frame rate on
stderr for a bag, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from sam3_agent_demo.scene import load_ground_truth_masks

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "data" / "example_tabletop.png"
GROUND_TRUTH = ROOT / "data" / "example_tabletop_gt.npz"
SAMPLE_BAG = ROOT / "data" / "sample_tabletop" / "bag"
FIELDS = {"concept", "id", "score", "bbox", "centroid", "area", "position_valid", "position"}


def sam3_agent(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "sam3_agent_ros.cli", "concepts", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_an_image_gives_every_instance_of_every_concept_with_its_id(tmp_path):
    proc = sam3_agent("--image", str(EXAMPLE), "--concepts", "blue object, red object",
                      "--offline", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    detections = result["detections"]
    assert [d["concept"] for d in detections] == ["blue object"] * 2 + ["red object"] * 2
    assert [d["id"] for d in detections] == [1, 2, 3, 4]
    assert all(set(d) == FIELDS and d["position_valid"] is False for d in detections)
    assert result["concepts"] == ["blue object", "red object"]
    labels = cv2.imread(str(tmp_path / "labels.png"), cv2.IMREAD_UNCHANGED)
    assert labels.dtype == np.uint16 and set(np.unique(labels).tolist()) == {0, 1, 2, 3, 4}
    truth = load_ground_truth_masks(GROUND_TRUTH)
    for detection in detections:
        mine = labels == detection["id"]
        best = max(((mine & t).sum() / (mine | t).sum(), name) for name, t in truth.items())
        assert best[0] >= 0.8 and detection["concept"].split()[0] in best[1], detection
        assert detection["area"] == int(mine.sum())
    assert cv2.imread(str(tmp_path / "overlay.png")).shape == labels.shape + (3,)
    assert "colour demo segmenter" in proc.stderr


def test_a_bag_gives_one_line_per_frame_with_ids_kept_and_the_rate():
    pytest.importorskip("rosbags")  # the bag reader (not in the ROS-free venvs)
    proc = sam3_agent("--bag", str(SAMPLE_BAG), "--concepts", "blue object,red object",
                      "--max-frames", "12", "--offline")
    assert proc.returncode == 0, proc.stderr
    frames = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(frames) == 12
    stamps = [(f["stamp"]["sec"], f["stamp"]["nanosec"]) for f in frames]
    assert stamps == sorted(stamps) and len(set(stamps)) == 12
    assert all(f["frame_id"] == "camera_color_optical_frame" for f in frames)
    # the camera moves a little: each object keeps its id (ids ordered by position in a frame)
    by_x = [tuple(d["id"] for d in sorted(f["detections"], key=lambda d: d["centroid"][0]))
            for f in frames]
    assert len(set(by_x)) == 1 and sorted(by_x[0]) == [1, 2, 3, 4]
    rate = [line for line in proc.stderr.splitlines() if "frames/s" in line]
    assert rate and "12 frames of /camera/color/image_raw, 2 concept(s)" in rate[0]


@pytest.mark.parametrize("args, fragment", [
    (["--image", str(EXAMPLE)], "no concepts"),
    (["--image", str(EXAMPLE), "--concepts", ",".join(f"c{i}" for i in range(9))],
     "more than concepts.max_prompts (8)"),
    (["--image", str(EXAMPLE), "--concepts", "x" * 101], "concepts.max_prompt_chars"),
    (["--image", "missing.png", "--concepts", "cup"], "no such file"),
    (["--bag", str(SAMPLE_BAG), "--concepts", "cup", "--topic", "/query"],
     "not an Image/CompressedImage topic"),
    (["--bag", "missing_bag", "--concepts", "cup"], "bag not found"),
])
def test_bad_usage_exits_2_with_the_reason(args, fragment):
    if "--bag" in args:
        pytest.importorskip("rosbags")
    proc = sam3_agent(*args, "--offline")
    assert proc.returncode == 2, proc.stderr
    assert fragment in proc.stderr and proc.stdout == ""


def test_the_concepts_of_the_parameters_are_used_without_the_flag():
    proc = sam3_agent("--image", str(EXAMPLE), "--offline", "-p",
                      'concepts.prompts:="[yellow object]"')
    assert proc.returncode == 0, proc.stderr
    assert [d["id"] for d in json.loads(proc.stdout)["detections"]] == [1]
