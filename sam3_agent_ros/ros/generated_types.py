"""The package's generated interfaces (``msg/``, ``action/``: CMakeLists.txt,
scripts/build_interfaces.sh): imported where needed; their absence said once per process and
output, in one wording (the outputs that need them are off, the rest works)."""

from __future__ import annotations

import threading
from typing import Any

_said: set[str] = set()  # the outputs said off: fixed names, never outside text
_lock = threading.Lock()


def segment_types() -> tuple[Any, Any] | None:
    """``(Segment, MaskInfo)``, or None when the generated interfaces cannot be imported."""
    try:
        from sam3_agent_ros.action import Segment
        from sam3_agent_ros.msg import MaskInfo
    except Exception:  # noqa: BLE001 (ImportError, or a typesupport library that fails to load)
        return None
    return Segment, MaskInfo


def concept_types() -> tuple[Any, Any] | None:
    """``(ConceptDetections, ConceptDetection)``, or None when they cannot be imported."""
    try:
        from sam3_agent_ros.msg import ConceptDetection, ConceptDetections
    except Exception:  # noqa: BLE001
        return None
    return ConceptDetections, ConceptDetection


def say_missing(node: Any, output: str, module: str, still_works: str) -> bool:
    """Warn once per ``output`` (a fixed name) that it is off for want of the generated
    interfaces ``module``; True when this call said it."""
    with _lock:
        if output in _said:
            return False
        _said.add(output)
    node.get_logger().warning(
        f"{output} is off: the generated interfaces ({module}) cannot be imported; run "
        f"scripts/build_interfaces.sh .venv or build with colcon. {still_works}")
    return True
