"""console/health.py: the Health region bounded in count, bytes and rate, whatever is published
on /diagnostics under the node's name."""

from __future__ import annotations

import json
from types import SimpleNamespace as Obj

from sam3_agent_ros.console import health
from sam3_agent_ros.console.health import HealthBook, frames_topic

NODE = "/a/sam3_agent"


def status(name: str, level: bytes = b"\x00", message: str = "fine", values=()):
    return Obj(name=name, level=level, message=message, values=list(values))


def array(*statuses):
    return Obj(status=list(statuses))


def test_the_latest_status_of_each_name_is_kept_across_messages_and_others_ignored():
    book = HealthBook(NODE)
    book.update(array(status(f"{NODE}: frames", b"\x01", "no frame"),
                      status("/other: frames", b"\x00", "fine")), now=0.0)
    book.update(array(status(f"{NODE}: queue", b"\x00", "idle")), now=0.5)
    book.update(array(status(f"{NODE}: frames", b"\x00", "10.0 Hz")), now=1.0)
    assert book.view(1.0) == [{"name": "frames", "level": "OK", "message": "10.0 Hz"},
                              {"name": "queue", "level": "OK", "message": "idle"}]
    stale = book.view(8.0)
    assert [s["level"] for s in stale] == ["STALE", "STALE"]
    assert "no diagnostics for 7 s (last: OK 10.0 Hz)" in stale[0]["message"]


def test_a_flood_of_forged_statuses_is_bounded_in_count_bytes_and_rate():
    """Issue 34: 5000 forged statuses at 2 Hz were sent whole to every page (20 MB messages,
    39.5 MB/s a page). Now: at most MAX_STATUSES names, each cut, a line counting the rest, and
    the page sent the book at most once a second."""
    book = HealthBook(NODE)
    book.update(array(status(f"{NODE}: frames", b"\x00", "10 Hz")), now=0.0)
    flood = array(*(status(f"{NODE}: forged {i} " + "n" * 200, b"\x02", "m" * 4000)
                    for i in range(5000)))
    sent = []
    for tick in range(20):  # 10 s at 2 Hz
        now = 0.5 * tick
        book.update(flood, now)
        if book.due(now):
            sent.append(json.dumps(book.view(now)))
    assert len(sent) <= 11  # at most once a second
    shown = json.loads(sent[-1])
    assert len(shown) == health.MAX_STATUSES + 1
    assert shown[0]["name"] == "frames"  # the names seen first stay
    assert shown[-1]["level"] == "WARN" and "4953 more statuses" in shown[-1]["message"]
    assert max(len(s) for s in sent) < 25_000  # was 20 MB
    assert len(book.left_out) <= health.MAX_STATUSES


def test_the_ros_side_sends_a_page_a_bounded_health_under_a_flood():
    """The same flood through the console's /diagnostics callback (no ROS graph needed): what
    the hub holds for the pages stays small."""
    from sam3_agent_ros.console.hub import Hub
    from sam3_agent_ros.console.ros_link import RosLink

    hub = Hub()
    link = RosLink(hub, NODE)
    flood = array(*(status(f"{NODE}: forged {i}", b"\x02", "m" * 3000) for i in range(5000)))
    for _ in range(4):
        link._on_diagnostics(flood)
    assert len(json.dumps(hub.get("health"))) < 25_000  # was 15 MB


def test_names_not_heard_of_are_forgotten_so_the_book_recovers_after_a_flood():
    book = HealthBook(NODE)
    book.update(array(*(status(f"{NODE}: forged {i}") for i in range(100))), now=0.0)
    book.update(array(status(f"{NODE}: frames")), now=health.FORGET_S + 1)  # cap still full
    assert all(s["name"] != "frames" for s in book.view(health.FORGET_S + 1))
    book.forget_old(health.FORGET_S + 1.5)
    book.update(array(status(f"{NODE}: frames")), now=health.FORGET_S + 2)
    assert [s["name"] for s in book.view(health.FORGET_S + 2)] == ["frames"]


def test_the_frames_status_names_the_camera_topic():
    msg = array(status(f"{NODE}: frames", values=[Obj(key="topic",
                                                      value="/camera/color/image_raw")]))
    assert frames_topic(msg, NODE) == "/camera/color/image_raw"
    assert frames_topic(array(status(f"{NODE}: queue")), NODE) == ""
