"""What the node knows of its own health, ROS-free (``ros/diagnostics.py`` publishes it).

- ``recorder``: ``HealthRecorder``, what the node feeds as it runs (frames, LLM calls, the
  lifecycle, follow statuses, the camera model, target_frame lookups, measured answers), and its
  snapshot;
- ``status``: a snapshot -> one status per area, with levels and messages;
- ``answer_3d``, ``follow``, ``target_frame``: the records of those areas;
- ``observed_llm``: the LLM client wrapper recording each call; ``llm_failure``: the endpoint
  status of a failed call.
"""
