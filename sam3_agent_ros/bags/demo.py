"""``sam3-agent demo``: the node on the bundled sample bag, scored against its ground truth.

Steps: put DDS on loopback; start ``sam3_agent_node`` in a subprocess (offline backends and depth
on, unless ``--params-file`` / ``-p`` say otherwise) with the camera topics remapped onto its
inputs; record its outputs into ``OUT/output_bag``; replay the bag; print each result as it
arrives; write the overlays as PNGs; print a summary (answered, correct, latency, IoU, 3D error)
and write it as ``OUT/report.json``. The node subprocess is always stopped, whatever happens.
"""

from __future__ import annotations

import fcntl
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from sam3_agent_ros.bags import sample
from sam3_agent_ros.bags.record import NODE_OUTPUT_TOPICS

RESULT_TOPIC = "/sam3_agent/result"
MASK_TOPIC = "/sam3_agent/mask"
OVERLAY_TOPIC = "/sam3_agent/overlay"
IOU_THRESHOLD = 0.8
IMAGE_WAIT_S = 1.0  # how long a result waits for its mask/overlay images before being scored
NODE_STOP_TIMEOUT_S = 10.0
DEMO_PARAMETERS = {
    "llm": {"backend": "offline"},
    "segmenter": {"backend": "color"},
    "depth": {"enabled": True},
    "image_qos": "reliable",  # a bag player publishes reliably; keep every frame
    "query_policy": "queue",  # answer every query of the bag, even with a slow model
}


@dataclass
class DemoOptions:
    out_dir: Path = Path("out/demo")
    sample_dir: Path | None = None
    params_file: Path | None = None
    overrides: list[str] = field(default_factory=list)
    rate: float = 1.0
    startup_timeout_s: float = 60.0
    result_timeout_s: float = 30.0


@dataclass
class QueryOutcome:
    """One query of the bag and what the node answered."""

    query: str
    query_id: str | None
    expected: str | None
    status: str = "unanswered"
    result_count: int = 0
    latency_s: float | None = None  # query published -> result received
    agent_s: float | None = None  # the node's own timings.total_s
    stamp_ns: int | None = None
    frame_index: int | None = None
    iou: float | None = None
    position_m: list[float] | None = None
    position_error_cm: float | None = None
    bbox: list[float] | None = None
    centroid: list[float] | None = None
    overlay_png: str | None = None
    correct: bool = False
    problem: str | None = None


@dataclass
class DemoReport:
    outcomes: list[QueryOutcome]
    wall_s: float = 0.0
    output_bag: str = ""
    output_counts: dict[str, int] = field(default_factory=dict)
    node_log: str = ""
    error: str | None = None

    @property
    def answered(self) -> int:
        return sum(1 for o in self.outcomes if o.result_count > 0)

    @property
    def correct(self) -> int:
        return sum(1 for o in self.outcomes if o.correct)

    @property
    def ok(self) -> bool:
        return self.error is None and self.correct == len(self.outcomes)

    def to_json(self) -> dict:
        return {"answered": self.answered, "correct": self.correct, "total": len(self.outcomes),
                "wall_s": round(self.wall_s, 3), "output_bag": self.output_bag,
                "output_counts": self.output_counts, "node_log": self.node_log,
                "error": self.error, "queries": [asdict(o) for o in self.outcomes]}


# --- pure scoring -------------------------------------------------------------------------------


def mono8_to_mask(height: int, width: int, step: int, data: bytes) -> np.ndarray:
    """A mono8 image's bytes -> bool (H, W) mask of the non-zero pixels."""
    rows = np.frombuffer(data, np.uint8)[:height * step].reshape(height, step)
    return rows[:, :width] > 0


def score_outcome(outcome: QueryOutcome, result: dict, truth: sample.GroundTruth,
                  mask: np.ndarray | None) -> None:
    """Fill ``outcome`` from the result JSON, the received ~/mask and the ground truth."""
    outcome.status = str(result.get("status"))
    stamp = result.get("stamp") or {}
    outcome.stamp_ns = int(stamp.get("sec", 0)) * 1_000_000_000 + int(stamp.get("nanosec", 0))
    outcome.frame_index = truth.frame_index(outcome.stamp_ns)
    outcome.agent_s = (result.get("timings") or {}).get("total_s")
    masks = result.get("masks") or []
    if masks:
        outcome.bbox = masks[0].get("bbox")
        outcome.centroid = masks[0].get("centroid")
        position = masks[0].get("position")
        if isinstance(position, dict):
            outcome.position_m = [float(position[k]) for k in ("x", "y", "z")]
    if outcome.frame_index is None:
        outcome.problem = "the result's stamp is not the stamp of a frame of the bag"
        return
    if outcome.expected is None:
        outcome.correct = outcome.status == "no_mask"
        if not outcome.correct:
            outcome.problem = f"expected no_mask, got {outcome.status}"
        return
    if outcome.status != "succeeded":
        outcome.problem = f"expected {outcome.expected}, got {outcome.status}"
        return
    truth_mask = truth.mask(outcome.frame_index, outcome.expected)
    if mask is not None:
        outcome.iou = sample.mask_iou(mask, truth_mask)
    if outcome.position_m is not None:
        error = np.asarray(outcome.position_m) - truth.position(outcome.frame_index,
                                                                outcome.expected)
        outcome.position_error_cm = float(np.linalg.norm(error) * 100.0)
    if outcome.iou is None:
        outcome.problem = "no ~/mask image arrived for this result"
    elif outcome.iou < IOU_THRESHOLD:
        outcome.problem = f"IoU {outcome.iou:.2f} with {outcome.expected} is below {IOU_THRESHOLD}"
    else:
        outcome.correct = True


def format_outcome(outcome: QueryOutcome, label: str) -> str:
    """The one line printed when a result arrives."""
    parts = [f"[{label}] {outcome.query!r}: {outcome.status}"]
    if outcome.bbox is not None:
        parts.append("bbox [" + ", ".join(f"{v:.0f}" for v in outcome.bbox) + "]")
    if outcome.centroid is not None:
        parts.append("centroid (" + ", ".join(f"{v:.0f}" for v in outcome.centroid) + ")")
    if outcome.position_m is not None:
        parts.append("xyz (" + ", ".join(f"{v:.3f}" for v in outcome.position_m) + ") m")
    if outcome.latency_s is not None:
        parts.append(f"latency {outcome.latency_s:.2f} s")
    verdict = "OK" if outcome.correct else "WRONG"
    truth = outcome.expected or "nothing"
    details = [f"truth {truth}"]
    if outcome.iou is not None:
        details.append(f"IoU {outcome.iou:.3f}")
    if outcome.position_error_cm is not None:
        details.append(f"3D error {outcome.position_error_cm:.2f} cm")
    if outcome.problem:
        details.append(outcome.problem)
    return ", ".join(parts) + f"  | {verdict}: " + ", ".join(details)


def format_summary(report: DemoReport) -> list[str]:
    outcomes = report.outcomes
    lines = ["", "=== sam3-agent demo summary ===",
             f"queries answered: {report.answered}/{len(outcomes)}",
             f"correct vs ground truth: {report.correct}/{len(outcomes)} (IoU >= {IOU_THRESHOLD} "
             "for objects that are there, no_mask for the one that is not)"]
    latencies = [o.latency_s for o in outcomes if o.latency_s is not None]
    if latencies:
        lines.append("latency query -> result: " + ", ".join(f"{v:.2f}" for v in latencies)
                     + f" s (mean {np.mean(latencies):.2f} s, max {max(latencies):.2f} s)")
    ious = [o.iou for o in outcomes if o.iou is not None]
    if ious:
        lines.append("IoU: " + ", ".join(f"{v:.3f}" for v in ious))
    errors = [o.position_error_cm for o in outcomes if o.position_error_cm is not None]
    if errors:
        lines.append("3D position error: " + ", ".join(f"{v:.2f}" for v in errors)
                     + f" cm (max {max(errors):.2f} cm)")
    for outcome in outcomes:
        if outcome.problem:
            lines.append(f"problem with {outcome.query!r}: {outcome.problem}")
    if report.output_bag:
        counts = ", ".join(f"{t.rsplit('/', 1)[-1]}: {n}" for t, n in report.output_counts.items())
        lines.append(f"output bag: {report.output_bag} ({counts})")
    if report.error:
        lines.append(f"error: {report.error}")
    lines.append(f"wall time: {report.wall_s:.1f} s")
    return lines


# --- the node subprocess ------------------------------------------------------------------------


def node_command() -> list[str]:
    """The installed ``sam3_agent_node`` (venv bin, ament lib dir, PATH), else the module."""
    prefix = Path(sys.executable).parent
    for candidate in (prefix / "sam3_agent_node",
                      prefix.parent / "lib" / "sam3_agent_ros" / "sam3_agent_node"):
        if candidate.exists():
            return [str(candidate)]
    found = shutil.which("sam3_agent_node")
    return [found] if found else [sys.executable, "-m", "sam3_agent_ros.ros.node"]


def node_arguments(params_files: list[Path], overrides: list[str]) -> list[str]:
    """``--ros-args``: parameters files in order (later win), ``-p`` overrides, topic remaps."""
    args = ["--ros-args"]
    for path in params_files:
        args += ["--params-file", str(path)]
    for override in overrides:
        args += ["-p", override]
    remaps = {"image": sample.COLOR_TOPIC, "depth": sample.DEPTH_TOPIC,
              "camera_info": sample.CAMERA_INFO_TOPIC, "query": sample.QUERY_TOPIC}
    for name, topic in remaps.items():
        args += ["-r", f"{name}:={topic}"]
    return args


class NodeProcess:
    """The node in a subprocess, logging to a file; ``stop()`` always ends it."""

    def __init__(self, command: list[str], log_path: Path, env: dict[str, str]) -> None:
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=env,
                                        preexec_fn=_die_with_parent)

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> int | None:
        """SIGINT (the node shuts down cleanly), then SIGTERM, then SIGKILL."""
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            if self.process.poll() is not None:
                break
            self.process.send_signal(sig)
            try:
                self.process.wait(NODE_STOP_TIMEOUT_S if sig != signal.SIGKILL else None)
            except subprocess.TimeoutExpired:
                continue
        self._log.close()
        return self.process.returncode

    def startup_failure(self) -> str | None:
        """The node's own line saying its autostart failed (it then stays up, inactive)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return None
        for line in text.splitlines():
            if "configure failed" in line or "activate failed" in line:
                return line.strip()
        return None

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def _die_with_parent() -> None:
    """In the child before exec (Linux): SIGTERM it when the demo dies, even by SIGKILL."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _node_env() -> dict[str, str]:
    env = dict(os.environ)
    source_root = str(Path(__file__).resolve().parents[2])
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([source_root] + paths)
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)  # the child's python bootstraps itself
    return env


# --- the run ------------------------------------------------------------------------------------


def run_demo(options: DemoOptions, out=None) -> int:
    """Run the demo; prints as it goes; returns 0 when every query is answered correctly."""
    out = out or sys.stdout
    report = _run(options, out)
    for line in format_summary(report):
        print(line, file=out)
    out.flush()
    return 0 if report.ok else 1


def _run(options: DemoOptions, out) -> DemoReport:

    started = time.monotonic()
    try:
        sample_dir = options.sample_dir or sample.default_sample_dir()
        truth = sample.load_ground_truth(sample_dir)
    except (FileNotFoundError, OSError, ValueError, KeyError) as exc:
        report = DemoReport(outcomes=[], error=f"cannot load the sample: {exc}")
        return report
    outcomes = [QueryOutcome(q["query"], q["query_id"], q["expected"]) for q in truth.queries]
    report = DemoReport(outcomes=outcomes)
    out_dir = options.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / ".demo.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            report.error = f"another demo is writing to {out_dir}; wait for it or use --out"
            return report
        return _run_locked(options, out, truth, report, sample_dir, started)


def _run_locked(options: DemoOptions, out, truth: sample.GroundTruth, report: DemoReport,
                sample_dir: Path, started: float) -> DemoReport:
    from sam3_agent_ros.ros.dds import loopback_env

    outcomes, out_dir = report.outcomes, options.out_dir
    for old in out_dir.glob("*_overlay.png"):
        old.unlink()
    bag_out = out_dir / "output_bag"
    if bag_out.exists():
        shutil.rmtree(bag_out)
    params_file = out_dir / "demo_params.yaml"
    params_file.write_text(_yaml({"/**": {"ros__parameters": DEMO_PARAMETERS}}))
    params_files = [params_file] + ([options.params_file] if options.params_file else [])

    dds = loopback_env()  # a fresh domain, whatever the shell exports: the demo is isolated
    os.environ.update(dds)  # before rclpy.init here, inherited by the node subprocess
    print(f"[demo] DDS on loopback, ROS_DOMAIN_ID={dds['ROS_DOMAIN_ID']}; sample "
          f"{sample_dir / sample.BAG_DIRNAME}", file=out)
    command = node_command() + node_arguments(params_files, options.overrides)
    node_log = out_dir / "node.log"
    report.node_log = str(node_log)
    process = NodeProcess(command, node_log, _node_env())
    session = None
    previous_sigterm = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
        session = _RosSession(truth, outcomes, out_dir, bag_out, out)
        session.run(sample_dir / sample.BAG_DIRNAME, process, options)
    except KeyboardInterrupt:
        report.error = "interrupted"
    except (RuntimeError, OSError, ValueError) as exc:
        report.error = str(exc)
    finally:
        try:
            if session is not None:
                session.close()
        finally:
            signal.signal(signal.SIGTERM, previous_sigterm)
            code = process.stop()
        if report.error and report.error != "interrupted":
            print(f"[demo] node log ({node_log}), last lines:\n{process.log_tail()}", file=out)
        elif code not in (0, None, -signal.SIGINT):
            print(f"[demo] the node exited with status {code} (see {node_log})", file=out)
    if bag_out.exists():
        from sam3_agent_ros.bags.record import read_bag_counts

        report.output_bag = str(bag_out)
        try:
            report.output_counts = read_bag_counts(bag_out)
        except Exception as exc:
            report.error = report.error or f"the output bag does not read back: {exc}"
    report.wall_s = time.monotonic() - started
    (out_dir / "report.json").write_text(json.dumps(report.to_json(), indent=2) + "\n")
    return report


def _raise_keyboard_interrupt(*_args) -> None:
    raise KeyboardInterrupt


def _yaml(tree: dict) -> str:
    import yaml

    return yaml.safe_dump(tree, sort_keys=False)


class _RosSession:
    """The demo's rclpy side: a listener/recorder node spinning in the background, the replay in
    the calling thread's control, results scored as they arrive."""

    def __init__(self, truth: sample.GroundTruth, outcomes: list[QueryOutcome], out_dir: Path,
                 bag_out: Path, out) -> None:
        import rclpy
        from rclpy.executors import MultiThreadedExecutor
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
        from rclpy.signals import SignalHandlerOptions
        from sensor_msgs.msg import Image
        from std_msgs.msg import String

        from sam3_agent_ros.bags.record import BagRecorder

        self.truth, self.outcomes, self.out_dir, self.out = truth, outcomes, out_dir, out
        self.events: queue.Queue = queue.Queue()
        self.query_published: dict[int, float] = {}  # index into truth.queries -> wall time
        self.stop = threading.Event()
        self.context = rclpy.context.Context()
        rclpy.init(context=self.context, signal_handler_options=SignalHandlerOptions.NO)
        self.node = rclpy.create_node("sam3_agent_demo", context=self.context)
        qos = QoSProfile(reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST,
                         depth=50, durability=DurabilityPolicy.VOLATILE)
        self.node.create_subscription(
            String, RESULT_TOPIC, lambda m: self.events.put(("result", time.monotonic(), m)), qos)
        for topic, kind in ((MASK_TOPIC, "mask"), (OVERLAY_TOPIC, "overlay")):
            self.node.create_subscription(
                Image, topic, lambda m, k=kind: self.events.put((k, time.monotonic(), m)), qos)
        self.recorder = BagRecorder(self.node, bag_out, NODE_OUTPUT_TOPICS)
        self.executor = MultiThreadedExecutor(num_threads=2, context=self.context)
        self.executor.add_node(self.node)
        self.spinner = threading.Thread(target=self._spin, daemon=True)
        self.spinner.start()
        self.replay_error: BaseException | None = None

    def _spin(self) -> None:
        while not self.stop.is_set() and self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=0.1)
            except Exception:  # shutting down
                if self.stop.is_set():
                    return
                raise

    def run(self, bag_dir: Path, process: NodeProcess, options: DemoOptions) -> None:
        self._wait_for_node(process, options.startup_timeout_s)
        replay_done = threading.Event()
        replay = threading.Thread(target=self._replay, args=(bag_dir, options.rate, replay_done),
                                  daemon=True)
        print(f"[demo] node active; replaying {len(self.truth.stamps_ns)} frames and "
              f"{len(self.truth.queries)} queries", file=self.out)
        replay.start()
        pending: list[tuple[float, dict]] = []  # (received, result) waiting for their images
        masks: dict[int, list[np.ndarray]] = {}
        overlays: dict[int, list] = {}
        deadline = None
        while True:
            if replay_done.is_set() and deadline is None:
                if self.replay_error is not None:
                    raise RuntimeError(f"replay failed: {self.replay_error}")
                deadline = time.monotonic() + options.result_timeout_s
            if not process.running():
                raise RuntimeError(f"the node exited (status {process.process.returncode})")
            try:
                kind, received, msg = self.events.get(timeout=0.05)
            except queue.Empty:
                kind = None
            if kind == "result":
                pending.append((received, json.loads(msg.data)))
            elif kind in ("mask", "overlay"):
                stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
                store = masks if kind == "mask" else overlays
                store.setdefault(stamp, []).append(msg)
            pending = self._score_ready(pending, masks, overlays)
            answered_all = all(o.result_count > 0 for o in self.outcomes)
            if replay_done.is_set() and answered_all and not pending:
                # a short grace period shows a duplicate result, should the node send one
                grace_end = time.monotonic() + 0.5
                while time.monotonic() < grace_end:
                    try:
                        kind, received, msg = self.events.get(timeout=0.05)
                    except queue.Empty:
                        continue
                    if kind == "result":
                        self._count_extra(json.loads(msg.data))
                return
            if deadline is not None and time.monotonic() > deadline:
                self._score_ready(pending, masks, overlays, force=True)
                return

    def _wait_for_node(self, process: NodeProcess, timeout_s: float) -> None:
        """Until the node subscribes to the camera and query topics (it is active) and the
        recorder is subscribed to its outputs."""
        deadline = time.monotonic() + timeout_s
        needed = (sample.COLOR_TOPIC, sample.QUERY_TOPIC)
        while True:
            if not process.running():
                raise RuntimeError(f"the node exited during start-up "
                                   f"(status {process.process.returncode})")
            failure = process.startup_failure()
            if failure:
                raise RuntimeError(f"the node did not start: {failure}")
            active = all(self.node.count_subscribers(t) > 0 for t in needed)
            outputs = self.node.count_publishers(RESULT_TOPIC) > 0
            recording = RESULT_TOPIC in self.recorder.subscribed_topics
            if active and outputs and recording:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the node did not become active within {timeout_s:.0f} s")
            time.sleep(0.1)
        # depth subscriptions are created right after image/query: give them a moment
        depth_deadline = time.monotonic() + 2.0
        while time.monotonic() < depth_deadline and not all(
                self.node.count_subscribers(t) > 0
                for t in (sample.DEPTH_TOPIC, sample.CAMERA_INFO_TOPIC)):
            time.sleep(0.05)
        time.sleep(0.5)  # let the recorder's and our subscriptions match the node's publishers

    def _replay(self, bag_dir: Path, rate: float, done: threading.Event) -> None:
        from sam3_agent_ros.bags.replay import replay_bag

        query_index = {q["data"]: i for i, q in enumerate(self.truth.queries)}

        def on_publish(message, topic, wall):
            if message.topic == sample.QUERY_TOPIC:
                from rclpy.serialization import deserialize_message
                from std_msgs.msg import String

                data = deserialize_message(message.data, String).data
                if data in query_index:
                    self.query_published[query_index[data]] = wall

        try:
            replay_bag(bag_dir, self.node, rate=rate, stop=self.stop, on_publish=on_publish,
                       wait_for_topics=(sample.COLOR_TOPIC, sample.QUERY_TOPIC),
                       wait_timeout_s=10.0)
        except BaseException as exc:  # reported by the main thread
            self.replay_error = exc
        finally:
            done.set()

    def _score_ready(self, pending, masks, overlays, force: bool = False):
        still = []
        for received, result in pending:
            stamp = result.get("stamp") or {}
            stamp_ns = int(stamp.get("sec", 0)) * 1_000_000_000 + int(stamp.get("nanosec", 0))
            has_images = stamp_ns in masks and stamp_ns in overlays
            if not has_images and not force and time.monotonic() - received < IMAGE_WAIT_S:
                still.append((received, result))
                continue
            mask_msg = masks[stamp_ns].pop(0) if masks.get(stamp_ns) else None
            overlay_msg = overlays[stamp_ns].pop(0) if overlays.get(stamp_ns) else None
            self._score(received, result, mask_msg, overlay_msg)
        return still

    def _find_outcome(self, result: dict) -> tuple[int, QueryOutcome] | None:
        query = self.truth.query_for(result.get("query_id"), result.get("query", ""))
        if query is None:
            return None
        index = self.truth.queries.index(query)
        return index, self.outcomes[index]

    def _count_extra(self, result: dict) -> None:
        found = self._find_outcome(result)
        if found is not None:
            found[1].result_count += 1
            found[1].correct = False
            found[1].problem = "more than one result for this query"

    def _score(self, received: float, result: dict, mask_msg, overlay_msg) -> None:
        found = self._find_outcome(result)
        if found is None:
            print(f"[demo] result for a query not in the bag: {result.get('query')!r}",
                  file=self.out)
            return
        index, outcome = found
        outcome.result_count += 1
        if outcome.result_count > 1:
            outcome.correct = False
            outcome.problem = "more than one result for this query"
            return
        mask = None
        if mask_msg is not None:
            mask = mono8_to_mask(mask_msg.height, mask_msg.width, mask_msg.step,
                                 bytes(mask_msg.data))
        score_outcome(outcome, result, self.truth, mask)
        if index in self.query_published:
            outcome.latency_s = received - self.query_published[index]
        label = str(result.get("query_id") or outcome.query_id or index + 1)
        if overlay_msg is not None:
            outcome.overlay_png = str(self._write_overlay(index, label, overlay_msg))
        print(format_outcome(outcome, label), file=self.out)
        self.out.flush()

    def _write_overlay(self, index: int, label: str, msg) -> Path:
        import cv2

        rows = np.frombuffer(bytes(msg.data), np.uint8)[:msg.height * msg.step]
        rgb = rows.reshape(msg.height, msg.step)[:, :msg.width * 3].reshape(msg.height,
                                                                            msg.width, 3)
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in label)
        path = self.out_dir / f"{index + 1:02d}_{safe}_overlay.png"
        cv2.imwrite(str(path), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
        return path

    def close(self) -> None:
        """Stop the replay, finish the output bag, shut rclpy down (idempotent)."""
        self.stop.set()
        try:
            self.recorder.close()
        finally:
            self.spinner.join(timeout=2.0)
            self.executor.shutdown(timeout_sec=1.0)
            self.node.destroy_node()
            import rclpy

            rclpy.try_shutdown(context=self.context)
