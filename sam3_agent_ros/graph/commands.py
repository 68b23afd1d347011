"""``sam3-agent lifecycle | param`` and ``sam3-agent ask --ros --topic | --stop-follow``: the few
graph actions the docs need, for users without the ``ros2`` CLI (a venv with the ROS 2 wheels).

- ``lifecycle get`` / ``lifecycle configure`` ...: ``ros2 lifecycle get|set /sam3_agent ...``
- ``param get|set|describe|list [NODE] NAME``: ``ros2 param get|set|describe|list /sam3_agent
  NAME`` (the node first, as ros2 writes it, or ``--node``); ``set`` says when the value applies
- ``ask --ros --topic "TEXT"``: ``ros2 topic pub --once /query ...`` and ``ros2 topic echo``
- ``ask --ros --stop-follow``: ``ros2 service call /sam3_agent/stop_follow std_srvs/srv/Trigger``

Argument parsing is plain argparse; rclpy is imported only when a command runs, and the DDS
environment is the one the user exported (``--loopback`` confines it to this host, as the other
commands do). Exit status: 0 done, 1 the node refused, failed or did not answer, 2 bad usage;
``ask`` exits like ``sam3-agent run`` (0 succeeded/no_mask, 1 failed/cancelled/no answer, 130
Ctrl-C). ``ask --topic`` looks for the node ``NODE_WAIT_S`` (as the action form waits for its
server) and gives up once the node has left the graph without answering
(``graph_client.NodeGone``; a node that exits answers first: CONTRACTS §11).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 128 + 2  # Ctrl-C on ask, as the action form and run say it
DEFAULT_NODE = "/sam3_agent"
NODE_WAIT_S = 10.0  # ask --topic: how long to look for the node (the action form's server wait)
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
    for verb, words, text in PARAM_VERBS:
        sub = verbs.add_parser(verb, help=text, usage=f"sam3-agent param {verb} {words} "
                               "[--node NODE] [--timeout SECONDS] [--loopback]",
                               description=f"{text}. NODE (e.g. /sam3_agent) may come first, as "
                                           f"in 'ros2 param {verb}', or as --node.")
        sub.add_argument("words", nargs="*", metavar=words or "NODE",
                         help="e.g. 12, 0.5, true, text, '[a, b]'" if verb == "set" else None)
        _add_node_options(sub, node_default=None)
        sub.set_defaults(param_parser=sub, param_usage=words,
                         param_names=tuple(words.replace("[NODE]", "").split()))
    param.set_defaults(handler=cmd_param)


# verb, its positional words, help. The node may come first (ros2's order) or as --node.
PARAM_VERBS = (("get", "[NODE] NAME", "print a parameter's value"),
               ("set", "[NODE] NAME VALUE",
                "set a parameter (the node may refuse, with a reason); says when it applies"),
               ("describe", "[NODE] NAME", "print a parameter's type, description, range"),
               ("list", "[NODE]", "print every parameter name"))
# When an accepted set applies (config.Parameter.applies), as `param set` says it.
APPLIES = {"now": "applied now",
           "configure": "takes effect at the next configure: deactivate, cleanup, configure, "
                        "activate (sam3-agent lifecycle VERB --node {node})",
           "restart": "takes effect after a restart of the node"}


def param_words(args: argparse.Namespace) -> None:
    """Resolve ``[NODE] NAME [VALUE]`` into ``args.node``, ``args.name``, ``args.value``
    (argparse's usage error, exit 2, when the words do not fit)."""
    from sam3_agent_ros.config import PARAMETERS_BY_NAME

    words, wanted = list(args.words), args.param_names
    if len(words) == len(wanted) + 1:
        node, *words = words
        if node in PARAMETERS_BY_NAME:
            args.param_parser.error(f"{node} is a parameter, not a node: quote a value with "
                                    "spaces, e.g. '[a, b]'")
        if args.node is not None and args.node != node:
            args.param_parser.error(f"the node is given twice: {node} and --node {args.node}")
        args.node = node
    elif len(words) != len(wanted):
        args.param_parser.error(f"expected {args.param_usage}")
    args.node = DEFAULT_NODE if args.node is None else args.node
    for key, word in zip(("name", "value"), words):
        setattr(args, key, word)


def applies_note(name: str, node: str) -> str:
    """`` (applied now)`` etc. for a table parameter, '' for another (rclpy's own)."""
    from sam3_agent_ros.config import PARAMETERS_BY_NAME

    param = PARAMETERS_BY_NAME.get(name)
    return "" if param is None else f" ({APPLIES[param.applies].format(node=node)})"


def _add_node_options(parser: argparse.ArgumentParser, node_default: str | None = DEFAULT_NODE
                      ) -> None:
    parser.add_argument("--node", default=node_default,
                        help=f"the node's fully qualified name (default {DEFAULT_NODE})")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                        help="how long to wait for the node's answer (default 10)")
    parser.add_argument("--loopback", action="store_true",
                        help="keep DDS on this machine (127.0.0.1 only)")


def _say(message: str) -> None:
    print(f"sam3-agent: {message}", file=sys.stderr)


def _run_graph(args: argparse.Namespace, action: Callable[[Any], int]) -> int:
    """Usage checks, then ``action(client)`` with a GraphClient on ``--node``."""
    from sam3_agent_ros.graph.client import GraphClient, GraphError, qualified_node_name

    if not args.timeout > 0:
        _say("--timeout must be > 0")
        return EXIT_USAGE
    try:
        node_name = qualified_node_name(args.node)
    except ValueError as exc:
        _say(f"--node: {exc}")
        return EXIT_USAGE
    from sam3_agent_ros.graph.verb_node import verb_node

    with verb_node("sam3_agent_cli", args.loopback) as ros:
        client = GraphClient(ros.node, node_name, args.timeout)
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
    from sam3_agent_ros.graph.param_text import describe_lines, format_value

    param_words(args)

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
            print(f"set: {args.name} = {format_value(value)}"
                  f"{applies_note(args.name, client.node_name)}")
        return EXIT_OK

    return _run_graph(args, action)


# --- ask --ros --topic / --stop-follow (registered with `ask` in sam3_agent_ros/client.py) -----


def cmd_ask_topic(args: argparse.Namespace) -> int:
    """Publish the query JSON on the node's ``query`` topic and print its ``~/result``."""
    from sam3_agent_ros.graph.client import GraphError, TopicQuery, new_query_id, node_topics

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

    from sam3_agent_ros.graph.verb_node import verb_node

    deadline = time.monotonic() + args.timeout
    with verb_node("sam3_agent_ask", args.loopback) as ros:
        node = ros.node
        asker = TopicQuery(node, query_topic, result_topic, topics["status"],
                           print_status if args.feedback else None)
        try:
            node_wait_s = min(NODE_WAIT_S, args.timeout)
            asker.wait_for_node(min(deadline, time.monotonic() + node_wait_s),
                                waited_s=node_wait_s)
            asker.publish(payload)
            result = asker.wait_result(query_id, deadline)
            if result is not None and args.feedback:  # statuses may trail the result
                asker.spin_until(lambda: finished, min(deadline, time.monotonic() + 2.0))
        except GraphError as exc:
            _say(f"ask: {exc}")
            return EXIT_FAILED
        except KeyboardInterrupt:
            _say("ask: interrupted")
            return EXIT_INTERRUPTED
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
    from sam3_agent_ros.graph.client import GraphClient, GraphError, TopicQuery, node_topics
    from sam3_agent_ros.graph.verb_node import verb_node

    deadline = time.monotonic() + args.timeout
    with verb_node("sam3_agent_ask", args.loopback) as ros:
        node = ros.node
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
