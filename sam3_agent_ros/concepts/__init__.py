"""Standing concepts, ROS-free: a list of text prompts segmented together on the newest frame, with
instance ids stable across frames (docs/concepts.md).

- ``standing.py``: ``StandingConcepts``: the list, one pass per frame, the ids (a new list restarts
  them);
- ``instances.py``: ``InstanceIds``: follow mode's association carries each instance's id from
  pass to pass;
- ``gate.py``: ``SegmenterGate``: one segmenter shared by the agent and follow mode (first) and
  the concept passes (in between);
- ``types.py``: ``ConceptDetection``, ``ConceptFrame``; ``images.py``: the label image and the
  overlay.
"""

from sam3_agent_ros.concepts.gate import SegmenterGate
from sam3_agent_ros.concepts.standing import StandingConcepts
from sam3_agent_ros.concepts.types import ConceptDetection, ConceptFrame

__all__ = ["ConceptDetection", "ConceptFrame", "SegmenterGate", "StandingConcepts"]
