"""Text that came from outside (query text and ids, goal fields) shown in bounded, inert form.

``clip`` bounds what a result or a log repeats of a long text; ``for_log`` also escapes control
characters (newlines, carriage returns, ANSI escapes), so a query id like ``"x\\n[ERROR] ..."``
stays on its own log line and cannot forge another one. ``echoable`` escapes what no UTF-8 output
can carry: a lone surrogate (JSON ``"\\ud800"`` decodes to one), which rclpy's logger and every
``std_msgs/String`` refuse, so a query id holding one used to get no result at all.
"""

from __future__ import annotations

import re

LOG_CHARS = 200  # the most of one outside text that a log line carries

# C0 and C1 control characters, the Unicode line/paragraph separators, lone surrogates.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
# In a Python str every surrogate code point is a lone one (a valid pair decodes to one character).
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, saying how long it was."""
    if len(text) <= limit:
        return text
    note = f"... ({len(text)} characters)"
    return text[: max(0, limit - len(note))] + note


def for_log(text: object, limit: int = LOG_CHARS) -> str:
    """``text`` clipped to ``limit`` characters with every control character and lone surrogate
    escaped (``\\n``, ``\\x1b``, ``\\ud800``...): one log line whatever it holds."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"),
                        clip(str(text), limit))


def echoable(text: str) -> str:
    """``text`` with each lone surrogate written as its escape (``\\ud800``): valid UTF-8, so it
    can be logged, published and echoed; any other text is returned unchanged."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
