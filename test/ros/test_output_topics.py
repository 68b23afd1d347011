"""ros/output_topics.py against a live node with every optional output on (depth, overlay,
standing concepts): the table lists exactly the topics the node advertises, with their types.
A new publisher of the node fails this test until the table names it (and with it the default
topics of ``sam3-agent record``)."""

from __future__ import annotations

import os
import time

from rclpy.node import NodeNameNonExistentError

from sam3_agent_ros.ros.output_topics import OUTPUT_TOPICS, resolve
from test.ros.helpers import Harness, NodeProcess

NS = "/outtopics"
EVERYTHING_ON = {"depth": {"enabled": True}, "publish_overlay": True,
                 "concepts": {"prompts": ["red object"]}}
NOT_OUTPUTS = ("/rosout", "/parameter_events")  # every rclpy node's


def advertised(harness: Harness) -> dict[str, list[str]]:
    try:
        found = harness.node.get_publisher_names_and_types_by_node("sam3_agent", NS)
    except NodeNameNonExistentError:  # its graph entry is still on the way
        return {}
    return {name: sorted(types) for name, types in found
            if name not in NOT_OUTPUTS and "/_action/" not in name}


def test_the_table_is_every_topic_the_node_publishes(ros_env, tmp_path):
    proc = NodeProcess(NS, EVERYTHING_ON, tmp_path, dict(os.environ, **ros_env))
    harness = Harness("output_topics_test")
    try:
        harness.wait_state(proc.name, "active", timeout=90)
        expected = {resolve(name, f"{NS}/sam3_agent"): [msgtype]
                    for name, msgtype in OUTPUT_TOPICS}
        deadline = time.monotonic() + 60  # graph discovery of a loaded machine
        while (live := advertised(harness)) != expected and time.monotonic() < deadline:
            time.sleep(0.25)
    finally:
        proc.stop()
        harness.close()
    assert live == expected, (sorted(set(live) - set(expected)),
                              sorted(set(expected) - set(live)))
