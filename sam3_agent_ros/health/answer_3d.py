"""What the ``3D`` health status reads (pure; CONTRACTS §11; ``health_status.answer_3d_status``
says it): whether the newest answer of a query that wanted 3D (depth on, masks to measure) got
it, with ``target_frame`` set in that frame too. Shown while depth is on.

OK: no 3D answer yet, or the newest had a position (and a target) for every mask. WARN, with the
reason, while the newest lacked 3D for some mask: a slow query's depth frame out of reach, no
camera_info, the transform missing... Missing 3D is never silent: the log line of the query says
``succeeded, 1 mask(s)`` whatever its 3D, so this is where an operator sees it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

STATUS_NAME = "3D"


@dataclass(frozen=True)
class Answer3dSeen:
    """The newest answer that wanted 3D. ``checked`` False: none yet."""

    checked: bool = False
    query_id: str = ""
    masks: int = 0
    reason: str | None = None  # why some mask has no 3D; None: every mask has it
    age_s: float = 0.0  # since that answer


class Answer3dRecord:
    """The recorder's part (thread-safe): ``started`` with depth, ``measured`` per answer."""

    def __init__(self, clock: Callable[[], float]):
        self._clock = clock
        self._lock = threading.Lock()
        self._on = False
        self._newest: tuple[str, int, str | None, float] | None = None

    def started(self, on: bool = True) -> None:
        with self._lock:
            self._on, self._newest = on, None

    def measured(self, answer: Any) -> None:
        """A measured ``pipeline.measurement.Answer``: counts only when the 3D step ran on
        masks (a query that wanted 3D)."""
        measurements = getattr(answer, "measurements", None)
        if not measurements:
            return
        reason = answer.missing_3d
        with self._lock:
            self._newest = (str(answer.result.query_id), len(measurements), reason,
                            self._clock())

    def seen(self) -> Answer3dSeen | None:
        """None while depth is off (no status)."""
        now = self._clock()
        with self._lock:
            if not self._on:
                return None
            newest = self._newest
        if newest is None:
            return Answer3dSeen()
        query_id, masks, reason, at = newest
        return Answer3dSeen(True, query_id, masks, reason, now - at)
