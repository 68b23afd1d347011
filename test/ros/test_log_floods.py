"""Issue 34: every log line a peer can cause is rate-limited per kind, with a count of what was
suppressed (sam3_agent_ros/log_limit.py), and the silent refusals say so once in a while.

One node process (offline backends); each flood runs ``FLOOD_S`` seconds as fast as one client
goes (test/ros/floods.py), then the node's lines of that kind are counted. Before: 423 WARN/s for
refused read-only sets, 1023 lines/s for accepted ``concepts.prompts`` changes, 879 INFO/s for
``{"stop_follow": true}``; nothing at all for out-of-range values and ``~/stop_follow``.
"""

from __future__ import annotations

import os
import time

import pytest

from sam3_agent_ros.log_limit import PEER_LINES
from test.ros.floods import ParameterSetter, Trigger, flood, log_lines, stop_follow_writer
from test.ros.helpers import Harness, NodeProcess

NS = "/log_floods"
FLOOD_S = 2.0
SETTLE_S = 1.5  # the node's 1 Hz timer says the count of a kind that went quiet
# burst, then per_s over the flood and the settling, plus the line with the count
MOST_LINES = PEER_LINES.burst + PEER_LINES.per_s * (FLOOD_S + SETTLE_S) + 2
MIN_SENT = 40  # fewer would prove nothing


@pytest.fixture(scope="module")
def ros(ros_env, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("log_floods")
    proc = NodeProcess(NS, {}, tmp, dict(os.environ, **ros_env))
    harness = Harness("sam3_agent_log_floods")
    try:
        harness.wait_state(proc.name, "active", timeout=90)
        harness.wait_subscribed(f"{NS}/query")
        yield harness, proc
    finally:
        proc.stop()
        harness.close()


def check(result, most: float = MOST_LINES) -> None:
    assert result.sent >= MIN_SENT, result
    assert 1 <= result.lines <= most, result
    assert result.suppressed_said, result


def test_refused_read_only_sets_are_rate_limited_with_a_count(ros):
    harness, proc = ros
    setter = ParameterSetter(harness, proc.name)
    result = flood("read-only set", proc, lambda: setter.send({"llm.backend": "openai"}),
                   lambda line: line.startswith("parameter change refused"), FLOOD_S, SETTLE_S)
    check(result)
    assert all(r is not None and not r.results[0].successful for r in setter.replies)
    assert "llm.backend is read-only after start-up" in "\n".join(log_lines(proc))


def test_accepted_concept_changes_are_rate_limited_with_a_count(ros):
    harness, proc = ros
    setter = ParameterSetter(harness, proc.name)
    flip = {"n": 0}

    def change() -> None:  # a new list each time: each is accepted and applied
        flip["n"] += 1
        setter.send({"concepts.prompts": ["red object"] if flip["n"] % 2 else ["blue object"]})

    result = flood("concepts.prompts", proc, change,
                   lambda line: line.startswith(("parameter changed", "standing concepts")),
                   FLOOD_S, SETTLE_S)
    check(result, 2 * MOST_LINES)  # two kinds: the change, and the new list
    assert all(r is not None and r.results[0].successful for r in setter.replies)
    setter.send({"concepts.prompts": []})


def test_stop_follow_on_the_query_topic_is_rate_limited_with_a_count(ros):
    harness, proc = ros
    send = stop_follow_writer(harness, NS)

    def paced() -> None:  # about 2000 a second: what one Python peer sends without effort
        send()
        time.sleep(0.0005)

    result = flood("stop_follow topic", proc, paced,
                   lambda line: line.startswith("stop_follow"), FLOOD_S, SETTLE_S)
    check(result)


def test_the_stop_follow_service_says_it_is_not_following_rate_limited(ros):
    harness, proc = ros
    trigger = Trigger(harness, f"{NS}/sam3_agent/stop_follow")
    result = flood("stop_follow service", proc, trigger.send,
                   lambda line: "~/stop_follow service" in line, FLOOD_S, SETTLE_S)
    check(result)


def test_an_out_of_range_value_is_refused_with_a_line(ros):
    harness, proc = ros
    setter = ParameterSetter(harness, proc.name)
    result = flood("out of range", proc, lambda: setter.send({"agent.max_rounds": 0}),
                   lambda line: line.startswith("parameter change refused"), FLOOD_S, SETTLE_S)
    check(result)
    assert all(r is not None and not r.results[0].successful for r in setter.replies)
    refused = [line for line in log_lines(proc) if line.startswith("parameter change refused")]
    assert any("agent.max_rounds" in line for line in refused), refused
