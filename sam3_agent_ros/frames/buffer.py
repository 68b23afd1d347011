"""A ROS-free TF buffer: the transform tree over time, looked up at a stamp.

What ``/tf`` and ``/tf_static`` carry, held the way tf2 holds it: every child frame has one
parent; a static edge holds for all times (exact); a dynamic edge keeps its samples of the last
``cache_s`` seconds (10 s, tf2's default), and a lookup interpolates between the two samples around
the stamp (translation linear, rotation slerp). A stamp outside a dynamic edge's samples (beyond
``tolerance_ns``) is refused, never extrapolated: the pose would be a guess. A dynamic frame that
has had no sample for longer than the cache (measured against the newest stamp the buffer has
seen) is dropped, and lookups say it vanished.

``lookup`` raises ``TransformUnavailable``, whose message says exactly what is missing: the
frames, what broke (unknown frame, no path, extrapolation, vanished frame), the newest stamp seen
on the chain, and the frames the buffer knows (a bounded list). Frame names come from peers: the
message escapes and clips them. Thread-safe (one lock): the ROS listener feeds it from the
executor while lookups run on worker threads.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.frames.transform import Transform, interpolate

NS = 1_000_000_000
KNOWN_FRAMES_SHOWN = 12  # how many known frames an error lists
FRAME_CHARS = 80  # how much of one frame name an error repeats
MAX_DEPTH = 256  # a chain longer than this is a loop or an attack, not a robot


def stamp_text(stamp_ns: int) -> str:
    """A stamp in seconds with nanoseconds, as errors show it: ``12.000000000 s``."""
    sign = "-" if stamp_ns < 0 else ""
    seconds, nanoseconds = divmod(abs(int(stamp_ns)), NS)
    return f"{sign}{seconds}.{nanoseconds:09d} s"


def frame_text(frame: str) -> str:
    return "'" + for_log(frame, FRAME_CHARS) + "'"


class TransformUnavailable(Exception):
    """No transform between two frames at a stamp. ``kind`` is one of ``unknown_frame``,
    ``no_path``, ``loop``, ``vanished``, ``extrapolation_future``, ``extrapolation_past``;
    ``str()`` is the whole explanation (frames, newest stamp seen, known frames)."""

    def __init__(self, kind: str, message: str, *, target: str, source: str,
                 newest_stamp_ns: int | None, known_frames: list[str]) -> None:
        super().__init__(message)
        self.kind = kind
        self.target = target
        self.source = source
        self.newest_stamp_ns = newest_stamp_ns
        self.known_frames = known_frames


@dataclass
class _Edge:
    parent: str
    static: bool
    stamps: list[int] = field(default_factory=list)  # sorted; one entry for a static edge
    transforms: list[Transform] = field(default_factory=list)

    @property
    def newest_ns(self) -> int:
        return self.stamps[-1]


class TfBuffer:
    """Transforms by child frame; ``lookup(target, source, stamp_ns)`` -> T with
    ``p_target = T p_source`` (tf2's ``lookup_transform(target, source, time)``)."""

    def __init__(self, cache_s: float = 10.0, tolerance_ns: int = 1_000_000,
                 max_frames: int = 10_000) -> None:
        if cache_s <= 0:
            raise ValueError("cache_s must be > 0")
        self.cache_ns = int(cache_s * NS)
        self.tolerance_ns = int(tolerance_ns)
        self.max_frames = max_frames
        self._edges: dict[str, _Edge] = {}
        self._vanished: OrderedDict[str, int] = OrderedDict()  # frame -> its last stamp
        self._newest_ns: int | None = None  # newest dynamic stamp the buffer has seen
        self._refused_frames = 0
        self._lock = threading.Lock()

    # --- feeding -----------------------------------------------------------------------------
    def set_transform(self, parent: str, child: str, stamp_ns: int, translation: object,
                      rotation: object, *, static: bool = False) -> bool:
        """Store ``parent -> child`` at ``stamp_ns`` (rotation x, y, z, w). False (nothing
        stored) when it names no frame, links a frame to itself, or would exceed ``max_frames``;
        ValueError for non-finite numbers or a zero quaternion."""
        if not parent or not child or parent == child:
            return False
        transform = Transform(np.asarray(translation), np.asarray(rotation))
        stamp_ns = int(stamp_ns)
        with self._lock:
            edge = self._edges.get(child)
            if edge is None or edge.parent != parent or edge.static != static:
                if edge is None and len(self._edges) >= self.max_frames:
                    self._refused_frames += 1
                    return False
                edge = self._edges[child] = _Edge(parent, static)  # a new parent: new history
                self._vanished.pop(child, None)
            if static:
                edge.stamps, edge.transforms = [stamp_ns], [transform]
                return True
            index = bisect.bisect_left(edge.stamps, stamp_ns)
            if index < len(edge.stamps) and edge.stamps[index] == stamp_ns:
                edge.transforms[index] = transform
            else:
                edge.stamps.insert(index, stamp_ns)
                edge.transforms.insert(index, transform)
            keep_from = bisect.bisect_left(edge.stamps, edge.newest_ns - self.cache_ns)
            del edge.stamps[:keep_from], edge.transforms[:keep_from]
            if self._newest_ns is None or stamp_ns > self._newest_ns:
                self._newest_ns = stamp_ns
                self._drop_vanished()
        return True

    def _drop_vanished(self) -> None:
        assert self._newest_ns is not None
        horizon = self._newest_ns - self.cache_ns
        for child in [c for c, e in self._edges.items() if not e.static and e.newest_ns < horizon]:
            self._vanished[child] = self._edges.pop(child).newest_ns
            while len(self._vanished) > KNOWN_FRAMES_SHOWN * 4:
                self._vanished.popitem(last=False)

    # --- reading -----------------------------------------------------------------------------
    def frames(self) -> list[str]:
        """Every frame the buffer knows (children and parents), sorted."""
        with self._lock:
            return self._known_frames()

    def newest_stamp_ns(self) -> int | None:
        """The newest dynamic stamp received (None before the first)."""
        with self._lock:
            return self._newest_ns

    def can_transform(self, target: str, source: str, stamp_ns: int) -> bool:
        try:
            self.lookup(target, source, stamp_ns)
        except TransformUnavailable:
            return False
        return True

    def lookup(self, target: str, source: str, stamp_ns: int) -> Transform:
        """T with ``p_target = T p_source`` at ``stamp_ns``; raises TransformUnavailable."""
        stamp_ns = int(stamp_ns)
        with self._lock:
            if target == source:
                return Transform.identity()
            up_source = self._chain(target, source, source, stamp_ns)
            up_target = self._chain(target, source, target, stamp_ns)
            root_source = up_source[-1][0] if up_source else source
            root_target = up_target[-1][0] if up_target else target
            if root_source != root_target:
                self._fail("no_path", target, source, stamp_ns, up_source + up_target,
                           f"no path between them: {frame_text(source)} is in the tree of "
                           f"{frame_text(root_source)}, {frame_text(target)} in the tree of "
                           f"{frame_text(root_target)} (nothing links the two trees)")
            # The lowest common ancestor; the edges below it on each side.
            path_source = [source] + [parent for parent, _ in up_source]
            path_target = [target] + [parent for parent, _ in up_target]
            on_target_side = set(path_target)
            common = next(frame for frame in path_source if frame in on_target_side)
            source_edges = up_source[:path_source.index(common)]
            target_edges = up_target[:path_target.index(common)]
            t_common_source = self._compose(target, source, stamp_ns, source_edges,
                                            up_source + up_target)
            if not target_edges:  # the target is the common ancestor (e.g. odom, a root)
                return t_common_source
            t_common_target = self._compose(target, source, stamp_ns, target_edges,
                                            up_source + up_target)
            return t_common_target.inverse() * t_common_source

    # --- internals (under the lock) ----------------------------------------------------------
    def _known_frames(self) -> list[str]:
        names = set(self._edges) | {e.parent for e in self._edges.values()}
        return sorted(names)

    def _chain(self, target: str, source: str, frame: str, stamp_ns: int) -> list[tuple[str, str]]:
        """The (parent, child) edges from ``frame`` up to its root."""
        if frame not in self._edges and not any(e.parent == frame for e in self._edges.values()):
            self._fail_if_vanished(target, source, stamp_ns, frame)
            self._fail("unknown_frame", target, source, stamp_ns, [],
                       f"frame {frame_text(frame)} is unknown (never received on /tf or "
                       f"/tf_static)")
        edges: list[tuple[str, str]] = []
        seen = {frame}
        while frame in self._edges:
            parent = self._edges[frame].parent
            edges.append((parent, frame))
            if parent in seen or len(edges) > MAX_DEPTH:
                self._fail("loop", target, source, stamp_ns, edges,
                           f"the transforms above {frame_text(frame)} form a loop")
            seen.add(parent)
            frame = parent
        self._fail_if_vanished(target, source, stamp_ns, frame)  # a root that lost its parent
        return edges

    def _fail_if_vanished(self, target: str, source: str, stamp_ns: int, frame: str) -> None:
        if frame in self._vanished:
            self._fail("vanished", target, source, stamp_ns, [],
                       f"frame {frame_text(frame)} vanished: its last transform was at "
                       f"{stamp_text(self._vanished[frame])}, no update for longer than the "
                       f"cache ({self.cache_ns / NS:g} s)", newest=self._vanished[frame])

    def _compose(self, target: str, source: str, stamp_ns: int, edges: list[tuple[str, str]],
                 chain: list[tuple[str, str]]) -> Transform:
        """T_top_bottom for edges listed bottom-up ((parent, child) pairs)."""
        if not edges:
            return Transform.identity()
        result = self._at(target, source, stamp_ns, *edges[0], chain)
        for parent, child in edges[1:]:
            result = self._at(target, source, stamp_ns, parent, child, chain) * result
        return result

    def _at(self, target: str, source: str, stamp_ns: int, parent: str, child: str,
            chain: list[tuple[str, str]]) -> Transform:
        edge = self._edges[child]
        if edge.static:
            return edge.transforms[0]
        stamps, oldest, newest = edge.stamps, edge.stamps[0], edge.stamps[-1]
        if stamp_ns > newest + self.tolerance_ns:
            link = f"{frame_text(parent)} -> {frame_text(child)}"
            self._fail("extrapolation_future", target, source, stamp_ns, chain,
                       f"the newest transform {link} is at {stamp_text(newest)}, "
                       f"{(stamp_ns - newest) / 1e6:.1f} ms before the lookup (no extrapolation)")
        if stamp_ns < oldest - self.tolerance_ns:
            link = f"{frame_text(parent)} -> {frame_text(child)}"
            self._fail("extrapolation_past", target, source, stamp_ns, chain,
                       f"the oldest transform {link} kept is at {stamp_text(oldest)}, "
                       f"{(oldest - stamp_ns) / 1e6:.1f} ms after the lookup (the buffer keeps "
                       f"{self.cache_ns / NS:g} s)")
        if stamp_ns >= newest:
            return edge.transforms[-1]
        if stamp_ns <= oldest:
            return edge.transforms[0]
        after = bisect.bisect_left(stamps, stamp_ns)
        if stamps[after] == stamp_ns:
            return edge.transforms[after]
        before = after - 1
        fraction = (stamp_ns - stamps[before]) / (stamps[after] - stamps[before])
        return interpolate(edge.transforms[before], edge.transforms[after], fraction)

    def _fail(self, kind: str, target: str, source: str, stamp_ns: int,
              chain: list[tuple[str, str]], what: str, newest: int | None = None) -> None:
        dynamic = [self._edges[c].newest_ns for _, c in chain
                   if c in self._edges and not self._edges[c].static]
        if newest is None:
            newest = max(dynamic) if dynamic else self._newest_ns
        known = self._known_frames()
        shown = ", ".join(frame_text(f) for f in known[:KNOWN_FRAMES_SHOWN])
        more = f" and {len(known) - KNOWN_FRAMES_SHOWN} more" if len(known) > KNOWN_FRAMES_SHOWN \
            else ""
        newest_words = stamp_text(newest) if newest is not None else "none (no dynamic transform)"
        message = (f"no transform from {frame_text(source)} to {frame_text(target)} at "
                   f"{stamp_text(stamp_ns)}: {what}; newest stamp seen: {newest_words}; "
                   f"frames known ({len(known)}): {shown or 'none'}{more}")
        raise TransformUnavailable(kind, message, target=target, source=source,
                                   newest_stamp_ns=newest, known_frames=known[:KNOWN_FRAMES_SHOWN])
