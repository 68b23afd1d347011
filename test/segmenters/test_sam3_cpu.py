"""The real SAM 3 model (840 M parameters, random weights) on CPU through our backend.

Slow (1.5-5 min on 2 cores: build 15-75 s, image backbone 60-140 s, prompts 8-27 s) but run in
CI: it is the only test that proves the backend, the CPU compatibility fixes and feature reuse
work with the installed sam3/torch/torchvision. The model is built once for the session
(conftest.py, shared with test_sam3_onnx.py) and its image backbone runs once: every test
segments the same frame.
"""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_ros.core.ports import Detections
from test.segmenters.sam3_shared import FRAME, H, W

pytestmark = pytest.mark.slow_sam3


def check_result(result, height: int, width: int) -> None:
    count = result.scores.shape[0]
    assert result.masks.dtype == bool and result.masks.shape == (count, height, width)
    assert result.scores.shape == (count,) and np.all(np.isfinite(result.scores))
    assert result.boxes.shape == (count, 4)
    assert np.all(np.diff(result.scores) <= 0), "not sorted by descending score"
    assert np.all((result.scores >= 0) & (result.scores <= 1))
    assert np.all(result.boxes >= 0) and np.all(result.boxes[:, [0, 2]] <= width) \
        and np.all(result.boxes[:, [1, 3]] <= height)
    assert np.all(result.masks.reshape(count, -1).sum(axis=1) >= 1)
    assert isinstance(result, Detections) and result.untrained_weights is True
    # the agent's own check accepts it
    assert len(Detections.coerce(result, height, width).to_masks()) == count


def test_two_prompts_on_one_frame_run_the_image_backbone_once(sam3, capsys):
    segmenter, build_s = sam3
    assert segmenter.untrained_weights and segmenter.device == "cpu"
    assert segmenter.dtype == "float32" and segmenter.engine_info == {"segmenter_engine": "torch"}
    passes_before = segmenter.backbone_calls  # 0 unless another module segmented FRAME first

    first = segmenter.segment(FRAME, "red square")
    first_timings = dict(segmenter.last_timings)
    second = segmenter.segment(FRAME, "blue rectangle")
    second_timings = dict(segmenter.last_timings)

    assert segmenter.backbone_calls == max(passes_before, 1), \
        "the second prompt ran the image backbone again"
    assert ("backbone_s" in first_timings) == (passes_before == 0)
    assert "backbone_s" not in second_timings
    check_result(first, H, W)
    check_result(second, H, W)
    with capsys.disabled():
        print(f"\nSAM 3 CPU (random weights, fp32): load {build_s:.1f} s, "
              f"backbone {first_timings.get('backbone_s', float('nan')):.1f} s, "
              f"first prompt {first_timings['prompt_s']:.1f} s, "
              f"second prompt {second_timings['prompt_s']:.1f} s; "
              f"masks {len(first.scores)} / {len(second.scores)}")


def assert_same_detections(a: Detections, b: Detections) -> None:
    """Equal up to the order of (nearly) tied scores: every detection of ``a`` has one in ``b``
    with the same score, box and mask (a pixel at the mask threshold may flip)."""
    assert a.scores.shape == b.scores.shape and len(a.scores) > 0
    np.testing.assert_allclose(a.scores, b.scores, atol=1e-4)  # both sorted by score
    unmatched = list(range(len(b.scores)))
    for i in range(len(a.scores)):
        found = [j for j in unmatched if abs(a.scores[i] - b.scores[j]) <= 1e-4
                 and np.abs(a.boxes[i] - b.boxes[j]).max() <= 0.05
                 and np.mean(a.masks[i] != b.masks[j]) < 1e-3]
        assert found, f"detection {i} (score {a.scores[i]:.5f}) has no equal"
        unmatched.remove(found[0])


def test_segment_many_is_one_backbone_and_one_batched_grounding_equal_to_single_prompts(
        sam3, capsys):
    """Standing concepts: k phrases in one call give what k single calls give (and what sam3's
    own processor gives for each phrase), with at most one image-backbone pass for them all."""
    segmenter, _ = sam3
    prompts = ["red square", "blue rectangle"]
    passes_before = segmenter.backbone_calls  # 1 after the test above (cached), else 0
    batched = segmenter.segment_many(FRAME, prompts)
    batched_timings = dict(segmenter.last_timings)
    singles = [segmenter.segment(FRAME, prompt) for prompt in prompts]
    assert segmenter.backbone_calls == max(passes_before, 1)
    assert len(batched) == 2
    for many, one in zip(batched, singles):
        check_result(many, H, W)
        assert_same_detections(many, one)
    # sam3's own processor on the same cached features: our post-processing is its own
    state = {"backbone_out": dict(segmenter._state), "original_height": H,
             "original_width": W}
    with segmenter._compute_context():
        upstream = segmenter.loaded.processor.set_text_prompt(prompts[0], state)
    areas = upstream["masks"].reshape(len(upstream["scores"]), -1).sum(dim=1).numpy()
    scores = np.sort(upstream["scores"].float().numpy()[areas >= 1])[::-1]
    np.testing.assert_allclose(batched[0].scores, scores, atol=1e-4)
    with capsys.disabled():
        print(f"\nSAM 3 CPU segment_many, 2 prompts: both prompts "
              f"{batched_timings['prompt_s']:.1f} s")
