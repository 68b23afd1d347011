"""What the ``target frame`` health status reads (pure; issue 27;
``health_status.target_frame_status`` says it): whether the newest answer's (or follow
update's) transform into ``target_frame`` was found. Shown only with ``target_frame`` set.

OK: the frames and the last lookup. WARN: the transform was unavailable for the newest answer or
follow update, with the lookup's own words (the frames, the newest stamp seen, the frames the
buffer knows), so an operator sees why no pose reaches the planner.
"""

from __future__ import annotations

from dataclasses import dataclass

STATUS_NAME = "target frame"
FRAME_CHARS = 120  # a frame name in the status message


@dataclass(frozen=True)
class TargetFrameSeen:
    """The newest lookup into ``target_frame``. ``checked`` False: none yet."""

    target_frame: str
    checked: bool = False
    source_frame: str = ""
    reason: str = ""  # why the transform was unavailable; "": it was found
    what: str = "answer"  # "answer" or "follow update"
    age_s: float = 0.0  # since that lookup
