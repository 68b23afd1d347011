"""Replay a rosbag2 bag into the ROS graph, like ``ros2 bag play``, without deserializing.

Bags are read with ``rosbags`` (rosbag2_py is not on PyPI). Every message is published as the raw
CDR bytes stored in the bag (``publisher.publish(bytes)``), so header stamps and payloads reach
subscribers exactly as recorded. Timing follows the bag's receive timestamps, scaled by ``rate``.

Python API: ``replay_bag(path, node, ...)``; the command line is ``sam3-agent replay``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sam3_agent_ros.bags.message_types import message_class

DEFAULT_QOS_DEPTH = 10


class BagError(Exception):
    """A bag that cannot be read; ``exit_code`` 2 when it is missing, 1 when it is broken."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class BagMessage:
    timestamp_ns: int
    topic: str  # the topic in the bag (before remapping)
    msgtype: str  # "pkg/msg/Name"
    data: bytes


@dataclass
class ReplayStats:
    published: dict[str, int] = field(default_factory=dict)  # output topic -> count
    skipped_topics: dict[str, str] = field(default_factory=dict)  # bag topic -> reason
    loops: int = 0
    schedule_origin: float = 0.0  # time.monotonic() of bag time start(+offset) in the last loop
    wall_s: float = 0.0
    interrupted: bool = False

    @property
    def total(self) -> int:
        return sum(self.published.values())


def parse_remaps(items: Iterable[str]) -> dict[str, str]:
    """``["/a:=/b", ...]`` -> ``{"/a": "/b"}``; ValueError with the bad item otherwise."""
    remaps: dict[str, str] = {}
    for item in items:
        old, sep, new = item.partition(":=")
        old, new = old.strip(), new.strip()
        if not sep or not old or not new:
            raise ValueError(f"bad remap {item!r}: expected OLD:=NEW (e.g. /image:=/camera/image)")
        remaps[_absolute(old)] = _absolute(new)
    return remaps


def _absolute(topic: str) -> str:
    return topic if topic.startswith("/") else "/" + topic


def resolve_bag_path(path: str | Path) -> Path:
    """The bag directory (or the path of a lone .mcap/.db3 file); BagError(exit 2) if missing."""
    path = Path(path)
    if not path.exists():
        raise BagError(f"bag not found: {path}", exit_code=2)
    if path.is_file() and (path.parent / "metadata.yaml").is_file():
        return path.parent
    if path.is_dir() and not (path / "metadata.yaml").is_file():
        raise BagError(f"not a rosbag2 bag (no metadata.yaml): {path}", exit_code=2)
    return path


class BagSource:
    """The messages of a bag in time order, filtered by topic and start offset."""

    def __init__(self, path: str | Path, topics: Iterable[str] | None = None,
                 start_offset_s: float = 0.0) -> None:
        from rosbags.rosbag2 import Reader

        if start_offset_s < 0:
            raise ValueError(f"start offset must be >= 0, got {start_offset_s}")
        self.path = resolve_bag_path(path)
        try:
            self._reader = Reader(self.path)
            self._reader.open()
        except Exception as exc:  # rosbags raises several kinds for broken files
            raise BagError(f"cannot read bag {self.path} (corrupt?): {exc}") from None
        wanted = None if topics is None else {_absolute(t) for t in topics}
        self.connections = [c for c in self._reader.connections
                            if wanted is None or c.topic in wanted]
        present = {c.topic for c in self._reader.connections}
        self.missing_topics = sorted((wanted or set()) - present)
        self.start_ns = self._reader.start_time + int(round(start_offset_s * 1e9))
        self.end_ns = self._reader.end_time

    def check_named(self, remaps: Mapping[str, str]) -> None:
        """``BagError`` (exit code 2) when a selected or remapped topic is not in the bag: a typo
        would otherwise play nothing, or the wrong thing, and exit 0."""
        present = sorted({c.topic for c in self._reader.connections})
        absent = self.missing_topics + sorted(set(remaps) - set(present)
                                              - set(self.missing_topics))
        if absent:
            names = ", ".join(absent)
            raise BagError(f"not in the bag {self.path}: {names} (its topics: "
                           f"{', '.join(present) or 'none'})", exit_code=2)

    @property
    def topic_types(self) -> dict[str, str]:
        return {c.topic: c.msgtype for c in self.connections}

    @property
    def duration_s(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e9

    def messages(self) -> Iterator[BagMessage]:
        if not self.connections:
            return
        try:
            for connection, timestamp, data in self._reader.messages(
                    connections=self.connections, start=self.start_ns):
                yield BagMessage(timestamp, connection.topic, connection.msgtype, bytes(data))
        except Exception as exc:
            raise BagError(f"bag {self.path} is corrupt: {exc}") from None

    def close(self) -> None:
        self._reader.close()

    def __enter__(self) -> BagSource:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def wall_offset_s(timestamp_ns: int, start_ns: int, rate: float) -> float:
    """Seconds after the replay start at which a message of ``timestamp_ns`` is published."""
    return max(0, timestamp_ns - start_ns) / 1e9 / rate


def _qos(depth: int, reliable: bool):
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth,
                      reliability=ReliabilityPolicy.RELIABLE if reliable
                      else ReliabilityPolicy.BEST_EFFORT,
                      durability=DurabilityPolicy.VOLATILE)


def wait_for_subscribers(publishers: Mapping[str, Any], topics: Iterable[str],
                         timeout_s: float, stop: threading.Event) -> list[str]:
    """Wait until every publisher of ``topics`` (output names) has a subscriber; returns the
    topics still without one when ``timeout_s`` ran out (empty list: all matched)."""
    deadline = time.monotonic() + timeout_s
    pending = [t for t in topics if t in publishers]
    while pending and not stop.is_set():
        pending = [t for t in pending if publishers[t].get_subscription_count() == 0]
        if not pending or time.monotonic() >= deadline:
            break
        stop.wait(0.05)
    return pending


def replay_bag(path: str | Path, node, *, rate: float = 1.0, loop: bool = False,
               start_offset_s: float = 0.0, topics: Iterable[str] | None = None,
               remaps: Mapping[str, str] | None = None, qos_depth: int = DEFAULT_QOS_DEPTH,
               reliable: bool = True, delay_s: float = 0.0,
               wait_for_topics: Iterable[str] = (), wait_timeout_s: float = 10.0,
               stop: threading.Event | None = None,
               on_publish: Callable[[BagMessage, str, float], None] | None = None,
               progress: Callable[[float, float, int], None] | None = None,
               strict_topics: bool = False) -> ReplayStats:
    """Publish the bag's messages on ``node`` with their original timing.

    ``topics``: bag topics to play (None: all). ``remaps``: bag topic -> output topic.
    ``wait_for_topics``: output topics that must have a subscriber before playback starts (up to
    ``wait_timeout_s``; a RuntimeError names those still unmatched). ``stop``: set it to end
    playback early. ``on_publish(message, output_topic, wall_time)`` runs after each publish;
    ``progress(elapsed_bag_s, duration_s, published)`` about ten times a second.
    ``strict_topics`` (the CLI): a topic of ``topics`` or of ``remaps`` that is not in the bag is
    an error (``BagError``, exit code 2, naming the bag's topics) before anything is published;
    otherwise it is reported in ``skipped_topics`` and the others play.
    Raises BagError for a missing/corrupt bag, ValueError for bad arguments.
    """
    if not rate > 0:
        raise ValueError(f"rate must be > 0, got {rate}")
    if qos_depth < 1:
        raise ValueError(f"QoS depth must be >= 1, got {qos_depth}")
    remaps = {_absolute(k): _absolute(v) for k, v in (remaps or {}).items()}
    stop = stop or threading.Event()
    stats = ReplayStats()
    started = time.monotonic()
    with BagSource(path, topics, start_offset_s) as source:
        if strict_topics:
            source.check_named(remaps)
        for topic in source.missing_topics:
            stats.skipped_topics[topic] = "not in the bag"
        publishers = {}
        output_of: dict[str, str] = {}
        for topic, msgtype in source.topic_types.items():
            output = remaps.get(topic, topic)
            try:  # only ROS interface packages are imported (bags/message_types.py)
                cls = message_class(msgtype)
            except ImportError as exc:
                stats.skipped_topics[topic] = f"message type not usable: {exc}"
                continue
            publishers[output] = node.create_publisher(cls, output, _qos(qos_depth, reliable))
            output_of[topic] = output
            stats.published[output] = 0
        try:
            unmatched = wait_for_subscribers(publishers, wait_for_topics, wait_timeout_s, stop)
            if unmatched:
                raise RuntimeError("no subscriber appeared within "
                                   f"{wait_timeout_s:.0f} s on: {', '.join(unmatched)}")
            if delay_s > 0:
                stop.wait(delay_s)
            while not stop.is_set():
                _play_once(source, publishers, output_of, rate, stop, stats, on_publish, progress)
                stats.loops += 1
                if not loop or stats.total == 0:
                    break
        finally:
            for publisher in publishers.values():
                node.destroy_publisher(publisher)
    stats.interrupted = stop.is_set()
    stats.wall_s = time.monotonic() - started
    return stats


def _play_once(source: BagSource, publishers, output_of, rate, stop, stats, on_publish,
               progress) -> None:
    t0 = stats.schedule_origin = time.monotonic()
    last_progress = 0.0
    for message in source.messages():
        output = output_of.get(message.topic)
        if output is None:
            continue
        due = t0 + wall_offset_s(message.timestamp_ns, source.start_ns, rate)
        while True:
            remaining = due - time.monotonic()
            if remaining <= 0 or stop.is_set():
                break
            stop.wait(min(remaining, 0.1))
        if stop.is_set():
            return
        publishers[output].publish(message.data)
        now = time.monotonic()
        stats.published[output] += 1
        if on_publish is not None:
            on_publish(message, output, now)
        if progress is not None and (now - last_progress >= 0.1):
            last_progress = now
            progress((message.timestamp_ns - source.start_ns) / 1e9, source.duration_s,
                     stats.total)


class ProgressLine:
    """A one-line progress display on a stream (rewritten in place on a terminal)."""

    def __init__(self, stream, label: str = "replay") -> None:
        self.stream = stream
        self.label = label
        self.is_tty = hasattr(stream, "isatty") and stream.isatty()
        self._last_plain = -1.0

    def __call__(self, elapsed_s: float, duration_s: float, published: int) -> None:
        text = f"[{self.label}] {elapsed_s:6.1f} / {duration_s:.1f} s  {published} messages"
        if self.is_tty:
            self.stream.write("\r" + text)
            self.stream.flush()
        elif elapsed_s - self._last_plain >= 1.0 or self._last_plain < 0:
            self._last_plain = elapsed_s
            self.stream.write(text + "\n")
            self.stream.flush()

    def finish(self, stats: ReplayStats) -> None:
        if self.is_tty:
            self.stream.write("\n")
        state = "interrupted" if stats.interrupted else "done"
        counts = ", ".join(f"{t}: {n}" for t, n in stats.published.items())
        self.stream.write(f"[{self.label}] {state}: {stats.total} messages in "
                          f"{stats.wall_s:.1f} s ({counts})\n")
        for topic, reason in stats.skipped_topics.items():
            self.stream.write(f"[{self.label}] skipped {topic}: {reason}\n")
        self.stream.flush()
