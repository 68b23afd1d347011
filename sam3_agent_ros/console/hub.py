"""The newest state and images of the console, fanned out to every open page (pure, thread-safe).

The ROS thread writes (``set``, ``put_image``); each page has a ``Feed`` that remembers which
keys and images changed since it last sent, so a slow tab gets the newest of each, never a
backlog. ``wake`` is how a feed tells its sender (the server's event loop) to look. An image
that is no longer current is dropped (``drop_image``): open pages are sent an empty one (the tag
byte alone) and forget theirs, new pages never see it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

IMAGE_SOURCES = ("live", "answer", "follow", "concepts")  # the byte that tags a binary message


class Feed:
    """One page's view of the hub: what changed since the last ``take``."""

    def __init__(self, wake: Callable[[], None]) -> None:
        self.wake = wake
        self.keys: set[str] = set()
        self.images: set[str] = set()


class Hub:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: dict[str, Any] = {}
        self._images: dict[str, bytes] = {}
        self._feeds: list[Feed] = []

    def set(self, key: str, value: Any) -> None:
        with self._lock:
            self._state[key] = value
            feeds = list(self._feeds)
            for feed in feeds:
                feed.keys.add(key)
        for feed in feeds:
            feed.wake()

    def get(self, key: str, default: Any = None) -> Any:
        with self._lock:
            return self._state.get(key, default)

    def put_image(self, source: str, jpeg: bytes) -> None:
        with self._lock:
            self._images[source] = jpeg
            feeds = list(self._feeds)
            for feed in feeds:
                feed.images.add(source)
        for feed in feeds:
            feed.wake()

    def drop_image(self, source: str) -> None:
        """``source``'s image is no longer current: pages forget it (an empty image)."""
        with self._lock:
            if not self._images.get(source):
                return
            self._images[source] = b""
            feeds = list(self._feeds)
            for feed in feeds:
                feed.images.add(source)
        for feed in feeds:
            feed.wake()

    def has_image(self, source: str) -> bool:
        with self._lock:
            return bool(self._images.get(source))

    def attach(self, feed: Feed) -> None:
        """A new page: everything known is new to it (dropped images are not)."""
        with self._lock:
            self._feeds.append(feed)
            feed.keys.update(self._state)
            feed.images.update(s for s, jpeg in self._images.items() if jpeg)
        feed.wake()

    def detach(self, feed: Feed) -> None:
        with self._lock:
            if feed in self._feeds:
                self._feeds.remove(feed)

    @property
    def pages(self) -> int:
        with self._lock:
            return len(self._feeds)

    def take(self, feed: Feed) -> tuple[dict[str, Any], dict[str, bytes]]:
        """The changed state and images of ``feed`` (their newest values; ``b""``: dropped),
        now marked seen."""
        with self._lock:
            state = {key: self._state[key] for key in feed.keys}
            images = {source: self._images[source] for source in feed.images}
            feed.keys.clear()
            feed.images.clear()
        return state, images
