"""Where transforms come from: tf2_ros where it imports, else our own listener on /tf.

``create_tf_source(node)`` returns one interface either way:
``lookup(target, source, stamp_ns, timeout_s) -> TfLookup`` (a ``Transform`` with
``p_target = T p_source``, or the reason there is none), ``frames()`` and ``close()``.

- ``Tf2Source``: a ``tf2_ros.Buffer`` + ``TransformListener`` (every ROS install).
- ``OwnTfSource``: the PyPI venv, where tf2 has no wheel. Subscriptions to ``/tf`` (reliable,
  volatile, keep-last 100) and ``/tf_static`` (reliable, transient-local, keep-last 100: tf2's
  static listener QoS, so a late joiner gets every static publisher's transforms, not only the
  one whose sample arrived last), feeding the ROS-free ``frames.TfBuffer`` (interpolation, no
  extrapolation, errors that name what is missing; peers' samples checked, counted when refused,
  bounded; a sample far ahead of the node's clock refused). Refusals are said in the log (one
  WARN per kind per ``REFUSAL_LOG_S``, with the count since) and by ``stats()`` for
  ``/diagnostics``. Their messages are ``tf2_msgs/msg/TFMessage``, built into the venv by
  scripts/build_interfaces.sh where the real package is missing (wire-identical).

Either way a lookup's transform is checked (``frames.transform.transform_problem``: finite, a
rotation, not absurdly far): tf2 composes two finite links of 1e308 to inf as readily as any.

Lookups may wait up to ``timeout_s`` for a transform that is about to arrive: call them from a
worker thread, never from an executor callback (the executor must keep delivering /tf meanwhile).
The subscriptions sit in a callback group of their own, so a multi-threaded executor runs them
beside the node's other callbacks.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.frames import TfBuffer, Transform, TransformUnavailable
from sam3_agent_ros.frames.tf_input import TfInputStats
from sam3_agent_ros.frames.transform import transform_problem

TF_QOS = QoSProfile(reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST,
                    depth=100, durability=DurabilityPolicy.VOLATILE)
TF_STATIC_QOS = QoSProfile(reliability=ReliabilityPolicy.RELIABLE,
                           history=HistoryPolicy.KEEP_LAST, depth=100,
                           durability=DurabilityPolicy.TRANSIENT_LOCAL)
REFUSAL_LOG_S = 10.0  # at most one WARN per kind of refused transform in this time
# Waiting makes no difference to these: the stamp is already older than what the buffer keeps,
# the frames form a loop, or the chain composes to no rigid motion.
_FINAL_KINDS = frozenset({"extrapolation_past", "loop", "invalid"})


@dataclass(frozen=True)
class TfLookup:
    """A transform (``p_target = transform p_source``) or, when None, the reason."""

    transform: Transform | None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.transform is not None


class TfSource(Protocol):
    def lookup(self, target: str, source: str, stamp_ns: int, timeout_s: float) -> TfLookup: ...
    def frames(self) -> list[str]: ...
    def stats(self) -> TfInputStats | None: ...
    def close(self) -> None: ...


def _frame(name: str) -> str:
    return name.lstrip("/")  # tf2 ignores a leading slash


def _from_msg(transform: Any) -> tuple[tuple[float, float, float], tuple[float, ...]]:
    t, q = transform.translation, transform.rotation
    return (t.x, t.y, t.z), (q.x, q.y, q.z, q.w)


class RefusalLog:
    """The listener's WARNs about refused transforms: one per kind per ``period_s``, naming the
    newest refused link and how many of that kind were refused since the last line."""

    def __init__(self, logger: Any, period_s: float = REFUSAL_LOG_S,
                 clock: Any = time.monotonic) -> None:
        self._logger = logger
        self._period_s = period_s
        self._clock = clock
        self._counted: dict[str, int] = {}  # kind -> refused when last said
        self._said_at: dict[str, float] = {}

    def update(self, stats: TfInputStats) -> None:
        now = self._clock()
        for kind, count in stats.refused.items():
            new = count - self._counted.get(kind, 0)
            if new <= 0 or now - self._said_at.get(kind, -math.inf) < self._period_s:
                continue
            self._counted[kind], self._said_at[kind] = count, now
            self._logger.warning(
                f"TF: {new} transform sample(s) refused ({kind}) since the last such line; "
                f"newest: {for_log(stats.last_by_kind.get(kind, ''), 400)} (at most one line "
                f"per {self._period_s:g} s; /diagnostics counts them)")


class OwnTfSource:
    """/tf and /tf_static into a ``TfBuffer``; lookups wait on new transforms up to a timeout."""

    def __init__(self, node: Any, cache_s: float = 10.0, buffer: TfBuffer | None = None):
        from tf2_msgs.msg import TFMessage  # our wire-identical copy in the PyPI venv

        clock = node.get_clock()
        self.buffer = buffer if buffer is not None else TfBuffer(
            cache_s=cache_s, now_ns=lambda: clock.now().nanoseconds)
        self._node = node
        self._log = RefusalLog(node.get_logger())
        self._refused_seen = 0
        self._arrived = threading.Condition()
        group = MutuallyExclusiveCallbackGroup()
        self._subscriptions = [
            node.create_subscription(TFMessage, "/tf", lambda m: self._on_tf(m, False), TF_QOS,
                                     callback_group=group),
            node.create_subscription(TFMessage, "/tf_static", lambda m: self._on_tf(m, True),
                                     TF_STATIC_QOS, callback_group=group),
        ]

    @property
    def refused(self) -> int:
        """Transforms refused so far (malformed, denormalised, far-future, over the caps)."""
        return self.buffer.stats().refused_total

    def stats(self) -> TfInputStats:
        return self.buffer.stats()

    def _on_tf(self, msg: Any, static: bool) -> None:
        for item in msg.transforms:
            stamp_ns = item.header.stamp.sec * 1_000_000_000 + item.header.stamp.nanosec
            translation, rotation = _from_msg(item.transform)
            self.buffer.set_transform(_frame(item.header.frame_id), _frame(item.child_frame_id),
                                      stamp_ns, translation, rotation, static=static)
        refused = self.buffer.refusal_count()
        if refused != self._refused_seen:  # something to say (stats() formats the words)
            self._refused_seen = refused
            self._log.update(self.buffer.stats())
        with self._arrived:
            self._arrived.notify_all()

    def lookup(self, target: str, source: str, stamp_ns: int, timeout_s: float) -> TfLookup:
        deadline = time.monotonic() + max(0.0, timeout_s)
        target, source = _frame(target), _frame(source)
        while True:
            with self._arrived:  # held across the try, so no arrival slips between try and wait
                try:
                    return TfLookup(self.buffer.lookup(target, source, stamp_ns))
                except TransformUnavailable as exc:
                    left = deadline - time.monotonic()
                    if exc.kind in _FINAL_KINDS or left <= 0:
                        waited = f" (waited {timeout_s:g} s)" if timeout_s > 0 else ""
                        return TfLookup(None, f"{exc}{waited}")
                    self._arrived.wait(left)

    def frames(self) -> list[str]:
        return self.buffer.frames()

    def close(self) -> None:
        for subscription in self._subscriptions:
            self._node.destroy_subscription(subscription)
        self._subscriptions = []


class Tf2Source:
    """tf2_ros's Buffer and TransformListener behind the same interface."""

    def __init__(self, node: Any, cache_s: float = 10.0):
        import tf2_ros
        from rclpy.duration import Duration

        self._tf2 = tf2_ros
        self._buffer = tf2_ros.Buffer(cache_time=Duration(seconds=cache_s), node=node)
        self._listener = tf2_ros.TransformListener(self._buffer, node, spin_thread=False)

    def lookup(self, target: str, source: str, stamp_ns: int, timeout_s: float) -> TfLookup:
        from rclpy.duration import Duration
        from rclpy.time import Time

        try:
            stamped = self._buffer.lookup_transform(
                target, source, Time(nanoseconds=int(stamp_ns)),
                timeout=Duration(seconds=max(0.0, timeout_s)))
        except self._tf2.TransformException as exc:
            known = self.frames()
            return TfLookup(None, f"no transform from '{for_log(source, 80)}' to "
                                  f"'{for_log(target, 80)}': {for_log(exc, 300)}; frames known "
                                  f"({len(known)}): {', '.join(known[:12]) or 'none'}")
        translation, rotation = _from_msg(stamped.transform)
        try:
            transform = Transform(np.asarray(translation), np.asarray(rotation))
        except ValueError as exc:
            problem: str | None = str(exc)
        else:
            problem = transform_problem(transform)
        if problem is not None:
            return TfLookup(None, f"no transform from '{for_log(source, 80)}' to "
                                  f"'{for_log(target, 80)}': {problem}")
        return TfLookup(transform)

    def stats(self) -> None:
        """tf2 counts and logs what it refuses itself."""
        return None

    def frames(self) -> list[str]:
        import yaml

        listed = yaml.safe_load(self._buffer.all_frames_as_yaml()) or {}
        return sorted(for_log(name, 80) for name in listed)

    def close(self) -> None:
        unregister = getattr(self._listener, "unregister", None)
        if unregister is not None:
            unregister()


def tf2_available() -> bool:
    try:
        import tf2_ros  # noqa: F401
    except ImportError:
        return False
    return True


def create_tf_source(node: Any, cache_s: float = 10.0, prefer_tf2: bool = True) -> TfSource:
    """tf2_ros where it imports (and ``prefer_tf2``), else our own listener."""
    if prefer_tf2 and tf2_available():
        return Tf2Source(node, cache_s)
    return OwnTfSource(node, cache_s)
