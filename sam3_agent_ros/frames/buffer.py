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
message escapes and clips them. A composed transform that is not a rigid motion (two finite
links can overflow to inf) fails the lookup with the reason (``invalid``), never returned.

What a peer sends is checked before it is stored (``set_transform``: finite numbers, a unit
quaternion as tf2 accepts it, a stamp not far ahead of the node's clock), and what the buffer
holds is bounded (frames, samples per link, bytes); every refusal is counted by kind and the
newest said in words (``stats()``), for the listener's log and ``/diagnostics``. Thread-safe
(one lock): the ROS listener feeds it from the executor while lookups run on worker threads.
"""

from __future__ import annotations

import heapq
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.frames.link_history import SAMPLE_BYTES, LinkHistory
from sam3_agent_ros.frames.tf_input import (
    MAX_BYTES,
    MAX_FUTURE_S,
    MAX_SAMPLES_PER_LINK,
    QUATERNION_NORMALIZATION_TOLERANCE,
    REFUSALS,
    REFUSED_DENORMALIZED,
    REFUSED_FRAME_CAP,
    REFUSED_FUTURE,
    REFUSED_MALFORMED,
    REFUSED_NAMES,
    TfInputStats,
)
from sam3_agent_ros.frames.transform import Transform, transform_problem, unit_quaternion
from sam3_agent_ros.frames.unavailable import NS, TransformUnavailable, frame_text, stamp_text

KNOWN_FRAMES_SHOWN = 12  # how many known frames an error lists
MAX_DEPTH = 256  # a chain longer than this is a loop or an attack, not a robot
CLOCK_READ_S = 0.01  # how long one reading of the node's clock serves the future check


class TfBuffer:
    """Transforms by child frame; ``lookup(target, source, stamp_ns)`` -> T with
    ``p_target = T p_source`` (tf2's ``lookup_transform(target, source, time)``).

    Bounded whatever the peers send: ``max_frames`` links, ``max_samples_per_link`` samples a
    link, ``max_bytes`` of samples in all (the oldest samples of the link being fed go first);
    the cost of a sample does not depend on how many frames the tree has. ``now_ns`` (the node's
    clock; None or a clock reading 0, as sim time before /clock: no check) refuses samples
    stamped more than ``max_future_s`` ahead of it: one such sample would otherwise push every
    real sample out of its link's window and make the other frames look vanished."""

    def __init__(self, cache_s: float = 10.0, tolerance_ns: int = 1_000_000,
                 max_frames: int = 10_000, *, max_samples_per_link: int = MAX_SAMPLES_PER_LINK,
                 max_bytes: int = MAX_BYTES, now_ns: Callable[[], int] | None = None,
                 max_future_s: float = MAX_FUTURE_S,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        if cache_s <= 0:
            raise ValueError("cache_s must be > 0")
        if max_samples_per_link < 2 or max_bytes < SAMPLE_BYTES * 2:
            raise ValueError("max_samples_per_link and max_bytes must hold 2 samples at least")
        self.cache_ns = int(cache_s * NS)
        self.tolerance_ns = int(tolerance_ns)
        self.max_frames = max_frames
        self.max_samples_per_link = int(max_samples_per_link)
        self.max_samples = int(max_bytes) // SAMPLE_BYTES
        self.max_future_ns = int(max_future_s * NS)
        self._now_ns = now_ns
        self._clock_reading, self._clock_read_at = 0, -math.inf
        self._monotonic = monotonic
        self._edges: dict[str, LinkHistory] = {}
        self._children: dict[str, int] = {}  # parent -> how many links hang below it
        self._vanished: OrderedDict[str, int] = OrderedDict()  # frame -> its last stamp
        self._newest_ns: int | None = None  # newest dynamic stamp the buffer has seen
        # (newest stamp, child) of the dynamic links, lazily updated (stale entries skipped):
        # finding the links that vanished costs what vanished, never a scan of the tree.
        self._by_newest: list[tuple[int, str]] = []
        self._samples = 0  # dynamic samples held, every link
        self._refused = dict.fromkeys(REFUSALS, 0)
        self._dropped = 0
        self._last_kind = ""
        self._last_refusal_at: float | None = None
        self._last_by_kind: dict[str, tuple[str, str, str]] = {}  # kind -> parent, child, why
        self._lock = threading.Lock()

    # --- feeding -----------------------------------------------------------------------------
    def set_transform(self, parent: str, child: str, stamp_ns: int, translation: object,
                      rotation: object, *, static: bool = False) -> bool:
        """Store ``parent -> child`` at ``stamp_ns`` (rotation x, y, z, w). False (nothing
        stored; counted by kind in ``stats()``, said in ``last_refusal``) when it names no
        frame, links a frame to itself, holds non-finite numbers or a quaternion that is no
        unit rotation (tf2's tolerance), is stamped far ahead of the clock, or would exceed
        ``max_frames``. Never raises for what a peer sends."""
        stamp_ns = int(stamp_ns)
        if not parent or not child or parent == child:
            return self._refuse(REFUSED_NAMES, parent, child, "a link needs two different "
                                "frame names")
        try:
            tx, ty, tz = (float(v) for v in translation)  # type: ignore[attr-defined]
            qx, qy, qz, qw = (float(v) for v in rotation)  # type: ignore[attr-defined]
            if not (math.isfinite(tx) and math.isfinite(ty) and math.isfinite(tz)):
                raise ValueError(f"a translation is 3 finite numbers, got {[tx, ty, tz]}")
            unit = unit_quaternion(qx, qy, qz, qw)
        except (ValueError, TypeError) as exc:
            return self._refuse(REFUSED_MALFORMED, parent, child, str(exc))
        squared = qx * qx + qy * qy + qz * qz + qw * qw  # finite: its length is 1e-3..1e3
        if abs(squared - 1.0) >= QUATERNION_NORMALIZATION_TOLERANCE:
            return self._refuse(REFUSED_DENORMALIZED, parent, child,
                                f"quaternion {[qx, qy, qz, qw]} is not normalised (squared "
                                f"length {squared:.6g}; tf2 refuses it too)")
        if not static and self._now_ns is not None:
            now = self._clock_ns()
            if now > 0 and stamp_ns > now + self.max_future_ns:
                now = self._clock_ns(fresh=True)  # refused on a fresh reading only
            if now > 0 and stamp_ns > now + self.max_future_ns:
                return self._refuse(REFUSED_FUTURE, parent, child,
                                    f"stamped {stamp_text(stamp_ns)}, {(stamp_ns - now) / NS:.3f}"
                                    f" s ahead of the node's clock (more than "
                                    f"{self.max_future_ns / NS:g} s: clocks out of sync?)")
        with self._lock:
            if self._store(parent, child, stamp_ns, (tx, ty, tz, *unit), static):
                return True
        return self._refuse(REFUSED_FRAME_CAP, parent, child,
                            f"the buffer holds max_frames={self.max_frames} frames already")

    def _store(self, parent: str, child: str, stamp_ns: int, values: tuple[float, ...],
               static: bool) -> bool:
        """Under the lock: the sample stored; False when a new frame would exceed max_frames."""
        if not static and (self._newest_ns is None or stamp_ns > self._newest_ns):
            self._newest_ns = stamp_ns  # first: frames that vanish by it free their place
            self._drop_vanished()
        edge = self._edges.get(child)
        if edge is None or edge.parent != parent or edge.static != static:
            if edge is None and len(self._edges) >= self.max_frames:
                return False
            edge = LinkHistory(parent, static)
            self._replace_edge(child, edge)
        if static:
            edge.put(stamp_ns, values)
            return True
        newest_before = edge.newest_ns if len(edge) else None
        if edge.put(stamp_ns, values):
            self._samples += 1
        self._samples -= edge.drop_before(edge.newest_ns - self.cache_ns)
        self._bound(edge)
        if newest_before is None or edge.newest_ns > newest_before:
            heapq.heappush(self._by_newest, (edge.newest_ns, child))
        return True

    def _clock_ns(self, fresh: bool = False) -> int:
        """The node's clock, read at most every ``CLOCK_READ_S`` unless ``fresh`` (a /tf
        message of 10,000 samples reads it about once, not 10,000 times)."""
        assert self._now_ns is not None
        at = self._monotonic()
        if fresh or at - self._clock_read_at >= CLOCK_READ_S or self._clock_reading <= 0:
            self._clock_reading, self._clock_read_at = int(self._now_ns()), at
        return self._clock_reading

    def _refuse(self, kind: str, parent: str, child: str, why: str) -> bool:
        """Count a refusal; its words are written when asked (``stats``): a flood of refused
        samples costs a counter each, not a formatted message each."""
        with self._lock:
            self._refused[kind] += 1
            self._last_by_kind[kind] = (parent, child, why)
            self._last_kind = kind
            self._last_refusal_at = self._monotonic()
        return False

    @staticmethod
    def _refusal_text(kind: str, refusal: tuple[str, str, str]) -> str:
        parent, child, why = refusal
        return f"{kind}: {frame_text(parent)} -> {frame_text(child)}: {for_log(why, 200)}"

    def _replace_edge(self, child: str, edge: LinkHistory) -> None:
        """A new link below ``child`` (a new frame, or a new parent: a new history)."""
        old = self._edges.get(child)
        if old is not None:
            self._forget(child, old)
        self._edges[child] = edge
        self._children[edge.parent] = self._children.get(edge.parent, 0) + 1
        self._vanished.pop(child, None)

    def _forget(self, child: str, edge: LinkHistory) -> None:
        del self._edges[child]
        left = self._children[edge.parent] - 1
        if left:
            self._children[edge.parent] = left
        else:
            del self._children[edge.parent]
        if not edge.static:
            self._samples -= len(edge)

    def _bound(self, edge: LinkHistory) -> None:
        """The link fed last within its sample cap, and the buffer within its bytes: the link
        being fed gives up its oldest samples (never another's)."""
        over = max(len(edge) - self.max_samples_per_link, self._samples - self.max_samples)
        if over > 0:
            dropped = edge.drop_oldest(over)
            self._samples -= dropped
            self._dropped += dropped

    def _drop_vanished(self) -> None:
        assert self._newest_ns is not None
        horizon = self._newest_ns - self.cache_ns
        heap = self._by_newest
        while heap and heap[0][0] < horizon:
            newest, child = heapq.heappop(heap)
            edge = self._edges.get(child)
            if edge is None or edge.static or edge.newest_ns != newest:
                continue  # a stale entry: the link was replaced or has newer samples
            self._forget(child, edge)
            self._vanished[child] = newest
            while len(self._vanished) > KNOWN_FRAMES_SHOWN * 4:
                self._vanished.popitem(last=False)
        dynamic = len(self._edges)
        if len(heap) > 2 * dynamic + 1024:  # stale entries pile up: rebuild (amortised O(1))
            self._by_newest = [(e.newest_ns, c) for c, e in self._edges.items() if not e.static]
            heapq.heapify(self._by_newest)

    def refusal_count(self) -> int:
        """How many samples were refused so far (cheap: nothing formatted)."""
        with self._lock:
            return sum(self._refused.values())

    def stats(self) -> TfInputStats:
        with self._lock:
            by_kind = {kind: self._refusal_text(kind, refusal)
                       for kind, refusal in self._last_by_kind.items()}
            return TfInputStats(len(self._edges), self._samples, self._samples * SAMPLE_BYTES,
                                dict(self._refused), self._dropped,
                                by_kind.get(self._last_kind, ""), self._last_refusal_at,
                                by_kind)

    # --- reading -----------------------------------------------------------------------------
    def frames(self) -> list[str]:
        """Every frame the buffer knows (children and parents), sorted."""
        with self._lock:
            return sorted(set(self._edges) | set(self._children))

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
        with self._lock, np.errstate(over="ignore", invalid="ignore"):  # checked at the end
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
                return self._checked(target, source, stamp_ns, up_source, t_common_source)
            t_common_target = self._compose(target, source, stamp_ns, target_edges,
                                            up_source + up_target)
            return self._checked(target, source, stamp_ns, up_source + up_target,
                                 t_common_target.inverse() * t_common_source)

    # --- internals (under the lock) ----------------------------------------------------------
    def _known_frames(self) -> tuple[int, list[str]]:
        """How many frames the buffer knows and the first ``KNOWN_FRAMES_SHOWN`` by name (no
        sort of the whole tree: a failing lookup costs the same with 10,000 frames)."""
        names = self._edges.keys() | self._children.keys()
        return len(names), heapq.nsmallest(KNOWN_FRAMES_SHOWN, names)

    def _checked(self, target: str, source: str, stamp_ns: int, chain: list[tuple[str, str]],
                 transform: Transform) -> Transform:
        problem = transform_problem(transform)
        if problem is not None:
            self._fail("invalid", target, source, stamp_ns, chain, problem)
        return transform

    def _chain(self, target: str, source: str, frame: str, stamp_ns: int) -> list[tuple[str, str]]:
        """The (parent, child) edges from ``frame`` up to its root."""
        if frame not in self._edges and frame not in self._children:
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
            return edge.at(stamp_ns)
        oldest, newest = edge.oldest_ns, edge.newest_ns
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
        return edge.at(stamp_ns)

    def _fail(self, kind: str, target: str, source: str, stamp_ns: int,
              chain: list[tuple[str, str]], what: str, newest: int | None = None) -> None:
        dynamic = [self._edges[c].newest_ns for _, c in chain
                   if c in self._edges and not self._edges[c].static]
        if newest is None:
            newest = max(dynamic) if dynamic else self._newest_ns
        count, known = self._known_frames()
        shown = ", ".join(frame_text(f) for f in known)
        more = f" and {count - len(known)} more" if count > len(known) else ""
        newest_words = stamp_text(newest) if newest is not None else "none (no dynamic transform)"
        message = (f"no transform from {frame_text(source)} to {frame_text(target)} at "
                   f"{stamp_text(stamp_ns)}: {what}; newest stamp seen: {newest_words}; "
                   f"frames known ({count}): {shown or 'none'}{more}")
        raise TransformUnavailable(kind, message, target=target, source=source,
                                   newest_stamp_ns=newest, known_frames=known)
