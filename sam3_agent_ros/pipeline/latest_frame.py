"""The newest camera frame message, by reference: what a query snapshots when it is submitted.

ROS-free. The node's image callback calls ``LatestFrame.put`` (keeps a reference, nothing else:
the message is converted only when its query runs, ``pipeline/query_runner.py``); a query takes
the ``fresh`` snapshot, or its worker waits for one (``wait_fresh``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sam3_agent_ros.core.cancel import CancelToken


@dataclass(frozen=True)
class Snapshot:
    message: Any  # the frame message as received (converted only when the query runs)
    received: float  # clock() when it arrived


class LatestFrame:
    """The newest frame message, by reference. ``put`` is the image callback's whole work."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._changed = threading.Condition()
        self._latest: Snapshot | None = None

    def put(self, message: Any) -> None:
        snapshot = Snapshot(message, self._clock())
        with self._changed:
            self._latest = snapshot
            self._changed.notify_all()

    def latest(self) -> Snapshot | None:
        return self._latest

    def age(self, snapshot: Snapshot) -> float:
        return self._clock() - snapshot.received

    def clear(self) -> None:
        with self._changed:
            self._latest = None

    def fresh(self, max_age_s: float, now: float | None = None) -> Snapshot | None:
        """The latest snapshot if at most ``max_age_s`` old (``max_age_s`` 0: any age)."""
        snapshot = self._latest
        if snapshot is None:
            return None
        now = self._clock() if now is None else now
        if max_age_s > 0 and now - snapshot.received > max_age_s:
            return None
        return snapshot

    def wait_fresh(self, max_age_s: float, timeout_s: float,
                   cancel: CancelToken) -> Snapshot | None:
        """Wait up to ``timeout_s`` for a fresh snapshot; None on timeout or cancel."""
        deadline = time.monotonic() + timeout_s  # real time, whatever clock dates the frames
        with self._changed:
            while True:
                snapshot = self.fresh(max_age_s)
                if snapshot is not None or cancel.cancelled:
                    return snapshot
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(min(left, 0.05))  # short slices: notice cancels quickly
