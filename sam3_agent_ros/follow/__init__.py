"""Follow mode, ROS-free: keep a query's selected masks current on new frames.

``FollowSession`` owns one followed answer; a ``Tracker`` (``flow`` or ``redetect``) moves the
masks from frame to frame. See docs/follow.md.
"""

from sam3_agent_ros.follow.session import FollowSession
from sam3_agent_ros.follow.types import (
    LOST,
    STOPPED,
    TRACKING,
    FollowedObject,
    FollowError,
    FollowUpdate,
)

__all__ = ["LOST", "STOPPED", "TRACKING", "FollowError", "FollowSession", "FollowUpdate",
           "FollowedObject"]
