"""console/hub.py: every page gets the newest state and images, never a backlog."""

from __future__ import annotations

from sam3_agent_ros.console.hub import Feed, Hub


def test_a_new_page_gets_everything_then_only_what_changed_and_only_the_newest():
    hub = Hub()
    hub.set("status", {"phase": "queued"})
    hub.put_image("live", b"1")
    wakes = []
    feed = Feed(lambda: wakes.append(1))
    hub.attach(feed)
    assert hub.take(feed) == ({"status": {"phase": "queued"}}, {"live": b"1"})
    assert hub.take(feed) == ({}, {})
    for serial in range(100):  # a slow page: 100 frames and phases arrive meanwhile
        hub.put_image("live", str(serial).encode())
        hub.set("status", {"phase": serial})
    assert hub.take(feed) == ({"status": {"phase": 99}}, {"live": b"99"})
    assert len(wakes) == 201 and hub.pages == 1


def test_pages_are_independent_and_a_closed_one_is_forgotten():
    hub = Hub()
    first, second = Feed(lambda: None), Feed(lambda: None)
    hub.attach(first)
    hub.attach(second)
    hub.set("result", 1)
    assert hub.take(first)[0] == {"result": 1}
    hub.detach(second)
    hub.set("result", 2)
    assert hub.pages == 1 and second.keys == {"result"}  # untouched after it left
    assert hub.take(first)[0] == {"result": 2}


def test_a_dropped_image_is_sent_empty_to_open_pages_and_never_to_new_ones():
    hub = Hub()
    open_page = Feed(lambda: None)
    hub.attach(open_page)
    hub.put_image("answer", b"jpeg")
    hub.take(open_page)
    hub.drop_image("answer")
    assert hub.take(open_page) == ({}, {"answer": b""})  # the page forgets it
    later = Feed(lambda: None)
    hub.attach(later)
    assert hub.take(later) == ({}, {}) and not hub.has_image("answer")
