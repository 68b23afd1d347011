"""Targets in the robot's frame over the whole node (issue 27, interface §9).

sam3_agent_node (offline LLM, the colour segmenter made slow, depth on, ``target_frame:
base_link``) in a subprocess, fed colour, depth and camera_info like a camera driver, and TF like
a robot: an arm link that moves on ``/tf`` (``base_link -> arm_link``, 0.2 m/s along y) and the
camera's static mount on ``/tf_static`` (``arm_link -> camera_link -> camera_color_optical_frame``).

What is checked, in the order the node's TF buffer sees it:
1. no transform at all, 2. a broken chain (two trees), 3. a colour frame older than every
transform of the moving link: each gives the answer in 2D and camera-frame 3D, ``target: null``
with ``target_error`` naming what is missing, nothing on the target-frame outputs, and a
``target frame`` WARN on ``/diagnostics`` with the same words;
4. the camera moving during the query: ``~/target`` (and the result's ``target``, the 3D
detection and the point cloud) in ``base_link``, within 1 cm of the truth of the scene taken
with the transform at the colour frame's stamp, while the latest transform would put it several
cm off.
"""

from __future__ import annotations

import os
import threading

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PointStamped, TransformStamped
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image, PointCloud2
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage
from vision_msgs.msg import Detection2DArray, Detection3DArray

from sam3_agent_demo import sample
from sam3_agent_ros.ros.conversions import rgb8_image
from test.ros.test_depth import COLOUR_FRAME, error_cm, solid_box

NS = "/robot_frame_robot"
NODE = f"{NS}/sam3_agent"
QUERY = "the leftmost blue object"
OBJECT = "blue_box"
BASE, ARM, CAMERA_LINK = "base_link", "arm_link", "camera_link"
SPEED_M_S = 0.2  # the arm link along base_link's y
TF_QOS = QoSProfile(reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE,
                    history=HistoryPolicy.KEEP_LAST, depth=100)
TF_STATIC_QOS = QoSProfile(reliability=ReliabilityPolicy.RELIABLE,
                           durability=DurabilityPolicy.TRANSIENT_LOCAL,
                           history=HistoryPolicy.KEEP_LAST, depth=1)
# camera_link -> optical frame: z forward = link x, x right = link -y, y down = link -z (REP 103)
OPTICAL_Q = (-0.5, 0.5, -0.5, 0.5)
MOUNT = ((0.10, 0.0, 0.40), (0.0, 0.0, 0.0, 1.0))  # arm_link -> camera_link: 10 cm ahead, 40 up


def quat_matrix(q) -> np.ndarray:
    x, y, z, w = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def arm_position(stamp_s: float, t0_s: float) -> np.ndarray:
    return np.array([0.5, SPEED_M_S * (stamp_s - t0_s), 0.0])


def in_base(point_optical, stamp_s: float, t0_s: float) -> np.ndarray:
    """The truth: the camera-frame point in base_link with the chain at ``stamp_s``."""
    p = quat_matrix(OPTICAL_Q) @ np.asarray(point_optical, float)  # optical -> camera_link
    p = p + np.array(MOUNT[0])  # camera_link -> arm_link (no rotation)
    return p + arm_position(stamp_s, t0_s)  # arm_link -> base_link (no rotation)


def transform(parent: str, child: str, stamp: tuple[int, int], xyz, q) -> TransformStamped:
    msg = TransformStamped()
    msg.header.frame_id, msg.child_frame_id = parent, child
    msg.header.stamp.sec, msg.header.stamp.nanosec = stamp
    msg.transform.translation.x, msg.transform.translation.y, msg.transform.translation.z = \
        (float(v) for v in xyz)
    (msg.transform.rotation.x, msg.transform.rotation.y, msg.transform.rotation.z,
     msg.transform.rotation.w) = (float(v) for v in q)
    return msg


def stamp_of(seconds: float) -> tuple[int, int]:
    sec = int(seconds)
    return sec, int(round((seconds - sec) * 1e9))


def diagnostic(harness, area: str) -> DiagnosticStatus | None:
    for array in reversed(harness.messages("/diagnostics")):
        for status in array.status:
            if status.name == f"{NODE}: {area}":
                return status
    return None


def cloud_points(cloud: PointCloud2) -> np.ndarray:
    assert [f.name for f in cloud.fields] == ["x", "y", "z", "rgb"]
    raw = np.frombuffer(bytes(cloud.data), dtype=np.float32).reshape(-1, cloud.point_step // 4)
    return raw[:, :3].astype(np.float64)


def test_targets_in_the_robot_frame_at_the_colour_frames_stamp(tmp_path):
    from test.ros.helpers import Harness, NodeProcess

    scene = sample.render_frame(2.0)
    truth_optical = scene.positions[OBJECT]
    env = dict(os.environ, SLOW_SEGMENTER_S="1.0")
    proc = NodeProcess(NS, {"target_frame": BASE, "depth": {"enabled": True},
                            "segmenter": {"backend": "test.ros.slow_segmenter:factory"}},
                       tmp_path, env=env)
    harness = Harness("robot_frame_node_test")
    stop = threading.Event()
    threads: list[threading.Thread] = []
    k = [float(v) for v in scene.intrinsics.K.ravel()]
    t0 = 3000.0
    clock = {"camera_s": t0, "camera_offset_s": 0.0, "tf": False}
    try:
        for name, msg_type in (("result", String), ("target", PointStamped),
                               ("detections", Detection2DArray),
                               ("detections_3d", Detection3DArray),
                               ("target/points", PointCloud2), ("status", String)):
            harness.listen(f"{NODE}/{name}", msg_type)
        harness.listen("/diagnostics", DiagnosticArray)
        harness.wait_state(proc.name, "active", timeout=60)
        for topic, msg_type in (("image", Image), ("depth", Image), ("camera_info", CameraInfo)):
            harness.wait_subscribed(f"{NS}/{topic}", msg_type)
        tf_pub = harness.publisher("/tf", TFMessage, TF_QOS)
        static_pub = harness.publisher("/tf_static", TFMessage, TF_STATIC_QOS)
        colour = rgb8_image(scene.rgb)
        colour.header.frame_id = COLOUR_FRAME
        depth_mm = scene.depth_mm().tobytes()
        sent: list[float] = []

        def run_camera() -> None:  # 10 Hz on a simulated clock, stamps between TF's
            while not stop.is_set():
                clock["camera_s"] += 0.1
                stamp = stamp_of(clock["camera_s"] + clock["camera_offset_s"])
                info = CameraInfo(width=640, height=480, k=k)
                depth = Image(height=480, width=640, encoding="16UC1", step=1280, data=depth_mm)
                for msg in (colour, depth, info):
                    msg.header.frame_id = COLOUR_FRAME
                    msg.header.stamp.sec, msg.header.stamp.nanosec = stamp
                harness.publisher(f"{NS}/camera_info", CameraInfo).publish(info)
                harness.publisher(f"{NS}/depth", Image).publish(depth)
                harness.publisher(f"{NS}/image", Image).publish(colour)
                sent.append(clock["camera_s"])
                if clock["tf"]:  # the moving link, 20 Hz, ahead of the camera by 0.3 s
                    for step in (0.225, 0.275):
                        at = clock["camera_s"] + step
                        tf_pub.publish(TFMessage(transforms=[transform(
                            BASE, ARM, stamp_of(at), arm_position(at, t0), (0, 0, 0, 1))]))
                stop.wait(0.1)

        def frames_after(count: int) -> None:
            target = len(sent) + count
            harness.wait_for(lambda: len(sent) >= target, 10, f"{count} more frames")

        def ask(query_id: str) -> dict:
            before = len(harness.messages(f"{NODE}/target"))
            harness.send_query(NS, {"id": query_id, "query": QUERY})
            result = harness.wait_result(NS, query_id, timeout=60)
            assert result["status"] == "succeeded", result
            result["targets_before"] = before
            return result

        def refused(result: dict, *words: str) -> str:
            mask = result["masks"][0]
            assert mask["position"] is not None, mask  # the camera-frame 3D still comes out
            assert mask["target"] is None, mask
            for word in words:
                assert word in mask["target_error"], (word, mask)
            # nothing in another frame for this answer
            assert len(harness.messages(f"{NODE}/target")) == result["targets_before"]
            status = harness.wait_for(
                lambda: (s := diagnostic(harness, "target frame")) is not None
                and s.level == DiagnosticStatus.WARN and BASE in s.message and s, 10,
                "a target frame WARN on /diagnostics")
            return status.message

        threads.append(threading.Thread(target=run_camera, daemon=True))
        threads[-1].start()
        frames_after(3)

        # 1. No transform at all: the frames are unknown.
        result = ask("no-tf")
        refused(result, BASE, COLOUR_FRAME)

        # 2. A broken chain: the camera's mount, and a base_link tree that does not reach it.
        static_pub.publish(TFMessage(transforms=[
            transform(ARM, CAMERA_LINK, stamp_of(t0), *MOUNT),
            transform(CAMERA_LINK, COLOUR_FRAME, stamp_of(t0), (0, 0, 0), OPTICAL_Q),
            transform(BASE, "lidar", stamp_of(t0), (0, 0, 1), (0, 0, 0, 1))]))
        frames_after(3)
        refused(ask("broken-chain"), BASE, COLOUR_FRAME)

        # 3. The moving link appears; a colour frame stamped 60 s before any of its transforms.
        clock["tf"] = True
        clock["camera_offset_s"] = -60.0
        frames_after(5)
        message = refused(ask("too-old"), BASE)
        assert ARM in message or "older" in message or "past" in message, message

        # 4. The camera moves during the query: the transform at the colour frame's stamp.
        clock["camera_offset_s"] = 0.0
        frames_after(5)
        result = ask("moving")
        mask = result["masks"][0]
        stamp_s = result["stamp"]["sec"] + result["stamp"]["nanosec"] * 1e-9
        truth = in_base(truth_optical, stamp_s, t0)
        latest = in_base(truth_optical, max(sent) + 0.275, t0)
        assert mask["target"]["frame_id"] == BASE, mask
        assert error_cm(mask["target"]["position"], truth) < 1.0, (mask, truth)
        assert error_cm(mask["target"]["position"], latest) > 5.0  # the latest would be off
        assert error_cm(mask["position"], truth_optical) < 1.0  # the camera frame kept
        target = harness.wait_for(lambda: [m for m in harness.messages(f"{NODE}/target")
                                           if (m.header.stamp.sec, m.header.stamp.nanosec)
                                           == (result["stamp"]["sec"],
                                               result["stamp"]["nanosec"])], 10, "~/target")[-1]
        assert target.header.frame_id == BASE
        assert error_cm({"x": target.point.x, "y": target.point.y, "z": target.point.z},
                        truth) < 1.0
        detections = harness.wait_for(lambda: harness.messages(f"{NODE}/detections"), 10,
                                      "~/detections")[-1]
        assert detections.header.frame_id == COLOUR_FRAME
        assert detections.detections[0].id == "1"
        assert detections.detections[0].results[0].hypothesis.class_id == \
            result["text_prompts"][-1]
        boxes = harness.wait_for(lambda: harness.messages(f"{NODE}/detections_3d"), 10,
                                 "~/detections_3d")[-1]
        assert boxes.header.frame_id == BASE and boxes.detections[0].id == "1"
        centre = boxes.detections[0].bbox.center.position
        assert error_cm({"x": centre.x, "y": centre.y, "z": centre.z},  # it stands on the table
                        in_base(solid_box(scene, OBJECT)[0].center, stamp_s, t0)) < 1.5
        cloud = harness.wait_for(lambda: harness.messages(f"{NODE}/target/points"), 10,
                                 "~/target/points")[-1]
        assert cloud.header.frame_id == BASE and cloud.height == 1 and cloud.width > 100
        points = cloud_points(cloud)
        assert len(points) <= 20000
        # the top face's points lie around its centre (the box is a few cm across)
        assert np.linalg.norm(np.median(points, axis=0) - truth) < 0.03
        harness.wait_for(
            lambda: (s := diagnostic(harness, "target frame")) is not None
            and s.level == DiagnosticStatus.OK, 10, "the target frame OK again")
    except (AssertionError, TimeoutError) as exc:
        raise AssertionError(f"{exc}\n--- node log ---\n{proc.log()}") from exc
    finally:
        stop.set()
        for thread in threads:
            thread.join(5)
        harness.close()
        assert proc.stop() == 0, proc.log()
    assert "Traceback" not in proc.log(), proc.log()
