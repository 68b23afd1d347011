"""The ROS-free road of a query's answer, between the node (``ros/``) and the agent.

- ``measurement``: the 3D step (``measure_answer``, ``measure_visible``, ``locate``): every
  mask's typed ``geometry.measurement.Measurement``, computed BEFORE any message is built and
  used the same way by the node and ``sam3-agent run --depth``; ``Answer`` is the one typed
  answer that the message builders (``ros/messages/``) turn into messages.
"""
