"""Export to ONNX files + manifest, and ONNX Runtime running them equal to torch, on a tiny
model (seconds); the real SAM 3 export is test_sam3_onnx.py (slow_sam3)."""

from __future__ import annotations

import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from sam3_agent_ros.segmenters.engine_export import PartExport, PeakRss, export_parts  # noqa: E402
from sam3_agent_ros.segmenters.engine_manifest import (  # noqa: E402
    manifest_problem,
    read_manifest,
    weights_hash,
)
from sam3_agent_ros.segmenters.ort_sessions import PartSession  # noqa: E402
from sam3_agent_ros.segmenters.sam3_onnx_parts import PartSpec  # noqa: E402

SPEC = PartSpec("image_encoder", ("image",), ("feature_0", "position_0"))
BROKEN = PartSpec("text_encoder", ("tokens",), ("text_features",))


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torch.nn.GroupNorm(2, 8)

    def forward(self, image):
        features = self.norm(self.conv(image)).relu()
        return features, features.mean(dim=1, keepdim=True) * 2.0


class DataDependent(torch.nn.Module):
    def forward(self, tokens):  # a branch on the data (as sam3's decoder has): refused
        if tokens.sum() > 3:
            return tokens * 2
        return tokens


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(folder, report) of one float32 export of Tiny plus a part that cannot export."""
    folder = tmp_path_factory.mktemp("engine")
    module = Tiny().eval()
    parts = [PartExport(SPEC, module, (torch.rand(1, 3, 16, 16),)),
             PartExport(BROKEN, DataDependent(), (torch.ones(2, 3, dtype=torch.long),))]
    report = export_parts(parts, folder, dtype="float32", weights_sha256=weights_hash(module),
                          kept_in_torch={"grounding": "not tried"})
    return folder, report, module


def test_the_export_writes_files_and_a_manifest_that_fits(exported):
    folder, report, module = exported
    manifest = read_manifest(folder)
    assert manifest == report.manifest
    assert set(manifest["parts"]) == {"image_encoder"}
    part = manifest["parts"]["image_encoder"]
    assert part["inputs"] == [{"name": "image", "shape": [1, 3, 16, 16], "dtype": "float32"}]
    assert [o["name"] for o in part["outputs"]] == ["feature_0", "position_0"]
    assert part["outputs"][0]["shape"] == [1, 8, 16, 16]
    assert set(part["files"]) == {"image_encoder.onnx", "image_encoder.onnx.data"}
    assert manifest["opset"] >= 18 and manifest["dtype"] == "float32"
    assert manifest["versions"]["torch"] and manifest["versions"]["onnxruntime"]
    # the part that does not export stays in torch, with the exporter's reason
    assert "text_encoder" in manifest["in_torch"] and manifest["in_torch"]["grounding"] == \
        "not tried"
    assert manifest["export"]["bytes"] == report.bytes > 0 and report.seconds > 0
    assert report.peak_rss_gib > 0.01
    assert not list(folder.glob(".partial-*"))
    expected = {"image_encoder": (SPEC.inputs, SPEC.outputs)}
    assert manifest_problem(manifest, folder, weights_hash(module), expected) is None
    assert "in 0." in report.summary() or " s:" in report.summary()


def test_onnx_runtime_gives_what_torch_gives_through_io_binding(exported):
    folder, _, module = exported
    session = PartSession(folder / "image_encoder.onnx", "cpu", fp16=False, threads=1)
    assert session.providers == ["CPUExecutionProvider"] and session.device == "cpu"
    image = torch.rand(1, 3, 16, 16)
    got = session.run(image)
    with torch.no_grad():
        want = module(image)
    for g, w in zip(got, want):
        assert isinstance(g, torch.Tensor) and g.shape == w.shape
        np.testing.assert_allclose(g.numpy(), w.numpy(), atol=1e-5)
    with pytest.raises(ValueError, match="1 inputs expected"):
        session.run(image, image)


def test_a_float16_export_keeps_float32_inputs_and_outputs(tmp_path):
    module = Tiny().eval()
    report = export_parts([PartExport(SPEC, module, (torch.rand(1, 3, 16, 16),))], tmp_path,
                          dtype="float16", weights_sha256="f" * 64)
    part = report.manifest["parts"]["image_encoder"]
    assert report.manifest["dtype"] == "float16"
    assert [t["dtype"] for t in part["inputs"] + part["outputs"]] == ["float32"] * 3
    import onnx

    graph = onnx.load(str(tmp_path / "image_encoder.onnx")).graph
    weights = [t for t in graph.initializer if t.dims and np.prod(t.dims) > 8]
    assert weights and all(t.data_type == onnx.TensorProto.FLOAT16 for t in weights)
    session = PartSession(tmp_path / "image_encoder.onnx", "cpu", fp16=True, threads=1)
    image = torch.rand(1, 3, 16, 16)
    with torch.no_grad():
        want = module(image)[0]
    got = session.run(image)[0]
    assert got.dtype == torch.float32
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=2e-2)  # half precision


def test_nothing_exported_is_an_error_and_leaves_no_manifest(tmp_path):
    (tmp_path / "manifest.json").write_text("{}")  # an earlier export here
    with pytest.raises(RuntimeError, match="no part of the model exported"):
        export_parts([PartExport(BROKEN, DataDependent(), (torch.ones(2, 3, dtype=torch.long),))],
                     tmp_path, dtype="float32", weights_sha256="0" * 64)
    assert not (tmp_path / "manifest.json").exists()
    assert not list(tmp_path.glob(".partial-*"))
    with pytest.raises(ValueError, match="bfloat16"):
        export_parts([], tmp_path, dtype="bfloat16", weights_sha256="0" * 64)


def test_peak_rss_sees_a_short_allocation():
    """A 64 MiB block held briefly shows in the peak. The block is a fresh anonymous mapping with
    every page written (numpy's allocator may hand back memory that is already resident, which
    would not raise the RSS at all); it is held until the sampler has seen it or 10 s passed (a
    loaded host may not schedule the sampler for a while)."""
    import mmap
    import time

    size = 64 * 2**20
    with PeakRss(interval_s=0.01) as before:
        pass
    with PeakRss(interval_s=0.01) as peak:
        block = mmap.mmap(-1, size)
        for offset in range(0, size, mmap.PAGESIZE):
            block[offset] = 1
        deadline = time.monotonic() + 10.0
        while peak.gib < before.gib + 0.04 and time.monotonic() < deadline:
            time.sleep(0.02)
        block.close()
    assert peak.gib >= before.gib + 0.04


def test_engine_dir_that_does_not_fit_is_refused_never_used(exported, tmp_path, monkeypatch):
    from sam3_agent_ros.segmenters.sam3_engine import open_engine_dir
    from sam3_agent_ros.segmenters.sam3_files import Sam3LoadError

    folder, report, module = exported
    other = types.SimpleNamespace(weights_sha256="c" * 64)
    exports = []
    with pytest.raises(Sam3LoadError, match="is refused: exported from other weights"):
        open_engine_dir(other, str(folder), "float32", lambda f, d: exports.append(f))
    with pytest.raises(Sam3LoadError, match="export-engine --out"):
        open_engine_dir(other, str(tmp_path / "nothing"), "float32", None)
    assert exports == []  # the user's folder is never exported over


def test_the_cache_is_exported_on_first_use_and_again_when_stale(tmp_path, monkeypatch):
    from sam3_agent_ros.segmenters import sam3_engine

    monkeypatch.setenv("HOME", str(tmp_path))
    loaded = types.SimpleNamespace(weights_sha256="d" * 64)
    calls = []

    def export(folder, dtype):
        calls.append((folder, dtype))
        return types.SimpleNamespace(manifest={"dtype": dtype}, summary=lambda: "done")

    folder, manifest = sam3_engine.open_engine_dir(loaded, "", "float16", export)
    assert folder == tmp_path / ".cache" / "sam3_agent_ros" / "engines" / ("d" * 64)
    assert calls == [(folder, "float16")] and manifest == {"dtype": "float16"}
