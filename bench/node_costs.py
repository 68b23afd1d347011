"""Costs of the ROS node over rclpy (DDS confined to loopback).

1. CPU of the node process (``sam3_agent_node``, offline backends, autostart, image_qos
   sensor_data) receiving rgb8 frames at 30 Hz with no query running, next to a bare rclpy
   subscriber process (bench/ros_peer.py: same topic, same QoS, a callback that keeps a
   reference, SingleThreadedExecutor) fed by the same publisher in the same run, and a second one
   spinning a 4-thread MultiThreadedExecutor like the node (to tell executor cost from node
   code). Reported: % of one core for each over a measured window (after 1 s of warm-up), idle
   (no frames), 640x480 and 1920x1080; the node's cost beyond the DDS receive cost is the
   difference.
2. Time to publish mask + labels + overlay for a 1920x1080 frame with 2 selected masks: the node's
   own answer path (``ros/outputs.py``: render the union mask, label image and overlay, convert
   to sensor_msgs/Image, publish) on an in-process ``Sam3AgentNode`` (configured, offline backends),
   with the bare subscriber listening on the three topics (reliable). Median of ``--publishes``.

Run alone: ``.venv/bin/python bench/node_costs.py [--window 8]``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from common import (
    RESOLUTIONS,
    ROOT,
    bench_frame,
    blob_masks,
    command_line,
    median,
    process_cpu_s,
    wait_for,
    write_result,
)

from sam3_agent_ros.ros.dds import loopback_env, profiles_file  # noqa: E402  (after common sets sys.path)

RATE_HZ = 30.0
NAMESPACE = "/bench"
IMAGE_TOPIC = f"{NAMESPACE}/image"
PUBLISH_NAMESPACE = "/bench_pub"
OUTPUT_TOPICS = [f"{PUBLISH_NAMESPACE}/sam3_agent/{name}" for name in ("mask", "labels", "overlay")]


def make_image_msg(width: int, height: int):
    from sensor_msgs.msg import Image

    msg = Image(height=height, width=width, encoding="rgb8", step=width * 3)
    msg.header.frame_id = "camera"
    msg.data = bench_frame(width, height).tobytes()
    return msg


def publish_for(publisher, msg, seconds: float) -> int:
    """Publish ``msg`` at RATE_HZ for ``seconds``; returns how many were sent."""
    period = 1.0 / RATE_HZ
    start = time.monotonic()
    sent = 0
    while True:
        due = start + sent * period
        now = time.monotonic()
        if due - start >= seconds:
            return sent
        if due > now:
            time.sleep(due - now)
        stamp = time.time()
        msg.header.stamp.sec, msg.header.stamp.nanosec = int(stamp), int(stamp % 1 * 1e9)
        publisher.publish(msg)
        sent += 1


def measure_phase(processes: dict[str, psutil.Process], publisher, msg, window: float) -> dict:
    if msg is not None:
        publish_for(publisher, msg, 1.0)  # warm-up: matching, first allocations
    before = {name: process_cpu_s(p) for name, p in processes.items()}
    started = time.monotonic()
    sent = publish_for(publisher, msg, window) if msg is not None else time.sleep(window) or 0
    elapsed = time.monotonic() - started
    after = {name: process_cpu_s(p) for name, p in processes.items()}
    percent = {name: 100.0 * (after[name] - before[name]) / elapsed for name in processes}
    return {"sent": sent, "seconds": round(elapsed, 2),
            "node_cpu_percent": round(percent["node"], 2),
            "bare_cpu_percent": round(percent["bare"], 2),
            "bare_multi_cpu_percent": round(percent["bare_multi"], 2),
            "node_beyond_bare_percent": round(percent["node"] - percent["bare"], 2)}


def publish_cost(publishes: int) -> dict:
    """ms to publish mask + labels + overlay at 1080p through the node's own code."""
    from rclpy.parameter import Parameter
    from std_msgs.msg import Header

    from sam3_agent_ros import render
    from sam3_agent_ros.core.types import Frame, Mask, QueryStatus, Result
    from sam3_agent_ros.ros.conversions import mono8_image, rgb8_image
    from sam3_agent_ros.ros.node import Sam3AgentNode
    from sam3_agent_ros.ros.outputs import image_messages

    width, height = RESOLUTIONS["1080p"]
    image = bench_frame(width, height)
    masks, scores, boxes = blob_masks(width, height, 6)
    frame = Frame(image, 1, 0, "camera")
    selected = [Mask.from_array(masks[k], scores[k], tuple(boxes[k])) for k in (0, 3)]
    result = Result("bench", "the mugs", QueryStatus.SUCCEEDED, masks=selected, frame=frame)
    header = Header(frame_id="camera")
    node = Sam3AgentNode(namespace=PUBLISH_NAMESPACE, parameter_overrides=[
        Parameter("autostart", value=False), Parameter("llm.backend", value="offline"),
        Parameter("segmenter.backend", value="color"), Parameter("publish_overlay", value=True)])
    try:
        node.trigger_configure()
        answers = node._answers  # the node's own AnswerPublisher
        outputs = answers._publishers
        wait_for(lambda: all(outputs[n].get_subscription_count() >= 1
                             for n in ("mask", "labels", "overlay")), 20.0,
                 "the bare subscriber on the output topics")
        time.sleep(0.5)
        totals, renders = [], []
        mask_list = [m.mask for m in result.masks]
        for _ in range(publishes + 1):
            started = time.perf_counter()
            for kind, message in image_messages(frame.image, mask_list, header,
                                                ("mask", "labels", "overlay")).items():
                outputs[kind].publish(message)
            totals.append(time.perf_counter() - started)
            time.sleep(0.05)
        shape = image.shape[:2]
        for _ in range(publishes + 1):  # the same work without publish(): render + convert
            started = time.perf_counter()
            mono8_image(render.union_mask(mask_list, shape), header)
            mono8_image(render.label_image(mask_list, shape), header)
            rgb8_image(render.overlay_masks(image, mask_list, ["1", "2"]), header)
            renders.append(time.perf_counter() - started)
    finally:
        node.release()
        node.destroy_node()
    total_ms, render_ms = median(totals[1:]) * 1000, median(renders[1:]) * 1000
    return {"publishes": publishes, "total_ms": round(total_ms, 2),
            "render_convert_ms": round(render_ms, 2),
            "publish_calls_ms": round(total_ms - render_ms, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--window", type=float, default=8.0, help="measured seconds per phase")
    parser.add_argument("--publishes", type=int, default=20)
    args = parser.parse_args(argv)
    env = loopback_env()
    os.environ.update(env)  # before rclpy.init: this process publishes the frames
    import rclpy
    from sensor_msgs.msg import Image

    from sam3_agent_ros.ros.qos import IMAGE_QOS
    from test.ros.helpers import NodeProcess

    rclpy.init()
    temp = Path(tempfile.mkdtemp(prefix="sam3_bench_node_"))
    child_env = dict(os.environ)
    child_env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)
    child_env["PYTHONPATH"] = str(ROOT)
    node_process = NodeProcess(NAMESPACE, {"image_qos": "sensor_data", "publish_overlay": True},
                               temp, env=child_env)
    peer = [sys.executable, str(ROOT / "bench" / "ros_peer.py")]
    bare = subprocess.Popen([*peer, IMAGE_TOPIC, *OUTPUT_TOPICS], stdout=subprocess.PIPE,
                            text=True, env=child_env)
    bare_multi = subprocess.Popen([*peer, "--multi", IMAGE_TOPIC], stdout=subprocess.PIPE,
                                  text=True, env=child_env)
    publisher_node = rclpy.create_node("bench_camera")
    publisher = publisher_node.create_publisher(Image, IMAGE_TOPIC, IMAGE_QOS["sensor_data"])
    phases, received, publish = {}, {}, {}
    try:
        for peer_process in (bare, bare_multi):
            if peer_process.stdout.readline().strip() != "ready":
                raise RuntimeError("a bare subscriber did not start")
        wait_for(lambda: publisher.get_subscription_count() >= 3, 60.0,
                 "the node and the bare subscribers to subscribe (see "
                 f"{node_process.log_file})")
        time.sleep(1.0)  # let the node settle after activation
        processes = {"node": psutil.Process(node_process.process.pid),
                     "bare": psutil.Process(bare.pid),
                     "bare_multi": psutil.Process(bare_multi.pid)}
        phases["idle"] = measure_phase(processes, publisher, None, min(args.window, 4.0))
        for resolution in ("480p", "1080p"):
            msg = make_image_msg(*RESOLUTIONS[resolution])
            phases[resolution] = measure_phase(processes, publisher, msg, args.window)
            phase = phases[resolution]
            print(f"{resolution} at {RATE_HZ:g} Hz: node {phase['node_cpu_percent']:.1f} % of a "
                  f"core, bare subscriber {phase['bare_cpu_percent']:.1f} % (with a 4-thread "
                  f"MultiThreadedExecutor {phase['bare_multi_cpu_percent']:.1f} %), node beyond "
                  f"bare {phase['node_beyond_bare_percent']:.1f} %", flush=True)
        publish = publish_cost(args.publishes)
        print(f"publish mask + labels + overlay at 1080p: {publish['total_ms']:.1f} ms "
              f"(render + convert {publish['render_convert_ms']:.1f} ms, publish() "
              f"{publish['publish_calls_ms']:.1f} ms)", flush=True)
    finally:
        bare_multi.send_signal(signal.SIGINT)
        bare.send_signal(signal.SIGINT)
        try:
            bare_multi.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            bare_multi.kill()
        try:
            out, _ = bare.communicate(timeout=15)
            received = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
        except (subprocess.TimeoutExpired, ValueError):
            bare.kill()
        node_process.stop()
        publisher_node.destroy_node()
        rclpy.try_shutdown()
    print(f"idle: node {phases['idle']['node_cpu_percent']:.1f} %, bare "
          f"{phases['idle']['bare_cpu_percent']:.1f} %; bare subscriber received {received}")
    write_result("node_costs", {"command": command_line(), "rate_hz": RATE_HZ,
                                "window_s": args.window, "phases": phases,
                                "bare_received": received, "publish_1080p": publish,
                                "dds_profile": profiles_file(env)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
