"""follow/types.py: the source a session starts from, and what the follow thread drives."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_ros.config import Config
from sam3_agent_ros.follow import FollowSession
from sam3_agent_ros.follow.types import (
    SOURCE_FLOW,
    SOURCE_REDETECT,
    STOPPED,
    TRACKING,
    Session,
    starting_source,
)
from test.fakes.segmenters import BoxSegmenter

BOX = (6, 4, 14, 12)
IMAGE = np.zeros((20, 24, 3), np.uint8)


def test_flow_mode_starts_from_flow_and_every_other_mode_from_redetect():
    assert starting_source("flow") == SOURCE_FLOW
    assert starting_source("redetect") == SOURCE_REDETECT


def new_session(mode: str) -> Session:
    config = Config.from_params({"follow.mode": mode}).follow
    mask = np.zeros((20, 24), bool)
    mask[BOX[1]:BOX[3], BOX[0]:BOX[2]] = True
    return FollowSession(config, BoxSegmenter({"box": [(*BOX, 0.9)]}), IMAGE, [mask], "box",
                         now_s=0.0)


@pytest.mark.parametrize("mode", ["flow", "redetect"])
def test_what_the_follow_thread_reads_of_a_session_is_what_the_session_reports(mode):
    """The follow thread names a follow's source before its first update from
    ``starting_source(session.mode)``: the source the session itself reports then."""
    fresh = new_session(mode)
    assert fresh.mode == mode
    stopped = fresh.stop()
    assert stopped.state == STOPPED and stopped.error is None
    assert stopped.source == starting_source(mode)
    update = new_session(mode).update(IMAGE, 0.1)
    assert update.state == TRACKING and [o.index for o in update.objects] == [0]
