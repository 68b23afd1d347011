"""ros/outputs.py's outputs room, without a graph: every publisher made from output_topics' table
by configuration (a row without a publisher fails here), every builder's message routed to a row
of its update (a builder output that goes nowhere fails here), lazy topics built only for a
subscriber, publishing that never raises."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_demo.block_scene import INTRINSICS, close_pair
from sam3_agent_ros.concepts import ConceptDetection, ConceptFrame
from sam3_agent_ros.config import Config, DepthConfig
from sam3_agent_ros.core.types import Frame, Mask, Phase, QueryStatus, Result, StatusEvent
from sam3_agent_ros.frames import Transform
from sam3_agent_ros.pipeline.measurement import SceneRequest, measure_answer
from sam3_agent_ros.pipeline.target_frame import TargetFrameRequest
from sam3_agent_ros.pipeline.three_d import PreparedDepth, measure_3d
from sam3_agent_ros.ros.messages.answer import answer_messages, follow_messages
from sam3_agent_ros.ros.messages.concepts import IMAGE_KINDS, ROBOT_KINDS, concept_messages
from sam3_agent_ros.ros.messages.images import FOLLOW_IMAGE_KINDS
from sam3_agent_ros.ros.messages.images import IMAGE_KINDS as ANSWER_IMAGE_KINDS
from sam3_agent_ros.ros.output_topics import (
    ALWAYS_SENT,
    NOT_FROM_OUTPUTS,
    OUTPUT_TOPICS,
    ROUTES,
    TOPICS,
    UPDATES,
    WHEN,
    fields_of,
)
from sam3_agent_ros.ros.outputs import NodeOutputs, message_type

EVERYTHING_ON = Config.from_params({"depth.enabled": True, "publish_overlay": True})


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
        self.created: dict[str, FakePublisher] = {}
        self.destroyed: list[FakePublisher] = []
        self.logger = FakeLogger()

    def create_publisher(self, msg_type, name, qos):
        assert name not in self.created, f"two publishers of {name}"
        publisher = self.created[name] = FakePublisher(msg_type, name)
        return publisher

    def destroy_publisher(self, publisher):
        self.destroyed.append(publisher)

    def get_logger(self):
        return self.logger


class FakeConceptDetections:
    def __init__(self, header, detections):
        self.header, self.detections = header, detections


class FakeConceptDetection:
    def __init__(self, **fields):
        self.__dict__.update(fields)


CONCEPT_TYPES = (FakeConceptDetections, FakeConceptDetection)


def still():
    """One flat depth image 2 m away: real measurements and a cloud."""
    return PreparedDepth(np.full((4, 6), 2.0, np.float32), (10.0, 10.0, 3.0, 2.0), None,
                         DepthConfig(erode_px=0, min_valid_pixels=5))


def room(config=EVERYTHING_ON, types=CONCEPT_TYPES):
    node = FakeNode()
    return node, NodeOutputs(node, config, concept_types=types)


def frame():
    return Frame(np.full((4, 6, 3), 90, np.uint8), 12, 0, "cam")


def masks():
    return [np.ones((4, 6), bool)]


class Transforms:
    def lookup(self, target, source, stamp_ns, timeout_s):
        return Transform(np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 0.0, 1.0])), ""


def full_answer(target_frame=None):
    result = Result("q", "a box", QueryStatus.SUCCEEDED, frame=frame(),
                    masks=[Mask.from_array(masks()[0], 0.9, (0, 0, 6, 4))])
    return measure_answer(result, still(), target_frame=target_frame,
                          cloud_max_points=10)


def scene_answer(target_frame):
    """An answer on the block tabletop, its grasp scene on (boxes on a table, grasps, cloud)."""
    scene = close_pair()
    depth, found = scene.render()
    height, width = depth.shape
    candidates = [Mask.from_array(found[name], 0.9, (0, 0, 1, 1))
                  for name in ("target", "neighbour")]
    result = Result("q", "the tall box", QueryStatus.SUCCEEDED, masks=candidates[:1],
                    frame=Frame(np.full((height, width, 3), 90, np.uint8), 12, 0, "cam"),
                    candidates=candidates)
    return measure_answer(result, PreparedDepth(depth, INTRINSICS, None, DepthConfig()),
                          target_frame=target_frame, cloud_max_points=10,
                          scene=SceneRequest())


def concept_pass():
    detection = ConceptDetection("red object", 1, masks()[0], 0.9, (0, 0, 6, 4), (3.0, 2.0),
                                 24)
    return ConceptFrame(frame(), ("red object",), 1, [detection])


@pytest.mark.parametrize("name,type_name", [
    (name, type_name) for name, type_name in OUTPUT_TOPICS if name not in NOT_FROM_OUTPUTS])
def test_every_table_entry_names_an_importable_message_type(name, type_name):
    try:
        msg_type = message_type(name)
    except ImportError:  # the generated interfaces of this package, not built here
        assert type_name.startswith("sam3_agent_ros/")
        return
    assert msg_type.__name__ == type_name.split("/")[-1]
    assert msg_type.__module__.split(".")[0] == type_name.split("/")[0]


def test_every_row_of_the_table_has_one_publisher_when_its_configuration_is_on():
    node, _ = room()
    assert set(node.created) == {t.name for t in TOPICS if t.updates}
    assert {"~/transition_event", "/diagnostics"} == NOT_FROM_OUTPUTS
    assert all(t.when in WHEN and set(t.updates) <= set(UPDATES) for t in TOPICS)
    off, _ = room(Config.from_params({"publish_overlay": False}), types=None)  # all off
    assert set(off.created) == {t.name for t in TOPICS if t.updates and t.when == "always"}
    assert "~/markers" not in off.created and "~/overlay/compressed" not in off.created


def test_every_builders_output_goes_to_a_row_of_its_update_and_every_row_is_built():
    request = TargetFrameRequest("base_link", Transforms())
    answer = answer_messages(scene_answer(request), ANSWER_IMAGE_KINDS, scene_ids=[]).outputs()
    located = measure_3d(still(), frame(), masks(), request)
    follow = follow_messages(frame(), masks(), {"query_id": "q", "objects": [{"id": 1}]},
                             located, FOLLOW_IMAGE_KINDS).outputs()
    concepts = concept_messages(concept_pass(), (*IMAGE_KINDS, *ROBOT_KINDS), CONCEPT_TYPES,
                                measure_3d(still(), frame(), masks(), request)).outputs()
    status = {"status": object()}  # NodeOutputs.publish_status's one field
    for update, built in (("answer", answer), ("follow", follow), ("concepts", concepts),
                          ("status", status)):
        assert set(built) == set(fields_of(update)), update  # no output without a row
        assert all((update, field) in ROUTES for field in built)
        missing = [field for field, message in built.items() if message is None]
        assert missing == [], (update, missing)  # every row's message is built


def test_lazy_topics_only_for_a_subscriber_and_the_rest_whenever_the_update_has_them():
    node, outputs = room()
    assert {name for name in outputs.names if outputs.wanted(name)} == set(ALWAYS_SENT)
    assert {"~/result", "~/status", "~/follow/status"} <= ALWAYS_SENT
    sent = outputs.publish_answer(full_answer())
    assert set(sent.images) == set()  # nobody subscribes: no image built
    assert node.created["~/result"].sent and node.created["~/target"].sent
    assert not node.created["~/detections"].sent  # lazy: nobody subscribes
    node.created["~/mask"].subscribers = node.created["~/detections"].subscribers = 1
    sent = outputs.publish_answer(full_answer())
    assert set(sent.images) == {"mask"} and len(node.created["~/detections"].sent) == 1
    outputs.publish_status(StatusEvent("q", Phase.THINKING))
    assert len(node.created["~/status"].sent) == 1
    assert outputs.cloud_max_points(10) is None and not outputs.follow_wants_3d(object())
    node.created["~/target/points"].subscribers = node.created["~/markers"].subscribers = 1
    assert outputs.cloud_max_points(10) == 10 and outputs.follow_wants_3d(object())
    assert not outputs.follow_wants_3d(None)  # depth off: nothing to measure


def test_publish_never_raises_warns_once_per_topic_and_nothing_after_destroy():
    node, outputs = room()
    node.created["~/result"].fail = True
    outputs.publish_answer(full_answer())
    outputs.publish_answer(full_answer())
    assert len(node.logger.warnings) == 1 and "~/result" in node.logger.warnings[0]
    outputs.destroy()
    assert len(node.destroyed) == len(node.created) and outputs.names == []
    quiet = outputs.publish_follow(frame(), masks(), {"state": "stopped"})
    assert quiet.images == {}
    outputs.publish_status(StatusEvent("q", Phase.THINKING))
    assert node.created["~/status"].sent == []
