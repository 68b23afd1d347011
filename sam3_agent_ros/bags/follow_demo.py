"""``sam3-agent demo-follow``: the node following objects on the moving sample bag, scored.

Steps: put DDS on loopback; start ``sam3_agent_node`` (offline backends, depth on) with the
camera topics remapped onto its inputs; replay ``data/sample_moving/`` (its ``/query`` messages
start and stop following, see ``moving_sample.py``); collect ``~/result`` and ``~/follow/*``;
print per followed query the IoU per frame and its mean, the 3D error, how following ended
(``stopped`` / ``lost``), write overlays of the followed masks to ``OUT/`` and a report to
``OUT/report.json``. The node subprocess is always stopped, whatever happens.
"""

from __future__ import annotations

import fcntl
import json
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sam3_agent_ros.bags import moving_sample, sample
from sam3_agent_ros.bags.demo_scoring import backends_lines, mono8_to_mask
from sam3_agent_ros.bags.follow_scoring import FollowOutcome, format_outcome, score_follow
from sam3_agent_ros.bags.node_process import NodeProcess, node_arguments, node_command, node_env
from sam3_agent_ros.config import OFFLINE_BACKENDS, nest

LOST_TIMEOUT_S = 1.0
DEMO_FOLLOW_PARAMETERS = {
    **nest(OFFLINE_BACKENDS),  # the demo runs without a model, and says so
    "depth": {"enabled": True},
    "follow": {"lost_timeout_s": LOST_TIMEOUT_S},
    "image_qos": "reliable",  # a bag player publishes reliably; keep every frame
}
OUTPUT_TOPICS = {"result": "/sam3_agent/result", "status": "/sam3_agent/follow/status",
                 "mask": "/sam3_agent/follow/mask", "target": "/sam3_agent/follow/target"}
OVERLAY_EVERY = 10  # write every n-th followed frame's overlay (and the last)


@dataclass
class FollowDemoOptions:
    out_dir: Path = Path("out/demo_follow")
    sample_dir: Path | None = None
    params_file: Path | None = None
    overrides: list[str] = field(default_factory=list)
    rate: float = 1.0
    startup_timeout_s: float = 60.0
    settle_timeout_s: float = 10.0  # after the bag: wait this long for the final statuses


@dataclass
class Collected:
    """What the listener received, by kind (filled from the executor thread)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    results: list[dict] = field(default_factory=list)
    statuses: list[dict] = field(default_factory=list)
    masks: dict[int, np.ndarray] = field(default_factory=dict)  # stamp ns -> mask
    targets: dict[int, np.ndarray] = field(default_factory=dict)  # stamp ns -> xyz
    colour: dict[int, bytes] = field(default_factory=dict)  # stamp ns -> CDR of the bag frame


def run_follow_demo(options: FollowDemoOptions, out=None) -> int:
    """Run the demo; returns 0 when every followed query meets its targets."""
    out = out or sys.stdout
    started = time.monotonic()
    report = {"error": None, "queries": []}
    try:
        sample_dir = options.sample_dir or moving_sample.default_dir()
        truth = sample.load_ground_truth(sample_dir)
        description = moving_sample.load_description(sample_dir)
    except (FileNotFoundError, OSError, ValueError, KeyError) as exc:
        print(f"[demo-follow] cannot load the moving sample: {exc} (make it with "
              "scripts/make_moving_bag.py)", file=out)
        return 1
    options.out_dir.mkdir(parents=True, exist_ok=True)
    with open(options.out_dir / ".demo.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            print(f"[demo-follow] another demo is writing to {options.out_dir}", file=out)
            return 1
        outcomes = _run_locked(options, sample_dir, truth, description, report, out)
    for outcome in outcomes:
        for line in format_outcome(outcome):
            print(line, file=out)
    for line in backends_lines([o.backends for o in outcomes]):
        print(line, file=out)
    ok = report["error"] is None and outcomes and all(o.ok for o in outcomes)
    print(f"followed queries correct: {sum(o.ok for o in outcomes)}/{len(outcomes)}; "
          f"overlays in {options.out_dir}; wall time {time.monotonic() - started:.1f} s",
          file=out)
    if report["error"]:
        print(f"error: {report['error']}", file=out)
    report["queries"] = [o.to_json() for o in outcomes]
    (options.out_dir / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    out.flush()
    return 0 if ok else 1


def _run_locked(options, sample_dir: Path, truth, description: dict, report: dict,
                out) -> list[FollowOutcome]:
    import yaml

    from sam3_agent_ros.ros.dds import apply_demo_env

    out_dir = options.out_dir
    for old in out_dir.glob("*.png"):
        old.unlink()
    params_file = out_dir / "demo_params.yaml"
    params_file.write_text(yaml.safe_dump({"/**": {"ros__parameters": DEMO_FOLLOW_PARAMETERS}},
                                          sort_keys=False))
    params_files = [params_file] + ([options.params_file] if options.params_file else [])
    try:  # before rclpy.init here; inherited by the node subprocess
        where = apply_demo_env()
    except ValueError as exc:
        report["error"] = str(exc)
        return []
    print(f"[demo-follow] {where}; sample {sample_dir / sample.BAG_DIRNAME}", file=out)
    process = NodeProcess(node_command() + node_arguments(params_files, options.overrides),
                          out_dir / "node.log", node_env())
    collected = Collected()
    previous_sigterm = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
        _session(options, sample_dir, description, process, collected, out)
    except KeyboardInterrupt:
        report["error"] = "interrupted"
    except (RuntimeError, OSError, ValueError) as exc:
        report["error"] = str(exc)
        print(f"[demo-follow] node log ({process.log_path}), last lines:\n{process.log_tail()}",
              file=out)
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)
        process.stop()
    return _score(options, truth, description, collected)


def _raise_keyboard_interrupt(*_args) -> None:
    raise KeyboardInterrupt


def _followed_queries(description: dict) -> list[dict]:
    return [q for q in description["queries"] if q.get("follow")]


def _session(options, sample_dir: Path, description: dict, process: NodeProcess,
             collected: Collected, out) -> None:
    """The listener node, the replay, and the wait for every followed query's final status."""
    import rclpy
    from geometry_msgs.msg import PointStamped
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
    from rclpy.signals import SignalHandlerOptions
    from sensor_msgs.msg import Image
    from std_msgs.msg import String

    from sam3_agent_ros.bags.replay import replay_bag

    context = rclpy.context.Context()
    rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("sam3_agent_demo_follow", context=context)
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
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        mask = mono8_to_mask(msg.height, msg.width, msg.step, bytes(msg.data))
        with collected.lock:
            collected.masks[stamp] = mask

    def on_target(msg):
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        with collected.lock:
            collected.targets[stamp] = np.array([msg.point.x, msg.point.y, msg.point.z])

    node.create_subscription(String, OUTPUT_TOPICS["result"], on_json("results"), qos)
    node.create_subscription(String, OUTPUT_TOPICS["status"], on_json("statuses"), qos)
    node.create_subscription(Image, OUTPUT_TOPICS["mask"], on_mask, qos)
    node.create_subscription(PointStamped, OUTPUT_TOPICS["target"], on_target, qos)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    stop = threading.Event()
    spinner = threading.Thread(target=lambda: _spin(executor, stop), daemon=True)
    spinner.start()
    try:
        _wait_for_node(node, process, options.startup_timeout_s)

        def on_publish(message, topic, wall):
            if message.topic == sample.COLOR_TOPIC:
                with collected.lock:
                    collected.colour[message.timestamp_ns] = message.data

        followed = _followed_queries(description)
        print(f"[demo-follow] node active; replaying {description['frame_count']} frames, "
              f"{len(followed)} followed queries", file=out)
        replay_bag(sample_dir / sample.BAG_DIRNAME, node, rate=options.rate, stop=stop,
                   on_publish=on_publish,
                   wait_for_topics=(sample.COLOR_TOPIC, sample.QUERY_TOPIC), wait_timeout_s=10.0)
        ids = {q["query_id"] for q in followed}
        deadline = time.monotonic() + options.settle_timeout_s
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
        stop.set()
        spinner.join(timeout=2.0)
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown(context=context)


def _spin(executor, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            executor.spin_once(timeout_sec=0.1)
        except Exception:  # shutting down
            if stop.is_set():
                return
            raise


def _wait_for_node(node, process: NodeProcess, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    inputs = (sample.COLOR_TOPIC, sample.QUERY_TOPIC, sample.DEPTH_TOPIC,
              sample.CAMERA_INFO_TOPIC)
    while True:
        process.check_starting()
        if all(node.count_subscribers(t) > 0 for t in inputs) and all(
                node.count_publishers(t) > 0 for t in OUTPUT_TOPICS.values()):
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"the node did not become active within {timeout_s:.0f} s")
        time.sleep(0.1)
    time.sleep(0.5)  # let our subscriptions match the node's publishers


def _print_transition(statuses: list[dict], out) -> None:
    """A line when a followed query starts tracking, is lost or stops (executor thread)."""
    status = statuses[-1]
    earlier = [s for s in statuses[:-1] if s["query_id"] == status["query_id"]]
    if earlier and earlier[-1]["state"] == status["state"]:
        return
    stamp = status["frame"]["sec"] + status["frame"]["nanosec"] / 1e9
    reason = f" ({status['reason']})" if status.get("reason") else ""
    print(f"[demo-follow] {status['query_id']}: {status['state']} at frame stamp "
          f"{stamp:.2f}{reason}", file=out)
    out.flush()


def _score(options, truth, description: dict, collected: Collected) -> list[FollowOutcome]:
    with collected.lock:
        results = {r["query_id"]: r for r in collected.results}
        statuses, masks = list(collected.statuses), dict(collected.masks)
        targets, colour = dict(collected.targets), dict(collected.colour)
    outcomes = []
    for query in _followed_queries(description):
        outcome = FollowOutcome(query["query_id"], query["query"], query["expected"],
                                query["ends"])
        result = results.get(query["query_id"]) or {}
        outcome.answer, outcome.backends = result.get("status"), result.get("backends")
        mine = [s for s in statuses if s["query_id"] == query["query_id"]]
        score_follow(outcome, mine, masks, targets, truth, description["leaves_view_stamp_ns"],
                     LOST_TIMEOUT_S)
        _write_overlays(options.out_dir, query["query_id"], mine, masks, colour)
        outcomes.append(outcome)
    return outcomes


def _write_overlays(out_dir: Path, query_id: str, statuses: list[dict],
                    masks: dict[int, np.ndarray], colour: dict[int, bytes]) -> None:
    import cv2
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import Image

    from sam3_agent_ros import render
    from sam3_agent_ros.bags.follow_scoring import stamp_of
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
