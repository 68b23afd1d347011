"""sam3_agent_ros/log_limit.py: per-kind token buckets with a count of what was suppressed,
on a fake clock."""

from __future__ import annotations

import threading

from sam3_agent_ros.log_limit import Budget, LogLimiter, limiter_of, suppressed_note


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make() -> tuple[LogLimiter, Clock, list[str]]:
    clock = Clock()
    return LogLimiter(clock), clock, []


def test_a_flood_is_cut_to_the_burst_then_the_rate_and_the_count_is_said():
    limiter, clock, lines = make()
    budget = Budget(burst=3, per_s=2.0)
    written = [limiter.emit("refused", lines.append, f"line {k}", budget) for k in range(1000)]
    assert written.count(True) == 3 and lines == ["line 0", "line 1", "line 2"]
    assert limiter.suppressed("refused") == 997
    clock.now += 0.5  # one token back
    assert limiter.emit("refused", lines.append, "later", budget)
    assert lines[-1] == "later (997 similar lines suppressed in the last 0.5 s)"
    assert limiter.suppressed("refused") == 0 and limiter.total_suppressed == 997


def test_over_one_minute_of_flood_the_lines_follow_the_rate():
    limiter, clock, lines = make()
    for _ in range(60 * 1000):  # 1000 attempts a second for 60 s
        clock.now += 0.001
        limiter.emit("changed", lines.append, "x", Budget(burst=5, per_s=1.0))
    assert 60 <= len(lines) <= 5 + 61


def test_kinds_have_their_own_budgets():
    limiter, _, lines = make()
    for _ in range(10):
        limiter.emit("a", lines.append, "a", Budget(burst=1, per_s=0.1))
        limiter.emit("b", lines.append, "b", Budget(burst=2, per_s=0.1))
    assert lines == ["a", "b", "b"]


def test_a_line_is_built_only_when_it_is_written():
    limiter, _, lines = make()
    built: list[int] = []

    def line() -> str:
        built.append(1)
        return "built"

    for _ in range(10):
        limiter.emit("k", lines.append, line, Budget(burst=2, per_s=0.0001))
    assert len(built) == 2 and lines == ["built", "built"]


def test_flush_says_the_count_of_a_kind_that_went_quiet_once():
    limiter, clock, lines = make()
    warnings: list[str] = []
    for _ in range(12):
        limiter.emit("parameter change refused", warnings.append, "refused",
                     Budget(burst=2, per_s=1.0))
    assert limiter.flush() == 0  # no budget left yet
    clock.now += 2.0
    assert limiter.flush() == 1
    assert warnings[-1] == ("parameter change refused: 10 similar lines suppressed in the last "
                            "2.0 s")
    assert limiter.flush() == 0 and lines == []  # said once, with the kind's own method


def test_the_kinds_are_bounded():
    limiter = LogLimiter(Clock(), max_kinds=2)
    assert limiter.allow("a") == "" and limiter.allow("b") == ""
    assert limiter.allow("c") is None and limiter.total_suppressed == 1


def test_one_limiter_per_owner_shared_by_threads():
    class Owner:
        pass

    owner = Owner()
    assert limiter_of(owner) is limiter_of(owner) and limiter_of(Owner()) is not limiter_of(owner)
    limiter = LogLimiter()
    lines: list[str] = []
    lock = threading.Lock()

    def flood() -> None:
        for _ in range(2000):
            limiter.emit("k", lambda line: (lock.acquire(), lines.append(line), lock.release()),
                         "x", Budget(burst=10, per_s=0.001))

    threads = [threading.Thread(target=flood) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(lines) == 10 and limiter.suppressed("k") == 7990


def test_the_note():
    assert suppressed_note(0, 1.0) == ""
    assert suppressed_note(1, 0.25) == " (1 similar line suppressed in the last 0.2 s)"


class CallSiteLogger:
    """Like rclpy's logger: one severity per call site (file, function, line), else ValueError."""

    def __init__(self) -> None:
        import sys

        self._sys = sys
        self.sites: dict[tuple, str] = {}
        self.lines: list[tuple[str, str]] = []

    def _log(self, severity: str, line: str) -> None:
        caller = self._sys._getframe(2).f_code, self._sys._getframe(2).f_lineno
        if self.sites.setdefault(caller, severity) != severity:
            raise ValueError("Logger severity cannot be changed between calls.")
        self.lines.append((severity, line))

    def info(self, line: str) -> None:
        self._log("info", line)

    def warning(self, line: str) -> None:
        self._log("warning", line)

    def error(self, line: str) -> None:
        self._log("error", line)


def test_each_severity_is_written_from_its_own_call_site_as_rclpy_requires():
    limiter, clock, _ = make()
    logger = CallSiteLogger()
    for kind, emit in (("a", logger.info), ("b", logger.warning), ("c", logger.error)) * 3:
        limiter.emit(kind, emit, kind, Budget(burst=2, per_s=1.0))
    clock.now += 5
    assert limiter.flush() == 3
    assert [severity for severity, _ in logger.lines] == (
        ["info", "warning", "error"] * 2 + ["info", "warning", "error"])


def test_a_logger_that_raises_never_reaches_the_caller():
    limiter, _, _ = make()

    def broken(line: str) -> None:
        raise RuntimeError("closed")

    assert limiter.emit("k", broken, "x") is True
