"""The grasp scene's builders (ros/messages/scene.py) and their place in an answer's messages
and the outputs room: REMOVE of the previous answer's ids before the ADDs, ids stable across
answers, BOX primitives of the boxes' sizes, the labelled cloud's fields."""

from __future__ import annotations

import numpy as np
import pytest
from moveit_msgs.msg import CollisionObject
from sensor_msgs.msg import PointField
from shape_msgs.msg import SolidPrimitive
from std_msgs.msg import Header
from visualization_msgs.msg import Marker

from sam3_agent_demo.block_scene import INTRINSICS, close_pair
from sam3_agent_ros.config import Config, DepthConfig
from sam3_agent_ros.core.types import Frame, Mask, QueryStatus, Result
from sam3_agent_ros.geometry.box import Box3D
from sam3_agent_ros.geometry.grasps import Grasp
from sam3_agent_ros.geometry.scene_cloud import ScenePoints, pack_scene
from sam3_agent_ros.pipeline.answer_scene import AnswerScene, SceneObject
from sam3_agent_ros.pipeline.measurement import SceneRequest, measure_answer
from sam3_agent_ros.pipeline.three_d import PreparedDepth
from sam3_agent_ros.ros.messages.answer import answer_messages
from sam3_agent_ros.ros.messages.scene import collision_objects, grasp_markers, scene_messages
from sam3_agent_ros.ros.outputs import NodeOutputs
from sam3_agent_ros.ros.qos import LATCHED_OUTPUT_QOS
from test.ros.test_output_room import FakeNode

HEADER = Header(frame_id="base_link")


def _scene(names=("sam3_agent/target", "sam3_agent/obstacle_1", "sam3_agent/support")):
    boxes = [Box3D((0.1 * k, 0.0, 0.05), (0.06, 0.05, 0.10 - 0.01 * k), (0.0, 0.0, 0.0, 1.0))
             for k in range(len(names))]
    cloud = ScenePoints(pack_scene(np.array([[0, 0, 0], [1, 2, 3]], np.float32),
                                   np.array([[255, 0, 0], [0, 0, 255]], np.uint8),
                                   np.array([0, 1], np.uint32)))
    grasps = (Grasp((0.0, 0.0, 0.2), (0.0, 0.7071068, 0.0, 0.7071068), 0.05, 0.9, 0.02, "top"),
              Grasp((0.0, 0.0, 0.1), (0.0, 0.0, 0.0, 1.0), 0.06, 0.4, 0.015, "side"))
    return AnswerScene(tuple(SceneObject(n, b) for n, b in zip(names, boxes)), cloud, grasps)


def test_removes_of_the_previous_ids_come_first_then_the_adds():
    scene = _scene()
    first = collision_objects(HEADER, scene)
    assert [o.operation for o in first] == [CollisionObject.ADD] * 3
    second = collision_objects(HEADER, scene, [o.id for o in first])
    assert [(o.operation, o.id) for o in second] == [
        (CollisionObject.REMOVE, "sam3_agent/target"),
        (CollisionObject.REMOVE, "sam3_agent/obstacle_1"),
        (CollisionObject.REMOVE, "sam3_agent/support"),
        (CollisionObject.ADD, "sam3_agent/target"),
        (CollisionObject.ADD, "sam3_agent/obstacle_1"),
        (CollisionObject.ADD, "sam3_agent/support")]
    assert all(o.header.frame_id == "base_link" for o in second)
    assert collision_objects(HEADER, None, ["sam3_agent/target"])[0].operation == \
        CollisionObject.REMOVE


def test_each_object_is_one_box_primitive_of_its_size_at_its_pose():
    scene = _scene()
    for obj, message in zip(scene.objects, collision_objects(HEADER, scene)):
        assert len(message.primitives) == 1 and message.primitives[0].type == SolidPrimitive.BOX
        assert list(message.primitives[0].dimensions) == pytest.approx(list(obj.box.size))
        assert (message.pose.position.x, message.pose.position.z) == pytest.approx(
            (obj.box.center[0], obj.box.center[2]))
        assert message.pose.orientation.w == pytest.approx(1.0)


def test_the_cloud_has_xyz_rgb_and_a_uint32_label_and_the_grasps_their_order():
    messages = scene_messages(HEADER, _scene())
    cloud = messages.scene_points
    assert [(f.name, f.offset, f.datatype) for f in cloud.fields] == [
        ("x", 0, PointField.FLOAT32), ("y", 4, PointField.FLOAT32), ("z", 8, PointField.FLOAT32),
        ("rgb", 12, PointField.FLOAT32), ("label", 16, PointField.UINT32)]
    assert cloud.width == 2 and cloud.point_step == 20 and cloud.row_step == 40
    labels = np.frombuffer(bytes(cloud.data), np.uint8).reshape(2, 20)[:, 16:20].view("<u4")
    assert labels[:, 0].tolist() == [0, 1]
    assert [p.position.z for p in messages.grasps.poses] == pytest.approx([0.2, 0.1])
    assert messages.grasps.header.frame_id == "base_link"


def test_the_grasps_are_arrows_ending_where_the_jaws_close():
    arrows = grasp_markers(HEADER, _scene().grasps)
    assert [(m.ns, m.id, m.type) for m in arrows] == [("grasps", 1, Marker.ARROW),
                                                       ("grasps", 2, Marker.ARROW)]
    top = arrows[0]  # approach (pose x) straight down: the arrow starts 8 cm above
    assert (top.pose.position.x, top.pose.position.z) == pytest.approx((0.0, 0.28), abs=1e-6)
    assert top.color.g > arrows[1].color.g  # the better, the greener


@pytest.fixture(scope="module")
def tabletop():
    scene = close_pair()
    return scene.render()


def _answer(tabletop, selected=("target",)):
    depth, found = tabletop
    height, width = depth.shape
    candidates = [Mask.from_array(found[n], 0.9, (0, 0, 1, 1))
                  for n in ("target", "neighbour", "flat")]
    chosen = [candidates[("target", "neighbour", "flat").index(n)] for n in selected]
    result = Result("q", "the tall box", QueryStatus.SUCCEEDED, masks=chosen,
                    frame=Frame(np.full((height, width, 3), 90, np.uint8), 3, 0, "cam"),
                    candidates=candidates)
    return measure_answer(result, PreparedDepth(depth, INTRINSICS, None, DepthConfig()),
                          scene=SceneRequest())


def test_the_room_removes_the_last_answers_ids_and_keeps_them_stable(tabletop):
    node = FakeNode()
    outputs = NodeOutputs(node, Config.from_params({"depth.enabled": True}), concept_types=None)
    publisher = node.created["~/collision_objects"]
    outputs.publish_answer(_answer(tabletop))
    first = [(o.operation, o.id) for o in publisher.sent]
    assert first == [(CollisionObject.ADD, "sam3_agent/target"),
                     (CollisionObject.ADD, "sam3_agent/obstacle_1"),
                     (CollisionObject.ADD, "sam3_agent/obstacle_2"),
                     (CollisionObject.ADD, "sam3_agent/support")]
    publisher.sent.clear()
    outputs.publish_answer(_answer(tabletop, selected=("target", "flat")))
    second = [(o.operation, o.id) for o in publisher.sent]
    assert second[:4] == [(CollisionObject.REMOVE, name) for _, name in first]
    assert second[4:] == [(CollisionObject.ADD, "sam3_agent/target_1"),
                          (CollisionObject.ADD, "sam3_agent/target_2"),
                          (CollisionObject.ADD, "sam3_agent/obstacle_1"),
                          (CollisionObject.ADD, "sam3_agent/support")]
    assert len(node.created["~/grasps"].sent) == 2
    markers = node.created["~/markers"].sent[0].markers
    assert [m.ns for m in markers].count("grasps") == len(node.created["~/grasps"].sent[0].poses)


def test_scene_outputs_off_build_nothing(tabletop):
    messages = answer_messages(_answer(tabletop)).outputs()
    assert messages["collision_objects"] is None and messages["grasps"] is None
    off = NodeOutputs(FakeNode(), Config.from_params({"depth.enabled": True,
                                                       "scene.enabled": False}),
                      concept_types=None)
    assert "~/collision_objects" not in off.names and "~/grasps" not in off.names


def test_the_collision_objects_are_latched():
    assert LATCHED_OUTPUT_QOS.depth == 32
    assert LATCHED_OUTPUT_QOS.durability.name == "TRANSIENT_LOCAL"
    assert LATCHED_OUTPUT_QOS.reliability.name == "RELIABLE"
