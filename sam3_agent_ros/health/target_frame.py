"""What the ``target frame`` health status reads (pure; issue 27;
``health_status.target_frame_status`` says it): whether the newest answer's (or follow
update's) transform into ``target_frame`` was found. Shown only with ``target_frame`` set.

OK: the frames and the last lookup. WARN: the transform was unavailable for the newest answer or
follow update, with the lookup's own words (the frames, the newest stamp seen, the frames the
buffer knows), so an operator sees why no pose reaches the planner; WARN too while the TF
listener refused samples in the last ``REFUSAL_WARN_S`` (malformed, denormalised, far-future,
frames over the cap: ``frames.buffer.TfInputStats``), naming the newest. The counts are values of
the status either way.
"""

from __future__ import annotations

from dataclasses import dataclass

STATUS_NAME = "target frame"
FRAME_CHARS = 120  # a frame name in the status message
REFUSAL_WARN_S = 60.0  # a refused TF sample keeps the status WARN this long


@dataclass(frozen=True)
class TargetFrameSeen:
    """The newest lookup into ``target_frame``. ``checked`` False: none yet."""

    target_frame: str
    checked: bool = False
    source_frame: str = ""
    reason: str = ""  # why the transform was unavailable; "": it was found
    what: str = "answer"  # "answer" or "follow update"
    age_s: float = 0.0  # since that lookup
    input: TfInputSeen | None = None  # our own listener's counts (None: tf2_ros counts itself)


@dataclass(frozen=True)
class TfInputSeen:
    """What the TF listener holds and refused (``frames.buffer.TfInputStats``, read now)."""

    frames: int = 0
    samples: int = 0
    bytes: int = 0
    refused: int = 0
    dropped: int = 0
    last_refusal: str = ""
    refusal_age_s: float | None = None  # since the newest refusal (None: none)
