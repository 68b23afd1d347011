"""The node's follow mode (interface §5b), ROS-free: which queries are followed, the follow
thread and each update's 3D step; the ``~/follow/*`` messages go out through the node's outputs
room, and the ``~/stop_follow`` service (``ros/stop_follow.py``) calls ``stop``.

The node calls, in order of a query's life:
- ``before_query(query_id, text, follow)`` when it accepts a query (topic query, action goal,
  re-grounding): a new query ends following, and whether it is to be followed is noted
  (``follow`` None: ``follow.default``);
- ``before_answer(query_id)`` on the query worker, before the agent runs: ends a follow that
  started meanwhile (the answer of the query before) and waits, bounded, for the follow thread
  to finish its frame (the segmenter is shared);
- ``after_result(result)`` on the query worker, after the result is published: a succeeded
  query that asked to be followed starts a ``FollowSession`` on the answer's frame and masks;
- ``offer(message)`` from the image callback (O(1)); ``stop(reason)`` for stop_follow and
  deactivation.
The follow thread (``FollowRunner``) measures each update (the one 3D step,
``pipeline.three_d.measure_3d``) and publishes it through ``outputs.NodeOutputs.publish_follow``;
``on_status`` (the node's health) sees every status, and ``follow_health.follow_started`` when a
session begins.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from sam3_agent_ros.config import Config
from sam3_agent_ros.core.ports import Logger
from sam3_agent_ros.core.types import Frame, QueryStatus, Result, stamp_ns
from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.follow.types import STOPPED, starting_source
from sam3_agent_ros.health.follow import follow_started
from sam3_agent_ros.log_limit import LogLimiter
from sam3_agent_ros.pipeline.follow_runner import FollowRunner, status_json
from sam3_agent_ros.pipeline.target_frame import TargetFrame, TargetFrameRequest
from sam3_agent_ros.pipeline.three_d import Located, measure_3d

BEFORE_ANSWER_WAIT_S = 5.0  # a follow frame (e.g. a SAM 3 re-detection) finishing first
SHUTDOWN_WAIT_S = 5.0


class FollowOutputs(Protocol):
    """Where follow updates go out (the node: ``ros/outputs.NodeOutputs``)."""

    def follow_wants_3d(self, depth: Any) -> bool: ...

    def publish_follow(self, frame: Frame | None, masks: Sequence[np.ndarray | None],
                       status: dict[str, Any], located: Located | None = None,
                       label: str | None = None) -> object: ...


class FollowControl:
    def __init__(self, logger: Logger, limiter: LogLimiter, config: Config, segmenter: Any,
                 to_frame: Callable[[Any], Frame], depth: Callable[[], Any],
                 reground: Callable[[str, str], None], outputs: FollowOutputs,
                 on_status: Callable[[dict[str, Any]], None] | None = None,
                 target_frame: Callable[[], TargetFrameRequest | None] | None = None,
                 on_target: Callable[[TargetFrame, str], None] | None = None):
        self._logger = logger  # the node's
        self._limiter = limiter  # the node's (log_limit.limiter_of): lines a peer can cause
        self._config = config.follow
        self._backends = config.backends  # named in every follow status (interface §6)
        self._segmenter = segmenter
        self._depth = depth  # the node's current DepthTargets (None without depth)
        self._on_status = on_status  # sees every ~/follow/status (the node's health)
        self._target_frame = target_frame  # the node's TF request (target_frame set) or None
        self._on_target = on_target  # sees every lookup (the node's health)
        self._lock = threading.Lock()
        self._requests: dict[str, tuple[bool, str]] = {}  # query id -> (follow?, query text)
        self._labels: dict[str, str] = {}  # the followed query's id -> its text (marker labels)
        self._outputs = outputs  # the node's outputs room (ros/outputs.py)
        self._runner = FollowRunner(to_frame=to_frame, publish=self._publish,
                                    on_reground=self._on_reground,
                                    lost_timeout_s=self._config.lost_timeout_s)
        self._reground = reground
        self._runner.start()

    @property
    def runner(self) -> FollowRunner:
        return self._runner

    # --- executor thread -------------------------------------------------------------------------
    def offer(self, message: Any) -> None:
        self._runner.offer(message)

    def before_query(self, query_id: str, text: str, follow: bool | None) -> None:
        """A query was accepted: following ends (it must not slow the query) and whether the
        answer is to be followed is noted (``follow`` None: ``follow.default``)."""
        self.stop(f"new query {query_id}")
        wanted = self._config.default if follow is None else bool(follow)
        with self._lock:
            self._requests[query_id] = (wanted, text)
            while len(self._requests) > 1000:  # ids of queries that never finished (bounded)
                self._requests.pop(next(iter(self._requests)))

    def stop(self, reason: str) -> str | None:
        """End following (``stopped`` follows from the follow thread); the id, or None."""
        query_id = self._runner.end(reason)
        if query_id is not None:  # a peer can stop (and start) following in a loop: limited
            self._limiter.emit(
                "follow ends", self._logger.info,
                lambda: f"follow of {for_log(query_id)} ends: {for_log(reason)}")
        return query_id

    # --- query worker ----------------------------------------------------------------------------
    def before_answer(self, query_id: str) -> None:
        self.stop(f"new query {query_id}")
        if not self._runner.wait_idle(BEFORE_ANSWER_WAIT_S):
            self._logger.warning("follow: the follow thread is still busy with a "
                                            "frame; the query runs anyway")

    def after_result(self, result: Result) -> None:
        with self._lock:
            asked = self._requests.pop(result.query_id, None)
        if asked is None:  # not through before_query() (e.g. a query that was rejected)
            asked = (self._config.default and result.status == QueryStatus.SUCCEEDED,
                     result.query)
        wanted, text = asked
        if not wanted:
            return
        frame = result.frame
        if result.status != QueryStatus.SUCCEEDED or frame is None or frame.image.size == 0:
            self._publish_refusal(result, f"not followed: the query ended {result.status.value}"
                                  + (f" ({result.error})" if result.error else ""))
            return
        from sam3_agent_ros.follow import FollowError, FollowSession

        prompt = result.text_prompts[-1] if result.text_prompts else None
        try:
            session = FollowSession(self._config, self._segmenter, frame.image,
                                    [m.mask for m in result.masks], prompt,
                                    now_s=stamp_ns(frame.stamp_sec, frame.stamp_nanosec) / 1e9,
                                    catch_up=result.refines is not None)  # an older frame
        except FollowError as exc:
            self._publish_refusal(result, f"not followed: {exc}")
            return
        except Exception as exc:  # noqa: BLE001 (a tracker that cannot start ends following)
            self._publish_refusal(result, f"not followed: {type(exc).__name__}: {exc}")
            return
        with self._lock:
            self._labels = {result.query_id: result.query}  # ~/markers labels, this follow's
        if self._on_status is not None:  # the health knows a session exists before its update
            self._on_status(follow_started(result.query_id))
        self._runner.follow(result.query_id, session, len(result.masks), frame, text,
                            answer_age_s=result.timings.total_s)
        self._logger.info(
            f"following {for_log(result.query_id)} ({len(result.masks)} object(s), "
            f"follow.mode={self._config.mode})")

    def _publish_refusal(self, result: Result, reason: str) -> None:
        self._logger.warning(f"query {for_log(result.query_id)}: {for_log(reason, 500)}")
        self._publish(result.frame, [], status_json(
            result.query_id, self._config.mode, STOPPED, starting_source(self._config.mode),
            result.frame, None, [], reason))

    # --- follow thread ---------------------------------------------------------------------------
    def _publish(self, frame: Frame | None, masks: list[np.ndarray | None],
                 status: dict[str, Any]) -> None:
        if self._on_status is not None:
            self._on_status(status)
        with self._lock:
            label = self._labels.get(str(status.get("query_id")))
        depth = self._depth()
        located = None
        if self._outputs.follow_wants_3d(depth):  # measured before any message is built
            request = self._target_frame() if self._target_frame is not None else None
            located = measure_3d(depth, frame, masks, request, self._logger)
            if located.target is not None and self._on_target is not None:
                self._on_target(located.target, "follow update")
        self._outputs.publish_follow(frame, masks, {**status, "backends": self._backends},
                                     located, label)

    def _on_reground(self, query_id: str, text: str) -> None:
        self._logger.info(f"follow of {for_log(query_id)} lost: re-running the query "
                                     "(follow.reground_on_lost)")
        self._reground(query_id, text)

    # --- lifecycle -------------------------------------------------------------------------------
    def destroy(self, wait_s: float = SHUTDOWN_WAIT_S) -> bool:
        """End following and the follow thread (waited for up to ``wait_s``); False when the
        thread is still busy (e.g. in the segmenter). The publishers are the outputs room's,
        the service ``ros/stop_follow.py``'s."""
        stopped = self._runner.shutdown(wait_s)
        if not stopped:
            self._logger.warning("follow: the follow thread did not stop in time")
        return stopped

