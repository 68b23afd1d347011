"""measure_mask: the result JSON's 3D fields of a mask, the point and the box as fitted alone."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_ros.config import Config
from sam3_agent_ros.geometry.box import fit_box
from sam3_agent_ros.geometry.locate import locate_mask
from sam3_agent_ros.geometry.measure import measure_mask
from test.geometry.scenes import CENTRED, render


def test_measure_mask_gives_the_result_json_fields(frames):
    frame = frames["tabletop"]
    cfg = Config().depth
    extras = measure_mask(frame.masks["red_box"], frame.depth_m, frame.intrinsics.K, cfg)
    assert set(extras) == {"position", "position_error", "position_spread_m", "box", "box_error"}
    located = locate_mask(frame.masks["red_box"], frame.depth_m, frame.intrinsics.K)
    assert [extras["position"][a] for a in "xyz"] == pytest.approx(located.position, abs=1e-5)
    box = extras["box"]
    assert set(box) == {"center", "size", "orientation"}
    assert set(box["center"]) == set(box["size"]) == {"x", "y", "z"}
    assert set(box["orientation"]) == {"x", "y", "z", "w"}
    fitted = fit_box(frame.masks["red_box"], frame.depth_m, frame.intrinsics.K).box
    assert box == fitted.to_json()
    assert extras["box_error"] is None and extras["position_error"] is None
    none = measure_mask(np.zeros((480, 640), bool), frame.depth_m, frame.intrinsics.K, cfg)
    assert none == {"position": None, "position_error": "empty mask", "box": None,
                    "box_error": "empty mask"}


def test_a_box_is_still_given_when_no_plane_holds_enough_points():
    """A mask whose valid depth is only a line has a position but no box, with the reason."""
    depth, _ = render(CENTRED)
    line = np.zeros(depth.shape, bool)
    line[240, 100:200] = True
    extras = measure_mask(line, depth, CENTRED, Config.from_params({"depth.erode_px": 0}).depth)
    assert extras["position"] is not None and extras["box"] is None
    assert "do not span a surface" in extras["box_error"]


def test_measure_masks_hands_every_masks_pixels_over_before_any_box_is_fitted(frames,
                                                                             monkeypatch):
    """The target's points are read between the masks' sampling and their box fits (while the
    pixels are in the caches): the sink sees every mask's pixels, the fields are measure_mask's."""
    from sam3_agent_ros.geometry import measure

    frame = frames["tabletop"]
    cfg = Config().depth
    names = ["red_box", "blue_box"]
    journal = []
    fit = measure.fit_sampled_box
    monkeypatch.setattr(measure, "fit_sampled_box",
                        lambda *args: (journal.append("fit"), fit(*args))[1])

    class Sink:
        def take(self, pixels, intrinsics):
            journal.append(("take", [p.count if p is not None else None for p in pixels]))
            self.intrinsics = intrinsics

    sink = Sink()
    masks = [frame.masks[name] for name in names] + [np.zeros((480, 640), bool)]
    found = measure.measure_masks(masks, frame.depth_m, frame.intrinsics.K, cfg, sink)
    (take, counts), *fits = journal
    assert take == "take" and fits == ["fit", "fit"]
    assert counts[0] > 0 and counts[1] > 0 and counts[2] is None  # the empty mask: none
    assert sink.intrinsics.fx == frame.intrinsics.K[0][0]
    monkeypatch.setattr(measure, "fit_sampled_box", fit)
    assert found == [measure_mask(mask, frame.depth_m, frame.intrinsics.K,
                                                      cfg) for mask in masks]
