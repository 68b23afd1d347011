"""Queries off the executor thread: one worker, a preempt or FIFO-queue policy, frame snapshots.

ROS-free (the node passes plain callables), so the policy is unit-tested without a ROS graph.

Threads: the node's image callback calls ``LatestFrame.put`` (``latest_frame.py``: keeps a
reference, nothing else);
the query callback calls ``QueryRunner.submit`` (cheap: snapshot the latest frame reference,
enqueue, maybe cancel the running query); one worker thread converts the snapshot, runs the agent
and publishes. Every submitted query is finalized exactly once: by the worker (ran, or failed
waiting for a frame) or by whoever removed it from the queue (preempted while waiting,
queue full, runner stopped). ``end_all`` (the node shutting down) ends the RUNNING query too,
at once, without waiting for the agent (a model call may last seconds): whoever ends a query
first marks it ``ended`` under the lock, and the worker drops what the agent returns later,
its status events included.

A refinement (``Query.refines``, interface §8c) needs no camera frame: the agent answers it on
the frame of the answer it refines, so it neither snapshots nor waits for one (``answer`` gets
``None``). Under ``preempt`` it does not cancel the query it refines, running or waiting: it
would otherwise cancel the very answer it corrects.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sam3_agent_ros.core.cancel import CancelToken
from sam3_agent_ros.core.types import (
    Frame,
    FrameUnusable,
    Phase,
    Query,
    QueryStatus,
    Result,
    StatusEvent,
)
from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.log_limit import QUERY_LINES, LogLimiter
from sam3_agent_ros.pipeline.latest_frame import LatestFrame, Snapshot

PREEMPT = "preempt"
QUEUE = "queue"

log = logging.getLogger(__name__)


@dataclass
class _Pending:
    query: Query
    snapshot: Snapshot | None  # fresh frame at arrival, or None: wait for one (not refinements)
    cancel: CancelToken
    world: object | None = None  # what ``bind`` found for the snapshot's stamp when taken
    ended: bool = False  # its one result is out (or going out): later ones are dropped (lock)


# answer(frame, query, cancel, on_status); frame is None for a refinement
Answer = Callable[[Frame | None, Query, CancelToken, Callable[[StatusEvent], None]], Result]


def queue_full_reason(queue_size: int) -> str:
    """The error of a query refused by a full queue (``query_policy: queue``): said at once, with
    what to do (the refused query is not kept: it is sent again or it is gone)."""
    waiting = "1 query is" if queue_size == 1 else f"{queue_size} queries are"
    return (f"queue full (queue_size={queue_size}): {waiting} already waiting; send it again "
            "once one has finished, or raise queue_size, or set query_policy to preempt (a new "
            "query replaces the waiting ones)")


class QueryRunner:
    """Runs queries one at a time on a worker thread.

    - ``answer(frame, query, cancel, on_status) -> Result`` (the agent; must not raise);
    - ``to_frame(message) -> Frame`` converts a snapshot, raising ``FrameUnusable``;
    - ``publish(result)`` and ``status(event)`` send the outputs (called from the worker, or from
      the submitting thread for queries that never ran);
    - ``bind(message) -> world`` (optional): what belongs to the frame's stamp (its depth, camera
      model, transform: ``pipeline.frame_world``), found when the query TAKES its frame (at
      ``submit``, or when a waited-for frame arrives), never when it is measured seconds later;
      the frame the agent gets carries it (``Frame.world``). Cheap, never blocks, never raises
      into the runner.
    """

    def __init__(self, *, answer: Answer, to_frame: Callable[[Any], Frame],
                 publish: Callable[[Result], None], status: Callable[[StatusEvent], None],
                 frames: LatestFrame, policy: str = PREEMPT, queue_size: int = 8,
                 max_frame_age_s: float = 2.0, frame_wait_s: float = 3.0,
                 bind: Callable[[Any], object | None] | None = None,
                 limiter: LogLimiter | None = None):
        if policy not in (PREEMPT, QUEUE):
            raise ValueError(f"unknown query policy {policy!r}")
        self._answer, self._to_frame, self._bind = answer, to_frame, bind
        self._publish, self._status = publish, status
        self.frames = frames
        self.policy, self.queue_size = policy, queue_size
        self.max_frame_age_s, self.frame_wait_s = max_frame_age_s, frame_wait_s
        self.image_topic = "the image topic"  # the node names the resolved topic when active
        self._lock = threading.Condition()
        self._pending: collections.deque[_Pending] = collections.deque()
        self._running: _Pending | None = None
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._limiter = limiter if limiter is not None else LogLimiter()

    # --- called from the executor --------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._work, name="sam3_agent_queries", daemon=True)
        self._thread.start()

    def submit(self, query: Query) -> None:
        """Accept a query: snapshot the latest frame, apply the policy, never block."""
        snapshot = None if query.refines is not None else self.frames.fresh(self.max_frame_age_s)
        pending = _Pending(query, snapshot, CancelToken(), self._bound(snapshot))
        dropped: list[_Pending] = []
        with self._lock:
            overflow = self._refusal()
            if overflow is None:
                if self.policy == PREEMPT:
                    # A refinement spares the query it refines (the answer it corrects).
                    dropped = [p for p in self._pending if p.query.id != query.refines]
                    self._pending = collections.deque(
                        p for p in self._pending if p.query.id == query.refines)
                    running = self._running
                    if running is not None and running.query.id != query.refines:
                        running.cancel.cancel(f"preempted by query {query.id}")
                self._pending.append(pending)
                self._emit(StatusEvent(query.id, Phase.QUEUED, refines=query.refines))
                self._lock.notify_all()
        for old in dropped:
            self._finish(old.query, QueryStatus.CANCELLED, f"preempted by query {query.id}")
        if overflow:
            self._limiter.emit("query refused", log.warning,
                               lambda: f"query {for_log(query.id)} rejected: {overflow}",
                               QUERY_LINES)
            self._finish(query, QueryStatus.FAILED, overflow)

    def reject(self, query: Query, reason: str,
               status: QueryStatus = QueryStatus.FAILED) -> None:
        """A query that cannot run (malformed message; a goal cancelled before it started): its
        one result, ``failed`` unless said otherwise."""
        self._finish(query, status, reason)

    def cancel_all(self, reason: str) -> None:
        """Cancel the running query and every waiting one (each ends ``cancelled``)."""
        with self._lock:
            dropped = list(self._pending)
            self._pending.clear()
            if self._running is not None:
                self._running.cancel.cancel(reason)
            self._lock.notify_all()
        for old in dropped:
            self._finish(old.query, QueryStatus.CANCELLED, reason)

    def end_all(self, reason: str, refuse_more: bool = False) -> list[str]:
        """End every query now, the running one and the waiting ones, each with a ``failed``
        result (``reason``; the action aborts its goal), without waiting for the agent: the
        running query is cancelled and what its agent returns later is dropped. With
        ``refuse_more``, later submits are refused (the node is exiting). Returns the ids
        ended."""
        with self._lock:
            if refuse_more:
                self._stopping = True
            ended = list(self._pending)
            self._pending.clear()
            running = self._running
            if running is not None and not running.ended:
                running.ended = True
                running.cancel.cancel(reason)
                ended.insert(0, running)
            for item in ended:
                item.ended = True
            self._lock.notify_all()
        for item in ended:
            self._finish(item.query, QueryStatus.FAILED, reason)
        return [item.query.id for item in ended]

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until nothing runs or waits; False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while self._running is not None or self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)
        return True

    def stop(self, reason: str, timeout_s: float) -> bool:
        """Cancel everything and end the worker; False if it is still busy after ``timeout_s``."""
        with self._lock:
            self._stopping = True
            self._lock.notify_all()
        self.cancel_all(reason)
        if self._thread is None:
            return True
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def refusal(self) -> str | None:
        """Why ``submit`` would refuse a query now (stopping; with ``queue``, full), or None."""
        with self._lock:
            return self._refusal()

    def _refusal(self) -> str | None:
        """``refusal`` with the lock already held."""
        if self._stopping:
            return "the node is shutting down"
        if self.policy == QUEUE and len(self._pending) >= self.queue_size:
            return queue_full_reason(self.queue_size)
        return None

    def cancel(self, query_id: str, reason: str) -> bool:
        """Cancel one query, running or waiting (it ends ``cancelled``); False if unknown."""
        with self._lock:
            waiting = [p for p in self._pending if p.query.id == query_id]
            for item in waiting:
                self._pending.remove(item)
            current = self._running
            running = current is not None and current.query.id == query_id
            if current is not None and running:
                current.cancel.cancel(reason)
            self._lock.notify_all()
        for item in waiting:
            self._finish(item.query, QueryStatus.CANCELLED, reason)
        return running or bool(waiting)

    def load(self) -> tuple[int, str | None]:
        """(queries waiting, the running query's id or None), for ``/diagnostics``."""
        with self._lock:
            return len(self._pending), self._running.query.id if self._running else None

    @property
    def busy(self) -> bool:
        with self._lock:
            return self._running is not None or bool(self._pending)

    # --- the worker ----------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._stopping:
                    self._lock.wait()
                if not self._pending:
                    return
                item = self._running = self._pending.popleft()
            try:
                self._run(item)
            except Exception:  # the worker must survive anything
                log.exception("query %s: unexpected error in the worker", for_log(item.query.id))
                self._conclude(item, QueryStatus.FAILED, "internal error in the node")
            finally:
                with self._lock:
                    self._running = None
                    self._lock.notify_all()

    def _run(self, item: _Pending) -> None:
        def status(event: StatusEvent) -> None:  # none once the query was ended elsewhere
            if not item.ended:
                self._emit(event)

        if item.query.refines is not None:  # on the refined answer's frame: the agent has it
            if item.cancel.cancelled:
                self._conclude(item, QueryStatus.CANCELLED, item.cancel.reason)
                return
            self._conclude_with(item, self._answer(None, item.query, item.cancel, status))
            return
        snapshot, world = item.snapshot, item.world
        if snapshot is None:
            snapshot = self.frames.wait_fresh(self.max_frame_age_s, self.frame_wait_s, item.cancel)
            world = self._bound(snapshot)
        if item.cancel.cancelled:
            self._conclude(item, QueryStatus.CANCELLED, item.cancel.reason)
            return
        if snapshot is None:
            self._conclude(item, QueryStatus.FAILED, self._no_frame_reason())
            return
        try:
            frame = self._to_frame(snapshot.message)
        except FrameUnusable as exc:
            self._limiter.emit("unusable frame", log.warning,
                               f"query {for_log(item.query.id)}: unusable frame: {exc.reason}",
                               QUERY_LINES)
            self._conclude(item, QueryStatus.FAILED, f"unusable frame: {exc.reason}", exc.frame)
            return
        if world is not None:
            frame = dataclasses.replace(frame, world=world)
        self._conclude_with(item, self._answer(frame, item.query, item.cancel, status))

    def _claim(self, item: _Pending) -> bool:
        """True for the first caller only: that one publishes the query's result."""
        with self._lock:
            if item.ended:
                return False
            item.ended = True
            return True

    def _conclude(self, item: _Pending, status: QueryStatus, reason: str,
                  frame: Frame | None = None) -> None:
        if self._claim(item):
            self._finish(item.query, status, reason, frame)

    def _conclude_with(self, item: _Pending, result: Result) -> None:
        if self._claim(item):
            self._publish_safely(result)
        else:  # ended meanwhile (the node shutting down): its result is out already
            log.info("query %s: the agent's late result (%s) dropped; the query had ended",
                     for_log(item.query.id), result.status.value)

    def _bound(self, snapshot: Snapshot | None) -> object | None:
        """``bind`` of the snapshot's message (None without one); never raises."""
        if snapshot is None or self._bind is None:
            return None
        try:
            return self._bind(snapshot.message)
        except Exception:  # noqa: BLE001 (the query goes on, measured without its world)
            log.exception("binding the frame's depth and transform failed")
            return None

    def _no_frame_reason(self) -> str:
        latest = self.frames.latest()
        waited = f"waited {self.frame_wait_s:g} s"
        if latest is None:
            return f"no frame received on {self.image_topic} ({waited})"
        return (f"no frame newer than max_frame_age_s={self.max_frame_age_s:g} s "
                f"(last one {self.frames.age(latest):.1f} s ago; {waited})")

    # --- outputs -------------------------------------------------------------------------------
    def _finish(self, query: Query, status: QueryStatus, reason: str,
                frame: Frame | None = None) -> None:
        """The one result of a query that did not reach the agent."""
        self._emit(StatusEvent(query.id, Phase.DONE, status=status.value, refines=query.refines))
        self._publish_safely(Result(query.id, query.text, status, error=reason, frame=frame,
                                    refines=query.refines))

    def _emit(self, event: StatusEvent) -> None:
        try:
            self._status(event)
        except Exception:
            log.exception("publishing status of query %s failed", for_log(event.query_id))

    def _publish_safely(self, result: Result) -> None:
        try:
            self._publish(result)
        except Exception:
            log.exception("publishing the result of query %s failed", for_log(result.query_id))
