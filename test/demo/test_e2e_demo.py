"""End to end: the bundled bag replayed into sam3_agent_node (subprocess) by ``sam3-agent demo``.

Checked from the recorded output bag, independently of the demo's own scoring: every query of
the bag gets exactly one result; the answerable ones match the ground truth (IoU >= 0.8) and carry
a 3D position; the absent object gives no_mask; every result is stamped with a frame of the bag;
the refinement is answered on the frame of the answer it refines.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rosbags.rosbag2 import Reader
from rosbags.typesys import Stores, get_typestore

from sam3_agent_demo import sample
from sam3_agent_demo.domains import reserved_loopback_env
from sam3_agent_demo.scene import box_errors
from sam3_agent_demo.tabletop_scoring import box_as_scored
from sam3_agent_ros.bags.message_types import register_message_type

pytestmark = pytest.mark.ros
REPO_ROOT = Path(__file__).resolve().parents[2]
STORE = get_typestore(Stores.ROS2_KILTED)
ARROW, CUBE, TEXT_VIEW_FACING = 0, 1, 9  # visualization_msgs/Marker types


def _stamp(header) -> int:
    return header.stamp.sec * 1_000_000_000 + header.stamp.nanosec


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    env = dict(os.environ)
    env.update(reserved_loopback_env())  # a fresh random domain: nothing else talks to this run
    # A shell that exported a profile under both Fast DDS variable names (as older docs said):
    # the demo must keep only the one the installed Fast DDS reads, so nothing warns.
    env["FASTDDS_DEFAULT_PROFILES_FILE"] = env["FASTRTPS_DEFAULT_PROFILES_FILE"] = str(
        REPO_ROOT / "config" / "fastdds_large_images.xml")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)
    return out, run_demo_cli(["--out", str(out)], env), env


def run_demo_cli(args: list[str], env: dict[str, str], timeout_s: float = 180.0,
                 command: str = "demo"):
    """``sam3-agent COMMAND ARGS`` in a subprocess; on a hang, SIGTERM lets it stop its node."""
    process = subprocess.Popen([sys.executable, "-m", "sam3_agent_ros.cli", command, *args],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)
        try:
            stdout, stderr = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
        pytest.fail(f"the demo did not finish in {timeout_s:.0f} s:\n{stdout}\n{stderr}")
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def test_demo_exits_cleanly_with_every_query_correct(demo_run):
    out, process, _ = demo_run
    assert process.returncode == 0, process.stdout + process.stderr
    report = json.loads((out / "report.json").read_text())
    assert (report["answered"], report["correct"], report["total"]) == (5, 5, 5)
    assert "queries answered: 5/5" in process.stdout
    assert "refinements correct: 1/1" in process.stdout
    assert re.search(r"3D boxes on target: (\d+)/\1 ", process.stdout)  # compared with truth
    # The best grasps against the true geometry (issue 36): all clear once the node reports them
    assert re.search(r"grasps: none reported|grasps clear: (\d+)/\1 ", process.stdout), \
        process.stdout
    for outcome in report["queries"]:
        if outcome["expected"] is not None:
            assert outcome["box_on_target"] is True, outcome
    assert len(list(out.glob("*_overlay.png"))) == 5
    # The demo runs without a model and says so: the summary, and each result in the bag.
    assert ("backends: llm offline, segmenter color (built-in demo backends: these answers are "
            "not from a model)") in process.stdout


def test_output_bag_holds_one_correct_result_per_query(demo_run):
    out, _, _ = demo_run
    truth = sample.load_ground_truth(sample.default_sample_dir())
    with Reader(out / "output_bag") as reader:
        for connection in reader.connections:  # ~/concepts/detections: the package's own type
            register_message_type(STORE, connection.msgtype)
        messages = [(c.topic, STORE.deserialize_cdr(d, c.msgtype)) for c, _, d in reader.messages()]
    results = [json.loads(m.data) for t, m in messages if t == "/sam3_agent/result"]
    masks = {}  # stamp -> the ~/mask images with that stamp, in order (a refinement shares one)
    for topic, msg in messages:
        if topic == "/sam3_agent/mask":
            masks.setdefault(_stamp(msg.header), []).append(
                msg.data.reshape(msg.height, msg.width) > 0)
    markers = {}  # stamp -> the ~/markers arrays with that stamp, in order
    for topic, msg in messages:
        if topic == "/sam3_agent/markers" and msg.markers:
            markers.setdefault(_stamp(msg.markers[0].header), []).append(msg.markers)

    answered = [truth.query_for(r["query_id"], r["query"]) for r in results]
    assert None not in answered
    assert sorted(q["data"] for q in answered) == sorted(q["data"] for q in truth.queries)

    frame_stamps = set(truth.stamps_ns.tolist())
    stamps_by_id = {}
    for result, query in zip(results, answered):
        stamp = result["stamp"]["sec"] * 1_000_000_000 + result["stamp"]["nanosec"]
        stamps_by_id[result["query_id"]] = stamp
        assert stamp in frame_stamps, result
        assert result["frame_id"] == sample.FRAME_ID
        assert result["backends"] == {"llm": "offline", "segmenter": "color"}
        assert result["refines"] == query["refines"]
        if query["query_id"] is not None:
            assert result["query_id"] == query["query_id"]
        if query["refines"] is not None:  # on the frame of the answer it refines
            assert stamp == stamps_by_id[query["refines"]], result
        if query["expected"] is None:
            assert result["status"] == "no_mask"
            continue
        assert result["status"] == "succeeded", result
        frame = truth.frame_index(stamp)
        iou = sample.mask_iou(masks[stamp].pop(0), truth.mask(frame, query["expected"]))
        assert iou >= 0.8, (query["query"], iou)
        position = result["masks"][0]["position"]
        error = np.subtract([position["x"], position["y"], position["z"]],
                            truth.position(frame, query["expected"]))
        assert np.linalg.norm(error) < 0.02, (query["query"], error)
        box = result["masks"][0]["box"]  # the truth is a top face: a reaching box by its own
        reaching = result["masks"][0].get("support") is not None
        errors = box_errors(truth.true_box(frame, query["expected"]),
                            *box_as_scored(box, reaching))
        assert errors.within(), (query["query"], errors.describe())
        # RViz: the answer's markers, stamped with its frame: a DELETEALL, a cube and a label,
        # then an arrow per grasp of the result (at most 5, namespace "grasps").
        drawn = markers[stamp].pop(0)
        boxes = [m for m in drawn[1:] if m.ns != "grasps"]
        assert [m.type for m in boxes] == [CUBE, TEXT_VIEW_FACING], query["query"]
        assert boxes[1].text == f"{result['query']} #1"
        arrows = [m for m in drawn[1:] if m.ns == "grasps"]
        assert [m.type for m in arrows] == [ARROW] * min(
            5, len(result["masks"][0].get("grasps") or [])), query["query"]


def test_output_bag_is_a_valid_rosbag2(demo_run):
    out, _, _ = demo_run
    bag = out / "output_bag"
    assert (bag / "metadata.yaml").is_file()
    with Reader(bag) as reader:
        types = {c.topic: c.msgtype for c in reader.connections}
        assert reader.message_count > 0
    assert types["/sam3_agent/result"] == "std_msgs/msg/String"
    assert types["/sam3_agent/overlay"] == "sensor_msgs/msg/Image"
    assert types["/sam3_agent/target"] == "geometry_msgs/msg/PointStamped"
    assert types["/sam3_agent/markers"] == "visualization_msgs/msg/MarkerArray"
    # Every output of the node, its own types and the concepts and follow topics included.
    assert types["/sam3_agent/concepts/detections"] == "sam3_agent_ros/msg/ConceptDetections"
    assert types["/sam3_agent/follow/status"] == "std_msgs/msg/String"


def test_demo_runs_on_the_exported_domain_id_without_a_deprecation_warning(demo_run):
    out, process, env = demo_run
    assert f"ROS_DOMAIN_ID={env['ROS_DOMAIN_ID']} (exported)" in process.stdout
    for text in (process.stdout, process.stderr, (out / "node.log").read_text()):
        assert "deprecated" not in text, text
