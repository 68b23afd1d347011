"""console/preview.py: a small JPEG of the live frame, at most rate_hz."""

from __future__ import annotations

import cv2
import numpy as np

from sam3_agent_ros.console.preview import Throttle, is_jpeg, preview_jpeg


def test_a_1080p_frame_becomes_a_small_jpeg():
    frame = np.zeros((1080, 1920, 3), np.uint8)
    frame[:, :960] = (255, 0, 0)
    jpeg = preview_jpeg(frame)
    assert is_jpeg(jpeg)
    decoded = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
    assert decoded.shape == (360, 640, 3)
    assert decoded[180, 100, 2] > 200 and decoded[180, 600, 2] < 50  # red on the left (BGR)


def test_throttle():
    now = [0.0]
    throttle = Throttle(4.0, clock=lambda: now[0])
    due = []
    for _ in range(40):  # 30 Hz for 1.33 s
        due.append(throttle.due())
        now[0] += 1 / 30
    # every 8th frame (7/30 s < 1/4 s <= 8/30 s): 4 Hz at most
    assert [i for i, d in enumerate(due) if d] == [0, 8, 16, 24, 32]


def test_the_preview_follows_the_nodes_own_image_subscription():
    """Issue 33: with the camera remapped to /camera/color/image_raw the page subscribed
    /image and never showed a frame; the node's graph names the topic."""
    from sam3_agent_ros.console.preview import camera_topic

    raw, compressed = "sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage"
    remapped = [("/query", ["std_msgs/msg/String"]), ("/camera/color/image_raw", [raw])]
    assert camera_topic(remapped) == ("/camera/color/image_raw", "raw", "")
    with_depth = [("/camera/aligned_depth_to_color/image_raw", [raw]),
                  ("/camera/color/image_raw", [raw]), ("/camera/color/camera_info", ["x"])]
    assert camera_topic(with_depth)[0] == "/camera/color/image_raw"
    odd = [("/cam/a", [raw]), ("/cam/b", [raw])]
    assert camera_topic(odd, hint="/cam/b")[0] == "/cam/b"  # the node's frames health says
    assert camera_topic(odd, hint="/elsewhere")[0] in ("/cam/a", "/cam/b")  # never elsewhere
    assert camera_topic([("/cam/image/compressed", [compressed])]) == (
        "/cam/image/compressed", "compressed", "")
    topic, kind, problem = camera_topic([("/query", ["std_msgs/msg/String"])])
    assert (topic, kind) == ("", "") and "subscribes no image topic" in problem
