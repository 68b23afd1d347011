"""Costs of the ROS node over rclpy (DDS confined to loopback).

1. CPU of the node process (``sam3_agent_node``, offline backends, autostart, image_qos
   sensor_data) receiving rgb8 frames at 30 Hz with no query running, next to a bare rclpy
   subscriber process (bench/ros_peer.py: same topic, same QoS, a callback that keeps a
   reference, SingleThreadedExecutor) fed by the same publisher in the same run, and a second one
   spinning a 4-thread MultiThreadedExecutor like the node (to tell executor cost from node
   code). Reported: % of one core for each over a measured window (after 1 s of warm-up), idle
   (no frames), 640x480 and 1920x1080; the node's cost beyond the DDS receive cost is the
   difference.
2. Time to publish an answer's images for a 1920x1080 frame with 2 selected masks, through the
   node's own publishers (an in-process ``Sam3AgentNode``, configured, offline backends) with the
   bare subscriber listening on every image topic (reliable), side by side in one run:
   - before: the wave-2 answer path (``wave2_images``: the union and the label image each painted
     from the masks, the overlay drawn at full size and sent as rgb8: mask + labels + overlay);
   - after: ``ros/outputs.py`` as the node runs it (pixel boxes found once, labels painted once
     and the union derived from them, the overlay drawn once at ``overlay.max_side``, default
     960), on the same topics (mask + labels + overlay), and the variants: the JPEG
     ``overlay/compressed`` instead of the raw overlay, a full-size JPEG (``overlay.max_side``
     0), mask + labels alone.
   The same for one follow-mode update (``~/follow/*``, every frame while following): before
   (wave 2: mask + labels) and after (mask + labels, with ``follow/overlay/compressed``, and the
   overlay alone). Each figure: median wall time and median CPU time of the publishing thread
   over ``--publishes`` rounds that run every case in turn (build + ``publish()``; the result /
   status JSON included).

3. The per-frame decode: one camera message (bgr8, as most drivers send) taken by the three
   consumers of a frame (query worker, follow, concepts): before, each converts it
   (``message_to_frame`` three times); after, ``FrameReader`` decodes it once and hands the same
   ``Frame`` to the others. Median ms per frame over ``--decodes`` frames, 480p and 1080p
   (``--decode-only``: this part alone, no node, no DDS).

4. What ``target_frame`` and the target's point cloud add to an answer at 1080p with two masks,
   the node's path side by side with the camera-frame path (``bench/tf_cloud.py``, which holds
   the method; ``--robot-frame-only``: this part alone, no node, no DDS). Target: 2 ms.

Run alone: ``.venv/bin/python bench/node_costs.py [--window 8]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
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
from tf_cloud import report as report_robot_frame  # noqa: E402
from tf_cloud import robot_frame_cost  # noqa: E402

from sam3_agent_demo.domains import reserved_loopback_env  # noqa: E402  (after common sets sys.path)
from sam3_agent_ros.ros.dds import profiles_file  # noqa: E402

RATE_HZ = 30.0
NAMESPACE = "/bench"
IMAGE_TOPIC = f"{NAMESPACE}/image"
PUBLISH_NAMESPACE = "/bench_pub"
OUTPUT_TOPICS = [f"{PUBLISH_NAMESPACE}/sam3_agent/{name}" for name in (
    "mask", "labels", "overlay", "overlay/compressed", "follow/mask", "follow/labels",
    "follow/overlay/compressed")]


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


def wave2_images(image, masks, header) -> dict:
    """The answer images as the wave-2 node built them (kept here for the before/after figure;
    with today's render functions): union and labels each painted from the masks (each mask's
    box found again by each), the overlay drawn at full size and sent as rgb8."""
    from sam3_agent_ros import render
    from sam3_agent_ros.ros.conversions import mono8_image, rgb8_image

    shape = image.shape[:2]
    return {"mask": mono8_image(render.union_mask(masks, shape), header),
            "labels": mono8_image(render.label_image(masks, shape), header),
            "overlay": rgb8_image(render.overlay_masks(
                image, masks, [str(k + 1) for k in range(len(masks))]), header)}


def timed(steps: dict, publishes: int) -> dict:
    """Median wall and publishing-thread CPU ms of each of ``steps`` (name -> callable), run in
    turn ``publishes`` times (interleaved, so a busy moment of the machine hits them all; a
    first round warms up); a pause after each lets the subscriber take the messages."""
    walls: dict[str, list[float]] = {name: [] for name in steps}
    cpus: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(publishes + 1):
        for name, step in steps.items():
            wall, cpu = time.perf_counter(), time.thread_time()
            step()
            walls[name].append(time.perf_counter() - wall)
            cpus[name].append(time.thread_time() - cpu)
            time.sleep(0.03)
    return {name: {"wall_ms": round(median(walls[name][1:]) * 1000, 2),
                   "cpu_ms": round(median(cpus[name][1:]) * 1000, 2)} for name in steps}


def publish_cost(publishes: int) -> dict:
    """ms to publish an answer's images and a follow update's at 1080p, before and after."""
    from rclpy.parameter import Parameter
    from std_msgs.msg import String

    from sam3_agent_ros import render
    from sam3_agent_ros.config import Config
    from sam3_agent_ros.core.types import Frame, Mask, QueryStatus, Result
    from sam3_agent_ros.pipeline.measurement import Answer
    from sam3_agent_ros.ros.conversions import frame_header, mono8_image
    from sam3_agent_ros.ros.messages.answer import answer_messages, follow_messages
    from sam3_agent_ros.ros.messages.images import FOLLOW_IMAGE_KINDS, IMAGE_KINDS
    from sam3_agent_ros.ros.node import Sam3AgentNode
    from sam3_agent_ros.ros.output_topics import topic_of

    width, height = RESOLUTIONS["1080p"]
    image = bench_frame(width, height)
    masks, scores, boxes = blob_masks(width, height, 6)
    frame = Frame(image, 1, 0, "camera")
    selected = [Mask.from_array(masks[k], scores[k], tuple(boxes[k])) for k in (0, 3)]
    result = Result("bench", "the mugs", QueryStatus.SUCCEEDED, masks=selected, frame=frame)
    header = frame_header(frame)
    mask_list = [m.mask for m in result.masks]
    status = {"query_id": "bench", "state": "tracking", "objects": [{"id": 1}, {"id": 2}]}
    defaults = Config().overlay
    full_size = dataclasses.replace(defaults, max_side=0)
    node = Sam3AgentNode(namespace=PUBLISH_NAMESPACE, parameter_overrides=[
        Parameter("autostart", value=False), Parameter("llm.backend", value="offline"),
        Parameter("segmenter.backend", value="color"), Parameter("publish_overlay", value=True)])
    try:
        node.trigger_configure()
        # The node's own publishers (its outputs room, ros/outputs.py), held by topic name;
        # an update's field names its topic in the table (ros/output_topics.py).
        publishers = node._life.outputs._publishers
        answer_out, follow_out = "answer", "follow"

        def publisher(out, kind):
            return publishers[topic_of(out, kind)]

        wait_for(lambda: all(publisher(out, k).get_subscription_count() >= 1
                             for kinds, out in ((IMAGE_KINDS, answer_out),
                                                (FOLLOW_IMAGE_KINDS, follow_out))
                             for k in kinds), 20.0,
                 "the bare subscriber on the output topics")
        time.sleep(0.5)

        def send(out, images, text_kind, text):
            for kind, message in images.items():
                publisher(out, kind).publish(message)
            publisher(out, text_kind).publish(String(data=text))

        def answer_before():
            send(answer_out, wave2_images(image, mask_list, header), "result",
                 json.dumps(result.to_json()))

        def answer_after(kinds, overlay=defaults):
            built = answer_messages(Answer(result), kinds, overlay)
            send(answer_out, built.images, "result", built.result.data)

        def follow_before():  # wave 2: invisible objects as empty arrays, two paintings
            shape = image.shape[:2]
            arrays = [m if m is not None else np.zeros(shape, bool) for m in mask_list]
            send(follow_out, {"mask": mono8_image(render.union_mask(arrays, shape), header),
                              "labels": mono8_image(render.label_image(arrays, shape), header)},
                 "status", json.dumps(status))

        def follow_after(kinds):
            built = follow_messages(frame, mask_list, status, None, kinds, None, defaults)
            send(follow_out, built.images, "status", built.status.data)

        raw = ("mask", "labels", "overlay")  # the topics of the wave-2 figure
        with_jpeg = ("mask", "labels", "overlay/compressed")
        answer = timed({
            "before": answer_before,
            "before_build_only": lambda: wave2_images(image, mask_list, header),
            "after": lambda: answer_after(raw),
            "after_build_only": lambda: answer_messages(Answer(result), raw, defaults),
            "after_jpeg": lambda: answer_after(with_jpeg),
            "after_full_size_jpeg": lambda: answer_after(with_jpeg, full_size),
            "after_mask_labels": lambda: answer_after(("mask", "labels")),
        }, publishes)
        follow = timed({
            "before": follow_before,
            "after": lambda: follow_after(("mask", "labels")),
            "after_with_overlay": lambda: follow_after(with_jpeg),
            "overlay_only": lambda: follow_after(("overlay/compressed",)),
        }, publishes)
        sizes = {kind: len(message.data) for kind, message in answer_messages(
            Answer(result), IMAGE_KINDS, defaults).images.items()}
    finally:
        node.release()
        node.destroy_node()
    return {"publishes": publishes, "overlay_max_side": defaults.max_side,
            "jpeg_quality": defaults.jpeg_quality, "answer": answer, "follow": follow,
            "bytes": sizes}


def decode_cost(decodes: int, consumers: int = 3) -> dict:
    """Median ms to turn one camera message into the Frame of every consumer, before (each
    decodes) and after (``FrameReader``: once per message), per resolution."""
    import statistics

    from sam3_agent_ros.ros.conversions import FrameReader, message_to_frame

    figures = {}
    for resolution in ("480p", "1080p"):
        width, height = RESOLUTIONS[resolution]
        messages = []
        for _ in range(decodes):
            msg = make_image_msg(width, height)
            msg.encoding = "bgr8"  # a channel swap: what most camera drivers send
            messages.append(msg)
        reader = FrameReader()
        before, after = [], []
        for msg in messages:
            start = time.perf_counter()
            for _ in range(consumers):
                message_to_frame(msg)
            before.append((time.perf_counter() - start) * 1e3)
            start = time.perf_counter()
            for _ in range(consumers):
                reader.frame(msg)
            after.append((time.perf_counter() - start) * 1e3)
        figures[resolution] = {"before_ms": statistics.median(before),
                               "after_ms": statistics.median(after), "consumers": consumers}
        print(f"decode per frame at {resolution}, {consumers} consumers: before "
              f"{figures[resolution]['before_ms']:.2f} ms, after "
              f"{figures[resolution]['after_ms']:.2f} ms", flush=True)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--window", type=float, default=8.0, help="measured seconds per phase")
    parser.add_argument("--publishes", type=int, default=20)
    parser.add_argument("--decodes", type=int, default=30, help="frames per decode figure")
    parser.add_argument("--decode-only", action="store_true",
                        help="only the per-frame decode figure (no node, no DDS)")
    parser.add_argument("--robot-frame-only", action="store_true",
                        help="only the robot frame + cloud figure (no node, no DDS)")
    parser.add_argument("--pairs", type=int, default=30, help="pairs of the robot frame figure")
    args = parser.parse_args(argv)
    if args.decode_only:
        write_result("node_costs_decode", {"command": command_line(),
                                           "decode": decode_cost(args.decodes)})
        return 0
    if args.robot_frame_only:
        robot_frame = robot_frame_cost(args.pairs)
        report_robot_frame(robot_frame)
        write_result("node_costs_robot_frame", {"command": command_line(), **robot_frame})
        return 0
    env = reserved_loopback_env()
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
    phases, received, publish, decode, robot_frame = {}, {}, {}, {}, {}
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
        decode = decode_cost(args.decodes)
        robot_frame = robot_frame_cost(args.pairs)
        report_robot_frame(robot_frame)
        for part in ("answer", "follow"):
            for case, figure in publish[part].items():
                print(f"publish at 1080p, {part} {case}: {figure['wall_ms']:.1f} ms "
                      f"(CPU {figure['cpu_ms']:.1f} ms)", flush=True)
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
                                "decode": decode, "robot_frame": robot_frame,
                                "dds_profile": profiles_file(env)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
