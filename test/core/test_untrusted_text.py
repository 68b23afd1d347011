"""untrusted_text: outside text clipped and escaped before a log line or a result repeats it."""

from __future__ import annotations

from sam3_agent_ros.core.untrusted_text import LOG_CHARS, clip, echoable, for_log


def test_clip_keeps_short_text_and_says_how_long_long_text_was():
    assert clip("short", 10) == "short"
    clipped = clip("x" * 1_000_000, 200)
    assert len(clipped) <= 200 and clipped.endswith("... (1000000 characters)")


def test_a_forged_log_line_stays_on_one_line():
    forged = "q-1\n[ERROR] [1700000000.0] [sam3_agent]: robot arm disabled\r\x1b[2J\u2028x"
    shown = for_log(forged)
    assert "\n" not in shown and "\r" not in shown and "\x1b" not in shown
    assert "\u2028" not in shown
    assert shown.startswith("q-1\\n[ERROR]") and "\\x1b[2J" in shown


def test_for_log_bounds_any_text():
    assert len(for_log("y" * 1_000_000)) <= LOG_CHARS
    assert len(for_log("\n" * 1_000_000)) <= 4 * LOG_CHARS  # each escape is at most 4 wide
    assert for_log(None) == "None" and for_log("plain id") == "plain id"


def test_a_lone_surrogate_is_escaped_for_logs_and_echoes():
    # json.loads('"\\ud800"') gives a lone surrogate: rclpy's logger refuses it (TypeError) and
    # no std_msgs/String can carry it (UTF-8): the query then had no result at all (issue 25).
    assert for_log("id-\ud800-\udfff") == "id-\\ud800-\\udfff"
    assert echoable("id-\ud800") == "id-\\ud800"
    assert echoable("id-\ud800").encode("utf-8")
    plain = "plain \u00e9 \U0001f600 and\nnewline"
    assert echoable(plain) == plain
