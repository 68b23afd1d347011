"""A running node's graph interface from a short-lived process: its lifecycle and parameter
services, and a query sent on its ``query`` topic answered on ``~/result``.

This is what ``sam3-agent lifecycle | param | ask --ros --topic`` run (``graph_cli.py`` parses
the command lines), for users without the ``ros2`` CLI (a venv with the ROS 2 wheels). Each
function takes an rclpy node that nobody else spins: it spins the node itself while it waits.

A fresh client may lose the reply to its first request (the server can answer before it has
matched the client's reply reader), so idempotent requests (get state, get/describe/list/set
parameters) are sent again every few seconds until the deadline; a lifecycle transition, which
is not idempotent, is sent once and, if its reply is lost, judged by the state the node reaches.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from sam3_agent_ros.graph.param_text import (  # noqa: F401 (the CLI's and tests' names)
    describe_lines,
    format_value,
    parse_parameter_text,
    rclpy_parameter,
)

RESEND_AFTER_S = 2.0
DEFAULT_NODE = "/sam3_agent"
# The state a successful transition ends in, by transition label (ros2 lifecycle's labels).
TRANSITION_TARGETS = {"configure": "inactive", "cleanup": "unconfigured", "activate": "active",
                      "deactivate": "inactive", "shutdown": "finalized"}


class GraphError(RuntimeError):
    """The node did not answer, or answered something we cannot use; the message says why."""


def qualified_node_name(name: str) -> str:
    """``sam3_agent`` -> ``/sam3_agent``; ``/robot1/sam3_agent/`` -> ``/robot1/sam3_agent``."""
    name = name.strip().rstrip("/")
    if not name or name == "/":
        raise ValueError("the node name is empty")
    return name if name.startswith("/") else "/" + name


def node_topics(node_name: str) -> dict[str, str]:
    """The topics of a node in the default wiring: ``query`` is relative (in the node's
    namespace), the outputs are private (``~/result`` = ``<node>/result``)."""
    node_name = qualified_node_name(node_name)
    namespace = node_name.rsplit("/", 1)[0]
    return {"query": f"{namespace}/query", "result": f"{node_name}/result",
            "status": f"{node_name}/status", "stop_follow": f"{node_name}/stop_follow",
            "segment": f"{node_name}/segment"}


def domain_hint() -> str:
    """Where this process looks for nodes (for 'not found' messages)."""
    import os

    domain = os.environ.get("ROS_DOMAIN_ID") or "0 (unset)"
    scope = os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE") or "SUBNET (unset)"
    return f"ROS_DOMAIN_ID={domain}, ROS_AUTOMATIC_DISCOVERY_RANGE={scope}"


MAX_LISTED_NODES = 12  # the most node names a "not found" message lists


def visible_nodes(node: Any) -> str:
    """What this process sees on the graph, for "not found" messages: the fully qualified names
    of the other nodes (``sam3_agent`` ones first), or that it sees none and where it looks."""
    try:
        found = node.get_node_names_and_namespaces()
    except Exception:  # noqa: BLE001 (a shut-down context: the message goes without the list)
        return domain_hint()
    own = node.get_fully_qualified_name()
    names = sorted({qualified_node_name(f"{ns.rstrip('/')}/{name}") for name, ns in found}
                   - {own}, key=lambda n: (not n.endswith("/sam3_agent"), n))
    if not names:
        return f"no node is visible ({domain_hint()})"
    shown = ", ".join(names[:MAX_LISTED_NODES])
    more = f" and {len(names) - MAX_LISTED_NODES} more" if len(names) > MAX_LISTED_NODES else ""
    return f"nodes visible: {shown}{more}"


class _Waiter:
    """Spins ``node`` on a private executor until a predicate holds or a deadline passes."""

    def __init__(self, node: Any) -> None:
        from rclpy.executors import SingleThreadedExecutor

        self.node = node
        self.executor = SingleThreadedExecutor(context=node.context)
        self.executor.add_node(node)

    def until(self, predicate: Callable[[], Any], deadline: float) -> Any:
        while True:
            value = predicate()
            if value or time.monotonic() >= deadline:
                return value
            self.executor.spin_once(timeout_sec=min(0.05, max(0.0, deadline - time.monotonic())))

    def close(self) -> None:
        self.executor.remove_node(self.node)
        self.executor.shutdown(timeout_sec=1.0)


class GraphClient:
    """Calls on one node's services (``node_name``, e.g. ``/sam3_agent``) from ``node``."""

    def __init__(self, node: Any, node_name: str = DEFAULT_NODE, timeout_s: float = 10.0):
        self.node = node
        self.node_name = qualified_node_name(node_name)
        self.timeout_s = timeout_s
        self._waiter = _Waiter(node)
        self._parameters: Any = None  # rclpy's AsyncParameterClient, made at the first use

    def close(self) -> None:
        self._waiter.close()

    # --- services ------------------------------------------------------------------------------
    def call(self, srv_type: Any, service: str, request: Any, resend: bool = True) -> Any:
        """One service call on ``<node>/<service>``; ``GraphError`` when nobody answers."""
        name = f"{self.node_name}/{service}"
        client = self.node.create_client(srv_type, name)
        try:
            return self._answer(lambda: client.call_async(request), client.service_is_ready,
                                f"service {name}", name, resend)
        finally:
            self.node.destroy_client(client)

    def _answer(self, send: Callable[[], Any], ready: Callable[[], bool], what: str,
                asked: str, resend: bool = True) -> Any:
        """The reply to ``send()`` once ``ready()``, the request sent again every
        ``RESEND_AFTER_S`` (with ``resend``: a fresh client may lose its first reply) until the
        timeout; ``GraphError`` when nobody answers (``what`` was not found / ``asked`` was
        not answered)."""
        deadline = time.monotonic() + self.timeout_s
        if not self._waiter.until(ready, deadline):
            raise GraphError(f"no node {self.node_name} answering ({what} not found after "
                             f"{self.timeout_s:g} s; {domain_hint()}); is it running? "
                             f"{visible_nodes(self.node)}")
        futures: list[Any] = []
        while True:
            futures.append(send())
            resend_at = time.monotonic() + RESEND_AFTER_S if resend else deadline
            done = self._waiter.until(lambda: any(f.done() for f in futures),
                                      min(deadline, resend_at))
            if done:
                return next(f for f in futures if f.done()).result()
            if time.monotonic() >= deadline:
                raise GraphError(f"{asked} did not answer within {self.timeout_s:g} s")

    # --- lifecycle -----------------------------------------------------------------------------
    def lifecycle_state(self) -> str:
        from lifecycle_msgs.srv import GetState

        return self.call(GetState, "get_state", GetState.Request()).current_state.label

    def transition(self, label: str) -> str:
        """Run the transition ``label`` (configure, activate, ...) and return the new state;
        ``GraphError`` when it is not available from the current state or fails."""
        from lifecycle_msgs.srv import ChangeState, GetAvailableTransitions

        available = self.call(GetAvailableTransitions, "get_available_transitions",
                              GetAvailableTransitions.Request()).available_transitions
        chosen = next((t.transition for t in available if t.transition.label == label), None)
        if chosen is None:
            state = self.lifecycle_state()
            labels = sorted({t.transition.label for t in available}) or ["none"]
            raise GraphError(f"{self.node_name} is {state}: cannot {label} from there "
                             f"(available: {', '.join(labels)})")
        request = ChangeState.Request()
        request.transition.id = chosen.id
        client = self.node.create_client(ChangeState, f"{self.node_name}/change_state")
        try:
            deadline = time.monotonic() + self.timeout_s
            if not self._waiter.until(client.service_is_ready, deadline):
                raise GraphError(f"{self.node_name}/change_state not found")
            future = client.call_async(request)
            target = TRANSITION_TARGETS.get(label)
            while not self._waiter.until(future.done,
                                         min(deadline, time.monotonic() + RESEND_AFTER_S)):
                # The reply may be lost: the state the node reaches says how it went.
                if target is not None and target != "finalized" \
                        and self.lifecycle_state() == target:
                    return target
                if time.monotonic() >= deadline:
                    raise GraphError(f"{label} did not finish within {self.timeout_s:g} s "
                                     f"(state now: {self.lifecycle_state()})")
            succeeded = future.result().success
        finally:
            self.node.destroy_client(client)
        if label == "shutdown" and succeeded:
            return "finalized"  # the node's services may be gone now
        state = self.lifecycle_state()
        if not succeeded:
            raise GraphError(f"{label} failed: {self.node_name} is {state} (the node's log "
                             "says why)")
        return state

    # --- parameters (rclpy's AsyncParameterClient; every request idempotent, so resent) ------
    def _parameter_call(self, service: str, send: Callable[[Any], Any]) -> Any:
        """``send(client)`` on the node's parameter services, through one
        ``rclpy.parameter_client.AsyncParameterClient`` made at the first use."""
        if self._parameters is None:
            from rclpy.parameter_client import AsyncParameterClient

            self._parameters = AsyncParameterClient(self.node, self.node_name)
        client = self._parameters
        return self._answer(lambda: send(client), client.services_are_ready,
                            f"its parameter services ({self.node_name}/{service}, ...)",
                            f"{self.node_name}/{service}")

    def list_parameters(self) -> list[str]:
        reply = self._parameter_call("list_parameters", lambda c: c.list_parameters())
        return sorted(reply.result.names)

    def describe_parameter(self, name: str) -> Any:
        """The ``ParameterDescriptor`` of ``name``; ``GraphError`` when it is not declared."""
        from rcl_interfaces.msg import ParameterType

        descriptors = self._parameter_call(
            "describe_parameters", lambda c: c.describe_parameters([name])).descriptors
        if not descriptors or descriptors[0].type == ParameterType.PARAMETER_NOT_SET:
            raise GraphError(self._not_declared(name))
        return descriptors[0]

    def get_parameter(self, name: str) -> Any:
        """The value of ``name`` as a Python value; ``GraphError`` when it is not set."""
        from rcl_interfaces.msg import ParameterType
        from rclpy.parameter import parameter_value_to_python

        values = self._parameter_call("get_parameters",
                                      lambda c: c.get_parameters([name])).values
        if not values or values[0].type == ParameterType.PARAMETER_NOT_SET:
            raise GraphError(self._not_declared(name))
        return parameter_value_to_python(values[0])

    def set_parameter(self, name: str, text: str) -> tuple[bool, str, Any]:
        """Set ``name`` from its command-line text, converted to the declared type; returns
        (successful, the node's reason, the value sent)."""
        descriptor = self.describe_parameter(name)
        value = parse_parameter_text(text, descriptor.type)
        parameter = rclpy_parameter(name, value, descriptor.type)
        result = self._parameter_call(
            "set_parameters", lambda c: c.set_parameters([parameter])).results[0]
        return result.successful, result.reason, value

    def _not_declared(self, name: str) -> str:
        import difflib

        message = f"{self.node_name} has no parameter {name!r}"
        try:
            close = difflib.get_close_matches(name, self.list_parameters(), n=1)
        except GraphError:
            close = []
        return message + (f" (did you mean {close[0]!r}?)" if close else "")


# --- a query on the topic ----------------------------------------------------------------------


NODE_GONE_S = 0.5  # no publisher on the result topic this long while waiting: the node has gone


class NodeGone:
    """True once ``count()`` (the publishers of the result topic; for the action client, whether
    its server is there) has been 0 for ``for_s`` in a row, looked at each call."""

    def __init__(self, count: Callable[[], int], for_s: float):
        self._count, self._for_s = count, for_s
        self._missing_since: float | None = None

    def __call__(self) -> bool:
        now = time.monotonic()
        if self._count() > 0:
            self._missing_since = None
            return False
        if self._missing_since is None:
            self._missing_since = now
        return now - self._missing_since >= self._for_s


def new_query_id() -> str:
    return f"ask-{uuid.uuid4().hex[:12]}"


class TopicQuery:
    """Publishes queries on a node's ``query`` topic and collects ``~/result`` (and ``~/status``)
    messages; the subscriptions exist before anything is published."""

    def __init__(self, node: Any, query_topic: str, result_topic: str,
                 status_topic: str | None = None,
                 on_status: Callable[[dict], None] | None = None) -> None:
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import String

        self.node = node
        self.query_topic, self.result_topic = query_topic, result_topic
        qos = QoSProfile(reliability=ReliabilityPolicy.RELIABLE,
                         history=HistoryPolicy.KEEP_LAST, depth=50,
                         durability=DurabilityPolicy.VOLATILE)
        self._string = String
        self._results: list[dict] = []
        self._waiter = _Waiter(node)
        self._publisher = node.create_publisher(String, query_topic, qos)
        self._subscriptions = [node.create_subscription(
            String, result_topic, lambda m: self._results.append(_json_or_none(m.data)), qos)]
        if status_topic and on_status is not None:
            self._subscriptions.append(node.create_subscription(
                String, status_topic, lambda m: on_status(_json_or_none(m.data) or {}), qos))

    def close(self) -> None:
        for subscription in self._subscriptions:
            self.node.destroy_subscription(subscription)
        self.node.destroy_publisher(self._publisher)
        self._waiter.close()

    def wait_for_node(self, deadline: float, want_result: bool = True,
                      waited_s: float | None = None) -> None:
        """Until the node's query subscription matches our publisher (and, with
        ``want_result``, its result and status publishers match our subscriptions: a status
        subscription matched late would miss the query's first phases); ``waited_s``: how long
        that is, said in the error."""
        def matched(subscription: Any) -> bool:
            count = getattr(subscription, "get_publisher_count", None)
            if count is not None:
                return count() > 0
            return self.node.count_publishers(subscription.topic_name) > 0  # rclpy without it

        def connected() -> bool:
            if self._publisher.get_subscription_count() == 0:
                return False
            return not want_result or all(matched(s) for s in self._subscriptions)

        if not self._waiter.until(connected, deadline):
            unmatched = next((s.topic_name for s in self._subscriptions if not matched(s)),
                             self.result_topic)
            missing = (f"nobody subscribes to {self.query_topic}"
                       if self._publisher.get_subscription_count() == 0
                       else f"nobody publishes {unmatched}")
            waited = f" after {waited_s:g} s" if waited_s is not None else ""
            raise GraphError(f"no node to ask{waited}: {missing} ({domain_hint()}); is the node "
                             f"running and active? (sam3-agent lifecycle get); "
                             f"{visible_nodes(self.node)}")

    def publish(self, payload: dict, wait_acked_s: float = 0.0) -> bool:
        """Publish ``payload`` as JSON; with ``wait_acked_s``, wait until every matched
        subscriber acknowledged it (reliable QoS), so the process may exit right after."""
        self._publisher.publish(self._string(data=json.dumps(payload)))
        if wait_acked_s <= 0:
            return True
        from rclpy.duration import Duration

        return self._publisher.wait_for_all_acked(Duration(nanoseconds=int(wait_acked_s * 1e9)))

    def wait_result(self, query_id: str, deadline: float) -> dict | None:
        """The first ``~/result`` of ``query_id``, or None at the deadline. A message the node
        could not parse (oversized, say) is answered under an id the node made, echoing the
        start of the message: such a ``failed`` result that quotes our id is ours too."""
        def ours(result: Any) -> bool:
            if not isinstance(result, dict):
                return False
            if result.get("query_id") == query_id:
                return True
            echoed = str(result.get("query", ""))  # quoted as sent, or escaped once more
            return result.get("status") == "failed" and (
                f'"{query_id}"' in echoed or f'\\"{query_id}\\"' in echoed)

        def found() -> dict | None:
            return next((r for r in self._results if ours(r)), None)

        # The node ends every taken query with a result before it exits (CONTRACTS §11); one
        # that went without (crashed, killed) leaves no publisher on the result topic.
        publishers = getattr(self._subscriptions[0], "get_publisher_count", None)
        gone = NodeGone(publishers or (lambda: self.node.count_publishers(self.result_topic)),
                        NODE_GONE_S)
        result = self._waiter.until(lambda: found() or gone(), deadline)
        if result is True:
            raise GraphError(f"the node went away before answering (nobody publishes "
                             f"{self.result_topic} any more: it exited or crashed)")
        return result or None

    def spin_until(self, predicate: Callable[[], Any], deadline: float) -> Any:
        """Handle messages until ``predicate()`` holds or ``deadline`` (monotonic) passes."""
        return self._waiter.until(predicate, deadline)


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
