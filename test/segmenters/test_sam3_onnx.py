"""SAM 3 through ONNX Runtime: same weights, same answer (CONTRACTS §13).

The seeded random-weights model (shared with test_sam3_cpu.py: conftest.py) is exported once
(image and text encoders; the grounding stays in torch) and, on one frame and two prompts,
``segmenter.engine: onnxruntime`` must give the masks, boxes and scores ``torch`` gives: scores
within 1e-3, boxes within 1 px, masks differing in under 0.5 % of their pixels. Slow (export
20-45 s, the ONNX image encoder 35-110 s, a prompt 8-27 s per engine on 2 loaded cores).
"""

from __future__ import annotations

import dataclasses
import json
import time

import numpy as np
import pytest

from sam3_agent_ros.core.ports import Detections
from test.segmenters.sam3_shared import FRAME, H, W, sam3_cpu_config

pytestmark = pytest.mark.slow_sam3
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

PROMPTS = ["red square", "blue rectangle"]


@pytest.fixture(scope="module")
def export(sam3_loaded, tmp_path_factory):
    """(folder, ExportReport) of the one export of the shared model."""
    from sam3_agent_ros.segmenters.sam3_engine import export_engine

    loaded, _ = sam3_loaded
    folder = tmp_path_factory.mktemp("sam3_engine")
    report = export_engine(loaded, folder, "float32")
    return folder, report


@pytest.fixture(scope="module")
def onnx_segmenter(sam3_loaded, export):
    from sam3_agent_ros.segmenters.sam3 import Sam3Segmenter

    loaded, _ = sam3_loaded
    cfg = dataclasses.replace(sam3_cpu_config(), engine="onnxruntime", engine_dir=str(export[0]))
    segmenter = Sam3Segmenter(cfg, loaded=loaded)
    yield segmenter
    segmenter.close()


def gaps(a: Detections, i: int, b: Detections, j: int) -> tuple[float, float, float]:
    """Score difference, largest box-coordinate difference (px), fraction of mask pixels that
    differ, between detection ``i`` of ``a`` and ``j`` of ``b``."""
    return (float(abs(a.scores[i] - b.scores[j])), float(np.abs(a.boxes[i] - b.boxes[j]).max()),
            float(np.mean(a.masks[i] != b.masks[j])))


def match(a: Detections, b: Detections) -> tuple[float, ...]:
    """Pair every detection of ``a`` with one of ``b`` (sorted by score, near-ties may swap) by
    the contract's tolerances; the largest (score, box, mask-pixel) differences of the pairs."""
    assert a.scores.shape == b.scores.shape and len(a.scores) > 0
    unmatched = list(range(len(b.scores)))
    worst = (0.0, 0.0, 0.0)
    for i in range(len(a.scores)):
        found = [(gaps(a, i, b, j), j) for j in unmatched]
        found = [(g, j) for g, j in found if g[0] <= 1e-3 and g[1] <= 1.0 and g[2] < 0.005]
        assert found, f"detection {i} (score {a.scores[i]:.5f}) has no equal"
        best, j = min(found)
        worst = tuple(max(w, g) for w, g in zip(worst, best))
        unmatched.remove(j)
    return worst


def test_the_export_writes_the_encoders_and_says_why_the_grounding_stays(export, sam3_loaded,
                                                                         capsys):
    folder, report = export
    loaded, _ = sam3_loaded
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["weights_sha256"] == loaded.weights_sha256
    assert sorted(manifest["parts"]) == ["image_encoder", "text_encoder"]
    image = manifest["parts"]["image_encoder"]
    assert image["inputs"] == [{"name": "image", "shape": [1, 3, 1008, 1008],
                                "dtype": "float32"}]
    assert [o["shape"] for o in image["outputs"]][:3] == [[1, 256, 288, 288],
                                                         [1, 256, 144, 144], [1, 256, 72, 72]]
    assert "spatial_shapes" in manifest["in_torch"]["grounding"]
    assert report.bytes > 1e9 and report.seconds > 0 and report.peak_rss_gib > 1
    with capsys.disabled():
        print(f"\nSAM 3 ONNX export: {report.summary()}")


def test_onnxruntime_gives_the_answer_torch_gives(sam3, onnx_segmenter, capsys):
    torch_segmenter, _ = sam3
    started = time.perf_counter()
    want = torch_segmenter.segment_many(FRAME, PROMPTS)  # features cached by test_sam3_cpu
    torch_s = time.perf_counter() - started
    got, timings = [], []
    for prompt in PROMPTS:  # one call per prompt: the second reuses the frame's features
        got.append(onnx_segmenter.segment(FRAME, prompt))
        timings.append(dict(onnx_segmenter.last_timings))
    assert onnx_segmenter.backbone_calls == 1, "the second prompt ran the image encoder again"
    assert "backbone_s" in timings[0] and "backbone_s" not in timings[1]
    gaps = [match(w, g) for w, g in zip(want, got)]
    for result in got:
        assert result.masks.shape[1:] == (H, W) and result.untrained_weights
    with capsys.disabled():
        print(f"\nSAM 3 onnxruntime vs torch, {len(got[0].scores)}+{len(got[1].scores)} "
              f"detections: max |score| {max(g[0] for g in gaps):.2e}, max box "
              f"{max(g[1] for g in gaps):.3f} px, max mask pixels {max(g[2] for g in gaps):.4%}; "
              f"ONNX image encoder {timings[0]['backbone_s']:.1f} s, prompts "
              f"{timings[0]['prompt_s']:.1f} / {timings[1]['prompt_s']:.1f} s (torch both "
              f"prompts {torch_s:.1f} s)")


def test_the_result_names_the_engine_and_the_providers_used(onnx_segmenter):
    from sam3_agent_ros.backends import describe_backends
    from sam3_agent_ros.config import Config

    assert onnx_segmenter.engine_info == {
        "segmenter_engine": "onnxruntime", "segmenter_providers": "CPUExecutionProvider",
        "segmenter_onnx_parts": "image_encoder,text_encoder",
        "segmenter_torch_parts": "grounding"}
    backends = describe_backends(Config.from_params({}), onnx_segmenter)
    assert backends["segmenter"] == "sam3" and backends["segmenter_engine"] == "onnxruntime"


def test_an_export_of_other_weights_is_refused_with_the_reason(sam3_loaded, export, tmp_path):
    from sam3_agent_ros.segmenters.sam3 import Sam3Segmenter
    from sam3_agent_ros.segmenters.sam3_files import Sam3LoadError

    loaded, _ = sam3_loaded
    folder, _ = export
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["weights_sha256"] = "0" * 64  # e.g. exported from a fine-tuned checkpoint
    for path in folder.glob("*.onnx*"):
        (tmp_path / path.name).symlink_to(path)
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    cfg = dataclasses.replace(sam3_cpu_config(), engine="onnxruntime", engine_dir=str(tmp_path))
    with pytest.raises(Sam3LoadError, match="refused: exported from other weights"):
        Sam3Segmenter(cfg, loaded=loaded)
    assert loaded.model is not None  # the shared model is left to its owner
