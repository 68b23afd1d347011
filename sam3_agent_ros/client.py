"""A client for the node's action ``~/segment``, and ``sam3-agent ask --ros "query"`` (the action;
``--topic`` and ``--stop-follow`` are handled by ``graph/commands.py``).

``SegmentClient(node).ask("the leftmost blue object", timeout_s=30.0)`` sends one goal and
returns the ``Segment.Result`` message (``status``, ``error``, ``header``, ``masks``, ``mask``,
``labels``, ``target_valid``, ``target``, ``result_json``; interface §5a). The caller's node may
be spun by an executor in another thread (the client then waits on the futures) or not spun at
all (the client spins it while waiting). Do not call ``ask`` from a callback of the node's own
single-threaded executor: it would wait for itself. Make the client before another thread spins
the node (or between spins): rclpy lists an ``ActionClient`` among the node's waitables before its
constructor has finished, and an executor that builds its wait set at that moment raises
(``AttributeError: ... '_lock'``) and stops spinning.

Nothing ROS is imported at module import (the core stays ROS-free): rclpy and the generated
interfaces are imported when a client is made.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DEFAULT_ACTION = "/sam3_agent/segment"
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
CANCEL_WAIT_S = 5.0  # after a timeout: how long to wait for the cancelled goal's result
INTERRUPT_WAIT_S = 0.8  # after Ctrl-C: the same, short (the user wants the prompt back)
WAIT_SLICE_S = 0.1  # how often a wait that ``stop`` may end looks at it
EXIT_INTERRUPTED = 128 + 2  # Ctrl-C, as a shell reports a process ended by SIGINT
# While a goal runs, its action server absent from the graph this long means the node has gone
# (it ends every goal with a result before it exits: CONTRACTS §11; a node that crashed or was
# killed sends none). Discovery sees a participant leave within milliseconds on this host.
SERVER_GONE_S = 0.5


class SegmentError(RuntimeError):
    """The goal got no result: no server, goal rejected, or timed out (then it was cancelled)."""


class SegmentInterrupted(SegmentError):
    """``stop`` was set (Ctrl-C): the goal was cancelled. ``result``: the cancelled goal's
    ``Segment.Result`` when it came back in time, else None."""

    def __init__(self, result: Any) -> None:
        super().__init__("interrupted (the goal was cancelled)")
        self.result = result


@dataclass(frozen=True)
class GoalOutcome:
    goal_status: str  # SUCCEEDED | ABORTED | CANCELED
    result: Any  # Segment.Result


class SegmentClient:
    def __init__(self, node: Any, action_name: str = DEFAULT_ACTION):
        from rclpy.action import ActionClient

        from sam3_agent_ros.action import Segment

        self._node = node
        self._segment = Segment
        self.action_name = action_name
        self._client: Any = ActionClient(node, Segment, action_name)
        self._own_executor: Any = None  # spins the node while waiting when nobody else does

    def ask(self, query: str, timeout_s: float = 60.0, query_id: str = "",
            on_feedback: Callable[[Any], None] | None = None,
            server_timeout_s: float = 10.0, follow: bool = False, refines: str = "",
            stop: threading.Event | None = None) -> Any:
        """Send one goal and return its ``Segment.Result``; raises ``SegmentError`` when there is
        no server within ``server_timeout_s``, the goal is rejected, or no result came within
        ``timeout_s`` (the goal is cancelled first). ``follow``: keep the answer current on new
        frames afterwards (``~/follow/*``). ``refines``: the query_id of an earlier answer this
        query corrects (answered on that answer's frame). ``stop``: see ``send``."""
        return self.send(query, timeout_s, query_id, on_feedback, server_timeout_s,
                         follow, refines, stop).result

    def send(self, query: str, timeout_s: float = 60.0, query_id: str = "",
             on_feedback: Callable[[Any], None] | None = None,
             server_timeout_s: float = 10.0, follow: bool = False,
             refines: str = "", stop: threading.Event | None = None) -> GoalOutcome:
        """``ask``, also returning the goal's final status (``GoalOutcome``). ``stop`` (set by
        a Ctrl-C handler, say): the goal is cancelled at once and ``SegmentInterrupted`` raised,
        carrying the cancelled goal's result when it came within ``INTERRUPT_WAIT_S``."""
        from action_msgs.msg import GoalStatus

        deadline = time.monotonic() + timeout_s
        server_timeout_s = min(server_timeout_s, timeout_s)
        if not self._wait_for_server(server_timeout_s, stop):
            if stop is not None and stop.is_set():
                raise SegmentInterrupted(None)
            from sam3_agent_ros.graph.client import visible_nodes

            raise SegmentError(f"no action server {self.action_name} after "
                               f"{server_timeout_s:g} s; {visible_nodes(self._node)}")
        goal = self._segment.Goal(query=query, query_id=query_id, follow=bool(follow),
                                  refines=refines)

        def feedback(message: Any) -> None:
            if on_feedback is not None:
                on_feedback(message.feedback)

        names = {GoalStatus.STATUS_SUCCEEDED: "SUCCEEDED", GoalStatus.STATUS_ABORTED:
                 "ABORTED", GoalStatus.STATUS_CANCELED: "CANCELED"}
        sent = self._client.send_goal_async(goal, feedback_callback=feedback)
        if not self._wait(sent, deadline, stop):
            if stop is not None and stop.is_set():
                # The goal may be accepted meanwhile: it must not keep running on the node.
                self._wait(sent, time.monotonic() + INTERRUPT_WAIT_S)
                handle: Any = sent.result() if sent.done() else None
                if handle is not None and handle.accepted:
                    self._cancel(handle, handle.get_result_async())
                raise SegmentInterrupted(None)
            raise SegmentError(f"no answer to the goal within {timeout_s:g} s")
        goal_handle: Any = sent.result()
        if not goal_handle.accepted:
            raise SegmentError("goal rejected by the node (not active, or its queue is full; "
                               "see the node's log)")
        from sam3_agent_ros.graph.client import NodeGone

        result = goal_handle.get_result_async()
        gone = NodeGone(lambda: int(self._client.server_is_ready()), SERVER_GONE_S)
        if self._wait(result, deadline, stop, gone):
            response: Any = result.result()
            return GoalOutcome(names.get(response.status, str(response.status)), response.result)
        if stop is not None and stop.is_set():
            raise SegmentInterrupted(self._cancel(goal_handle, result))
        if gone():
            raise SegmentError(f"the node went away before the goal's result ("
                               f"{self.action_name} is gone: the node exited or crashed)")
        goal_handle.cancel_goal_async()
        self._wait(result, time.monotonic() + CANCEL_WAIT_S)
        raise SegmentError(f"no result within {timeout_s:g} s (goal cancelled)")

    def _cancel(self, goal_handle: Any, result: Any) -> Any:
        """Cancel the goal; its ``Segment.Result`` if it comes within ``INTERRUPT_WAIT_S``."""
        cancelling = goal_handle.cancel_goal_async()
        self._wait(result, time.monotonic() + INTERRUPT_WAIT_S)
        if not cancelling.done():  # the cancel request itself must leave before we exit
            self._wait(cancelling, time.monotonic() + 0.2)
        return result.result().result if result.done() else None

    def destroy(self) -> None:
        self._client.destroy()
        if self._own_executor is not None:
            self._own_executor.remove_node(self._node)
            self._own_executor.shutdown(timeout_sec=1.0)
            self._own_executor = None

    def _wait_for_server(self, timeout_s: float, stop: threading.Event | None = None) -> bool:
        """Discovery needs no spinning; waited for in slices when ``stop`` may end it."""
        if stop is None:
            return self._client.wait_for_server(timeout_sec=timeout_s)
        deadline = time.monotonic() + timeout_s
        while not stop.is_set():
            left = deadline - time.monotonic()
            if self._client.wait_for_server(timeout_sec=max(0.0, min(left, WAIT_SLICE_S))):
                return True
            if left <= WAIT_SLICE_S:
                return False
        return False

    def _wait(self, future: Any, deadline: float, stop: threading.Event | None = None,
              gone: Callable[[], bool] | None = None) -> bool:
        """Wait for an rclpy future until ``deadline`` (monotonic), until ``stop`` is set or
        ``gone()`` holds (both looked at every ``WAIT_SLICE_S``); True when done. Spins the node
        on a private executor when no other executor does."""
        if self._node.executor is None:
            from rclpy.executors import SingleThreadedExecutor

            self._own_executor = SingleThreadedExecutor(context=self._node.context)
            self._own_executor.add_node(self._node)
        done = threading.Event()
        if self._node.executor is not self._own_executor:
            future.add_done_callback(lambda _: done.set())
        while not future.done() and not (stop is not None and stop.is_set()):
            left = deadline - time.monotonic()
            if left <= 0 or (gone is not None and gone()):
                break
            if stop is not None or gone is not None:
                left = min(left, WAIT_SLICE_S)
            if self._node.executor is self._own_executor:
                self._own_executor.spin_until_future_complete(future, timeout_sec=left)
            else:
                done.wait(left)
        return future.done()


# --- `sam3-agent ask --ros` ----------------------------------------------------------------------


def register(subparsers: Any) -> None:
    """Add ``ask`` to the ``sam3-agent`` sub-command parsers."""
    ask = subparsers.add_parser(
        "ask", help="send one query to a running node over ROS (action ~/segment, or --topic)",
        description="Send one query to a running sam3_agent_node and print the result JSON (as "
                    "on ~/result): by default as a goal of its action ~/segment; with --topic "
                    "as a message on its query topic, answered on ~/result. --stop-follow ends "
                    "follow mode instead. Exit status: 0 succeeded/no_mask, 1 failed/cancelled/"
                    "no answer, 2 bad usage, 130 interrupted (Ctrl-C cancels the goal).")
    ask.add_argument("query", nargs="?", default="", help='e.g. "the leftmost blue object"')
    ask.add_argument("--ros", action="store_true", required=True,
                     help="ask the node over ROS (the only way for now; required)")
    ask.add_argument("--topic", action="store_true",
                     help="publish on the node's query topic and wait for its ~/result "
                          "(default: the action)")
    ask.add_argument("--stop-follow", action="store_true",
                     help="end follow mode: the node's ~/stop_follow service (with --topic: "
                          '{"stop_follow": true} on its query topic); no query')
    ask.add_argument("--node", default="/sam3_agent",
                     help="the node's fully qualified name (default /sam3_agent); the action, "
                          "query and result topics follow from it")
    ask.add_argument("--action", help=f"the node's action (default {DEFAULT_ACTION})")
    ask.add_argument("--query-topic", help="with --topic: where to publish (default: query in "
                                           "the node's namespace, /query for /sam3_agent)")
    ask.add_argument("--result-topic", help="with --topic: where results come (default: "
                                            "<node>/result)")
    ask.add_argument("--id", "--query-id", dest="query_id", default="",
                     help="query_id (default: the node assigns one; with --topic one is made)")
    ask.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                     help="give up (and cancel the goal) after this long (default 60)")
    ask.add_argument("--follow", action="store_true",
                     help="keep the answer current on new frames afterwards (~/follow/*)")
    ask.add_argument("--refines", default="", metavar="QUERY_ID",
                     help='correct the answer of that query (e.g. "no, the other one"): answered '
                          "on its frame")
    ask.add_argument("--feedback", action="store_true",
                     help="print each feedback (with --topic: each status) as JSON on stderr")
    ask.add_argument("--loopback", action="store_true",
                     help="keep DDS on this machine (127.0.0.1 only)")
    ask.set_defaults(handler=cmd_ask)


def cmd_ask(args: argparse.Namespace) -> int:
    from sam3_agent_ros.graph.client import node_topics

    if args.timeout <= 0:
        print("sam3-agent ask: --timeout must be > 0", file=sys.stderr)
        return EXIT_USAGE
    try:
        topics = node_topics(args.node)
    except ValueError as exc:
        print(f"sam3-agent ask: --node: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.stop_follow:
        if args.query.strip() or args.follow or args.refines:
            print("sam3-agent ask: --stop-follow takes no query, --follow or --refines",
                  file=sys.stderr)
            return EXIT_USAGE
        from sam3_agent_ros.graph.commands import cmd_stop_follow

        return cmd_stop_follow(args)
    if not args.query.strip():
        print("sam3-agent ask: the query is empty", file=sys.stderr)
        return EXIT_USAGE
    if args.topic:
        from sam3_agent_ros.graph.commands import cmd_ask_topic

        return cmd_ask_topic(args)
    action = args.action or topics["segment"]
    try:
        from sam3_agent_ros.action import Segment  # noqa: F401 (fail early, clearly)
    except ImportError as exc:
        print(f"sam3-agent ask: the interfaces are not installed ({exc}); run "
              "scripts/build_interfaces.sh .venv or source a colcon workspace", file=sys.stderr)
        return EXIT_FAILED

    def print_feedback(feedback: Any) -> None:
        fields = ("phase", "round", "tool", "text_prompt", "num_masks", "reasoning", "elapsed_s",
                  "refines")
        print(json.dumps({name: getattr(feedback, name) for name in fields}), file=sys.stderr)

    from sam3_agent_ros.graph.verb_node import verb_node

    # Ctrl-C / SIGTERM only set ``ros.stop`` (rclpy's own handler would shut the context down
    # under the wait); the client then cancels the goal and returns within a second.
    try:
        with verb_node("sam3_agent_ask", args.loopback,
                              stop_signals=(signal.SIGINT, signal.SIGTERM)) as ros:
            client = SegmentClient(ros.node, action)
            try:
                result = client.ask(args.query, timeout_s=args.timeout, query_id=args.query_id,
                                    on_feedback=print_feedback if args.feedback else None,
                                    follow=args.follow, refines=args.refines, stop=ros.stop)
            except SegmentInterrupted as exc:
                if exc.result is not None and exc.result.result_json:
                    print(exc.result.result_json)
                print("sam3-agent ask: interrupted (goal cancelled)", file=sys.stderr)
                return EXIT_INTERRUPTED
            except SegmentError as exc:
                print(f"sam3-agent ask: {exc}", file=sys.stderr)
                return EXIT_FAILED
            finally:
                client.destroy()
            print(result.result_json)
            return EXIT_OK if result.status in ("succeeded", "no_mask") else EXIT_FAILED
    except KeyboardInterrupt:  # before the handlers were in place
        print("sam3-agent ask: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
