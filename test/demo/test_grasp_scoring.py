"""The demo's "grasps clear: n/n": the result's best grasp against the sample's true geometry
(grasp_scoring, tabletop_scoring; pure)."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_demo import grasp_scoring, sample, tabletop_scoring
from sam3_agent_demo.report import DemoReport
from sam3_agent_ros.geometry.rotations import matrix_to_quaternion

FRAME = 20
# A top-down grasp in the camera frame (looking down at the table): x (the approach) along the
# camera's z, y (the closing direction) along its y.
DOWN = np.column_stack([(0.0, 0.0, 1.0), (0.0, 1.0, 0.0), (-1.0, 0.0, 0.0)])


@pytest.fixture(scope="module")
def truth():
    return sample.load_ground_truth(sample.default_sample_dir())


def top_down(truth, name, below_top_m, width=0.055):
    """A top-down grasp over ``name``'s top face, its pose ``below_top_m`` under the face."""
    top = np.asarray(truth.true_box(FRAME, name).center)
    position = top + below_top_m * DOWN[:, 0]
    return {"pose": {"position": dict(zip("xyz", position.tolist())),
                     "orientation": dict(zip("xyzw", matrix_to_quaternion(DOWN)))},
            "width": width, "score": 0.8}


def scored(truth, name, mask_fields):
    stamp = int(truth.stamps_ns[FRAME])
    position = dict(zip("xyz", truth.position(FRAME, name).tolist()))
    result = {"status": "succeeded", "stamp": {"sec": stamp // 10**9, "nanosec": stamp % 10**9},
              "masks": [{"id": 1, "bbox": [1, 2, 3, 4], "position": position, **mask_fields}]}
    outcome = tabletop_scoring.QueryOutcome(f"the {name}", "q", name, result_count=1)
    tabletop_scoring.score_outcome(outcome, result, truth, truth.mask(FRAME, name))
    return outcome


def test_the_true_boxes_reach_the_table(truth):
    solids = grasp_scoring.true_solids(truth, FRAME)
    table = grasp_scoring.table_depth(truth, FRAME)
    assert set(solids) == set(truth.names) and table is not None
    for name, solid in solids.items():  # every object's box stands on the table
        foot = solid.centre[2] + solid.reach(np.array([0.0, 0.0, 1.0]))
        assert foot == pytest.approx(table, abs=0.005), name


def test_a_grasp_clear_of_everything_inside_a_neighbour_or_the_table(truth):
    height = next(o["height_m"] for o in truth.objects if o["name"] == "red_cylinder")
    clear = scored(truth, "red_cylinder",
                   {"grasps": [top_down(truth, "red_cylinder", 0.5 * (height - 0.01))]})
    assert clear.grasp_clear is True, clear
    assert clear.grasp_above_table_cm == pytest.approx(1.0, abs=0.05)
    assert clear.grasp_nearest_cm > 1.0
    into_table = scored(truth, "red_cylinder",
                        {"grasps": [top_down(truth, "red_cylinder", height + 0.01)]})
    assert into_table.grasp_clear is False and into_table.grasp_above_table_cm < 0
    # The target's grasp placed over another object: its fingers are in that object's box.
    other = top_down(truth, "blue_cylinder", 0.01)
    inside = scored(truth, "red_cylinder", {"grasps": [other]})
    assert inside.grasp_clear is False and inside.grasp_nearest_cm == pytest.approx(0.0)
    none = scored(truth, "red_box", {"grasps": [], "grasp_error": "no side of the object fits"})
    lines = tabletop_scoring.format_summary(DemoReport([clear, into_table, inside, none]))
    assert any(line.startswith("grasps clear: 1/3 ") for line in lines), lines
    assert "  'the red_box': no grasp: no side of the object fits" in lines
    assert sum("NOT CLEAR" in line for line in lines) == 2


def test_results_without_grasps_say_none_reported(truth):
    outcome = scored(truth, "red_cylinder", {})
    assert outcome.correct and outcome.grasp_clear is None and not outcome.grasps_reported
    lines = tabletop_scoring.format_summary(DemoReport([outcome]))
    assert "grasps: none reported (no result has a grasps field)" in lines
    assert not any(line.startswith("grasps clear") for line in lines)


@pytest.mark.parametrize("name", ["red_cylinder", "yellow_ellipse"])  # the two that fit
def test_the_planners_own_grasps_on_a_sample_frame_score_clear(truth, name):
    """The planner (geometry.grasp_scene) on the sample's frame FRAME, every object segmented
    exactly, ``name`` the target: its best grasp, as the result JSON gives it, is clear of the
    true geometry (so the gripper the scoring rebuilds from the JSON is the planner's)."""
    from sam3_agent_ros.geometry.box import fit_box
    from sam3_agent_ros.geometry.grasp_scene import grasp_scene

    spec = sample.SampleSpec()
    frame = sample.render_frame(spec.frame_times()[FRAME], spec)
    assert int(truth.stamps_ns[FRAME]) == sample.stamp_ns(spec.frame_times()[FRAME])
    k = frame.intrinsics
    intrinsics = (k.fx, k.fy, k.cx, k.cy)
    names = [name, *(n for n in truth.names if n != name)]
    masks = [frame.masks[n] for n in names]
    boxes = [fit_box(mask, frame.depth_m, intrinsics).box for mask in masks]
    scene = grasp_scene(masks, boxes, frame.depth_m, intrinsics, selected=[0],
                        mask_ids=list(range(1, len(masks) + 1)), rgb=frame.rgb)
    assert scene.grasps is not None and scene.grasps.grasps, scene.error or scene.grasps
    best = scene.grasps.grasps[0].to_json()
    check = grasp_scoring.check_grasp(best, truth, FRAME, name, 0.01, 0.08)
    assert check is not None and check.clear, check
