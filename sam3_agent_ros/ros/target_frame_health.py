"""The ``target frame`` health status (pure; issue 27): whether the newest answer's (or follow
update's) transform into ``target_frame`` was found. Shown only with ``target_frame`` set.

OK: the frames and the last lookup. WARN: the transform was unavailable for the newest answer or
follow update, with the lookup's own words (the frames, the newest stamp seen, the frames the
buffer knows), so an operator sees why no pose reaches the planner.
"""

from __future__ import annotations

from dataclasses import dataclass

from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.ros.health_status import ERROR_CHARS, Level, Status, ago

STATUS_NAME = "target frame"
FRAME_CHARS = 120


@dataclass(frozen=True)
class TargetFrameSeen:
    """The newest lookup into ``target_frame``. ``checked`` False: none yet."""

    target_frame: str
    checked: bool = False
    source_frame: str = ""
    reason: str = ""  # why the transform was unavailable; "": it was found
    what: str = "answer"  # "answer" or "follow update"
    age_s: float = 0.0  # since that lookup


def target_frame_status(seen: TargetFrameSeen) -> Status:
    """WARN while the newest answer's or follow update's transform was unavailable."""
    target = for_log(seen.target_frame, FRAME_CHARS)
    source = for_log(seen.source_frame, FRAME_CHARS)
    values = {"target_frame": seen.target_frame, "source_frame": seen.source_frame,
              "last_lookup": seen.what if seen.checked else "", "problem": seen.reason,
              "age_s": f"{seen.age_s:.1f}"}
    if not seen.checked:
        return Status(STATUS_NAME, Level.OK, f"into '{target}': no 3D answer yet", values)
    if seen.reason:
        return Status(STATUS_NAME, Level.WARN,
                      f"no pose in '{target}' for the newest {seen.what} "
                      f"({ago(seen.age_s)} ago): {for_log(seen.reason, ERROR_CHARS)}", values)
    return Status(STATUS_NAME, Level.OK, f"'{source}' -> '{target}' found for the newest "
                                         f"{seen.what} ({ago(seen.age_s)} ago)", values)
