"""Issue 17 attacks on a running node, each as a plain rclpy peer would send it (DDS on loopback).

One node for the module (/bounds1: offline backends, compressed frames, max_query_chars raised so
the JSON guards themselves are exercised, action.result_timeout_s 4, one result with images):
- a decompression bomb on the image topic: its query fails from the PNG header, no memory spike;
- pathological query JSON: exactly one failed result each;
- an id with a newline: no forged log line; a 1 MB goal: aborted, not logged in full;
- finished goal results lose their images past action.max_results_with_images and expire after
  action.result_timeout_s.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from pathlib import Path

import pytest
from action_msgs.msg import GoalStatus
from sensor_msgs.msg import CompressedImage
from std_msgs.msg import String

from sam3_agent_demo.scene import render_scene
from sam3_agent_ros.action import Segment
from test.ros.helpers import Camera, Harness, NodeProcess, png_message

NS = "/bounds1"
CONFIG = {"image_transport": "compressed", "image_qos": "reliable", "max_query_chars": 20_000,
          "frame_wait_s": 2.0, "action": {"result_timeout_s": 4, "max_results_with_images": 1}}
QUERY = "the leftmost blue object"
WAIT_S = 30.0


@pytest.fixture(scope="module")
def ros(ros_env, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bounds_node")
    proc = NodeProcess(NS, CONFIG, tmp, dict(os.environ, **ros_env))
    harness = Harness("sam3_agent_bounds_test")
    try:
        harness.listen(f"{NS}/sam3_agent/result", String)
        harness.wait_state(proc.name, "active", timeout=60)
        harness.wait_subscribed(f"{NS}/query")
        yield harness, proc
    finally:
        proc.stop()
        harness.close()


def peak_rss_mib(pid: int) -> float:
    """VmHWM: the process's peak resident set so far."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_a_decompression_bomb_frame_fails_its_query_without_a_memory_spike(ros, png_bomb_file):
    """The issue's 389 kB PNG declaring 20000x20000 (decoded: 1.2 GB, peak RSS 2.4 GB)."""
    harness, proc = ros
    bomb = CompressedImage(format="png")
    bomb.data = png_bomb_file.read_bytes()
    before = peak_rss_mib(proc.process.pid)
    with Camera(harness, f"{NS}/image/compressed", bomb, rate_hz=5.0, stamp_base=9000):
        harness.wait_for(lambda: "unusable frame on the image topic" in proc.log(), WAIT_S,
                         "the image callback's warning")
        harness.send_query(NS, {"id": "bomb", "query": QUERY})
        result = harness.wait_result(NS, "bomb")
    assert result["status"] == "failed"
    assert result["error"] == ("unusable frame: compressed image declares 20000x20000 = "
                               "400000000 pixels, more than max_image_pixels=40000000 (not "
                               "decoded)")
    assert result["stamp"]["sec"] > 9000  # names the frame it refers to
    assert "compressed image declares 20000x20000" in proc.log()
    after = peak_rss_mib(proc.process.pid)
    assert after < before + 100, (before, after)  # decoding it would add 1200+ MiB
    assert proc.process.poll() is None


_markers = itertools.count()


def _new_results(harness: Harness, send) -> list[dict]:
    """Send something, then a marker query that the node refuses at once (results of refused
    messages are published in arrival order); the results in between."""
    before = len(harness.results(NS))
    send()
    marker = f"marker-{next(_markers)}"
    harness.send_query(NS, {"id": marker})  # no "query" field
    harness.wait_result(NS, marker)
    found = harness.results(NS)[before:]
    return [r for r in found if r["query_id"] != marker]


@pytest.mark.parametrize("text,reason", [
    ('{"query": ' + "[" * 1500, "invalid JSON query: nested more than 32 levels deep"),
    ('{"id": ' + "9" * 5000 + ', "query": "x"}', "invalid JSON query: a number of 5000 digits"),
    ('{"id": "no-text", "text": "the red cup"}', 'it needs a "query" field with the text, e.g. '
                                                 '{"id": "q-1", "query": "the red cup"}'),
], ids=["1500-deep", "5000-digit-id", "no-query-field"])
def test_pathological_query_json_gets_exactly_one_failed_result(ros, text, reason):
    harness, proc = ros
    found = _new_results(harness, lambda: harness.send_query(NS, text))
    assert len(found) == 1, found
    assert found[0]["status"] == "failed" and reason in found[0]["error"]
    assert len(found[0]["query"]) <= 200
    assert "query callback failed" not in proc.log()
    assert proc.process.poll() is None


def test_a_query_id_with_a_newline_cannot_forge_a_log_line(ros):
    harness, proc = ros
    scene = render_scene()
    forged = "[ERROR] [1700000000.000000000] [bounds1.sam3_agent]: forged line"
    query_id = f"evil\n{forged}"
    with Camera(harness, f"{NS}/image/compressed", png_message(scene.rgb)):
        harness.send_query(NS, {"id": query_id, "query": QUERY})
        result = harness.wait_result(NS, query_id)
    assert result["status"] == "succeeded" and result["query_id"] == query_id
    harness.wait_for(lambda: "evil\\n[ERROR]" in proc.log(), WAIT_S, "the escaped id in the log")
    assert not any(line.startswith(forged) for line in proc.log().splitlines())
    long_id = "i" * 129
    found = _new_results(harness, lambda: harness.send_query(NS, {"id": long_id, "query": "x"}))
    assert len(found) == 1 and "'id' is 129 characters long, more than 128" in found[0]["error"]
    assert found[0]["query_id"].startswith("q-")


class Goals:
    """A raw ActionClient on the harness (its executor spins it)."""

    def __init__(self, harness: Harness):
        self.client = harness.action_client(Segment, f"{NS}/sam3_agent/segment")
        assert self.client.wait_for_server(timeout_sec=WAIT_S)
        harness.wait_outputs_reach_us(NS)  # the goal response reaches this new client

    @staticmethod
    def wait(future):
        done = threading.Event()
        future.add_done_callback(lambda _: done.set())
        assert done.wait(WAIT_S), "timed out"
        return future.result()

    def send(self, query: str, query_id: str = ""):
        handle = self.wait(self.client.send_goal_async(Segment.Goal(query=query,
                                                                    query_id=query_id)))
        assert handle.accepted
        return handle, self.wait(handle.get_result_async())


def test_a_megabyte_goal_is_aborted_and_never_logged_in_full(ros):
    harness, proc = ros
    log_size = len(proc.log())
    handle, response = Goals(harness).send("blue " * 200_000, "huge-goal")
    assert response.status == GoalStatus.STATUS_ABORTED
    assert response.result.error == ("query is 1000000 characters long, more than "
                                     "max_query_chars=20000")
    assert len(json.loads(response.result.result_json)["query"]) <= 200
    harness.wait_for(lambda: "huge-goal" in proc.log()[log_size:], WAIT_S, "the goal's log lines")
    time.sleep(0.5)  # let the node write whatever else it logs about the goal
    assert len(proc.log()) - log_size < 5_000


def test_finished_results_keep_images_for_the_latest_goal_only_then_expire(ros):
    """A goal flood cannot pin images: past action.max_results_with_images (1 here) a kept
    result loses its mask and labels (a client waiting for it got them whole), and every result
    is gone after action.result_timeout_s (4 s here; rclpy's own default is 10 s on Kilted, 900 s
    before)."""
    harness, _ = ros
    goals = Goals(harness)
    scene = render_scene()
    with Camera(harness, f"{NS}/image/compressed", png_message(scene.rgb)):
        first, first_response = goals.send(QUERY, "kept-1")
        second, second_response = goals.send(QUERY, "kept-2")
    finished = time.monotonic()
    for response in (first_response, second_response):  # waiting clients: whole results
        assert response.status == GoalStatus.STATUS_SUCCEEDED
        assert response.result.mask.width == 640 and len(response.result.labels.data) > 0
    late_first = goals.wait(first.get_result_async())  # late clients
    late_second = goals.wait(second.get_result_async())
    assert late_first.status == late_second.status == GoalStatus.STATUS_SUCCEEDED
    assert len(late_first.result.mask.data) == len(late_first.result.labels.data) == 0
    assert late_first.result.mask.header.frame_id == "camera"  # the header stays
    assert json.loads(late_first.result.result_json)["status"] == "succeeded"
    assert len(late_first.result.masks) == 1
    assert len(late_second.result.mask.data) == 640 * 480
    statuses = []
    while time.monotonic() - finished < 9.0:
        statuses.append(goals.wait(second.get_result_async()).status)
        if statuses[-1] == GoalStatus.STATUS_UNKNOWN:
            break
        time.sleep(0.25)
    assert statuses[-1] == GoalStatus.STATUS_UNKNOWN, statuses  # expired, freed
