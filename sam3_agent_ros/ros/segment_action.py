"""The action ``~/segment`` (``sam3_agent_ros/action/Segment``): goals are queries.

ROS-thin glue between rclpy's ``ActionServer`` and the node's ``QueryRunner`` (interface §5a):

- ``goal_callback`` (executor): reject when the node is not active or the queue is full
  (``query_policy: queue``); otherwise accept.
- ``execute`` (executor, a coroutine): submit the goal as a query the way the node submits topic
  queries (the same runner, so ``query_policy``, ``~/status``, ``~/result``, the output images
  and follow mode apply); a query id that a running goal holds is refused alone
  (``refuse_duplicate``, which the node also asks about topic queries); then
  ``await`` an rclpy ``Future`` that the worker completes. The executor is never blocked: rclpy
  resumes the coroutine when the future is done (its done callback wakes the executor).
- ``on_status`` (worker): each status event of a goal's query becomes one feedback message.
- ``on_result`` (worker, after the node published the answer): the result message is built from
  the published messages and handed to the goal; ``execute`` then ends the goal SUCCEEDED
  (succeeded, no_mask), ABORTED (failed) or CANCELED (cancelled).
- ``cancel_callback`` (executor): accept and cancel the goal's query; the agent stops within one
  step and the goal ends CANCELED with its ``cancelled`` result.

Memory of finished goals: rclpy keeps each finished goal's result for ``action.result_timeout_s``
(for a client that asks late; a waiting client got it when the goal ended), then drops it. Only
the ``action.max_results_with_images`` most recent of those keep their mask and labels images
(2 bytes a pixel: 4 MiB at 1080p); older ones lose them, keeping status, error, masks and
result_json. glibc keeps freed memory in the process for reuse, so ``action.result_timeout_s`` +
1 s after the last goal ended (every result has expired by then) the server collects garbage and
hands the free memory back to the OS (``malloc_trim``). ``bench/action_memory.py`` measures it.

The interfaces are generated (CMakeLists.txt, scripts/build_interfaces.sh). When they cannot be
imported, ``serve`` logs it once and returns None: the node runs with topics only.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rclpy.timer import Timer
from sensor_msgs.msg import Image

from sam3_agent_ros.config import PARAMETERS_BY_NAME
from sam3_agent_ros.core.types import Query, QueryStatus, Result, StatusEvent
from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.pipeline.intake import QueryRejected, goal_query
from sam3_agent_ros.pipeline.query_life import refines_note
from sam3_agent_ros.pipeline.running import RunningIds, in_use
from sam3_agent_ros.ros import generated_types
from sam3_agent_ros.ros.messages.action import (
    result_message,
)
from sam3_agent_ros.ros.qos import ACTION_SERVICE_QOS

ACTION_NAME = "~/segment"
# action.result_timeout_s: how long rclpy keeps a finished goal's result (its mask and labels
# images included) for a client that asks late; set explicitly, rclpy's default differs between
# releases (10 s on Kilted, 900 s before).
DEFAULT_RESULT_TIMEOUT_S: int = PARAMETERS_BY_NAME["action.result_timeout_s"].default
DEFAULT_MAX_RESULTS_WITH_IMAGES: int = PARAMETERS_BY_NAME["action.max_results_with_images"].default
TRIM_DELAY_S = 1.0  # after the result timeout: rclpy has dropped the expired results by then


def feedback_fields(event: StatusEvent) -> dict[str, Any]:
    """The feedback message's fields for one status event (None becomes "")."""
    return {"phase": event.phase.value, "round": int(event.round), "tool": event.tool or "",
            "text_prompt": event.text_prompt or "", "num_masks": int(event.num_masks),
            "reasoning": event.reasoning or "", "elapsed_s": float(event.elapsed_s),
            "refines": event.refines or ""}


class KeptImages:
    """The finished results that still hold their mask and labels images: at most ``limit``
    (>= 1), and none older than ``timeout_s`` (rclpy has dropped those). ``add`` takes the images
    out of the oldest result past the limit: one that rclpy has already sent to the clients
    waiting for it (it sends a result as soon as ``execute`` returns it, on the executor thread,
    the only thread that calls ``add``)."""

    def __init__(self, limit: int, timeout_s: float, clock: Callable[[], float] = time.monotonic):
        self.limit, self.timeout_s, self._clock = max(1, limit), timeout_s, clock
        self._kept: collections.deque[tuple[float, Any]] = collections.deque()

    def add(self, message: Any) -> None:
        now = self._clock()
        while self._kept and now - self._kept[0][0] > self.timeout_s:
            self._kept.popleft()  # expired in rclpy: only our reference goes
        if not _has_images(message):
            return
        self._kept.append((now, message))
        while len(self._kept) > self.limit:
            drop_images(self._kept.popleft()[1])

    def clear(self) -> None:
        self._kept.clear()

    def __len__(self) -> int:
        return len(self._kept)


def _has_images(message: Any) -> bool:
    return bool(len(message.mask.data) or len(message.labels.data))


def drop_images(message: Any) -> None:
    """Replace a result message's mask and labels by empty images with the same header."""
    message.mask = Image(header=message.header)
    message.labels = Image(header=message.header)


@dataclass
class _Goal:
    handle: Any  # rclpy ServerGoalHandle
    query: Query
    done: Any  # rclpy Future: (status, result message)


class SegmentActionServer:
    """``~/segment`` on ``node``. ``runner()`` is the node's current QueryRunner (None while
    unconfigured), ``active()`` whether the node is active, ``max_query_chars()`` the limit;
    ``submit(query, follow)`` hands an accepted goal's query over as the node does a topic
    query's (``follow`` None: ``follow.default``). ``result_timeout_s`` is fixed for the
    server's life (the node keeps its first server)."""

    def __init__(self, node: Any, interfaces: tuple[Any, Any], *,
                 runner: Callable[[], Any], active: Callable[[], bool],
                 new_query_id: Callable[[], str], max_query_chars: Callable[[], int],
                 submit: Callable[[Query, bool | None], None],
                 backends: Callable[[], dict[str, str]] = dict,
                 result_timeout_s: int = DEFAULT_RESULT_TIMEOUT_S,
                 max_results_with_images: int = DEFAULT_MAX_RESULTS_WITH_IMAGES):
        from rclpy.action import ActionServer

        self._node = node
        self._action, self._mask_info = interfaces
        self._runner, self._active = runner, active
        self._new_query_id, self._max_query_chars = new_query_id, max_query_chars
        self._submit = submit
        self._backends = backends  # named in the results made here (interface §6)
        self._goals: RunningIds[_Goal] = RunningIds()  # query id -> goal, until its result
        self._result_timeout_s = int(result_timeout_s)
        self._with_images = KeptImages(max_results_with_images, self._result_timeout_s)
        self._trim_timer: Timer | None = None  # one-shot: once the last ended goal's result expired
        self.in_flight = 0  # goals whose execute has not returned (shutdown waits for them)
        self._server = ActionServer(
            node, self._action, ACTION_NAME, execute_callback=self._execute,
            goal_callback=self._on_goal, cancel_callback=self._on_cancel,
            goal_service_qos_profile=ACTION_SERVICE_QOS,  # a burst of goals: ros/qos.py
            result_service_qos_profile=ACTION_SERVICE_QOS,
            cancel_service_qos_profile=ACTION_SERVICE_QOS, result_timeout=int(result_timeout_s))

    # --- executor side -------------------------------------------------------------------------
    def _on_goal(self, goal: Any) -> Any:
        from rclpy.action import GoalResponse

        runner = self._runner()
        if runner is None or not self._active():
            reason = "the node is not active"
        else:
            reason = runner.refusal()  # the reason a topic query would be refused now
        if reason is not None:
            self._node.get_logger().warning(
                f"segment goal {for_log(repr(goal.query))} rejected: {reason}")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _on_cancel(self, goal_handle: Any) -> Any:
        from rclpy.action import CancelResponse

        runner = self._runner()
        query_ids = self._goals.ids_of(lambda goal: goal.handle is goal_handle)
        for query_id in query_ids:
            if runner is not None:
                runner.cancel(query_id, "goal cancelled by the client")
        return CancelResponse.ACCEPT

    async def _execute(self, goal_handle: Any) -> Any:
        self.in_flight += 1  # executor thread only
        try:
            return await self._execute_goal(goal_handle)
        finally:
            self.in_flight -= 1

    async def _execute_goal(self, goal_handle: Any) -> Any:
        from rclpy.task import Future

        done: Future[tuple[QueryStatus, Any]] = Future(executor=self._node.executor)
        done.add_done_callback(lambda _: None)  # a done callback makes set_result wake the executor
        request = goal_handle.request
        runner = self._runner()
        try:
            query = goal_query(request.query, request.query_id, self._max_query_chars(),
                               self._new_query_id, getattr(request, "refines", ""))
            rejected = None
        except QueryRejected as exc:
            query, rejected = exc.failed_query(self._new_query_id), exc.reason
        duplicate = not self._goals.claim(query.id, _Goal(goal_handle, query, done))
        self._node.get_logger().info(
            f"segment goal, query {for_log(query.id)}: {for_log(repr(query.text))}"
            + refines_note(query))
        if duplicate:
            failed = self._in_use(query)
            done.set_result((failed.status, result_message(self._action, self._mask_info,
                                                           failed)))
        elif runner is None:
            self.on_result(Result(query.id, query.text, QueryStatus.FAILED,
                                  error="the node is not configured", refines=query.refines,
                                  backends=self._backends()))
        elif rejected is not None:
            runner.reject(query, rejected)  # publishes its failed result, like a topic query
        elif goal_handle.is_cancel_requested:  # cancelled before it started
            runner.reject(query, "goal cancelled by the client", QueryStatus.CANCELLED)
        else:  # goal.follow true, else follow.default
            self._submit(query, True if getattr(request, "follow", False) else None)
        ended = await done
        assert ended is not None  # set_result is always called with (status, message)
        status, message = ended
        self._end(goal_handle, status)
        self._with_images.add(message)
        return message

    def _end(self, goal_handle: Any, status: QueryStatus) -> None:
        self._trim_after_expiry()
        if status in (QueryStatus.SUCCEEDED, QueryStatus.NO_MASK):
            goal_handle.succeed()
        elif status == QueryStatus.CANCELLED:
            if not goal_handle.is_cancel_requested:
                # Preempted or deactivated: rclpy has no public "cancel from the server side"
                # and CANCELED is only reachable from CANCELING.
                from rclpy.impl.implementation_singleton import rclpy_implementation

                try:
                    goal_handle._update_state(rclpy_implementation.GoalEvent.CANCEL_GOAL)
                except Exception:  # noqa: BLE001 (no such transition in this rclpy)
                    goal_handle.abort()
                    return
            goal_handle.canceled()
        else:
            goal_handle.abort()

    def _trim_after_expiry(self) -> None:
        """(Re)start the one-shot timer that frees memory once this goal's result expired."""
        if self._trim_timer is None:
            self._trim_timer = self._node.create_timer(self._result_timeout_s + TRIM_DELAY_S,
                                                       self._on_trim_timer)
        else:
            self._trim_timer.reset()

    def _on_trim_timer(self) -> None:
        if self._trim_timer is not None:
            self._trim_timer.cancel()
        self._with_images.clear()
        release_free_memory()

    # --- worker side ---------------------------------------------------------------------------
    def on_status(self, event: StatusEvent) -> None:
        goal = self._goals.get(event.query_id)
        if goal is None:
            return
        try:
            goal.handle.publish_feedback(self._action.Feedback(**feedback_fields(event)))
        except Exception as exc:  # noqa: BLE001 (a lost feedback must not stop the query)
            self._node.get_logger().warning(
                f"segment feedback of {for_log(event.query_id)} failed: {exc}")

    def refuse_duplicate(self, query: Query) -> Result | None:
        """The ``failed`` result of a query whose id a running (or waiting) goal holds, else
        None (the node asks for topic queries; ``execute`` refuses a second goal the same way).
        Its result would end that goal, so it is refused alone, past the result hook."""
        return self._in_use(query) if self._goals.holds(query.id) else None

    def _in_use(self, query: Query) -> Result:
        return in_use(query, self._backends())

    def on_result(self, result: Result, published: Any = None) -> None:
        goal = self._goals.release(result.query_id)
        if goal is None:
            return
        try:
            message = result_message(self._action, self._mask_info, result, published)
        except Exception as exc:  # noqa: BLE001 (the goal must still end)
            self._node.get_logger().error(f"segment result of {for_log(result.query_id)}: {exc}")
            message = self._action.Result(status=QueryStatus.FAILED.value,
                                          error=f"internal error building the result: {exc}")
            result = Result(result.query_id, result.query, QueryStatus.FAILED)
        goal.done.set_result((result.status, message))


def release_free_memory() -> bool:
    """Collect garbage (an expired result can sit in a reference cycle of rclpy's futures and
    tasks until the next full collection), then hand the free heap memory back to the OS (glibc
    ``malloc_trim``); False where the C library has no such call."""
    import ctypes
    import gc

    gc.collect()
    try:
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):  # not glibc: its allocator's own policy applies
        return False


def load_interfaces() -> tuple[Any, Any] | None:
    """``(Segment, MaskInfo)``, or None when the generated interfaces are not installed."""
    return generated_types.segment_types()


def serve(node: Any, **kwargs: Any) -> SegmentActionServer | None:
    """The action server on ``node`` (see ``SegmentActionServer``), or None, said once in the
    log, when the interfaces are missing (the node then runs with topics only). The node calls
    it at activation until it has a server (discoverable means ready), and keeps the server."""
    types = load_interfaces()
    if types is None:
        generated_types.say_missing(node, "the action ~/segment", "sam3_agent_ros.action",
                               "Topics work as usual.")
        return None
    return SegmentActionServer(node, types, **kwargs)
