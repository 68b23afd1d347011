"""The sample bag generator is deterministic and the committed bag is what it describes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from rosbags.rosbag2 import Reader
from rosbags.typesys import Stores, get_typestore

from sam3_agent_demo import sample

SAMPLE_DIR = sample.default_sample_dir()
BAG_DIR = SAMPLE_DIR / sample.BAG_DIRNAME
STORE = get_typestore(Stores.ROS2_KILTED)


@pytest.fixture(scope="module")
def committed():
    """{(timestamp, topic): cdr bytes} of the committed bag, and its reader's connections."""
    with Reader(BAG_DIR) as reader:
        connections = {c.topic: c.msgtype for c in reader.connections}
        messages = {(t, c.topic): bytes(d) for c, t, d in reader.messages()}
    return connections, messages


@pytest.fixture(scope="module")
def truth():
    return sample.load_ground_truth(SAMPLE_DIR)


def test_committed_bag_has_the_described_topics_counts_and_size(committed):
    connections, messages = committed
    spec = sample.SampleSpec()
    assert connections == sample.TOPIC_TYPES
    frames = len(spec.frame_times())
    assert frames == 101
    counts = {topic: sum(1 for (_, t) in messages if t == topic) for topic in connections}
    assert counts == {sample.COLOR_TOPIC: frames, sample.DEPTH_TOPIC: frames,
                      sample.CAMERA_INFO_TOPIC: frames, sample.QUERY_TOPIC: len(spec.queries)}
    assert (BAG_DIR / "bag.mcap").read_bytes()[:8] == b"\x89MCAP0\r\n"
    assert sample.dir_size(SAMPLE_DIR) <= sample.MAX_SAMPLE_BYTES


def test_committed_bag_matches_a_fresh_render(committed):
    _, messages = committed
    times = [0.0, 4.0, 10.0]
    fresh = list(sample.iter_messages(sample.SampleSpec(), STORE, frame_times=times))
    assert len(fresh) == 3 * len(times) + len(sample.SAMPLE_QUERIES)
    for stamp, topic, data in fresh:
        assert messages[(stamp, topic)] == data, (stamp, topic)


def test_generator_is_deterministic():
    first = list(sample.iter_messages(sample.SampleSpec(), STORE, frame_times=[2.0]))
    second = list(sample.iter_messages(sample.SampleSpec(), STORE, frame_times=[2.0]))
    assert first == second


def test_images_are_stamped_like_the_bag_and_well_formed(committed):
    _, messages = committed
    stamp = sample.stamp_ns(3.0)
    rgb = STORE.deserialize_cdr(messages[(stamp, sample.COLOR_TOPIC)], sample.IMAGE_TYPE)
    depth = STORE.deserialize_cdr(messages[(stamp, sample.DEPTH_TOPIC)], sample.IMAGE_TYPE)
    info = STORE.deserialize_cdr(messages[(stamp, sample.CAMERA_INFO_TOPIC)],
                                 sample.CAMERA_INFO_TYPE)
    for msg in (rgb, depth, info):
        assert msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec == stamp
        assert msg.header.frame_id == sample.FRAME_ID
    assert (rgb.encoding, rgb.width, rgb.height, rgb.step) == ("rgb8", 640, 480, 1920)
    assert (depth.encoding, depth.step) == ("16UC1", 1280)
    depth_mm = np.frombuffer(depth.data.tobytes(), np.uint16).reshape(480, 640)
    assert 900 < np.median(depth_mm) <= 1010  # the table, about 1 m away
    assert info.k[0] == info.k[4] == 600.0 and (info.width, info.height) == (640, 480)


def test_queries_are_published_at_their_times(committed):
    _, messages = committed
    for query in sample.SAMPLE_QUERIES:
        data = messages[(sample.stamp_ns(query.t_s), sample.QUERY_TOPIC)]
        assert STORE.deserialize_cdr(data, sample.STRING_TYPE).data == query.message_data()
    with_id = [q for q in sample.SAMPLE_QUERIES if q.query_id]
    assert with_id and json.loads(with_id[0].message_data())["id"] == with_id[0].query_id
    assert any(q.expected is None for q in sample.SAMPLE_QUERIES)


def test_ground_truth_matches_the_bag_and_the_scene(committed, truth):
    _, messages = committed
    image_stamps = sorted(t for (t, topic) in messages if topic == sample.COLOR_TOPIC)
    assert truth.stamps_ns.tolist() == image_stamps
    assert truth.labels.shape == (101, 480, 640)
    index = truth.frame_index(sample.stamp_ns(6.0))
    frame = sample.render_frame(6.0)
    for name in truth.names:
        assert np.array_equal(truth.mask(index, name), frame.masks[name])
        assert np.allclose(truth.position(index, name), frame.positions[name])
    for query in truth.queries:
        assert query["expected"] is None or query["expected"] in truth.names
    assert truth.frame_index(sample.stamp_ns(6.0) + 1) is None


def test_committed_description_matches_the_generator(tmp_path):
    """ground_truth.json (with the objects' sizes, yaws and tilts) as the generator writes it."""
    sample.write_description(tmp_path)
    committed = sample.default_sample_dir() / sample.GROUND_TRUTH_JSON
    assert (tmp_path / sample.GROUND_TRUTH_JSON).read_text() == committed.read_text()


def test_true_boxes_come_from_the_committed_description(truth):
    index = truth.frame_index(sample.stamp_ns(4.0))
    frame = sample.render_frame(4.0)
    for name in truth.names:
        assert truth.true_box(index, name) == frame.true_box(name), name
    old = sample.GroundTruth(truth.stamps_ns, truth.labels, truth.positions_m, truth.names,
                             truth.queries, truth.topics)  # a ground truth without objects
    assert old.true_box(index, "red_box") is None


def test_query_for_matches_by_id_then_by_text(truth):
    red = truth.query_for("sample-red", "whatever the node echoes")
    assert red is not None and red["expected"] == "red_box"
    assert truth.query_for("q-7", "the leftmost blue object")["expected"] == "blue_box"
    assert truth.query_for("q-7", "the green object") is None


def test_small_sample_bag_round_trips(tmp_path):
    query = sample.SampleQuery(0.15, "the leftmost blue object", "blue_box")
    spec = sample.SampleSpec(rate_hz=10.0, duration_s=0.2, queries=(query,), zstd_level=3)
    bag_dir = sample.generate_sample(tmp_path, spec)
    with Reader(bag_dir) as reader:
        topics = [c.topic for c, _, _ in reader.messages()]
    assert topics.count(sample.COLOR_TOPIC) == 3
    assert topics.index(sample.QUERY_TOPIC) == 6  # after the frames at 0.0 and 0.1 s
    assert (tmp_path / sample.GROUND_TRUTH_NPZ).is_file()
    assert sample.load_ground_truth(tmp_path).labels.shape[0] == 3


def test_mask_iou():
    a = np.zeros((4, 4), bool)
    b = np.zeros((4, 4), bool)
    assert sample.mask_iou(a, b) == 1.0
    a[:2] = True
    b[1:3] = True
    assert sample.mask_iou(a, b) == pytest.approx(4 / 12)
