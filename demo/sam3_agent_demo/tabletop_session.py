"""``sam3-agent demo``'s rclpy side (``TabletopSession``): the listener node (``listener.py``)
recording the node's outputs, the bag replayed under its control, results scored as they arrive,
and the standing-concepts passes kept for scoring at the end (``concepts_scoring.py``)."""

from __future__ import annotations

import json
import queue
import threading
import time
from pathlib import Path

import numpy as np

from sam3_agent_demo import concepts_scoring, sample
from sam3_agent_demo.listener import Listener, header_stamp_ns, mono8_to_mask
from sam3_agent_demo.node_process import NodeProcess
from sam3_agent_demo.tabletop_scoring import QueryOutcome, format_outcome, score_outcome
from sam3_agent_ros.bags.record import NODE_OUTPUT_TOPICS
from sam3_agent_ros.core.types import stamp_ns

RESULT_TOPIC = "/sam3_agent/result"
MASK_TOPIC = "/sam3_agent/mask"
OVERLAY_TOPIC = "/sam3_agent/overlay"
CONCEPTS_TOPIC = "/sam3_agent/concepts/detections"
CONCEPT_LABELS_TOPIC = "/sam3_agent/concepts/labels"
IMAGE_WAIT_S = 1.0  # how long a result waits for its mask/overlay images before being scored


class TabletopSession:
    """The listener/recorder node spinning in the background, the replay in the calling
    thread's control, results scored as they arrive."""

    def __init__(self, truth: sample.GroundTruth, outcomes: list[QueryOutcome], out_dir: Path,
                 bag_out: Path, out) -> None:
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import Image
        from std_msgs.msg import String

        from sam3_agent_ros.bags.record import BagRecorder

        self.truth, self.outcomes, self.out_dir, self.out = truth, outcomes, out_dir, out
        self.events: queue.Queue = queue.Queue()
        self.query_published: dict[int, float] = {}  # index into truth.queries -> wall time
        self.concept_passes: list[tuple[int, list[dict]]] = []  # (stamp, detections) by arrival
        self.concept_labels: dict[int, np.ndarray] = {}  # stamp -> mono16 label image
        self._concepts_lock = threading.Lock()
        self.listener = Listener("sam3_agent_demo")
        self.stop = self.listener.stop
        node = self.node = self.listener.node
        self.recorder = None
        try:
            qos = QoSProfile(reliability=ReliabilityPolicy.RELIABLE,
                             history=HistoryPolicy.KEEP_LAST, depth=50,
                             durability=DurabilityPolicy.VOLATILE)
            node.create_subscription(String, RESULT_TOPIC,
                                     lambda m: self.events.put(("result", time.monotonic(), m)),
                                     qos)
            for topic, kind in ((MASK_TOPIC, "mask"), (OVERLAY_TOPIC, "overlay")):
                node.create_subscription(
                    Image, topic, lambda m, k=kind: self.events.put((k, time.monotonic(), m)),
                    qos)
            from sam3_agent_ros.msg import ConceptDetections

            node.create_subscription(ConceptDetections, CONCEPTS_TOPIC, self._on_concepts, qos)
            node.create_subscription(Image, CONCEPT_LABELS_TOPIC, self._on_concept_labels, qos)
            self.recorder = BagRecorder(node, bag_out, NODE_OUTPUT_TOPICS)
            self.listener.start(threads=2)
        except BaseException:
            self.listener.close()
            raise
        self.replay_error: BaseException | None = None

    def run(self, bag_dir: Path, process: NodeProcess, rate: float, startup_timeout_s: float,
            result_timeout_s: float) -> None:
        self._wait_for_node(process, startup_timeout_s)
        replay_done = threading.Event()
        replay = threading.Thread(target=self._replay, args=(bag_dir, rate, replay_done),
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
                deadline = time.monotonic() + result_timeout_s
            if not process.running():
                raise RuntimeError(f"the node exited (status {process.process.returncode})")
            try:
                kind, received, msg = self.events.get(timeout=0.05)
            except queue.Empty:
                kind = None
            if kind == "result":
                pending.append((received, json.loads(msg.data)))
            elif kind in ("mask", "overlay"):
                stamp = header_stamp_ns(msg.header)
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

    def _on_concepts(self, msg) -> None:
        detections = [{"concept": d.concept, "id": int(d.id)} for d in msg.detections]
        with self._concepts_lock:
            self.concept_passes.append((header_stamp_ns(msg.header), detections))

    def _on_concept_labels(self, msg) -> None:
        rows = np.frombuffer(bytes(msg.data), np.uint8)[:msg.height * msg.step]
        labels = rows.reshape(msg.height, msg.step)[:, :msg.width * 2].copy().view(np.uint16)
        with self._concepts_lock:
            self.concept_labels[header_stamp_ns(msg.header)] = labels

    def concepts_outcome(self) -> concepts_scoring.ConceptsOutcome:
        """The standing-concepts passes received, scored (a pass whose label image did not
        arrive is left out; none at all is a problem)."""
        outcome = concepts_scoring.ConceptsOutcome()
        with self._concepts_lock:
            passes, labels = list(self.concept_passes), dict(self.concept_labels)
        for stamp, detections in passes:
            if stamp in labels:
                outcome.frames.append(concepts_scoring.score_frame(
                    detections, labels[stamp], stamp, self.truth, outcome.concepts))
        if not passes:
            outcome.problem = f"no standing-concepts pass arrived on {CONCEPTS_TOPIC}"
        elif not outcome.frames:
            outcome.problem = f"no label image arrived on {CONCEPT_LABELS_TOPIC}"
        return outcome

    def _wait_for_node(self, process: NodeProcess, timeout_s: float) -> None:
        """Until the node subscribes to the camera and query topics (it is active) and the
        recorder is subscribed to its outputs; depth subscriptions are created right after
        image/query: they get a moment."""
        self.listener.wait_for_node(
            process, timeout_s, subscribed=(sample.COLOR_TOPIC, sample.QUERY_TOPIC),
            published=(RESULT_TOPIC,),
            ready=lambda: RESULT_TOPIC in self.recorder.subscribed_topics,
            optional_subscribed=(sample.DEPTH_TOPIC, sample.CAMERA_INFO_TOPIC))

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
            key = stamp_ns(stamp.get("sec", 0), stamp.get("nanosec", 0))
            # A refinement's images carry the stamp of the answer it refines: wait for its own.
            has_images = bool(masks.get(key)) and bool(overlays.get(key))
            if not has_images and not force and time.monotonic() - received < IMAGE_WAIT_S:
                still.append((received, result))
                continue
            mask_msg = masks[key].pop(0) if masks.get(key) else None
            overlay_msg = overlays[key].pop(0) if overlays.get(key) else None
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
        refined = next((o for o in self.outcomes
                        if outcome.refines is not None and o.query_id == outcome.refines), None)
        score_outcome(outcome, result, self.truth, mask, refined)
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
            if self.recorder is not None:
                self.recorder.close()
        finally:
            self.listener.close()
