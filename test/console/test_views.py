"""console/views.py: the node's messages as the page shows them."""

from __future__ import annotations

import json
from types import SimpleNamespace as Obj

import pytest

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


def test_detections():
    d = Obj(concept="cup", id=3, score=0.5, bbox=[1.0, 2.0, 3.0, 4.0], position_valid=False,
            position=None)
    view = views.detections_view(Obj(header=Obj(frame_id="cam"), detections=[d]))
    assert view["detections"] == [{"concept": "cup", "id": 3, "score": 0.5,
                                   "bbox": [1.0, 2.0, 3.0, 4.0], "position": None}]


def test_a_new_querys_status_never_carries_the_previous_querys_reasoning():
    """Issue 33: the previous query's reasoning sat under a new query's "thinking" (the node
    sends no reasoning while it thinks). Within one query the last reasoning stays."""
    shown = views.status_view({"query_id": "q1", "phase": "segmenting", "reasoning": "[2] is it"})
    shown = views.status_view({"query_id": "q1", "phase": "thinking", "reasoning": None}, shown)
    assert shown["reasoning"] == "[2] is it"  # the same query, still its words
    shown = views.status_view({"query_id": "q2", "phase": "thinking", "reasoning": None}, shown)
    assert shown["reasoning"] == ""


def test_missing_3d_shows_the_reason_and_a_target_without_position_is_no_target():
    """Issue 33: ``"target": {"frame_id": "base_link", "position": null}`` was shown as
    "in base_link: null"; a mask without 3D shows the node's reason beside it."""
    masks = [{"id": 1, "score": 0.9, "bbox": [1, 2, 3, 4], "position": None,
              "position_error": "no depth frame within depth.max_stamp_diff_s=0.05 s",
              "target": None, "target_error": "no transform base_link <- camera"},
             {"id": 2, "score": 0.8, "bbox": [1, 2, 3, 4], "position": {"x": 0.1, "y": 0, "z": 1},
              "target": {"frame_id": "base_link", "position": None, "box": None},
              "target_error": None},
             {"id": 3, "score": 0.7, "bbox": [1, 2, 3, 4], "position": None}]
    view = views.result_view({"query_id": "q", "status": "succeeded", "masks": masks})
    first, second, third = view["masks"]
    assert first["target"] is None and first["target_error"] == "no transform base_link <- camera"
    assert first["position_error"].startswith("no depth frame within")
    assert second["target"] is None and "no position in base_link" in second["target_error"]
    assert third["position_error"] == "no position (the node gave no reason)"


def test_non_finite_numbers_never_reach_a_page_and_a_bad_result_is_an_error_line():
    """Issue 33/34: a result holding a bare ``Infinity`` (what ``json.dumps`` writes for an
    overflowed transform) made the page's ``JSON.parse`` throw: the answer never showed."""
    text = ('{"query_id": "q-9", "status": "succeeded", "masks": [{"id": 1, "score": 0.9, '
            '"bbox": [1, 2, 3, 4], "position": {"x": 0.1, "y": 0.2, "z": 0.9}, '
            '"target": {"frame_id": "base_link", "position": {"x": Infinity, "y": NaN, '
            '"z": 1e999}}}]}')
    value, problem, non_finite = views.read_json(text)
    assert problem is None and non_finite == ["masks[0].target.position.x",
                                              "masks[0].target.position.y",
                                              "masks[0].target.position.z"]
    view = views.result_view(value, non_finite)
    assert view["masks"][0]["target"] is None and "not finite" in view["warning"]
    strict = views.page_json({"state": {"result": view, "raw": float("inf")}})
    json.loads(strict, parse_constant=lambda name: pytest.fail(f"{name} sent to the page"))
    bad = views.unreadable_result(views.read_json("{not json")[1], "{not json")
    assert bad["status"] == "unreadable" and "cannot read" in bad["error"]


def test_the_reasonings_candidate_numbers_are_written_as_the_results_mask_ids():
    """Issue 33: the reasoning said "[2]" where the Result said "mask 1"."""
    result = views.result_view({"query_id": "q", "status": "succeeded", "masks": [
        {"id": 1, "candidate": 2, "score": 0.9, "bbox": [0, 0, 1, 1]},
        {"id": 2, "candidate": 4, "score": 0.8, "bbox": [0, 0, 1, 1]}]})
    candidates = views.candidate_ids(result)
    assert candidates == {2: 1, 4: 2}
    text = "[2] is the leftmost blue one; mask 4 too, not [3]."
    shown = views.renumbered(text, candidates)
    assert shown == ("[mask 1] is the leftmost blue one; mask 2 too, not "
                     "[candidate 3, not in the answer].")
    assert views.renumbered(text, {}) == text


def test_the_best_grasp_or_why_there_is_none_is_shown():
    """issue 36: the Result panel shows the answer's best grasp (width, score, position), or
    its grasp_error; a mask the node planned no grasps for shows neither."""
    pose = {"position": {"x": 0.4, "y": -0.1, "z": 0.05},
            "orientation": {"x": 0, "y": 0.7071, "z": 0, "w": 0.7071}}
    masks = [{"id": 1, "score": 0.9, "bbox": [1, 2, 3, 4],
              "grasps": [{"pose": pose, "width": 0.057, "score": 0.81},
                         {"pose": pose, "width": 0.06, "score": 0.5}]},
             {"id": 2, "score": 0.8, "bbox": [1, 2, 3, 4], "grasps": [],
              "grasp_error": "no side of the object fits the gripper"},
             {"id": 3, "score": 0.7, "bbox": [1, 2, 3, 4]},
             {"id": 4, "score": 0.6, "bbox": [1, 2, 3, 4], "grasps": [{"width": 0.05}]}]
    first, second, third, fourth = views.result_view(
        {"query_id": "q", "status": "succeeded", "masks": masks})["masks"]
    assert first["grasp"] == {"width": 0.057, "score": 0.81,
                              "position": {"x": 0.4, "y": -0.1, "z": 0.05}, "count": 2}
    assert first["grasp_error"] == ""
    assert second["grasp"] is None and second["grasp_error"].startswith("no side of the")
    assert third["grasp"] is None and third["grasp_error"] == ""
    assert fourth["grasp"] is None and "without a position" in fourth["grasp_error"]
