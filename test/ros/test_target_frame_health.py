"""ros/target_frame_health.py + the recorder's target-frame methods (issue 27): OK with the frames
and the last lookup, WARN with the lookup's words when the newest answer or follow update had no
transform; no status without target_frame. Pure (a fake clock)."""

from __future__ import annotations

from sam3_agent_ros.config import PARAMETERS
from sam3_agent_ros.frames import Transform
from sam3_agent_ros.pipeline.target_frame import TargetFrame
from sam3_agent_ros.ros import health
from sam3_agent_ros.ros.health import Level

PARAMS = {p.name: p.default for p in PARAMETERS}
REASON = ("no transform from 'opt' to 'base_link' at 12.500000000 s: frame 'base_link' is "
          "unknown (never received on /tf or /tf_static); newest stamp seen 12.4 s; "
          "known frames: camera_link, opt")


class Clock:
    now = 50.0

    def __call__(self):
        return self.now


def target_status(recorder):
    found = [s for s in health.statuses(health.snapshot(recorder, PARAMS))
             if s.name == "target frame"]
    return found[0] if found else None


def test_the_target_frame_status_says_ok_then_warns_with_the_lookups_words():
    clock = Clock()
    recorder = health.HealthRecorder(clock)
    assert target_status(recorder) is None  # target_frame unset: no such status
    recorder.target_frame_started("base_link")
    assert target_status(recorder).level == Level.OK
    recorder.target_frame_looked_up(TargetFrame("base_link", "opt", 1, Transform.identity()))
    ok = target_status(recorder)
    assert ok.level == Level.OK and "'opt' -> 'base_link'" in ok.message
    clock.now += 2.0
    recorder.target_frame_looked_up(TargetFrame("base_link", "opt", 1, None, REASON),
                                    "follow update")
    warn = target_status(recorder)
    assert warn.level == Level.WARN
    assert "newest follow update" in warn.message and REASON in warn.message
    assert warn.values["problem"] == REASON
    recorder.target_frame_looked_up(TargetFrame("base_link", "opt", 2, Transform.identity()))
    assert target_status(recorder).level == Level.OK  # the newest one counts
    recorder.target_frame_started("")
    assert target_status(recorder) is None
