"""console/panels.py: every region reset or marked stale when what it shows is no longer
current (issue 33), driven with a fake clock and a real Hub."""

from __future__ import annotations

import json

from sam3_agent_ros.console import panels as panels_module
from sam3_agent_ros.console.hub import Feed, Hub
from sam3_agent_ros.console.panels import Panels


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make() -> tuple[Panels, Hub, Clock]:
    hub, clock = Hub(), Clock()
    return Panels(hub, clock), hub, clock


def result(query_id: str, status: str = "succeeded", masks=None, stamp=(5, 0)) -> str:
    masks = [{"id": 1, "candidate": 2, "score": 0.9, "bbox": [1, 2, 3, 4]}] \
        if masks is None else masks
    return json.dumps({"query_id": query_id, "query": "cup", "status": status, "masks": masks,
                       "stamp": {"sec": stamp[0], "nanosec": stamp[1]}})


def new_page(hub: Hub) -> tuple[dict, dict]:
    feed = Feed(lambda: None)
    hub.attach(feed)
    return hub.take(feed)


def test_a_new_query_starts_without_the_previous_reasoning_and_marks_the_result_earlier():
    panels, hub, _ = make()
    panels.status({"query_id": "q1", "phase": "segmenting", "reasoning": "[2] is it"})
    panels.result_text(result("q1"))
    panels.status({"query_id": "q2", "phase": "thinking", "reasoning": None})
    assert hub.get("status")["reasoning"] == ""
    assert "a newer query (q2) is running" in hub.get("result")["stale"]


def test_once_the_result_is_in_the_reasoning_uses_its_mask_ids():
    panels, hub, _ = make()
    panels.status({"query_id": "q1", "phase": "examining", "reasoning": "mask 2 is the cup"})
    panels.result_text(result("q1"))
    assert hub.get("status")["reasoning"] == "mask 1 is the cup"
    panels.status({"query_id": "q1", "phase": "done", "reasoning": None})  # after the result
    assert hub.get("status")["reasoning"] == "mask 1 is the cup"  # renumbered once, not twice


def test_a_cancelled_query_drops_the_previous_overlay_and_an_answer_gets_its_own():
    panels, hub, _ = make()
    panels.answer_overlay((5, 0), b"\xff\xd8\xff first")
    panels.result_text(result("q1", stamp=(5, 0)))
    assert hub.has_image("answer")
    panels.result_text(result("q2", status="cancelled", masks=[], stamp=(6, 0)))
    assert not hub.has_image("answer")
    assert "answer" not in new_page(hub)[1]  # a tab opened now never sees it either
    # a correction on the same frame: its overlay, not the first answer's, arrives after it
    panels.result_text(result("q3", stamp=(5, 0)))
    assert not hub.has_image("answer")  # the first overlay was used once, by q1
    panels.answer_overlay((5, 0), b"\xff\xd8\xff third")
    assert new_page(hub)[1]["answer"] == b"\xff\xd8\xff third"


def test_concepts_switched_off_clear_the_detections_for_new_tabs_too():
    panels, hub, clock = make()
    panels.concepts(["cup"])
    panels.detections({"frame_id": "cam", "detections": [{"concept": "cup", "id": 1}]})
    panels.concepts_overlay(b"\xff\xd8\xff concepts")
    panels.concepts([])  # by this console, or by anyone (the parameter is watched)
    panels.detections({"frame_id": "cam", "detections": [{"concept": "cup", "id": 1}]})  # late
    state, images = new_page(hub)
    assert state["detections"]["detections"] == [] and state["detections"]["state"] == "off"
    assert "concepts" not in images


def test_detections_that_stop_coming_are_marked_stale():
    panels, hub, clock = make()
    panels.concepts(["cup"])
    panels.detections({"frame_id": "cam", "detections": [{"concept": "cup", "id": 1}]})
    clock.now += panels_module.DETECTIONS_STALE_S + 1
    panels.tick()
    shown = hub.get("detections")
    assert shown["state"] == "stale" and "no detections for 6 s" in shown["message"]
    assert shown["detections"] == [{"concept": "cup", "id": 1}]  # still shown, said so


def test_a_stopped_camera_is_no_longer_live_and_none_is_said():
    panels, hub, clock = make()
    panels.camera_topic("/camera/color/image_raw", "raw")
    assert hub.get("camera")["state"] == "waiting"
    panels.live_frame(b"\xff\xd8\xff live")
    assert hub.get("camera") == {"state": "live", "topic": "/camera/color/image_raw",
                                 "kind": "raw", "message": "live from /camera/color/image_raw"}
    clock.now += panels_module.LIVE_STALE_S + 1
    panels.tick()
    assert hub.get("camera")["state"] == "stale"
    assert "no frame from /camera/color/image_raw for 4 s" in hub.get("camera")["message"]
    panels.camera_topic("", "", "the node subscribes no image topic (not active yet?)")
    assert hub.get("camera")["state"] == "none" and not hub.has_image("live")


def test_a_result_the_console_cannot_read_is_an_error_line():
    panels, hub, _ = make()
    panels.result_text('{"query_id": "q", "masks": [')
    shown = hub.get("result")
    assert shown["status"] == "unreadable" and "cannot read" in shown["error"]
