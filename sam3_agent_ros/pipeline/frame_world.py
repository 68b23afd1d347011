"""The world of a colour frame (CONTRACTS §11): the depth image, the camera model and the
transform into ``target_frame`` that belong to its stamp, bound to it when a query takes it.

ROS-free. A real model answers in 5-30 s; the depth ring keeps about a second of frames and the
TF buffer 10 s, so what belongs to the colour frame's stamp is gone by the time the answer is
measured. So it is found when the query takes the frame (``QueryLife.bind_world``) and travels
with it (``Frame.world``): the answer's 3D, a refinement of the kept answer minutes later (the
kept frame keeps its world, counted in ``refine.max_kept_mib``) and the follow session started
from it use exactly these.

- ``DepthRing``: the depth frames by stamp, bounded in count (``depth.buffer_size``) and in bytes
  (``depth.buffer_mib``), checked as each frame arrives; a frame alone over the byte budget is
  refused on arrival (``add`` says why).
- ``DepthPin``: the depth frame nearest a colour stamp, taken from the ring when the query takes
  its frame and replaced while nearer ones arrive (the depth of a stamp often arrives just after
  its colour frame): once pinned it no longer depends on the ring.
- ``FrameWorld``: the pin and camera model (the depth source's ``DepthBinding``, opaque here), the
  ``TargetFrame`` looked up at the colour stamp, and the bytes they hold.
"""

from __future__ import annotations

import collections
import threading
import weakref
from dataclasses import dataclass
from typing import Any

from sam3_agent_ros.pipeline.target_frame import (
    TargetFrame,
    TargetFrameRequest,
    lookup_target,
    lookup_target_at,
)

MAX_OPEN_PINS = 32  # pins still taking nearer depth frames (queries in flight, follow)


@dataclass(frozen=True)
class DepthItem:
    """One depth frame as the ring keeps it: its stamp, its size in bytes, the message."""

    stamp_ns: int
    nbytes: int
    message: Any


class DepthPin:
    """The depth frame nearest ``stamp_ns`` seen since the pin was made (from the ring then, and
    every frame that arrived while the pin was open). ``best`` is None when none arrived."""

    def __init__(self, stamp_ns: int, best: DepthItem | None = None):
        self.stamp_ns = int(stamp_ns)
        self.best = best

    def distance_ns(self, item: DepthItem | None = None) -> int | None:
        item = self.best if item is None else item
        return None if item is None else abs(item.stamp_ns - self.stamp_ns)

    def offer(self, item: DepthItem) -> None:
        """Keep ``item`` when it is nearer (equal stamps: the newer one wins, a re-sent frame)."""
        current = self.distance_ns()
        distance = self.distance_ns(item)
        if current is None or (distance is not None and distance <= current):
            self.best = item

    @property
    def nbytes(self) -> int:
        return self.best.nbytes if self.best is not None else 0


class DepthRing:
    """The depth frames last received, oldest first, at most ``max_count`` and ``max_bytes``.
    ``pin`` binds a colour stamp to its nearest depth frame; open pins see the frames that
    arrive after them until a frame more than ``close_after_ns`` newer than their stamp arrives.
    Thread-safe."""

    def __init__(self, max_count: int, max_bytes: int, close_after_ns: int = 0,
                 bytes_name: str = "depth.buffer_mib"):
        self.max_count = max(1, int(max_count))
        self.max_bytes = max(1, int(max_bytes))
        self.close_after_ns = max(0, int(close_after_ns))
        self._bytes_name = bytes_name
        self._lock = threading.Lock()
        self._items: collections.deque[DepthItem] = collections.deque()
        self._bytes = 0
        self._open: list[weakref.ref[DepthPin]] = []
        self.refused = 0  # frames refused on arrival (alone over the byte budget)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    @property
    def kept_bytes(self) -> int:
        with self._lock:
            return self._bytes

    def add(self, stamp_ns: int, nbytes: int, message: Any) -> str | None:
        """Keep a frame (the oldest go while over a bound); the reason when it is refused."""
        item = DepthItem(int(stamp_ns), max(0, int(nbytes)), message)
        if item.nbytes > self.max_bytes:
            with self._lock:
                self.refused += 1
            return (f"a depth frame of {item.nbytes / 2**20:.1f} MiB is over "
                    f"{self._bytes_name}={self.max_bytes / 2**20:g} MiB")
        with self._lock:
            self._items.append(item)
            self._bytes += item.nbytes
            while len(self._items) > self.max_count or self._bytes > self.max_bytes:
                self._bytes -= self._items.popleft().nbytes
            still_open = []
            for ref in self._open:
                pin = ref()
                if pin is None:
                    continue
                pin.offer(item)
                if item.stamp_ns - pin.stamp_ns <= self.close_after_ns:
                    still_open.append(ref)
            self._open = still_open
        return None

    def pin(self, stamp_ns: int, keep_open: bool = True) -> DepthPin:
        """The nearest frame to ``stamp_ns`` now; with ``keep_open`` it also sees the frames that
        arrive next (until one is ``close_after_ns`` past the stamp)."""
        pin = DepthPin(stamp_ns)
        with self._lock:
            for item in self._items:  # oldest first: among equal stamps the newest wins
                pin.offer(item)
            newest = self._items[-1].stamp_ns if self._items else None
            if keep_open and (newest is None or newest - pin.stamp_ns <= self.close_after_ns):
                self._open.append(weakref.ref(pin))
                del self._open[:-MAX_OPEN_PINS]
        return pin

    def messages(self) -> list[Any]:
        """The messages kept, oldest first."""
        with self._lock:
            return [item.message for item in self._items]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0
            self._open = []


@dataclass
class FrameWorld:
    """What belongs to one colour frame's stamp (see the module's docstring): ``depth``, the
    depth source's binding (its pin and camera model), ``target``: the transform into
    ``target_frame`` at the stamp once found (None: not looked up yet, or ``target_frame``
    unset); ``target_reason``: why the last lookup failed."""

    stamp_ns: int
    frame_id: str
    depth: Any = None
    target: TargetFrame | None = None
    target_reason: str = ""

    @property
    def nbytes(self) -> int:
        """The bytes this world holds (its pinned depth frame): what a kept answer counts."""
        return int(getattr(self.depth, "nbytes", 0) or 0)


def world_of(frame: Any) -> FrameWorld | None:
    """The world bound to ``frame`` (a ``core.types.Frame``), or None."""
    world = getattr(frame, "world", None)
    return world if isinstance(world, FrameWorld) else None


def bind_target(world: FrameWorld, request: TargetFrameRequest, timeout_s: float) -> None:
    """Look the world's transform up at its stamp (waiting at most ``timeout_s``) unless it is
    found already; a failure is kept in ``target_reason`` (looked up again later)."""
    if world.target is not None and world.target.ok and world.target.frame_id == request.frame_id:
        return
    found = lookup_target_at(request, world.frame_id, world.stamp_ns, timeout_s)
    if found.ok:
        world.target, world.target_reason = found, ""
    else:
        world.target_reason = found.reason


def target_of(request: TargetFrameRequest, frame: Any) -> TargetFrame:
    """The transform of ``frame`` into ``request.frame_id``: the one bound to its world when
    found (at the colour stamp, whatever the TF buffer still holds), else looked up now (without
    waiting again when a lookup of this world already waited), and bound when found: a
    refinement of this answer reuses it."""
    world = world_of(frame)
    waited = False
    if world is not None:
        bound = world.target
        if bound is not None and bound.ok and bound.frame_id == request.frame_id:
            return bound
        waited = bool(world.target_reason)  # the worker waited tf.timeout_s for it already
    found = (lookup_target_at(request, frame.frame_id, world.stamp_ns, 0.0)
             if world is not None and waited else lookup_target(request, frame))
    if world is not None and found.ok:
        world.target, world.target_reason = found, ""
    return found
