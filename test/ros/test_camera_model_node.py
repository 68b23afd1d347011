"""The camera model over the whole node (issue 25): 3D only from a camera_info that fits the
colour frame, matched to it by stamp, and depth frame_ids that cannot forge log lines.

sam3_agent_node (offline LLM, the colour segmenter made slow) in a subprocess, fed colour, depth
and camera_info like a camera driver; the node's log (its stdout/stderr) is read back."""

from __future__ import annotations

import os
import re
import threading

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PointStamped
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import String

from sam3_agent_demo import sample
from sam3_agent_ros.ros.conversions import rgb8_image
from test.ros.test_depth import COLOUR_FRAME, error_cm

NS = "/camera_model_robot"
NODE = f"{NS}/sam3_agent"
QUERY = "the leftmost blue object"
FORGED = re.compile(r"^\[ERROR\] \[0\.0\]", re.MULTILINE)


def diagnostic(harness, area: str) -> DiagnosticStatus | None:
    for array in reversed(harness.messages("/diagnostics")):
        for status in array.status:
            if status.name == f"{NODE}: {area}":
                return status
    return None


def test_node_refuses_unfitting_camera_models_and_forged_frame_ids(tmp_path):
    from test.ros.helpers import Harness, NodeProcess

    scene = sample.render_frame(2.0)
    env = dict(os.environ, SLOW_SEGMENTER_S="1.0")
    proc = NodeProcess(NS, {"depth": {"enabled": True},
                            "segmenter": {"backend": "test.ros.slow_segmenter:factory"}},
                       tmp_path, env=env)
    harness = Harness("camera_model_node_test")
    stop = threading.Event()
    camera_thread = None
    k = [float(v) for v in scene.intrinsics.K.ravel()]
    # What the camera sends next (changed by the test between queries).
    camera = {"info": (k, 640, 480), "depth_frame_id": lambda serial: COLOUR_FRAME}
    stamps: list[tuple[int, int]] = []
    try:
        for name, msg_type in (("result", String), ("target", PointStamped),
                               ("status", String)):
            harness.listen(f"{NODE}/{name}", msg_type)
        harness.listen("/diagnostics", DiagnosticArray)
        harness.wait_state(proc.name, "active", timeout=60)
        for topic, msg_type in (("image", Image), ("depth", Image), ("camera_info", CameraInfo)):
            harness.wait_subscribed(f"{NS}/{topic}", msg_type)
        colour = rgb8_image(scene.rgb)
        colour.header.frame_id = COLOUR_FRAME
        depth_mm = scene.depth_mm().tobytes()

        def run_camera() -> None:
            serial = 0
            while not stop.is_set():
                serial += 1
                stamp = (3000 + serial, 1000 * serial)
                values, width, height = camera["info"]
                info = CameraInfo(width=width, height=height, k=values)
                info.header.frame_id = COLOUR_FRAME
                depth = Image(height=480, width=640, encoding="16UC1", step=1280, data=depth_mm)
                depth.header.frame_id = camera["depth_frame_id"](serial)
                for msg in (colour, depth, info):
                    msg.header.stamp.sec, msg.header.stamp.nanosec = stamp
                harness.publisher(f"{NS}/camera_info", CameraInfo).publish(info)
                harness.publisher(f"{NS}/depth", Image).publish(depth)
                harness.publisher(f"{NS}/image", Image).publish(colour)
                stamps.append(stamp)
                stop.wait(0.1)

        def frames_after(count: int) -> None:
            target = len(stamps) + count
            harness.wait_for(lambda: len(stamps) >= target, 10, f"{count} more frames")

        camera_thread = threading.Thread(target=run_camera, daemon=True)
        camera_thread.start()
        frames_after(3)

        def ask(query_id: str) -> dict:
            harness.send_query(NS, {"id": query_id, "query": QUERY})
            result = harness.wait_result(NS, query_id, timeout=60)
            assert result["status"] == "succeeded", result
            return result

        # 1. A 1280x720 camera_info for 640x480 frames: no position, no box, no ~/target.
        camera["info"] = (k, 1280, 720)
        frames_after(3)
        mask = ask("wrong-size")["masks"][0]
        assert mask["position"] is None and mask["box"] is None, mask
        assert "camera_info is for 1280x720 images but the colour frame is 640x480" in \
            mask["position_error"], mask
        assert mask["box_error"] == mask["position_error"]
        warned = harness.wait_for(
            lambda: (s := diagnostic(harness, "camera model")) is not None
            and s.level == DiagnosticStatus.WARN and "1280x720" in s.message and s, 10,
            "a camera model WARN on /diagnostics")
        assert "colour frame is 640x480" in warned.message

        # 2. fx = 1e-9 (a unit mistake): refused likewise.
        camera["info"] = ([1e-9] + k[1:], 640, 480)
        frames_after(3)
        mask = ask("tiny-fx")["masks"][0]
        assert mask["position"] is None and "fx=1e-09 px is implausible" in \
            mask["position_error"], mask
        assert harness.messages(f"{NODE}/target") == []  # nothing wrong reached the arm

        # 3. A K that changes while the query runs applies only from its own stamp on.
        camera["info"] = (k, 640, 480)
        frames_after(3)
        harness.send_query(NS, {"id": "k-change", "query": QUERY})
        harness.wait_status(NS, "k-change", "segmenting", timeout=30)
        shifted = list(k)
        shifted[2] += 100.0  # cx 100 px off: about 17 cm at 1 m if it were applied
        camera["info"] = (shifted, 640, 480)
        frames_after(3)
        result = harness.wait_result(NS, "k-change", timeout=60)
        mask = result["masks"][0]
        assert mask["position_error"] is None, mask
        assert error_cm(mask["position"], scene.positions["blue_box"]) < 1.0, mask
        harness.wait_for(
            lambda: (s := diagnostic(harness, "camera model")) is not None
            and s.level == DiagnosticStatus.OK, 10, "the camera model OK again")

        # 4. Depth frame_ids that try to forge log lines: one escaped warning, nothing forged.
        camera["info"] = (k, 640, 480)
        camera["depth_frame_id"] = (
            lambda serial: f"evil{serial}\n[ERROR] [0.0] [sam3_agent]: forged {serial}")
        frames_after(3)
        for i in range(3):
            ask(f"forged-{i}")
            frames_after(2)
        log = proc.log()
        assert FORGED.search(log) is None, log
        assert log.count("differs from the colour frame_id") == 1, log
        assert "\\n[ERROR] [0.0] [sam3_agent]: forged" in log, log
    except (AssertionError, TimeoutError) as exc:
        raise AssertionError(f"{exc}\n--- node log ---\n{proc.log()}") from exc
    finally:
        stop.set()
        if camera_thread is not None:
            camera_thread.join(5)
        harness.close()
        assert proc.stop() == 0, proc.log()
    assert "Traceback" not in proc.log(), proc.log()
