"""The ROS-free road of a query's answer, between the node (``ros/``) and the agent.

- ``three_d``: the one 3D step (``measure_3d``) of answers, follow updates and concept passes:
  every mask's typed ``geometry.measurement.Measurement`` in the camera frame and in
  ``target_frame``, computed BEFORE any message is built;
- ``measurement``: an answer's 3D (``measure_answer``) through that step, used the same way by
  the node and ``sam3-agent run --depth``; ``Answer`` is the one typed answer that the message
  builders (``ros/messages/``) turn into messages.
"""
