"""DepthTargets and the world of a frame (CONTRACTS §11), without DDS: the subscription callbacks
called directly on a fake node, the query road (QueryRunner -> QueryLife -> measure) as the node
wires it, a fake clock for the frames. A query that lasts longer than the depth ring keeps its 3D;
the ring is bounded in bytes (``depth.buffer_mib``), checked on arrival."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest
from sensor_msgs.msg import CameraInfo, Image

from sam3_agent_demo.scene import render_scene
from sam3_agent_ros.config import Config
from sam3_agent_ros.core.types import Frame, Mask, QueryStatus, Result, stamp_ns
from sam3_agent_ros.pipeline.latest_frame import LatestFrame
from sam3_agent_ros.pipeline.query_life import QueryLife, QueryParts
from sam3_agent_ros.pipeline.query_runner import QueryRunner
from sam3_agent_ros.ros.depth import DepthTargets
from test.waiting import wait_until

COLOUR_FRAME = "camera_color_optical_frame"
S = 1_000_000_000
TAKEN = 1_700_000_000 * S + 250_000_000


class _Sub:
    def __init__(self, topic):
        self.topic_name = f"/cam/{topic}"


class _Logger:
    def __init__(self):
        self.lines: list[str] = []

    def warning(self, text, **_):
        self.lines.append(text)

    info = error = warning


class FakeNode:
    """What DepthTargets asks of a node; the callbacks are kept to be called by the test."""

    def __init__(self):
        self.callbacks: dict[str, object] = {}
        self.logger = _Logger()

    def create_subscription(self, msg_type, topic, callback, qos, callback_group=None):
        self.callbacks[topic] = callback
        return _Sub(topic)

    def create_publisher(self, msg_type, name, qos):
        return type("Pub", (), {"publish": lambda self, m: None,
                                "get_subscription_count": lambda self: 0})()

    def destroy_subscription(self, sub):
        pass

    def destroy_publisher(self, pub):
        pass

    def get_logger(self):
        return self.logger


@pytest.fixture(scope="module")
def scene():
    return render_scene()


def _stamped(msg, ns: int):
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(ns, S)
    msg.header.frame_id = COLOUR_FRAME
    return msg


def depth_msg(depth_mm: np.ndarray, ns: int) -> Image:
    height, width = depth_mm.shape
    msg = Image(height=height, width=width, encoding="16UC1", step=width * 2)
    msg.data = depth_mm.astype(np.uint16).tobytes()
    return _stamped(msg, ns)


def info_msg(scene) -> CameraInfo:
    k = scene.intrinsics
    info = CameraInfo(width=640, height=480)
    info.k = [k.fx, 0.0, k.cx, 0.0, k.fy, k.cy, 0.0, 0.0, 1.0]
    return _stamped(info, 0)


def make_targets(**params) -> tuple[FakeNode, DepthTargets]:
    node = FakeNode()
    config = Config.from_params({"depth.enabled": True, **params})
    return node, DepthTargets(node, config.depth, max_pixels=config.node.max_image_pixels)


def error_cm(position: dict, truth) -> float:
    got = np.array([position["x"], position["y"], position["z"]])
    return float(np.linalg.norm(got - np.asarray(truth))) * 100


class ColourMsg:
    """A colour frame message as far as the runner and the binding read it."""

    def __init__(self, scene, ns: int):
        self.rgb, self.ns = scene.rgb, ns


def test_a_query_longer_than_the_depth_ring_keeps_its_depth(scene):
    """The query takes its frame, the model thinks while 5 s of depth arrive at 30 Hz (the ring
    keeps 30 frames: 1 s), then the answer is measured: on the depth frame of its own stamp,
    right within 1 cm. Measured on what the ring holds by then, it had no position ("no depth
    frame within depth.max_stamp_diff_s")."""
    node, targets = make_targets()
    on_depth, on_info = node.callbacks["depth"], node.callbacks["camera_info"]
    on_info(info_msg(scene))
    right, wrong = scene.depth_mm(), np.full((480, 640), 2000, np.uint16)  # 2 m everywhere
    on_depth(depth_msg(wrong, TAKEN - 33_000_000))
    on_depth(depth_msg(right, TAKEN + 1_000_000))  # the stamp's own depth frame
    name = next(iter(scene.positions))
    mask = Mask.from_array(scene.masks[name], 0.9, (0, 0, 1, 1))
    clock = [0.0]
    published: list = []
    thinking = threading.Event()

    class SlowAgent:
        def run(self, frame, query, cancel, on_status):
            thinking.set()
            for k in range(150):  # 5 s of depth at 30 Hz while it thinks
                on_depth(depth_msg(wrong, TAKEN + (k + 2) * 33_333_333))
                clock[0] += 1 / 30
            return Result(query.id, query.text, QueryStatus.SUCCEEDED, masks=[mask],
                          frame=frame)

    class Outputs:
        def publish_status(self, event):
            pass

        def publish_answer(self, answer):
            published.append(answer)

    life = QueryLife(lambda: {"llm": "fake"}, lambda: True, node.logger)
    life.depth = targets
    frames = LatestFrame(clock=lambda: clock[0])

    def to_frame(msg: ColourMsg) -> Frame:
        return Frame(msg.rgb, *divmod(msg.ns, S), COLOUR_FRAME)

    runner = QueryRunner(answer=life.answer, to_frame=to_frame, publish=life.finish,
                         status=life.status, frames=frames,
                         bind=lambda msg: life.bind_world(msg.ns, COLOUR_FRAME))
    life.configure(QueryParts(agent=SlowAgent(), outputs=Outputs(), runner=runner))
    frames.put(ColourMsg(scene, TAKEN))
    runner.start()
    try:
        from sam3_agent_ros.core.types import Query
        life.submit(Query("q-slow", "the box"), None)
        wait_until(lambda: published, "the slow answer")
    finally:
        runner.stop("test over", 5.0)
    assert thinking.is_set() and len(targets._ring) == 30
    extra = published[0].result.to_json()["masks"][0]
    assert extra["position"] is not None, extra
    assert error_cm(extra["position"], scene.positions[name]) < 1.0
    # The same colour frame measured without its binding: what the ring holds now.
    late = targets.measure(to_frame(ColourMsg(scene, TAKEN)), [mask])[0]
    assert late["position"] is None
    assert late["position_error"].startswith("no depth frame within depth.max_stamp_diff_s")


def test_the_depth_ring_is_bounded_in_bytes_on_arrival(scene):
    """40 depth frames of 1 MiB with depth.buffer_mib 4 (and buffer_size 1000): at most 4 MiB
    kept, whatever the count allows; a frame alone over the budget is refused on arrival, said
    in the log once and in position_error; nothing stays after destroy (a lifecycle cycle)."""
    node, targets = make_targets(**{"depth.buffer_mib": 4, "depth.buffer_size": 1000})
    on_depth = node.callbacks["depth"]
    node.callbacks["camera_info"](info_msg(scene))
    frame_mm = np.zeros((512, 1024), np.uint16)  # 1 MiB
    for k in range(40):
        on_depth(depth_msg(frame_mm, TAKEN + k * 33_333_333))
    assert len(targets._ring) == 4 and targets.buffered_bytes == 4 * 2**20
    huge = np.zeros((1200, 2000), np.uint16)  # 4.6 MiB alone
    for _ in range(3):
        on_depth(depth_msg(huge, TAKEN + 2 * S))
    assert len(targets._ring) == 4 and targets.buffered_bytes == 4 * 2**20
    refused = [line for line in node.logger.lines if "refused on arrival" in line]
    assert len(refused) == 1 and "over depth.buffer_mib=4 MiB" in refused[0]
    frame = Frame(scene.rgb, *divmod(TAKEN + 2 * S, S), COLOUR_FRAME)
    mask = Mask.from_array(next(iter(scene.masks.values())), 0.9, (0, 0, 1, 1))
    reason = targets.measure(frame, [mask])[0]["position_error"]
    assert "depth frame refused on arrival: a depth frame of 4.6 MiB is over " \
           "depth.buffer_mib=4 MiB" in reason
    targets.destroy()
    assert len(targets._ring) == 0 and targets.buffered_bytes == 0


def test_the_binding_takes_the_stamps_own_depth_arriving_after_the_colour_frame(scene):
    """Depth often arrives just after its colour frame: the query's binding, made when the
    query took the colour frame, takes it when it comes."""
    node, targets = make_targets()
    on_depth = node.callbacks["depth"]
    node.callbacks["camera_info"](info_msg(scene))
    on_depth(depth_msg(np.full((480, 640), 2000, np.uint16), TAKEN - 40_000_000))
    binding = targets.bind(TAKEN)
    on_depth(depth_msg(scene.depth_mm(), TAKEN + 500_000))
    assert binding.pin.best is not None and binding.pin.distance_ns() == 500_000
    assert binding.model is not None and binding.nbytes == 640 * 480 * 2


def test_a_frame_with_another_stamps_world_is_measured_on_its_own_stamp(scene):
    """A world bound for another stamp (a frame re-stamped by a copy) is not used."""
    from sam3_agent_ros.pipeline.frame_world import FrameWorld

    node, targets = make_targets()
    on_depth = node.callbacks["depth"]
    node.callbacks["camera_info"](info_msg(scene))
    on_depth(depth_msg(scene.depth_mm(), TAKEN))
    other = FrameWorld(TAKEN - 5 * S, COLOUR_FRAME, targets.bind(TAKEN - 5 * S))
    frame = dataclasses.replace(Frame(scene.rgb, *divmod(TAKEN, S), COLOUR_FRAME), world=other)
    mask = Mask.from_array(next(iter(scene.masks.values())), 0.9, (0, 0, 1, 1))
    assert targets.measure(frame, [mask])[0]["position"] is not None
    assert stamp_ns(frame.stamp_sec, frame.stamp_nanosec) == TAKEN
