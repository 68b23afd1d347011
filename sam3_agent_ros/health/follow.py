"""What the node's health knows of follow mode: the followed session and its newest status.

ROS-free. ``FollowRecord`` is fed every ``~/follow/status`` the node publishes, and the record
``follow_started(query_id)`` when a follow session begins (the follow code hands both to
``HealthRecorder.follow_update``), so ``/diagnostics`` knows a session exists before it
published anything: "following, no update for N s" is a WARN, never "not following"
(``health.follow_status`` gives the words).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Health-only state: a follow session began and published nothing yet (never sent on
# ~/follow/status).
FOLLOW_STARTED = "started"
FINAL_STATES = ("lost", "stopped")


def follow_started(query_id: str) -> dict[str, Any]:
    """The record saying that following ``query_id`` began (for ``follow_update``)."""
    return {"query_id": query_id, "state": FOLLOW_STARTED, "objects": [], "reason": None}


@dataclass(frozen=True)
class FollowSeen:
    # the followed session's newest ~/follow/status state (FOLLOW_STARTED: none yet), else the
    # newest status's; None: nothing followed yet
    state: str | None
    query_id: str = ""
    objects: int = 0
    age_s: float = 0.0  # since that status (FOLLOW_STARTED: since the session began)
    reason: str | None = None


class FollowRecord:
    """The followed session (until its final status) and the newest status, with their times
    (``clock``: monotonic seconds). Thread-safe; O(1)."""

    def __init__(self, clock: Callable[[], float]):
        self._clock = clock
        self._lock = threading.Lock()
        self._newest: tuple[dict[str, Any], float] | None = None
        self._session: tuple[str, float] | None = None  # (query id, since)

    def update(self, status: dict[str, Any]) -> None:
        now = self._clock()
        query_id, state = str(status.get("query_id", "")), status.get("state")
        with self._lock:
            if state == FOLLOW_STARTED:
                self._session = (query_id, now)
                return
            if (self._session is not None and self._session[0] == query_id
                    and state in FINAL_STATES):
                self._session = None  # that session's final status
            self._newest = (status, now)  # a previous follow's final status may come later

    def seen(self) -> FollowSeen:
        now = self._clock()
        with self._lock:
            session, newest = self._session, self._newest
        if session is not None and (newest is None or newest[0].get("query_id") != session[0]
                                    or newest[1] < session[1]):
            return FollowSeen(state=FOLLOW_STARTED, query_id=session[0], age_s=now - session[1])
        if newest is None:
            return FollowSeen(None)
        status, at = newest
        objects = status.get("objects")
        return FollowSeen(state=str(status.get("state")), query_id=str(status.get("query_id", "")),
                          objects=len(objects) if isinstance(objects, list) else 0,
                          age_s=now - at, reason=status.get("reason"))
