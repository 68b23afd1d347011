"""The QoS profiles of the node's topics, each defined once.

- Camera images (``image_qos``): depth 1, so a late frame is dropped rather than queued.
  ``sensor_data`` (best effort) suits camera drivers; ``reliable`` matches reliable publishers
  such as a bag player, losing nothing on a loaded host.
- Depth and camera_info: best effort, which matches both best-effort (camera drivers) and
  reliable (bag players) publishers; a few frames of depth absorb a colour frame arriving a
  little later.
- Every output (answers, ``~/status``, follow updates, 3D targets): reliable, the last 10 kept
  for a slow reader.
- The query topic and the services of the action ``~/segment`` (goal, result, cancel): reliable,
  ``QUERY_DEPTH`` deep. A burst of queries or goals arrives faster than the one executor thread
  takes them; with a history of 10 the reader kept only the last 10 of a burst and dropped the
  rest without a word (measured: 11 of 100 topic queries, 11 of 100 goals reached the node).
  Each waiting sample is small (a query is at most ``max_query_chars``), and a goal's result
  response is kept only until the client acknowledges it (volatile durability). On loopback a
  client with rclpy's default QoS then gets every goal response of a burst of 100.
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
QUERY_DEPTH = 256  # a burst of queries waits here while the executor takes them one by one
QUERY_QOS = QoSProfile(reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST,
                       depth=QUERY_DEPTH, durability=DurabilityPolicy.VOLATILE)
ACTION_SERVICE_QOS = QUERY_QOS  # ~/segment's goal, result and cancel services (rclpy's: depth 10)
