"""Why a transform is not available (``TransformUnavailable``, what ``TfBuffer.lookup``
raises) and how its messages name frames and stamps: a frame name cut to ``FRAME_CHARS`` and
quoted, a stamp in seconds with nanoseconds."""

from __future__ import annotations

from sam3_agent_ros.core.untrusted_text import for_log

NS = 1_000_000_000
FRAME_CHARS = 80  # how much of one frame name an error repeats


def stamp_text(stamp_ns: int) -> str:
    """A stamp in seconds with nanoseconds, as errors show it: ``12.000000000 s``."""
    sign = "-" if stamp_ns < 0 else ""
    seconds, nanoseconds = divmod(abs(int(stamp_ns)), NS)
    return f"{sign}{seconds}.{nanoseconds:09d} s"


def frame_text(frame: str) -> str:
    return "'" + for_log(frame, FRAME_CHARS) + "'"


class TransformUnavailable(Exception):
    """No transform between two frames at a stamp. ``kind`` is one of ``unknown_frame``,
    ``no_path``, ``loop``, ``vanished``, ``extrapolation_future``, ``extrapolation_past``,
    ``invalid`` (the composed transform is no rigid motion: an overflow);
    ``str()`` is the whole explanation (frames, newest stamp seen, known frames)."""

    def __init__(self, kind: str, message: str, *, target: str, source: str,
                 newest_stamp_ns: int | None, known_frames: list[str]) -> None:
        super().__init__(message)
        self.kind = kind
        self.target = target
        self.source = source
        self.newest_stamp_ns = newest_stamp_ns
        self.known_frames = known_frames
