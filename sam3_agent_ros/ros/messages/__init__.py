"""Pure builders of every message the node sends: no publisher, no node, no 3D step.

- ``geometry``: a typed position / box (``geometry.measurement``) -> Point / Pose / Vector3, once;
- ``images``: an answer's or a follow update's images (mask, labels, overlay, JPEG overlay);
- ``markers``: ``~/target(s)`` and the RViz ``~/markers`` of measured masks;
- ``answer``: a query's messages (``AnswerMessages``) and a follow update's (``FollowMessages``);
- ``action``: the ``Segment`` action's result and its ``MaskInfo``s (reusing the answer's images);
- ``concepts``: the standing concepts' detections, images and markers.
The publishers that send them live in ``ros/outputs.py`` (answer, follow), ``ros/depth.py``
(3D topics) and ``ros/concepts_control.py``.
"""
