"""An answer keeps its world at real-model timing, over the whole node (issue 33, CONTRACTS §11).

sam3_agent_node (the real OpenAI client, the colour segmenter, depth on, ``target_frame:
base_link``) in a subprocess against a scripted OpenAI-compatible endpoint that answers like the
offline planner but takes 2-5 s per call, as a real multimodal model does; so a query lasts
10-20 s. A camera driver publishes depth and camera_info at 30 Hz (the ring keeps 30: one second),
colour at 10 Hz, and a robot an arm link that moves on ``/tf`` (0.2 m/s; the TF buffer keeps
10 s) below the camera's static mount. One test, checked in order:

1. a followed query: its 3D (camera frame) and its target in ``base_link`` within 1 cm of the
   truth taken with the transform at its colour frame's stamp (the newest transform is metres
   off by then), the ``3D`` status OK on ``/diagnostics``;
2. follow's first ``~/follow/status`` is computed on a frame newer than the answer's (seconds
   newer) and says where the object is (tracking) - never the answer's mask re-published;
3. a refinement ("no, the other one") sent 20 s after that answer: answered on its frame, the
   other object's 3D and target within 1 cm, with the transform of that frame's stamp.

Before the world was bound at take time, 1 and 3 came back ``succeeded`` with ``position:
null`` ("no depth frame within depth.max_stamp_diff_s ...") and no target.
"""

from __future__ import annotations

import itertools
import os
import threading
import time

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PointStamped
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage

from sam3_agent_demo import sample
from sam3_agent_ros.ros.conversions import rgb8_image
from test.fakes.offline_responder import offline_responder
from test.fakes.scripted_server import ScriptedServer
from test.ros.test_depth import COLOUR_FRAME, error_cm
from test.ros.test_robot_frame_node import (
    ARM,
    BASE,
    CAMERA_LINK,
    MOUNT,
    OPTICAL_Q,
    TF_QOS,
    TF_STATIC_QOS,
    arm_position,
    in_base,
    stamp_of,
    transform,
)

NS = "/real_timing_robot"
NODE = f"{NS}/sam3_agent"
QUERY, FIRST, OTHER = "the leftmost blue object", "blue_box", "blue_cylinder"
CALL_DELAYS_S = (2.0, 3.5, 5.0, 2.5)  # per model call, in turn: a real model's seconds
REFINE_AFTER_S = 20.0
KEY_VARIABLE = "REAL_TIMING_TEST_KEY"


def slow_responder():
    """The offline planner's replies over HTTP, each after the next of ``CALL_DELAYS_S``."""
    delays, lock = itertools.cycle(CALL_DELAYS_S), threading.Lock()
    replies = {delay: offline_responder(delay) for delay in CALL_DELAYS_S}

    def respond(body: dict):
        with lock:
            delay = next(delays)
        return replies[delay](body)
    return respond


def diagnostic(harness, area: str) -> DiagnosticStatus | None:
    for array in reversed(harness.messages("/diagnostics")):
        for status in array.status:
            if status.name == f"{NODE}: {area}":
                return status
    return None


def stamp_s(stamp: dict) -> float:
    return stamp["sec"] + stamp["nanosec"] * 1e-9


def test_slow_answers_keep_their_world_refinements_too_and_follow_catches_up(tmp_path):
    from test.ros.helpers import Harness, NodeProcess

    scene = sample.render_frame(2.0)
    k = [float(v) for v in scene.intrinsics.K.ravel()]
    t0 = 5000.0
    stop = threading.Event()
    camera: threading.Thread | None = None
    with ScriptedServer(responder=slow_responder()) as server:
        env = dict(os.environ, **{KEY_VARIABLE: "sk-real-timing"})
        proc = NodeProcess(NS, {"target_frame": BASE, "depth": {"enabled": True},
                                "llm": {"backend": "openai", "base_url": server.base_url,
                                        "api_key_env": KEY_VARIABLE, "model": "slow-model",
                                        "max_retries": 0}}, tmp_path, env=env)
        harness = Harness("real_timing_node_test")
        try:
            for name, msg_type in (("result", String), ("target", PointStamped),
                                   ("follow/status", String)):
                harness.listen(f"{NODE}/{name}", msg_type)
            harness.listen("/diagnostics", DiagnosticArray)
            harness.wait_state(proc.name, "active", timeout=60)
            for topic in ("image", "depth", "camera_info"):
                harness.wait_subscribed(f"{NS}/{topic}", CameraInfo if topic == "camera_info"
                                        else Image)
            tf_pub = harness.publisher("/tf", TFMessage, TF_QOS)
            harness.publisher("/tf_static", TFMessage, TF_STATIC_QOS).publish(TFMessage(
                transforms=[transform(ARM, CAMERA_LINK, stamp_of(t0), *MOUNT),
                            transform(CAMERA_LINK, COLOUR_FRAME, stamp_of(t0), (0, 0, 0),
                                      OPTICAL_Q)]))
            colour = rgb8_image(scene.rgb)
            depth_mm = scene.depth_mm().tobytes()
            clock = {"now_s": t0}
            started = time.monotonic()

            def run_camera() -> None:
                """30 Hz depth + camera_info + the moving link (stamped 0.1 s ahead, so every
                colour stamp lies between two samples), colour every third tick."""
                for tick in itertools.count():
                    if stop.is_set():
                        return
                    now = clock["now_s"] = t0 + (time.monotonic() - started)
                    stamp = stamp_of(now)
                    ahead = now + 0.1
                    tf_pub.publish(TFMessage(transforms=[transform(
                        BASE, ARM, stamp_of(ahead), arm_position(ahead, t0), (0, 0, 0, 1))]))
                    info = CameraInfo(width=640, height=480, k=k)
                    depth = Image(height=480, width=640, encoding="16UC1", step=1280,
                                  data=depth_mm)
                    sent = [info, depth] + ([colour] if tick % 3 == 0 else [])
                    for msg in sent:
                        msg.header.frame_id = COLOUR_FRAME
                        msg.header.stamp.sec, msg.header.stamp.nanosec = stamp
                    harness.publisher(f"{NS}/camera_info", CameraInfo).publish(info)
                    harness.publisher(f"{NS}/depth", Image).publish(depth)
                    if tick % 3 == 0:
                        harness.publisher(f"{NS}/image", Image).publish(colour)
                    stop.wait(max(0.0, started + (tick + 1) / 30 - time.monotonic()))

            camera = threading.Thread(target=run_camera, daemon=True)
            camera.start()
            time.sleep(1.0)

            def checked_3d(result: dict, index: int, name: str) -> tuple[float, float]:
                """(camera-frame error, base_link error) in cm of mask ``index`` as ``name``."""
                mask = result["masks"][index]
                assert mask["position"] is not None, mask
                assert mask["target"] is not None and mask["target"]["frame_id"] == BASE, mask
                truth = in_base(scene.positions[name], stamp_s(result["stamp"]), t0)
                return (error_cm(mask["position"], scene.positions[name]),
                        error_cm(mask["target"]["position"], truth))

            # 1. A slow, followed query.
            harness.send_query(NS, {"id": "slow-1", "query": QUERY, "follow": True})
            first = harness.wait_result(NS, "slow-1", timeout=90)
            answered_at = time.monotonic()
            assert first["status"] == "succeeded", first
            duration = first["timings"]["total_s"]
            assert duration > 5.0, first["timings"]  # a real model's time
            camera_cm, base_cm = checked_3d(first, 0, FIRST)
            assert camera_cm < 1.0 and base_cm < 1.0, (camera_cm, base_cm, first)
            newest = in_base(scene.positions[FIRST], clock["now_s"], t0)
            assert error_cm(first["masks"][0]["target"]["position"], newest) > 50.0
            harness.wait_for(lambda: (s := diagnostic(harness, "3D")) is not None
                             and s.level == DiagnosticStatus.OK and "slow-1" in s.message,
                             10, "the 3D status OK for slow-1")

            # 2. Follow's first update: on a newer frame, where the object is now.
            update = harness.wait_for(
                lambda: next((m for m in harness.json_messages(f"{NODE}/follow/status")
                              if m["query_id"] == "slow-1"), None), 20, "a follow update")
            follow_gap_s = stamp_s(update["frame"]) - stamp_s(first["stamp"])
            assert follow_gap_s > 1.0, (update, first["stamp"])
            assert update["state"] == "tracking" and update["objects"], update
            assert update["source"] == "redetect", update  # found again, not flowed seconds

            # 3. A refinement 20 s after that answer: the other object, on the first frame.
            time.sleep(max(0.0, answered_at + REFINE_AFTER_S - time.monotonic()))
            sent_after_s = time.monotonic() - answered_at
            harness.send_query(NS, {"id": "slow-2", "query": "no, the other one",
                                    "refines": "slow-1"})
            refined = harness.wait_result(NS, "slow-2", timeout=90)
            assert refined["status"] == "succeeded" and refined["refines"] == "slow-1", refined
            assert refined["stamp"] == first["stamp"]
            refined_camera_cm, refined_base_cm = checked_3d(refined, 0, OTHER)
            assert refined_camera_cm < 1.0 and refined_base_cm < 1.0, refined
            print(f"\nslow query {duration:.1f} s: 3D {camera_cm:.2f} cm, base_link "
                  f"{base_cm:.2f} cm; follow's first update {follow_gap_s:.1f} s newer; "
                  f"refinement sent {sent_after_s:.1f} s after the answer, answered in "
                  f"{refined['timings']['total_s']:.1f} s: 3D {refined_camera_cm:.2f} cm, "
                  f"base_link {refined_base_cm:.2f} cm")
            server.assert_clean()
        except (AssertionError, TimeoutError) as exc:
            raise AssertionError(f"{exc}\n--- node log ---\n{proc.log()}") from exc
        finally:
            stop.set()
            if camera is not None:
                camera.join(5)
            harness.close()
            assert proc.stop() == 0, proc.log()
    assert "Traceback" not in proc.log(), proc.log()
