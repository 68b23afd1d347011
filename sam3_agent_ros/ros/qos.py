"""The QoS profiles of the node's topics, each defined once.

- Camera images (``image_qos``): depth 1, so a late frame is dropped rather than queued.
  ``sensor_data`` (best effort) suits camera drivers; ``reliable`` matches reliable publishers
  such as a bag player, losing nothing on a loaded host.
- Depth and camera_info: best effort, which matches both best-effort (camera drivers) and
  reliable (bag players) publishers; a few frames of depth absorb a colour frame arriving a
  little later.
- The query topic and every output (answers, ``~/status``, follow updates, 3D targets):
  reliable, the last 10 kept for a slow reader.
"""

from __future__ import annotations

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

IMAGE_QOS = {  # by ``image_qos``
    "sensor_data": QoSProfile(reliability=ReliabilityPolicy.BEST_EFFORT,
                              history=HistoryPolicy.KEEP_LAST, depth=1,
                              durability=DurabilityPolicy.VOLATILE),
    "reliable": QoSProfile(reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST,
                           depth=1, durability=DurabilityPolicy.VOLATILE),
}
DEPTH_QOS = QoSProfile(reliability=ReliabilityPolicy.BEST_EFFORT, history=HistoryPolicy.KEEP_LAST,
                       depth=5)
OUTPUT_QOS = QoSProfile(reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST,
                        depth=10, durability=DurabilityPolicy.VOLATILE)
QUERY_QOS = OUTPUT_QOS
