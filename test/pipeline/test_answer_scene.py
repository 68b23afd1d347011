"""An answer's grasp scene inside its 3D step (pipeline.answer_scene via measure_answer), on the
block tabletop: the selected mask's box reaches the table, the other candidates of the last
prompt become obstacles, the result JSON gains support and grasps, and with target_frame
everything is moved with the answer's one transform."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_demo.block_scene import INTRINSICS, close_pair
from sam3_agent_ros.config import DepthConfig
from sam3_agent_ros.core.types import Frame, Mask, QueryStatus, Result
from sam3_agent_ros.frames import Transform
from sam3_agent_ros.pipeline.measurement import SceneRequest, measure_answer
from sam3_agent_ros.pipeline.target_frame import TargetFrameRequest
from sam3_agent_ros.pipeline.three_d import PreparedDepth

NAMES = ("neighbour", "target", "flat")


class World:
    """Transforms: the camera's pose in the tabletop's world frame ("world")."""

    def __init__(self, scene):
        self.transform = Transform.from_matrix(scene.camera.world_from_camera())

    def lookup(self, target_frame, source_frame, stamp_ns, timeout_s):
        return self.transform, ""


@pytest.fixture(scope="module")
def tabletop():
    scene = close_pair()
    depth, masks = scene.render()
    return scene, depth, masks


def _result(depth, masks, selected=("target",)):
    height, width = depth.shape
    image = np.full((height, width, 3), 90, np.uint8)
    frame = Frame(image, 5, 0, "camera_color_optical_frame")
    candidates = [Mask.from_array(masks[name], 0.9, (0, 0, 1, 1)) for name in NAMES]
    chosen = [next(m for m, n in zip(candidates, NAMES) if n == name) for name in selected]
    return Result("q1", "the tall box", QueryStatus.SUCCEEDED, masks=chosen, frame=frame,
                  candidates=candidates)


def _answer(tabletop, target_frame=None, selected=("target",)):
    scene, depth, masks = tabletop
    result = _result(depth, masks, selected)
    prepared = PreparedDepth(depth, INTRINSICS, None, DepthConfig(enabled=True))
    request = (TargetFrameRequest("world", World(scene)) if target_frame else None)
    return scene, measure_answer(result, prepared, target_frame=request, scene=SceneRequest())


def test_the_box_reaches_the_table_and_the_json_says_so(tabletop):
    scene, answer = _answer(tabletop)
    entry = answer.result.to_json()["masks"][0]
    assert entry["box"]["size"]["z"] == pytest.approx(scene.blocks["target"].height, abs=0.01)
    assert answer.measurements[0].box.size[2] == pytest.approx(0.10, abs=0.01)
    assert entry["support"] is not None and entry["support_error"] is None
    normal, distance = scene.table_in_camera()
    assert entry["support"]["distance"] == pytest.approx(distance, abs=0.005)
    assert entry["grasp_error"] is None and entry["grasps"]
    assert [set(g) for g in entry["grasps"]] == [{"pose", "width", "score"}] * len(
        entry["grasps"])
    names = answer.scene.ids
    assert names == ("sam3_agent/target", "sam3_agent/obstacle_1", "sam3_agent/obstacle_2",
                     "sam3_agent/support")
    labels = set(np.unique(answer.scene.cloud.labels).tolist())
    assert labels == {0, 1}


def test_in_target_frame_everything_is_moved_once(tabletop):
    scene, answer = _answer(tabletop, target_frame=True)
    assert answer.target is not None and answer.target.ok
    target_box = answer.scene.objects[0].box
    block = scene.blocks["target"]
    # in the world frame the target's box stands on z = 0 with its known height
    assert target_box.center[2] == pytest.approx(block.height / 2, abs=0.01)
    assert target_box.size[2] == pytest.approx(block.height, abs=0.01)
    support = answer.scene.objects[-1].box
    assert support.center[2] == pytest.approx(-0.005, abs=0.005)
    entry = answer.result.to_json()["masks"][0]
    assert entry["target"]["box"]["size"]["z"] == pytest.approx(block.height, abs=0.01)
    assert entry["target"]["support"]["normal"]["z"] == pytest.approx(1.0, abs=0.01)
    assert entry["target"]["support"]["distance"] == pytest.approx(0.0, abs=0.005)
    cloud = answer.scene.cloud.points
    table = cloud[answer.scene.cloud.labels == 0]
    assert np.median(table[:, 2]) == pytest.approx(0.0, abs=0.01)  # world z
    for grasp in answer.scene.grasps:
        assert grasp.position[2] > 0.0


def test_several_selected_are_named_by_mask_id(tabletop):
    _, answer = _answer(tabletop, selected=("target", "flat"))
    assert answer.scene.ids[:2] == ("sam3_agent/target_1", "sam3_agent/target_2")
    assert "sam3_agent/obstacle_1" in answer.scene.ids
    entries = answer.result.to_json()["masks"]
    assert "grasps" in entries[0] and "grasps" not in entries[1]
    assert all(e["support"] is not None for e in entries)


def test_a_failing_grasp_scene_leaves_the_answer_and_says_why(tabletop, monkeypatch):
    """The scene raising (a bug, an odd depth image) costs the answer nothing but the scene:
    the boxes stay the measured ones, each mask says why it has no support, the first why it
    has no grasps, and nothing is published for the scene."""
    from sam3_agent_ros.pipeline import measurement

    def broken(*args, **kwargs):
        raise ValueError("an odd depth image")

    monkeypatch.setattr(measurement, "answer_scene", broken)
    _, answer = _answer(tabletop)
    entry = answer.result.to_json()["masks"][0]
    assert answer.result.status is QueryStatus.SUCCEEDED and entry["position"] is not None
    assert entry["support"] is None and "an odd depth image" in entry["support_error"]
    assert entry["grasps"] == [] and entry["grasp_error"] == entry["support_error"]
    assert answer.scene is None


def test_a_standing_concepts_detection_is_an_obstacle_and_the_target_is_not(tabletop):
    scene, depth, masks = tabletop
    result = _result(depth, masks)
    prepared = PreparedDepth(depth, INTRINSICS, None, DepthConfig(enabled=True))
    seen = []

    def neighbours(frame):  # as ConceptsControl.detections_on: the concepts on that frame
        seen.append(frame)
        return [Mask.from_array(masks["unsegmented"], 0.8, (0, 0, 1, 1)),
                Mask.from_array(masks["target"], 0.7, (0, 0, 1, 1))]  # the target itself

    answer = measure_answer(result, prepared, scene=SceneRequest(neighbours=neighbours))
    assert seen == [result.frame]
    assert answer.scene.ids == ("sam3_agent/target", "sam3_agent/obstacle_1",
                                "sam3_agent/obstacle_2", "sam3_agent/obstacle_3",
                                "sam3_agent/support")  # one more obstacle, no second target
    unnamed = answer.scene.objects[3].box
    block = scene.blocks["unsegmented"]
    assert unnamed.size[2] == pytest.approx(block.height, abs=0.01)  # reaching the table
    without = measure_answer(result, prepared, scene=SceneRequest())
    assert len(without.scene.ids) == 4
