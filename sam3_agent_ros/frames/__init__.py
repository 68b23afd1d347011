"""Coordinate frames, ROS-free: a rigid transform and its math (transform.py) and a TF buffer
that holds the transform tree over time and looks it up at a stamp (buffer.py)."""

from sam3_agent_ros.frames.buffer import TfBuffer, TransformUnavailable
from sam3_agent_ros.frames.transform import Transform, interpolate

__all__ = ["TfBuffer", "Transform", "TransformUnavailable", "interpolate"]
