"""Log lines a peer can cause, rate-limited per kind, with a count of what was suppressed.

Any peer on the DDS domain can make the node log: a parameter set it refuses, an accepted
change, a ``stop_follow``, a flood of queries. Unlimited, each such line is a lever on the
node's disk and CPU (a refused read-only set in a loop: 423 WARN lines/s, about 8 GB a day).
Each log site names its kind (a fixed string of the code, never a peer's text) and a
``Budget``: ``burst`` lines at once, then ``per_s`` lines per second (a token bucket). A line
over the budget is counted, not written; the next line of that kind that passes says how many
were suppressed and over how long, and ``flush`` (the node's 1 Hz timer) says it for a kind
that went quiet, so a count is never lost for good.

Pure (a clock can be passed) and thread-safe: the executor, the intake and worker threads log
through one limiter per node (``limiter_of``).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Emit = Callable[[str], object]  # a logger method: logger.warning, logger.info, ...


@dataclass(frozen=True)
class Budget:
    """``burst`` lines at once, then ``per_s`` a second."""

    burst: int = 5
    per_s: float = 1.0


PEER_LINES = Budget(burst=5, per_s=1.0)  # refusals, accepted changes, stop_follow, ...
QUERY_LINES = Budget(burst=50, per_s=10.0)  # one line per query: many more in normal use
MAX_KINDS = 256  # kinds are the code's fixed strings; a bound all the same


@dataclass
class _Kind:
    budget: Budget
    tokens: float
    updated: float
    emit: Emit | None = None  # the last logger method of this kind (flush writes with it)
    suppressed: int = 0
    first_suppressed: float = 0.0


def suppressed_text(count: int, seconds: float) -> str:
    """``N similar line(s) suppressed in the last T s``."""
    lines = "line" if count == 1 else "lines"
    return f"{count} similar {lines} suppressed in the last {max(seconds, 0.0):.1f} s"


def suppressed_note(count: int, seconds: float) -> str:
    """`` (N similar line(s) suppressed in the last T s)``, or ``""`` for none."""
    return f" ({suppressed_text(count, seconds)})" if count > 0 else ""


class LogLimiter:
    """Per-kind token buckets (see the module's docstring)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, max_kinds: int = MAX_KINDS):
        self._clock = clock
        self._max_kinds = max_kinds
        self._lock = threading.Lock()
        self._kinds: dict[str, _Kind] = {}
        self.total_suppressed = 0  # since start (diagnostics, tests)

    def allow(self, kind: str, budget: Budget = PEER_LINES) -> str | None:
        """None when a line of ``kind`` is over its budget now (counted); else the note to
        append to it (``suppressed_note`` of what was suppressed since the last line)."""
        now = self._clock()
        with self._lock:
            state = self._state(kind, budget, now)
            if state is None:
                self.total_suppressed += 1
                return None
            self._refill(state, now)
            if state.tokens < 1.0:
                if state.suppressed == 0:
                    state.first_suppressed = now
                state.suppressed += 1
                self.total_suppressed += 1
                return None
            state.tokens -= 1.0
            note = suppressed_note(state.suppressed, now - state.first_suppressed)
            state.suppressed = 0
            return note

    def emit(self, kind: str, emit: Emit, line: str | Callable[[], str],
             budget: Budget = PEER_LINES) -> bool:
        """Write ``line`` (built only when it passes, if a callable) with ``emit`` unless over
        the budget of ``kind``; whether it was written."""
        with self._lock:  # remembered first, so that flush can say a count for this kind
            state = self._state(kind, budget, self._clock())
            if state is not None:
                state.emit = emit
        note = self.allow(kind, budget)
        if note is None:
            return False
        _write(emit, (line() if callable(line) else line) + note)
        return True

    def flush(self) -> int:
        """For each kind with suppressed lines and budget left now: one line with the count,
        written with that kind's logger method. How many lines were written."""
        now = self._clock()
        due: list[tuple[Emit, str]] = []
        with self._lock:
            for kind, state in self._kinds.items():
                if state.suppressed == 0 or state.emit is None:
                    continue
                self._refill(state, now)
                if state.tokens < 1.0:
                    continue
                state.tokens -= 1.0
                text = suppressed_text(state.suppressed, now - state.first_suppressed)
                due.append((state.emit, f"{kind}: {text}"))
                state.suppressed = 0
        for emit, line in due:
            _write(emit, line)
        return len(due)

    def suppressed(self, kind: str) -> int:
        """Lines of ``kind`` suppressed and not yet reported."""
        with self._lock:
            state = self._kinds.get(kind)
            return state.suppressed if state is not None else 0

    def _state(self, kind: str, budget: Budget, now: float) -> _Kind | None:
        state = self._kinds.get(kind)
        if state is None:
            if len(self._kinds) >= self._max_kinds:
                return None  # over the bound of kinds: nothing more is written
            state = self._kinds[kind] = _Kind(budget, float(budget.burst), now)
        return state

    @staticmethod
    def _refill(state: _Kind, now: float) -> None:
        budget = state.budget
        state.tokens = min(float(budget.burst),
                           state.tokens + (now - state.updated) * budget.per_s)
        state.updated = now


# rclpy's logger remembers the severity of each call site (the caller's file, function and
# line) and raises ValueError when one site logs at another severity later. Every line of the
# limiter is written through these, one function per severity (the logger method's name).
def _debug(emit: Emit, line: str) -> None:
    emit(line)


def _info(emit: Emit, line: str) -> None:
    emit(line)


def _warning(emit: Emit, line: str) -> None:
    emit(line)


def _error(emit: Emit, line: str) -> None:
    emit(line)


def _fatal(emit: Emit, line: str) -> None:
    emit(line)


def _other(emit: Emit, line: str) -> None:
    emit(line)


_WRITERS = {"debug": _debug, "info": _info, "warning": _warning, "warn": _warning,
            "error": _error, "critical": _fatal, "fatal": _fatal}


def _write(emit: Emit, line: str) -> None:
    """``emit(line)`` from the call site of its severity (above), never raising: a log line
    must never end its caller (a timer's callback would stop the executor)."""
    try:
        _WRITERS.get(getattr(emit, "__name__", ""), _other)(emit, line)
    except Exception:  # noqa: BLE001 (see above)
        pass


_LIMITERS: weakref.WeakKeyDictionary[Any, LogLimiter] = weakref.WeakKeyDictionary()
_LIMITERS_LOCK = threading.Lock()


def limiter_of(owner: Any) -> LogLimiter:
    """The one limiter of ``owner`` (a node: every log site of it shares the budgets)."""
    with _LIMITERS_LOCK:
        limiter = _LIMITERS.get(owner)
        if limiter is None:
            limiter = _LIMITERS[owner] = LogLimiter()
        return limiter
