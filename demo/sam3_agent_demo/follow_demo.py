"""``sam3-agent demo-follow``: the node following objects on the moving sample bags, scored.

Steps (the shared ones in ``harness.py``): lock the output folder; put DDS on loopback; start
``sam3_agent_node`` (offline backends, depth on) with the camera topics remapped onto its inputs;
replay ``data/sample_moving/`` then ``data/sample_grasp/`` (their ``/query`` messages start and
stop following, see ``moving_sample.py``; ``--sample DIR`` replays that one bag only); collect
``~/result`` and ``~/follow/*``; print per followed query the IoU per frame and its mean, the 3D
error, the IoU with a look-alike, how following ended (``stopped`` / ``lost``), write overlays of
the followed masks to ``OUT/`` and a report to ``OUT/report.json`` (``follow_scoring.py``
scores). The node subprocess is always stopped, whatever happens.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sam3_agent_demo import harness, moving_sample, sample
from sam3_agent_demo.follow_scoring import (
    FollowOutcome,
    format_summary,
    lost_bound_s,
    score_follow,
)
from sam3_agent_demo.harness import DemoOptions
from sam3_agent_demo.listener import Listener, header_stamp_ns, mono8_to_mask
from sam3_agent_demo.node_process import NodeProcess
from sam3_agent_demo.report import DemoReport
from sam3_agent_ros.config import OFFLINE_BACKENDS, nest

TAG = "demo-follow"
RESULT_TIMEOUT_S = 10.0  # after the bag: how long to wait for the final statuses
LOST_TIMEOUT_S = 1.0
REDETECT_EVERY = 10  # frames; the bags are 10 Hz: `flow` re-detects at least once a second
DEMO_FOLLOW_PARAMETERS = {
    **nest(OFFLINE_BACKENDS),  # the demo runs without a model, and says so
    "depth": {"enabled": True},
    "follow": {"lost_timeout_s": LOST_TIMEOUT_S, "redetect_every": REDETECT_EVERY},
    "image_qos": "reliable",  # a bag player publishes reliably; keep every frame
}
OUTPUT_TOPICS = {"result": "/sam3_agent/result", "status": "/sam3_agent/follow/status",
                 "mask": "/sam3_agent/follow/mask", "target": "/sam3_agent/follow/target"}
OVERLAY_EVERY = 10  # write every n-th followed frame's overlay (and the last)


@dataclass
class Collected:
    """What the listener received, by kind (filled from the executor thread)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    results: list[dict] = field(default_factory=list)
    statuses: list[dict] = field(default_factory=list)
    masks: dict[int, np.ndarray] = field(default_factory=dict)  # stamp ns -> mask
    targets: dict[int, np.ndarray] = field(default_factory=dict)  # stamp ns -> xyz
    colour: dict[int, bytes] = field(default_factory=dict)  # stamp ns -> CDR of the bag frame


@dataclass(frozen=True)
class Bag:
    """One moving sample: its folder, ground truth and description (``ground_truth.json``)."""

    sample_dir: Path
    truth: sample.GroundTruth
    description: dict


def load_bags(options: DemoOptions) -> list[Bag]:
    """``--sample DIR``, else the bundled moving and grasp samples, in replay order."""
    dirs = ([options.sample_dir] if options.sample_dir
            else [spec.default_dir() for spec in moving_sample.SAMPLES])
    return [Bag(d, sample.load_ground_truth(d), moving_sample.load_description(d)) for d in dirs]


def run_follow_demo(options: DemoOptions, out=None) -> int:
    """Run the demo; returns 0 when every followed query meets its targets, 130 when
    interrupted (one line, no summary)."""
    out = out or sys.stdout
    started = time.monotonic()
    report = DemoReport()
    try:
        bags = load_bags(options)
    except (FileNotFoundError, OSError, ValueError, KeyError) as exc:
        report.error = (f"cannot load the moving sample: {exc} (make it with "
                        "scripts/make_moving_bag.py)")
    else:
        try:
            with harness.output_lock(options.out_dir):
                _run_locked(options, bags, report, out)
                report.wall_s = time.monotonic() - started
                report.write(options.out_dir)
        except harness.OutputBusy as exc:
            report.error = str(exc)
    interrupted = harness.interrupted_exit(report, TAG, options.out_dir, out)
    if interrupted is not None:
        return interrupted
    for line in format_summary(report, options.out_dir):
        print(line, file=out)
    out.flush()
    return 0 if report.ok else 1


def _run_locked(options: DemoOptions, bags: list[Bag], report: DemoReport, out) -> None:
    for old in options.out_dir.glob("*.png"):
        old.unlink()
    collected = Collected()
    harness.run_node(TAG, options, DEMO_FOLLOW_PARAMETERS, bags[0].sample_dir, report, out,
                     lambda process: _session(options, bags, process, collected, out))
    report.outcomes = [outcome for bag in bags
                       for outcome in _score(options, bag, collected)]


def _followed_queries(description: dict) -> list[dict]:
    return [q for q in description["queries"] if q.get("follow")]


def _session(options: DemoOptions, bags: list[Bag], process: NodeProcess,
             collected: Collected, out) -> None:
    """The listener node, the replays (one bag after the other), and the wait for every followed
    query's final status."""
    from geometry_msgs.msg import PointStamped
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image
    from std_msgs.msg import String

    from sam3_agent_ros.bags.replay import replay_bag

    listener = Listener("sam3_agent_demo_follow")
    node = listener.node
    qos = QoSProfile(reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST,
                     depth=100)

    def on_json(kind):
        def callback(msg):
            with collected.lock:
                getattr(collected, kind).append(json.loads(msg.data))
                if kind == "statuses":
                    _print_transition(collected.statuses, out)
        return callback

    def on_mask(msg):
        mask = mono8_to_mask(msg.height, msg.width, msg.step, bytes(msg.data))
        with collected.lock:
            collected.masks[header_stamp_ns(msg.header)] = mask

    def on_target(msg):
        with collected.lock:
            collected.targets[header_stamp_ns(msg.header)] = np.array([msg.point.x, msg.point.y,
                                                                 msg.point.z])

    try:
        node.create_subscription(String, OUTPUT_TOPICS["result"], on_json("results"), qos)
        node.create_subscription(String, OUTPUT_TOPICS["status"], on_json("statuses"), qos)
        node.create_subscription(Image, OUTPUT_TOPICS["mask"], on_mask, qos)
        node.create_subscription(PointStamped, OUTPUT_TOPICS["target"], on_target, qos)
        listener.start()
        listener.wait_for_node(
            process, options.startup_timeout_s,
            subscribed=(sample.COLOR_TOPIC, sample.QUERY_TOPIC, sample.DEPTH_TOPIC,
                        sample.CAMERA_INFO_TOPIC),
            published=tuple(OUTPUT_TOPICS.values()))

        def on_publish(message, topic, wall):
            if message.topic == sample.COLOR_TOPIC:
                with collected.lock:
                    collected.colour[message.timestamp_ns] = message.data

        ids = set()
        for bag in bags:
            followed = _followed_queries(bag.description)
            ids |= {q["query_id"] for q in followed}
            print(f"[{TAG}] node active; replaying {bag.sample_dir.name}: "
                  f"{bag.description['frame_count']} frames, {len(followed)} followed queries",
                  file=out)
            replay_bag(bag.sample_dir / sample.BAG_DIRNAME, node, rate=options.rate,
                       stop=listener.stop, on_publish=on_publish,
                       wait_for_topics=(sample.COLOR_TOPIC, sample.QUERY_TOPIC),
                       wait_timeout_s=10.0)
        deadline = time.monotonic() + options.result_timeout_s
        while time.monotonic() < deadline:
            with collected.lock:
                ended = {s["query_id"] for s in collected.statuses
                         if s.get("state") in ("lost", "stopped")}
            if ids <= ended:
                break
            if not process.running():
                raise RuntimeError(f"the node exited (status {process.process.returncode})")
            time.sleep(0.05)
        time.sleep(0.3)  # a duplicate final status, should the node send one
    finally:
        listener.close()


def _print_transition(statuses: list[dict], out) -> None:
    """A line when a followed query starts tracking, is lost or stops (executor thread)."""
    status = statuses[-1]
    earlier = [s for s in statuses[:-1] if s["query_id"] == status["query_id"]]
    if earlier and earlier[-1]["state"] == status["state"]:
        return
    stamp = status["frame"]["sec"] + status["frame"]["nanosec"] / 1e9
    reason = f" ({status['reason']})" if status.get("reason") else ""
    print(f"[{TAG}] {status['query_id']}: {status['state']} at frame stamp "
          f"{stamp:.2f}{reason}", file=out)
    out.flush()


def _score(options, bag: Bag, collected: Collected) -> list[FollowOutcome]:
    truth, description = bag.truth, bag.description
    redetect_period_s = REDETECT_EVERY / float(description.get("rate_hz") or 10.0)
    with collected.lock:
        results = {r["query_id"]: r for r in collected.results}
        statuses, masks = list(collected.statuses), dict(collected.masks)
        targets, colour = dict(collected.targets), dict(collected.colour)
    outcomes = []
    for query in _followed_queries(description):
        outcome = FollowOutcome(query["query_id"], query["query"], query["expected"],
                                query["ends"])
        outcome.look_alike = query.get("look_alike")
        # Samples made before the grasp sample name only the object that leaves the view.
        gone_ns = query.get("gone_stamp_ns", description.get("leaves_view_stamp_ns"))
        outcome.gone = query.get("gone", "left the view" if gone_ns is not None else None)
        result = results.get(query["query_id"]) or {}
        outcome.answer, outcome.backends = result.get("status"), result.get("backends")
        mine = [s for s in statuses if s["query_id"] == query["query_id"]]
        score_follow(outcome, mine, masks, targets, truth, gone_ns,
                     lost_bound_s(outcome.gone, LOST_TIMEOUT_S, redetect_period_s))
        _write_overlays(options.out_dir, query["query_id"], mine, masks, colour)
        outcomes.append(outcome)
    return outcomes


def _write_overlays(out_dir: Path, query_id: str, statuses: list[dict],
                    masks: dict[int, np.ndarray], colour: dict[int, bytes]) -> None:
    import cv2
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import Image

    from sam3_agent_demo.follow_scoring import stamp_of
    from sam3_agent_ros import render
    from sam3_agent_ros.ros.conversions import image_to_rgb

    tracked = [stamp_of(s) for s in statuses if s["state"] == "tracking"]
    chosen = tracked[::OVERLAY_EVERY] + tracked[-1:]
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in query_id)
    for number, stamp in enumerate(chosen):
        if stamp not in masks or stamp not in colour:
            continue
        rgb = image_to_rgb(deserialize_message(bytes(colour[stamp]), Image))
        overlay = render.overlay_masks(rgb, [masks[stamp]], ["1"])
        path = out_dir / f"{safe}_{number:02d}.png"
        cv2.imwrite(str(path), cv2.cvtColor(overlay, cv2.COLOR_RGB2BGR))
