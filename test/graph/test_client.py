"""sam3_agent_ros/graph/client.py without a graph: node names and topics, parameter values
from the command line (typed by the declared type), and how they are printed. The calls on a
running node: test/ros/test_graph_cli.py."""

from __future__ import annotations

import pytest
from rcl_interfaces.msg import IntegerRange, ParameterDescriptor, ParameterType

from sam3_agent_ros.graph.client import (
    describe_lines,
    format_value,
    node_topics,
    parse_parameter_text,
    qualified_node_name,
    rclpy_parameter,
)

T = ParameterType


@pytest.mark.parametrize(("given", "expected"), [
    ("sam3_agent", "/sam3_agent"), ("/sam3_agent", "/sam3_agent"),
    ("/robot1/sam3_agent/", "/robot1/sam3_agent"), (" robot1/sam3_agent ", "/robot1/sam3_agent"),
])
def test_node_names_are_fully_qualified(given, expected):
    assert qualified_node_name(given) == expected


@pytest.mark.parametrize("empty", ["", "/", "  "])
def test_an_empty_node_name_is_refused(empty):
    with pytest.raises(ValueError, match="empty"):
        qualified_node_name(empty)


def test_topics_follow_the_node_name_like_the_node_resolves_them():
    assert node_topics("/sam3_agent") == {
        "query": "/query", "result": "/sam3_agent/result", "status": "/sam3_agent/status",
        "stop_follow": "/sam3_agent/stop_follow", "segment": "/sam3_agent/segment"}
    robot = node_topics("robot1/sam3_agent")
    assert (robot["query"], robot["result"]) == ("/robot1/query", "/robot1/sam3_agent/result")


@pytest.mark.parametrize(("text", "kind", "value"), [
    ("12", T.PARAMETER_INTEGER, 12),
    ("12", T.PARAMETER_DOUBLE, 12.0),
    ("0.25", T.PARAMETER_DOUBLE, 0.25),
    ("true", T.PARAMETER_BOOL, True),
    ("False", T.PARAMETER_BOOL, False),
    ("true", T.PARAMETER_STRING, "true"),  # a string parameter takes the text as it is
    ("http://127.0.0.1:8000/v1", T.PARAMETER_STRING, "http://127.0.0.1:8000/v1"),
    ("[red mug, blue box]", T.PARAMETER_STRING_ARRAY, ["red mug", "blue box"]),
    ("[1, 2]", T.PARAMETER_DOUBLE_ARRAY, [1.0, 2.0]),
    ("[]", T.PARAMETER_INTEGER_ARRAY, []),
    ("[true, false]", T.PARAMETER_BOOL_ARRAY, [True, False]),
])
def test_values_are_read_as_the_declared_type(text, kind, value):
    parsed = parse_parameter_text(text, kind)
    assert parsed == value and type(parsed) is type(value)
    rclpy_parameter("p", parsed, kind).to_parameter_msg()  # and fit that type's message field


@pytest.mark.parametrize(("text", "kind", "message"), [
    ("abc", T.PARAMETER_INTEGER, "'abc' is not an integer"),
    ("1.5", T.PARAMETER_INTEGER, "is not an integer"),
    ("true", T.PARAMETER_INTEGER, "is not an integer"),
    ("yes please", T.PARAMETER_BOOL, "is not true or false"),
    ("fast", T.PARAMETER_DOUBLE, "is not a number"),
    ("red mug", T.PARAMETER_STRING_ARRAY, "is not a list of strings"),
    ("[1, x]", T.PARAMETER_DOUBLE_ARRAY, "is not a list of numbers"),
    ("[1, 2", T.PARAMETER_INTEGER_ARRAY, "is not a value"),
    ("", T.PARAMETER_INTEGER, "is not an integer"),
])
def test_values_that_do_not_fit_the_type_say_what_was_expected(text, kind, message):
    with pytest.raises(ValueError, match=message):
        parse_parameter_text(text, kind)


def test_values_print_on_one_line():
    assert format_value("offline") == "offline"
    assert format_value(12) == "12"
    assert format_value(0.5) == "0.5"
    assert format_value(True) == "true"
    assert format_value(["a", "b"]) == '["a", "b"]'
    assert format_value([1.0, 2.5]) == "[1.0, 2.5]"


def test_a_descriptor_prints_its_type_range_and_read_only_flag():
    descriptor = ParameterDescriptor(
        name="agent.max_rounds", type=T.PARAMETER_INTEGER, description="Most rounds.",
        read_only=True, integer_range=[IntegerRange(from_value=1, to_value=200, step=1)])
    assert describe_lines("agent.max_rounds", descriptor) == [
        "parameter: agent.max_rounds", "type: integer", "description: Most rounds.",
        "integer range: 1 .. 200, step 1", "read only: true"]


class _Future:
    def __init__(self, answer: object = None) -> None:
        self._answer = answer

    def done(self) -> bool:
        return self._answer is not None

    def result(self) -> object:
        return self._answer


class _NoWait:
    """A waiter that looks once (the loop, not the waiting, is under test)."""

    def until(self, predicate, deadline):
        return predicate()


class _GraphNode:
    """What a node sees on the graph (its own name among them, as rclpy lists it)."""

    def get_fully_qualified_name(self) -> str:
        return "/sam3_agent_cli"

    def get_node_names_and_namespaces(self) -> list[tuple[str, str]]:
        return [("sam3_agent_cli", "/"), ("camera", "/robot"), ("sam3_agent", "/robot"),
                ("sam3_agent", "/robot")]


def _graph_client_without_ros(timeout_s: float = 30.0):
    from sam3_agent_ros.graph.client import GraphClient

    client = GraphClient.__new__(GraphClient)
    client.node_name, client.timeout_s, client._waiter = "/sam3_agent", timeout_s, _NoWait()
    client.node = _GraphNode()
    return client


def test_a_lost_first_reply_is_asked_again_and_the_first_answer_taken():
    """A fresh client may lose the reply to its first request: an idempotent request (the
    parameter verbs, get_state) is sent again, and whichever reply comes is the answer."""
    sent = []

    def send():
        sent.append(_Future() if not sent else _Future("the answer"))
        return sent[-1]

    client = _graph_client_without_ros()
    assert client._answer(send, lambda: True, "service x", "/sam3_agent/x") == "the answer"
    assert len(sent) == 2


def test_nobody_answering_says_which_node_and_what_was_missing():
    from sam3_agent_ros.graph.client import GraphError

    client = _graph_client_without_ros(timeout_s=0.01)
    with pytest.raises(GraphError, match="no node /sam3_agent answering .*parameter services") \
            as raised:
        client._answer(_Future, lambda: False, "its parameter services", "/sam3_agent/x")
    # the nodes it can see, sam3_agent ones first, itself left out (a wrong --node)
    assert str(raised.value).endswith("nodes visible: /robot/sam3_agent, /robot/camera")


def test_visible_nodes_are_bounded_and_say_when_there_are_none():
    from sam3_agent_ros.graph.client import MAX_LISTED_NODES, visible_nodes

    class Crowded(_GraphNode):
        def get_node_names_and_namespaces(self):
            return [(f"n{i:02d}", "/") for i in range(MAX_LISTED_NODES + 3)]

    class Alone(_GraphNode):
        def get_node_names_and_namespaces(self):
            return [("sam3_agent_cli", "/")]

    assert visible_nodes(Crowded()).endswith(", /n11 and 3 more")
    assert visible_nodes(Alone()).startswith("no node is visible (ROS_DOMAIN_ID=")


def test_the_node_is_gone_once_nobody_publishes_for_a_while(monkeypatch):
    """ask --topic gives up when the node vanished without a result (killed: CONTRACTS §11)."""
    from sam3_agent_ros.graph import client as graph_client

    now = [100.0]
    monkeypatch.setattr(graph_client.time, "monotonic", lambda: now[0])
    counts = iter([1, 0, 0, 1, 0, 0, 0])
    gone = graph_client.NodeGone(lambda: next(counts), 0.5)
    seen = []
    for _ in range(7):
        seen.append(gone())
        now[0] += 0.3
    # a flicker back to 1 restarts the clock; 0 for 0.5 s in a row: gone
    assert seen == [False, False, False, False, False, False, True]
