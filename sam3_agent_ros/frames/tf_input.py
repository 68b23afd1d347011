"""What the TF buffer accepts from peers, and what it says about what it refused (ROS-free):
the refusal kinds, tf2's quaternion tolerance, the bounds, and ``TfInputStats`` (read by the
listener's log and the ``target frame`` diagnostics status)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TfInputStats:
    """What the buffer holds and what it turned away, for diagnostics and the log.

    ``refused`` counts the samples refused by kind (``REFUSALS``); ``dropped`` the old samples
    the bounds pushed out (per link ``max_samples_per_link``, in all ``max_bytes``);
    ``last_refusal`` says the newest refusal in words (frames named, escaped), ``""`` if none,
    at ``last_refusal_at`` (the buffer's monotonic clock, seconds); ``last_by_kind`` the newest
    of each kind."""

    frames: int
    samples: int
    bytes: int
    refused: dict[str, int]
    dropped: int
    last_refusal: str
    last_refusal_at: float | None
    last_by_kind: dict[str, str]

    @property
    def refused_total(self) -> int:
        return sum(self.refused.values())


# Why a sample is refused (TfInputStats.refused keys).
REFUSED_NAMES = "names"  # no frame name, or a frame linked to itself
REFUSED_MALFORMED = "malformed"  # non-finite numbers, a quaternion that is no rotation
REFUSED_DENORMALIZED = "denormalized"  # |q|^2 off 1 by more than tf2 accepts
REFUSED_FUTURE = "future"  # stamped far ahead of the node's clock
REFUSED_FRAME_CAP = "frame_cap"  # a new frame beyond max_frames
REFUSALS = (REFUSED_NAMES, REFUSED_MALFORMED, REFUSED_DENORMALIZED, REFUSED_FUTURE,
            REFUSED_FRAME_CAP)
# tf2's BufferCore refuses a quaternion whose squared length is off 1 by this much
# (TF_DENORMALIZED_QUATERNION); a peer's TF is read the same way here.
QUATERNION_NORMALIZATION_TOLERANCE = 10e-3
MAX_FUTURE_S = 1.0  # a sample stamped later than this after the node's clock is refused
MAX_SAMPLES_PER_LINK = 10_000  # 10 s at 1 kHz
MAX_BYTES = 64 * 1024 * 1024  # every link's samples together
