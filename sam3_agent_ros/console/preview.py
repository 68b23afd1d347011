"""The live frame's preview (pure): which topic (the node's own colour topic, from its graph), a
throttle, and a frame made small and JPEG-encoded.

The preview costs the console only while a page is open and only at ``rate_hz``: frames between
two previews are dropped before they are even deserialised (``Throttle.due``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import cv2
import numpy as np

PREVIEW_WIDTH = 640
PREVIEW_QUALITY = 70


RAW, COMPRESSED = "sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage"


def camera_topic(subscriptions: Iterable[tuple[str, list[str]]],
                 hint: str = "") -> tuple[str, str, str]:
    """The node's colour topic among its subscriptions (``(topic, types)``, as the ROS graph
    lists them for the node): ``(topic, kind, problem)`` with kind ``raw`` or ``compressed``;
    ``("", "", why)`` when it has none. With depth on the node subscribes two raw images: the
    colour one is ``hint`` (the topic the node's ``frames`` health names) when it is one of
    them, else the one whose name does not say depth. The graph is the node's, so whatever the
    hint says, the preview is only ever one of the node's own image topics."""
    subscriptions = list(subscriptions)
    compressed = sorted(t for t, types in subscriptions if COMPRESSED in types)
    raw = sorted(t for t, types in subscriptions if RAW in types)
    if compressed:  # image_transport compressed: the node's frames are these
        return compressed[0], "compressed", ""
    if not raw:
        return "", "", "the node subscribes no image topic (not active yet?)"
    if hint in raw:
        return hint, "raw", ""
    colour = [t for t in raw if "depth" not in t.lower()] or raw
    return colour[0], "raw", ""


FRAME_WINDOW_NS = 40_000_000  # a 30 Hz camera stamps one or two frames in each window


def stamp_filter(rate_hz: float) -> tuple[str, list[str]]:
    """A DDS content filter that lets through only frames stamped in ``rate_hz`` short windows
    of each second (``header.stamp.nanosec``), so that most frames of a fast camera are not even
    sent to the console (Fast DDS filters on the writer's side where it can). The filter thins;
    ``Throttle`` still bounds the rate."""
    windows = max(1, min(10, round(rate_hz)))
    terms, parameters = [], []
    for k in range(windows):
        start = k * 1_000_000_000 // windows
        terms.append(f"(header.stamp.nanosec >= %{2 * k} AND header.stamp.nanosec < "
                     f"%{2 * k + 1})")
        parameters += [str(start), str(start + FRAME_WINDOW_NS)]
    return " OR ".join(terms), parameters


class Throttle:
    """``due()`` is True at most ``rate_hz`` times a second."""

    def __init__(self, rate_hz: float, clock=time.monotonic) -> None:
        self.period = 1.0 / rate_hz
        self._clock = clock
        self._last = -float("inf")

    def due(self) -> bool:
        now = self._clock()
        if now - self._last < self.period:
            return False
        self._last = now
        return True


def preview_jpeg(rgb: np.ndarray, width: int = PREVIEW_WIDTH,
                 quality: int = PREVIEW_QUALITY) -> bytes:
    """An RGB frame at most ``width`` wide as JPEG bytes (a 1080p frame: strided to about twice
    the width first, so the area resize reads a quarter of the pixels)."""
    full_width = rgb.shape[1]
    step = max(1, full_width // (2 * width))
    if step > 1:
        rgb = rgb[::step, ::step]
    if rgb.shape[1] > width:
        size = (width, max(1, round(rgb.shape[0] * width / rgb.shape[1])))
        rgb = cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)
    bgr = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2BGR)
    ok, encoded = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise ValueError("JPEG encoding failed")
    return encoded.tobytes()


def is_jpeg(data: bytes) -> bool:
    return data[:3] == b"\xff\xd8\xff"
