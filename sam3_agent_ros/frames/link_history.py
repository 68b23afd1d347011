"""One TF link's history (ROS-free): the samples of one ``parent -> child`` edge, held compactly.

A dynamic link keeps its samples sorted by stamp in two flat arrays (stamps as int64, the
translation and unit quaternion as 7 float64 per sample: 64 bytes a sample, not the ~800 of a
``Transform`` object each), at most ``max_samples`` of them: a publisher that sends faster than
``max_samples`` per cache window shortens its own window instead of growing the node (the oldest
go first). A static link holds one transform for all times. A lookup builds the ``Transform`` of
the one or two samples it uses.
"""

from __future__ import annotations

import bisect
from array import array

import numpy as np
from transforms3d import quaternions

from sam3_agent_ros.frames.transform import Transform, interpolate

VALUES = 7  # tx, ty, tz, qx, qy, qz, qw
SAMPLE_BYTES = 8 + 8 * VALUES  # a stamp and its values


class LinkHistory:
    """The samples of one edge. ``static``: one transform, for all times.

    Samples leave from the front (the oldest) one by one at the rate they arrive: they are
    dropped by moving ``start`` and the arrays are compacted once half of them is dead, so a
    1 kHz link costs O(1) a sample, not a copy of its whole history."""

    __slots__ = ("parent", "static", "stamps", "values", "fixed", "start")

    def __init__(self, parent: str, static: bool) -> None:
        self.parent = parent
        self.static = static
        self.stamps: array[int] = array("q")
        self.values: array[float] = array("d")
        self.fixed: Transform | None = None  # a static link's transform
        self.start = 0  # the samples before it are dropped

    def __len__(self) -> int:
        return len(self.stamps) - self.start

    @property
    def newest_ns(self) -> int:
        return self.stamps[-1]

    @property
    def oldest_ns(self) -> int:
        return self.stamps[self.start]

    def put(self, stamp_ns: int, values: tuple[float, ...]) -> bool:
        """Store one sample (``values``: translation and unit quaternion x, y, z, w, checked by
        the caller); a static link replaces its transform, and a sample at a stamp already held
        replaces it. True when it adds a sample (the count grew)."""
        if self.static:
            self.stamps, self.values, self.start = array("q", [stamp_ns]), array("d", values), 0
            self.fixed = self._sample(0)
            return False
        stamps = self.stamps
        if not len(self) or stamp_ns > stamps[-1]:  # the usual case: the newest, appended
            stamps.append(stamp_ns)
            self.values.extend(values)
            return True
        index = bisect.bisect_left(stamps, stamp_ns, self.start)
        if stamps[index] == stamp_ns:
            self.values[VALUES * index:VALUES * (index + 1)] = array("d", values)
            return False
        stamps.insert(index, stamp_ns)
        self.values[VALUES * index:VALUES * index] = array("d", values)
        return True

    def drop_oldest(self, count: int) -> int:
        """Drop the ``count`` oldest samples (at least one is always kept); how many went."""
        count = max(0, min(count, len(self) - 1))
        if count:
            self.start += count
            if self.start * 2 >= len(self.stamps):  # half dead: compact (amortised O(1))
                del self.stamps[:self.start]
                del self.values[:VALUES * self.start]
                self.start = 0
        return count

    def drop_before(self, stamp_ns: int) -> int:
        """Drop the samples older than ``stamp_ns`` (the newest is always kept)."""
        if self.stamps[self.start] >= stamp_ns:
            return 0
        return self.drop_oldest(bisect.bisect_left(self.stamps, stamp_ns, self.start)
                                - self.start)

    def transform(self, index: int) -> Transform:
        """The transform of sample ``index`` of the arrays (``start`` and on)."""
        return self.fixed if self.fixed is not None else self._sample(index)

    def _sample(self, index: int) -> Transform:
        v = self.values[VALUES * index:VALUES * (index + 1)]
        x, y, z, w = v[3], v[4], v[5], v[6]
        return Transform._made(np.array(v[:3]), np.array([x, y, z, w]),
                               quaternions.quat2mat((w, x, y, z)))

    def at(self, stamp_ns: int) -> Transform:
        """The transform at ``stamp_ns`` within the samples (the end sample past either end:
        the caller has checked the tolerance), interpolated between the two around it."""
        if self.fixed is not None:
            return self.fixed
        stamps, first = self.stamps, self.start
        if stamp_ns >= stamps[-1]:
            return self.transform(len(stamps) - 1)
        if stamp_ns <= stamps[first]:
            return self.transform(first)
        after = bisect.bisect_left(stamps, stamp_ns, first)
        if stamps[after] == stamp_ns:
            return self.transform(after)
        before = after - 1
        fraction = (stamp_ns - stamps[before]) / (stamps[after] - stamps[before])
        return interpolate(self.transform(before), self.transform(after), fraction)
