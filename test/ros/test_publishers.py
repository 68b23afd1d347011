"""ros/publishers.py: every output publisher made from output_topics' table, one per topic
however many senders hold it, filled lazily (a message is worth building only for a
subscriber, except ~/result, ~/status and ~/follow/status), publishing that never raises."""

from __future__ import annotations

import pytest

from sam3_agent_ros.ros.output_topics import ALWAYS_SENT, NOT_FROM_PUBLISHERS, OUTPUT_TOPICS
from sam3_agent_ros.ros.publishers import Publishers, message_type


class FakePublisher:
    def __init__(self, msg_type, name):
        self.msg_type, self.name = msg_type, name
        self.subscribers = 0
        self.sent: list = []
        self.fail = False

    def get_subscription_count(self):
        return self.subscribers

    def publish(self, message):
        if self.fail:
            raise RuntimeError("publisher's context is invalid")
        self.sent.append(message)


class FakeLogger:
    def __init__(self):
        self.warnings: list[str] = []

    def warning(self, text):
        self.warnings.append(text)


class FakeNode:
    def __init__(self):
        self.created: list[FakePublisher] = []
        self.destroyed: list[FakePublisher] = []
        self.logger = FakeLogger()

    def create_publisher(self, msg_type, name, qos):
        publisher = FakePublisher(msg_type, name)
        self.created.append(publisher)
        return publisher

    def destroy_publisher(self, publisher):
        self.destroyed.append(publisher)

    def get_logger(self):
        return self.logger


@pytest.mark.parametrize("name,type_name", [
    (name, type_name) for name, type_name in OUTPUT_TOPICS if name not in NOT_FROM_PUBLISHERS])
def test_every_table_entry_names_an_importable_message_type(name, type_name):
    try:
        msg_type = message_type(name)
    except ImportError:  # the generated interfaces of this package, not built here
        assert type_name.startswith("sam3_agent_ros/")
        return
    assert msg_type.__name__ == type_name.split("/")[-1]
    assert msg_type.__module__.split(".")[0] == type_name.split("/")[0]


def test_a_shared_topic_has_one_publisher_that_goes_with_its_last_holder():
    node = FakeNode()
    answers = Publishers(node, ["~/result", "~/markers"])
    follow = Publishers(node, ["~/follow/status", "~/markers"])
    assert sorted(p.name for p in node.created) == ["~/follow/status", "~/markers", "~/result"]
    answers.destroy()
    assert sorted(p.name for p in node.destroyed) == ["~/result"]
    assert follow.exists("~/markers") and not follow.exists("~/result")
    follow.destroy()
    assert sorted(p.name for p in node.destroyed) == ["~/follow/status", "~/markers",
                                                       "~/result"]


def test_wanted_only_for_a_subscriber_except_the_always_sent():
    node = FakeNode()
    held = Publishers(node, ["~/result", "~/status", "~/follow/status", "~/mask", "~/markers"])
    assert {name for name in held.names if held.wanted(name)} == set(ALWAYS_SENT)
    held["~/mask"].subscribers = 1
    assert held.wanted("~/mask") and not held.wanted("~/markers")
    assert not held.wanted("~/target")  # nobody holds it (depth off): never built
    other = Publishers(node, ["~/target"])  # the depth step holds it
    other["~/target"].subscribers = 1
    assert held.wanted("~/target")  # reachable by every sender while it exists


def test_publish_never_raises_and_warns_once_per_topic():
    node = FakeNode()
    held = Publishers(node, ["~/result"])
    held.publish("~/result", None)  # nothing built: nothing sent
    held.publish("~/target", object())  # not there: nothing sent, no error
    assert held["~/result"].sent == []
    held["~/result"].fail = True
    held.publish("~/result", object())
    held.publish("~/result", object())
    assert len(node.logger.warnings) == 1 and "~/result" in node.logger.warnings[0]
