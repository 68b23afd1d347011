"""Talking to a running node over the ROS graph from a command-line verb's own short-lived
process (``sam3-agent lifecycle | param | ask --ros``, and the bag tools' and the action
client's rclpy start-up).

- ``verb_node``: the verbs' one rclpy start-up (loopback, own context and node, stop signals, a
  spinning thread, clean shutdown);
- ``client``: a running node's lifecycle and parameter services and its query topic
  (``GraphClient``), fresh clients, lost first replies resent;
- ``param_text``: command-line text -> a parameter value of the declared type, and how values
  and descriptors are printed;
- ``commands``: the verbs ``lifecycle``, ``param`` and ``ask --ros --topic | --stop-follow``.
"""
