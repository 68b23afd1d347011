"""console/views.py: the node's messages as the page shows them."""

from __future__ import annotations

import json
from types import SimpleNamespace as Obj

from sam3_agent_ros.console import views


def test_level_words():
    assert [views.level_word(v) for v in (b"\x00", b"\x01", b"\x02", b"\x03", 1, b"\x09",
                                          None)] == ["OK", "WARN", "ERROR", "STALE", "WARN",
                                                     "STALE", "STALE"]


def test_the_phases_of_one_query_accumulate_and_a_new_query_starts_over():
    shown = None
    for phase in ("queued", "thinking", "thinking", "segmenting", "done"):
        shown = views.status_view({"query_id": "q1", "phase": phase}, shown)
    assert shown["phases"] == ["queued", "thinking", "segmenting", "done"]
    assert views.status_view({"query_id": "q2", "phase": "queued"}, shown)["phases"] == [
        "queued"]


def test_a_result_keeps_boxes_positions_and_the_target():
    result = {"query_id": "q", "query": "cup", "status": "succeeded", "error": None,
              "masks": [{"id": 1, "score": 0.9, "bbox": [1, 2, 3, 4],
                         "position": {"x": 0.1, "y": 0.2, "z": 0.9},
                         "target": {"frame_id": "base_link", "position": {"x": 1, "y": 0, "z": 0},
                                    "box": {}}}]}
    view = views.result_view(views.json_text(json.dumps(result)))
    assert view["masks"][0]["bbox"] == [1, 2, 3, 4]
    assert view["masks"][0]["target"] == {"frame_id": "base_link",
                                          "position": {"x": 1, "y": 0, "z": 0}}
    assert views.json_text("[" * 5000) is None and views.json_text("[1]") is None


def test_health_keeps_the_nodes_statuses_and_marks_them_stale():
    msg = Obj(status=[Obj(name="/a/sam3_agent: frames", level=b"\x01", message="no frame"),
                      Obj(name="/other: frames", level=b"\x00", message="fine")])
    health = views.health_view(msg, "/a/sam3_agent")
    assert health == [{"name": "frames", "level": "WARN", "message": "no frame"}]
    stale = views.stale_health(health, 7.0)
    assert stale[0]["level"] == "STALE" and "no diagnostics for 7 s" in stale[0]["message"]


def test_detections():
    d = Obj(concept="cup", id=3, score=0.5, bbox=[1.0, 2.0, 3.0, 4.0], position_valid=False,
            position=None)
    view = views.detections_view(Obj(header=Obj(frame_id="cam"), detections=[d]))
    assert view["detections"] == [{"concept": "cup", "id": 3, "score": 0.5,
                                   "bbox": [1.0, 2.0, 3.0, 4.0], "position": None}]
