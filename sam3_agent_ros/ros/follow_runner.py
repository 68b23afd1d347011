"""Follow mode off the executor thread: one follow thread, a newest-only frame slot.

ROS-free (the node passes plain callables), so the threading is unit-tested without a ROS graph.

Threads:
- the image callback calls ``offer(message)``: when nothing is followed it returns at once; else
  it replaces the slot's frame (never a queue: a frame the tracker had no time for is dropped, so
  latency never builds up);
- the query worker calls ``follow(...)`` after a query that asked to be followed succeeded;
- anyone (the query callback, the ``~/stop_follow`` service, shutdown) calls ``end(reason)``;
- the follow thread converts the newest frame, runs ``FollowSession.update`` on it and publishes.

Every followed answer ends in exactly one final status: ``lost`` (the session lost the objects
for ``follow.lost_timeout_s``) or ``stopped`` (``end``, a new follow, bad input, shutdown).
Session time is the frames' own stamps, so a replayed bag behaves as it did live.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sam3_agent_ros.core.types import Frame
from sam3_agent_ros.follow.types import LOST, STOPPED, FollowedObject, Session, starting_source
from sam3_agent_ros.ros.conversions import FrameUnusable, frame_stamp_ns

log = logging.getLogger(__name__)

# publish(frame or None, masks by object index (None: not visible), status JSON)
Publish = Callable[[Frame | None, list[np.ndarray | None], dict[str, Any]], None]


def status_json(query_id: str, mode: str, state: str, source: str, frame: Frame | None,
                latency_ms: float | None, objects: list[FollowedObject],
                reason: str | None = None) -> dict[str, Any]:
    """The ``~/follow/status`` JSON (interface §5b). Each object's ``id`` is its place among
    the answer's masks (1-based, the value in labels)."""
    return {
        "query_id": query_id, "state": state, "mode": mode, "source": source,
        "frame": {"sec": frame.stamp_sec if frame else 0,
                  "nanosec": frame.stamp_nanosec if frame else 0},
        "frame_id": frame.frame_id if frame else "",
        "latency_ms": None if latency_ms is None else round(latency_ms, 2),
        "objects": [{"id": int(o.index) + 1, "bbox": [round(float(v), 1) for v in o.bbox],
                     "centroid": [round(float(v), 1) for v in o.centroid],
                     "confidence": round(float(o.confidence), 4)} for o in objects],
        "reason": reason,
    }


@dataclass
class _Followed:
    query_id: str
    session: Session
    count: int  # objects in the answer
    after_ns: int  # frames stamped at or before the answer's frame are not followed
    text: str = ""  # the query, for a re-grounding
    last_frame: Frame | None = None
    last_source: str = ""


@dataclass
class _Slot:
    message: Any
    received: float  # clock() at offer


@dataclass
class _Ending:
    followed: _Followed
    reason: str


@dataclass
class FollowStats:
    frames: int = 0  # frames followed (updates published)
    dropped: int = 0  # frames replaced in the slot before the thread took them
    unusable: int = 0  # frames that could not be converted
    skipped: int = 0  # frames stamped at or before the answer's frame
    updates_ms: list[float] = field(default_factory=list)  # latency of the last updates


class FollowRunner:
    """Follows one answer at a time on its own thread.

    - ``to_frame(message) -> Frame`` converts a frame message, raising ``FrameUnusable``;
    - ``publish(frame, masks, status)`` sends the follow outputs (called on the follow thread);
    - ``on_reground(query_id, text)`` re-runs a lost query (``follow.reground_on_lost``).
    """

    def __init__(self, *, to_frame: Callable[[Any], Frame], publish: Publish,
                 on_reground: Callable[[str, str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self._to_frame = to_frame
        self._publish = publish
        self._on_reground = on_reground
        self._clock = clock
        self._changed = threading.Condition()
        self._followed: _Followed | None = None
        self._slot: _Slot | None = None
        self._endings: list[_Ending] = []
        self._busy = False
        self._shutdown = False
        self._thread: threading.Thread | None = None
        self.stats = FollowStats()

    # --- any thread ------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sam3_agent_follow", daemon=True)
        self._thread.start()

    @property
    def following(self) -> str | None:
        """The query id being followed, or None."""
        followed = self._followed
        return followed.query_id if followed is not None else None

    def follow(self, query_id: str, session: Session, count: int, after: Frame | None,
               text: str = "") -> None:
        """Start following (the previous follow, if any, ends ``stopped``)."""
        after_ns = frame_stamp_ns(after) if after is not None else -1
        followed = _Followed(query_id, session, count, after_ns, text, last_frame=after,
                             last_source=starting_source(session.mode))
        with self._changed:
            if self._shutdown:
                self._endings.append(_Ending(followed, "the node is shutting down"))
            else:
                if self._followed is not None:
                    self._endings.append(_Ending(self._followed,
                                                 f"replaced by the follow of {query_id}"))
                self._followed = followed
                self._slot = None
            self._changed.notify_all()

    def offer(self, message: Any) -> None:
        """The image callback's part: O(1), keeps a reference, drops an untaken older frame."""
        if self._followed is None:
            return
        slot = _Slot(message, self._clock())
        with self._changed:
            if self._followed is None:
                return
            if self._slot is not None:
                self.stats.dropped += 1
            self._slot = slot
            self._changed.notify_all()

    def end(self, reason: str) -> str | None:
        """Stop following; returns the query id that was followed (None: nothing was). The
        ``stopped`` status goes out from the follow thread right after its current frame."""
        with self._changed:
            followed, self._followed, self._slot = self._followed, None, None
            if followed is not None:
                self._endings.append(_Ending(followed, reason))
                self._changed.notify_all()
            return followed.query_id if followed is not None else None

    def wait_idle(self, timeout_s: float) -> bool:
        """Until no frame is being processed and no ending is pending (e.g. before a query uses
        the segmenter the follow thread may be using); False on timeout."""
        with self._changed:  # the thread notifies when it sets _busy False (endings are done)
            return self._changed.wait_for(lambda: not (self._busy or self._endings), timeout_s)

    def shutdown(self, timeout_s: float = 5.0) -> bool:
        """End the follow (``stopped``) and the thread; False when the thread did not finish."""
        self.end("the node is shutting down")
        with self._changed:
            self._shutdown = True
            self._changed.notify_all()
        thread = self._thread
        if thread is None:
            self._finish_endings()
            return True
        thread.join(timeout_s)
        return not thread.is_alive()

    # --- the follow thread -----------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._changed:
                while not (self._shutdown or self._endings
                           or (self._followed is not None and self._slot is not None)):
                    self._changed.wait()
                job = None
                if self._followed is not None and self._slot is not None and not self._endings:
                    job, self._slot = (self._followed, self._slot), None
                self._busy = True
                shutting_down = self._shutdown
            try:
                self._finish_endings()
                if job is not None:
                    self._process(*job)
            except Exception:  # noqa: BLE001 (the thread must survive anything)
                log.exception("follow: unexpected failure")
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()
            if shutting_down:
                self._finish_endings()
                return

    def _finish_endings(self) -> None:
        with self._changed:
            endings, self._endings = self._endings, []
        for ending in endings:
            followed = ending.followed
            update = followed.session.stop()
            self._safe_publish(followed.last_frame, [None] * followed.count, status_json(
                followed.query_id, followed.session.mode, STOPPED, followed.last_source,
                followed.last_frame, None, [], update.error or ending.reason))

    def _process(self, followed: _Followed, slot: _Slot) -> None:
        message = slot.message
        try:
            frame = self._to_frame(message)
        except FrameUnusable as exc:
            self.stats.unusable += 1
            log.warning("follow: skipping an unusable frame: %s", exc.reason)
            return
        frame_ns = frame_stamp_ns(frame)
        if frame_ns <= followed.after_ns:
            self.stats.skipped += 1
            return  # the answer's own frame (or older): nothing new to follow
        update = followed.session.update(frame.image, frame_ns / 1e9)
        latency_ms = (self._clock() - slot.received) * 1000.0
        with self._changed:
            current = self._followed is followed
            if current and update.state in (LOST, STOPPED):
                self._followed = None  # this follow ends with this update
        if not current:
            return  # ended while this frame was processed: its 'stopped' says so
        followed.last_frame, followed.last_source = frame, update.source
        masks: list[np.ndarray | None] = [None] * followed.count
        for obj in update.objects:
            if 0 <= obj.index < followed.count:
                masks[obj.index] = obj.mask
        reason = update.error
        if update.state == LOST:
            reason = "no followed object seen for follow.lost_timeout_s"
        self.stats.frames += 1
        self.stats.updates_ms = (self.stats.updates_ms + [latency_ms])[-1000:]
        self._safe_publish(frame, masks, status_json(
            followed.query_id, followed.session.mode, update.state, update.source, frame,
            latency_ms, update.objects, reason))
        if update.state == LOST and update.reground and self._on_reground:
            try:
                self._on_reground(followed.query_id, followed.text)
            except Exception:  # noqa: BLE001
                log.exception("follow: re-grounding failed")

    def _safe_publish(self, frame: Frame | None, masks: list[np.ndarray | None],
                      status: dict[str, Any]) -> None:
        try:
            self._publish(frame, masks, status)
        except Exception as exc:  # noqa: BLE001 (publishing must not kill the follow thread)
            log.warning("follow: publishing failed: %s: %s", type(exc).__name__, exc)
