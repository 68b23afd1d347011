"""The manifest of an ONNX export: a manifest that does not fit the weights is refused with the
reason (CONTRACTS §13), and the weights' hash that keys it."""

from __future__ import annotations

import json

import pytest

from sam3_agent_ros.segmenters.engine_manifest import (
    ManifestError,
    default_engine_dir,
    export_bytes,
    manifest_problem,
    read_manifest,
    weights_hash,
    write_manifest,
)

HASH = "ab" * 32
EXPECTED = {"image_encoder": (("image",), ("feature_0",)),
            "text_encoder": (("tokens",), ("text_features",))}


def a_manifest(folder, **changes) -> dict:
    (folder / "image_encoder.onnx").write_bytes(b"x" * 10)
    (folder / "image_encoder.onnx.data").write_bytes(b"y" * 30)
    manifest = {"format": 1, "weights_sha256": HASH, "dtype": "float32", "opset": 18,
                "parts": {"image_encoder": {
                    "file": "image_encoder.onnx",
                    "files": {"image_encoder.onnx": 10, "image_encoder.onnx.data": 30},
                    "inputs": [{"name": "image", "shape": [1, 3, 1008, 1008],
                                "dtype": "float32"}],
                    "outputs": [{"name": "feature_0", "shape": [1, 256, 288, 288],
                                 "dtype": "float32"}]}}}
    manifest.update(changes)
    return manifest


def test_a_fitting_manifest_is_accepted(tmp_path):
    manifest = a_manifest(tmp_path)
    assert manifest_problem(manifest, tmp_path, HASH, EXPECTED) is None
    assert export_bytes(manifest) == 40


def test_other_weights_are_refused_with_both_hashes(tmp_path):
    problem = manifest_problem(a_manifest(tmp_path), tmp_path, "cd" * 32, EXPECTED)
    assert problem is not None and "other weights" in problem
    assert "abababababab" in problem and "cdcdcdcdcdcd" in problem


@pytest.mark.parametrize("change, fragment", [
    ({"format": 2}, "format 2"),
    ({"dtype": "bfloat16"}, "dtype 'bfloat16'"),
    ({"parts": {}}, "no exported part"),
])
def test_a_manifest_of_another_kind_is_refused(tmp_path, change, fragment):
    assert fragment in manifest_problem(a_manifest(tmp_path, **change), tmp_path, HASH, EXPECTED)


def test_missing_damaged_or_foreign_files_are_refused(tmp_path):
    manifest = a_manifest(tmp_path)
    (tmp_path / "image_encoder.onnx.data").write_bytes(b"y" * 29)
    assert "29 bytes, the manifest says 30" in manifest_problem(manifest, tmp_path, HASH,
                                                                EXPECTED)
    (tmp_path / "image_encoder.onnx.data").unlink()
    assert "missing" in manifest_problem(manifest, tmp_path, HASH, EXPECTED)
    manifest = a_manifest(tmp_path)
    manifest["parts"]["image_encoder"]["files"] = {"../elsewhere.onnx": 10}
    assert "outside the folder" in manifest_problem(manifest, tmp_path, HASH, EXPECTED)


def test_parts_with_other_inputs_or_unknown_parts_are_refused(tmp_path):
    manifest = a_manifest(tmp_path)
    manifest["parts"]["image_encoder"]["inputs"][0]["name"] = "pixels"
    assert "inputs ['pixels']" in manifest_problem(manifest, tmp_path, HASH, EXPECTED)
    manifest = a_manifest(tmp_path)
    manifest["parts"]["mask_decoder"] = manifest["parts"]["image_encoder"]
    assert "'mask_decoder' is unknown" in manifest_problem(manifest, tmp_path, HASH, EXPECTED)


def test_read_manifest_says_why_it_cannot(tmp_path):
    with pytest.raises(ManifestError, match="does not exist"):
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(ManifestError, match="not JSON"):
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text("[1]")
    with pytest.raises(ManifestError, match="not an object"):
        read_manifest(tmp_path)
    manifest = a_manifest(tmp_path)
    write_manifest(tmp_path, manifest)
    assert read_manifest(tmp_path) == json.loads(json.dumps(manifest))
    assert not list(tmp_path.glob("*.tmp"))


def test_default_engine_dir_is_keyed_by_the_weights_hash(tmp_path):
    assert default_engine_dir(HASH, home=tmp_path) == \
        tmp_path / ".cache" / "sam3_agent_ros" / "engines" / HASH


def test_weights_hash_follows_the_weights_not_the_object():
    torch = pytest.importorskip("torch")

    def model(seed: int):
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))

    first = weights_hash(model(0))
    assert first == weights_hash(model(0)) and len(first) == 64
    assert first != weights_hash(model(1))
    changed = model(0)
    with torch.no_grad():
        changed[1].bias[0] += 1e-6  # one value of one tensor
    assert weights_hash(changed) != first
    assert weights_hash(model(0).to(torch.bfloat16)) != first  # dtypes are part of it
