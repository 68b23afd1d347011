"""health/target_frame.py + the recorder's target-frame methods (issue 27): OK with the frames
and the last lookup, WARN with the lookup's words when the newest answer or follow update had no
transform; no status without target_frame. Pure (a fake clock)."""

from __future__ import annotations

from sam3_agent_ros.config import PARAMETERS
from sam3_agent_ros.frames import Transform
from sam3_agent_ros.health import recorder as health
from sam3_agent_ros.health.recorder import Level
from sam3_agent_ros.pipeline.target_frame import TargetFrame

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


def test_refused_tf_samples_are_counted_and_warned_about_for_a_minute():
    # Frames over the cap and malformed transforms were dropped without a word (issue 34).
    from sam3_agent_ros.frames import TfBuffer

    clock = Clock()
    buffer = TfBuffer(max_frames=1, monotonic=clock)
    buffer.set_transform("base_link", "camera_link", 0, (0, 0, 0), (0, 0, 0, 1), static=True)
    recorder = health.HealthRecorder(clock)
    recorder.target_frame_started("base_link", buffer.stats)
    recorder.target_frame_looked_up(TargetFrame("base_link", "opt", 1, Transform.identity()))
    quiet = target_status(recorder)
    assert quiet.level == Level.OK and quiet.values["tf_refused"] == "0"
    assert quiet.values["tf_frames"] == "1"
    buffer.set_transform("base_link", "other", 0, (0, 0, 0), (0, 0, 0, 1), static=True)
    buffer.set_transform("base_link", "camera_link", 0, (float("nan"), 0, 0), (0, 0, 0, 1),
                         static=True)
    warn = target_status(recorder)
    assert warn.level == Level.WARN
    assert "TF samples refused: 2" in warn.message and "'camera_link'" in warn.message
    assert warn.values["tf_refused"] == "2"
    clock.now += 61.0  # the counts stay; the warning goes once refusals stop
    later = target_status(recorder)
    assert later.level == Level.OK and later.values["tf_refused"] == "2"
