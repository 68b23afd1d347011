"""The grasp scene over the whole node (issue 36, CONTRACTS §12).

sam3_agent_node (offline LLM and colour segmenter, depth on, ``target_frame: table``) in a
subprocess, fed the block tabletop of known geometry (``sam3_agent_demo.block_scene.close_pair``:
a 10 cm box between a blue neighbour 1.5 cm to its right and a green one 1.5 cm to its left,
both touching distance for a gripper, a flat red box in front) like a camera driver (colour,
exact 32FC1 depth, camera_info) with the camera's pose on ``/tf_static``. Two queries: "the
leftmost blue object" (the 10 cm box; the other blue one is the obstacle), then "the rightmost
blue object" (the 8 cm neighbour, 8 cm across its narrow side: no grasp fits the
gripper's 8 cm, and the result says so). Checked: each box's height within 1 cm, the REMOVE/ADD
sequence and ids on ``~/collision_objects`` across the two answers, the labelled cloud, the
grasps on ``~/grasps`` and in the result, and that no grasp's fingers enter a block or the
table (the true geometry, the fingers taken as long as they can be).
"""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest
from geometry_msgs.msg import PoseArray, TransformStamped
from moveit_msgs.msg import CollisionObject
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image, PointCloud2
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage

from sam3_agent_demo.block_scene import HEIGHT, INTRINSICS, WIDTH, close_pair
from sam3_agent_ros.geometry.grasps import Grasp, Gripper, gripper_boxes
from sam3_agent_ros.geometry.rotations import matrix_to_quaternion
from sam3_agent_ros.ros.conversions import rgb8_image

NS = "/grasp_scene_robot"
NODE = f"{NS}/sam3_agent"
COLOUR_FRAME = "camera_color_optical_frame"
TABLE = "table"
COLOURS = {"target": (40, 70, 200), "neighbour": (40, 70, 200), "unsegmented": (40, 160, 60),
           "flat": (200, 40, 40)}
TABLE_RGB = (185, 175, 160)
CLEARANCE_M, MAX_WIDTH_M = 0.01, 0.08
DEEP = QoSProfile(reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST,
                  depth=200, durability=DurabilityPolicy.VOLATILE)
LATCHED = QoSProfile(reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST,
                     depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)


def camera_messages(scene):
    depth, masks = scene.render()
    rgb = np.empty((HEIGHT, WIDTH, 3), np.uint8)
    rgb[:] = TABLE_RGB
    for name, mask in masks.items():
        rgb[mask] = COLOURS[name]
    colour = rgb8_image(rgb)
    depth_msg = Image(height=HEIGHT, width=WIDTH, encoding="32FC1", step=WIDTH * 4,
                      data=depth.astype("<f4").tobytes())
    info = CameraInfo(width=WIDTH, height=HEIGHT,
                      k=[INTRINSICS.fx, 0.0, INTRINSICS.cx, 0.0, INTRINSICS.fy, INTRINSICS.cy,
                         0.0, 0.0, 1.0])
    return colour, depth_msg, info


def mount(scene) -> TFMessage:
    """table -> the optical frame: the camera's pose in the tabletop's world."""
    matrix = scene.camera.world_from_camera()
    msg = TransformStamped()
    msg.header.frame_id, msg.child_frame_id = TABLE, COLOUR_FRAME
    t = msg.transform.translation
    t.x, t.y, t.z = (float(v) for v in matrix[:3, 3])
    r = msg.transform.rotation
    r.x, r.y, r.z, r.w = matrix_to_quaternion(matrix[:3, :3])
    return TFMessage(transforms=[msg])


def finger_clearance(scene, grasp_json, target: str) -> tuple[float, float]:
    """(nearest distance to any other block, lowest height above the table) of the grasp's
    fingers and palm, sampled on a 2 mm grid in the table's frame. The message holds no grip
    length: the fingers are taken as reaching as far forward as the gripper's fingers are long
    (at least as far as any grasp's), the jaws as open as the planner opens them."""
    pose = grasp_json["pose"]
    width = grasp_json["width"]
    gripper = Gripper()
    grasp = Grasp(tuple(pose["position"][k] for k in "xyz"),
                  tuple(pose["orientation"][k] for k in "xyzw"), width, 0.0, 0.0, "",
                  min(width + 2 * CLEARANCE_M, MAX_WIDTH_M), gripper.finger_length)
    centres, axes, halves = gripper_boxes(grasp, gripper)
    nearest, lowest = np.inf, np.inf
    for centre, frame, half in zip(centres, axes, halves):
        ticks = [np.linspace(-h, h, max(2, int(2 * h / 0.002) + 1)) for h in half]
        world = centre + np.array(list(itertools.product(*ticks))) @ frame.T
        lowest = min(lowest, float(world[:, 2].min()))
        for name, block in scene.blocks.items():
            if name == target:
                continue
            outside = np.abs((world - block.centre()) @ block.rotation()) - np.asarray(
                block.size) / 2
            nearest = min(nearest, float(np.linalg.norm(np.maximum(outside, 0), axis=1).min()))
    return nearest, lowest


def cloud_fields(cloud: PointCloud2) -> tuple[np.ndarray, np.ndarray]:
    assert [(f.name, f.datatype) for f in cloud.fields] == [
        ("x", 7), ("y", 7), ("z", 7), ("rgb", 7), ("label", 6)]
    raw = np.frombuffer(bytes(cloud.data), np.uint8).reshape(-1, cloud.point_step)
    return raw[:, :12].copy().view("<f4").astype(np.float64), raw[:, 16:20].copy().view("<u4")[:, 0]


def test_the_grasp_scene_of_two_answers(tmp_path):
    from test.ros.helpers import Harness, NodeProcess

    scene = close_pair()
    proc = NodeProcess(NS, {"target_frame": TABLE, "depth": {"enabled": True}}, tmp_path)
    harness = Harness("grasp_scene_node_test")
    stop = threading.Event()
    camera = None
    try:
        harness.listen(f"{NODE}/result", String)
        harness.listen(f"{NODE}/collision_objects", CollisionObject, DEEP)
        harness.listen(f"{NODE}/scene/points", PointCloud2, DEEP)
        harness.listen(f"{NODE}/grasps", PoseArray, DEEP)
        harness.wait_state(proc.name, "active", timeout=60)
        for topic, msg_type in (("image", Image), ("depth", Image), ("camera_info", CameraInfo)):
            harness.wait_subscribed(f"{NS}/{topic}", msg_type)
        harness.publisher("/tf_static", TFMessage, LATCHED).publish(mount(scene))
        colour, depth, info = camera_messages(scene)

        def run_camera() -> None:
            serial = 0
            while not stop.is_set():
                serial += 1
                for msg in (colour, depth, info):
                    msg.header.frame_id = COLOUR_FRAME
                    msg.header.stamp.sec, msg.header.stamp.nanosec = 4000 + serial, 0
                harness.publisher(f"{NS}/camera_info", CameraInfo).publish(info)
                harness.publisher(f"{NS}/depth", Image).publish(depth)
                harness.publisher(f"{NS}/image", Image).publish(colour)
                stop.wait(0.1)

        camera = threading.Thread(target=run_camera, daemon=True)
        camera.start()

        def ask(query_id: str, query: str, target: str, obstacle: str, graspable: bool):
            before = len(harness.messages(f"{NODE}/collision_objects"))
            harness.send_query(NS, {"id": query_id, "query": query})
            result = harness.wait_result(NS, query_id, timeout=60)
            assert result["status"] == "succeeded", result
            mask = result["masks"][0]
            assert mask["target"] is not None, mask  # the table's frame reached
            height = mask["target"]["box"]["size"]["z"]
            assert height == pytest.approx(scene.blocks[target].height, abs=0.01), mask
            assert mask["support"] is not None and mask["support_error"] is None, mask
            assert mask["target"]["support"]["normal"]["z"] == pytest.approx(1.0, abs=0.02)
            assert mask["target"]["support"]["distance"] == pytest.approx(0.0, abs=0.005)
            if graspable:
                assert mask["grasp_error"] is None and mask["grasps"], mask
            else:  # 8 cm across its narrow side: no wider than the gripper opens
                assert mask["grasps"] == [] and "fits the gripper" in mask["grasp_error"], mask
            stamp = (result["stamp"]["sec"], result["stamp"]["nanosec"])

            def ours(topic):
                return [m for m in harness.messages(f"{NODE}/{topic}")
                        if (m.header.stamp.sec, m.header.stamp.nanosec) == stamp]

            objects = harness.wait_for(
                lambda: (found := harness.messages(f"{NODE}/collision_objects")[before:])
                and sum(o.operation == CollisionObject.ADD for o in found) >= 3 and found, 10,
                "~/collision_objects")
            assert all(o.header.frame_id == TABLE and (o.header.stamp.sec,
                       o.header.stamp.nanosec) == stamp for o in objects)
            added = {o.id: o for o in objects if o.operation == CollisionObject.ADD}
            dims = {name: list(o.primitives[0].dimensions) for name, o in added.items()}
            assert dims["sam3_agent/target"][2] == pytest.approx(
                scene.blocks[target].height, abs=0.01)
            assert dims["sam3_agent/obstacle_1"][2] == pytest.approx(
                scene.blocks[obstacle].height, abs=0.01)
            support = added["sam3_agent/support"]
            assert support.pose.position.z == pytest.approx(-0.005, abs=0.005)
            assert dims["sam3_agent/support"][0] == pytest.approx(
                1.5 * dims["sam3_agent/target"][0])
            cloud = harness.wait_for(lambda: ours("scene/points"), 10, "~/scene/points")[-1]
            points, labels = cloud_fields(cloud)
            assert cloud.header.frame_id == TABLE and 0 < len(points) <= 20000
            assert set(np.unique(labels).tolist()) == {0, 1}
            block = scene.blocks[target]
            local = np.abs((points[labels == 1] - block.centre()) @ block.rotation())
            inside = np.all(local <= np.asarray(block.size) / 2 + 0.005, axis=1)
            assert inside.mean() > 0.95  # the target's points are the target's
            background = points[labels == 0]  # the table and the neighbours, unlabelled
            on_table = float(np.mean(np.abs(background[:, 2]) < 0.003))
            assert on_table > 0.5 and (background[:, 2] > 0.05).any(), on_table
            grasps = harness.wait_for(lambda: ours("grasps"), 10, "~/grasps")[-1]
            assert grasps.header.frame_id == TABLE
            assert len(grasps.poses) == len(mask["target"]["grasps"])
            print(f"{query_id}: height {height:.4f} m (true {block.height} m), cloud "
                  f"{len(points)} points ({on_table:.0%} of the background on the table)")
            if not graspable:
                return objects
            first = grasps.poses[0].position
            assert (first.x, first.y, first.z) == pytest.approx(
                tuple(mask["target"]["grasps"][0]["pose"]["position"][k] for k in "xyz"),
                abs=1e-5)
            clearances = [finger_clearance(scene, g, target) for g in mask["target"]["grasps"]]
            for nearest, lowest in clearances:  # grasp.clearance_m (1 cm), less measuring slack
                assert nearest > 0.005 and lowest > 0.005, clearances
            print(f"{query_id}: grasps {len(clearances)}, nearest block "
                  f"{min(c[0] for c in clearances):.4f} m, lowest above the table "
                  f"{min(c[1] for c in clearances):.4f} m")
            return objects

        first = ask("left", "the leftmost blue object", "target", "neighbour", True)
        assert [(o.operation, o.id) for o in first] == [
            (CollisionObject.ADD, "sam3_agent/target"),
            (CollisionObject.ADD, "sam3_agent/obstacle_1"),
            (CollisionObject.ADD, "sam3_agent/support")]
        second = ask("right", "the rightmost blue object", "neighbour", "target", False)
        assert [(o.operation, o.id) for o in second] == [
            (CollisionObject.REMOVE, "sam3_agent/target"),
            (CollisionObject.REMOVE, "sam3_agent/obstacle_1"),
            (CollisionObject.REMOVE, "sam3_agent/support"),
            (CollisionObject.ADD, "sam3_agent/target"),
            (CollisionObject.ADD, "sam3_agent/obstacle_1"),
            (CollisionObject.ADD, "sam3_agent/support")]
    except (AssertionError, TimeoutError) as exc:
        raise AssertionError(f"{exc}\n--- node log ---\n{proc.log()}") from exc
    finally:
        stop.set()
        if camera is not None:
            camera.join(5)
        harness.close()
        assert proc.stop() == 0, proc.log()
    assert "Traceback" not in proc.log(), proc.log()
