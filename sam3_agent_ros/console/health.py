"""The Health region's statuses (pure): the latest of each of the node's ``/diagnostics``
statuses, bounded in count, in bytes and in how often a page is sent them.

Anyone on the DDS domain can publish on ``/diagnostics``, under the node's name too: 5000 forged
statuses at 2 Hz once reached every open page as 20 MB messages (39.5 MB/s each). Here a status
is kept by name (the newest replaces the one before, across messages), names and messages are
cut, at most ``MAX_STATUSES`` names are kept (the first seen; one more line counts what was left
out), a name not heard of for ``FORGET_S`` is forgotten (a flood's names go once it stops), and
``due`` lets the page have the book at most once per ``MIN_INTERVAL_S``. What a page receives is
at most about ``MAX_STATUSES * (MAX_NAME_CHARS + MAX_MESSAGE_CHARS)`` bytes a second.
"""

from __future__ import annotations

from typing import Any

from sam3_agent_ros.console.views import level_word

MAX_STATUSES = 48  # the node itself has about a dozen
MAX_NAME_CHARS = 80
MAX_MESSAGE_CHARS = 300
FORGET_S = 30.0  # a name not heard of for this long is dropped
STALE_S = 5.0  # no status of the node for this long: every one shown STALE
MIN_INTERVAL_S = 1.0  # the node reports at about 1 Hz


class HealthBook:
    def __init__(self, node_name: str) -> None:
        self._prefix = node_name + ":"
        self._latest: dict[str, tuple[float, dict]] = {}  # name -> (heard at, status)
        self.left_out: set[str] = set()  # names over the cap (bounded: MAX_STATUSES of them)
        self.left_out_count = 0  # statuses over the cap in the newest message
        self.heard_at = -float("inf")
        self._changed = False
        self._sent_at = -float("inf")

    def update(self, msg: Any, now: float) -> None:
        """One ``DiagnosticArray``: its statuses named ``<node>: <area>`` kept, newest first."""
        over = 0
        for status in msg.status:
            name = status.name
            if not name.startswith(self._prefix):
                continue
            area = name[len(self._prefix):].strip()[:MAX_NAME_CHARS]
            if area not in self._latest and len(self._latest) >= MAX_STATUSES:
                over += 1
                if len(self.left_out) < MAX_STATUSES:
                    self.left_out.add(area)
                continue
            shown = {"name": area, "level": level_word(status.level),
                     "message": str(status.message)[:MAX_MESSAGE_CHARS]}
            previous = self._latest.get(area)
            if previous is None or previous[1] != shown:
                self._changed = True
            self._latest[area] = (now, shown)
            self.heard_at = now
        if over != self.left_out_count:
            self.left_out_count, self._changed = over, True

    def forget_old(self, now: float) -> None:
        for area in [a for a, (at, _) in self._latest.items() if now - at > FORGET_S]:
            del self._latest[area]
            self._changed = True
        if self.left_out and now - self.heard_at > FORGET_S:
            self.left_out.clear()

    def due(self, now: float) -> bool:
        """True when the page should be sent the book now (changed, and not sent within
        ``MIN_INTERVAL_S``); marks it sent."""
        if not self._changed or now - self._sent_at < MIN_INTERVAL_S:
            return False
        self._changed, self._sent_at = False, now
        return True

    def mark_changed(self) -> None:
        self._changed = True

    def view(self, now: float) -> list[dict]:
        """The statuses the page shows: STALE (with the last word) when the node has sent none
        for ``STALE_S``, then a line for what the cap left out."""
        shown = [status for _, status in self._latest.values()]
        age = now - self.heard_at
        if shown and age > STALE_S:
            shown = [dict(s, level="STALE", message=f"no diagnostics for {age:.0f} s (last: "
                                                    f"{s['level']} {s['message']})"[
                                                        :MAX_MESSAGE_CHARS + 40])
                     for s in shown]
        if self.left_out_count:
            shown.append({"name": "console", "level": "WARN",
                          "message": f"{self.left_out_count} more statuses under this node's "
                                     f"name not shown (the console shows at most "
                                     f"{MAX_STATUSES}): another publisher on /diagnostics?"})
        return shown


def frames_topic(msg: Any, node_name: str) -> str:
    """The image topic the node's ``frames`` status names (its ``topic`` value), or ""."""
    for status in msg.status:
        if status.name == f"{node_name}: frames":
            for pair in status.values:
                if pair.key == "topic" and str(pair.value).startswith("/"):
                    return str(pair.value)[:256]
    return ""
