"""The moving sample bags (moving, grasp): their messages, their ground truth and the bundled
copies."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sam3_agent_demo import moving_sample, sample
from sam3_agent_demo.moving_scene import GRASPED_OBJECT, LEAVING_OBJECT, LOOK_ALIKE


def test_messages_are_in_time_order_with_the_follow_queries():
    store = sample.new_typestore()
    messages = list(moving_sample.iter_messages(typestore=store, frames=[0, 5, 16, 84]))
    stamps = [m[0] for m in messages]
    assert stamps == sorted(stamps)
    queries = [json.loads(store.deserialize_cdr(data, sample.STRING_TYPE).data)
               for _, topic, data in messages if topic == sample.QUERY_TOPIC]
    assert queries[0] == {"id": "follow-yellow", "query": "the yellow object", "follow": True}
    assert queries[-1] == {"stop_follow": True}
    colour = [m for m in messages if m[1] == sample.COLOR_TOPIC]
    assert len(colour) == 4


def test_bundled_sample_matches_the_generator_and_stays_small():
    sample_dir = moving_sample.default_dir()
    truth = sample.load_ground_truth(sample_dir)
    description = moving_sample.load_description(sample_dir)
    assert len(truth.stamps_ns) == moving_sample.N_FRAMES
    index = 40
    rendered = moving_sample.render_frame(index)
    assert np.array_equal(truth.mask(index, "blue_box"), rendered.masks["blue_box"])
    leaves = moving_sample.sequence().first_index_without(LEAVING_OBJECT)
    assert description["leaves_view_stamp_ns"] == int(truth.stamps_ns[leaves])
    assert not truth.mask(leaves, LEAVING_OBJECT).any() and truth.mask(leaves - 1,
                                                                      LEAVING_OBJECT).any()
    assert [q["ends"] for q in description["queries"]] == ["stopped", "lost", "stopped", None]
    assert [q["gone"] for q in description["queries"]] == [None, "left the view", None, None]
    assert description["queries"][1]["gone_stamp_ns"] == description["leaves_view_stamp_ns"]
    assert sample.dir_size(sample_dir) < sample.MAX_SAMPLE_BYTES


def test_bundled_grasp_sample_matches_the_generator_and_stays_small():
    spec = moving_sample.GRASP
    sample_dir = spec.default_dir()
    truth = sample.load_ground_truth(sample_dir)
    assert moving_sample.load_description(sample_dir) == spec.description()
    removed = spec.sequence.removed_at
    assert len(truth.stamps_ns) == len(spec.sequence)
    assert truth.mask(removed - 1, GRASPED_OBJECT).any()
    assert not truth.mask(removed, GRASPED_OBJECT).any()
    assert np.isnan(truth.position(removed, GRASPED_OBJECT)).all()
    assert truth.mask(removed, LOOK_ALIKE).any()
    (query,) = moving_sample.load_description(sample_dir)["queries"]
    assert (query["expected"], query["look_alike"], query["ends"], query["gone"]) == \
        (GRASPED_OBJECT, LOOK_ALIKE, "lost", "taken away")
    assert query["gone_stamp_ns"] == int(truth.stamps_ns[removed])
    # Replayed after the moving sample, its stamps come later.
    moving = sample.load_ground_truth(moving_sample.default_dir())
    assert truth.stamps_ns[0] > moving.stamps_ns[-1]
    assert query["stamp_ns"] > truth.stamps_ns[0]
    # Small enough for the repository: under half the limit of a sample.
    assert sample.dir_size(sample_dir) < sample.MAX_SAMPLE_BYTES / 2


@pytest.mark.parametrize(("spec", "frames"), [(moving_sample.MOVING, [0, 40, 89]),
                                              (moving_sample.GRASP, [0, 15, 44])])
def test_committed_bag_matches_a_fresh_render(spec, frames):
    from rosbags.rosbag2 import Reader

    fresh = {(stamp, topic): data for stamp, topic, data in spec.iter_messages(frames=frames)}
    committed = {}
    with Reader(spec.default_dir() / sample.BAG_DIRNAME) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
        for connection, stamp, data in reader.messages():
            if (stamp, connection.topic) in fresh:
                committed[(stamp, connection.topic)] = bytes(data)
    assert committed.keys() == fresh.keys()
    assert all(committed[key] == bytes(fresh[key]) for key in fresh)  # byte for byte
    assert counts[sample.COLOR_TOPIC] == len(spec.sequence)
    assert counts[sample.QUERY_TOPIC] == len(spec.queries)
