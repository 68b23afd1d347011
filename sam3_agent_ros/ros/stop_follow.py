"""The ``~/stop_follow`` service (std_srvs/Trigger, interface §5b): ends following through
``pipeline.follow_control.FollowControl.stop``; without std_srvs there is none, said once (the
query topic's ``{"stop_follow": true}`` still stops)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sam3_agent_ros.log_limit import limiter_of

STOP_FOLLOW_SERVICE = "~/stop_follow"


def serve_stop_follow(node: Any, stop: Callable[[str], str | None]) -> Any:
    """The service on ``node`` (None without std_srvs); ``stop(reason)`` ends following and
    returns the id that was followed, or None."""
    try:
        from std_srvs.srv import Trigger
    except ImportError:  # e.g. a ROS install without std_srvs: the topic still stops
        node.get_logger().warning(
            "std_srvs is not installed: no ~/stop_follow service (publish "
            '{"stop_follow": true} on the query topic instead)')
        return None

    def on_call(request: Any, response: Any) -> Any:
        try:
            query_id = stop("~/stop_follow service called")
            response.success = query_id is not None
            response.message = (f"stopped following {query_id}" if query_id is not None
                                else "not following")
            if query_id is None:  # said once in a while, however often a peer calls
                limiter_of(node).emit("~/stop_follow service", node.get_logger().info,
                                      "~/stop_follow service called: not following")
        except Exception as exc:  # a callback that raises would stop the executor
            response.success, response.message = False, f"{type(exc).__name__}: {exc}"
        return response

    return node.create_service(Trigger, STOP_FOLLOW_SERVICE, on_call)
