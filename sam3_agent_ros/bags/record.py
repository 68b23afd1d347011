"""Record topics of the ROS graph into a new rosbag2 bag (mcap by default), without deserializing.

Subscriptions are raw (``raw=True``): the CDR bytes a publisher sent go into the bag unchanged,
with the receive time as the bag timestamp (as ``ros2 bag record`` does). A topic's type is taken
from the graph, so a topic that has no publisher yet is subscribed as soon as one appears. A type
rosbags does not know (this package's ``ConceptDetections``, another interface package's) is
described from its ``.msg`` files (``message_types.register_message_type``). A topic that cannot
be recorded (its type unusable, several types on it) is in ``skipped`` and passed to
``on_problem`` at once; ``sam3-agent record`` then ends with status 1. The
bag is a regular rosbag2 directory (``metadata.yaml`` + ``.mcap``, or ``.db3`` with
``storage="sqlite3"``) that rosbags, ``ros2 bag`` and Foxglove open.

The bag writer lives on one thread of its own: rosbags' sqlite3 storage refuses a connection used
from another thread than the one that opened it, and the executor's callbacks (topic discovery,
messages) may run anywhere. Callbacks only hand work to that thread.

Python API: ``BagRecorder(node, out, topics)``; the command line is ``sam3-agent record``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sam3_agent_ros.ros.output_topics import node_output_topics

NODE_OUTPUT_TOPICS = node_output_topics()  # every output of /sam3_agent (ros/output_topics.py)
RECORD_QOS_DEPTH = 100
DISCOVERY_PERIOD_S = 0.2


class RecordError(Exception):
    """The bag cannot be created (exists already, unknown storage, ...)."""


def _absolute(topic: str) -> str:
    return topic if topic.startswith("/") else "/" + topic


def subscription_qos(publisher_qos: list, depth: int = RECORD_QOS_DEPTH):
    """QoS that matches every publisher: reliable unless one of them is best effort,
    transient-local only when all of them are (then latched messages are recorded too)."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    reliable = all(q.reliability == ReliabilityPolicy.RELIABLE for q in publisher_qos)
    latched = bool(publisher_qos) and all(
        q.durability == DurabilityPolicy.TRANSIENT_LOCAL for q in publisher_qos)
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth,
                      reliability=ReliabilityPolicy.RELIABLE if reliable
                      else ReliabilityPolicy.BEST_EFFORT,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL if latched
                      else DurabilityPolicy.VOLATILE)


class _WriterThread:
    """One thread that owns the rosbags ``Writer``: every call on it runs there, in order."""

    def __init__(self) -> None:
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bag-writer")
        self.error: str | None = None  # the first failed write

    def call(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run on the writer thread and wait for the result (exceptions propagate)."""
        return self._thread.submit(function, *args, **kwargs).result()

    def post(self, function: Callable[..., Any], *args: Any) -> None:
        """Run on the writer thread without waiting; the first failure is kept in ``error``."""
        def guarded() -> None:
            try:
                function(*args)
            except Exception as exc:
                self.error = self.error or f"writing the bag failed: {exc}"

        self._thread.submit(guarded)

    def shutdown(self) -> None:
        self._thread.shutdown(wait=True)


class BagRecorder:
    """Writes the messages of ``topics`` into the new bag ``out_dir`` while ``node`` is spun.

    Thread-safe: callbacks may run on a multi-threaded executor, and ``close()`` on any thread.
    Call ``close()`` to finish the bag (metadata.yaml is written then); messages after
    ``close()`` are dropped. ``counts``, ``skipped``, ``write_error`` and ``nothing_recorded()``
    say what the bag holds and why a topic is missing.
    """

    def __init__(self, node, out_dir: str | Path, topics: Iterable[str], *,
                 storage: str = "mcap", qos_depth: int = RECORD_QOS_DEPTH,
                 on_problem: Callable[[str, str], None] | None = None) -> None:
        from rosbags.rosbag2 import StoragePlugin, Writer
        from rosbags.typesys import Stores, get_typestore

        self.node = node
        self.out_dir = Path(out_dir)
        self.topics = list(dict.fromkeys(_absolute(t) for t in topics))
        if not self.topics:
            raise RecordError("no topics to record")
        if self.out_dir.exists():
            raise RecordError(f"output bag {self.out_dir} exists already; choose a new path")
        plugins = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}
        if storage not in plugins:
            raise RecordError(f"unknown storage {storage!r}: use mcap or sqlite3")
        self.out_dir.parent.mkdir(parents=True, exist_ok=True)
        self._typestore = get_typestore(Stores.ROS2_KILTED)
        self._writer_thread = _WriterThread()
        try:
            self._writer = self._writer_thread.call(
                Writer, self.out_dir, version=9, storage_plugin=plugins[storage])
            self._writer_thread.call(self._writer.open)
        except Exception:
            self._writer_thread.shutdown()
            raise
        self._lock = threading.Lock()
        self._closed = False
        self._qos_depth = qos_depth
        self._subscriptions: dict[str, object] = {}
        self._connections: dict[str, object] = {}
        self.counts: dict[str, int] = {t: 0 for t in self.topics}
        self.skipped: dict[str, str] = {}  # topic -> why it cannot be recorded
        self._on_problem = on_problem
        self._timer = node.create_timer(DISCOVERY_PERIOD_S, self.discover)
        self.discover()

    @property
    def subscribed_topics(self) -> list[str]:
        return list(self._subscriptions)

    def discover(self) -> None:
        """Subscribe to every wanted topic whose type the graph now knows."""
        if self._closed:
            return
        known = dict(self.node.get_topic_names_and_types())
        for topic in self.topics:
            if topic in self.skipped or topic not in known:
                continue
            types = known[topic]
            if topic in self._subscriptions:
                if len(types) != 1:  # a publisher of another type appeared later
                    self._skip(topic, f"published with several types: {', '.join(types)} "
                                      "(only the first one's messages are in the bag)")
                continue
            if len(types) != 1:
                self._skip(topic, f"published with several types: {', '.join(types)}")
                continue
            self._subscribe(topic, types[0])

    def _subscribe(self, topic: str, msgtype: str) -> None:
        from sam3_agent_ros.bags.message_types import message_class

        try:  # a peer names the type: only ROS interface packages are imported
            cls = message_class(msgtype)
        except ImportError as exc:
            self._skip(topic, f"message type not usable: {exc}")
            return
        with self._lock:
            if self._closed:
                return
            try:
                self._connections[topic] = self._writer_thread.call(
                    self._add_connection, topic, msgtype)
            except Exception as exc:  # no .msg file for it, a definition rosbags cannot parse
                self._skip(topic, f"cannot describe {msgtype} in the bag: {exc}")
                return
        qos = subscription_qos(
            [info.qos_profile for info in self.node.get_publishers_info_by_topic(topic)],
            self._qos_depth)
        self._subscriptions[topic] = self.node.create_subscription(
            cls, topic, lambda data, t=topic: self._on_message(t, data), qos, raw=True)

    def _add_connection(self, topic: str, msgtype: str):
        """On the writer thread (the typestore is changed there only)."""
        from sam3_agent_ros.bags.message_types import register_message_type

        register_message_type(self._typestore, msgtype)
        return self._writer.add_connection(topic, msgtype, typestore=self._typestore)

    def _skip(self, topic: str, reason: str) -> None:
        self.skipped[topic] = reason
        if self._on_problem is not None:
            self._on_problem(topic, reason)

    def _on_message(self, topic: str, data: bytes) -> None:
        stamp = self.node.get_clock().now().nanoseconds
        with self._lock:
            if self._closed:
                return
            self._writer_thread.post(self._writer.write, self._connections[topic], stamp, data)
            self.counts[topic] += 1

    def close(self) -> None:
        """Stop recording and finish the bag (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.node.destroy_timer(self._timer)
        for subscription in self._subscriptions.values():
            self.node.destroy_subscription(subscription)
        self._subscriptions.clear()
        try:
            self._writer_thread.call(self._writer.close)
        finally:
            self._writer_thread.shutdown()

    @property
    def write_error(self) -> str | None:
        """Why a message could not be written, if one could not."""
        return self._writer_thread.error

    def nothing_recorded(self) -> str | None:
        """None when the bag holds a message; otherwise why it holds none, topic by topic."""
        if any(self.counts.values()):
            return None
        reasons = []
        for topic in self.topics:
            if topic in self.skipped:
                reasons.append(f"{topic}: skipped ({self.skipped[topic]})")
            elif topic in self._connections:
                reasons.append(f"{topic}: subscribed, no message arrived")
            else:
                reasons.append(f"{topic}: never published (no publisher seen)")
        return "nothing was recorded: " + "; ".join(reasons)

    def __enter__(self) -> BagRecorder:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def read_bag_counts(path: str | Path) -> dict[str, int]:
    """``{topic: message count}`` of a bag, read back with rosbags (tests, the demo summary)."""
    from rosbags.rosbag2 import Reader

    with Reader(Path(path)) as reader:
        counts = {c.topic: 0 for c in reader.connections}
        for connection, _, _ in reader.messages():
            counts[connection.topic] += 1
    return counts
