"""Images at the HTTP boundary: numpy RGB arrays -> downscaled JPEG/PNG data URLs.

Images stay arrays everywhere else. ``ImageEncoder`` downscales each image so that its longest side
is at most ``max_side`` and encodes it once: a cache keyed by the part's ``key`` and the array's
identity returns the same data URL when the same image is sent again in the same query (the frame
goes into every main request and every verifier request). ``to_openai_messages`` turns our
``Message`` objects into Chat Completions message dicts.
"""

from __future__ import annotations

import base64
import threading
import weakref
from dataclasses import dataclass, field

import cv2
import numpy as np

from sam3_agent_ros.core.types import ImagePart, Message
from sam3_agent_ros.render import downscale

IMAGE_FORMATS = ("jpeg", "png")


def encode_data_url(image: np.ndarray, image_format: str = "jpeg", jpeg_quality: int = 90) -> str:
    """RGB (H, W, 3) or grey (H, W) uint8 -> ``data:image/<format>;base64,...``."""
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8:
        raise ValueError(f"image must be a uint8 numpy array, got {_describe(image)}")
    if image.size == 0:
        raise ValueError(f"image is empty (shape {image.shape})")
    if image.ndim == 3 and image.shape[2] == 3:
        pixels = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2BGR)
    elif image.ndim == 2:
        pixels = np.ascontiguousarray(image)
    else:
        raise ValueError(f"image must be (H, W, 3) RGB or (H, W) grey, got shape {image.shape}")
    if image_format == "jpeg":
        ok, data = cv2.imencode(".jpg", pixels, [cv2.IMWRITE_JPEG_QUALITY, int(jpeg_quality)])
    elif image_format == "png":
        ok, data = cv2.imencode(".png", pixels, [cv2.IMWRITE_PNG_COMPRESSION, 3])
    else:
        raise ValueError(f"image_format must be one of {IMAGE_FORMATS}, got {image_format!r}")
    if not ok:
        raise ValueError(f"OpenCV could not encode a {image.shape} image as {image_format}")
    return f"data:image/{image_format};base64,{base64.b64encode(data.tobytes()).decode('ascii')}"


def _describe(value: object) -> str:
    if isinstance(value, np.ndarray):
        return f"ndarray dtype={value.dtype} shape={value.shape}"
    return type(value).__name__


@dataclass
class _CacheEntry:
    array_ref: object  # weakref to the array (or the array itself when it can't be weakly held)
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str | None = None

    def holds(self, array: np.ndarray) -> bool:
        ref = self.array_ref
        target = ref() if isinstance(ref, weakref.ref) else ref
        return target is array


class ImageEncoder:
    """Downscales and encodes images, each once (thread-safe; use one encoder per query).

    The cache key is ``(part.key, id(part.array), part.array.shape)``; an entry also keeps a weak
    reference to its array, so a recycled ``id`` of a freed array is never mistaken for a hit and
    the encoder never keeps big frames alive. Concurrent requests for the same image wait for one
    encode instead of encoding it twice."""

    def __init__(self, max_side: int, image_format: str = "jpeg", jpeg_quality: int = 90):
        if max_side < 1:
            raise ValueError(f"max_side must be >= 1, got {max_side}")
        if image_format not in IMAGE_FORMATS:
            raise ValueError(f"image_format must be one of {IMAGE_FORMATS}, got {image_format!r}")
        self.max_side = int(max_side)
        self.image_format = image_format
        self.jpeg_quality = int(jpeg_quality)
        self.encode_count = 0  # images actually encoded (cache misses), for tests and stats
        self._lock = threading.Lock()
        self._cache: dict[tuple, _CacheEntry] = {}

    def data_url(self, part: ImagePart) -> str:
        array = part.array
        cache_key = (part.key, id(array), getattr(array, "shape", None))
        with self._lock:
            entry = self._cache.get(cache_key)
            if entry is None or not entry.holds(array):
                entry = _CacheEntry(_reference(array))
                self._cache[cache_key] = entry
        with entry.lock:
            if entry.url is None:
                entry.url = encode_data_url(downscale(array, self.max_side), self.image_format,
                                            self.jpeg_quality)
                with self._lock:
                    self.encode_count += 1
            return entry.url

    def reset(self) -> None:
        """Forget every cached image (start of a new query when the encoder is reused)."""
        with self._lock:
            self._cache.clear()


def _reference(array: object) -> object:
    try:
        return weakref.ref(array)
    except TypeError:
        return array


def to_openai_messages(messages: list[Message], encoder: ImageEncoder) -> list[dict]:
    """Our messages -> Chat Completions ``messages``.

    System, assistant and tool messages (and user messages without images) get plain string
    content; user messages with images get a list of ``text`` / ``image_url`` parts in their
    original order. An assistant message's native call becomes ``tool_calls`` (content null when
    it has no text); a tool message carries its ``tool_call_id``.
    """
    converted: list[dict] = []
    for message in messages:
        if message.role not in ("system", "user", "assistant", "tool"):
            raise ValueError(f"unknown message role {message.role!r}")
        images = message.images
        if message.role != "user" or not images:
            if images:
                raise ValueError(f"a {message.role} message cannot carry images")
            entry: dict = {"role": message.role, "content": message.text_content}
            if message.tool_calls:
                entry["content"] = entry["content"] or None
                entry["tool_calls"] = [
                    {"id": call.id, "type": "function",
                     "function": {"name": call.name, "arguments": call.arguments}}
                    for call in message.tool_calls]
            if message.role == "tool":
                entry["tool_call_id"] = message.tool_call_id or ""
            converted.append(entry)
            continue
        parts: list[dict] = []
        for item in message.content:
            if isinstance(item, ImagePart):
                parts.append({"type": "image_url", "image_url": {"url": encoder.data_url(item)}})
            else:
                parts.append({"type": "text", "text": item})
        converted.append({"role": "user", "content": parts})
    return converted
