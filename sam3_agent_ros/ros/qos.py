"""The QoS profiles of the node's topics, each defined once.

- Camera images (``image_qos``): depth 1, so a late frame is dropped rather than queued.
  ``sensor_data`` (best effort) suits camera drivers; ``reliable`` matches reliable publishers
  such as a bag player, losing nothing on a loaded host.
- Depth and camera_info: best effort, which matches both best-effort (camera drivers) and
  reliable (bag players) publishers; a few frames of depth absorb a colour frame arriving a
  little later.
- Every output (answers, follow updates, 3D targets): reliable, the last 10 kept for a slow
  reader; ``~/result`` and ``~/status`` (``TEXT_OUTPUT_QOS``) the last ``TEXT_OUTPUT_DEPTH``: a
  burst of refused or preempted queries makes a result (and a status) per query within
  milliseconds, faster than a reader acknowledges them, and a keep-last writer overwrites a
  sample not yet acknowledged (a depth of 10 lost most of a burst of 1000). Each is a small
  text (a few kB); a reader that wants every result of a burst subscribes with a history at
  least that deep too.
- The query topic (``QUERY_QOS``): reliable, keep-all. The callback only hands the message to
  the intake thread (pipeline/inbox.py), so the reader is emptied as fast as the executor spins;
  a keep-last reader of 256 still lost the end of a burst of 1000 while the executor caught up
  (257 of 300, 348 of 1000 got a result). Keep-all never overwrites a received sample: when its
  history is full (the middleware's resource limits), new samples wait at the writer (reliable
  delivery) instead of being dropped.
- The services of the action ``~/segment`` (goal, result, cancel): reliable, ``QUERY_DEPTH``
  deep. With a history of 10 the reader kept only the last 10 of a burst and dropped the rest
  without a word (measured: 11 of 100 goals reached the node). A goal's result response is kept
  only until the client acknowledges it (volatile durability). On loopback a client with
  rclpy's default QoS then gets every goal response of a burst of 100.
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
TEXT_OUTPUT_DEPTH = 1000  # ~/result and ~/status: a burst's results in flight (see above)
TEXT_OUTPUT_QOS = QoSProfile(reliability=ReliabilityPolicy.RELIABLE,
                             history=HistoryPolicy.KEEP_LAST, depth=TEXT_OUTPUT_DEPTH,
                             durability=DurabilityPolicy.VOLATILE)
SCENE_DEPTH = 32  # ~/collision_objects: an answer's REMOVEs and ADDs, for a late planning scene
LATCHED_OUTPUT_QOS = QoSProfile(reliability=ReliabilityPolicy.RELIABLE,
                                history=HistoryPolicy.KEEP_LAST, depth=SCENE_DEPTH,
                                durability=DurabilityPolicy.TRANSIENT_LOCAL)
QUERY_QOS = QoSProfile(reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_ALL,
                       depth=1, durability=DurabilityPolicy.VOLATILE)
QUERY_DEPTH = 256  # a burst of goals waits here while the executor takes them one by one
ACTION_SERVICE_QOS = QoSProfile(  # ~/segment's goal, result and cancel services (rclpy's: 10)
    reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST, depth=QUERY_DEPTH,
    durability=DurabilityPolicy.VOLATILE)
