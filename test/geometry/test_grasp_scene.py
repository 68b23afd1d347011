"""One answer's grasp scene (geometry.grasp_scene) on the block tabletop: the masks' reaching
boxes, the target's labelled cloud and its grasps in one call, and its reasons."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_demo.block_scene import INTRINSICS, close_pair
from sam3_agent_ros.geometry.box import fit_box
from sam3_agent_ros.geometry.grasp_scene import grasp_scene

NAMES = ("neighbour", "target", "flat")  # the target is the second mask
IDS = (4, 9, 2)


@pytest.fixture(scope="module")
def answer():
    scene = close_pair()
    depth, masks = scene.render()
    ordered = [masks[name] for name in NAMES]
    return scene, depth, ordered, [fit_box(m, depth, INTRINSICS).box for m in ordered]


def test_the_target_its_cloud_and_grasps(answer):
    scene, depth, masks, boxes = answer
    found = grasp_scene(masks, boxes, depth, INTRINSICS, selected=[1], mask_ids=IDS)
    assert found.error is None and found.target == 1
    for name, reaching in zip(NAMES, found.reaching):
        assert reaching.error is None
        assert reaching.box.size[2] == pytest.approx(scene.blocks[name].height, abs=0.01)
    assert set(np.unique(found.cloud.labels).tolist()) == {0, 9}  # only the selected mask
    assert found.grasps.error is None and len(found.grasps.grasps) == 1
    # Without the neighbour's box (nobody segmented it either) its points still block.
    alone = grasp_scene(masks[1:], boxes[1:], depth, INTRINSICS, selected=[0],
                        mask_ids=IDS[1:])
    assert [g.kind for g in alone.grasps.grasps] == ["top"]


def test_the_first_selected_mask_with_a_reaching_box_is_the_target(answer):
    _, depth, masks, boxes = answer
    found = grasp_scene(masks, [boxes[0], None, boxes[2]], depth, INTRINSICS,
                        selected=[1, 2], mask_ids=IDS)
    assert found.target == 2 and found.reaching[1] is None
    assert set(np.unique(found.cloud.labels).tolist()) <= {0, 9, 2}


def test_no_target_says_why(answer):
    _, depth, masks, boxes = answer
    found = grasp_scene(masks, [boxes[0], None, boxes[2]], depth, INTRINSICS, selected=[1],
                        mask_ids=IDS)
    assert found.target is None and found.grasps is None and found.cloud is None
    assert "no box" in found.error
    with pytest.raises(ValueError):
        grasp_scene(masks, boxes[:2], depth, INTRINSICS, selected=[1], mask_ids=IDS)
