"""The running-id registry: which query ids a running (or waiting) action goal holds.

A goal's query id is claimed when its goal starts and released with its one result; while it is
held, a second goal or a topic query with that id is refused alone (``in_use``: its ``failed``
result), since its result would end the goal that holds the id. Thread-safe: the executor
claims and looks up, the query worker releases. ROS-free: the value held per id is the action
server's (its goal handle and the future its result completes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from sam3_agent_ros.core.types import Query, QueryStatus, Result

Held = TypeVar("Held")


class RunningIds(Generic[Held]):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, Held] = {}  # query id -> what holds it, until its result

    def claim(self, query_id: str, holder: Held) -> bool:
        """Hold ``query_id`` for ``holder``; False (nothing changed) when it is held already:
        checked and held at once."""
        with self._lock:
            if query_id in self._held:
                return False
            self._held[query_id] = holder
            return True

    def holds(self, query_id: str) -> bool:
        with self._lock:
            return query_id in self._held

    def get(self, query_id: str) -> Held | None:
        with self._lock:
            return self._held.get(query_id)

    def release(self, query_id: str) -> Held | None:
        """Free ``query_id`` (its result came); what held it, or None if nothing did."""
        with self._lock:
            return self._held.pop(query_id, None)

    def ids_of(self, matches: Callable[[Held], bool]) -> list[str]:
        """The ids whose holder ``matches`` (e.g. one goal handle)."""
        with self._lock:
            return [query_id for query_id, held in self._held.items() if matches(held)]


def in_use(query: Query, backends: dict[str, str]) -> Result:
    """The ``failed`` result of a query whose id a running goal holds."""
    return Result(query.id, query.text, QueryStatus.FAILED,
                  error=f"query_id {query.id!r} is already in use by a running goal",
                  refines=query.refines, backends=backends)
