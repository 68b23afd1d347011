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
for ``follow.lost_timeout_s``, or no update went out for ``lost_timeout_s``: no usable frame) or
``stopped`` (``end``, a new follow, bad input, shutdown).

Frames are followed in ARRIVAL order: every frame offered after ``follow`` is processed, whatever
its stamp (zero, equal, older, in the future). Session time (``SessionClock``) advances by the
stamp difference while stamps go forward, so a replayed bag behaves as it did live, and by the
arrival difference where they do not (zero or equal stamps, a bag replayed in a loop, a frame
stamped in the future and the frames after it): the lost clock always runs.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sam3_agent_ros.core.types import Frame, FrameUnusable, stamp_ns
from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.follow.types import LOST, STOPPED, FollowedObject, Session, starting_source
from sam3_agent_ros.pipeline.newest_frame import NewestFrameWorker, Offered, Wait, Work

log = logging.getLogger(__name__)

# A forward stamp step longer than STAMP_RATE_MAX x the arrival step + STAMP_SLACK_S is a clock
# jump (a frame stamped in the future): its arrival step counts instead. Bags replayed up to 2x
# faster, and camera gaps (both steps long), keep their stamp steps.
STAMP_RATE_MAX = 2.0
STAMP_SLACK_S = 1.0


class SessionClock:
    """The time handed to ``Session.update``: never backwards, running on every frame.

    Starts at the answer's frame (its stamp; it arrived at ``received``); each frame then
    advances it by its stamp step when the stamp went forward and the step is no clock jump,
    else by its arrival step. Without an answer's frame it starts at the first frame's stamp."""

    def __init__(self, stamp_ns: int | None, received: float):
        self.now_s: float | None = None if stamp_ns is None else stamp_ns / 1e9
        self._stamp_ns = stamp_ns
        self._received = received

    def advance(self, stamp_ns: int, received: float) -> float:
        arrival_step = max(0.0, received - self._received)
        if self.now_s is None or self._stamp_ns is None:
            self.now_s = stamp_ns / 1e9
        else:
            stamp_step = (stamp_ns - self._stamp_ns) / 1e9
            forward = 0 < stamp_step <= STAMP_RATE_MAX * arrival_step + STAMP_SLACK_S
            self.now_s += stamp_step if forward else arrival_step
        self._stamp_ns, self._received = stamp_ns, received
        return self.now_s

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
    clock: SessionClock
    updated: float  # clock() of the last update published (at first: of ``follow``)
    text: str = ""  # the query, for a re-grounding
    last_frame: Frame | None = None
    last_source: str = ""


@dataclass
class _Ending:
    followed: _Followed
    reason: str


@dataclass
class FollowStats:
    frames: int = 0  # frames followed (updates published)
    dropped: int = 0  # frames replaced in the slot before the thread took them
    unusable: int = 0  # frames that could not be converted
    quiet: int = 0  # follows ended lost by the watchdog (no update for lost_timeout_s)
    updates_ms: list[float] = field(default_factory=list)  # latency of the last updates


class FollowRunner:
    """Follows one answer at a time on its own thread.

    - ``to_frame(message) -> Frame`` converts a frame message, raising ``FrameUnusable``;
    - ``publish(frame, masks, status)`` sends the follow outputs (called on the follow thread);
    - ``on_reground(query_id, text)`` re-runs a lost query (``follow.reground_on_lost``);
    - ``lost_timeout_s`` (``follow.lost_timeout_s``; None: no watchdog): a follow that publishes
      no update for this long (by ``clock``: no frame, only unusable ones) ends ``lost``.
    """

    def __init__(self, *, to_frame: Callable[[Any], Frame], publish: Publish,
                 on_reground: Callable[[str, str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 lost_timeout_s: float | None = None):
        self._to_frame = to_frame
        self._publish = publish
        self._on_reground = on_reground
        self._clock = clock
        self._lost_timeout_s = lost_timeout_s
        self._followed: _Followed | None = None
        self._endings: list[_Ending] = []
        self._frames: NewestFrameWorker[Any] = NewestFrameWorker(
            plan=self._plan, label="follow", thread_name="sam3_agent_follow",
            wanted=lambda: self._followed is not None, on_stop=self._finish_endings,
            clock=clock)
        self._changed = self._frames.changed  # the follow's state shares the slot's lock
        self.stats = FollowStats()

    # --- any thread ------------------------------------------------------------------------------
    def start(self) -> None:
        self._frames.start()

    @property
    def following(self) -> str | None:
        """The query id being followed, or None."""
        followed = self._followed
        return followed.query_id if followed is not None else None

    def follow(self, query_id: str, session: Session, count: int, after: Frame | None,
               text: str = "", answer_age_s: float = 0.0) -> None:
        """Start following (the previous follow, if any, ends ``stopped``) from ``after``, the
        answer's frame, which arrived about ``answer_age_s`` ago (the query's duration)."""
        now = self._clock()
        age = answer_age_s if math.isfinite(answer_age_s) and answer_age_s > 0 else 0.0
        clock = SessionClock(_stamp_ns(after) if after is not None else None, now - age)
        followed = _Followed(query_id, session, count, clock, now, text, last_frame=after,
                             last_source=starting_source(session.mode))
        with self._changed:
            if self._frames.stopping:
                self._endings.append(_Ending(followed, "the node is shutting down"))
            else:
                if self._followed is not None:
                    self._endings.append(_Ending(self._followed,
                                                 f"replaced by the follow of {query_id}"))
                self._followed = followed
                self._frames.clear()
            self._changed.notify_all()

    def offer(self, message: Any) -> None:
        """The image callback's part: O(1), keeps a reference, drops an untaken older frame."""
        if self._frames.offer(message):
            self.stats.dropped += 1

    def end(self, reason: str) -> str | None:
        """Stop following; returns the query id that was followed (None: nothing was). The
        ``stopped`` status goes out from the follow thread right after its current frame."""
        with self._changed:
            followed, self._followed = self._followed, None
            self._frames.clear()
            if followed is not None:
                self._endings.append(_Ending(followed, reason))
                self._changed.notify_all()
            return followed.query_id if followed is not None else None

    def wait_idle(self, timeout_s: float) -> bool:
        """Until no frame is being processed and no ending is pending (e.g. before a query uses
        the segmenter the follow thread may be using); False on timeout."""
        return self._frames.wait_idle(timeout_s, settled=lambda: not self._endings)

    def shutdown(self, timeout_s: float = 5.0) -> bool:
        """End the follow (``stopped``) and the thread; False when the thread did not finish."""
        self.end("the node is shutting down")
        return self._frames.stop(timeout_s)  # its last work: the pending endings

    # --- the follow thread -----------------------------------------------------------------------
    def _quiet_for(self) -> float | None:
        """Seconds until the followed session has gone ``lost_timeout_s`` without an update
        (<= 0: it has); None: no watchdog or nothing followed. Under ``_changed``."""
        if self._lost_timeout_s is None or self._followed is None:
            return None
        return self._followed.updated + self._lost_timeout_s - self._clock()

    def _plan(self) -> Work | Wait:
        """The follow thread's next work: pending endings first, then the watchdog's ``lost``,
        then the newest frame; else wait (until the watchdog is due). Under ``_changed``."""
        if self._endings:
            return self._finish_endings
        left = self._quiet_for()
        followed = self._followed
        if followed is not None and left is not None and left <= 0:
            self._followed = None  # ends with the watchdog's lost
            self._frames.clear()
            return lambda: self._publish_quiet_lost(followed)
        offered = self._frames.take() if followed is not None else None
        if followed is not None and offered is not None:
            return lambda: self._process(followed, offered)
        return Wait(left)

    def _finish_endings(self) -> None:
        with self._changed:
            endings, self._endings = self._endings, []
        for ending in endings:
            followed = ending.followed
            update = followed.session.stop()
            self._safe_publish(followed.last_frame, [None] * followed.count, status_json(
                followed.query_id, followed.session.mode, STOPPED, followed.last_source,
                followed.last_frame, None, [], update.error or ending.reason))

    def _process(self, followed: _Followed, slot: Offered[Any]) -> None:
        message = slot.message
        try:
            frame = self._to_frame(message)
        except FrameUnusable as exc:
            self.stats.unusable += 1
            log.warning("follow: skipping an unusable frame: %s", exc.reason)
            return
        now_s = followed.clock.advance(_stamp_ns(frame), slot.received)
        update = followed.session.update(frame.image, now_s)
        latency_ms = (self._clock() - slot.received) * 1000.0
        with self._changed:
            current = self._followed is followed
            if current and update.state in (LOST, STOPPED):
                self._followed = None  # this follow ends with this update
        if not current:
            return  # ended while this frame was processed: its 'stopped' says so
        followed.last_frame, followed.last_source = frame, update.source
        followed.updated = self._clock()
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

    def _publish_quiet_lost(self, followed: _Followed) -> None:
        """The watchdog's final ``lost``: no update for ``lost_timeout_s`` (no re-grounding: a
        re-run query would find no usable frame either)."""
        self.stats.quiet += 1
        quiet_s = self._clock() - followed.updated
        log.warning("follow of %s: no update for %.1f s: lost", for_log(followed.query_id),
                    quiet_s)
        self._safe_publish(followed.last_frame, [None] * followed.count, status_json(
            followed.query_id, followed.session.mode, LOST, followed.last_source,
            followed.last_frame, None, [],
            f"no update for {quiet_s:.1f} s (follow.lost_timeout_s): no usable frame arrived"))

    def _safe_publish(self, frame: Frame | None, masks: list[np.ndarray | None],
                      status: dict[str, Any]) -> None:
        try:
            self._publish(frame, masks, status)
        except Exception as exc:  # noqa: BLE001 (publishing must not kill the follow thread)
            log.warning("follow: publishing failed: %s: %s", type(exc).__name__, exc)


def _stamp_ns(frame: Frame) -> int:
    """The stamp of the message a frame came from, in nanoseconds."""
    return stamp_ns(frame.stamp_sec, frame.stamp_nanosec)
