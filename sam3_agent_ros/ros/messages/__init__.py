"""Pure builders of every message the node sends: no publisher, no node, no 3D step.

- ``geometry``: a typed position / box (``geometry.measurement``) -> Point / Pose / Vector3, once;
- ``images``: an answer's or a follow update's images (mask, labels, overlay, JPEG overlay);
- ``markers``: ``~/target(s)`` and the RViz ``~/markers`` of measured masks;
- ``answer``: a query's messages (``AnswerMessages``) and a follow update's (``FollowMessages``);
- ``action``: the ``Segment`` action's result and its ``MaskInfo``s (reusing the answer's images);
- ``concepts``: the standing concepts' detections, images and markers.
Each update's messages are handed over as ``{field: message}`` (``outputs()``); the publishers
that send them are the outputs room's (``ros/outputs.NodeOutputs``), routed by the table
(``ros/output_topics.py``).
"""
