"""``sam3-agent lifecycle | param`` and ``sam3-agent ask --ros --topic | --stop-follow``: the few
graph actions the docs need, for users without the ``ros2`` CLI (a venv with the ROS 2 wheels).

- ``lifecycle get`` / ``lifecycle configure`` ...: ``ros2 lifecycle get|set /sam3_agent ...``
- ``param get|set|describe|list NAME``: ``ros2 param get|set|describe|list /sam3_agent NAME``
- ``ask --ros --topic "TEXT"``: ``ros2 topic pub --once /query ...`` and ``ros2 topic echo``
- ``ask --ros --stop-follow``: ``ros2 service call /sam3_agent/stop_follow std_srvs/srv/Trigger``

Argument parsing is plain argparse; rclpy is imported only when a command runs, and the DDS
environment is the one the user exported (``--loopback`` confines it to this host, as the other
commands do). Exit status: 0 done, 1 the node refused, failed or did not answer, 2 bad usage;
``ask`` exits like ``sam3-agent run`` (0 succeeded/no_mask, 1 failed/cancelled/no answer).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DEFAULT_NODE = "/sam3_agent"
LIFECYCLE_VERBS = ("get", "configure", "activate", "deactivate", "cleanup", "shutdown")


def register(subparsers: Any) -> None:
    """Add ``lifecycle`` and ``param`` to the ``sam3-agent`` sub-command parsers."""
    lifecycle = subparsers.add_parser(
        "lifecycle", help="get or change a running node's lifecycle state (like 'ros2 lifecycle')",
        description="Print the node's lifecycle state (get) or run one transition and print the "
                    "state it ends in. Exit status: 0 done, 1 refused/failed/no answer.")
    lifecycle.add_argument("verb", choices=LIFECYCLE_VERBS)
    _add_node_options(lifecycle)
    lifecycle.set_defaults(handler=cmd_lifecycle)

    param = subparsers.add_parser(
        "param", help="get, set, describe or list a running node's parameters (like 'ros2 param')",
        description="Read or set the parameters of a running node through its parameter "
                    "services. 'set' converts VALUE to the parameter's declared type and prints "
                    "the node's answer (with its reason when refused). Exit status: 0 done, "
                    "1 refused/unknown/no answer, 2 bad usage.")
    verbs = param.add_subparsers(dest="param_verb", required=True)
    get = verbs.add_parser("get", help="print a parameter's value")
    get.add_argument("name")
    set_ = verbs.add_parser("set", help="set a parameter (the node may refuse, with a reason)")
    set_.add_argument("name")
    set_.add_argument("value", help="e.g. 12, 0.5, true, text, '[a, b]'")
    describe = verbs.add_parser("describe", help="print a parameter's type, description, range")
    describe.add_argument("name")
    verbs.add_parser("list", help="print every parameter name")
    for sub in (get, set_, describe, verbs.choices["list"]):
        _add_node_options(sub)
    param.set_defaults(handler=cmd_param)


def _add_node_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--node", default=DEFAULT_NODE,
                        help=f"the node's fully qualified name (default {DEFAULT_NODE})")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                        help="how long to wait for the node's answer (default 10)")
    parser.add_argument("--loopback", action="store_true",
                        help="keep DDS on this machine (127.0.0.1 only)")


def _say(message: str) -> None:
    print(f"sam3-agent: {message}", file=sys.stderr)


@contextmanager
def _ros_node(loopback: bool, name: str) -> Iterator[Any]:
    """An rclpy node in a context of its own, for one command."""
    if loopback:
        from sam3_agent_ros.ros.dds import apply_loopback_env

        apply_loopback_env()
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    context = rclpy.Context()
    rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node(name, context=context)
    try:
        yield node
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=context)


def _run_graph(args: argparse.Namespace, action: Callable[[Any], int]) -> int:
    """Usage checks, then ``action(client)`` with a GraphClient on ``--node``."""
    from sam3_agent_ros.ros.graph_client import GraphClient, GraphError, qualified_node_name

    if not args.timeout > 0:
        _say("--timeout must be > 0")
        return EXIT_USAGE
    try:
        node_name = qualified_node_name(args.node)
    except ValueError as exc:
        _say(f"--node: {exc}")
        return EXIT_USAGE
    with _ros_node(args.loopback, "sam3_agent_cli") as node:
        client = GraphClient(node, node_name, args.timeout)
        try:
            return action(client)
        except GraphError as exc:
            _say(str(exc))
            return EXIT_FAILED
        except KeyboardInterrupt:
            _say("interrupted")
            return EXIT_FAILED
        finally:
            client.close()


def cmd_lifecycle(args: argparse.Namespace) -> int:
    def action(client: Any) -> int:
        if args.verb == "get":
            print(client.lifecycle_state())
        else:
            print(f"{args.verb}: done, {client.node_name} is {client.transition(args.verb)}")
        return EXIT_OK

    return _run_graph(args, action)


def cmd_param(args: argparse.Namespace) -> int:
    from sam3_agent_ros.ros.graph_client import describe_lines, format_value

    def action(client: Any) -> int:
        verb = args.param_verb
        if verb == "list":
            print("\n".join(client.list_parameters()))
        elif verb == "get":
            print(format_value(client.get_parameter(args.name)))
        elif verb == "describe":
            print("\n".join(describe_lines(args.name, client.describe_parameter(args.name))))
        else:
            try:
                successful, reason, value = client.set_parameter(args.name, args.value)
            except ValueError as exc:
                _say(f"param set {args.name}: {exc}")
                return EXIT_USAGE
            if not successful:
                reason = reason or "no reason given"
                print(f"refused: {args.name} = {format_value(value)}: {reason}")
                return EXIT_FAILED
            print(f"set: {args.name} = {format_value(value)}")
        return EXIT_OK

    return _run_graph(args, action)


# --- ask --ros --topic / --stop-follow (registered with `ask` in sam3_agent_ros/client.py) -----


def cmd_ask_topic(args: argparse.Namespace) -> int:
    """Publish the query JSON on the node's ``query`` topic and print its ``~/result``."""
    from sam3_agent_ros.ros.graph_client import GraphError, TopicQuery, new_query_id, node_topics

    topics = node_topics(args.node)
    query_topic = args.query_topic or topics["query"]
    result_topic = args.result_topic or topics["result"]
    query_id = args.query_id or new_query_id()
    payload: dict[str, Any] = {"id": query_id, "query": args.query}
    if args.follow:
        payload["follow"] = True
    if args.refines:
        payload["refines"] = args.refines

    finished = []  # the "done" status of our query, once printed

    def print_status(status: dict) -> None:
        if status.get("query_id") == query_id:
            print(json.dumps(status), file=sys.stderr)
            if status.get("phase") == "done":
                finished.append(status)

    deadline = time.monotonic() + args.timeout
    with _ros_node(args.loopback, "sam3_agent_ask") as node:
        asker = TopicQuery(node, query_topic, result_topic, topics["status"],
                           print_status if args.feedback else None)
        try:
            asker.wait_for_node(deadline)
            asker.publish(payload)
            result = asker.wait_result(query_id, deadline)
            if result is not None and args.feedback:  # statuses may trail the result
                asker.spin_until(lambda: finished, min(deadline, time.monotonic() + 2.0))
        except GraphError as exc:
            _say(f"ask: {exc}")
            return EXIT_FAILED
        except KeyboardInterrupt:
            _say("ask: interrupted")
            return EXIT_FAILED
        finally:
            asker.close()
    if result is None:
        _say(f"ask: no result for {query_id} on {result_topic} within {args.timeout:g} s")
        return EXIT_FAILED
    print(json.dumps(result))
    return EXIT_OK if result.get("status") in ("succeeded", "no_mask") else EXIT_FAILED


def cmd_stop_follow(args: argparse.Namespace) -> int:
    """``--stop-follow``: the node's ``~/stop_follow`` service (its answer printed), or with
    ``--topic`` the message ``{"stop_follow": true}`` on its ``query`` topic."""
    from sam3_agent_ros.ros.graph_client import GraphClient, GraphError, TopicQuery, node_topics

    deadline = time.monotonic() + args.timeout
    with _ros_node(args.loopback, "sam3_agent_ask") as node:
        try:
            if args.topic:
                topics = node_topics(args.node)
                asker = TopicQuery(node, args.query_topic or topics["query"],
                                   args.result_topic or topics["result"])
                try:
                    asker.wait_for_node(deadline, want_result=False)
                    if not asker.publish({"stop_follow": True},
                                         wait_acked_s=max(0.1, deadline - time.monotonic())):
                        raise GraphError(f"the node did not acknowledge the message on "
                                         f"{asker.query_topic}")
                finally:
                    asker.close()
                print(f"sent {{\"stop_follow\": true}} on {asker.query_topic}")
                return EXIT_OK
            from std_srvs.srv import Trigger

            client = GraphClient(node, args.node, args.timeout)
            try:
                reply = client.call(Trigger, "stop_follow", Trigger.Request())
            finally:
                client.close()
        except GraphError as exc:
            _say(f"ask: {exc}")
            return EXIT_FAILED
    print(json.dumps({"success": reply.success, "message": reply.message}))
    return EXIT_OK if reply.success else EXIT_FAILED
